package virtio_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

func TestPackedValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(q *virtio.PackedQueue)
		want   error
	}{
		{"good", func(q *virtio.PackedQueue) {}, nil},
		{"not ready", func(q *virtio.PackedQueue) { q.Ready = false }, virtio.ErrQueueNotReady},
		{"size not power of 2", func(q *virtio.PackedQueue) { q.Size = 12 }, virtio.ErrBadRing},
		{"size zero", func(q *virtio.PackedQueue) { q.Size = 0 }, virtio.ErrBadRing},
		{"size above max", func(q *virtio.PackedQueue) { q.Size = 32 }, virtio.ErrBadRing},
		{"smaller size", func(q *virtio.PackedQueue) { q.Size = 4 }, nil},
		{"desc misaligned", func(q *virtio.PackedQueue) { q.DescAddr += 8 }, virtio.ErrBadRing},
		{"driver area misaligned", func(q *virtio.PackedQueue) { q.DriverAddr += 2 }, virtio.ErrBadRing},
		{"device area misaligned", func(q *virtio.PackedQueue) { q.DeviceAddr++ }, virtio.ErrBadRing},
		{"desc beyond RAM", func(q *virtio.PackedQueue) { q.DescAddr = memSize - 128 }, virtio.ErrBadRing},
		{"desc wraps", func(q *virtio.PackedQueue) { q.DescAddr = ^uint64(0) &^ 15 }, virtio.ErrBadRing},
		{"driver area beyond RAM", func(q *virtio.PackedQueue) { q.DriverAddr = memSize }, virtio.ErrBadRing},
		{"device area far beyond RAM", func(q *virtio.PackedQueue) { q.DeviceAddr = 1 << 40 }, virtio.ErrBadRing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := virtiotest.NewPacked(t, memSize, 16)
			tt.modify(d.Queue)
			err := d.Queue.Validate(d.Mem)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
			if tt.want == virtio.ErrBadRing {
				if _, ok := err.(*virtio.GuestError); !ok {
					t.Fatalf("Validate error %T is not a GuestError", err)
				}
			}
		})
	}
}

func TestPackedPopEmptyAndNotReady(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 16)
	if c, err := d.Queue.Pop(d.Mem); c != nil || err != nil {
		t.Fatalf("Pop on empty ring = %v, %v; want nil, nil", c, err)
	}
	d.Queue.Reset()
	if _, err := d.Queue.Pop(d.Mem); !errors.Is(err, virtio.ErrQueueNotReady) {
		t.Fatalf("Pop after Reset = %v, want ErrQueueNotReady", err)
	}
	if err := d.Queue.AddUsed(d.Mem, 0, 0); !errors.Is(err, virtio.ErrQueueNotReady) {
		t.Fatalf("AddUsed after Reset = %v, want ErrQueueNotReady", err)
	}
	if d.Queue.Size != 16 || d.Queue.DescAddr != 0 || d.Queue.MaxSize() != 16 {
		t.Fatalf("Reset left %v", d.Queue)
	}
}

// packedRoundTrip pops one buffer, checks its readable part is want,
// writes resp and uses it; it returns what the driver collected.
func packedRoundTrip(t *testing.T, d *virtiotest.PackedDriver, want, resp []byte) virtiotest.UsedElem {
	t.Helper()
	c, err := d.Queue.Pop(d.Mem)
	if err != nil || c == nil {
		t.Fatalf("Pop = %v, %v", c, err)
	}
	got, err := io.ReadAll(c.Reader())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readable part = %q, %v; want %q", got, err, want)
	}
	if _, err := c.Writer().Write(resp); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := d.Queue.AddUsed(d.Mem, c.Head, c.Written()); err != nil {
		t.Fatalf("AddUsed: %v", err)
	}
	es := d.Collect()
	if len(es) != 1 || es[0].ID != c.Head || es[0].Len != uint32(len(resp)) {
		t.Fatalf("used = %+v, want id %d len %d", es, c.Head, len(resp))
	}
	return es[0]
}

func TestPackedRoundTrip(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 16)
	d.SetFeatures(indirectFeatures)

	id := d.Add([][]byte{[]byte("ping")}, []int{8})
	e := packedRoundTrip(t, d, []byte("ping"), []byte("pong"))
	if e.ID != id || string(e.In[0][:4]) != "pong" {
		t.Fatalf("single: %+v", e)
	}

	// A chain of 5: three readable, two writable; the response spans both.
	d.Add([][]byte{[]byte("he"), []byte("ll"), []byte("o")}, []int{3, 5})
	e = packedRoundTrip(t, d, []byte("hello"), []byte("abcdefgh"))
	if string(e.In[0]) != "abc" || string(e.In[1]) != "defgh" {
		t.Fatalf("chain: %+v", e)
	}

	// Indirect: one ring position, five buffers.
	before := d.FreeDescs()
	d.AddIndirect([][]byte{[]byte("in"), []byte("dir")}, []int{1, 2, 3})
	if d.FreeDescs() != before-1 {
		t.Fatalf("indirect took %d positions", before-d.FreeDescs())
	}
	e = packedRoundTrip(t, d, []byte("indir"), []byte("xyzuvw"))
	if string(bytes.Join(e.In, nil)) != "xyzuvw" {
		t.Fatalf("indirect: %+v", e)
	}
	// Written 0: no WRITE flag in the used descriptor (Collect checks
	// the converse).
	d.Add([][]byte{[]byte("x")}, nil)
	packedRoundTrip(t, d, []byte("x"), nil)
	if d.FreeDescs() != 16 || d.FreeIDs() != 16 || d.Queue.InFlight() != 0 {
		t.Fatalf("free descs %d ids %d, in flight %d", d.FreeDescs(), d.FreeIDs(), d.Queue.InFlight())
	}
}

// TestPackedIDInLastDescriptor: the buffer ID is the one in the last
// descriptor of a chain (spec 2.8.6); what the others carry is ignored.
func TestPackedIDInLastDescriptor(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 8)
	a := d.Alloc(16)
	copy(d.RAM[a:], "abc")
	avail := virtiotest.PackedAvailFlags(1)
	d.SetDesc(1, a+1, 1, 0xffff, avail|fNext)
	d.SetDesc(2, a+2, 1, 7, avail|fWrite)
	d.SetDesc(0, a, 1, 3, avail|fNext) // head last, as a driver does
	c, err := d.Queue.Pop(d.Mem)
	if err != nil || c == nil || c.Head != 7 || c.ReadableLen() != 2 || c.WritableLen() != 1 {
		t.Fatalf("Pop = %+v, %v; want id 7, 2+1 bytes", c, err)
	}
	if err := d.Queue.AddUsed(d.Mem, 7, 1); err != nil {
		t.Fatal(err)
	}
	// The used descriptor goes to position 0 and the next buffer is
	// expected at position 3.
	if _, ln, id, flags := d.Desc(0); id != 7 || ln != 1 ||
		flags != virtio.PackedDescFlagAvail|virtio.PackedDescFlagUsed|fWrite {
		t.Fatalf("used descriptor: id %d len %d flags %#x", id, ln, flags)
	}
	if avail, used := d.Queue.Counters(); avail != 3 || used != 3 {
		t.Fatalf("counters %d, %d; want 3, 3", avail, used)
	}
}

// TestPackedWrapAround runs many laps of small and large rings with chains
// of mixed lengths, some indirect, completed out of order and in batches:
// every request comes back to the driver under its own ID with its own
// response, and the ring positions and wrap counters stay in step on both
// sides (the driver finds each used descriptor where it looks).
func TestPackedWrapAround(t *testing.T) {
	for _, size := range []uint16{1, 2, 4, 256} {
		for _, order := range []string{"in order", "reversed", "shuffled", "batched"} {
			t.Run(fmt.Sprintf("size %d %s", size, order), func(t *testing.T) {
				packedLaps(t, size, order)
			})
		}
	}
}

func packedLaps(t *testing.T, size uint16, order string) {
	d := virtiotest.NewPacked(t, 1<<20, size)
	d.SetFeatures(indirectFeatures)
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	total := 3*int(size) + 20
	if size == 256 {
		total = 4 * int(size)
	}
	sent, done := 0, 0
	for done < total {
		// Offer a random number of buffers, as many as fit.
		var ids []uint16
		for k := 1 + rng.IntN(int(size)); k > 0 && sent < total; k-- {
			n := 1 + rng.IntN(min(int(size), 4))
			if d.FreeDescs() < n || d.FreeIDs() == 0 {
				break
			}
			req := []byte{byte(sent), byte(sent >> 8)}
			var id uint16
			if rng.IntN(4) == 0 {
				id = d.AddIndirect([][]byte{req}, []int{1, 1})
			} else {
				out := [][]byte{req}
				for i := 2; i < n; i++ {
					out = append(out, []byte{0xee})
				}
				in := []int{}
				if n > 1 {
					in = []int{2}
				}
				id = d.Add(out, in)
			}
			ids = append(ids, id)
			sent++
		}
		var chains []*virtio.Chain
		for {
			c, err := d.Queue.Pop(d.Mem)
			if err != nil {
				t.Fatalf("Pop after %d: %v", done, err)
			}
			if c == nil {
				break
			}
			chains = append(chains, c)
		}
		if len(chains) != len(ids) {
			t.Fatalf("offered %d, popped %d", len(ids), len(chains))
		}
		for i, c := range chains {
			if c.Head != ids[i] {
				t.Fatalf("popped id %d, offered %d", c.Head, ids[i])
			}
			var req [2]byte
			io.ReadFull(c.Reader(), req[:])
			c.Writer().Write([]byte{req[1], req[0]}) // short for 1-element chains
		}
		switch order {
		case "reversed":
			for i, j := 0, len(chains)-1; i < j; i, j = i+1, j-1 {
				chains[i], chains[j] = chains[j], chains[i]
			}
		case "shuffled", "batched":
			rng.Shuffle(len(chains), func(i, j int) { chains[i], chains[j] = chains[j], chains[i] })
		}
		want := map[uint16]uint32{}
		var batch []virtio.UsedElem
		for _, c := range chains {
			want[c.Head] = c.Written()
			e := virtio.UsedElem{Head: c.Head, Len: c.Written()}
			if order != "batched" {
				if err := d.Queue.AddUsed(d.Mem, e.Head, e.Len); err != nil {
					t.Fatal(err)
				}
				continue
			}
			batch = append(batch, e)
		}
		if err := d.Queue.AddUsedBatch(d.Mem, batch); err != nil {
			t.Fatal(err)
		}
		es := d.Collect()
		if len(es) != len(chains) {
			t.Fatalf("collected %d of %d", len(es), len(chains))
		}
		for i, e := range es {
			if e.ID != chains[i].Head || e.Len != want[e.ID] {
				t.Fatalf("used #%d = id %d len %d, want id %d len %d", i, e.ID, e.Len, chains[i].Head, want[e.ID])
			}
		}
		done += len(es)
		if d.Queue.InFlight() != 0 || d.FreeDescs() != int(size) || d.FreeIDs() != int(size) {
			t.Fatalf("after %d: in flight %d, free descs %d ids %d", done, d.Queue.InFlight(), d.FreeDescs(), d.FreeIDs())
		}
		pos, w := d.NextAvail()
		if upos, uw := d.UsedPos(); upos != pos || uw != w {
			t.Fatalf("driver avail at %d/%d, used at %d/%d", pos, w, upos, uw)
		}
		if a, u := d.Queue.Counters(); a != u || a&(size-1) != pos {
			t.Fatalf("device counters %d, %d; driver at position %d", a, u, pos)
		}
	}
	if a, _ := d.Queue.Counters(); int(a) < 3*int(size) {
		t.Fatalf("only %d positions used", a)
	}
}

// TestPackedKeepInFlight: buffers held by the device while others come
// and go (virtio-net RX holds popped chains): used descriptors land where
// the device's used position is, not where the buffer was, and the driver
// follows.
func TestPackedKeepInFlight(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 4)
	held := d.Add(nil, []int{8, 8}) // positions 0-1
	hc, _ := d.Queue.Pop(d.Mem)
	for i := 0; i < 20; i++ {
		d.Add([][]byte{{byte(i)}}, nil)
		if d.FreeDescs() != 1 {
			t.Fatalf("free %d", d.FreeDescs())
		}
		packedRoundTrip(t, d, []byte{byte(i)}, nil)
	}
	if hc.Head != held || hc.WritableLen() != 16 || d.Queue.InFlight() != 1 {
		t.Fatalf("held chain changed: %d %d", hc.Head, hc.WritableLen())
	}
	if err := d.Queue.AddUsed(d.Mem, held, 3); err != nil {
		t.Fatal(err)
	}
	es := d.Collect()
	if len(es) != 1 || es[0].ID != held || es[0].Len != 3 || d.FreeDescs() != 4 {
		t.Fatalf("held buffer used: %+v, free %d", es, d.FreeDescs())
	}
}

// TestPackedAddUsedBatchOrder: a batch is published by the first
// descriptor's flags, written last and as the only store to its word: until
// it, the driver (looking at the first position only) sees nothing.
func TestPackedAddUsedBatchOrder(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 16)
	var ids []uint16
	for i := 0; i < 3; i++ {
		ids = append(ids, d.Add([][]byte{{1}}, []int{4, 4}))
	}
	for range ids {
		if c, err := d.Queue.Pop(d.Mem); c == nil || err != nil {
			t.Fatal(err)
		}
	}
	var rec writeRecorder
	mem := d.Mem.Observed(&rec)
	batch := []virtio.UsedElem{{Head: ids[2], Len: 8}, {Head: ids[0], Len: 1}, {Head: ids[1], Len: 0}}
	if err := d.Queue.AddUsedBatch(mem, batch); err != nil {
		t.Fatal(err)
	}
	first := d.DescAddr() + 12
	last := rec.writes[len(rec.writes)-1]
	if last != [2]uint64{first, 4} {
		t.Fatalf("last write %#x+%d, want the first descriptor's id and flags %#x+4", last[0], last[1], first)
	}
	for _, w := range rec.writes[:len(rec.writes)-1] {
		if w[0] < first+4 && first < w[0]+w[1] {
			t.Fatalf("write %#x+%d touches the publishing word before it", w[0], w[1])
		}
	}
	es := d.Collect()
	if len(es) != 3 || es[0].ID != ids[2] || es[0].Len != 8 || es[1].ID != ids[0] || es[2].ID != ids[1] {
		t.Fatalf("collected %+v", es)
	}
	// Positions: ids[2] at 0, ids[0] at 3, ids[1] at 6 (3 positions each).
	for i, p := range []uint16{0, 3, 6} {
		if _, _, id, _ := d.Desc(p); id != batch[i].Head {
			t.Fatalf("position %d holds id %d, want %d", p, id, batch[i].Head)
		}
	}
}

type writeRecorder struct{ writes [][2]uint64 }

func (r *writeRecorder) Access(gpa, n uint64, write bool) {
	if write {
		r.writes = append(r.writes, [2]uint64{gpa, n})
	}
}

// TestPackedAddUsedBadID: IDs the device does not hold are a device bug,
// ErrBadHead, and nothing is written.
func TestPackedAddUsedBadID(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 8)
	a := d.Add(nil, []int{1})
	b := d.Add(nil, []int{1})
	d.Queue.Pop(d.Mem)
	d.Queue.Pop(d.Mem)
	before := append([]byte(nil), d.RAM...)
	for _, batch := range [][]virtio.UsedElem{
		{{Head: 8}},
		{{Head: 0xffff}},
		{{Head: 5}},                       // never popped
		{{Head: a}, {Head: a}},            // twice
		{{Head: a}, {Head: b}, {Head: 3}}, // the last one bad
	} {
		if err := d.Queue.AddUsedBatch(d.Mem, batch); !errors.Is(err, virtio.ErrBadHead) {
			t.Fatalf("AddUsedBatch(%v) = %v, want ErrBadHead", batch, err)
		}
		sameMem(t, d.Mem, before)
	}
	if d.Queue.InFlight() != 2 {
		t.Fatalf("in flight %d", d.Queue.InFlight())
	}
	if err := d.Queue.AddUsedBatch(d.Mem, []virtio.UsedElem{{Head: b}, {Head: a}}); err != nil {
		t.Fatal(err)
	}
	if es := d.Collect(); len(es) != 2 || es[0].ID != b || es[1].ID != a {
		t.Fatalf("collected %+v", es)
	}
	if err := d.Queue.AddUsed(d.Mem, a, 0); !errors.Is(err, virtio.ErrBadHead) {
		t.Fatalf("AddUsed of a used id = %v", err)
	}
}

// TestPackedReset: a reset forgets every buffer in flight and both wrap
// counters.
func TestPackedReset(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 4)
	for i := 0; i < 5; i++ {
		d.Add([][]byte{{byte(i)}}, nil)
		packedRoundTrip(t, d, []byte{byte(i)}, nil)
	}
	d.Add(nil, []int{4})
	d.Queue.Pop(d.Mem)
	d.Reset()
	if a, u := d.Queue.Counters(); a != 0 || u != 0 || d.Queue.InFlight() != 0 {
		t.Fatalf("after Reset: counters %d %d, in flight %d", a, u, d.Queue.InFlight())
	}
	d.Add([][]byte{[]byte("again")}, nil)
	packedRoundTrip(t, d, []byte("again"), nil)
}
