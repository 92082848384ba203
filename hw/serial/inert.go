package serial

// Inert stands in for a COM port govm does not back (COM2-4). It reads as
// all ones and ignores writes, exactly like an empty ISA slot, and is
// registered only so the ports are documented as taken.
//
// Why all ones rather than a silent UART: Linux's autoconfig() first
// writes 0 to IER and expects to read 0 back; 0xff fails that "IER test"
// after three accesses, the port stays PORT_UNKNOWN and nothing is printed.
// A working UART would cost the whole probe and THRE test per port (each
// access a VM exit) and would give userspace ttyS1-3 that lead nowhere.
type Inert struct{}

// NewInert returns a device for an absent COM port.
func NewInert() *Inert { return &Inert{} }

// Read implements iobus.Device: every register reads 0xff.
func (*Inert) Read(_ uint16, data []byte) {
	for i := range data {
		data[i] = 0xff
	}
}

// Write implements iobus.Device: writes are dropped.
func (*Inert) Write(uint16, []byte) {}
