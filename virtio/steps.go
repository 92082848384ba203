package virtio

import "github.com/govm/govm/guestmem"

// Steps drives the device side of one virtqueue by hand, split or packed:
// the calls a Loop makes (Pop, the used ring, the notification decisions),
// exported for code that runs a ring without a Loop: the ring simulator
// (virtio/ringsim) and the ring benchmark. Devices use a Loop, which also
// owns the ordering of these calls; a caller of Steps owns it instead:
// DisableNotify before draining, NeedsInterrupt after a batch of used
// buffers, EnableNotify (and drain again if it says so) before waiting.
type Steps struct{ r ringSteps }

// ringSteps is what Steps needs of a ring.
type ringSteps interface {
	Pop(mem *guestmem.Memory) (*Chain, error)
	AddUsedBatch(mem *guestmem.Memory, elems []UsedElem) error
	needsInterrupt(mem *guestmem.Memory) (bool, error)
	disableNotify(mem *guestmem.Memory) error
	enableNotify(mem *guestmem.Memory) (bool, error)
	pending(mem *guestmem.Memory) (bool, error)
}

// SplitSteps returns the steps of a split queue.
func SplitSteps(q *Queue) Steps { return Steps{q} }

// Pop takes the next available chain (nil when there is none).
func (s Steps) Pop(mem *guestmem.Memory) (*Chain, error) { return s.r.Pop(mem) }

// AddUsedBatch returns chains to the driver, published together.
func (s Steps) AddUsedBatch(mem *guestmem.Memory, elems []UsedElem) error {
	return s.r.AddUsedBatch(mem, elems)
}

// NeedsInterrupt reports whether the driver wants an interrupt for the
// buffers used since the last call (spec 2.7.7, 2.8.10).
func (s Steps) NeedsInterrupt(mem *guestmem.Memory) (bool, error) { return s.r.needsInterrupt(mem) }

// DisableNotify asks the driver not to kick (spec 2.7.10, 2.8.10).
func (s Steps) DisableNotify(mem *guestmem.Memory) error { return s.r.disableNotify(mem) }

// EnableNotify asks for kicks again and reports whether buffers arrived
// meanwhile; when it says true, drain before waiting.
func (s Steps) EnableNotify(mem *guestmem.Memory) (bool, error) { return s.r.enableNotify(mem) }

// Pending reports whether the driver has made buffers available.
func (s Steps) Pending(mem *guestmem.Memory) (bool, error) { return s.r.pending(mem) }

// PackedSteps returns the steps of a packed queue.
func PackedSteps(q *PackedQueue) Steps { return Steps{q} }
