// Package portsink is a device that absorbs I/O: for port 0x80, the POST
// diagnostic port that Linux writes for I/O delays (outb to 0x80 after each
// legacy PIC/PIT access unless io_delay=none). Claiming it keeps those
// writes from being logged as accesses to unknown ports.
//
// Every write still costs a VM exit; a VMM can avoid that by registering
// the port as coalesced PIO (KVM_REGISTER_COALESCED_MMIO with pio = 1),
// since the values are never used.
package portsink

// POSTPort is the port this device is meant for.
const POSTPort = 0x80

// Sink drops writes and reads as a constant.
type Sink struct {
	fill byte
}

// New returns a sink whose reads return fill (0xff: what a port with
// nothing driving it shows).
func New(fill byte) *Sink { return &Sink{fill: fill} }

// Read implements iobus.Device.
func (s *Sink) Read(_ uint16, data []byte) {
	for i := range data {
		data[i] = s.fill
	}
}

// Write implements iobus.Device: the value is discarded.
func (*Sink) Write(uint16, []byte) {}
