package virtio

import "github.com/govm/govm/guestmem"

// UsedElem is one used ring element, struct virtq_used_elem (spec 2.7.8):
// the head of a chain the device is done with and the bytes it wrote.
type UsedElem struct {
	Head uint16
	Len  uint32
}

// AddUsed returns a chain to the driver (spec 2.7.8, 2.7.14): it writes the
// used element {id: head, len: length} and then publishes the new used idx.
// length is the number of bytes the device wrote into the chain's writable
// part (Chain.Written). The caller decides about interrupting afterwards
// with needsInterrupt, so a batch of AddUsed calls costs one interrupt.
func (q *Queue) AddUsed(mem *guestmem.Memory, head uint16, length uint32) error {
	var one [1]UsedElem
	one[0] = UsedElem{Head: head, Len: length}
	return q.AddUsedBatch(mem, one[:])
}

// AddUsedBatch returns several chains to the driver at once: it writes
// every element, then publishes used idx with ONE store, so the driver sees
// all of them or none. virtio-net needs this for the buffers of a merged
// frame (spec 5.1.6.4: the device MUST use all the buffers of one packet
// together; Linux's receive_mergeable drops a frame whose later buffers are
// not used yet). Nothing is written unless every head is valid and the
// batch fits the ring.
func (q *Queue) AddUsedBatch(mem *guestmem.Memory, elems []UsedElem) error {
	if !q.Ready {
		return ErrQueueNotReady
	}
	if len(elems) > int(q.Size) {
		// More elements than slots would overwrite ones the driver has
		// not read: a device bug.
		return ErrBadHead
	}
	for _, e := range elems {
		if e.Head >= q.Size {
			return ErrBadHead
		}
	}
	for i, e := range elems {
		elem := q.usedElemAddr((q.nextUsed + uint16(i)) & (q.Size - 1))
		if err := mem.PutUint32(elem, uint32(e.Head)); err != nil {
			return q.memErr("used ring", err)
		}
		if err := mem.PutUint32(elem+4, e.Len); err != nil {
			return q.memErr("used ring", err)
		}
	}
	next := q.nextUsed + uint16(len(elems))
	// Ordering point (spec 2.7.8.2 / 2.7.14, virtio_ring.c virtqueue_get_buf
	// reads used->idx then virtio_rmb then the element): StoreUint16 is a
	// release, so every element store above is visible before the driver
	// can see an idx that covers them. Otherwise the driver could complete
	// a request with a stale id/len, or see the first buffers of a merged
	// frame without the rest.
	if err := mem.StoreUint16(q.usedIdxAddr(), next); err != nil {
		return q.memErr("used idx", err)
	}
	q.nextUsed = next
	// The chains are the driver's again (spec 2.7.8): the next Pop of
	// each head may rebuild its Chain. A head that was not in flight (a
	// device bug, not a guest one) changes nothing.
	for _, e := range elems {
		if int(e.Head) < len(q.chains) && q.chains[e.Head].inFlight {
			q.chains[e.Head].inFlight = false
			q.chains[e.Head].trim()
			q.inFlight--
		}
	}
	return nil
}

// needsInterrupt reports whether the driver wants a used buffer
// notification for the buffers added since the last call (spec 2.7.7), and
// records the current used idx as signalled. Call it once after a batch of
// AddUsed calls; when it says true, call Interrupt.SignalUsed.
//
//   - nothing used since the last call: false.
//   - NOTIFY_ON_EMPTY negotiated and the available ring is empty: true,
//     whatever the suppression (spec 6.3, legacy).
//   - EVENT_IDX: true iff used_event lies in (old, new], vring_need_event
//     (spec 2.7.7.1), where old is the used idx at the last call.
//   - otherwise: true unless VRING_AVAIL_F_NO_INTERRUPT is set (2.7.7.2).
func (q *Queue) needsInterrupt(mem *guestmem.Memory) (bool, error) {
	if !q.Ready {
		return false, ErrQueueNotReady
	}
	// Ordering point: full barrier between the used idx store (AddUsed)
	// and the loads of used_event / avail flags below (virtio_ring.c
	// virtqueue_enable_cb_prepare pairs with it: the driver writes
	// used_event or clears NO_INTERRUPT, then mb, then reads used idx).
	// Without it the load could pass the store: we would read the old
	// used_event and skip the interrupt while the driver read the old used
	// idx and went to sleep - a lost wakeup, the guest waits forever.
	guestmem.Fence()
	old, now := q.signalledUsed, q.nextUsed
	q.signalledUsed = now
	if now == old {
		return false, nil
	}
	if q.notifyOnEmpty {
		availIdx, err := mem.LoadUint16(q.availIdxAddr())
		if err != nil {
			return false, q.memErr("avail idx", err)
		}
		if availIdx == q.nextAvail {
			return true, nil
		}
	}
	if q.eventIdx {
		usedEvent, err := mem.LoadUint16(q.usedEventAddr())
		if err != nil {
			return false, q.memErr("used_event", err)
		}
		return NeedEvent(usedEvent, now, old), nil
	}
	flags, err := mem.LoadUint16(q.availFlagsAddr())
	if err != nil {
		return false, q.memErr("avail flags", err)
	}
	return flags&AvailFlagNoInterrupt == 0, nil
}

// NeedEvent is vring_need_event (spec 2.7.7.1, 2.7.10.1): whether moving an
// index from old to new crossed event, i.e. event is in [old, new) taken
// modulo 2^16. Used in both directions: interrupts (event = used_event) and
// kicks (event = avail_event, as the driver computes it).
func NeedEvent(event, new, old uint16) bool {
	return new-event-1 < new-old
}

// disableNotify asks the driver not to kick while the device drains the
// queue (spec 2.7.10). Without EVENT_IDX it sets VRING_USED_F_NO_NOTIFY.
// With EVENT_IDX it does nothing: the driver kicks only when avail idx
// crosses avail_event, which it did to wake us, so it will not kick again
// until enableNotify moves avail_event. Suppression is only a hint, a stale
// view on the driver's side costs one extra kick, so no barrier is needed.
func (q *Queue) disableNotify(mem *guestmem.Memory) error {
	if !q.Ready {
		return ErrQueueNotReady
	}
	if q.eventIdx {
		return nil
	}
	// Only the device writes used flags; store atomically because the
	// driver reads them concurrently.
	if err := mem.StoreUint16(q.usedFlagsAddr(), UsedFlagNoNotify); err != nil {
		return q.memErr("used flags", err)
	}
	return nil
}

// pending reports whether the driver has published buffers the device has
// not taken: a look at avail idx, for a device polling its ring. Pop reads
// it again when it has caught up with its last read (the acquire that
// reading the ring needs).
func (q *Queue) pending(mem *guestmem.Memory) (bool, error) {
	if !q.Ready {
		return false, ErrQueueNotReady
	}
	availIdx, err := mem.LoadUint16(q.availIdxAddr())
	if err != nil {
		return false, q.memErr("avail idx", err)
	}
	return availIdx != q.nextAvail, nil
}

// enableNotify re-enables kicks and reports whether work arrived meanwhile.
// It publishes the request (VRING_USED_F_NO_NOTIFY cleared, or avail_event
// = next avail with EVENT_IDX), issues a full barrier, then re-reads avail
// idx. When it returns true the driver may have added buffers without
// kicking (it saw notifications disabled), so the caller must drain again
// instead of sleeping.
func (q *Queue) enableNotify(mem *guestmem.Memory) (bool, error) {
	if !q.Ready {
		return false, ErrQueueNotReady
	}
	if q.eventIdx {
		// Spec 2.7.10: the driver kicks when avail idx moves past
		// avail_event; setting it to our next index asks for a kick on
		// the very next buffer.
		if err := mem.StoreUint16(q.availEventAddr(), q.nextAvail); err != nil {
			return false, q.memErr("avail_event", err)
		}
	} else if err := mem.StoreUint16(q.usedFlagsAddr(), 0); err != nil {
		return false, q.memErr("used flags", err)
	}
	// Ordering point, the one that prevents lost kicks (virtio_ring.c
	// virtqueue_kick_prepare_split: the driver stores avail idx, mb, then
	// reads avail_event / used flags). Our store above must be globally
	// visible before we load avail idx below. Otherwise: we read the old
	// avail idx (nothing to do) and sleep, while the driver read the old
	// avail_event / NO_NOTIFY and did not kick - its buffer is never seen.
	// With the barrier on both sides at least one of us sees the other.
	guestmem.Fence()
	availIdx, err := mem.LoadUint16(q.availIdxAddr())
	if err != nil {
		return false, q.memErr("avail idx", err)
	}
	return availIdx != q.nextAvail, nil
}
