package virtio

import (
	"encoding/binary"

	"github.com/govm/govm/guestmem"
)

// Offsets in struct pvirtq_desc (spec 2.8.13): addr, len, id, flags.
const (
	packedIDOff    = 12
	packedFlagsOff = 14
)

// decodePacked decodes addr, len and id from the first 14 bytes of b, and
// the flags from b[14:16] when it holds them. The chain walk uses desc's
// addr, len and flags; next has no meaning in a packed ring and stays 0.
func decodePacked(b []byte) (d desc, id uint16) {
	d.addr = binary.LittleEndian.Uint64(b[0:])
	d.len = binary.LittleEndian.Uint32(b[8:])
	id = binary.LittleEndian.Uint16(b[packedIDOff:])
	if len(b) >= descSize {
		d.flags = binary.LittleEndian.Uint16(b[packedFlagsOff:])
	}
	return d, id
}

// Pop takes the next available buffer (spec 2.8.21 from the device's
// side). It returns (nil, nil) when the descriptor at the device's next
// position is not available, and a *GuestError when the chain there is
// malformed or names a buffer ID still in flight; then the queue does not
// advance and the device should stop using it. Pop only reads guest memory.
//
// The Chain's Head is the buffer ID, what AddUsed wants back. The chain is
// the queue's own, reused per ID, valid until the ID goes back through
// AddUsed / AddUsedBatch (see Chain). Errors found before the ID is read
// (it is in the chain's last descriptor) have HeadValid false and name the
// ring position in Reason.
func (q *PackedQueue) Pop(mem *guestmem.Memory) (*Chain, error) {
	if err := q.check(); err != nil {
		return nil, err
	}
	c := &q.spare
	c.reuse(0)
	n, id, err := q.walk(mem, c)
	if err != nil || n == 0 {
		c.trim() // a long indirect table that failed keeps nothing either
		return nil, err
	}
	if id >= q.Size {
		c.trim()
		return nil, q.errID(id, ErrDescIndex, "buffer id %d >= size %d", id, q.Size)
	}
	if len(q.slots) != int(q.Size) {
		// First Pop since Reset (the transport fixes Size before
		// activation and never changes it while the device runs).
		q.slots, q.inFlight = make([]packedSlot, q.Size), 0
	}
	s := &q.slots[id]
	if s.chain.inFlight {
		// Spec 2.8.21.1: the driver takes "the next free buffer id";
		// an ID is not free until the device has used it (Linux's
		// virtqueue_add_packed takes it off vq->free_head, and only
		// detach_buf_packed puts it back, for an id read from a used
		// descriptor). Refused before the held Chain is touched, as the
		// split Queue's chainFor explains.
		c.trim()
		return nil, q.errID(id, ErrHeadInFlight, "offered again before it was used")
	}
	// The walk filled the spare Chain because the ID comes last; swap it
	// in, keeping the ID's old slices as the next spare.
	s.chain, q.spare = q.spare, s.chain
	s.chain.Head = id
	s.chain.inFlight = true
	s.num = n
	q.inFlight++
	q.availCtr += n
	return &s.chain, nil
}

// walk reads the chain starting at the device's next position into c and
// returns how many ring positions it takes and its buffer ID; n == 0 with
// no error means nothing is available. It validates everything before a
// device can see any of it, and is bounded: at most Size ring descriptors
// and one indirect table of at most maxIndirectEntries.
func (q *PackedQueue) walk(mem *guestmem.Memory, c *Chain) (n, id uint16, err error) {
	// Ring positions popped and not yet covered by used descriptors: the
	// driver cannot have more than Size descriptors outstanding (spec
	// 2.8: "once the ring is full of driver descriptors, the driver stops
	// sending new requests"), so a chain that would exceed that is reusing
	// descriptors the device still owns (spec 2.8.16: the driver MUST NOT
	// change a descriptor before it sees it used). It is checked after
	// the flags: when the ring is full the next position holds the
	// oldest descriptor in flight, which simply is not available.
	outstanding := uint32(q.availCtr - q.usedCtr)
	ctr := q.availCtr
	for k := uint32(1); ; k++ {
		if k > uint32(q.Size) {
			// Spec 2.8.17: a list is never longer than the queue size.
			return 0, 0, q.errNoHead(ErrDescLoop, "chain at %d longer than %d descriptors",
				q.pos(q.availCtr), q.Size)
		}
		p, w := q.pos(ctr), q.wrap(ctr)
		gpa := q.descAddr(p)
		// Ordering point (spec 2.8.21.1 "Updating flags"; virtio_ring.c
		// virtqueue_add_packed writes the rest of the chain and the
		// head's addr, len and id, then virtio_wmb, then the head's
		// flags last): LoadUint16 is an acquire, so the reads of this
		// descriptor's other fields and of the chain's later
		// descriptors below cannot be satisfied before it. The other
		// fields are read only once the flags say the driver has
		// handed the descriptor over (spec 2.8.15).
		flags, err := mem.LoadUint16(gpa + packedFlagsOff)
		if err != nil {
			return 0, 0, q.errNoHead(ErrBadRing, "descriptor %d: %v", p, err)
		}
		if !isAvail(flags, w) {
			if k == 1 {
				return 0, 0, nil // nothing new
			}
			// Spec 2.8.6: the driver makes the first descriptor
			// available after all the others; NEXT led past them.
			return 0, 0, q.errNoHead(ErrDescIndex, "chain at %d: descriptor %d (wrap %d) not available",
				q.pos(q.availCtr), p, w)
		}
		if outstanding+k > uint32(q.Size) {
			return 0, 0, q.errNoHead(ErrAvailIdx, "chain at %d: %d descriptors in flight, %d more exceed size %d",
				q.pos(q.availCtr), outstanding, k, q.Size)
		}
		// One copy of addr, len and id (not the flags, already read):
		// a driver rewriting the descriptor cannot make us see two
		// values of one field.
		var b [descSize]byte
		if err := mem.ReadAt(b[:packedFlagsOff], gpa); err != nil {
			return 0, 0, q.errNoHead(ErrBadRing, "descriptor %d: %v", p, err)
		}
		d, did := decodePacked(b[:packedFlagsOff])
		d.flags = flags
		ctr++
		if d.flags&DescFlagIndirect != 0 {
			// Spec 2.8.19: a driver MUST NOT put an INDIRECT
			// descriptor in a list linked by NEXT (unlike the split
			// ring's 2.7.5.3.2, no direct descriptors may precede
			// it), so it is a whole chain of one ring position.
			if k > 1 {
				return 0, 0, q.errNoHead(ErrIndirect, "chain at %d: INDIRECT descriptor %d after NEXT",
					q.pos(q.availCtr), p)
			}
			if err := q.fillIndirect(mem, c, d, p); err != nil {
				return 0, 0, err
			}
			return 1, did, nil
		}
		if e := c.add(mem, d); e != nil {
			return 0, 0, q.errNoHead(e.kind, "descriptor %d: %s", p, e.msg)
		}
		if d.flags&DescFlagNext == 0 {
			// Spec 2.8.6: the buffer ID is in the last descriptor.
			return uint16(k), did, nil
		}
	}
}

// fillIndirect validates the indirect descriptor d at ring position p and
// appends its table's buffers to c (spec 2.8.7 "Indirect Flag:
// Scatter-Gather Support", 2.8.19).
func (q *PackedQueue) fillIndirect(mem *guestmem.Memory, c *Chain, d desc, p uint16) error {
	switch {
	case !q.indirect:
		return q.errNoHead(ErrIndirect, "descriptor %d: VIRTIO_F_RING_INDIRECT_DESC not negotiated", p)
	case d.flags&DescFlagNext != 0:
		return q.errNoHead(ErrIndirect, "descriptor %d: INDIRECT together with NEXT", p)
	case d.len == 0 || d.len%descSize != 0:
		return q.errNoHead(ErrIndirect, "descriptor %d: table length %d not a non-zero multiple of 16", p, d.len)
	case d.len/descSize > maxIndirectEntries:
		return q.errNoHead(ErrIndirect, "descriptor %d: table of %d entries", p, d.len/descSize)
	}
	if _, err := mem.Slice(d.addr, uint64(d.len)); err != nil {
		return q.errNoHead(ErrIndirect, "descriptor %d: table [%#x, +%#x) outside RAM", p, d.addr, d.len)
	}
	// Spec 2.8.7: the table's entries are used in order, all len/16 of
	// them; WRITE is the only valid flag in an entry, the others (NEXT
	// among them: Linux's virtqueue_add_indirect_packed never sets it) are
	// reserved and ignored, and so is the buffer ID. INDIRECT is refused
	// rather than ignored: the driver MUST NOT set it (2.8.19), and an
	// entry carrying it is a nested table, not a buffer the driver meant.
	n := d.len / descSize
	for i := uint32(0); i < n; i++ {
		var b [descSize]byte
		if err := mem.ReadAt(b[:], d.addr+descSize*uint64(i)); err != nil {
			return q.errNoHead(ErrIndirect, "descriptor %d: table entry %d: %v", p, i, err)
		}
		e, _ := decodePacked(b[:])
		if e.flags&DescFlagIndirect != 0 {
			return q.errNoHead(ErrIndirect, "descriptor %d: nested indirect table in entry %d", p, i)
		}
		e.flags &= DescFlagWrite
		if err := c.add(mem, e); err != nil {
			return q.errNoHead(err.kind, "descriptor %d: table entry %d: %s", p, i, err.msg)
		}
	}
	return nil
}
