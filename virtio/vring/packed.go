package vring

import (
	"encoding/binary"
	"fmt"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// Packed-ring values (spec 2.8.1, 2.8.10), by virtio_ring.h's names.
const (
	packedAvail    = virtio.PackedDescFlagAvail
	packedUsed     = virtio.PackedDescFlagUsed
	eventEnable    = virtio.PackedEventEnable
	eventDisable   = virtio.PackedEventDisable
	eventDesc      = virtio.PackedEventDesc
	eventWrapShift = 15 // VRING_PACKED_EVENT_F_WRAP_CTR: PackedEventWrap's bit
)

// Packed is the driver side of one packed virtqueue (spec 2.8), as
// virtqueue_add_packed, virtqueue_add_indirect_packed,
// virtqueue_kick_prepare_packed, virtqueue_get_buf_ctx_packed and
// detach_buf_packed write it.
type Packed struct {
	Config
	mem                   *guestmem.Memory
	ring, driverEv, devEv uint64
	nextAvail             uint16 // next_avail_idx
	availWrap             bool   // avail_wrap_counter
	availUsedFlags        uint16 // avail_used_flags
	freeHead, freeTail    uint16
	numFree               int
	next                  []uint16 // desc_extra[id].next: free list of buffer ids
	state                 []packedState
	numAdded              uint16
	lastUsed              uint16 // last_used_idx: position | used wrap counter << 15
	evShadow              uint16 // event_flags_shadow
	triggered             bool
}

type packedState struct {
	busy      bool
	num, last uint16
	table     uint64
	tableLen  uint64
}

// NewPacked returns a driver for the packed ring at ring (Num 16-byte
// descriptors) with its driver and device event suppression areas
// (spec 2.8.10) at driverEv and devEv.
func NewPacked(mem *guestmem.Memory, c Config, ring, driverEv, devEv uint64) *Packed {
	d := &Packed{Config: c, mem: mem, ring: ring, driverEv: driverEv, devEv: devEv,
		availWrap: true, availUsedFlags: packedAvail, numFree: int(c.Num),
		next: make([]uint16, c.Num), state: make([]packedState, c.Num),
		freeTail: c.Num - 1, lastUsed: 1 << eventWrapShift}
	for i := range d.next {
		d.next[i] = uint16(i + 1)
	}
	return d
}

func (d *Packed) descAddr(i uint16) uint64 { return d.ring + 16*uint64(i) }

// writeBody stores addr and len of a descriptor. Its id and flags share
// one 32-bit word, which idFlags stores: Linux writes them as two fields,
// but the device polls that word with an atomic load (guestmem's 16-bit
// load is one of the aligned word), so a plain store beside it would be a
// data race to Go. It is the same line either way for the cache model.
func (d *Packed) writeBody(gpa, addr uint64, n uint32) {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[0:], addr)
	binary.LittleEndian.PutUint32(b[8:], n)
	must(d.mem.WriteAt(b[:], gpa))
}

// idFlags stores a descriptor's id and flags with one atomic store; for a
// chain's head it is the release that publishes the chain.
func (d *Packed) idFlags(gpa uint64, id, flags uint16) {
	must(d.mem.StoreUint32(gpa+12, uint32(id)|uint32(flags)<<16))
}

// Add makes one buffer available and returns its buffer id, or false
// when the ring has no room.
func (d *Packed) Add(b Buf) (uint16, bool) {
	total := b.total()
	if useIndirect(&d.Config, total, d.numFree) {
		return d.addIndirect(b)
	}
	if d.numFree < total {
		return 0, false
	}
	head, id := d.nextAvail, d.freeHead
	i, curr, prev := head, id, id
	var headFlags uint16
	for k := 0; k < total; k++ {
		flags := d.availUsedFlags
		if k < total-1 {
			flags |= virtio.DescFlagNext
		}
		if k >= b.Out {
			flags |= virtio.DescFlagWrite
		}
		d.writeBody(d.descAddr(i), d.Data, b.Len)
		if i == head {
			headFlags = flags
		} else {
			d.idFlags(d.descAddr(i), id, flags)
		}
		prev, curr = curr, d.next[curr]
		if i++; i >= d.Num {
			i = 0
			d.availUsedFlags ^= packedAvail | packedUsed
		}
	}
	if i <= head {
		d.availWrap = !d.availWrap
	}
	d.numFree -= total
	d.nextAvail = i
	d.freeHead = curr
	d.state[id] = packedState{busy: true, num: uint16(total), last: prev}
	// virtio_wmb, then the head's flags: the release store publishes
	// the whole chain (spec 2.8.21: the first descriptor last).
	d.idFlags(d.descAddr(head), id, headFlags)
	d.numAdded += uint16(total)
	return id, true
}

func (d *Packed) addIndirect(b Buf) (uint16, bool) {
	total := b.total()
	tableLen := 16 * uint64(total)
	table := d.Tables.Alloc(tableLen)
	if d.numFree < 1 {
		d.Tables.Free(table, tableLen)
		return 0, false
	}
	for k := 0; k < total; k++ {
		var flags uint16
		if k >= b.Out {
			flags = virtio.DescFlagWrite
		}
		var e [16]byte
		binary.LittleEndian.PutUint16(e[14:], flags)
		binary.LittleEndian.PutUint64(e[0:], d.Data)
		binary.LittleEndian.PutUint32(e[8:], b.Len)
		must(d.mem.WriteAt(e[:], table+16*uint64(k)))
	}
	head, id := d.nextAvail, d.freeHead
	d.writeBody(d.descAddr(head), table, uint32(tableLen))
	flags := virtio.DescFlagIndirect | d.availUsedFlags
	n := head + 1
	if n >= d.Num {
		n = 0
		d.availUsedFlags ^= packedAvail | packedUsed
		d.availWrap = !d.availWrap
	}
	d.nextAvail = n
	d.numFree--
	d.freeHead = d.next[id]
	d.state[id] = packedState{busy: true, num: 1, last: id, table: table, tableLen: tableLen}
	d.idFlags(d.descAddr(head), id, uint16(flags)) // after virtio_wmb
	d.numAdded++
	return id, true
}

// KickPrepare is virtqueue_kick_prepare_packed.
func (d *Packed) KickPrepare() bool {
	guestmem.Fence() // virtio_mb: the head flags before the device's area
	old, now := d.nextAvail-d.numAdded, d.nextAvail
	d.numAdded = 0
	snap, err := d.mem.LoadUint32(d.devEv) // off_wrap and flags in one load
	must(err)
	offWrap, flags := uint16(snap), uint16(snap>>16)
	if flags != eventDesc {
		return flags != eventDisable
	}
	ev := offWrap &^ (1 << eventWrapShift)
	if (offWrap>>eventWrapShift == 1) != d.availWrap {
		ev -= d.Num
	}
	return virtio.NeedEvent(ev, now, old)
}

func (d *Packed) isUsed(pos uint16, wrap bool) bool {
	f, err := d.mem.LoadUint16(d.descAddr(pos) + 14)
	must(err)
	avail, used := f&packedAvail != 0, f&packedUsed != 0
	return avail == used && used == wrap
}

func (d *Packed) moreUsed() bool {
	return d.isUsed(d.lastUsed&^(1<<eventWrapShift), d.lastUsed>>eventWrapShift == 1)
}

// GetBuf is virtqueue_get_buf_ctx_packed.
func (d *Packed) GetBuf() (uint16, uint32, bool) {
	if !d.moreUsed() {
		return 0, 0, false
	}
	// virtio_rmb: the acquire load of the flags orders id and len.
	pos := d.lastUsed &^ (1 << eventWrapShift)
	wrap := d.lastUsed>>eventWrapShift == 1
	id, err := d.mem.Uint16(d.descAddr(pos) + 12)
	must(err)
	n, err := d.mem.Uint32(d.descAddr(pos) + 8)
	must(err)
	if id >= d.Num || !d.state[id].busy {
		panic(fmt.Sprintf("vring: used id %d is not a head", id))
	}
	st := d.state[id]
	d.detach(id, st)
	pos += st.num
	if pos >= d.Num {
		pos -= d.Num
		wrap = !wrap
	}
	d.lastUsed = pos
	if wrap {
		d.lastUsed |= 1 << eventWrapShift
	}
	if d.evShadow == eventDesc {
		must(d.mem.StoreUint16(d.driverEv, d.lastUsed)) // virtio_store_mb
	}
	return id, n, true
}

// detach is detach_buf_packed: the id goes back on the free list.
func (d *Packed) detach(id uint16, st packedState) {
	d.state[id] = packedState{}
	if d.Reuse == FIFO {
		if d.numFree == 0 {
			d.freeHead = id
		} else {
			d.next[d.freeTail] = id
		}
		d.freeTail = st.last
	} else {
		d.next[st.last] = d.freeHead
		d.freeHead = id
	}
	d.numFree += int(st.num)
	if st.table != 0 {
		d.Tables.Free(st.table, st.tableLen)
	}
}

// Interrupt is vring_interrupt's test before the callback.
func (d *Packed) Interrupt() bool {
	if !d.moreUsed() {
		return false
	}
	if d.EventIdx {
		d.triggered = true
	}
	return true
}

// DisableCB is virtqueue_disable_cb_packed.
func (d *Packed) DisableCB() {
	if d.evShadow == eventDisable {
		return
	}
	d.evShadow = eventDisable
	if d.triggered {
		return
	}
	must(d.mem.StoreUint16(d.driverEv+2, d.evShadow))
}

// EnableCBPrepare is virtqueue_enable_cb_prepare_packed.
func (d *Packed) EnableCBPrepare() uint16 {
	d.triggered = false
	if d.EventIdx {
		must(d.mem.StoreUint16(d.driverEv, d.lastUsed)) // then virtio_wmb
	}
	if d.evShadow == eventDisable {
		d.evShadow = eventEnable
		if d.EventIdx {
			d.evShadow = eventDesc
		}
		must(d.mem.StoreUint16(d.driverEv+2, d.evShadow))
	}
	return d.lastUsed
}

// Poll is virtqueue_poll_packed.
func (d *Packed) Poll(last uint16) bool {
	guestmem.Fence()
	return d.isUsed(last&^(1<<eventWrapShift), last>>eventWrapShift == 1)
}

// NumFree is the number of free descriptors.
func (d *Packed) NumFree() int { return d.numFree }
