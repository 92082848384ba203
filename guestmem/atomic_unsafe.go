package guestmem

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// The virtqueue index fields (avail->idx, used->idx, used_event, avail_event)
// are shared with a guest CPU running concurrently, so they are read and
// written with sync/atomic. Go's atomics are sequentially consistent, which on
// x86 gives the ordering the virtio spec (2.7.13) asks of the device: an
// atomic store is a release and a full barrier, an atomic load an acquire.
//
// unsafe: sync/atomic works on *uint16/*uint32 only; we form that pointer to
// an aligned location inside a bounds-checked guest RAM slice.

// LoadUint16 atomically loads the little-endian uint16 at gpa (x86 is
// little-endian, so the host representation is the guest's). gpa must be
// 2-byte aligned: the hardware only guarantees atomicity for aligned access.
func (m *Memory) LoadUint16(gpa uint64) (uint16, error) {
	p, err := m.ptr(gpa, 2)
	if err != nil {
		return 0, err
	}
	m.observe(gpa, 2, false)
	// sync/atomic has no 16-bit load; an aligned 32-bit load that contains
	// the field would read past it at the end of RAM, so use the aligned
	// word load of the containing 2 bytes through a uint32 only when safe.
	return atomicLoad16((*uint16)(p)), nil
}

// StoreUint16 atomically stores v at gpa (2-byte aligned).
func (m *Memory) StoreUint16(gpa uint64, v uint16) error {
	p, err := m.ptr(gpa, 2)
	if err != nil {
		return err
	}
	m.observe(gpa, 2, true)
	atomicStore16((*uint16)(p), v)
	return nil
}

// LoadUint32 atomically loads the uint32 at gpa (4-byte aligned).
func (m *Memory) LoadUint32(gpa uint64) (uint32, error) {
	p, err := m.ptr(gpa, 4)
	if err != nil {
		return 0, err
	}
	m.observe(gpa, 4, false)
	return atomic.LoadUint32((*uint32)(p)), nil
}

// StoreUint32 atomically stores v at gpa (4-byte aligned).
func (m *Memory) StoreUint32(gpa uint64, v uint32) error {
	p, err := m.ptr(gpa, 4)
	if err != nil {
		return err
	}
	m.observe(gpa, 4, true)
	atomic.StoreUint32((*uint32)(p), v)
	return nil
}

// Fence is a full memory barrier (the device-side mb() of virtio_ring.c). It
// orders every earlier load and store before every later one.
func Fence() {
	var x uint32
	// unsafe: none; an atomic read-modify-write is a full barrier on all Go
	// platforms (LOCK XADD on amd64).
	atomic.AddUint32(&x, 1)
}

func (m *Memory) ptr(gpa, size uint64) (unsafe.Pointer, error) {
	if gpa%size != 0 {
		return nil, fmt.Errorf("%w: %#x not %d-byte aligned", ErrOutOfRange, gpa, size)
	}
	b, err := m.Slice(gpa, size)
	if err != nil {
		return nil, err
	}
	return unsafe.Pointer(&b[0]), nil
}
