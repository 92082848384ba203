// Package iobus routes x86 port I/O (KVM_EXIT_IO) to device handlers.
package iobus

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Device handles accesses to a port range it was registered for. off is the
// offset from the registered base; len(data) is the access size (1, 2 or 4).
// Read fills data; Write consumes it. Handlers must not retain data.
type Device interface {
	Read(off uint16, data []byte)
	Write(off uint16, data []byte)
}

// ErrOverlap is returned when a registration overlaps an existing one.
var ErrOverlap = errors.New("iobus: port range overlaps an existing device")

type entry struct {
	base, len uint16
	dev       Device
}

// Bus is a set of port ranges. It is safe for concurrent use: PCI BAR
// reprogramming may move ranges while other vCPUs dispatch.
type Bus struct {
	mu      sync.RWMutex
	entries []entry // sorted by base
}

// Register maps ports [base, base+n) to dev.
func (b *Bus) Register(base, n uint16, dev Device) error {
	if n == 0 || uint32(base)+uint32(n) > 0x10000 {
		return fmt.Errorf("iobus: bad range %#x+%#x", base, n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.entries {
		if uint32(base) < uint32(e.base)+uint32(e.len) && uint32(e.base) < uint32(base)+uint32(n) {
			return fmt.Errorf("%w: %#x+%#x vs %#x+%#x", ErrOverlap, base, n, e.base, e.len)
		}
	}
	b.entries = append(b.entries, entry{base, n, dev})
	sort.Slice(b.entries, func(i, j int) bool { return b.entries[i].base < b.entries[j].base })
	return nil
}

// Unregister removes the range that starts at base, if any.
func (b *Bus) Unregister(base uint16) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, e := range b.entries {
		if e.base == base {
			b.entries = append(b.entries[:i], b.entries[i+1:]...)
			return
		}
	}
}

func (b *Bus) find(port uint16) (entry, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	i := sort.Search(len(b.entries), func(i int) bool {
		return uint32(b.entries[i].base)+uint32(b.entries[i].len) > uint32(port)
	})
	if i < len(b.entries) && b.entries[i].base <= port {
		return b.entries[i], true
	}
	return entry{}, false
}

// Read dispatches an IN. Unclaimed ports read as all ones, like an ISA bus
// with nothing driving it. It reports whether a device claimed the port.
func (b *Bus) Read(port uint16, data []byte) bool {
	e, ok := b.find(port)
	if !ok {
		for i := range data {
			data[i] = 0xff
		}
		return false
	}
	e.dev.Read(port-e.base, data)
	return true
}

// Write dispatches an OUT. Writes to unclaimed ports are dropped. It reports
// whether a device claimed the port.
func (b *Bus) Write(port uint16, data []byte) bool {
	e, ok := b.find(port)
	if !ok {
		return false
	}
	e.dev.Write(port-e.base, data)
	return true
}
