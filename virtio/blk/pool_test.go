package virtioblk

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// gatedBackend is a memBackend whose I/O at chosen byte offsets waits until
// the test opens that offset's gate, and which logs writes and syncs in
// the order they happen.
type gatedBackend struct {
	*memBackend
	gates   map[int64]chan struct{} // set up before the device starts
	opened  map[int64]*sync.Once
	entered chan int64 // offset of each gated I/O as it starts waiting
	logMu   sync.Mutex
	log     []string
}

func newGated(sectors int, gated ...int64) *gatedBackend {
	g := &gatedBackend{memBackend: &memBackend{data: pattern(sectors)},
		gates: map[int64]chan struct{}{}, opened: map[int64]*sync.Once{}, entered: make(chan int64, 256)}
	for _, s := range gated {
		g.gates[s*SectorSize] = make(chan struct{})
		g.opened[s*SectorSize] = new(sync.Once)
	}
	return g
}

// openAllAtCleanup opens every gate when the test ends, before the
// device's Reset (cleanups run last-registered first), so a failing test
// does not leave Reset waiting on a shut gate.
func (g *gatedBackend) openAllAtCleanup(t *testing.T) {
	t.Cleanup(func() {
		for off := range g.gates {
			g.open(off / SectorSize)
		}
	})
}

func (g *gatedBackend) wait(off int64) {
	if ch := g.gates[off]; ch != nil {
		g.entered <- off
		<-ch
	}
}

func (g *gatedBackend) open(sector int64) {
	g.opened[sector*SectorSize].Do(func() { close(g.gates[sector*SectorSize]) })
}

func (g *gatedBackend) note(s string) {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	g.log = append(g.log, s)
}

func (g *gatedBackend) events() []string {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	return slices.Clone(g.log)
}

func (g *gatedBackend) ReadAt(p []byte, off int64) (int, error) {
	g.wait(off)
	return g.memBackend.ReadAt(p, off)
}

func (g *gatedBackend) WriteAt(p []byte, off int64) (int, error) {
	g.wait(off)
	n, err := g.memBackend.WriteAt(p, off)
	g.note(fmt.Sprintf("write %d", off/SectorSize))
	return n, err
}

func (g *gatedBackend) Sync() error {
	g.note("sync")
	return g.memBackend.Sync()
}

// waitEntered waits until n gated I/Os are waiting at their gates.
func (g *gatedBackend) waitEntered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.entered:
		case <-time.After(5 * time.Second):
			t.Fatal("gated I/O never started")
		}
	}
}

// settleTime is how long a negative check waits for something that must
// not happen.
const settleTime = 50 * time.Millisecond

// TestFlushWaitsForEarlierWrites: a FLUSH accepted while writes are in
// flight syncs only after all of them completed; writes accepted after it
// do not hold it back.
func TestFlushWaitsForEarlierWrites(t *testing.T) {
	t.Run("earlier writes", func(t *testing.T) {
		be := newGated(diskSectors, 1, 2)
		e := newEnvBackend(t, be, Config{Workers: 2}, 0)
		be.openAllAtCleanup(t)
		sector := make([]byte, SectorSize)
		heads := []uint16{
			e.d.BuildChain([][]byte{header(TypeOut, 1), sector}, []int{1}),
			e.d.BuildChain([][]byte{header(TypeOut, 2), sector}, []int{1}),
			e.d.BuildChain([][]byte{header(TypeFlush, 0)}, []int{1}),
		}
		e.d.PublishAvail(heads...)
		e.d.Kick()
		be.waitEntered(t, 2)
		be.open(1)
		time.Sleep(settleTime)
		if ev := be.events(); !slices.Equal(ev, []string{"write 1"}) {
			t.Fatalf("events %v with write 2 in flight, want only write 1", ev)
		}
		be.open(2)
		if !e.d.WaitUsedIdx(3, 5*time.Second) {
			t.Fatal("not all completed")
		}
		if ev := be.events(); !slices.Equal(ev, []string{"write 1", "write 2", "sync"}) {
			t.Fatalf("events %v", ev)
		}
		for _, u := range e.d.Collect() {
			if status(u) != StatusOK {
				t.Fatalf("head %d status %d", u.ID, status(u))
			}
		}
	})
	t.Run("later write", func(t *testing.T) {
		be := newGated(diskSectors, 1, 3)
		e := newEnvBackend(t, be, Config{Workers: 2}, 0)
		be.openAllAtCleanup(t)
		sector := make([]byte, SectorSize)
		flush := e.d.BuildChain([][]byte{header(TypeFlush, 0)}, []int{1})
		e.d.PublishAvail(
			e.d.BuildChain([][]byte{header(TypeOut, 1), sector}, []int{1}),
			flush,
			e.d.BuildChain([][]byte{header(TypeOut, 3), sector}, []int{1}),
		)
		e.d.Kick()
		be.waitEntered(t, 2)
		be.open(1)
		if !e.d.WaitUsedIdx(2, 5*time.Second) {
			t.Fatal("flush held back by a later write")
		}
		if id, _ := e.d.Used(1); uint16(id) != flush {
			t.Fatalf("second completion is head %d, want the flush %d", id, flush)
		}
		be.open(3)
		if !e.d.WaitUsedIdx(3, 5*time.Second) {
			t.Fatal("later write not completed")
		}
		if ev := be.events(); !slices.Equal(ev, []string{"write 1", "sync", "write 3"}) {
			t.Fatalf("events %v", ev)
		}
	})
}

// TestOutOfOrderOneInterrupt: requests of one batch complete in any order
// (a slow one does not hold back the used ring), and the batch interrupts
// once, when its last request is done.
func TestOutOfOrderOneInterrupt(t *testing.T) {
	be := newGated(diskSectors, 0)
	e := newEnvBackend(t, be, Config{Workers: 2}, 0)
	be.openAllAtCleanup(t)
	sectorOf := map[uint16]byte{}
	var heads []uint16
	for s := range byte(3) {
		h := e.d.BuildChain([][]byte{header(TypeIn, uint64(s))}, []int{SectorSize, 1})
		sectorOf[h] = s
		heads = append(heads, h)
	}
	slow := heads[0]
	e.d.PublishAvail(heads...)
	e.d.Kick()
	be.waitEntered(t, 1)
	if !e.d.WaitUsedIdx(2, 5*time.Second) {
		t.Fatal("fast requests held back by the slow one")
	}
	for i := range uint16(2) {
		if id, _ := e.d.Used(i); uint16(id) == slow {
			t.Fatal("slow request completed while its gate was shut")
		}
	}
	time.Sleep(settleTime)
	if n := e.intr.Used(0); n != 0 {
		t.Fatalf("%d interrupts before the batch completed", n)
	}
	be.open(0)
	if !e.d.WaitUsedIdx(3, 5*time.Second) {
		t.Fatal("slow request never completed")
	}
	if !e.intr.WaitFor(5*time.Second, func() bool { return e.intr.Used(0) == 1 }) {
		t.Fatalf("%d interrupts for one batch, want 1", e.intr.Used(0))
	}
	for _, u := range e.d.Collect() {
		if status(u) != StatusOK || !bytes.Equal(u.In[0], bytes.Repeat([]byte{sectorOf[u.ID]}, SectorSize)) {
			t.Fatalf("head %d status %d", u.ID, status(u))
		}
	}
}

// TestResetWaitsForPool: Reset returns only after the I/O in progress
// finished, requests still queued for the pool are dropped, and nothing is
// completed after the reset.
func TestResetWaitsForPool(t *testing.T) {
	be := newGated(diskSectors, 0)
	e := newEnvBackend(t, be, Config{Workers: 2}, 0)
	be.openAllAtCleanup(t)
	var heads []uint16
	for range 5 {
		heads = append(heads, e.d.BuildChain([][]byte{header(TypeIn, 0)}, []int{SectorSize, 1}))
	}
	e.d.PublishAvail(heads...)
	e.d.Kick()
	be.waitEntered(t, 2)
	reset := make(chan struct{})
	go func() {
		e.dev.Reset()
		close(reset)
	}()
	select {
	case <-reset:
		t.Fatal("Reset returned with I/O into guest memory in progress")
	case <-time.After(settleTime):
	}
	be.open(0)
	select {
	case <-reset:
	case <-time.After(5 * time.Second):
		t.Fatal("Reset never returned")
	}
	if r, _, _ := be.counts(); r != 2 {
		t.Fatalf("%d reads, want the 2 in progress only", r)
	}
	if u := e.d.UsedIdx(); u != 0 {
		t.Fatalf("used idx %d after reset", u)
	}
}

// TestInFlightCap: a hostile driver re-publishes a head while it is in
// flight. The device holds at most the queue size in flight: at the cap it
// takes no more requests, even with idle pool goroutines, and takes the
// rest once there is room, so every published entry is still answered.
func TestInFlightCap(t *testing.T) {
	be := newGated(diskSectors, 0)
	dev, err := New(be, Config{Workers: 16})
	if err != nil {
		t.Fatal(err)
	}
	d := virtiotest.New(t, 1<<20, 8)
	intr := virtiotest.NewRecordingInterrupt()
	features := virtio.Bit(virtio.FeatureRingIndirectDesc) | virtio.Bit(virtio.FeatureRingEventIdx)
	if err := dev.Activate(virtiotest.Activation(intr, features, d)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Reset)
	be.openAllAtCleanup(t)
	g := d.BuildIndirectChain([][]byte{header(TypeIn, 0)}, []int{SectorSize, 1})
	publish := func() {
		for range 8 {
			d.PublishAvail(g)
		}
		d.Kick()
	}
	publish()
	be.waitEntered(t, 8)
	publish()
	time.Sleep(settleTime)
	if n := len(be.entered); n != 0 {
		t.Fatalf("%d more requests started beyond the cap of 8 in flight", n)
	}
	be.open(0)
	if !d.WaitUsedIdx(16, 5*time.Second) {
		t.Fatalf("used idx %d, want 16", d.UsedIdx())
	}
	if !intr.WaitFor(5*time.Second, func() bool { return d.AvailEvent() == 16 }) {
		t.Fatalf("avail_event %d after all: kicks not re-enabled", d.AvailEvent())
	}
	if len(intr.Errors()) != 0 {
		t.Fatalf("device errors %v", intr.Errors())
	}
}

// TestParallelStress runs thousands of mixed requests through many slots
// at once, on both backend paths, with and without a pool and EVENT_IDX.
// The driver sleeps only on interrupts (as virtio_ring.c does: enable the
// callback, re-check, sleep), so a lost interrupt or completion shows up as
// a timeout. Every read is checked against the pattern or the slot's own
// last write, every status must be OK, and each flush must reach Sync.
func TestParallelStress(t *testing.T) {
	const (
		slots    = 48
		requests = 1500
		common   = 256 // pattern sectors every slot reads
	)
	indirect := virtio.Bit(virtio.FeatureRingIndirectDesc)
	evt := virtio.Bit(virtio.FeatureRingEventIdx)
	for _, workers := range []int{-1, 1, 3} {
		for _, features := range []uint64{indirect, indirect | evt} {
			for _, backend := range []string{"file", "mem"} {
				name := fmt.Sprintf("workers=%d/event_idx=%v/%s", workers, features&evt != 0, backend)
				t.Run(name, func(t *testing.T) {
					var be Backend
					mem := &memBackend{data: pattern(common + slots)}
					be = mem
					if backend == "file" {
						p := filepath.Join(t.TempDir(), "disk.img")
						if err := os.WriteFile(p, pattern(common+slots), 0o600); err != nil {
							t.Fatal(err)
						}
						f, err := OpenFile(p, false)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { f.Close() })
						be = &syncCounter{File: f}
					}
					stress(t, be, workers, features, slots, requests, common)
				})
			}
		}
	}
}

// syncCounter counts Syncs of a File (and keeps it a VectoredBackend).
type syncCounter struct {
	*File
	mu    sync.Mutex
	syncs int
}

func (s *syncCounter) Sync() error {
	s.mu.Lock()
	s.syncs++
	s.mu.Unlock()
	return s.File.Sync()
}

func stress(t *testing.T, be Backend, workers int, features uint64, slots, requests, common int) {
	dev, err := New(be, Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	d := virtiotest.New(t, 8<<20, QueueSize)
	intr := virtiotest.NewRecordingInterrupt()
	if err := dev.Activate(virtiotest.Activation(intr, features, d)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Reset)
	eventIdx := features&virtio.Bit(virtio.FeatureRingEventIdx) != 0

	type slot struct {
		busy   bool
		kind   int
		sector uint64
		n      int    // sectors
		last   []byte // the slot's last write to its own sector
	}
	rng := rand.New(rand.NewSource(1))
	ss := make([]slot, slots)
	byHead := map[uint16]int{}
	flushes, next, done := 0, 0, 0
	for done < requests {
		var heads []uint16
		for k := range ss {
			s := &ss[k]
			if s.busy || next >= requests {
				continue
			}
			s.busy, s.kind = true, rng.Intn(4)
			own := uint64(common + k)
			var h uint16
			switch s.kind {
			case 0: // read 1-4 pattern sectors into two buffers
				s.n = 1 + rng.Intn(4)
				s.sector = uint64(rng.Intn(common - s.n))
				cut := 1 + rng.Intn(s.n*SectorSize-1)
				h = d.BuildIndirectChain([][]byte{header(TypeIn, s.sector)}, []int{cut, s.n*SectorSize - cut, 1})
			case 1: // write the slot's own sector
				s.last = bytes.Repeat([]byte{byte(next)}, SectorSize)
				s.last[0] = byte(k)
				h = d.BuildIndirectChain([][]byte{header(TypeOut, own), s.last[:100], s.last[100:]}, []int{1})
			case 2: // read it back
				h = d.BuildIndirectChain([][]byte{header(TypeIn, own)}, []int{SectorSize + 1})
			case 3:
				flushes++
				h = d.BuildIndirectChain([][]byte{header(TypeFlush, 0)}, []int{1})
			}
			byHead[h] = k
			heads = append(heads, h)
			next++
		}
		if len(heads) > 0 {
			d.PublishAvail(heads...)
			d.KickIfNeeded()
		}
		changed := intr.Changed()
		es := d.Collect()
		if eventIdx {
			// virtqueue_enable_cb: ask for an interrupt at the next
			// used entry, then look again before sleeping.
			d.SetUsedEvent(d.LastUsed())
			guestmem.Fence()
			es = append(es, d.Collect()...)
		}
		if len(es) == 0 {
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatalf("lost interrupt: %d of %d done, used idx %d, collected up to %d, %d interrupts",
					done, requests, d.UsedIdx(), d.LastUsed(), intr.Used(0))
			}
			if errs := intr.Errors(); len(errs) > 0 {
				t.Fatalf("device errors %v", errs)
			}
			continue
		}
		for _, u := range es {
			k, ok := byHead[u.ID]
			if !ok {
				t.Fatalf("completion of unknown head %d", u.ID)
			}
			delete(byHead, u.ID)
			s := &ss[k]
			if status(u) != StatusOK {
				t.Fatalf("slot %d kind %d status %d", k, s.kind, status(u))
			}
			switch s.kind {
			case 0:
				got := bytes.Join(u.In, nil)
				want := pattern(common)[s.sector*SectorSize : (s.sector+uint64(s.n))*SectorSize]
				if !bytes.Equal(got[:len(want)], want) || u.Len != uint32(len(want)+1) {
					t.Fatalf("slot %d read of %d sectors at %d wrong (len %d)", k, s.n, s.sector, u.Len)
				}
			case 2:
				if s.last != nil && !bytes.Equal(u.In[0][:SectorSize], s.last) {
					t.Fatalf("slot %d read back something else than its last write", k)
				}
			}
			s.busy = false
			done++
		}
	}
	dev.Reset()
	got := 0
	switch b := be.(type) {
	case *memBackend:
		_, _, got = b.counts()
	case *syncCounter:
		b.mu.Lock()
		got = b.syncs
		b.mu.Unlock()
	}
	if got != flushes {
		t.Fatalf("%d syncs for %d flushes", got, flushes)
	}
	if n := intr.Used(0); n == 0 || n > requests {
		t.Fatalf("%d interrupts for %d requests", n, requests)
	}
}
