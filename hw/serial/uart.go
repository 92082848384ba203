package serial

import (
	"fmt"
	"io"
	"sync"

	"github.com/govm/govm/irq"
)

// UART is a 16550A on an ISA interrupt line. Its methods are safe for
// concurrent use: the vCPU thread drives Read and Write, the console
// goroutine drives Input, and a timer flushes output.
//
// Transmission is synchronous (a THR write is handed to the output buffer
// at once), so LSR.THRE and LSR.TEMT are always set and the THRE interrupt
// re-arms on every THR write. There is no baud-rate timing: the divisor
// latch is only stored.
//
// The interrupt line is driven as a level: high exactly while an enabled
// interrupt is pending (what IIR would report), and Set is only called when
// that level changes. Unlike a real PC, MCR.OUT2 does not gate the line
// (QEMU does not gate it either); guests that forget OUT2 still get
// interrupts.
type UART struct {
	mu    sync.Mutex
	space *sync.Cond // signalled when the RX FIFO frees space, loopback ends or Close

	line    irq.Line
	level   bool  // last level given to line.Set
	lineErr error // first line.Set failure
	out     *output

	ier, lcr, mcr, scr, fcr byte
	dll, dlm                byte
	lsrErr                  byte // LSR error bits (overrun in loopback)
	msrDelta                byte // MSR bits 3:0, cleared by reading MSR
	thrPending              bool // THRE interrupt condition (PC16550D table 4)

	rx     [FIFOSize]byte
	rxHead int
	rxLen  int
	closed bool
}

// New returns a UART that raises line and writes transmitted bytes to out.
// out is written from the vCPU thread (on newline or when the buffer
// fills) and from a flush timer; a failing out never stops the guest (see
// Err).
func New(line irq.Line, out io.Writer) *UART {
	u := &UART{
		line: line,
		out:  newOutput(out),
		dll:  0x0c, // 9600 baud from the 1.8432 MHz clock, the BIOS default
	}
	u.space = sync.NewCond(&u.mu)
	return u
}

// Read implements iobus.Device. Accesses wider than a byte read the
// register at off for each byte in turn, as an 8-bit ISA device would be
// seen through byte lanes; Linux only does byte accesses.
func (u *UART) Read(off uint16, data []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range data {
		data[i] = u.readReg(off + uint16(i))
	}
	u.updateIRQ()
}

// Write implements iobus.Device.
func (u *UART) Write(off uint16, data []byte) {
	var tx []byte
	u.mu.Lock()
	for i, v := range data {
		if b, ok := u.writeReg(off+uint16(i), v); ok {
			tx = append(tx, b)
		}
	}
	u.updateIRQ()
	u.mu.Unlock()
	// Output happens outside u.mu: a slow stdout then blocks only this
	// vCPU's THR write, never Input or the other registers.
	for _, b := range tx {
		u.out.put(b)
	}
}

func (u *UART) dlab() bool     { return u.lcr&lcrDLAB != 0 }
func (u *UART) loopback() bool { return u.mcr&mcrLoop != 0 }
func (u *UART) fifoOn() bool   { return u.fcr&fcrEnable != 0 }

func (u *UART) readReg(off uint16) byte {
	switch off {
	case regRBR:
		if u.dlab() {
			return u.dll
		}
		return u.popRX()
	case regIER:
		if u.dlab() {
			return u.dlm
		}
		return u.ier
	case regIIR:
		id := u.iir()
		// Reading IIR while it reports THRE is what acknowledges THRE
		// (PC16550D table 4: "reading the IIR (if source of interrupt)").
		if id == iirTHRE {
			u.thrPending = false
		}
		if u.fifoOn() {
			id |= iirFIFO
		}
		return id
	case regLCR:
		return u.lcr
	case regMCR:
		return u.mcr
	case regLSR:
		v := u.lsrErr | lsrTHRE | lsrTEMT
		if u.rxLen > 0 {
			v |= lsrDR
		}
		u.lsrErr = 0 // error bits clear on read
		return v
	case regMSR:
		v := u.modemStatus() | u.msrDelta
		u.msrDelta = 0
		return v
	case regSCR:
		return u.scr
	}
	return 0xff // beyond the 8 registers (wide access past the end)
}

// writeReg applies one register write; it returns a byte to transmit.
func (u *UART) writeReg(off uint16, v byte) (byte, bool) {
	switch off {
	case regRBR: // THR
		if u.dlab() {
			u.dll = v
			return 0, false
		}
		// The holding register empties at once, so THRE is pending
		// again right away: Linux's tx path writes up to a FIFO's worth
		// per interrupt and expects the next THRE interrupt.
		u.thrPending = true
		if u.loopback() {
			u.pushLoop(v)
			return 0, false
		}
		return v, true
	case regIER:
		if u.dlab() {
			u.dlm = v
			return 0, false
		}
		old := u.ier
		u.ier = v & ierMask
		// Enabling THRI while the transmitter is empty raises THRE; the
		// "THRE irq test" in serial8250_do_startup() toggles IER
		// THRI 1->0->1 and wants THRE re-asserted each time, else it
		// sets UART_BUG_THRE and polls with a timer.
		if (old^u.ier)&ierTHRI != 0 {
			u.thrPending = u.ier&ierTHRI != 0
		}
	case regIIR: // FCR
		u.writeFCR(v)
	case regLCR:
		u.lcr = v
	case regMCR:
		before := u.modemStatus()
		wasLoop := u.loopback()
		u.mcr = v & mcrMask
		u.noteModemChange(before, u.modemStatus())
		if wasLoop && !u.loopback() {
			u.space.Broadcast() // Input waits while loopback isolates the receiver
		}
	case regSCR:
		u.scr = v
	}
	// LSR and MSR writes are factory-test only: ignored.
	return 0, false
}

func (u *UART) writeFCR(v byte) {
	wasOn := u.fifoOn()
	if v&fcrEnable == 0 {
		// Clearing FCR0 clears both FIFOs; the other bits only take
		// effect together with FCR0 (PC16550D FCR description).
		u.fcr = 0
		if wasOn {
			u.clearRX()
		}
		return
	}
	u.fcr = v & (fcrEnable | fcrTrigger)
	if !wasOn || v&fcrClearRX != 0 {
		u.clearRX()
	}
	// fcrClearTX: the transmitter is always empty.
}

// modemStatus is MSR bits 7:4. In loopback the modem outputs drive them
// (DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD): autoconfig() sets
// MCR = LOOP|OUT2|RTS and wants MSR & 0xf0 == 0x90.
func (u *UART) modemStatus() byte {
	if !u.loopback() {
		return msrIdle
	}
	var s byte
	if u.mcr&mcrDTR != 0 {
		s |= msrDSR
	}
	if u.mcr&mcrRTS != 0 {
		s |= msrCTS
	}
	if u.mcr&mcrOUT1 != 0 {
		s |= msrRI
	}
	if u.mcr&mcrOUT2 != 0 {
		s |= msrDCD
	}
	return s
}

func (u *UART) noteModemChange(before, after byte) {
	ch := before ^ after
	if ch&msrCTS != 0 {
		u.msrDelta |= msrDCTS
	}
	if ch&msrDSR != 0 {
		u.msrDelta |= msrDDSR
	}
	if ch&msrDCD != 0 {
		u.msrDelta |= msrDDCD
	}
	if before&msrRI != 0 && after&msrRI == 0 { // trailing edge only
		u.msrDelta |= msrTERI
	}
}

// iir is the identification of the highest-priority enabled pending
// interrupt (PC16550D table 4), without the FIFO bits.
func (u *UART) iir() byte {
	switch {
	case u.ier&ierRLSI != 0 && u.lsrErr != 0:
		return iirRLS
	case u.ier&ierRDI != 0 && u.rxLen > 0:
		// With the FIFO on and fewer bytes than the trigger level, a
		// real UART reports a character timeout after four character
		// times; we have no character times, so it is reported at once.
		if u.fifoOn() && u.rxLen < triggerLevels[u.fcr>>6] {
			return iirTimeout
		}
		return iirRDA
	case u.ier&ierTHRI != 0 && u.thrPending:
		return iirTHRE
	case u.ier&ierMSI != 0 && u.msrDelta != 0:
		return iirMSI
	}
	return iirNoInt
}

// pending reports whether an enabled interrupt is pending: the level the
// line must have.
func (u *UART) pending() bool { return u.iir() != iirNoInt }

// updateIRQ drives the line to pending(), calling Set only on a change
// (KVM_IRQ_LINE costs a syscall). It runs under u.mu so that level changes
// reach the irqchip in the order they were decided.
func (u *UART) updateIRQ() {
	want := u.pending()
	if want == u.level {
		return
	}
	if err := u.line.Set(want); err != nil {
		if u.lineErr == nil {
			u.lineErr = fmt.Errorf("serial: set irq line: %w", err)
		}
		return // level unknown: retry on the next change
	}
	u.level = want
}

func (u *UART) popRX() byte {
	if u.rxLen == 0 {
		return 0
	}
	b := u.rx[u.rxHead]
	u.rxHead = (u.rxHead + 1) % FIFOSize
	u.rxLen--
	u.space.Broadcast()
	return b
}

// pushLoop receives a byte the guest transmitted in loopback mode. A full
// FIFO overruns, as on hardware: the guest chose to overflow its own data.
func (u *UART) pushLoop(b byte) {
	if u.rxLen >= u.rxCap() {
		u.lsrErr |= lsrOE
		return
	}
	u.rx[(u.rxHead+u.rxLen)%FIFOSize] = b
	u.rxLen++
}

// rxCap is the receiver depth: the FIFO, or the single holding register
// of an 8250 when FCR0 is clear.
func (u *UART) rxCap() int {
	if u.fifoOn() {
		return FIFOSize
	}
	return 1
}

func (u *UART) clearRX() {
	u.rxHead, u.rxLen = 0, 0
	u.space.Broadcast()
}
