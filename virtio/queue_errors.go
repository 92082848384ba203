package virtio

import (
	"errors"
	"fmt"
)

// Kinds of guest misbehaviour. A *GuestError wraps exactly one of them, so
// callers and tests can use errors.Is(err, virtio.ErrDescLoop).
var (
	// ErrBadRing: the ring configuration or a ring field is unusable
	// (size, alignment, outside RAM).
	ErrBadRing = errors.New("bad ring")
	// ErrAvailIdx: avail idx moved ahead of the device by more than Size
	// (spec 2.7.6: the driver can offer at most Size buffers at once); in
	// a packed ring, more descriptors available than the ring holds
	// (descriptors the device still owns offered again, spec 2.8.16).
	ErrAvailIdx = errors.New("avail index jumped")
	// ErrDescIndex: a head or next index >= Size (or >= indirect table
	// length); in a packed ring, a buffer ID >= Size, or a chain whose
	// NEXT leads to a descriptor that is not available (spec 2.8.6).
	ErrDescIndex = errors.New("descriptor index out of range")
	// ErrDescLoop: a chain longer than the table, which can only be a loop
	// (spec 2.7.5: chains are bounded by the queue size).
	ErrDescLoop = errors.New("descriptor loop")
	// ErrDescBuffer: a buffer address+length overflows or lies outside RAM.
	ErrDescBuffer = errors.New("descriptor buffer outside guest RAM")
	// ErrDescOrder: a device-readable descriptor after a device-writable
	// one (spec 2.7.4.2).
	ErrDescOrder = errors.New("readable descriptor after writable one")
	// ErrIndirect: an indirect table is malformed or not negotiated (spec
	// 2.7.5.3.1).
	ErrIndirect = errors.New("bad indirect descriptor")
	// ErrHeadInFlight: the available ring offers a head (packed ring: a
	// buffer ID) the device has popped and not yet used (spec 2.7.13:
	// the driver places a buffer into free descriptors; a chain in flight
	// is not free until the device returns it through the used ring,
	// 2.7.8).
	ErrHeadInFlight = errors.New("descriptor head still in flight")
	// ErrChainTooLong: the chain's total length exceeds 2^32-1 bytes
	// (spec 2.7.5: drivers MUST NOT add a chain longer than 2^32 bytes).
	ErrChainTooLong = errors.New("descriptor chain too long")
)

// GuestError is a virtqueue the driver has corrupted. The device stops the
// queue and reports it through Interrupt.DeviceError, which leads to
// DEVICE_NEEDS_RESET (spec 2.1.2); govm keeps running.
type GuestError struct {
	Queue     int    // queue index within the device
	Head      uint16 // chain head (packed ring: buffer ID), when HeadValid
	HeadValid bool   // false for errors found before a head was read
	Err       error  // one of the Err* kinds above
	Reason    string // detail: which index, which address
}

// Error formats as "virtio: queue 0 head 5: descriptor loop: ...".
func (e *GuestError) Error() string {
	msg := e.Err.Error()
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.HeadValid {
		return fmt.Sprintf("virtio: queue %d head %d: %s", e.Queue, e.Head, msg)
	}
	return fmt.Sprintf("virtio: queue %d: %s", e.Queue, msg)
}

// Unwrap returns the kind, for errors.Is.
func (e *GuestError) Unwrap() error { return e.Err }

func (q *Queue) errNoHead(kind error, format string, args ...any) *GuestError {
	return &GuestError{Queue: q.Index, Err: kind, Reason: fmt.Sprintf(format, args...)}
}

func (q *Queue) errHead(head uint16, kind error, format string, args ...any) *GuestError {
	return &GuestError{Queue: q.Index, Head: head, HeadValid: true, Err: kind,
		Reason: fmt.Sprintf(format, args...)}
}
