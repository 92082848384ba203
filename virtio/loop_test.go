package virtio_test

import (
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
	"golang.org/x/sys/unix"
)

// newLoop returns a Loop over one source per driver (each Server on that
// driver's queue and doorbell, reporting to intr), not yet running.
func newLoop(ds []*virtiotest.Driver, intr virtio.Interrupt, stop chan struct{}) *virtio.Loop {
	l := &virtio.Loop{Stop: stop}
	for _, d := range ds {
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr, Stop: stop}
		l.Sources = append(l.Sources, &virtio.Source{Server: srv})
	}
	return l
}

// TestLoopRecheck: a chain the driver publishes with kicks off after the
// source's last look at its ring draws no kick; only the Loop's re-check
// as it asks for kicks again (enableNotify, fence, re-read avail idx)
// finds it. The source's first turn publishes it, as a driver on another
// vCPU would, then says its ring is empty. Without the re-check the Loop
// sleeps and the chain is never used. (A chain published before the Loop
// starts takes the driver's first kick decision, which with EVENT_IDX
// always kicks: avail_event starts at 0.)
func TestLoopRecheck(t *testing.T) {
	for _, features := range []uint64{0, eventIdx} {
		d := virtiotest.New(t, memSize, 16)
		d.SetFeatures(features)
		stop := make(chan struct{})
		l := newLoop([]*virtiotest.Driver{d}, virtiotest.NewRecordingInterrupt(), stop)
		srv := l.Sources[0].Server
		d.AddChain(nil, []int{1})
		d.NeedsKick()
		kicked, turns := false, 0
		l.Sources[0].Turn = func(int) (int, virtio.Wait, error) {
			if turns++; turns == 1 {
				d.AddChain(nil, []int{1})
				kicked = d.KickIfNeeded()
				return 0, virtio.Wait{Kind: virtio.WaitRing}, nil
			}
			n := 0
			for {
				c, err := srv.Queue.Pop(srv.Mem)
				if err != nil || c == nil {
					return n, virtio.Wait{Kind: virtio.WaitRing}, err
				}
				if err := srv.Used(c.Head, 0); err != nil {
					return n, virtio.Wait{}, err
				}
				n++
			}
		}
		halt := runLoop(t, l, stop, srv.Intr)
		ok := d.WaitUsedIdx(2, 5*time.Second)
		if err := halt(); err != nil {
			t.Fatal(err)
		}
		if kicked {
			t.Fatalf("features %#x: the driver kicked; the re-check was not exercised", features)
		}
		if !ok {
			t.Fatalf("features %#x: a chain published with kicks off before the Loop slept was never used", features)
		}
	}
}

// TestLoopBudget: two sources with Budget 4 and 12 chains each take turns
// of 4, so neither waits for the other's whole ring; each turn ends with
// one interrupt decision (Batch 0), and kicks stay off while chains
// remain. (Without the budget the first source served all 12 first.)
func TestLoopBudget(t *testing.T) {
	ds := virtiotest.NewQueues(t, memSize, 16, 16)
	stop := make(chan struct{})
	intr := virtiotest.NewRecordingInterrupt()
	l := newLoop(ds, intr, stop)
	var order []int
	var mu sync.Mutex
	for i, s := range l.Sources {
		s.Budget = 4
		s.Handle = func(*virtio.Chain) (uint32, error) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return 0, nil
		}
		for range 12 {
			ds[i].AddChain(nil, []int{1})
		}
	}
	halt := runLoop(t, l, stop, intr)
	for i, d := range ds {
		if !d.WaitUsedIdx(12, 5*time.Second) {
			t.Fatalf("queue %d: used %d of 12", i, d.UsedIdx())
		}
	}
	if err := halt(); err != nil {
		t.Fatal(err)
	}
	want := []int{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1}
	if !slices.Equal(order, want) {
		t.Fatalf("chains served in order %v, want turns of 4: %v", order, want)
	}
	for i, d := range ds {
		w := d.Queue.Watch()
		if n := w.InterruptsWanted.Load() + w.SuppressedNoInterrupt.Load(); n != 3 {
			t.Errorf("queue %d: %d interrupt decisions for 3 turns, want 3", i, n)
		}
	}
}

// TestLoopSourceFails: a source whose turn fails (here a guest error from
// Pop, and a handler's error) is reported once through DeviceError, after
// the interrupt for the chains it used before; the other source is still
// served. A loop whose sources have all failed waits for Stop.
func TestLoopSourceFails(t *testing.T) {
	ds := virtiotest.NewQueues(t, memSize, 16, 16, 16)
	stop := make(chan struct{})
	intr := virtiotest.NewRecordingInterrupt()
	l := newLoop(ds, intr, stop)
	bad := errors.New("bad request")
	n := 0
	l.Sources[0].Handle = echo
	ds[0].AddChain(nil, []int{1})
	ds[0].SetAvailIdx(ds[0].AvailIdx() + 40) // more than a queue ahead
	l.Sources[1].Handle = func(*virtio.Chain) (uint32, error) {
		if n++; n == 2 {
			return 0, bad
		}
		return 0, nil
	}
	ds[1].AddChain(nil, []int{1})
	ds[1].AddChain(nil, []int{1})
	l.Sources[2].Handle = echo
	halt := runLoop(t, l, stop, intr)
	if !intr.WaitFor(5*time.Second, func() bool { return len(intr.Errors()) == 2 }) {
		t.Fatalf("device errors %v, want 2", intr.Errors())
	}
	ds[2].AddChain(nil, []int{1})
	ds[2].Kick()
	if !ds[2].WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("the third queue was not served after the others failed")
	}
	err := halt()
	if !errors.Is(err, virtio.ErrAvailIdx) || !errors.Is(err, bad) {
		t.Fatalf("device errors %v, want ErrAvailIdx and the handler's", err)
	}
	if ds[0].UsedIdx() != 0 || intr.Used(0) != 0 {
		t.Fatalf("queue 0: used %d interrupts %d, want none", ds[0].UsedIdx(), intr.Used(0))
	}
	if ds[1].UsedIdx() != 1 || intr.Used(1) != 1 {
		t.Fatalf("queue 1: used %d interrupts %d; want the first chain used and signalled", ds[1].UsedIdx(), intr.Used(1))
	}
}

// TestLoopWaitFD: a source that waits on an fd (a backend with nothing
// pending) gets no turn until it polls readable: the Loop sleeps with the
// ring source's kicks on, and wakes for the fd. While the other source is
// busy, the fd source gets a turn every Budget units of its work even
// though nobody looked at the fd (it may have work the Loop did not sleep
// long enough to learn of).
func TestLoopWaitFD(t *testing.T) {
	ds := virtiotest.NewQueues(t, memSize, 16, 256)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	stop := make(chan struct{})
	intr := virtiotest.NewRecordingInterrupt()
	l := newLoop(ds, intr, stop)
	var mu sync.Mutex
	var turns []int // ring chains served before each fd turn
	served := 0
	l.Sources[0].Budget = 8
	l.Sources[0].Turn = func(int) (int, virtio.Wait, error) {
		mu.Lock()
		turns = append(turns, served)
		mu.Unlock()
		var b [64]byte
		n, _ := unix.Read(p[0], b[:])
		return max(n, 0), virtio.Wait{Kind: virtio.WaitFD, FD: p[0]}, nil
	}
	l.Sources[1].Budget = 4
	l.Sources[1].Handle = func(*virtio.Chain) (uint32, error) {
		mu.Lock()
		served++
		mu.Unlock()
		return 0, nil
	}
	halt := runLoop(t, l, stop, intr)
	if !ds[1].WaitSleeping(5 * time.Second) {
		t.Fatal("the Loop never slept")
	}
	mu.Lock()
	first := len(turns)
	mu.Unlock()
	if first != 1 {
		t.Fatalf("%d fd turns before the fd was written, want the first only", first)
	}
	unix.Write(p[1], []byte("x"))
	if !waitFor(func() bool { mu.Lock(); defer mu.Unlock(); return len(turns) >= 2 }) {
		t.Fatal("the fd polled readable and its source got no turn")
	}
	// 64 chains, served 4 a turn: the fd source's turns come every 8.
	for range 64 {
		ds[1].AddChain(nil, []int{1})
	}
	ds[1].Kick()
	if !ds[1].WaitUsedIdx(64, 5*time.Second) {
		t.Fatal("chains not served")
	}
	if err := halt(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var during []int
	for _, s := range turns[2:] {
		if s < 64 {
			during = append(during, s)
		}
	}
	if len(during) < 64/8-1 {
		t.Fatalf("fd turns at %v chains served: want one every 8 while the ring source was busy", turns)
	}
	for i := 1; i < len(during); i++ {
		if during[i]-during[i-1] > 8 {
			t.Fatalf("fd turns at %v chains served: %d chains between two, more than its Budget of 8", turns, during[i]-during[i-1])
		}
	}
}

// TestLoopWaitUntil: a source that waits for a deadline (a backoff) gets
// its next turn once the deadline has passed, not before, while the Loop
// sleeps in between.
func TestLoopWaitUntil(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	stop := make(chan struct{})
	l := newLoop([]*virtiotest.Driver{d}, virtiotest.NewRecordingInterrupt(), stop)
	times := make(chan time.Time, 4)
	var until time.Time
	l.Sources[0].Turn = func(int) (int, virtio.Wait, error) {
		now := time.Now()
		times <- now
		if until.IsZero() {
			until = now.Add(30 * time.Millisecond)
			return 0, virtio.Wait{Kind: virtio.WaitUntil, Until: until}, nil
		}
		return 0, virtio.Wait{Kind: virtio.WaitRing}, nil
	}
	halt := runLoop(t, l, stop, l.Sources[0].Server.Intr)
	<-times
	var second time.Time
	select {
	case second = <-times:
	case <-time.After(5 * time.Second):
		t.Fatal("no turn after the deadline")
	}
	if second.Before(until) {
		t.Fatalf("second turn %v before the deadline", until.Sub(second))
	}
	if !d.WaitSleeping(5 * time.Second) {
		t.Fatal("the Loop did not sleep on the ring after the deadline's turn")
	}
	if err := halt(); err != nil {
		t.Fatal(err)
	}
}

// TestLoopLostKickStaysLost: a wake that is not the source's kick (here a
// KVM signal that a fault hook drops, GOVM_FAULTS drop-kick) does not make
// the Loop look at a ring it had armed and re-checked: the chain published
// with that kick waits, as it would behind a kick lost on real hardware, so
// the watchdog can find it, and the next kick serves it. (A Loop that
// looked served the chain and hid the lost kick.)
func TestLoopLostKickStaysLost(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	var dropped atomic.Int32
	d.Bell().Intercept = func() bool { return dropped.Add(1) == 1 }
	stop := make(chan struct{})
	l := newLoop([]*virtiotest.Driver{d}, virtiotest.NewRecordingInterrupt(), stop)
	l.Sources[0].Handle = echo
	halt := runLoop(t, l, stop, l.Sources[0].Server.Intr)
	if !d.WaitSleeping(5 * time.Second) {
		t.Fatal("the Loop never slept")
	}
	d.AddChain(nil, []int{1})
	if !d.NeedsKick() {
		t.Fatal("asleep with kicks off")
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(d.Bell().FD(), one[:]); err != nil { // the kick, as KVM's ioeventfd sends it
		t.Fatal(err)
	}
	if !waitFor(func() bool { return dropped.Load() == 1 }) {
		t.Fatal("the kick never reached the doorbell")
	}
	if d.WaitUsedIdx(1, 200*time.Millisecond) {
		t.Fatal("the chain behind a dropped kick was served")
	}
	d.Kick()
	if !d.WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("the chain was not served after the next kick")
	}
	if err := halt(); err != nil {
		t.Fatal(err)
	}
}
