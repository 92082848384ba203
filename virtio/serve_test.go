package virtio_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// echo is a Handler that uses every chain with length 0.
func echo(*virtio.Chain) (uint32, error) { return 0, nil }

// serve runs srv.Serve(h) on a goroutine; the returned function stops it
// and returns Serve's error.
func serve(t *testing.T, srv *virtio.Server, h virtio.Handler) func() error {
	t.Helper()
	stop := make(chan struct{})
	srv.Stop = stop
	done := make(chan error, 1)
	go func() { done <- srv.Serve(h) }()
	var once sync.Once
	var err error
	halt := func() error {
		once.Do(func() {
			close(stop)
			srv.Bell.Ring() // as a device's Reset does
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { halt() })
	return halt
}

// hookInterrupt runs a hook at the first used-buffer notification: the
// serve loop signals after its drain and before it re-enables kicks, so
// whatever the hook publishes is seen by the driver with kicks off.
type hookInterrupt struct {
	*virtiotest.RecordingInterrupt
	once sync.Once
	hook func()
}

func (h *hookInterrupt) SignalUsed(q int) error {
	h.once.Do(h.hook)
	return h.RecordingInterrupt.SignalUsed(q)
}

// TestServeRecheck: a chain published while kicks are off, between the
// drain and EnableNotify, draws no kick; only the serve loop's re-check
// finds it. Without the re-check the loop sleeps and the chain is never
// used.
func TestServeRecheck(t *testing.T) {
	for _, features := range []uint64{0, eventIdx} {
		d := virtiotest.New(t, memSize, 16)
		d.SetFeatures(features)
		second := d.BuildChain(nil, []int{1})
		kicked := false
		intr := &hookInterrupt{RecordingInterrupt: virtiotest.NewRecordingInterrupt()}
		intr.hook = func() {
			d.PublishAvail(second)
			kicked = d.KickIfNeeded()
		}
		// The first chain is published before Serve starts (served by
		// its first pass, no kick needed); NeedsKick records it as the
		// driver's last kick decision.
		d.AddChain(nil, []int{1})
		if !d.NeedsKick() {
			t.Fatal("kicks off before the device ever ran")
		}
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr}
		halt := serve(t, srv, echo)
		ok := d.WaitUsedIdx(2, 5*time.Second)
		if err := halt(); err != nil {
			t.Fatal(err)
		}
		if kicked {
			t.Fatalf("features %#x: the driver kicked; the re-check was not exercised", features)
		}
		if !ok {
			t.Fatalf("features %#x: chain published during the drain never used (used idx %d)", features, d.UsedIdx())
		}
	}
}

// TestServeBatch: with Batch n the interrupt decision is made every n used
// chains and at the end of each pass, and counted.
func TestServeBatch(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	intr := virtiotest.NewRecordingInterrupt()
	for i := 0; i < 10; i++ {
		d.AddChain(nil, []int{1})
	}
	var cnt virtio.NotifyCounters
	srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr, Batch: 4, Counters: &cnt}
	halt := serve(t, srv, echo)
	if !intr.WaitFor(5*time.Second, func() bool { return intr.Used(0) == 3 }) {
		t.Fatalf("%d interrupts for 10 chains with Batch 4, want 3 (at 4, 8, end of pass)", intr.Used(0))
	}
	// The driver now suppresses interrupts: the next pass decides once
	// and says no.
	d.SetAvailFlags(virtio.AvailFlagNoInterrupt)
	d.AddChain(nil, []int{1})
	if !d.KickIfNeeded() {
		t.Fatal("device asleep with kicks off")
	}
	if !d.WaitUsedIdx(11, 5*time.Second) {
		t.Fatal("chain after the kick not used")
	}
	if err := halt(); err != nil {
		t.Fatal(err)
	}
	if got := intr.Used(0); got != 3 {
		t.Errorf("%d interrupts, want 3", got)
	}
	if k, i, s := cnt.Kicks.Load(), cnt.Interrupts.Load(), cnt.Suppressed.Load(); k != 1 || i != 3 || s != 1 {
		t.Errorf("counters kicks %d interrupts %d suppressed %d, want 1 3 1", k, i, s)
	}
}

// TestServeErrors: a guest error from Pop or the handler ends Serve with
// that error, after the chains used before it were signalled; a stop ends
// it with nil.
func TestServeErrors(t *testing.T) {
	t.Run("pop", func(t *testing.T) {
		d := virtiotest.New(t, memSize, 16)
		intr := virtiotest.NewRecordingInterrupt()
		d.AddChain(nil, []int{1})
		d.SetAvailIdx(d.AvailIdx() + 40) // more than a queue ahead
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr, Stop: make(chan struct{})}
		err := srv.Serve(echo)
		if !errors.Is(err, virtio.ErrAvailIdx) {
			t.Fatalf("Serve = %v, want ErrAvailIdx", err)
		}
		if d.UsedIdx() != 0 || intr.Used(0) != 0 {
			t.Fatalf("used %d interrupts %d", d.UsedIdx(), intr.Used(0))
		}
	})
	t.Run("handler", func(t *testing.T) {
		d := virtiotest.New(t, memSize, 16)
		intr := virtiotest.NewRecordingInterrupt()
		d.AddChain(nil, []int{1})
		d.AddChain(nil, []int{1})
		bad := errors.New("bad request")
		n := 0
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr, Stop: make(chan struct{})}
		err := srv.Serve(func(*virtio.Chain) (uint32, error) {
			if n++; n == 2 {
				return 0, bad
			}
			return 0, nil
		})
		if err != bad {
			t.Fatalf("Serve = %v, want the handler's error", err)
		}
		if d.UsedIdx() != 1 || intr.Used(0) != 1 {
			t.Fatalf("used %d interrupts %d; want the first chain used and signalled", d.UsedIdx(), intr.Used(0))
		}
	})
	t.Run("stop", func(t *testing.T) {
		d := virtiotest.New(t, memSize, 16)
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: virtiotest.NewRecordingInterrupt()}
		halt := serve(t, srv, echo)
		if err := halt(); err != nil {
			t.Fatalf("Serve after stop = %v", err)
		}
	})
}

// TestPassBudget: Pass serves at most its budget of chains, makes the
// interrupt decision for them and returns PassMore with kicks still off (the
// driver adds more without kicking: the caller comes back before it
// sleeps); the pass that empties the ring turns kicks on, re-checks and
// returns PassIdle. After Stop it returns PassStopped. (A Pass without the
// budget served all 10 chains at once, and a loop serving two queues with
// it let a flood on one starve the other.)
func TestPassBudget(t *testing.T) {
	for _, features := range []uint64{0, eventIdx} {
		d := virtiotest.New(t, memSize, 16)
		d.SetFeatures(features)
		intr := virtiotest.NewRecordingInterrupt()
		stop := make(chan struct{})
		var cnt virtio.NotifyCounters
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr, Stop: stop, Counters: &cnt}
		for i := 0; i < 10; i++ {
			d.AddChain(nil, []int{1})
		}
		d.NeedsKick()
		for _, want := range []uint16{4, 8} {
			end, served, err := srv.Pass(echo, 4)
			if err != nil || end != virtio.PassMore || served != 4 {
				t.Fatalf("features %#x: Pass with chains left = %v, %d served, %v; want PassMore, 4", features, end, served, err)
			}
			if d.UsedIdx() != want {
				t.Fatalf("features %#x: used idx %d after a pass of 4, want %d", features, d.UsedIdx(), want)
			}
			if n := cnt.Interrupts.Load() + cnt.Suppressed.Load(); n != uint64(want/4) {
				t.Fatalf("features %#x: %d interrupt decisions after %d chains, want one per pass", features, n, want)
			}
			d.AddChain(nil, []int{1})
			if d.NeedsKick() {
				t.Fatalf("features %#x: kicks on after PassMore", features)
			}
		}
		// 2 left from the first 10, plus the 2 added since.
		end, _, err := srv.Pass(echo, 4)
		if err != nil || end != virtio.PassMore || d.UsedIdx() != 12 {
			t.Fatalf("features %#x: Pass = %v, %v, used %d; want PassMore at 12", features, end, err, d.UsedIdx())
		}
		end, served, err := srv.Pass(echo, 4)
		if err != nil || end != virtio.PassIdle || served != 0 {
			t.Fatalf("features %#x: Pass on an empty ring = %v, %d served, %v; want PassIdle, 0", features, end, served, err)
		}
		d.AddChain(nil, []int{1})
		if !d.KickIfNeeded() {
			t.Fatalf("features %#x: kicks off after PassIdle", features)
		}
		close(stop)
		if end, _, err := srv.Pass(echo, 4); err != nil || end != virtio.PassStopped {
			t.Fatalf("features %#x: Pass after Stop = %v, %v", features, end, err)
		}
	}
}

// TestArmAvail: a device that polls the ring itself (virtio-net RX) keeps
// kicks off while it has buffers and turns them on only while it waits.
func TestArmAvail(t *testing.T) {
	for _, features := range []uint64{0, eventIdx} {
		d := virtiotest.New(t, memSize, 16)
		d.SetFeatures(features)
		intr := virtiotest.NewRecordingInterrupt()
		stop := make(chan struct{})
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr, Stop: stop}
		if err := srv.Quiet(); err != nil {
			t.Fatal(err)
		}
		// Kicks are off: reposting a buffer while the device holds
		// some draws none (with EVENT_IDX avail_event stays behind).
		d.AddChain(nil, []int{1})
		d.NeedsKick() // the very first buffer crosses avail_event 0
		c, _ := d.Queue.Pop(d.Mem)
		if err := srv.Used(c.Head, 1); err != nil {
			t.Fatal(err)
		}
		d.Collect()
		d.AddChain(nil, []int{1})
		if d.NeedsKick() {
			t.Fatalf("features %#x: kick asked for while the device has buffers", features)
		}
		// The ring has a buffer: ArmAvail's re-check finds it, after
		// the interrupt decision for the used chain.
		if more, err := srv.ArmAvail(); !more || err != nil {
			t.Fatalf("ArmAvail with a buffer posted = %v, %v", more, err)
		}
		if intr.Used(0) != 1 {
			t.Fatalf("no interrupt decision before waiting: %d interrupts", intr.Used(0))
		}
		if err := srv.Quiet(); err != nil {
			t.Fatal(err)
		}
		if c, _ := d.Queue.Pop(d.Mem); c == nil {
			t.Fatal("no chain")
		}
		// Empty ring: ArmAvail asks for a kick; the driver's next
		// buffer kicks, and the kick rings the doorbell.
		if more, err := srv.ArmAvail(); more || err != nil {
			t.Fatalf("ArmAvail on an empty ring = %v, %v", more, err)
		}
		srv.Sleeping()
		d.AddChain(nil, []int{1})
		if !d.KickIfNeeded() {
			t.Fatalf("features %#x: ArmAvail did not ask for a kick", features)
		}
		d.Bell().Wait() // returns: the kick rang it
		if !srv.Woke(true) {
			t.Fatal("Woke before stop = false")
		}
		if err := srv.Quiet(); err != nil {
			t.Fatal(err)
		}
		if features == 0 && d.UsedFlags()&virtio.UsedFlagNoNotify == 0 {
			t.Fatal("kicks left on after Quiet")
		}
		if c, _ := d.Queue.Pop(d.Mem); c == nil {
			t.Fatal("no chain after the kick")
		}
		close(stop)
		if srv.Woke(true) {
			t.Fatal("Woke after stop = true")
		}
	}
}

// TestAddUsedBatch: the elements of a batch are written first and used idx
// moves once, by the batch's length; a bad head writes nothing.
func TestAddUsedBatch(t *testing.T) {
	d := virtiotest.New(t, memSize, 8)
	var heads []uint16
	for i := 0; i < 3; i++ {
		d.AddChain(nil, []int{16})
	}
	for i := 0; i < 3; i++ {
		c, _ := d.Queue.Pop(d.Mem)
		heads = append(heads, c.Head)
	}
	elems := []virtio.UsedElem{{Head: heads[0], Len: 16}, {Head: heads[1], Len: 16}, {Head: heads[2], Len: 5}}
	if err := d.Queue.AddUsedBatch(d.Mem, []virtio.UsedElem{{Head: heads[0]}, {Head: 8}}); !errors.Is(err, virtio.ErrBadHead) {
		t.Fatalf("batch with head 8 of 8 = %v, want ErrBadHead", err)
	}
	if id, _ := d.Used(0); d.UsedIdx() != 0 || id != 0 {
		t.Fatalf("a failed batch wrote: used idx %d, elem 0 id %d", d.UsedIdx(), id)
	}
	if err := d.Queue.AddUsedBatch(d.Mem, make([]virtio.UsedElem, 9)); !errors.Is(err, virtio.ErrBadHead) {
		t.Fatalf("batch larger than the ring = %v, want ErrBadHead", err)
	}
	if err := d.Queue.AddUsedBatch(d.Mem, elems); err != nil {
		t.Fatal(err)
	}
	if d.UsedIdx() != 3 || d.Queue.NextUsed() != 3 {
		t.Fatalf("used idx %d next %d, want 3", d.UsedIdx(), d.Queue.NextUsed())
	}
	for i, e := range elems {
		if id, ln := d.Used(uint16(i)); id != uint32(e.Head) || ln != e.Len {
			t.Errorf("elem %d = {%d %d}, want %+v", i, id, ln, e)
		}
	}
}

// TestServeUsedNoAlloc: returning chains and the interrupt decision
// allocate nothing: they run once per chain on every device's hot path.
func TestServeUsedNoAlloc(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	intr := virtiotest.NewRecordingInterrupt()
	c := func() uint16 { d.AddChain(nil, []int{1}); ch, _ := d.Queue.Pop(d.Mem); return ch.Head }()
	srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr, Batch: 4}
	batch := []virtio.UsedElem{{Head: c, Len: 1}, {Head: c, Len: 2}}
	d.SetAvailFlags(virtio.AvailFlagNoInterrupt) // the recorder itself allocates per signal
	allocs := testing.AllocsPerRun(100, func() {
		if err := srv.Used(c, 1); err != nil {
			t.Fatal(err)
		}
		if err := srv.UsedBatch(batch); err != nil {
			t.Fatal(err)
		}
		if err := srv.Signal(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Used+UsedBatch+Signal, want 0", allocs)
	}
}
