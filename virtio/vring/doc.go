// Package vring is the driver side of split and packed virtqueues as
// Linux 6.1's drivers/virtio/virtio_ring.c writes them: the same stores and
// loads on the same ring fields in the same order, the same free list of
// descriptors (LIFO: detach puts a chain back at its head) and the same
// interrupt suppression calls (disable_cb, enable_cb_prepare, poll).
//
// It exists for the ring simulator (virtio/ringsim), which counts the cache
// lines those accesses move, and for the ring benchmark (bench/), which
// runs it against govm's queue core on another CPU. It is not a test
// double: it never writes anything Linux would not, so it cannot be
// hostile, and it trusts the device (Linux checks used ids with BAD_RING;
// here a bad id panics, because the device is our own queue code).
//
// Every field the device reads while the driver may write it (avail idx,
// the head descriptor's flags in the packed ring, used_event, the avail
// flags, the driver's event suppression area) is stored with the atomics
// of guestmem, and every field the device publishes is loaded with them,
// so a Driver on one goroutine and a device on another are ordered the way
// virtio_wmb/virtio_rmb/virtio_mb order them. (Linux stores some of these
// plainly; an atomic store is the same access for the cache model.)
package vring

// Reuse is the order in which freed descriptors (split) or buffer ids
// (packed) are handed out again.
type Reuse int

const (
	// LIFO is Linux's: a detached chain goes back at the head of the free
	// list, so the next add reuses the descriptors just freed.
	LIFO Reuse = iota
	// FIFO puts a detached chain at the tail, so descriptors are reused in
	// the order they were freed.
	FIFO
)

func (r Reuse) String() string {
	if r == FIFO {
		return "fifo"
	}
	return "lifo"
}

// Config is what both drivers need.
type Config struct {
	Num      uint16 // queue size, a power of 2
	EventIdx bool   // VIRTIO_RING_F_EVENT_IDX negotiated
	Indirect bool   // VIRTIO_RING_F_INDIRECT_DESC negotiated
	Reuse    Reuse
	// Data is the guest-physical address every data buffer points at; the
	// ring code never looks inside buffers, so one area serves all.
	Data uint64
	// Tables is where indirect tables are allocated (see Tables).
	Tables *Tables
}

// Buf describes one add: Out device-readable and In device-writable
// buffers of Len bytes each.
type Buf struct {
	Out, In int
	Len     uint32
}

func (b Buf) total() int { return b.Out + b.In }

// useIndirect is virtqueue_use_indirect: an indirect table only for more
// than one buffer, and only when there is a free descriptor.
func useIndirect(c *Config, total int, numFree int) bool {
	return c.Indirect && total > 1 && numFree > 0
}
