package virtio_test

import (
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// TestGateHoldsPop: while the gate is closed Pop takes nothing from the
// ring (a paused VM's device); Open lets it take the chain, unchanged.
func TestGateHoldsPop(t *testing.T) {
	r := virtiotest.New(t, 64<<10, 8)
	head := r.AddChain([][]byte{[]byte("x")}, nil)
	g := virtio.NewGate()
	r.Queue.SetGate(g)
	if !g.Close() || g.Close() {
		t.Fatal("Close: want true then false")
	}
	got := make(chan uint16, 1)
	go func() {
		c, err := r.Queue.Pop(r.Mem)
		if err != nil || c == nil {
			t.Errorf("Pop = %v, %v", c, err)
			close(got)
			return
		}
		got <- c.Head
	}()
	select {
	case <-got:
		t.Fatal("Pop took a chain through a closed gate")
	case <-time.After(50 * time.Millisecond):
	}
	if r.Queue.NextAvail() != 0 {
		t.Fatal("the device consumed the ring while paused")
	}
	if !g.Open() || g.Open() {
		t.Fatal("Open: want true then false")
	}
	if h := <-got; h != head {
		t.Fatalf("Pop after Open: head %d, want %d", h, head)
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
