// Package serial emulates the PC's 8250/16550A UART (COM1) and provides
// inert stand-ins for the COM ports govm does not back, plus the host side
// of the console (stdin in raw mode, Ctrl-A escapes).
//
// The register model follows the National Semiconductor PC16550D data sheet
// (register map table 2, IIR priority table 4). What Linux's 8250 driver
// checks while probing (drivers/tty/serial/8250/8250_port.c: autoconfig(),
// autoconfig_16550a(), the "THRE irq test" in serial8250_do_startup()) is
// noted next to the code it constrains.
package serial

// Register offsets from the port base (PC16550D table 2). Offsets 0 and 1
// alias the divisor latch while LCR.DLAB is set.
const (
	regRBR = 0 // read: receive buffer; write: THR
	regIER = 1 // interrupt enable
	regIIR = 2 // read: interrupt identification; write: FCR
	regLCR = 3 // line control
	regMCR = 4 // modem control
	regLSR = 5 // line status
	regMSR = 6 // modem status
	regSCR = 7 // scratch

	// NumPorts is the size of a UART's port range.
	NumPorts = 8
)

// IER bits.
const (
	ierRDI  = 0x01 // received data available
	ierTHRI = 0x02 // transmitter holding register empty
	ierRLSI = 0x04 // receiver line status
	ierMSI  = 0x08 // modem status
	// Only the low nibble exists on a 16550A. Linux's autoconfig() writes
	// 0x0f and expects 0x0f back, and autoconfig_16550a() sets bit 6 (the
	// XScale UUE bit) and must read it back as 0.
	ierMask = 0x0f
)

// IIR values (PC16550D table 4), highest priority first.
const (
	iirNoInt   = 0x01
	iirRLS     = 0x06
	iirRDA     = 0x04
	iirTimeout = 0x0c
	iirTHRE    = 0x02
	iirMSI     = 0x00
	iirID      = 0x0e
	// iirFIFO reads as 0xc0 while FCR bit 0 is set: autoconfig() reads
	// IIR>>6 == 3 after enabling the FIFO and concludes "16550A".
	iirFIFO = 0xc0
)

// FCR bits.
const (
	fcrEnable  = 0x01
	fcrClearRX = 0x02
	fcrClearTX = 0x04
	fcrTrigger = 0xc0 // RX trigger level: 1, 4, 8, 14 bytes
)

// LCR bits.
const lcrDLAB = 0x80

// MCR bits.
const (
	mcrDTR  = 0x01
	mcrRTS  = 0x02
	mcrOUT1 = 0x04
	mcrOUT2 = 0x08
	mcrLoop = 0x10
	mcrMask = 0x1f
)

// LSR bits.
const (
	lsrDR   = 0x01 // data ready
	lsrOE   = 0x02 // overrun error
	lsrTHRE = 0x20 // transmitter holding register empty
	lsrTEMT = 0x40 // transmitter empty
	// lsrErrors are the bits that raise the receiver line status
	// interrupt; reading LSR clears them.
	lsrErrors = 0x1e
)

// MSR bits.
const (
	msrDCTS = 0x01
	msrDDSR = 0x02
	msrTERI = 0x04
	msrDDCD = 0x08
	msrCTS  = 0x10
	msrDSR  = 0x20
	msrRI   = 0x40
	msrDCD  = 0x80
	// msrIdle is what a UART with a modem that is always ready shows
	// outside loopback: carrier, data set ready, clear to send. Linux's
	// console waits for CTS only with UPF_CONS_FLOW, but getty-style
	// users may look at DCD.
	msrIdle = msrDCD | msrDSR | msrCTS
)

// triggerLevels maps FCR bits 7:6 to the RX FIFO interrupt threshold.
var triggerLevels = [4]int{1, 4, 8, 14}

// FIFOSize is the RX FIFO depth. A real 16550A has 16 bytes; we keep a
// larger buffer because stdin arrives in bursts and Input applies
// back-pressure instead of dropping.
const FIFOSize = 64
