package virtio_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// TestGateHoldsServe: while the gate is closed the serve loop takes
// nothing from the ring (a paused VM's device); Open lets it serve the
// chain. A device being stopped is never held.
func TestGateHoldsServe(t *testing.T) {
	r := virtiotest.New(t, 64<<10, 8)
	g := virtio.NewGate()
	if !g.Close() || g.Close() {
		t.Fatal("Close: want true then false")
	}
	r.AddChain([][]byte{[]byte("x")}, nil)
	srv := &virtio.Server{Mem: r.Mem, Queue: r.Queue, Bell: r.Bell(), Intr: virtiotest.NewRecordingInterrupt(),
		Member: g.Join("dev")}
	halt := serve(t, srv, echo)
	t.Cleanup(func() { g.Open() }) // runs before serve's cleanup
	if r.WaitUsedIdx(1, 50*time.Millisecond) || r.Queue.NextAvail() != 0 {
		t.Fatal("the device consumed the ring while paused")
	}
	if !g.Open() || g.Open() {
		t.Fatal("Open: want true then false")
	}
	if !r.WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("the chain was not served after Open")
	}
	// Paused again, with a chain waiting: stopping the device (a reset
	// from the driver) must not wait for a resume.
	g.Close()
	r.AddChain([][]byte{[]byte("y")}, nil)
	r.Kick()
	time.Sleep(20 * time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- halt() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a device held by the gate did not stop")
	}
}

// TestGateHoldsUsed: a chain taken before the pause is not published
// while paused: Server.Used waits for the gate.
func TestGateHoldsUsed(t *testing.T) {
	r := virtiotest.New(t, 64<<10, 8)
	r.AddChain(nil, []int{1})
	g := virtio.NewGate()
	c, err := r.Queue.Pop(r.Mem)
	if err != nil || c == nil {
		t.Fatalf("Pop = %v, %v", c, err)
	}
	g.Close()
	srv := &virtio.Server{Mem: r.Mem, Queue: r.Queue, Intr: virtiotest.NewRecordingInterrupt(), Member: g.Join("dev")}
	done := make(chan error, 1)
	go func() { done <- srv.Used(c.Head, 1) }()
	if r.WaitUsedIdx(1, 50*time.Millisecond) {
		t.Fatal("used idx published while paused")
	}
	g.Open()
	if err := <-done; err != nil || !r.WaitUsedIdx(1, 5*time.Second) {
		t.Fatalf("after Open: %v, used idx %d", err, r.UsedIdx())
	}
}

// TestGateSettleWaitsForRequest: a pause that finds a device in the middle
// of a request (its host I/O has not returned) is not settled until the
// request is done: Settle names the device while it works, and returns
// nil once the handler has returned and the device waits at the gate to
// publish it. Nothing reaches the ring until Open.
func TestGateSettleWaitsForRequest(t *testing.T) {
	r := virtiotest.New(t, 64<<10, 8)
	g := virtio.NewGate()
	inIO, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	slow := func(c *virtio.Chain) (uint32, error) {
		close(inIO)
		<-release // the host's I/O
		finished.Store(true)
		return 0, nil
	}
	srv := &virtio.Server{Mem: r.Mem, Queue: r.Queue, Bell: r.Bell(), Intr: virtiotest.NewRecordingInterrupt(),
		Member: g.Join("disk 0")}
	serve(t, srv, slow)
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { done(); g.Open() }) // runs before serve's stop
	r.AddChain([][]byte{[]byte("w")}, nil)
	r.Kick()
	<-inIO
	g.Close()
	if busy := g.Settle(30*time.Millisecond, nil); !slices.Equal(busy, []string{"disk 0"}) {
		t.Fatalf("Settle during the request's I/O = %q, want [disk 0]", busy)
	}
	settled := make(chan []string, 1)
	go func() { settled <- g.Settle(5*time.Second, nil) }()
	time.Sleep(20 * time.Millisecond)
	done()
	if busy := <-settled; busy != nil || !finished.Load() {
		t.Fatalf("Settle after the I/O returned = %q (request finished: %v)", busy, finished.Load())
	}
	if r.WaitUsedIdx(1, 50*time.Millisecond) {
		t.Fatal("the request was published while paused")
	}
	g.Open()
	if !r.WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("the request was not published after Open")
	}
}

// TestGateSettleAsleep: a device asleep on its kick is parked: Settle
// returns at once. A kick while paused wakes it into the gate: neither the
// used ring's flags (kicks are on while it sleeps; a pass would turn them
// off) nor anything else of the ring changes until Open. A stop ends a
// Settle in progress.
func TestGateSettleAsleep(t *testing.T) {
	r := virtiotest.New(t, 64<<10, 8)
	g := virtio.NewGate()
	srv := &virtio.Server{Mem: r.Mem, Queue: r.Queue, Bell: r.Bell(), Intr: virtiotest.NewRecordingInterrupt(),
		Member: g.Join("net 0")}
	serve(t, srv, echo)
	t.Cleanup(func() { g.Open() })
	if !r.WaitSleeping(5 * time.Second) {
		t.Fatal("the device did not go to sleep")
	}
	g.Close()
	start := time.Now()
	if busy := g.Settle(5*time.Second, nil); busy != nil || time.Since(start) > time.Second {
		t.Fatalf("Settle with the device asleep = %q after %v", busy, time.Since(start))
	}
	flags := r.UsedFlags()
	r.AddChain([][]byte{[]byte("k")}, nil)
	r.Kick()
	time.Sleep(50 * time.Millisecond)
	if busy := g.Settle(time.Second, nil); busy != nil {
		t.Fatalf("Settle after a kick while paused = %q", busy)
	}
	if r.UsedFlags() != flags || r.UsedIdx() != 0 || r.Queue.NextAvail() != 0 {
		t.Fatalf("ring changed while paused: used flags %#x -> %#x, used idx %d, next avail %d",
			flags, r.UsedFlags(), r.UsedIdx(), r.Queue.NextAvail())
	}
	g.Open()
	if !r.WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("the chain was not served after Open")
	}
	// A member that never parks: a stop ends the wait, with no names.
	g.Join("stuck")
	g.Close()
	stop := make(chan struct{})
	close(stop)
	if busy := g.Settle(5*time.Second, stop); busy != nil {
		t.Fatalf("Settle with stop closed = %q", busy)
	}
}

// TestGateSettleRace: members that pass the gate and work in a critical
// section (a stand-in for touching a ring) while a pauser closes, settles
// and opens the gate over and over. After every Settle no member is in
// its critical section, and none enters one until Open. Run under -race,
// it also checks the Member/Settle handshake's memory ordering.
func TestGateSettleRace(t *testing.T) {
	g := virtio.NewGate()
	var inside, paused atomic.Int32
	var violations atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		m := g.Join(string(rune('a' + i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer m.Leave()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				m.Hold(stop)
				inside.Add(1)
				if paused.Load() != 0 {
					violations.Add(1)
				}
				inside.Add(-1)
				if n%7 == 0 { // now and then a sleep, as on a kick
					m.Idle()
					time.Sleep(10 * time.Microsecond)
					m.Wake(stop)
				}
			}
		}()
	}
	for range 300 {
		g.Close()
		if busy := g.Settle(5*time.Second, nil); busy != nil {
			t.Fatalf("Settle = %q", busy)
		}
		paused.Store(1)
		if n := inside.Load(); n != 0 {
			t.Fatalf("%d members in their critical section after Settle", n)
		}
		time.Sleep(20 * time.Microsecond)
		paused.Store(0)
		g.Open()
	}
	close(stop)
	wg.Wait()
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d critical sections entered between Settle and Open", v)
	}
}
