package virtio

import (
	"encoding/binary"
	"math"

	"github.com/govm/govm/guestmem"
)

// maxIndirectEntries bounds an indirect table: next is a 16-bit index, so a
// longer table could never be walked past entry 65535 anyway.
const maxIndirectEntries = 1 << 16

// desc is one struct virtq_desc (spec 2.7.5), copied out of guest memory
// once so that a driver rewriting it concurrently cannot make us see two
// different values for one field.
type desc struct {
	addr  uint64
	len   uint32
	flags uint16
	next  uint16
}

func readDesc(mem *guestmem.Memory, gpa uint64) (desc, error) {
	var b [descSize]byte
	if err := mem.ReadAt(b[:], gpa); err != nil {
		return desc{}, err
	}
	return desc{
		addr:  binary.LittleEndian.Uint64(b[0:]),
		len:   binary.LittleEndian.Uint32(b[8:]),
		flags: binary.LittleEndian.Uint16(b[12:]),
		next:  binary.LittleEndian.Uint16(b[14:]),
	}, nil
}

// Pop takes the next available descriptor chain (spec 2.7.13 from the
// device's side). It returns (nil, nil) when the driver has offered nothing
// new, and a *GuestError when the ring or chain is malformed, or names a
// head that is still in flight (ErrHeadInFlight); in that case the queue
// does not advance and the device should stop using it. Pop only reads
// guest memory: it never writes the descriptor table or the rings.
//
// The chain returned is the queue's own, reused for its head: it is valid
// until the head goes back through AddUsed / AddUsedBatch (see Chain).
func (q *Queue) Pop(mem *guestmem.Memory) (*Chain, error) {
	if !q.Ready {
		return nil, ErrQueueNotReady
	}
	if q.Size == 0 || q.Size&(q.Size-1) != 0 {
		return nil, q.errNoHead(ErrBadRing, "size %d not a power of 2", q.Size)
	}
	if q.nextAvail == q.availShadow {
		// Ordering point (spec 2.7.13.3, virtio_ring.c
		// virtqueue_add_split's virtio_wmb before the idx store): the
		// driver writes the descriptors and the ring entry, then
		// publishes avail->idx. LoadUint16 is an acquire, so the ring
		// entry and descriptor reads below, in this call and in the
		// later calls that consume up to this idx without reading it
		// again, cannot be satisfied before it: we never see an idx
		// that covers an entry whose contents we read stale.
		availIdx, err := mem.LoadUint16(q.availIdxAddr())
		if err != nil {
			return nil, q.memErr("avail idx", err)
		}
		pending := availIdx - q.nextAvail // modulo 2^16, spec 2.7.6
		if pending == 0 {
			return nil, nil
		}
		if pending > q.Size {
			// The driver cannot have more than Size buffers
			// outstanding; trusting this idx would make us consume
			// stale ring entries.
			return nil, q.errNoHead(ErrAvailIdx, "avail idx %d is %d ahead of next %d (size %d)",
				availIdx, pending, q.nextAvail, q.Size)
		}
		q.availShadow = availIdx
	}
	head, err := mem.Uint16(q.availRingAddr(q.nextAvail & (q.Size - 1)))
	if err != nil {
		return nil, q.memErr("avail ring", err)
	}
	c, err := q.walk(mem, head)
	if err != nil {
		return nil, err
	}
	c.inFlight = true
	q.inFlight++
	q.nextAvail++
	return c, nil
}

// chainFor returns the queue's Chain for head, emptied for a new walk, or
// ErrHeadInFlight if the device still holds that head.
//
// Spec 2.7.13, step 1: the driver places a buffer into free descriptors of
// the descriptor table (2.7.5), and a chain the device has popped is not
// free until its head comes back in the used ring (2.7.8, 2.7.14): until
// then it is the device's. Linux's virtio_ring.c keeps that:
// virtqueue_add_split takes its head off the free list (vq->free_head),
// and only detach_buf_split, called from virtqueue_get_buf_ctx_split for
// an id the device put in the used ring, returns it there. So a driver
// that offers a head still in flight is broken or hostile. Rebuilding the
// Chain while a device holds it (virtio-net RX keeps popped chains across
// frames and counts their room) would change that chain under the device:
// its lengths, its buffers, its reader's position. So the head is refused
// as a guest error before anything of its Chain is touched, and the device
// stops the queue until the driver resets it.
func (q *Queue) chainFor(head uint16) (*Chain, error) {
	if len(q.chains) != int(q.Size) {
		// First Pop since Reset (the transport fixes Size before
		// activation and never changes it while the device runs).
		q.chains, q.inFlight = make([]Chain, q.Size), 0
	}
	c := &q.chains[head]
	if c.inFlight {
		return nil, q.errHead(head, ErrHeadInFlight, "offered again before it was used")
	}
	c.reuse(head)
	return c, nil
}

// walk follows the chain starting at head, validating every descriptor
// before any of it is exposed to a device (spec 2.7.5, 2.7.5.3.1, 2.7.4.2).
// It is bounded: at most Size hops in the descriptor table and at most the
// table length in an indirect table, so a loop ends as ErrDescLoop.
func (q *Queue) walk(mem *guestmem.Memory, head uint16) (*Chain, error) {
	if head >= q.Size {
		return nil, q.errHead(head, ErrDescIndex, "head %d >= size %d", head, q.Size)
	}
	c, err := q.chainFor(head)
	if err != nil {
		return nil, err
	}
	if err := q.fill(mem, c); err != nil {
		c.trim() // a long indirect table that failed keeps nothing either
		return nil, err
	}
	return c, nil
}

// fill appends the buffers of the chain at c.Head to c.
func (q *Queue) fill(mem *guestmem.Memory, c *Chain) error {
	head := c.Head
	table := q.DescAddr
	tableLen := uint32(q.Size) // entries in the table being walked
	inIndirect := false
	idx := uint32(head)
	hops := uint32(0)
	for {
		if hops >= tableLen {
			return q.errHead(head, ErrDescLoop, "more than %d descriptors", tableLen)
		}
		hops++
		d, err := readDesc(mem, table+descSize*uint64(idx))
		if err != nil {
			if inIndirect {
				return q.errHead(head, ErrIndirect, "entry %d: %v", idx, err)
			}
			return q.errHead(head, ErrBadRing, "descriptor %d: %v", idx, err)
		}
		if d.flags&DescFlagIndirect != 0 {
			if err := q.checkIndirect(mem, head, d, inIndirect); err != nil {
				return err
			}
			// Spec 2.7.5.3.2: zero or more direct descriptors may
			// precede one indirect descriptor, which ends the direct
			// chain (it cannot carry NEXT); its WRITE flag is ignored.
			table, tableLen = d.addr, d.len/descSize
			inIndirect, idx, hops = true, 0, 0
			continue
		}
		if err := c.add(mem, d); err != nil {
			return q.errHead(head, err.kind, "descriptor %d: %s", idx, err.msg)
		}
		if d.flags&DescFlagNext == 0 {
			return nil
		}
		if uint32(d.next) >= tableLen {
			return q.errHead(head, ErrDescIndex, "descriptor %d: next %d >= %d", idx, d.next, tableLen)
		}
		idx = uint32(d.next)
	}
}

// checkIndirect validates a descriptor that points at an indirect table
// (spec 2.7.5.3.1 driver requirements, which a hostile driver ignores).
func (q *Queue) checkIndirect(mem *guestmem.Memory, head uint16, d desc, nested bool) error {
	switch {
	case !q.indirect:
		return q.errHead(head, ErrIndirect, "VIRTIO_F_RING_INDIRECT_DESC not negotiated")
	case nested:
		return q.errHead(head, ErrIndirect, "nested indirect table")
	case d.flags&DescFlagNext != 0:
		return q.errHead(head, ErrIndirect, "INDIRECT together with NEXT")
	case d.len == 0 || d.len%descSize != 0:
		return q.errHead(head, ErrIndirect, "table length %d not a non-zero multiple of 16", d.len)
	case d.len/descSize > maxIndirectEntries:
		return q.errHead(head, ErrIndirect, "table of %d entries", d.len/descSize)
	}
	if _, err := mem.Slice(d.addr, uint64(d.len)); err != nil {
		return q.errHead(head, ErrIndirect, "table [%#x, +%#x) outside RAM", d.addr, d.len)
	}
	return nil
}

type addErr struct {
	kind error
	msg  string
}

// add appends one data descriptor to the chain.
func (c *Chain) add(mem *guestmem.Memory, d desc) *addErr {
	buf, err := mem.Slice(d.addr, uint64(d.len))
	if err != nil {
		return &addErr{ErrDescBuffer, err.Error()}
	}
	write := d.flags&DescFlagWrite != 0
	if !write && len(c.in) > 0 {
		// Spec 2.7.4.2: device-writable descriptors come after all
		// device-readable ones; a device that accepted otherwise would
		// have to guess which part a header lives in.
		return &addErr{ErrDescOrder, "readable after writable"}
	}
	if c.readableLen+c.writableLen+uint64(d.len) > math.MaxUint32 {
		// Spec 2.7.5: a chain is at most 2^32 bytes; used len is 32-bit.
		return &addErr{ErrChainTooLong, "total length exceeds 2^32-1"}
	}
	c.segs = append(c.segs, Segment{Addr: d.addr, Len: d.len, Write: write})
	if write {
		c.in = append(c.in, buf)
		c.writableLen += uint64(d.len)
	} else {
		c.out = append(c.out, buf)
		c.readableLen += uint64(d.len)
	}
	return nil
}
