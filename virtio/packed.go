package virtio

import (
	"fmt"

	"github.com/govm/govm/guestmem"
)

// Sizes of packed-ring structures in guest memory (spec 2.8.10.1
// "Structure Size and Alignment").
const (
	packedEventSize  = 4  // struct pvirtq_event_suppress
	packedDescAlign  = 16 // descriptor ring alignment
	packedEventAlign = 4  // event suppression area alignment
)

// PackedQueue is the device side of one packed virtqueue (spec 2.8). Like
// the split Queue it holds queue state only; guest memory is passed to
// every call, never owned, and every value read from it is checked, so a
// hostile driver gets a *GuestError, never a panic or an access outside
// guest RAM.
//
// The ring is one array of Size descriptors, struct pvirtq_desc {le64
// addr; le32 len; le16 id; le16 flags} (spec 2.8.13), which the driver
// fills in order and the device overwrites with used descriptors, also in
// order. A descriptor is made available by flipping its AVAIL/USED flags,
// so each side keeps a position and a one-bit wrap counter (spec 2.8.1).
// Here both positions are free-running uint16 counters, availCtr and
// usedCtr, counting ring positions since Reset:
//
//	position     = c & (Size-1)
//	wrap counter = 1 ^ (c/Size)&1   (1 on the first lap, as the spec starts it)
//
// Size is a power of 2 <= 32768, so 65536 is a multiple of 2*Size and the
// pair (position, wrap counter) is a function of c even when c wraps.
// availCtr-usedCtr is the number of ring positions the device has popped
// and not yet covered with used descriptors; it never exceeds Size.
//
// The contract for callers is the split Queue's: the transport configures
// the fields before activation, then exactly one device goroutine calls
// Pop/AddUsed/AddUsedBatch and the notification methods.
type PackedQueue struct {
	// Size is the number of descriptors: a power of 2, at most MaxSize.
	// (The spec allows any size; this implementation does not.)
	Size uint16
	// DescAddr is the descriptor ring, Size * 16 bytes, 16-byte aligned.
	DescAddr uint64
	// DriverAddr is the driver event suppression area (the driver's
	// wishes about used buffer notifications), DeviceAddr the device's
	// (about available buffer notifications): each a struct
	// pvirtq_event_suppress {le16 off_wrap; le16 flags}, 4-byte aligned
	// (spec 2.8.10, 2.8.14).
	DriverAddr uint64
	DeviceAddr uint64
	// Ready is set by the transport once the driver enabled the queue.
	Ready bool
	// Index is the queue number within its device, for GuestErrors.
	Index int

	maxSize uint16

	// Negotiated ring features (SetFeatures).
	eventIdx bool
	indirect bool

	availCtr uint16 // next ring position the device reads, see above
	usedCtr  uint16 // next ring position the device writes a used descriptor at

	// signalledUsed is usedCtr at the last needsInterrupt call: the
	// "old" end of the window an event offset must fall in.
	signalledUsed uint16

	// slots holds, per buffer ID, the reusable Chain (as the split
	// Queue's chains) and the number of ring positions its chain took,
	// which AddUsed skips (spec 2.8.6). Sized to Size at the first Pop.
	// spare is the Chain Pop fills before it knows the ID, which only the
	// last descriptor carries; on success it is swapped with the ID's.
	slots    []packedSlot
	spare    Chain
	inFlight int

	watch *Watch // kept across Reset
}

type packedSlot struct {
	chain  Chain
	num    uint16 // ring positions of the chain in flight
	marked bool   // scratch for AddUsedBatch's duplicate check
}

// NewPackedQueue returns an unconfigured packed queue whose size is at
// most maxSize (a power of 2, 1..32768).
func NewPackedQueue(maxSize uint16) *PackedQueue {
	q := &PackedQueue{maxSize: maxSize, watch: new(Watch)}
	q.Reset()
	return q
}

// MaxSize returns the largest size the driver may configure.
func (q *PackedQueue) MaxSize() uint16 { return q.maxSize }

// InFlight returns the number of chains popped and not yet used.
func (q *PackedQueue) InFlight() int { return q.inFlight }

// Watch returns the queue's watch counters.
func (q *PackedQueue) Watch() *Watch { return q.watch }

// SetFeatures records the negotiated ring features. VIRTIO_F_NOTIFY_ON_EMPTY
// is legacy only (spec 6.3) and the packed layout needs VIRTIO_F_VERSION_1,
// so it cannot apply here and is not recorded.
func (q *PackedQueue) SetFeatures(f uint64) {
	q.eventIdx = f&Bit(FeatureRingEventIdx) != 0
	q.indirect = f&Bit(FeatureRingIndirectDesc) != 0
}

// Reset returns the queue to its initial state (spec 2.4): no rings, both
// wrap counters 1, nothing in flight.
func (q *PackedQueue) Reset() {
	*q = PackedQueue{maxSize: q.maxSize, Size: q.maxSize, Index: q.Index, watch: q.watch}
}

// Validate checks the configuration the driver wrote (spec 2.8.10.1,
// 2.8.11): the size is a power of 2 within MaxSize, the descriptor ring is
// 16-byte aligned and the event suppression areas 4-byte aligned, and each
// lies inside guest RAM. A failure is a *GuestError. Pop and the others are
// safe without it (every access is checked), but a bad ring is reported
// here once and clearly.
func (q *PackedQueue) Validate(mem *guestmem.Memory) error {
	if !q.Ready {
		return ErrQueueNotReady
	}
	if !q.sizeOK() || q.Size > q.maxSize {
		return q.errNoHead(ErrBadRing, "size %d not a power of 2 <= %d", q.Size, q.maxSize)
	}
	parts := []struct {
		name  string
		addr  uint64
		len   uint64
		align uint64
	}{
		{"descriptor ring", q.DescAddr, descSize * uint64(q.Size), packedDescAlign},
		{"driver event suppression", q.DriverAddr, packedEventSize, packedEventAlign},
		{"device event suppression", q.DeviceAddr, packedEventSize, packedEventAlign},
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

// sizeOK: a power of 2 (so the counters above work) within the spec's 2^15.
func (q *PackedQueue) sizeOK() bool {
	return q.Size != 0 && q.Size&(q.Size-1) == 0 && q.Size <= MaxQueueSize
}

// pos and wrap turn a free-running counter into a ring position and the
// wrap counter that goes with it (see PackedQueue).
func (q *PackedQueue) pos(c uint16) uint16 { return c & (q.Size - 1) }
func (q *PackedQueue) wrap(c uint16) uint16 {
	return 1 ^ ((c / q.Size) & 1)
}

// check is what every data-path call checks first: the queue is ready and
// its size one pos and wrap can work with (a Ready queue the transport did
// not Validate may have any size).
func (q *PackedQueue) check() error {
	if !q.Ready {
		return ErrQueueNotReady
	}
	if !q.sizeOK() {
		return q.errNoHead(ErrBadRing, "size %d not a power of 2 <= %d", q.Size, MaxQueueSize)
	}
	return nil
}

// descAddr is the guest address of ring position p (< Size).
func (q *PackedQueue) descAddr(p uint16) uint64 { return q.DescAddr + descSize*uint64(p) }

// isAvail reports whether flags mark a descriptor available in the lap
// whose wrap counter is w (spec 2.8.1): AVAIL equal to w and USED not.
func isAvail(flags, w uint16) bool {
	avail := (flags & PackedDescFlagAvail) >> 7
	used := (flags & PackedDescFlagUsed) >> 15
	return avail == w && used != w
}

// memErr turns a guestmem failure on a ring field into a GuestError.
func (q *PackedQueue) memErr(what string, err error) error {
	return q.errNoHead(ErrBadRing, "%s: %v", what, err)
}

func (q *PackedQueue) errNoHead(kind error, format string, args ...any) *GuestError {
	return &GuestError{Queue: q.Index, Err: kind, Reason: fmt.Sprintf(format, args...)}
}

func (q *PackedQueue) errID(id uint16, kind error, format string, args ...any) *GuestError {
	return &GuestError{Queue: q.Index, Head: id, HeadValid: true, Err: kind,
		Reason: fmt.Sprintf(format, args...)}
}

// String describes the queue for logs.
func (q *PackedQueue) String() string {
	return fmt.Sprintf("packed queue %d (size %d, desc %#x driver %#x device %#x, next avail %d wrap %d, next used %d wrap %d)",
		q.Index, q.Size, q.DescAddr, q.DriverAddr, q.DeviceAddr,
		q.availCtr&(q.Size-1), q.wrapOr0(q.availCtr), q.usedCtr&(q.Size-1), q.wrapOr0(q.usedCtr))
}

// wrapOr0 is wrap for String, which must not divide by a zero Size.
func (q *PackedQueue) wrapOr0(c uint16) uint16 {
	if !q.sizeOK() {
		return 0
	}
	return q.wrap(c)
}
