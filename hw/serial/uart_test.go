package serial

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/internal/syncbuf"
)

// fakeLine records every level the UART drives.
type fakeLine struct {
	mu     sync.Mutex
	level  bool
	sets   []bool
	failOn int // fail the n-th Set (1-based); 0 never
}

func (l *fakeLine) Set(level bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failOn != 0 && len(l.sets)+1 == l.failOn {
		l.failOn = 0
		return errors.New("fake failure")
	}
	l.sets = append(l.sets, level)
	l.level = level
	return nil
}

func (l *fakeLine) get() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.level
}

func newTestUART() (*UART, *fakeLine, *syncbuf.Buffer) {
	l := &fakeLine{}
	out := &syncbuf.Buffer{}
	return New(l, out), l, out
}

// port is what linuxProbe drives: a UART or an Inert.
type port interface {
	Read(off uint16, data []byte)
	Write(off uint16, data []byte)
}

func in(u port, off uint16) byte {
	var b [1]byte
	u.Read(off, b[:])
	return b[0]
}

func out(u port, off uint16, v byte) { u.Write(off, []byte{v}) }

// checkLevel asserts the invariant: the line is high exactly while an
// enabled interrupt is pending, and every Set changed the level.
func checkLevel(t testing.TB, u *UART, l *fakeLine) {
	t.Helper()
	u.mu.Lock()
	want := u.pending()
	u.mu.Unlock()
	if got := l.get(); got != want {
		t.Fatalf("line level %v, pending %v", got, want)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := false
	for i, s := range l.sets {
		if s == prev {
			t.Fatalf("Set #%d repeated level %v: %v", i, s, l.sets)
		}
		prev = s
	}
}

// linuxProbe follows the register accesses of Linux's autoconfig() and
// autoconfig_16550a() (drivers/tty/serial/8250/8250_port.c) and returns
// the type they would conclude.
func linuxProbe(u port) string {
	// IER scratch test.
	save := in(u, regIER)
	out(u, regIER, 0)
	s2 := in(u, regIER) & 0x0f
	out(u, regIER, 0x0f)
	s3 := in(u, regIER) & 0x0f
	out(u, regIER, save)
	if s2 != 0 || s3 != 0x0f {
		return "none (IER test)"
	}
	// Loopback test.
	saveMCR := in(u, regMCR)
	saveLCR := in(u, regLCR)
	out(u, regMCR, mcrLoop|0x0a)
	st := in(u, regMSR) & 0xf0
	out(u, regMCR, saveMCR)
	if st != 0x90 {
		return "none (loopback test)"
	}
	// EFR probe writes, then the FIFO type test.
	out(u, regLCR, 0xbf)
	out(u, regIIR, 0) // EFR
	out(u, regLCR, 0)
	out(u, regIIR, fcrEnable)
	switch in(u, regIIR) >> 6 {
	case 0:
		return "8250"
	case 1:
		return "unknown"
	case 2:
		return "16550"
	}
	// autoconfig_16550a: EFR at LCR 0x80 and 0xbf must read non-zero.
	out(u, regLCR, 0x80)
	if in(u, regIIR) == 0 {
		return "16650"
	}
	out(u, regLCR, 0xbf)
	if in(u, regIIR) == 0 {
		return "16650V2"
	}
	// National SuperIO: EXCR1 must not follow MCR.LOOP.
	out(u, regLCR, 0)
	m1 := in(u, regMCR)
	out(u, regLCR, 0xe0)
	x := in(u, regIIR)
	if (x^m1)&mcrLoop == 0 {
		out(u, regLCR, 0)
		out(u, regMCR, m1^mcrLoop)
		out(u, regLCR, 0xe0)
		x = in(u, regIIR)
		out(u, regLCR, 0)
		out(u, regMCR, m1)
		if (x^m1)&mcrLoop != 0 {
			return "NS16550A"
		}
	}
	// TI16750: IIR bit 5 with the 64-byte FIFO bit.
	out(u, regLCR, 0)
	out(u, regIIR, fcrEnable|0x20)
	a := in(u, regIIR) >> 5
	out(u, regIIR, fcrEnable)
	out(u, regLCR, 0x80)
	out(u, regIIR, fcrEnable|0x20)
	b := in(u, regIIR) >> 5
	out(u, regIIR, fcrEnable)
	out(u, regLCR, 0)
	if a == 6 && b == 7 {
		return "16750"
	}
	// XScale UUE bit.
	ier := in(u, regIER)
	out(u, regIER, ier&^0x40)
	if in(u, regIER)&0x40 == 0 {
		out(u, regIER, ier|0x40)
		if in(u, regIER)&0x40 != 0 {
			return "XScale"
		}
	}
	out(u, regIER, ier)
	_ = saveLCR
	return "16550A"
}

func TestLinuxProbeFinds16550A(t *testing.T) {
	u, l, _ := newTestUART()
	if got := linuxProbe(u); got != "16550A" {
		t.Fatalf("probe found %q, want 16550A", got)
	}
	checkLevel(t, u, l)
	// The probe leaves no interrupt enabled.
	if l.get() {
		t.Fatal("line high after probe")
	}
}

func TestInertFailsProbe(t *testing.T) {
	if got := linuxProbe(NewInert()); got != "none (IER test)" {
		t.Fatalf("probe of an inert port found %q", got)
	}
}

// TestTHREIrqTest replays the "THRE irq test" of serial8250_do_startup():
// a working UART re-asserts THRE after IER THRI is toggled 1->0->1.
func TestTHREIrqTest(t *testing.T) {
	u, l, _ := newTestUART()
	out(u, regIIR, fcrEnable|fcrClearRX|fcrClearTX)
	out(u, regIER, ierTHRI)
	if !l.get() {
		t.Fatal("line low after enabling THRI with THR empty")
	}
	iir1 := in(u, regIIR)
	if iir1 != iirFIFO|iirTHRE {
		t.Fatalf("iir1 = %#x, want %#x", iir1, iirFIFO|iirTHRE)
	}
	if l.get() {
		t.Fatal("line still high after IIR read acknowledged THRE")
	}
	if v := in(u, regIIR); v != iirFIFO|iirNoInt {
		t.Fatalf("second IIR read %#x, want no interrupt", v)
	}
	out(u, regIER, 0)
	out(u, regIER, ierTHRI)
	iir := in(u, regIIR)
	out(u, regIER, 0)
	if iir&iirNoInt != 0 {
		t.Fatalf("THRE not re-asserted: iir %#x (Linux would set UART_BUG_THRE)", iir)
	}
	checkLevel(t, u, l)
	if want := []bool{true, false, true, false}; !equalBools(l.sets, want) {
		t.Fatalf("levels %v, want %v", l.sets, want)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTransmitInterruptLoop is Linux's tx path: THRE interrupt, IIR read,
// a burst of THR writes, and THRI off when the buffer is empty.
func TestTransmitInterruptLoop(t *testing.T) {
	u, l, o := newTestUART()
	out(u, regIIR, fcrEnable)
	out(u, regIER, ierTHRI)
	msg := "hello, world\n"
	for i := 0; i < len(msg); i += 4 {
		if !l.get() {
			t.Fatalf("no THRE interrupt before chunk %d", i)
		}
		if v := in(u, regIIR) & iirID; v != iirTHRE {
			t.Fatalf("IIR id %#x, want THRE", v)
		}
		if v := in(u, regLSR); v&(lsrTHRE|lsrTEMT) != lsrTHRE|lsrTEMT {
			t.Fatalf("LSR %#x lacks THRE|TEMT", v)
		}
		for j := i; j < i+4 && j < len(msg); j++ {
			out(u, regRBR, msg[j])
		}
	}
	out(u, regIER, 0)
	if l.get() {
		t.Fatal("line high with IER 0")
	}
	if got := o.String(); got != msg {
		t.Fatalf("output %q, want %q", got, msg)
	}
	checkLevel(t, u, l)
}

func TestReceive(t *testing.T) {
	tests := []struct {
		name    string
		fcr     byte
		input   string
		wantIIR byte
	}{
		{"fifo trigger 1", fcrEnable, "ab", iirFIFO | iirRDA},
		{"fifo trigger 4, below", fcrEnable | 0x40, "ab", iirFIFO | iirTimeout},
		{"fifo trigger 4, reached", fcrEnable | 0x40, "abcd", iirFIFO | iirRDA},
		{"no fifo", 0, "a", iirRDA},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, l, _ := newTestUART()
			out(u, regIIR, tc.fcr)
			out(u, regIER, ierRDI)
			if l.get() {
				t.Fatal("line high before input")
			}
			if n := u.Input([]byte(tc.input)); n != len(tc.input) {
				t.Fatalf("Input took %d", n)
			}
			if !l.get() {
				t.Fatal("RX data did not raise the line")
			}
			if v := in(u, regIIR); v != tc.wantIIR {
				t.Fatalf("IIR %#x, want %#x", v, tc.wantIIR)
			}
			var got []byte
			for in(u, regLSR)&lsrDR != 0 {
				got = append(got, in(u, regRBR))
			}
			if string(got) != tc.input {
				t.Fatalf("read %q, want %q", got, tc.input)
			}
			if l.get() {
				t.Fatal("line high with FIFO drained")
			}
			checkLevel(t, u, l)
		})
	}
}

func TestInputBackPressure(t *testing.T) {
	u, l, _ := newTestUART()
	out(u, regIIR, fcrEnable)
	msg := bytes.Repeat([]byte("0123456789"), 30) // 300 > FIFOSize
	done := make(chan int)
	go func() { done <- u.Input(msg) }()
	var got []byte
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(msg) && time.Now().Before(deadline) {
		if in(u, regLSR)&lsrDR != 0 {
			got = append(got, in(u, regRBR))
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if n := <-done; n != len(msg) {
		t.Fatalf("Input returned %d, want %d", n, len(msg))
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("received %d bytes, mismatch", len(got))
	}
	checkLevel(t, u, l)
}

func TestCloseUnblocksInput(t *testing.T) {
	u, _, _ := newTestUART()
	out(u, regIIR, fcrEnable)
	done := make(chan int)
	go func() { done <- u.Input(make([]byte, FIFOSize+10)) }()
	time.Sleep(20 * time.Millisecond)
	u.Close()
	select {
	case n := <-done:
		if n != FIFOSize {
			t.Fatalf("Input took %d before Close, want %d", n, FIFOSize)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Input still blocked after Close")
	}
	if n := u.Input([]byte("x")); n != 0 {
		t.Fatalf("Input after Close took %d", n)
	}
}

func TestLoopback(t *testing.T) {
	u, l, o := newTestUART()
	out(u, regIIR, fcrEnable)
	out(u, regIER, ierRDI|ierMSI)
	out(u, regMCR, mcrLoop)
	in(u, regMSR) // clear the deltas from entering loopback
	out(u, regRBR, 'z')
	if !l.get() {
		t.Fatal("looped-back byte did not raise RDA")
	}
	if v := in(u, regRBR); v != 'z' {
		t.Fatalf("RBR %q, want 'z'", v)
	}
	out(u, regMCR, mcrLoop|mcrDTR|mcrRTS|mcrOUT1|mcrOUT2)
	if v := in(u, regIIR) & iirID; v != iirMSI {
		t.Fatalf("IIR id %#x, want modem status", v)
	}
	if v := in(u, regMSR); v != msrDSR|msrCTS|msrRI|msrDCD|msrDCTS|msrDDSR|msrDDCD {
		t.Fatalf("MSR %#x", v)
	}
	out(u, regMCR, mcrLoop) // RI falls: trailing edge
	if v := in(u, regMSR); v&msrTERI == 0 || v&0xf0 != 0 {
		t.Fatalf("MSR after RI fall %#x", v)
	}
	// Overrun: more than the FIFO holds.
	for i := 0; i <= FIFOSize; i++ {
		out(u, regRBR, byte(i))
	}
	out(u, regIER, ierRLSI)
	if v := in(u, regIIR) & iirID; v != iirRLS {
		t.Fatalf("IIR id %#x, want RLS", v)
	}
	if v := in(u, regLSR); v&lsrOE == 0 {
		t.Fatalf("LSR %#x lacks OE", v)
	}
	if v := in(u, regLSR); v&lsrOE != 0 {
		t.Fatal("OE not cleared by LSR read")
	}
	out(u, regMCR, 0)
	if v := in(u, regMSR) & 0xf0; v != msrIdle {
		t.Fatalf("MSR outside loopback %#x, want %#x", v, msrIdle)
	}
	if o.String() != "" {
		t.Fatalf("loopback leaked output %q", o.String())
	}
	checkLevel(t, u, l)
}

func TestIIRPriority(t *testing.T) {
	u, l, _ := newTestUART()
	out(u, regIIR, fcrEnable)
	out(u, regMCR, mcrLoop)
	out(u, regRBR, 1) // RX data, THRE pending
	for i := 0; i < FIFOSize; i++ {
		out(u, regRBR, 2) // overrun
	}
	out(u, regMCR, mcrLoop|mcrRTS) // modem delta
	out(u, regIER, ierMask)
	want := []byte{iirRLS, iirRDA, iirTHRE, iirMSI, iirNoInt}
	for i, w := range want {
		got := in(u, regIIR) & 0x0f
		if got != w {
			t.Fatalf("step %d: IIR %#x, want %#x", i, got, w)
		}
		switch w { // acknowledge the reported source as a driver would
		case iirRLS:
			in(u, regLSR)
		case iirRDA:
			for in(u, regLSR)&lsrDR != 0 {
				in(u, regRBR)
			}
		case iirMSI:
			in(u, regMSR)
		}
	}
	checkLevel(t, u, l)
	if l.get() {
		t.Fatal("line high after all sources acknowledged")
	}
}

func TestDivisorLatchAndScratch(t *testing.T) {
	u, _, o := newTestUART()
	out(u, regLCR, lcrDLAB|0x03)
	out(u, regRBR, 0x01)
	out(u, regIER, 0x02)
	if dll, dlm := in(u, regRBR), in(u, regIER); dll != 0x01 || dlm != 0x02 {
		t.Fatalf("divisor %#x/%#x", dll, dlm)
	}
	out(u, regLCR, 0x03)
	if v := in(u, regIER); v != 0 {
		t.Fatalf("IER %#x after DLAB writes, want 0", v)
	}
	if v := in(u, regLCR); v != 0x03 {
		t.Fatalf("LCR %#x", v)
	}
	out(u, regSCR, 0xa5)
	if v := in(u, regSCR); v != 0xa5 {
		t.Fatalf("SCR %#x", v)
	}
	if o.String() != "" {
		t.Fatalf("DLL write was transmitted: %q", o.String())
	}
}
