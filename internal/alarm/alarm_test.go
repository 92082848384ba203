package alarm

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestFiresAfterDelay(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	fired := make(chan time.Time, 1)
	start := time.Now()
	if err := a.Start(50*time.Millisecond, func() { fired <- time.Now() }); err != nil {
		t.Fatal(err)
	}
	// Only a lower bound: the alarm must never fire early. How late it is
	// depends on the host's load.
	if at := <-fired; at.Sub(start) < 50*time.Millisecond {
		t.Fatalf("fired after %v, before its 50ms", at.Sub(start))
	}
}

func TestStopPreventsFiring(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	var fired atomic.Bool
	if err := a.Start(time.Hour, func() { fired.Store(true) }); err != nil {
		t.Fatal(err)
	}
	a.Stop() // returns only once the sleeping goroutine has gone
	a.Stop()
	if fired.Load() {
		t.Fatal("fired after Stop")
	}
	if err := a.Start(time.Millisecond, func() {}); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}

func TestStopUnstarted(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	a.Stop()
	if err := a.Start(time.Millisecond, func() { t.Error("fired") }); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}

// TestNoRuntimeTimer is the reason the package exists: while the alarm is
// pending its goroutine is in a system call, not parked on a runtime
// timer. A goroutine dump shows the state.
func TestSleepsInSyscall(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if err := a.Start(time.Hour, func() {}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if inPpoll() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no goroutine blocked in ppoll")
}
