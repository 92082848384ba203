package virtiotest

import (
	"encoding/binary"
	"testing"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// PackedDriver is the driver side of one packed virtqueue (spec 2.8), the
// way Linux's drivers/virtio/virtio_ring.c drives one: a next-avail
// position with its wrap counter, a free list of buffer IDs, chains written
// with the head's flags last (virtqueue_add_packed), used descriptors found
// by the used wrap counter and skipped over by their chain length
// (virtqueue_get_buf_ctx_packed), and the driver event suppression area
// written as virtqueue_enable_cb_prepare_packed / disable_cb_packed do. Raw
// setters write malformed rings for hostile-guest tests.
//
// Positions and wrap counters are kept as free-running counters, as the
// device does (see virtio.PackedQueue). A PackedDriver is used from one
// goroutine at a time; the words the device polls are written with atomics
// so the race detector sees the ordering a real driver's barriers give.
type PackedDriver struct {
	t testing.TB
	// Mem is the fake guest memory, RAM its backing bytes.
	Mem *guestmem.Memory
	RAM []byte
	// Queue is the device-side queue, configured and Ready.
	Queue *virtio.PackedQueue

	size                 uint16
	desc, driver, device uint64
	dataStart, dataEnd   uint64
	dataNext             uint64

	features    uint64
	availCtr    uint16 // next_avail_idx and avail_wrap_counter
	usedCtr     uint16 // last_used_idx and its wrap counter
	kickOld     uint16 // availCtr at the last NeedsKick
	freeDescs   int    // ring positions not in flight (vq.num_free)
	freeIDs     []uint16
	bufs        map[uint16]*packedBuf
	eventShadow uint16 // driver event flags last written
}

type packedBuf struct {
	num   uint16 // ring positions (desc_state[id].num)
	first uint64 // address of the first data buffer
	in    []span
}

// NewPacked returns a driver for one packed queue of queueSize entries
// (a power of 2) in memSize bytes of fake guest RAM: the descriptor ring at
// page RingPFN, the driver and device event suppression areas right after
// it, data from the next page on.
func NewPacked(t testing.TB, memSize int, queueSize uint16) *PackedDriver {
	t.Helper()
	ram := make([]byte, memSize)
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
	if err != nil {
		t.Fatalf("virtiotest: %v", err)
	}
	d := &PackedDriver{t: t, Mem: mem, RAM: ram, size: queueSize}
	d.desc = RingPFN * virtio.LegacyAlign
	d.driver = d.desc + 16*uint64(queueSize)
	d.device = d.driver + 4
	d.dataStart = (d.device + 4 + virtio.LegacyAlign - 1) &^ (virtio.LegacyAlign - 1)
	if d.dataStart >= uint64(memSize) {
		t.Fatalf("virtiotest: %d bytes of memory too small for the ring", memSize)
	}
	d.dataEnd = uint64(memSize) &^ 15
	d.Queue = virtio.NewPackedQueue(queueSize)
	d.Reset()
	return d
}

// SetFeatures negotiates ring features on both sides.
func (d *PackedDriver) SetFeatures(f uint64) {
	d.features = f
	d.Queue.SetFeatures(f)
}

func (d *PackedDriver) eventIdx() bool {
	return d.features&virtio.Bit(virtio.FeatureRingEventIdx) != 0
}

// Reset is a device reset seen from both sides: the queue forgets
// everything, the driver zeroes the ring (spec 2.8.13: "the descriptor
// ring is zero-initialized") and both event areas, frees every ID and
// starts both wrap counters at 1. Negotiated features are kept.
func (d *PackedDriver) Reset() {
	clear(d.RAM[d.desc : d.device+4])
	d.availCtr, d.usedCtr, d.kickOld = 0, 0, 0
	d.freeDescs = int(d.size)
	d.freeIDs = d.freeIDs[:0]
	for j := int(d.size) - 1; j >= 0; j-- {
		d.freeIDs = append(d.freeIDs, uint16(j))
	}
	d.bufs = map[uint16]*packedBuf{}
	d.eventShadow = virtio.PackedEventEnable
	d.dataNext = d.dataStart
	q := d.Queue
	q.Reset()
	q.DescAddr, q.DriverAddr, q.DeviceAddr = d.desc, d.driver, d.device
	q.Ready = true
	q.SetFeatures(d.features)
}

// Alloc reserves n bytes (16-byte aligned) of the data area, used
// circularly: tests must not keep more than the area in flight.
func (d *PackedDriver) Alloc(n uint64) uint64 {
	n = (n + 15) &^ 15
	if n > d.dataEnd-d.dataStart {
		d.t.Errorf("virtiotest: allocation of %d bytes larger than the data area", n)
		return d.dataStart
	}
	if d.dataNext+n > d.dataEnd {
		d.dataNext = d.dataStart
	}
	a := d.dataNext
	d.dataNext += n
	return a
}

// FreeDescs is the number of ring positions not in flight; FreeIDs the
// number of buffer IDs.
func (d *PackedDriver) FreeDescs() int { return d.freeDescs }
func (d *PackedDriver) FreeIDs() int   { return len(d.freeIDs) } // see FreeDescs

func (d *PackedDriver) pos(c uint16) uint16  { return c & (d.size - 1) }
func (d *PackedDriver) wrap(c uint16) uint16 { return 1 ^ ((c / d.size) & 1) }

// PackedAvailFlags is AVAIL/USED as a driver sets them to make a
// descriptor available in a lap with wrap counter w (spec 2.8.1).
func PackedAvailFlags(w uint16) uint16 {
	if w&1 == 1 {
		return virtio.PackedDescFlagAvail
	}
	return virtio.PackedDescFlagUsed
}

// NextAvail is the position and wrap counter the next descriptor goes to.
func (d *PackedDriver) NextAvail() (pos, wrap uint16) {
	return d.pos(d.availCtr), d.wrap(d.availCtr)
}

// TryAdd makes a buffer of len(out) readable elements (with those
// contents) and writable elements of the given sizes (zeroed) available as
// one chain, and returns its ID. ok is false when there are not enough
// free ring positions.
func (d *PackedDriver) TryAdd(out [][]byte, in []int) (id uint16, ok bool) {
	n := len(out) + len(in)
	if n == 0 || n > d.freeDescs || len(d.freeIDs) == 0 {
		return 0, false
	}
	id = d.takeID()
	b := &packedBuf{num: uint16(n)}
	head := d.availCtr
	var headFlags uint16
	for i := 0; i < n; i++ {
		addr, ln, flags := d.element(b, out, in, i)
		flags |= PackedAvailFlags(d.wrap(d.availCtr))
		if i+1 < n {
			flags |= virtio.DescFlagNext
		}
		p := d.pos(d.availCtr)
		if i == 0 {
			headFlags = flags
			d.writeAddrLen(d.desc+16*uint64(p), addr, uint32(ln))
		} else {
			// Linux writes the id into every descriptor; the spec
			// asks for it in the last one (2.8.6).
			d.writeDesc(d.desc+16*uint64(p), addr, uint32(ln), id, flags)
		}
		d.availCtr++
	}
	d.freeDescs -= n
	d.bufs[id] = b
	d.publish(d.pos(head), id, headFlags)
	return id, true
}

// Add is TryAdd failing the test when the ring is full.
func (d *PackedDriver) Add(out [][]byte, in []int) uint16 {
	d.t.Helper()
	id, ok := d.TryAdd(out, in)
	if !ok {
		d.t.Fatalf("virtiotest: no room for a chain of %d descriptors", len(out)+len(in))
	}
	return id
}

// AddIndirect makes the buffer available through one ring descriptor
// pointing at an indirect table (spec 2.8.7), as
// virtqueue_add_indirect_packed does: entries carry only WRITE.
func (d *PackedDriver) AddIndirect(out [][]byte, in []int) uint16 {
	d.t.Helper()
	if d.freeDescs == 0 || len(d.freeIDs) == 0 {
		d.t.Fatalf("virtiotest: no free descriptor")
	}
	n := len(out) + len(in)
	id := d.takeID()
	b := &packedBuf{num: 1}
	table := d.Alloc(uint64(16 * n))
	for i := 0; i < n; i++ {
		addr, ln, flags := d.element(b, out, in, i)
		d.writeDesc(table+16*uint64(i), addr, uint32(ln), 0, flags)
	}
	p := d.pos(d.availCtr)
	flags := virtio.DescFlagIndirect | PackedAvailFlags(d.wrap(d.availCtr))
	d.writeAddrLen(d.desc+16*uint64(p), table, uint32(16*n))
	d.availCtr++
	d.freeDescs--
	d.bufs[id] = b
	d.publish(p, id, flags)
	return id
}

func (d *PackedDriver) takeID() uint16 {
	id := d.freeIDs[len(d.freeIDs)-1]
	d.freeIDs = d.freeIDs[:len(d.freeIDs)-1]
	return id
}

// publish writes id and flags of the head at ring position p with one
// release store, after everything else of the chain (virtio_wmb, then the
// head's flags). The device polls that word, so the id goes with the flags
// rather than in a plain store the race detector would see racing it.
func (d *PackedDriver) publish(p, id, flags uint16) {
	if err := d.Mem.StoreUint32(d.desc+16*uint64(p)+12, uint32(id)|uint32(flags)<<16); err != nil {
		d.t.Errorf("virtiotest: %v", err)
	}
}

// element allocates and fills the i-th element of a buffer.
func (d *PackedDriver) element(b *packedBuf, out [][]byte, in []int, i int) (addr, ln uint64, flags uint16) {
	if i < len(out) {
		ln = uint64(len(out[i]))
		addr = d.Alloc(ln)
		copy(d.RAM[addr:], out[i])
	} else {
		ln = uint64(in[i-len(out)])
		addr = d.Alloc(ln)
		clear(d.RAM[addr : addr+ln])
		b.in = append(b.in, span{addr, ln})
		flags = virtio.DescFlagWrite
	}
	if i == 0 {
		b.first = addr
	}
	return addr, ln, flags
}

// Segment0 is the address of the first element of buffer id, in flight,
// so a test can write a request into it (before the device pops it).
func (d *PackedDriver) Segment0(id uint16) uint64 {
	b, ok := d.bufs[id]
	if !ok {
		d.t.Errorf("virtiotest: %d is not a buffer in flight", id)
		return 0
	}
	return b.first
}

// Collect returns the buffers the device has used since the last Collect,
// in the order it wrote them, and frees their IDs and ring positions: it
// polls the flags at the used position, reads id and len after them,
// skips the buffer's chain length, flips the wrap counter at the end of
// the ring (virtqueue_get_buf_ctx_packed). With notifications armed at a
// descriptor (EnableCB with EVENT_IDX) it moves off_wrap along, as Linux
// does after each buffer.
func (d *PackedDriver) Collect() []UsedElem {
	var es []UsedElem
	for d.MoreUsed() {
		gpa := d.desc + 16*uint64(d.pos(d.usedCtr))
		flags := d.load16(gpa + 14)
		var raw [14]byte
		if err := d.Mem.ReadAt(raw[:], gpa); err != nil {
			d.t.Errorf("virtiotest: used descriptor: %v", err)
			return es
		}
		id := binary.LittleEndian.Uint16(raw[12:])
		e := UsedElem{ID: id, Len: binary.LittleEndian.Uint32(raw[8:])}
		b, ok := d.bufs[id]
		if !ok || id >= d.size {
			d.t.Errorf("virtiotest: used id %d is not a buffer in flight", id)
			return append(es, e)
		}
		if e.Len > 0 && flags&virtio.DescFlagWrite == 0 {
			// Spec 2.8.3: len is reserved without WRITE.
			d.t.Errorf("virtiotest: used id %d: len %d without VIRTQ_DESC_F_WRITE", id, e.Len)
		}
		for _, s := range b.in {
			e.In = append(e.In, append([]byte(nil), d.RAM[s.addr:s.addr+s.len]...))
		}
		delete(d.bufs, id)
		d.freeIDs = append(d.freeIDs, id)
		d.freeDescs += int(b.num)
		d.usedCtr += b.num
		es = append(es, e)
		if d.eventShadow == virtio.PackedEventDesc {
			d.store16(d.driver, d.offWrap(d.usedCtr))
			guestmem.Fence()
		}
	}
	return es
}

// MoreUsed reports whether the descriptor at the used position is used in
// the current lap (is_used_desc_packed): AVAIL and USED both equal to the
// used wrap counter. It is an acquire: the descriptor may be read after.
func (d *PackedDriver) MoreUsed() bool {
	flags := d.load16(d.desc + 16*uint64(d.pos(d.usedCtr)) + 14)
	w := d.wrap(d.usedCtr)
	avail := flags&virtio.PackedDescFlagAvail != 0
	used := flags&virtio.PackedDescFlagUsed != 0
	return avail == used && used == (w == 1)
}

// UsedPos is the position and wrap counter where the next used descriptor
// is expected.
func (d *PackedDriver) UsedPos() (pos, wrap uint16) { return d.pos(d.usedCtr), d.wrap(d.usedCtr) }

func (d *PackedDriver) offWrap(c uint16) uint16 {
	v := d.pos(c)
	if d.wrap(c) == 1 {
		v |= virtio.PackedEventWrap
	}
	return v
}

// DisableCB asks for no used buffer notifications
// (virtqueue_disable_cb_packed).
func (d *PackedDriver) DisableCB() {
	d.eventShadow = virtio.PackedEventDisable
	d.store16(d.driver+2, d.eventShadow)
}

// EnableCB asks for a notification on the next used buffer (with
// EVENT_IDX: off_wrap = the used position, then flags = DESC; else flags
// = ENABLE), then a full barrier and a look at the ring, as
// virtqueue_enable_cb does: true means buffers were used meanwhile and the
// caller must Collect before sleeping.
func (d *PackedDriver) EnableCB() bool {
	if d.eventIdx() {
		d.store16(d.driver, d.offWrap(d.usedCtr))
		d.eventShadow = virtio.PackedEventDesc
	} else {
		d.eventShadow = virtio.PackedEventEnable
	}
	d.store16(d.driver+2, d.eventShadow)
	guestmem.Fence()
	return d.MoreUsed()
}

// NeedsKick is the driver's notification decision for the descriptors made
// available since the last call (virtqueue_kick_prepare_packed): a full
// barrier after the flags stores, then one read of the device event
// suppression area. DESC (EVENT_IDX) kicks when the descriptor it names
// was among those made available.
func (d *PackedDriver) NeedsKick() bool {
	guestmem.Fence()
	old, now := d.kickOld, d.availCtr
	d.kickOld = now
	offWrap, flags := d.DeviceEvent()
	if flags != virtio.PackedEventDesc || !d.eventIdx() {
		return flags != virtio.PackedEventDisable
	}
	off := offWrap &^ virtio.PackedEventWrap
	if off >= d.size {
		return true
	}
	// The counters with that position and wrap counter are one residue
	// modulo 2*size: kick iff it lies in [old, now).
	m := 2 * uint32(d.size)
	ev := uint32(off)
	if offWrap&virtio.PackedEventWrap == 0 {
		ev += uint32(d.size)
	}
	moved := uint32(now - old)
	return moved >= m || (ev-uint32(old))&(m-1) < moved
}
