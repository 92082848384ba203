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

// serve runs a Loop with srv as its one source (Handle h, Prompts, as
// virtio-blk's) on a goroutine, after configure, if given, has set the
// Loop up. The returned function stops it as a device's Reset does and
// returns the errors the loop reported to srv.Intr (DeviceError), if it
// records them.
func serve(t *testing.T, srv *virtio.Server, h virtio.Handler, configure ...func(*virtio.Loop)) func() error {
	t.Helper()
	stop := make(chan struct{})
	srv.Stop = stop
	l := &virtio.Loop{Stop: stop, Member: srv.Member,
		Sources: []*virtio.Source{{Server: srv, Handle: h, Prompts: true}}}
	for _, c := range configure {
		c(l)
	}
	return runLoop(t, l, stop, srv.Intr)
}

// runLoop runs l (whose Stop is stop) on a goroutine; the returned function
// closes stop, rings every source's doorbell, waits for Run to return and
// returns what intr recorded as device errors, if it records them.
func runLoop(t *testing.T, l *virtio.Loop, stop chan struct{}, intr virtio.Interrupt) func() error {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); l.Run() }()
	var once sync.Once
	var err error
	halt := func() error {
		once.Do(func() {
			close(stop)
			for _, s := range l.Sources {
				s.Server.Bell.Ring() // as Worker.Stop does
			}
			<-done
			if r, ok := intr.(interface{ Errors() []error }); ok {
				err = errors.Join(r.Errors()...)
			}
		})
		return err
	}
	t.Cleanup(func() { halt() })
	return halt
}

// TestServeBatch: with Batch n the interrupt decision is made every n used
// chains and at the end of each turn, and counted.
func TestServeBatch(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	intr := virtiotest.NewRecordingInterrupt()
	for i := 0; i < 10; i++ {
		d.AddChain(nil, []int{1})
	}
	srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr, Batch: 4}
	halt := serve(t, srv, echo)
	if !intr.WaitFor(5*time.Second, func() bool { return intr.Used(0) == 3 }) {
		t.Fatalf("%d interrupts for 10 chains with Batch 4, want 3 (at 4, 8, end of pass)", intr.Used(0))
	}
	// The driver now suppresses interrupts: the next turn decides once
	// and says no.
	if !d.WaitSleeping(5 * time.Second) {
		t.Fatal("the Loop never slept")
	}
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
	w := d.Queue.Watch()
	if k, i, s := w.KicksTaken.Load(), w.InterruptsWanted.Load(), w.SuppressedNoInterrupt.Load(); k != 1 || i != 3 || s != 1 {
		t.Errorf("counters kicks %d interrupts %d suppressed %d, want 1 3 1", k, i, s)
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
