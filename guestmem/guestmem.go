// Package guestmem is the only way govm touches guest RAM.
//
// Guest physical memory is a set of non-overlapping regions, each backed by a
// host byte slice (the mmap'd RAM in production, make([]byte, n) in tests).
// Every access is bounds-checked against a single region: an address range
// that overflows, straddles two regions or falls outside RAM is rejected with
// ErrOutOfRange, so a hostile guest address can never reach host memory
// outside guest RAM.
package guestmem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// ErrOutOfRange is returned for any access that is not wholly inside one
// region of guest RAM.
var ErrOutOfRange = errors.New("guestmem: address range outside guest RAM")

// Region is one contiguous range of guest physical memory.
type Region struct {
	GPA  uint64 // guest physical address of Host[0]
	Host []byte // backing bytes; len(Host) is the region size
}

// Memory is guest RAM: a sorted list of regions. It is safe for concurrent
// use as long as the region list is not changed after New.
type Memory struct {
	regions []Region
	obs     Observer // nil except in the ring simulator
}

// Observer is told of every typed access made through a Memory: the loads
// and stores of this file and atomic_unsafe.go, ReadAt and WriteAt. Slice
// is not observed: what a caller does with the bytes it returns (a device
// reading or writing a data buffer) is its own business. The ring
// simulator (virtio/ringsim) uses it to see which cache lines the queue
// code touches.
type Observer interface {
	Access(gpa, n uint64, write bool)
}

// Observed returns a view of the same RAM whose typed accesses are reported
// to o. m itself stays unobserved.
func (m *Memory) Observed(o Observer) *Memory {
	return &Memory{regions: m.regions, obs: o}
}

// observe reports an access when an Observer is set.
func (m *Memory) observe(gpa, n uint64, write bool) {
	if m.obs != nil {
		m.obs.Access(gpa, n, write)
	}
}

// New returns guest memory over the given regions. Regions must not overlap.
func New(regions ...Region) (*Memory, error) {
	rs := append([]Region(nil), regions...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].GPA < rs[j].GPA })
	for i, r := range rs {
		if uint64(len(r.Host)) == 0 {
			return nil, fmt.Errorf("guestmem: region %d at %#x is empty", i, r.GPA)
		}
		// Regions are 8-byte aligned in size and address so the word
		// around any aligned 16-bit field is inside the region (see
		// atomic16_unsafe.go).
		if r.GPA%8 != 0 || len(r.Host)%8 != 0 {
			return nil, fmt.Errorf("guestmem: region at %#x (size %#x) is not 8-byte aligned", r.GPA, len(r.Host))
		}
		end := r.GPA + uint64(len(r.Host))
		if end < r.GPA {
			return nil, fmt.Errorf("guestmem: region at %#x wraps the address space", r.GPA)
		}
		if i > 0 {
			prev := rs[i-1]
			if prev.GPA+uint64(len(prev.Host)) > r.GPA {
				return nil, fmt.Errorf("guestmem: regions at %#x and %#x overlap", prev.GPA, r.GPA)
			}
		}
	}
	return &Memory{regions: rs}, nil
}

// Regions returns the regions in ascending GPA order. The caller must not
// modify the returned slice.
func (m *Memory) Regions() []Region { return m.regions }

// Size returns the total bytes of RAM over all regions.
func (m *Memory) Size() uint64 {
	var n uint64
	for _, r := range m.regions {
		n += uint64(len(r.Host))
	}
	return n
}

// Slice returns the host bytes backing guest range [gpa, gpa+n). The range
// must lie inside a single region and must not overflow. n may be 0, in which
// case gpa must still be inside (or at the end of) a region.
func (m *Memory) Slice(gpa, n uint64) ([]byte, error) {
	end := gpa + n
	if end < gpa {
		return nil, fmt.Errorf("%w: %#x+%#x overflows", ErrOutOfRange, gpa, n)
	}
	for i := range m.regions {
		r := &m.regions[i]
		rend := r.GPA + uint64(len(r.Host))
		if gpa >= r.GPA && end <= rend {
			off := gpa - r.GPA
			return r.Host[off : off+n : off+n], nil
		}
	}
	return nil, fmt.Errorf("%w: [%#x, %#x)", ErrOutOfRange, gpa, end)
}

// ReadAt copies len(p) bytes of guest memory at gpa into p.
func (m *Memory) ReadAt(p []byte, gpa uint64) error {
	b, err := m.Slice(gpa, uint64(len(p)))
	if err != nil {
		return err
	}
	m.observe(gpa, uint64(len(p)), false)
	copy(p, b)
	return nil
}

// WriteAt copies p into guest memory at gpa.
func (m *Memory) WriteAt(p []byte, gpa uint64) error {
	b, err := m.Slice(gpa, uint64(len(p)))
	if err != nil {
		return err
	}
	m.observe(gpa, uint64(len(p)), true)
	copy(b, p)
	return nil
}

// Uint16 reads a little-endian uint16 (plain load, no ordering).
func (m *Memory) Uint16(gpa uint64) (uint16, error) {
	b, err := m.Slice(gpa, 2)
	if err != nil {
		return 0, err
	}
	m.observe(gpa, 2, false)
	return binary.LittleEndian.Uint16(b), nil
}

// Uint32 reads a little-endian uint32 (plain load, no ordering).
func (m *Memory) Uint32(gpa uint64) (uint32, error) {
	b, err := m.Slice(gpa, 4)
	if err != nil {
		return 0, err
	}
	m.observe(gpa, 4, false)
	return binary.LittleEndian.Uint32(b), nil
}

// Uint64 reads a little-endian uint64 (plain load, no ordering).
func (m *Memory) Uint64(gpa uint64) (uint64, error) {
	b, err := m.Slice(gpa, 8)
	if err != nil {
		return 0, err
	}
	m.observe(gpa, 8, false)
	return binary.LittleEndian.Uint64(b), nil
}

// PutUint16 writes a little-endian uint16 (plain store, no ordering).
func (m *Memory) PutUint16(gpa uint64, v uint16) error {
	b, err := m.Slice(gpa, 2)
	if err != nil {
		return err
	}
	m.observe(gpa, 2, true)
	binary.LittleEndian.PutUint16(b, v)
	return nil
}

// PutUint32 writes a little-endian uint32 (plain store, no ordering).
func (m *Memory) PutUint32(gpa uint64, v uint32) error {
	b, err := m.Slice(gpa, 4)
	if err != nil {
		return err
	}
	m.observe(gpa, 4, true)
	binary.LittleEndian.PutUint32(b, v)
	return nil
}

// PutUint64 writes a little-endian uint64 (plain store, no ordering).
func (m *Memory) PutUint64(gpa uint64, v uint64) error {
	b, err := m.Slice(gpa, 8)
	if err != nil {
		return err
	}
	m.observe(gpa, 8, true)
	binary.LittleEndian.PutUint64(b, v)
	return nil
}
