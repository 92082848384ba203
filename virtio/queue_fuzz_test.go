package virtio_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

const fuzzMem = 16 << 10

// checkChain asserts what Pop promises about a chain it returned: every
// buffer inside RAM, readable before writable, lengths consistent, and
// Reader/Writer bounded by them.
func checkChain(t *testing.T, mem *guestmem.Memory, q *virtio.Queue, c *virtio.Chain) {
	var rd, wr uint64
	seenWrite := false
	for _, s := range c.Segments() {
		if _, err := mem.Slice(s.Addr, uint64(s.Len)); err != nil {
			t.Fatalf("chain %d segment %+v outside RAM", c.Head, s)
		}
		if !s.Write && seenWrite {
			t.Fatalf("chain %d: readable after writable", c.Head)
		}
		if s.Write {
			seenWrite = true
			wr += uint64(s.Len)
		} else {
			rd += uint64(s.Len)
		}
	}
	if c.Head >= q.Size || rd != c.ReadableLen() || wr != c.WritableLen() {
		t.Fatalf("chain %d: head/lengths inconsistent: %d/%d vs %d/%d", c.Head, rd, wr, c.ReadableLen(), c.WritableLen())
	}
	n, err := io.Copy(io.Discard, c.Reader())
	if err != nil || uint64(n) != rd {
		t.Fatalf("read %d, %v; want %d", n, err, rd)
	}
}

// fuzzDriver fills the whole fake RAM with data (repeated), then makes the
// ring configuration sane enough for Pop to look at the contents.
func fuzzDriver(t *testing.T, data []byte, size uint16, features uint64) *virtiotest.Driver {
	d := virtiotest.New(t, fuzzMem, size)
	d.SetFeatures(features)
	if len(data) > 0 {
		for i := range d.RAM {
			d.RAM[i] = data[i%len(data)]
		}
	}
	return d
}

// seedHeadTwice is a RAM image for a queue of 2 whose avail ring offers
// head 0 twice: with the first chain held, the second Pop meets it in
// flight.
func seedHeadTwice() []byte {
	ram := make([]byte, 0x1030)
	desc, avail, _ := virtio.LegacyRingAddrs(virtiotest.RingPFN, 2)
	binary.LittleEndian.PutUint64(ram[desc:], 0x3000)
	binary.LittleEndian.PutUint32(ram[desc+8:], 8)
	binary.LittleEndian.PutUint16(ram[avail+2:], 2) // ring[0] = ring[1] = 0
	return ram
}

// FuzzPop: arbitrary ring and descriptor contents. Pop never panics, only
// returns chains that are inside RAM, and writes nothing; AddUsed writes
// only the used ring. Some chains are held across later Pops (as virtio-net
// RX holds them), chosen by feat's upper bits: the queue reuses one Chain
// per head, so Pop must never hand out a head in flight (it refuses it as
// ErrHeadInFlight) and must leave a held chain as it gave it.
func FuzzPop(f *testing.F) {
	f.Add(uint8(3), uint8(0xff), []byte{})
	f.Add(uint8(2), uint8(0), []byte{0, 0x80, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0})
	f.Add(uint8(4), uint8(1), []byte{0x00, 0x20, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 4, 0, 0, 0, 1, 0})
	f.Add(uint8(1), uint8(0xfc), seedHeadTwice())
	f.Fuzz(func(t *testing.T, sizeLog, feat uint8, data []byte) {
		size := uint16(1) << (sizeLog % 7)
		var features uint64
		if feat&1 != 0 {
			features |= indirectFeatures
		}
		if feat&2 != 0 {
			features |= eventIdx
		}
		hold := feat >> 2
		d := fuzzDriver(t, data, size, features)
		usedStart, usedEnd := d.UsedAddr(), d.UsedAddr()+4+8*uint64(size)
		before := append([]byte(nil), d.RAM...)
		q := d.Queue
		type heldChain struct {
			c      *virtio.Chain
			head   uint16
			segs   []virtio.Segment
			rd, wr uint64
		}
		var held []heldChain
		isHeld := func(head uint16) bool {
			for _, h := range held {
				if h.head == head {
					return true
				}
			}
			return false
		}
		for i := 0; i < 2*int(size)+2; i++ {
			c, err := q.Pop(d.Mem)
			if err != nil {
				var ge *virtio.GuestError
				if !errors.As(err, &ge) {
					t.Fatalf("Pop error %T %v is not a GuestError", err, err)
				}
				if errors.Is(err, virtio.ErrHeadInFlight) && !isHeld(ge.Head) {
					t.Fatalf("%v, but head %d is not in flight", err, ge.Head)
				}
				break
			}
			if c == nil {
				break
			}
			if isHeld(c.Head) {
				t.Fatalf("head %d popped again while in flight", c.Head)
			}
			checkChain(t, d.Mem, q, c)
			if hold>>(i%6)&1 != 0 {
				held = append(held, heldChain{c, c.Head, append([]virtio.Segment(nil), c.Segments()...),
					c.ReadableLen(), c.WritableLen()})
				continue
			}
			if err := q.AddUsed(d.Mem, c.Head, 0); err != nil {
				t.Fatalf("AddUsed: %v", err)
			}
		}
		if q.InFlight() != len(held) {
			t.Fatalf("InFlight = %d, %d chains held", q.InFlight(), len(held))
		}
		var elems []virtio.UsedElem
		for _, h := range held {
			if h.c.Head != h.head || !slices.Equal(h.c.Segments(), h.segs) ||
				h.c.ReadableLen() != h.rd || h.c.WritableLen() != h.wr {
				t.Fatalf("chain %d changed while held: %+v, was %+v", h.head, h.c.Segments(), h.segs)
			}
			elems = append(elems, virtio.UsedElem{Head: h.head})
		}
		if err := q.AddUsedBatch(d.Mem, elems); err != nil {
			t.Fatalf("AddUsedBatch: %v", err)
		}
		if q.InFlight() != 0 {
			t.Fatalf("InFlight = %d after every chain was used", q.InFlight())
		}
		q.NeedsInterrupt(d.Mem)
		after := d.RAM
		if !bytes.Equal(before[:usedStart], after[:usedStart]) || !bytes.Equal(before[usedEnd:], after[usedEnd:]) {
			t.Fatal("guest memory outside the used ring changed")
		}
	})
}

// FuzzIndirect: an indirect table with arbitrary contents and length.
func FuzzIndirect(f *testing.F) {
	f.Add(uint32(32), []byte{0, 0x30, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 1, 0,
		0, 0x31, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 2, 0, 0, 0})
	f.Add(uint32(16), []byte{0, 0x30, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 4, 0, 0, 0})
	f.Fuzz(func(t *testing.T, tableLen uint32, table []byte) {
		const tableAddr = 0x2000
		d := fuzzDriver(t, nil, 8, indirectFeatures|eventIdx)
		copy(d.RAM[tableAddr:fuzzMem], table)
		d.SetDesc(0, tableAddr, tableLen, virtio.DescFlagIndirect, 0)
		d.PublishAvail(0)
		before := append([]byte(nil), d.RAM...)
		c, err := d.Queue.Pop(d.Mem)
		if err != nil {
			if _, ok := err.(*virtio.GuestError); !ok {
				t.Fatalf("Pop error %T %v is not a GuestError", err, err)
			}
			if c != nil {
				t.Fatal("chain and error")
			}
		} else if c != nil {
			checkChain(t, d.Mem, d.Queue, c)
		} else {
			t.Fatal("published chain not seen")
		}
		if !bytes.Equal(before, d.RAM) {
			t.Fatal("Pop wrote guest memory")
		}
	})
}
