// Package pvpanic is QEMU's pvpanic PCI device (vendor 0x1b36, device
// 0x0011): one byte register through which a guest kernel says it
// panicked. Linux binds drivers/misc/pvpanic/pvpanic-pci.c to it
// (CONFIG_PVPANIC_PCI; a module in Debian): on probe the driver reads the
// register to learn which events the device supports, and its panic
// notifier writes PVPANIC_PANICKED (or PVPANIC_CRASH_LOADED when a kdump
// kernel will take over) with iowrite8.
//
// QEMU puts the register in a 2-byte memory BAR; govm's PCI bus decodes
// I/O BARs only, so here it is a 4-port I/O BAR (the smallest the bus
// takes). Linux maps either kind through pcim_iomap, so the driver cannot
// tell.
package pvpanic

import (
	"fmt"
	"sync/atomic"

	"github.com/govm/govm/pci"
)

// PCI identity (QEMU hw/misc/pvpanic-pci.c; Linux pvpanic-pci.c's ID table).
const (
	VendorID = 0x1b36 // Red Hat
	DeviceID = 0x0011 // PCI_DEVICE_ID_REDHAT_PVPANIC
	// Class is PCI_CLASS_SYSTEM_OTHER, as QEMU declares it.
	Class    = 0x088000
	Revision = 1
	barSize  = 4
)

// Events (include/uapi/misc/pvpanic.h).
const (
	Panicked    = 1 << 0 // the guest kernel panicked
	CrashLoaded = 1 << 1 // the guest panicked and a crash kernel runs next
	// supported is what a read of the register returns: the events this
	// device reports. pvpanic.c sends only events in this mask.
	supported = Panicked | CrashLoaded
)

// Device is the pvpanic PCI function. Safe for concurrent use.
type Device struct {
	*pci.Function
	onEvent func(events uint8)

	panicked atomic.Uint64
	crash    atomic.Uint64
	other    atomic.Uint64
}

// Counters is what the device has seen.
type Counters struct {
	Panicked    uint64 `json:"panicked"`     // writes with PVPANIC_PANICKED
	CrashLoaded uint64 `json:"crash_loaded"` // writes with PVPANIC_CRASH_LOADED
	Unknown     uint64 `json:"unknown"`      // writes with no supported bit
}

// New returns the device. onEvent is called, on the writing vCPU's thread,
// with the supported event bits of every write that carries any; it
// should stop the VM (or note the event) and not block.
func New(onEvent func(events uint8)) (*Device, error) {
	d := &Device{onEvent: onEvent}
	f, err := pci.NewFunction(pci.Header{
		VendorID:  VendorID,
		DeviceID:  DeviceID,
		Revision:  Revision,
		Class:     Class,
		IOBARSize: barSize,
		// QEMU's device has no interrupt: the guest only ever writes.
		InterruptPin: 0,
	}, bar{d})
	if err != nil {
		return nil, fmt.Errorf("pvpanic: %w", err)
	}
	d.Function = f
	return d, nil
}

// Counters returns the event counts so far.
func (d *Device) Counters() Counters {
	return Counters{Panicked: d.panicked.Load(), CrashLoaded: d.crash.Load(), Unknown: d.other.Load()}
}

// bar is the register window.
type bar struct{ d *Device }

// Read returns the supported events in the first byte (what pvpanic.c's
// probe reads) and zeros elsewhere.
func (b bar) Read(off uint16, data []byte) {
	for i := range data {
		data[i] = 0
		if off+uint16(i) == 0 {
			data[i] = supported
		}
	}
}

// Write takes the event byte at offset 0; bytes elsewhere are ignored, as
// are unsupported bits (a guest cannot make govm report an event it did
// not offer).
func (b bar) Write(off uint16, data []byte) {
	if off != 0 || len(data) == 0 {
		return
	}
	ev := data[0] & supported
	if ev == 0 {
		b.d.other.Add(1)
		return
	}
	if ev&Panicked != 0 {
		b.d.panicked.Add(1)
	}
	if ev&CrashLoaded != 0 {
		b.d.crash.Add(1)
	}
	if b.d.onEvent != nil {
		b.d.onEvent(ev)
	}
}
