package virtioblk

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// TestManyConcurrentRequests runs thousands of mixed requests through many
// slots at once (the driver keeps up to 48 in flight and publishes them as
// they free up, while the device drains), on both backend paths, with and
// without EVENT_IDX.
// The driver sleeps only on interrupts (as virtio_ring.c does: enable the
// callback, re-check, sleep), so a lost interrupt or completion shows up as
// a timeout. Every read is checked against the pattern or the slot's own
// last write, every status must be OK, and each flush must reach Sync.
func TestManyConcurrentRequests(t *testing.T) {
	const (
		slots    = 48
		requests = 1500
		common   = 256 // pattern sectors every slot reads
	)
	indirect := virtio.Bit(virtio.FeatureRingIndirectDesc)
	evt := virtio.Bit(virtio.FeatureRingEventIdx)
	for _, features := range []uint64{indirect, indirect | evt} {
		for _, backend := range []string{"file", "mem"} {
			name := fmt.Sprintf("event_idx=%v/%s", features&evt != 0, backend)
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
				stress(t, be, features, slots, requests, common)
			})
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

func stress(t *testing.T, be Backend, features uint64, slots, requests, common int) {
	dev, err := New(be, Config{})
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

// publishOnSignal is an Interrupt that, at the first used-buffer
// notification, has the driver publish one more chain. The device calls
// it after draining and before re-enabling kicks, so the driver sees kicks
// suppressed and does not kick: only the re-check after EnableNotify can
// find the chain.
type publishOnSignal struct {
	*virtiotest.RecordingInterrupt
	once    sync.Once
	publish func() bool // reports whether the driver kicked
	kicked  bool
}

func (p *publishOnSignal) SignalUsed(q int) error {
	p.once.Do(func() { p.kicked = p.publish() })
	return p.RecordingInterrupt.SignalUsed(q)
}

// TestRecheckAfterEnable: a request published while kicks were off, in the
// window between the drain and EnableNotify, is still served.
func TestRecheckAfterEnable(t *testing.T) {
	for _, features := range []uint64{0, virtio.Bit(virtio.FeatureRingEventIdx)} {
		be := &memBackend{data: pattern(diskSectors)}
		dev, err := New(be, Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(dev.Reset)
		d := virtiotest.New(t, 1<<20, QueueSize)
		second := d.BuildChain([][]byte{header(TypeIn, 9)}, []int{SectorSize, 1})
		intr := &publishOnSignal{RecordingInterrupt: virtiotest.NewRecordingInterrupt()}
		intr.publish = func() bool {
			d.PublishAvail(second)
			return d.KickIfNeeded()
		}
		// The first request goes in before activation, which serves it
		// without a kick; NeedsKick only records it as the driver's
		// last kick decision (and must say yes: kicks are on).
		d.SetFeatures(features)
		d.AddChain([][]byte{header(TypeIn, 8)}, []int{SectorSize, 1})
		if !d.NeedsKick() {
			t.Fatal("first request would not be kicked")
		}
		if err := dev.Activate(virtiotest.Activation(intr, features, d)); err != nil {
			t.Fatal(err)
		}
		if !d.WaitUsedIdx(2, 5*time.Second) {
			t.Fatalf("features %#x: request published during the drain never served (used idx %d)", features, d.UsedIdx())
		}
		dev.Reset()
		if intr.kicked {
			t.Fatalf("features %#x: the driver kicked, the test did not exercise the re-check", features)
		}
		for _, u := range d.Collect() {
			if status(u) != StatusOK || u.In[0][0] != 8 && u.In[0][0] != 9 {
				t.Fatalf("head %d status %d data %d", u.ID, status(u), u.In[0][0])
			}
		}
	}
}

// TestNotifyStats: the request queue's kicks, interrupts and suppressed
// interrupt decisions reach Device.Stats.
func TestNotifyStats(t *testing.T) {
	be := &memBackend{data: pattern(diskSectors)}
	dev, err := New(be, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Reset)
	d := virtiotest.New(t, 1<<20, QueueSize)
	intr := virtiotest.NewRecordingInterrupt()
	if err := dev.Activate(virtiotest.Activation(intr, 0, d)); err != nil {
		t.Fatal(err)
	}
	d.AddChain([][]byte{header(TypeIn, 1)}, []int{SectorSize, 1})
	d.Kick()
	if !d.WaitUsedIdx(1, 5*time.Second) || !intr.WaitFor(5*time.Second, func() bool { return intr.Used(0) == 1 }) {
		t.Fatal("first request not completed and signalled")
	}
	// The device may have served the request before taking its kick: wait
	// for the kick to be taken, so the next one does not coalesce with it.
	for deadline := time.Now().Add(5 * time.Second); d.Queue.Watch().KicksTaken.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	d.SetAvailFlags(virtio.AvailFlagNoInterrupt)
	d.AddChain([][]byte{header(TypeIn, 2)}, []int{SectorSize, 1})
	d.Kick()
	if !d.WaitUsedIdx(2, 5*time.Second) {
		t.Fatal("second request not completed")
	}
	dev.Reset()
	w := d.Queue.Watch()
	if k, i, s := w.KicksTaken.Load(), w.InterruptsWanted.Load(), w.SuppressedNoInterrupt.Load(); k != 2 || i != 1 || s != 1 {
		t.Fatalf("kicks %d, interrupts %d, suppressed %d; want 2, 1, 1", k, i, s)
	}
}
