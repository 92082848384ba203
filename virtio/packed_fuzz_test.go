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

// checkPackedChain asserts what Pop promises about a chain it returned:
// a buffer ID in range, every buffer inside RAM, readable before writable,
// lengths consistent and the Reader bounded by them.
func checkPackedChain(t *testing.T, mem *guestmem.Memory, q *virtio.PackedQueue, c *virtio.Chain) {
	t.Helper()
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
		t.Fatalf("chain %d: id/lengths inconsistent: %d/%d vs %d/%d", c.Head, rd, wr, c.ReadableLen(), c.WritableLen())
	}
	n, err := io.Copy(io.Discard, c.Reader())
	if err != nil || uint64(n) != rd {
		t.Fatalf("read %d, %v; want %d", n, err, rd)
	}
}

// writeWatch fails the test on a write outside [lo, hi).
type writeWatch struct {
	t      *testing.T
	lo, hi uint64
	what   string
}

func (w *writeWatch) Access(gpa, n uint64, write bool) {
	if write && (gpa < w.lo || gpa+n > w.hi) {
		w.t.Fatalf("%s wrote [%#x, +%d), outside [%#x, %#x)", w.what, gpa, n, w.lo, w.hi)
	}
}

// seedPackedIDTwice is a RAM image for a ring of 2 whose two descriptors
// both carry ID 0: with the first held, the second meets it in flight.
func seedPackedIDTwice() []byte {
	ram := make([]byte, 0x1020)
	for p := 0; p < 2; p++ {
		desc := 0x1000 + 16*p
		binary.LittleEndian.PutUint64(ram[desc:], 0x3000)
		binary.LittleEndian.PutUint32(ram[desc+8:], 8)
		binary.LittleEndian.PutUint16(ram[desc+14:], virtio.PackedDescFlagAvail)
	}
	return ram
}

// FuzzPackedPop: arbitrary ring, event areas and indirect tables (the
// whole fake RAM is the fuzzer's bytes, repeated). Pop never panics, fails
// only with a *GuestError, returns only chains inside RAM and writes
// nothing; AddUsed writes only the descriptor ring; the notification calls
// write only the device area. Some chains are held across later Pops
// (feat's upper bits), so an ID offered again while held must come back as
// ErrHeadInFlight and leave the held chain as it was.
func FuzzPackedPop(f *testing.F) {
	f.Add(uint8(3), uint8(0xff), []byte{})
	// One descriptor, available in the first lap, ID 0.
	f.Add(uint8(2), uint8(0), []byte{0, 0x80, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0x80, 0})
	// NEXT chains with WRITE, IDs 1.
	f.Add(uint8(4), uint8(2), []byte{0, 0x20, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 1, 0, 0x83, 0})
	// INDIRECT with a table of the same pattern.
	f.Add(uint8(1), uint8(1), []byte{0, 0x20, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 1, 0, 0x84, 0})
	f.Add(uint8(1), uint8(0xfc), seedPackedIDTwice())
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
		d := virtiotest.NewPacked(t, fuzzMem, size)
		d.SetFeatures(features)
		if len(data) > 0 {
			for i := range d.RAM {
				d.RAM[i] = data[i%len(data)]
			}
		}
		q := d.Queue
		ringEnd := d.DescAddr() + 16*uint64(size)
		popMem := d.Mem.Observed(&writeWatch{t, 0, 0, "Pop"})
		usedMem := d.Mem.Observed(&writeWatch{t, d.DescAddr(), ringEnd, "AddUsed"})
		notifyMem := d.Mem.Observed(&writeWatch{t, d.DeviceAddr(), d.DeviceAddr() + 4, "notification"})
		type heldChain struct {
			c      *virtio.Chain
			id     uint16
			segs   []virtio.Segment
			rd, wr uint64
		}
		var held []heldChain
		isHeld := func(id uint16) bool {
			return slices.ContainsFunc(held, func(h heldChain) bool { return h.id == id })
		}
		for i := 0; i < 2*int(size)+2; i++ {
			if _, err := q.Pending(popMem); err != nil {
				t.Fatalf("Pending: %v", err)
			}
			c, err := q.Pop(popMem)
			if err != nil {
				var ge *virtio.GuestError
				if !errors.As(err, &ge) {
					t.Fatalf("Pop error %T %v is not a GuestError", err, err)
				}
				if errors.Is(err, virtio.ErrHeadInFlight) && !isHeld(ge.Head) {
					t.Fatalf("%v, but ID %d is not in flight", err, ge.Head)
				}
				break
			}
			if c == nil {
				break
			}
			if isHeld(c.Head) {
				t.Fatalf("ID %d popped again while in flight", c.Head)
			}
			checkPackedChain(t, d.Mem, q, c)
			if a, u := q.Counters(); a-u > size {
				t.Fatalf("counters %d, %d: more than %d positions in flight", a, u, size)
			}
			if hold>>(i%6)&1 != 0 {
				held = append(held, heldChain{c, c.Head, slices.Clone(c.Segments()),
					c.ReadableLen(), c.WritableLen()})
				continue
			}
			if err := q.AddUsed(usedMem, c.Head, uint32(c.WritableLen())); err != nil {
				t.Fatalf("AddUsed: %v", err)
			}
		}
		if q.InFlight() != len(held) {
			t.Fatalf("InFlight = %d, %d chains held", q.InFlight(), len(held))
		}
		var elems []virtio.UsedElem
		for _, h := range held {
			if h.c.Head != h.id || !slices.Equal(h.c.Segments(), h.segs) ||
				h.c.ReadableLen() != h.rd || h.c.WritableLen() != h.wr {
				t.Fatalf("chain %d changed while held: %+v, was %+v", h.id, h.c.Segments(), h.segs)
			}
			elems = append(elems, virtio.UsedElem{Head: h.id})
		}
		if err := q.AddUsedBatch(usedMem, elems); err != nil {
			t.Fatalf("AddUsedBatch: %v", err)
		}
		if a, u := q.Counters(); q.InFlight() != 0 || a != u {
			t.Fatalf("InFlight = %d, counters %d %d after every chain was used", q.InFlight(), a, u)
		}
		for _, err := range []error{
			func() error { _, err := q.NeedsInterrupt(notifyMem); return err }(),
			q.DisableNotify(notifyMem),
			func() error { _, err := q.EnableNotify(notifyMem); return err }(),
		} {
			if err != nil {
				t.Fatalf("notification call: %v", err)
			}
		}
	})
}

// FuzzPackedRoundTrip: a well-behaved driver (PackedDriver) and a device
// taking turns in an order the fuzzer picks: chains of 1..4 descriptors or
// indirect, held and completed out of order, singly or in batches, on
// rings of 1..16. Nothing may fail, every response must come back under its
// own ID, and both sides must agree on the positions and wrap counters.
func FuzzPackedRoundTrip(f *testing.F) {
	f.Add(uint8(2), []byte{0, 1, 3, 0, 0, 0, 7, 3})
	f.Add(uint8(0), []byte{0, 3, 0, 3, 0, 3})
	f.Add(uint8(4), []byte{0x10, 0x24, 0x39, 2, 2, 0x13, 0x17, 0x1b, 0xff, 0x3f})
	f.Fuzz(func(t *testing.T, sizeLog uint8, ops []byte) {
		size := uint16(1) << (sizeLog % 5)
		if len(ops) > 4096 {
			// The data area (1 MiB, allocated circularly, at most 80
			// bytes an op) must not come round to buffers in flight.
			ops = ops[:4096]
		}
		d := virtiotest.NewPacked(t, 1<<20, size)
		features := eventIdx
		if sizeLog&0x80 != 0 {
			features |= indirectFeatures
		}
		d.SetFeatures(features)
		q := d.Queue
		want := map[uint16][]byte{} // ID -> response the driver must find
		var held []*virtio.Chain
		seq := 0
		collect := func() {
			for _, e := range d.Collect() {
				w, ok := want[e.ID]
				if !ok {
					t.Fatalf("ID %d used but not completed", e.ID)
				}
				if got := bytes.Join(e.In, nil); int(e.Len) != len(w) || !bytes.Equal(got[:len(w)], w) {
					t.Fatalf("ID %d: len %d, response %x; want %x", e.ID, e.Len, got, w)
				}
				delete(want, e.ID)
			}
		}
		complete := func(cs []*virtio.Chain) {
			var elems []virtio.UsedElem
			for _, c := range cs {
				var req [2]byte
				io.ReadFull(c.Reader(), req[:])
				resp := []byte{req[1], req[0], byte(c.Head)}
				n, _ := c.Writer().Write(resp)
				want[c.Head] = resp[:n]
				elems = append(elems, virtio.UsedElem{Head: c.Head, Len: c.Written()})
			}
			if err := q.AddUsedBatch(d.Mem, elems); err != nil {
				t.Fatalf("AddUsedBatch: %v", err)
			}
			if _, err := q.NeedsInterrupt(d.Mem); err != nil {
				t.Fatal(err)
			}
		}
		for _, b := range ops {
			switch b & 3 {
			case 0, 1: // offer a buffer
				n := 1 + int(b>>2)%min(int(size), 4)
				if d.FreeDescs() < n || d.FreeIDs() == 0 {
					continue
				}
				req := []byte{byte(seq), byte(seq >> 8)}
				seq++
				in := make([]int, n-1)
				for i := range in {
					in[i] = 1 + int(b>>4)%3
				}
				if b&1 != 0 && features&indirectFeatures != 0 {
					d.AddIndirect([][]byte{req}, in)
				} else {
					d.Add([][]byte{req}, in)
				}
			case 2: // the device takes what is available
				for {
					c, err := q.Pop(d.Mem)
					if err != nil {
						t.Fatalf("Pop: %v", err)
					}
					if c == nil {
						break
					}
					held = append(held, c)
				}
			case 3: // the device completes some, in an order from b
				if len(held) == 0 {
					collect()
					continue
				}
				k := 1 + int(b>>2)%len(held)
				start := int(b>>5) % len(held)
				var cs []*virtio.Chain
				for i := 0; i < k; i++ {
					cs = append(cs, held[(start+i*7)%len(held)])
				}
				slices.SortFunc(cs, func(x, y *virtio.Chain) int { return int(x.Head) - int(y.Head) })
				cs = slices.Compact(cs)
				if b&0x10 != 0 {
					slices.Reverse(cs)
				}
				complete(cs)
				held = slices.DeleteFunc(held, func(c *virtio.Chain) bool { return slices.Contains(cs, c) })
				collect()
			}
		}
		// Drain: everything offered comes back.
		for {
			c, err := q.Pop(d.Mem)
			if err != nil {
				t.Fatalf("Pop: %v", err)
			}
			if c == nil {
				break
			}
			held = append(held, c)
		}
		if len(held) > 0 {
			complete(held)
		}
		collect()
		if len(want) != 0 || q.InFlight() != 0 || d.FreeDescs() != int(size) || d.FreeIDs() != int(size) {
			t.Fatalf("left: %d responses, %d in flight, free descs %d ids %d", len(want), q.InFlight(), d.FreeDescs(), d.FreeIDs())
		}
		pos, w := d.NextAvail()
		upos, uw := d.UsedPos()
		if a, u := q.Counters(); pos != upos || w != uw || a != u || a&(size-1) != pos {
			t.Fatalf("driver avail %d/%d used %d/%d, device counters %d %d", pos, w, upos, uw, a, u)
		}
	})
}

// FuzzPackedIndirect: an indirect table with arbitrary contents and
// length behind one available ring descriptor.
func FuzzPackedIndirect(f *testing.F) {
	f.Add(uint32(32), []byte{0, 0x30, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 1, 0,
		0, 0x31, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 2, 0})
	f.Add(uint32(16), []byte{0, 0x30, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 4, 0})
	f.Fuzz(func(t *testing.T, tableLen uint32, table []byte) {
		const tableAddr = 0x2000
		d := virtiotest.NewPacked(t, fuzzMem, 8)
		d.SetFeatures(indirectFeatures | eventIdx)
		copy(d.RAM[tableAddr:fuzzMem], table)
		d.SetDesc(0, tableAddr, tableLen, 3, avail1|virtio.DescFlagIndirect)
		before := append([]byte(nil), d.RAM...)
		c, err := d.Queue.Pop(d.Mem)
		switch {
		case err != nil:
			if _, ok := err.(*virtio.GuestError); !ok || c != nil {
				t.Fatalf("Pop = %v, error %T %v; want no chain and a GuestError", c, err, err)
			}
		case c == nil:
			t.Fatal("published chain not seen")
		default:
			checkPackedChain(t, d.Mem, d.Queue, c)
			if c.Head != 3 || len(c.Segments()) != int(tableLen/16) {
				t.Fatalf("ID %d, %d segments from a table of %d bytes", c.Head, len(c.Segments()), tableLen)
			}
		}
		if !bytes.Equal(before, d.RAM) {
			t.Fatal("Pop wrote guest memory")
		}
	})
}
