// Package pci models a single PCI bus (bus 0) reached through configuration
// mechanism #1 (ports 0xCF8/0xCFC, PCI Local Bus Specification 3.0 section
// 3.2.2.3.2), with type-0 functions that decode one I/O BAR. It knows
// nothing of virtio: transports adapt their devices to Device.
package pci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/govm/govm/iobus"
)

// Type-0 configuration header offsets (PCI 3.0 section 6.1).
const (
	OffVendorID       = 0x00
	OffDeviceID       = 0x02
	OffCommand        = 0x04
	OffStatus         = 0x06
	OffRevision       = 0x08
	OffClass          = 0x09 // prog-if, sub-class, base class (3 bytes)
	OffCacheLineSize  = 0x0C
	OffLatencyTimer   = 0x0D
	OffHeaderType     = 0x0E
	OffBAR0           = 0x10
	OffSubsystemVenID = 0x2C
	OffSubsystemID    = 0x2E
	OffInterruptLine  = 0x3C
	OffInterruptPin   = 0x3D
)

// Command register bits (PCI 3.0 section 6.2.2).
const (
	CommandIO          = 1 << 0  // respond to I/O space accesses
	CommandMemory      = 1 << 1  // respond to memory space accesses
	CommandBusMaster   = 1 << 2  // may issue DMA (always possible here)
	CommandINTxDisable = 1 << 10 // accepted, but govm does not gate INTx on it
)

// barIOSpace is bit 0 of an I/O BAR: hard-wired to 1 (PCI 3.0 section
// 6.2.5.1) so the driver knows the BAR is in I/O space.
const barIOSpace = 1

// headerLen is the part of config space with defined registers; the rest
// (device-specific, 0x40-0xFF) reads as zero and ignores writes, which a
// driver reads as "no capabilities" anyway since the status register does
// not advertise a capability list.
const headerLen = 0x40

// ErrBadHeader is returned by NewFunction for an impossible header.
var ErrBadHeader = errors.New("pci: bad configuration header")

// Header is the identity of a function: what the guest reads to decide
// which driver binds.
type Header struct {
	VendorID, DeviceID uint16
	Revision           uint8
	// Class is the 24-bit class code: base class << 16 | sub-class << 8 |
	// programming interface (e.g. 0x020000 Ethernet, 0x010000 SCSI).
	Class                          uint32
	SubsystemVendorID, SubsystemID uint16
	// IOBARSize is the size in ports of BAR0, an I/O BAR; a power of two
	// from 4 to 0x100 (BARs are naturally aligned, and Bus pre-assigns
	// one 0x100-port window per slot). 0 means the function has no BAR.
	IOBARSize uint16
	// InterruptLine is the IRQ govm routes INTx to (PCI 3.0 section
	// 6.2.4: for the guest's information only). InterruptPin is 0 for
	// none, 1 for INTA#.
	InterruptLine, InterruptPin uint8
}

// Function is a type-0 configuration space with one optional I/O BAR. It
// keeps an image of the header and a mask of writable bits, so every
// access width and alignment behaves the same: read-only bits keep their
// value, and vendor/device IDs can never change. Device adapters embed a
// *Function and so satisfy Device. Safe for concurrent use.
type Function struct {
	bar  iobus.Device
	size uint16

	mu    sync.Mutex
	cfg   [headerLen]byte
	wmask [headerLen]byte
}

// NewFunction builds a function from its identity. bar handles port
// accesses inside BAR0 (offsets relative to the BAR base); it may be nil
// only when h.IOBARSize is 0.
func NewFunction(h Header, bar iobus.Device) (*Function, error) {
	s := h.IOBARSize
	if s != 0 && (s < 4 || s > 0x100 || s&(s-1) != 0) {
		return nil, fmt.Errorf("%w: I/O BAR size %#x not a power of two in [4, 0x100]", ErrBadHeader, s)
	}
	if (s != 0) != (bar != nil) {
		return nil, fmt.Errorf("%w: I/O BAR size %#x with handler %v", ErrBadHeader, s, bar != nil)
	}
	if h.Class > 0xFFFFFF || h.InterruptPin > 4 {
		return nil, fmt.Errorf("%w: class %#x interrupt pin %d", ErrBadHeader, h.Class, h.InterruptPin)
	}
	f := &Function{bar: bar, size: s}
	le := binary.LittleEndian
	le.PutUint16(f.cfg[OffVendorID:], h.VendorID)
	le.PutUint16(f.cfg[OffDeviceID:], h.DeviceID)
	f.cfg[OffRevision] = h.Revision
	f.cfg[OffClass] = byte(h.Class)
	f.cfg[OffClass+1] = byte(h.Class >> 8)
	f.cfg[OffClass+2] = byte(h.Class >> 16)
	f.cfg[OffHeaderType] = 0 // type 0, single function
	le.PutUint16(f.cfg[OffSubsystemVenID:], h.SubsystemVendorID)
	le.PutUint16(f.cfg[OffSubsystemID:], h.SubsystemID)
	f.cfg[OffInterruptLine] = h.InterruptLine
	f.cfg[OffInterruptPin] = h.InterruptPin

	// Writable bits. Status has nothing to clear (no error ever logged),
	// so it is read-only zero.
	le.PutUint16(f.wmask[OffCommand:], CommandIO|CommandMemory|CommandBusMaster|CommandINTxDisable)
	f.wmask[OffCacheLineSize] = 0xFF
	f.wmask[OffLatencyTimer] = 0xFF
	// The interrupt line is a scratch register for software (PCI 3.0
	// section 6.2.4): Linux may write back the IRQ it chose.
	f.wmask[OffInterruptLine] = 0xFF
	if s != 0 {
		// BAR sizing (PCI 3.0 section 6.2.5.1): the low log2(size) bits
		// are hard-wired, so writing all ones reads back ~(size-1)|1.
		le.PutUint32(f.wmask[OffBAR0:], ^uint32(s-1))
		le.PutUint32(f.cfg[OffBAR0:], barIOSpace)
	}
	return f, nil
}

// ConfigRead reads len(data) bytes of configuration space at off. Bytes
// past the header (or past 0xFF) read as zero.
func (f *Function) ConfigRead(off uint8, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range data {
		o := int(off) + i
		if o < headerLen {
			data[i] = f.cfg[o]
		} else {
			data[i] = 0
		}
	}
}

// ConfigWrite writes len(data) bytes at off; only writable bits change.
func (f *Function) ConfigWrite(off uint8, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, v := range data {
		o := int(off) + i
		if o >= headerLen {
			return
		}
		m := f.wmask[o]
		f.cfg[o] = f.cfg[o]&^m | v&m
	}
}

// IOBAR reports where BAR0 currently points and whether the function
// decodes it (I/O enable set in the command register). base may be beyond
// the 64 KiB port space (e.g. while the driver sizes the BAR): the bus then
// maps nothing.
func (f *Function) IOBAR() (base uint32, size uint16, enabled bool) {
	if f.size == 0 {
		return 0, 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	le := binary.LittleEndian
	base = le.Uint32(f.cfg[OffBAR0:]) &^ 3
	enabled = le.Uint16(f.cfg[OffCommand:])&CommandIO != 0
	return base, f.size, enabled
}

// BARIO returns the handler for port accesses inside BAR0, nil if none.
func (f *Function) BARIO() iobus.Device { return f.bar }

// InterruptLine returns the interrupt line register.
func (f *Function) InterruptLine() uint8 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg[OffInterruptLine]
}
