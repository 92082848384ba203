package virtiotest

import (
	"encoding/binary"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// Raw ring access, for hostile-guest tests and for reading results.

// SetDesc writes descriptor i of the descriptor table verbatim.
func (d *Driver) SetDesc(i uint16, addr uint64, length uint32, flags, next uint16) {
	d.writeDesc(d.desc+16*uint64(i), addr, length, flags, next)
}

// SetIndirectDesc writes entry i of an indirect table at table verbatim.
func (d *Driver) SetIndirectDesc(table uint64, i uint16, addr uint64, length uint32, flags, next uint16) {
	d.writeDesc(table+16*uint64(i), addr, length, flags, next)
}

func (d *Driver) writeDesc(gpa, addr uint64, length uint32, flags, next uint16) {
	b, err := d.Mem.Slice(gpa, 16)
	if err != nil {
		d.t.Errorf("virtiotest: descriptor at %#x: %v", gpa, err)
		return
	}
	binary.LittleEndian.PutUint64(b[0:], addr)
	binary.LittleEndian.PutUint32(b[8:], length)
	binary.LittleEndian.PutUint16(b[12:], flags)
	binary.LittleEndian.PutUint16(b[14:], next)
}

// DescAddr, AvailAddr and UsedAddr are where the rings are.
func (d *Driver) DescAddr() uint64  { return d.desc }
func (d *Driver) AvailAddr() uint64 { return d.avail } // see DescAddr
func (d *Driver) UsedAddr() uint64  { return d.used }  // see DescAddr

// Size is the queue size.
func (d *Driver) Size() uint16 { return d.size }

// SetAvailIdx publishes an arbitrary avail idx (e.g. a jump ahead).
func (d *Driver) SetAvailIdx(v uint16) {
	d.availIdx = v
	d.store16(d.avail+2, v)
}

// SetAvailRing writes avail ring slot (taken modulo size) without
// publishing.
func (d *Driver) SetAvailRing(slot, head uint16) {
	d.put16(d.avail+4+2*uint64(slot&(d.size-1)), head)
}

// AvailIdx is the driver's avail idx.
func (d *Driver) AvailIdx() uint16 { return d.availIdx }

// SetAvailFlags writes avail->flags (VRING_AVAIL_F_NO_INTERRUPT).
func (d *Driver) SetAvailFlags(f uint16) { d.store16(d.avail, f) }

// SetUsedEvent writes used_event, the avail ring's trailing field (spec
// 2.7.7).
func (d *Driver) SetUsedEvent(v uint16) { d.store16(d.avail+4+2*uint64(d.size), v) }

// AvailEvent reads avail_event, the used ring's trailing field (2.7.10).
func (d *Driver) AvailEvent() uint16 { return d.load16(d.used + 4 + 8*uint64(d.size)) }

// UsedFlags reads used->flags (VRING_USED_F_NO_NOTIFY).
func (d *Driver) UsedFlags() uint16 { return d.load16(d.used) }

// UsedIdx reads used->idx with an acquire load, so the elements it covers
// may be read after it.
func (d *Driver) UsedIdx() uint16 { return d.load16(d.used + 2) }

// Used returns used ring element i (modulo size).
func (d *Driver) Used(i uint16) (id, length uint32) {
	a := d.used + 4 + 8*uint64(i&(d.size-1))
	b, err := d.Mem.Slice(a, 8)
	if err != nil {
		d.t.Errorf("virtiotest: used ring: %v", err)
		return 0, 0
	}
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
}

// Collect returns the used elements published since the last Collect and
// frees their descriptors, copying out the writable buffers of chains this
// driver built.
func (d *Driver) Collect() []UsedElem {
	var es []UsedElem
	idx := d.UsedIdx()
	for ; d.lastUsed != idx; d.lastUsed++ {
		id, ln := d.Used(d.lastUsed)
		e := UsedElem{ID: uint16(id), Len: ln}
		c, ok := d.chains[uint16(id)]
		if !ok || id >= uint32(d.size) {
			d.t.Errorf("virtiotest: used id %d is not a chain in flight", id)
			es = append(es, e)
			continue
		}
		for _, s := range c.in {
			e.In = append(e.In, append([]byte(nil), d.RAM[s.addr:s.addr+s.len]...))
		}
		delete(d.chains, uint16(id))
		d.free = append(d.free, c.descs...)
		es = append(es, e)
	}
	return es
}

// NeedsKick is the driver's notification decision for the buffers
// published since the last call (virtqueue_kick_prepare_split): a full
// barrier after the avail idx store, then avail_event with EVENT_IDX or
// VRING_USED_F_NO_NOTIFY without.
func (d *Driver) NeedsKick() bool {
	guestmem.Fence()
	old, now := d.kickOld, d.availIdx
	d.kickOld = now
	if d.features&virtio.Bit(virtio.FeatureRingEventIdx) != 0 {
		return virtio.NeedEvent(d.AvailEvent(), now, old)
	}
	return d.UsedFlags()&virtio.UsedFlagNoNotify == 0
}

// Kick notifies the device the way the transport does: it rings the
// queue's doorbell, so pending kicks coalesce.
func (d *Driver) Kick() { d.bell.Ring() }

// KickIfNeeded kicks when NeedsKick says so, and reports whether it did.
func (d *Driver) KickIfNeeded() bool {
	if d.NeedsKick() {
		d.Kick()
		return true
	}
	return false
}

// Bell is the doorbell Kick rings (Activation.Bells entry, Server.Bell).
// A device stopped by closing its Server's Stop is woken by a Kick.
func (d *Driver) Bell() *virtio.Doorbell { return d.bell }

func (d *Driver) put16(gpa uint64, v uint16) {
	if err := d.Mem.PutUint16(gpa, v); err != nil {
		d.t.Errorf("virtiotest: %v", err)
	}
}

func (d *Driver) store16(gpa uint64, v uint16) {
	if err := d.Mem.StoreUint16(gpa, v); err != nil {
		d.t.Errorf("virtiotest: %v", err)
	}
}

func (d *Driver) load16(gpa uint64) uint16 {
	v, err := d.Mem.LoadUint16(gpa)
	if err != nil {
		d.t.Errorf("virtiotest: %v", err)
	}
	return v
}
