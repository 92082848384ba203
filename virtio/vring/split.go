package vring

import (
	"encoding/binary"
	"fmt"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// Split is the driver side of one split virtqueue (spec 2.7), as
// virtqueue_add_split, virtqueue_kick_prepare_split,
// virtqueue_get_buf_ctx_split and detach_buf_split write it.
type Split struct {
	Config
	mem               *guestmem.Memory
	desc, avail, used uint64

	freeHead, freeTail uint16
	numFree            int
	next               []uint16 // desc_extra[i].next: the free list, driver-private
	state              []splitState

	availShadow uint16 // avail_idx_shadow
	numAdded    uint16
	lastUsed    uint16 // last_used_idx
	flagsShadow uint16 // avail_flags_shadow
	triggered   bool   // event_triggered
}

type splitState struct {
	busy     bool
	table    uint64 // indirect table, 0 if none
	tableLen uint64
}

// NewSplit returns a driver for the split ring at desc, avail, used (the
// layout of spec 2.7.2, e.g. virtio.LegacyRingAddrs) in mem. It writes
// nothing until the first Add: Linux's vring_init leaves the zeroed rings
// as they are.
func NewSplit(mem *guestmem.Memory, c Config, desc, avail, used uint64) *Split {
	d := &Split{Config: c, mem: mem, desc: desc, avail: avail, used: used,
		numFree: int(c.Num), next: make([]uint16, c.Num), state: make([]splitState, c.Num),
		freeTail: c.Num - 1}
	for i := range d.next {
		d.next[i] = uint16(i + 1) // the last one's next is never followed
	}
	return d
}

func (d *Split) usedEvent() uint64  { return d.avail + 4 + 2*uint64(d.Num) }
func (d *Split) availEvent() uint64 { return d.used + 4 + 8*uint64(d.Num) }

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("vring: %v", err)) // the caller laid the ring out in RAM
	}
}

// writeDesc is virtqueue_add_desc_split's four stores (flags, addr, len,
// next), which land on one 16-byte descriptor.
func (d *Split) writeDesc(gpa, addr uint64, n uint32, flags, next uint16) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], addr)
	binary.LittleEndian.PutUint32(b[8:], n)
	binary.LittleEndian.PutUint16(b[12:], flags)
	binary.LittleEndian.PutUint16(b[14:], next)
	must(d.mem.WriteAt(b[:], gpa))
}

// Add makes one buffer available (virtqueue_add_split) and returns its
// head, or false when there are not enough free descriptors.
func (d *Split) Add(b Buf) (uint16, bool) {
	total := b.total()
	indirect := useIndirect(&d.Config, total, d.numFree)
	descsUsed := total
	var table, tableLen uint64
	if indirect {
		// alloc_indirect_split links the table in order before filling it.
		tableLen = 16 * uint64(total)
		table = d.Tables.Alloc(tableLen)
		for i := 0; i < total; i++ {
			must(d.mem.PutUint16(table+16*uint64(i)+14, uint16(i+1)))
		}
		descsUsed = 1
	}
	if d.numFree < descsUsed {
		if indirect {
			d.Tables.Free(table, tableLen)
		}
		return 0, false
	}
	head := d.freeHead
	i := head
	for k := 0; k < total; k++ {
		flags := uint16(virtio.DescFlagNext)
		if k >= b.Out {
			flags |= virtio.DescFlagWrite
		}
		// "Last one doesn't continue": Linux clears NEXT on the last
		// descriptor after the loop, a second store to the line it
		// has just written; it is folded in here.
		if k == total-1 {
			flags &^= virtio.DescFlagNext
		}
		if indirect {
			d.writeDesc(table+16*uint64(k), d.Data, b.Len, flags, uint16(k+1))
			continue
		}
		d.writeDesc(d.desc+16*uint64(i), d.Data, b.Len, flags, d.next[i])
		if k < total-1 {
			i = d.next[i]
		}
	}
	if indirect {
		d.writeDesc(d.desc+16*uint64(head), table, uint32(tableLen), virtio.DescFlagIndirect, d.next[head])
		d.freeHead = d.next[head]
	} else {
		d.freeHead = d.next[i]
	}
	d.numFree -= descsUsed
	d.state[head] = splitState{busy: true, table: table, tableLen: tableLen}
	slot := d.availShadow & (d.Num - 1)
	must(d.mem.PutUint16(d.avail+4+2*uint64(slot), head))
	// virtio_wmb, then avail->idx: the release store orders the
	// descriptor and ring stores before it.
	d.availShadow++
	must(d.mem.StoreUint16(d.avail+2, d.availShadow))
	d.numAdded++
	return head, true
}

// KickPrepare is virtqueue_kick_prepare_split: whether the device wants a
// notification for the buffers added since the last call.
func (d *Split) KickPrepare() bool {
	guestmem.Fence() // virtio_mb: avail idx before the suppression fields
	old, now := d.availShadow-d.numAdded, d.availShadow
	d.numAdded = 0
	if d.EventIdx {
		ev, err := d.mem.LoadUint16(d.availEvent())
		must(err)
		return virtio.NeedEvent(ev, now, old)
	}
	f, err := d.mem.LoadUint16(d.used)
	must(err)
	return f&virtio.UsedFlagNoNotify == 0
}

func (d *Split) moreUsed() bool {
	idx, err := d.mem.LoadUint16(d.used + 2)
	must(err)
	return idx != d.lastUsed
}

// GetBuf is virtqueue_get_buf_ctx_split: the next used buffer's head and
// length, or false when there is none.
func (d *Split) GetBuf() (uint16, uint32, bool) {
	if !d.moreUsed() {
		return 0, 0, false
	}
	// virtio_rmb: the acquire load of used idx orders the element loads.
	slot := uint64(d.lastUsed & (d.Num - 1))
	id, err := d.mem.Uint32(d.used + 4 + 8*slot)
	must(err)
	n, err := d.mem.Uint32(d.used + 8 + 8*slot)
	must(err)
	if id >= uint32(d.Num) || !d.state[id].busy {
		panic(fmt.Sprintf("vring: used id %d is not a head", id))
	}
	d.detach(uint16(id))
	d.lastUsed++
	if d.flagsShadow&virtio.AvailFlagNoInterrupt == 0 {
		must(d.mem.StoreUint16(d.usedEvent(), d.lastUsed)) // virtio_store_mb
	}
	return uint16(id), n, true
}

// detach is detach_buf_split: it walks the chain through the shared
// table's flags and the private next links, and frees it.
func (d *Split) detach(head uint16) {
	st := d.state[head]
	d.state[head] = splitState{}
	i, n := head, 1
	for {
		f, err := d.mem.Uint16(d.desc + 16*uint64(i) + 12)
		must(err)
		if f&virtio.DescFlagNext == 0 {
			break
		}
		i = d.next[i]
		n++
	}
	if d.Reuse == FIFO {
		if d.numFree == 0 {
			d.freeHead = head
		} else {
			d.next[d.freeTail] = head
		}
		d.freeTail = i
	} else {
		d.next[i] = d.freeHead
		d.freeHead = head
	}
	d.numFree += n
	if st.table != 0 {
		d.Tables.Free(st.table, st.tableLen)
	}
}

// Interrupt is vring_interrupt's test before it runs the callback: false
// when nothing was used (IRQ_NONE).
func (d *Split) Interrupt() bool {
	if !d.moreUsed() {
		return false
	}
	if d.EventIdx {
		d.triggered = true
	}
	return true
}

// DisableCB is virtqueue_disable_cb_split.
func (d *Split) DisableCB() {
	if d.flagsShadow&virtio.AvailFlagNoInterrupt != 0 {
		return
	}
	d.flagsShadow |= virtio.AvailFlagNoInterrupt
	if d.triggered {
		return // the device will not interrupt again until re-enabled
	}
	if d.EventIdx {
		must(d.mem.StoreUint16(d.usedEvent(), 0))
	} else {
		must(d.mem.StoreUint16(d.avail, d.flagsShadow))
	}
}

// EnableCBPrepare is virtqueue_enable_cb_prepare(_split): it asks for an
// interrupt on the next used buffer and returns the index to Poll.
func (d *Split) EnableCBPrepare() uint16 {
	d.triggered = false
	if d.flagsShadow&virtio.AvailFlagNoInterrupt != 0 {
		d.flagsShadow &^= virtio.AvailFlagNoInterrupt
		if !d.EventIdx {
			must(d.mem.StoreUint16(d.avail, d.flagsShadow))
		}
	}
	must(d.mem.StoreUint16(d.usedEvent(), d.lastUsed))
	return d.lastUsed
}

// Poll is virtqueue_poll: whether buffers were used after last.
func (d *Split) Poll(last uint16) bool {
	guestmem.Fence() // virtio_mb
	idx, err := d.mem.LoadUint16(d.used + 2)
	must(err)
	return idx != last
}

// NumFree is the number of free descriptors.
func (d *Split) NumFree() int { return d.numFree }
