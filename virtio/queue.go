package virtio

import (
	"errors"
	"fmt"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio/qstats"
)

// Host-side errors of the queue core. Guest misbehaviour is reported as a
// *GuestError instead (see queue_errors.go).
var (
	// ErrQueueNotReady is returned by Pop and friends on a queue the
	// driver has not set up (Ready false).
	ErrQueueNotReady = errors.New("virtio: queue not ready")
	// ErrBadHead is returned by AddUsed for a head index >= Size: a device
	// bug, not a guest one.
	ErrBadHead = errors.New("virtio: used head out of range")
)

// Queue is the device side of one split virtqueue (spec 2.7). It holds
// queue state only; guest memory is passed to every call, never owned.
//
// The transport writes the configuration fields while the device is
// inactive (before DRIVER_OK) and calls SetFeatures; afterwards exactly one
// device goroutine calls Pop/AddUsed/needsInterrupt/disableNotify/
// enableNotify. A Queue is not safe for concurrent use by several device
// goroutines.
type Queue struct {
	// Size is the number of descriptors: a power of 2, at most MaxSize.
	// The legacy transport cannot change it (spec 4.1.4.10).
	Size uint16
	// DescAddr, AvailAddr and UsedAddr are the guest-physical addresses of
	// the descriptor table, available ring and used ring.
	DescAddr, AvailAddr, UsedAddr uint64
	// Ready is set by the transport once the driver has configured the
	// rings (legacy: a non-zero QUEUE_PFN).
	Ready bool
	// Index is the queue number within its device, used only to label
	// GuestErrors. The transport sets it.
	Index int

	maxSize uint16

	// Negotiated ring features (SetFeatures).
	eventIdx      bool
	indirect      bool
	notifyOnEmpty bool

	nextAvail uint16 // next avail ring entry the device will consume
	// availShadow is the avail idx Pop last read: the entries before it
	// are published, so Pop reads the index again only when it has
	// caught up with it (QEMU's shadow_avail_idx, vhost's avail_idx).
	// Reading it for every chain would move its cache line from the
	// driver's CPU for every chain while the driver adds more.
	availShadow uint16
	nextUsed    uint16 // next used ring entry the device will fill

	// signalledUsed is the used idx at the last needsInterrupt call, the
	// "old" of vring_need_event (spec 2.7.7.1); signalledValid is false
	// until the first call so the first batch always interrupts.
	signalledUsed  uint16
	signalledValid bool

	// chains holds one reusable Chain per head (sized to Size at the
	// first Pop), so Pop allocates nothing once each head has been used;
	// inFlight counts the heads popped and not yet used. Reset drops
	// both: a new activation starts with no chain in flight.
	chains   []Chain
	inFlight int

	watch *Watch // what the watchdog samples; kept across Reset
}

// NewQueue returns an unconfigured queue whose size is fixed at maxSize
// (a power of 2, 1..32768).
func NewQueue(maxSize uint16) *Queue {
	q := &Queue{maxSize: maxSize, watch: new(Watch)}
	q.Reset()
	return q
}

// MaxSize returns the maximum (on legacy: the only) queue size.
func (q *Queue) MaxSize() uint16 { return q.maxSize }

// NextAvail returns the index of the next avail ring entry the device will
// consume (free-running, wraps at 65536). For diagnostics and tests.
func (q *Queue) NextAvail() uint16 { return q.nextAvail }

// NextUsed returns the used idx the device has published.
func (q *Queue) NextUsed() uint16 { return q.nextUsed }

// InFlight returns the number of chains popped and not yet used. For
// diagnostics and tests.
func (q *Queue) InFlight() int { return q.inFlight }

// LegacyRingAddrs computes the ring addresses of a legacy queue from the
// QUEUE_PFN register (spec 2.7.2 and 4.1.4.10): descriptor table at
// pfn*4096, available ring right after it, used ring at the next 4096-byte
// boundary after the available ring (including its used_event field).
func LegacyRingAddrs(pfn uint32, size uint16) (desc, avail, used uint64) {
	desc = uint64(pfn) * LegacyAlign
	avail = desc + descSize*uint64(size)
	availEnd := avail + ringHeaderLen + 2*uint64(size) + 2 // + used_event
	used = (availEnd + LegacyAlign - 1) &^ (LegacyAlign - 1)
	return desc, avail, used
}

// LegacyRingBytes is the total size of a legacy queue laid out by
// LegacyRingAddrs, up to and including the used ring's avail_event.
func LegacyRingBytes(size uint16) uint64 {
	_, _, used := LegacyRingAddrs(0, size)
	return used + ringHeaderLen + usedElemSize*uint64(size) + 2
}

// SetFeatures records the negotiated ring features (the driver-acknowledged
// feature bits). Only the ring bits matter to the queue.
func (q *Queue) SetFeatures(f uint64) {
	q.eventIdx = f&Bit(FeatureRingEventIdx) != 0
	q.indirect = f&Bit(FeatureRingIndirectDesc) != 0
	q.notifyOnEmpty = f&Bit(FeatureNotifyOnEmpty) != 0
}

// EventIdx reports whether VIRTIO_RING_F_EVENT_IDX was negotiated (spec 2.7.7).
func (q *Queue) EventIdx() bool { return q.eventIdx }

// Reset returns the queue to its initial, unconfigured state (spec 2.4:
// a device reset forgets the rings and every index).
func (q *Queue) Reset() {
	*q = Queue{maxSize: q.maxSize, Size: q.maxSize, Index: q.Index, watch: q.watch}
}

// Validate checks the configuration the driver wrote (spec 2.7, table
// "Virtqueue Part Alignment"): the size is a power of 2 within MaxSize,
// each ring is aligned and lies wholly inside one region of guest RAM. The
// transport calls it before activating the device; a failure is a
// *GuestError. Pop is safe even without it, because every access is
// bounds-checked, but a bad ring found here is reported once and clearly.
func (q *Queue) Validate(mem *guestmem.Memory) error {
	if !q.Ready {
		return ErrQueueNotReady
	}
	if q.Size == 0 || q.Size&(q.Size-1) != 0 || q.Size > q.maxSize || q.Size > MaxQueueSize {
		return q.errNoHead(ErrBadRing, "size %d not a power of 2 <= %d", q.Size, q.maxSize)
	}
	n := uint64(q.Size)
	parts := []struct {
		name  string
		addr  uint64
		len   uint64
		align uint64
	}{
		{"descriptor table", q.DescAddr, descSize * n, 16},
		{"available ring", q.AvailAddr, ringHeaderLen + 2*n + 2, 2},
		{"used ring", q.UsedAddr, ringHeaderLen + usedElemSize*n + 2, 4},
	}
	for _, p := range parts {
		if p.addr%p.align != 0 {
			return q.errNoHead(ErrBadRing, "%s at %#x not %d-byte aligned", p.name, p.addr, p.align)
		}
		if _, err := mem.Slice(p.addr, p.len); err != nil {
			return q.errNoHead(ErrBadRing, "%s [%#x, +%#x) outside RAM", p.name, p.addr, p.len)
		}
	}
	return nil
}

// Ring field addresses (spec 2.7.6, 2.7.8). Computed from the configuration
// each time; all accesses go through guestmem, which rejects anything
// outside RAM, so a bad configuration yields errors, not wild accesses.
func (q *Queue) availFlagsAddr() uint64 { return q.AvailAddr }
func (q *Queue) availIdxAddr() uint64   { return q.AvailAddr + 2 }
func (q *Queue) availRingAddr(slot uint16) uint64 {
	return q.AvailAddr + ringHeaderLen + 2*uint64(slot)
}
func (q *Queue) usedEventAddr() uint64 { return q.availRingAddr(q.Size) }
func (q *Queue) usedFlagsAddr() uint64 { return q.UsedAddr }
func (q *Queue) usedIdxAddr() uint64   { return q.UsedAddr + 2 }
func (q *Queue) usedElemAddr(slot uint16) uint64 {
	return q.UsedAddr + ringHeaderLen + usedElemSize*uint64(slot)
}
func (q *Queue) availEventAddr() uint64 {
	return q.UsedAddr + ringHeaderLen + usedElemSize*uint64(q.Size)
}

// memErr turns a guestmem failure on a ring field into a GuestError: the
// ring addresses came from the driver.
func (q *Queue) memErr(what string, err error) error {
	return q.errNoHead(ErrBadRing, "%s: %v", what, err)
}

// String describes the queue for logs.
func (q *Queue) String() string {
	return fmt.Sprintf("queue %d (size %d, desc %#x avail %#x used %#x, next avail %d used %d)",
		q.Index, q.Size, q.DescAddr, q.AvailAddr, q.UsedAddr, q.nextAvail, q.nextUsed)
}

// ReadRing reads what the two halves of q's split ring say right now
// (qstats.Ring), for diagnostics (stats, the watchdog), from guest memory
// with plain loads (a field guest memory cannot supply reads as 0). Call it
// only for a queue that Validate accepted.
func (q *Queue) ReadRing(mem *guestmem.Memory) qstats.Ring {
	var r qstats.Ring
	r.AvailFlags, _ = mem.LoadUint16(q.availFlagsAddr())
	r.AvailIdx, _ = mem.LoadUint16(q.availIdxAddr())
	r.UsedEvent, _ = mem.LoadUint16(q.usedEventAddr())
	r.UsedFlags, _ = mem.LoadUint16(q.usedFlagsAddr())
	r.UsedIdx, _ = mem.LoadUint16(q.usedIdxAddr())
	r.AvailEvent, _ = mem.LoadUint16(q.availEventAddr())
	return r
}
