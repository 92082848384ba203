package virtio

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitAny runs w.Wait on another goroutine and fails unless it returns
// within a generous limit (a hang, not a timing check).
func waitAny(t *testing.T, w *Waiter, bells []*Doorbell, fds []int, timeout time.Duration) ([]bool, []bool) {
	t.Helper()
	rung, ready := make([]bool, len(bells)), make([]bool, len(fds))
	done := make(chan struct{})
	go func() { w.Wait(bells, rung, fds, ready, timeout); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return")
	}
	return rung, ready
}

// TestWaiterWakes: one Wait on two doorbells and an fd returns for each of
// them, says which bell rang (and takes only that ring), reports the fd's
// readiness in its Revents, and returns at its timeout when nothing comes.
func TestWaiterWakes(t *testing.T) {
	a, b := newBell(t), newBell(t)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	var w Waiter
	bells := []*Doorbell{a, b}
	fds := []int{p[0]}

	kvmSignal(t, b)
	if r, f := waitAny(t, &w, bells, fds, 0); r[0] || !r[1] || f[0] {
		t.Fatalf("KVM signal on bell 1: rung %v, fd ready %v", r, f)
	}
	if b.Signals() != 1 {
		t.Fatalf("signals = %d, want 1", b.Signals())
	}
	a.Ring()
	if r, _ := waitAny(t, &w, bells, fds, 0); !r[0] || r[1] {
		t.Fatalf("Ring on bell 0: rung %v", r)
	}
	if _, err := unix.Write(p[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	if r, f := waitAny(t, &w, bells, fds, 0); r[0] || r[1] || !f[0] {
		t.Fatalf("fd readable: rung %v, ready %v", r, f)
	}
	var buf [1]byte
	unix.Read(p[0], buf[:])
	if r, f := waitAny(t, &w, bells, fds, time.Millisecond); r[0] || r[1] || f[0] {
		t.Fatalf("timeout: rung %v, ready %v", r, f)
	}
	// A negative fd is ignored.
	if _, f := waitAny(t, &w, bells, []int{-1}, time.Millisecond); f[0] {
		t.Fatal("fd -1 reported ready")
	}
	// Both bells and the fd at once: all reported in one Wait.
	a.Ring()
	kvmSignal(t, b)
	unix.Write(p[1], []byte{1})
	if r, f := waitAny(t, &w, bells, fds, 0); !r[0] || !r[1] || !f[0] {
		t.Fatalf("all ready: rung %v, ready %v", r, f)
	}
	if a.Clear() || b.Clear() {
		t.Fatal("a ring left behind after Wait took it")
	}
}

// TestWaiterIntercept: a KVM signal that a fault hook takes over is not a
// ring, as for Doorbell.Wait (GOVM_FAULTS drop-kick on a device's Loop).
func TestWaiterIntercept(t *testing.T) {
	a, b := newBell(t), newBell(t)
	b.Intercept = func() bool { return true }
	var w Waiter
	kvmSignal(t, b)
	if r, _ := waitAny(t, &w, []*Doorbell{a, b}, nil, time.Millisecond); r[0] || r[1] {
		t.Fatalf("intercepted signal delivered: rung %v", r)
	}
	b.Ring() // a ring from govm itself is never intercepted
	if r, _ := waitAny(t, &w, []*Doorbell{a, b}, nil, 0); !r[1] {
		t.Fatalf("Ring not delivered past Intercept: rung %v", r)
	}
}

// TestWaiterFallsBack: a doorbell whose eventfd fails under a Wait wakes it
// as rung and goes on over its channel, which a Wait polls with the rest: a
// ring after the failure still wakes the loop, and a healthy bell in the
// same Wait still works.
func TestWaiterFallsBack(t *testing.T) {
	a, b := newBell(t), newBell(t)
	var fails []error
	b.OnFail = func(err error) { fails = append(fails, err) }
	breakRead(t, b)
	var w Waiter
	bells := []*Doorbell{a, b}
	if r, _ := waitAny(t, &w, bells, nil, 0); !r[1] {
		t.Fatalf("failing eventfd: rung %v, want bell 1 as rung", r)
	}
	if len(fails) != 1 || !errors.Is(fails[0], ErrDoorbellRead) || !b.Broken() {
		t.Fatalf("OnFail got %v, broken %v", fails, b.Broken())
	}
	b.Ring()
	if r, _ := waitAny(t, &w, bells, nil, 0); r[0] || !r[1] {
		t.Fatalf("ring after the fallback: rung %v", r)
	}
	kvmSignal(t, a)
	if r, _ := waitAny(t, &w, bells, nil, 0); !r[0] || r[1] {
		t.Fatalf("healthy bell beside a broken one: rung %v", r)
	}
}

// TestWaiterClose: Close wakes a Wait blocked on the doorbell (which then
// closes the eventfd), and rings after Close still wake later Waits.
func TestWaiterClose(t *testing.T) {
	a, b := newBell(t), newBell(t)
	var w Waiter
	bells := []*Doorbell{a, b}
	rung := make([]bool, 2)
	done := make(chan struct{})
	go func() { w.Wait(bells, rung, nil, nil, 0); close(done) }()
	closeUnderWait(t, b, done)
	if !rung[1] {
		t.Fatalf("rung %v after Close, want bell 1", rung)
	}
	b.Ring()
	if r, _ := waitAny(t, &w, bells, nil, 0); !r[1] {
		t.Fatalf("ring after Close: rung %v", r)
	}
}

// TestWaiterNoAlloc: a device's Loop sleeps through a Waiter once per
// wakeup; after the first Wait sized its buffers, a Wait allocates nothing.
func TestWaiterNoAlloc(t *testing.T) {
	a, b := newBell(t), newBell(t)
	var w Waiter
	bells := []*Doorbell{a, b}
	rung := make([]bool, 2)
	fds, ready := []int{-1}, make([]bool, 1)
	one := make([]byte, 8)
	binary.NativeEndian.PutUint64(one, 1)
	n := testing.AllocsPerRun(100, func() {
		if _, err := unix.Write(b.FD(), one); err != nil {
			t.Fatal(err)
		}
		w.Wait(bells, rung, fds, ready, 0)
	})
	if n != 0 {
		t.Fatalf("Wait allocated %v times per wakeup, want 0", n)
	}
}

// TestWaiterPeek: Peek says whether an fd is readable without blocking or
// taking anything, and allocates nothing once sized.
func TestWaiterPeek(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	var w Waiter
	fds := []int{-1, p[0]}
	if w.Peek(fds) {
		t.Fatal("Peek on an empty pipe = true")
	}
	if _, err := unix.Write(p[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // Peek takes nothing
		if !w.Peek(fds) {
			t.Fatalf("Peek %d on a readable pipe = false", i)
		}
	}
	if n := testing.AllocsPerRun(100, func() { w.Peek(fds) }); n != 0 {
		t.Fatalf("Peek allocated %v times, want 0", n)
	}
}
