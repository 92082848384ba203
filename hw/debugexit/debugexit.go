// Package debugexit is QEMU's isa-debug-exit device: a guest ends the VMM
// with a status of its choosing by writing a value to an I/O port. govm
// uses the same port and status formula as QEMU (iobase 0x501, iosize 2,
// status (v<<1)|1) so that one test harness reads both VMMs alike. The
// status is always odd, so a harness can tell it from a normal exit 0.
package debugexit

import (
	"encoding/binary"
	"sync"
)

// Default registration: port Base, NumPorts ports.
const (
	Base     = 0x501
	NumPorts = 2
)

// Device calls exit once per write. It is safe for concurrent use.
type Device struct {
	mu   sync.Mutex
	exit func(status int)
}

// New returns a device that calls exit(int(v<<1 | 1)) when the guest writes
// v. exit runs on the writing vCPU's thread; it should stop the VM and not
// wait for that vCPU.
func New(exit func(status int)) *Device { return &Device{exit: exit} }

// Status is the exit status a write of v produces.
func Status(v uint32) int { return int(uint64(v)<<1 | 1) }

// Write implements iobus.Device. v is the little-endian value of the whole
// access (1, 2 or 4 bytes), at any offset, as QEMU does.
func (d *Device) Write(_ uint16, data []byte) {
	var buf [4]byte
	copy(buf[:], data)
	v := binary.LittleEndian.Uint32(buf[:])
	d.mu.Lock()
	exit := d.exit
	d.mu.Unlock()
	if exit != nil {
		exit(Status(v))
	}
}

// Read implements iobus.Device. The port is write-only; reads return all
// ones like an unclaimed ISA port.
func (d *Device) Read(_ uint16, data []byte) {
	for i := range data {
		data[i] = 0xff
	}
}
