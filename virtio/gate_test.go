package virtio_test

import (
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
	r.Queue.SetGate(g)
	if !g.Close() || g.Close() {
		t.Fatal("Close: want true then false")
	}
	r.AddChain([][]byte{[]byte("x")}, nil)
	srv := &virtio.Server{Mem: r.Mem, Queue: r.Queue, Bell: r.Bell(), Intr: virtiotest.NewRecordingInterrupt()}
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
	r.Queue.SetGate(g)
	c, err := r.Queue.Pop(r.Mem)
	if err != nil || c == nil {
		t.Fatalf("Pop = %v, %v", c, err)
	}
	g.Close()
	srv := &virtio.Server{Mem: r.Mem, Queue: r.Queue, Intr: virtiotest.NewRecordingInterrupt()}
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
