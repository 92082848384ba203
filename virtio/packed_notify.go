package virtio

import "github.com/govm/govm/guestmem"

// AddUsed returns the buffer id to the driver (spec 2.8.22) with length
// bytes written into its writable part (Chain.Written), as a batch of one.
func (q *PackedQueue) AddUsed(mem *guestmem.Memory, id uint16, length uint32) error {
	var one [1]UsedElem
	one[0] = UsedElem{Head: id, Len: length}
	return q.AddUsedBatch(mem, one[:])
}

// AddUsedBatch returns several buffers at once (UsedElem.Head is the
// buffer ID), with the split Queue's promise: the driver sees all of them
// or none, which virtio-net needs for the buffers of a merged frame (spec
// 5.1.6.4; for packed rings spec 2.8.9 "Multi-buffer requests" describes
// the same order).
//
// Each buffer gets one used descriptor {id, len, flags} written at the
// device's used position, which then advances by the number of ring
// positions the buffer's chain took (spec 2.8.6: the device skips forward
// over the rest of the list; Linux's virtqueue_get_buf_ctx_packed adds
// desc_state[id].num to last_used). Buffers may be used in any order
// (spec 2.8: "used device descriptors are written in the order in which
// their processing is complete"), so the used descriptor of one buffer may
// land on a position another buffer's chain came from.
//
// Every ID must be in flight and appear once: the queue has to know how
// far to skip, so an ID >= Size, not popped, or repeated is ErrBadHead (a
// device bug, not a guest one) and nothing is written.
func (q *PackedQueue) AddUsedBatch(mem *guestmem.Memory, elems []UsedElem) error {
	if err := q.check(); err != nil {
		return err
	}
	if len(elems) == 0 {
		return nil
	}
	if !q.markBatch(elems) {
		return ErrBadHead
	}
	// The distinct IDs in flight took at most availCtr-usedCtr <= Size
	// positions, so every used descriptor below lands on a position the
	// device popped and the driver is waiting on.
	first := q.usedCtr
	ctr := first + q.slots[elems[0].Head].num
	for _, e := range elems[1:] {
		if err := q.writeUsed(mem, ctr, e, false); err != nil {
			return err
		}
		ctr += q.slots[e.Head].num
	}
	// Ordering point: the first descriptor's flags go last, with a release
	// store (spec 2.8.9; virtio_ring.c virtqueue_get_buf_ctx_packed polls
	// the flags at last_used, then virtio_rmb, then reads id and len). The
	// driver looks at one position, the first's, so until that store it
	// sees none of the batch; after it, every store above is visible, and
	// it reads on through the later descriptors in order.
	if err := q.writeUsed(mem, first, elems[0], true); err != nil {
		return err
	}
	q.usedCtr = ctr
	// The chains are the driver's again: the next Pop of each ID may
	// rebuild its Chain.
	for _, e := range elems {
		c := &q.slots[e.Head].chain
		c.inFlight = false
		c.trim()
		q.inFlight--
	}
	return nil
}

// markBatch reports whether every ID in elems is in flight and appears
// once. It leaves no mark behind.
func (q *PackedQueue) markBatch(elems []UsedElem) bool {
	ok := true
	n := 0
	for _, e := range elems {
		if int(e.Head) >= len(q.slots) || !q.slots[e.Head].chain.inFlight || q.slots[e.Head].marked {
			ok = false
			break
		}
		q.slots[e.Head].marked = true
		n++
	}
	for _, e := range elems[:n] {
		q.slots[e.Head].marked = false
	}
	return ok
}

// writeUsed writes the used descriptor for e at counter ctr (spec 2.8.1:
// AVAIL and USED both equal to the device's wrap counter there; 2.8.3:
// WRITE set when the device wrote data, because len "is reserved for used
// descriptors without the VIRTQ_DESC_F_WRITE flag"). addr is unused in a
// used descriptor and left as it is.
//
// id and flags share the descriptor's last 4-byte word, so they go out in
// one 32-bit store, len before it: with release set that store publishes
// the descriptor (see AddUsedBatch), and the id arriving with the flags
// rather than just before them is the same to a driver that reads it
// after the flags. A driver polling the flags loads that word, so it never
// races a store to half of it.
func (q *PackedQueue) writeUsed(mem *guestmem.Memory, ctr uint16, e UsedElem, release bool) error {
	var flags uint16
	if q.wrap(ctr) == 1 {
		flags = PackedDescFlagAvail | PackedDescFlagUsed
	}
	if e.Len > 0 {
		flags |= DescFlagWrite
	}
	gpa := q.descAddr(q.pos(ctr))
	if err := mem.PutUint32(gpa+8, e.Len); err != nil {
		return q.memErr("used descriptor", err)
	}
	word := uint32(e.Head) | uint32(flags)<<16
	var err error
	if release {
		err = mem.StoreUint32(gpa+packedIDOff, word)
	} else {
		err = mem.PutUint32(gpa+packedIDOff, word)
	}
	if err != nil {
		return q.memErr("used descriptor", err)
	}
	return nil
}

// needsInterrupt reports whether the driver wants a used buffer
// notification for the buffers used since the last call (spec 2.8.10,
// 2.8.14), and records the current used position as signalled. It is the
// split Queue's counterpart (same contract), reading the driver event
// suppression area:
//
//   - nothing used since the last call: false.
//   - flags DISABLE: false; ENABLE: true.
//   - flags DESC with VIRTIO_F_RING_EVENT_IDX: true iff the used position
//     moved past the descriptor named by off_wrap (offset and wrap
//     counter) since the last call, like vring_need_event.
//   - DESC without EVENT_IDX (the spec makes it valid only with it) and
//     the reserved value 3: true. A spurious interrupt costs the driver a
//     look at the ring; a missing one can hang it.
func (q *PackedQueue) needsInterrupt(mem *guestmem.Memory) (bool, error) {
	if err := q.check(); err != nil {
		return false, err
	}
	// Ordering point: full barrier between the used descriptor stores
	// (AddUsed) and the load of the driver's event suppression below
	// (virtio_ring.c virtqueue_enable_cb_prepare_packed writes off_wrap
	// and flags, and virtqueue_poll / the caller's mb then reads the used
	// flags at last_used). Without it our load could pass the store: we
	// would read the old DISABLE and skip the interrupt while the driver
	// read the old flags, saw nothing used, and went to sleep.
	guestmem.Fence()
	old, now := q.signalledUsed, q.usedCtr
	q.signalledUsed = now
	if now == old {
		return false, nil
	}
	// One 32-bit load: off_wrap and flags from the same moment, as
	// virtqueue_kick_prepare_packed snapshots the device area.
	ev, err := mem.LoadUint32(q.DriverAddr)
	if err != nil {
		return false, q.memErr("driver event suppression", err)
	}
	offWrap, flags := uint16(ev), uint16(ev>>16)
	switch flags & 3 { // desc_event_flags is 2 bits; the rest reserved
	case PackedEventDisable:
		return false, nil
	case PackedEventDesc:
		if q.eventIdx {
			return q.eventCrossed(offWrap, old, now), nil
		}
	}
	return true, nil
}

// eventCrossed reports whether moving the used counter from old to now
// passed the ring position and wrap counter in offWrap: whether the event
// lies in [old, now), vring_need_event's window.
//
// The counter values with a given (position, wrap counter) are exactly one
// residue modulo 2*Size (see PackedQueue), so the test is
// vring_need_event's done modulo 2*Size. That needs now-old < 2*Size; a
// larger move (a device using more than two rings' worth between two
// decisions) passed every event. Positions skipped inside a chain count as
// passed, which is what a driver asking to hear about a position wants
// (Linux's virtqueue_enable_cb_delayed_packed names one that may be
// skipped).
func (q *PackedQueue) eventCrossed(offWrap, old, now uint16) bool {
	off := offWrap &^ PackedEventWrap
	if off >= q.Size {
		// Names no descriptor: a broken driver; interrupt (see
		// needsInterrupt).
		return true
	}
	m := 2 * uint32(q.Size)
	moved := uint32(now - old)
	if moved >= m {
		return true
	}
	ev := uint32(off) // wrap counter 1: the first lap of each pair
	if offWrap&PackedEventWrap == 0 {
		ev += uint32(q.Size)
	}
	return (uint32(now)-1-ev)&(m-1) < moved
}

// disableNotify asks the driver not to send available buffer
// notifications while the device drains the queue (spec 2.8.10, 2.8.21.2):
// it writes flags = DISABLE into the device event suppression area, with
// or without EVENT_IDX (QEMU does the same). Unlike the split ring's
// avail_event, doing nothing is not free here: the area starts zeroed,
// which is ENABLE, so a device that had never slept would be kicked for
// every buffer (the ring simulator showed a kick per buffer on a ring
// with a backlog), and a DESC position left behind comes round again
// after two laps. Suppression is only a hint, so no barrier is needed.
func (q *PackedQueue) disableNotify(mem *guestmem.Memory) error {
	if err := q.check(); err != nil {
		return err
	}
	// Only the device writes this area; store atomically because the
	// driver reads it concurrently.
	if err := mem.StoreUint16(q.DeviceAddr+2, PackedEventDisable); err != nil {
		return q.memErr("device event suppression", err)
	}
	return nil
}

// pending reports whether the descriptor at the device's next position is
// available: a look for a device polling its ring. Pop reads it again.
func (q *PackedQueue) pending(mem *guestmem.Memory) (bool, error) {
	if err := q.check(); err != nil {
		return false, err
	}
	return q.nextAvailable(mem)
}

func (q *PackedQueue) nextAvailable(mem *guestmem.Memory) (bool, error) {
	flags, err := mem.LoadUint16(q.descAddr(q.pos(q.availCtr)) + packedFlagsOff)
	if err != nil {
		return false, q.memErr("descriptor flags", err)
	}
	return isAvail(flags, q.wrap(q.availCtr)), nil
}

// enableNotify re-enables available buffer notifications and reports
// whether work arrived meanwhile. It publishes the request (flags =
// ENABLE; with EVENT_IDX off_wrap = the device's next position and wrap
// counter, flags = DESC), issues a full barrier, then looks at the
// descriptor at the next position again. When it returns true the driver
// may have made buffers available without notifying (it saw notifications
// disabled), so the caller must drain again instead of sleeping.
func (q *PackedQueue) enableNotify(mem *guestmem.Memory) (bool, error) {
	if err := q.check(); err != nil {
		return false, err
	}
	if q.eventIdx {
		// Spec 2.8.10: notify when the descriptor at this offset with
		// this wrap counter is made available - the very next one.
		// off_wrap and flags in one 32-bit store, so the driver
		// (virtqueue_kick_prepare_packed reads both in one u32) never
		// sees DESC with a stale position.
		offWrap := q.pos(q.availCtr)
		if q.wrap(q.availCtr) == 1 {
			offWrap |= PackedEventWrap
		}
		if err := mem.StoreUint32(q.DeviceAddr, uint32(offWrap)|PackedEventDesc<<16); err != nil {
			return false, q.memErr("device event suppression", err)
		}
	} else if err := mem.StoreUint16(q.DeviceAddr+2, PackedEventEnable); err != nil {
		return false, q.memErr("device event suppression", err)
	}
	// Ordering point, the one that prevents lost kicks
	// (virtqueue_kick_prepare_packed: the driver stores the head's flags,
	// virtio_mb, then reads the device area). Our store above must be
	// globally visible before we load the descriptor flags below.
	// Otherwise we read the old flags (nothing to do) and sleep while the
	// driver read the old DISABLE and did not kick. With the barrier on
	// both sides at least one of us sees the other.
	guestmem.Fence()
	return q.nextAvailable(mem)
}
