package virtio

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newBell(t *testing.T) *Doorbell {
	t.Helper()
	b, err := NewDoorbell()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// kvmSignal does what KVM's ioeventfd does on a matching guest write.
func kvmSignal(t *testing.T, b *Doorbell) {
	t.Helper()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(b.FD(), one[:]); err != nil {
		t.Fatal(err)
	}
}

// waitReturns runs b.Wait on another goroutine (the device's) and fails
// unless it returns within a generous limit (a hang, not a timing check).
func waitReturns(t *testing.T, b *Doorbell, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { b.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Wait did not return: %s", what)
	}
}

// TestDoorbellRings: rings coalesce while nobody waits, a Wait takes them
// all, Clear takes a pending one without blocking, and KVM's signals are
// counted apart from Ring's.
func TestDoorbellRings(t *testing.T) {
	b := newBell(t)
	if b.Clear() {
		t.Fatal("a new doorbell was rung")
	}
	b.Ring()
	b.Ring()
	kvmSignal(t, b)
	kvmSignal(t, b)
	waitReturns(t, b, "rung before the wait")
	if b.Clear() {
		t.Fatal("rings did not coalesce into one wake")
	}
	if n := b.Signals(); n != 2 {
		t.Fatalf("Signals = %d after 2 KVM signals and 2 rings, want 2", n)
	}
	b.Ring()
	if !b.Clear() || b.Clear() {
		t.Fatal("Clear: want one pending ring taken")
	}
	if n := b.Signals(); n != 2 {
		t.Fatalf("Signals = %d, want 2 (rings are not KVM's)", n)
	}
}

// TestDoorbellPending: Pending sees a ring (or a KVM signal) the device
// has not taken, and takes nothing; after Close, a ring on the channel.
func TestDoorbellPending(t *testing.T) {
	b := newBell(t)
	if b.Pending() {
		t.Fatal("a new doorbell has a ring pending")
	}
	kvmSignal(t, b)
	if !b.Pending() || !b.Pending() {
		t.Fatal("a KVM signal the device has not taken is not pending (or Pending took it)")
	}
	if !b.Clear() || b.Pending() {
		t.Fatal("after Clear the ring is still pending")
	}
	b.Close()
	b.Ring()
	if !b.Pending() {
		t.Fatal("a ring after Close (on the channel) is not pending")
	}
}

// TestDoorbellWakesSleeper: a Wait in progress returns on a Ring and on a
// KVM signal from other threads.
func TestDoorbellWakesSleeper(t *testing.T) {
	b := newBell(t)
	for _, ring := range []func(){b.Ring, func() { kvmSignal(t, b) }} {
		done := make(chan struct{})
		go func() { b.Wait(); close(done) }()
		select {
		case <-done:
			t.Fatal("Wait returned before a ring")
		case <-time.After(20 * time.Millisecond):
		}
		ring()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Wait slept through a ring")
		}
	}
}

// TestDoorbellNoLostRing races ringers against one waiter that, like the
// serve loop, looks for work and sleeps only when it found none. A lost
// wakeup leaves the waiter asleep with work pending.
func TestDoorbellNoLostRing(t *testing.T) {
	b := newBell(t)
	const ringers, each = 4, 5000
	var posted atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < ringers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				posted.Add(1)
				if j%2 == 0 {
					b.Ring()
				} else {
					kvmSignal(t, b)
				}
			}
		}()
	}
	done := make(chan int64)
	go func() {
		var taken int64
		for taken < ringers*each {
			if n := posted.Load(); n > taken {
				taken = n
				continue
			}
			b.Wait()
		}
		done <- taken
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("waiter asleep with %d posted: a ring was lost", posted.Load())
	}
	wg.Wait()
	b.Clear() // the signals sent after the waiter saw all the work
	if n := b.Signals(); n != ringers*each/2 {
		t.Fatalf("Signals = %d, want %d", n, ringers*each/2)
	}
}

// TestDoorbellIntercept: Intercept is asked about wakes caused by KVM's signals
// alone; a Ring is never dropped.
func TestDoorbellIntercept(t *testing.T) {
	b := newBell(t)
	asked := 0
	b.Intercept = func() bool { asked++; return asked == 1 }
	kvmSignal(t, b)
	if b.Clear() {
		t.Fatal("the wake Intercept took was delivered")
	}
	kvmSignal(t, b)
	if !b.Clear() {
		t.Fatal("the wake after the dropped one was lost")
	}
	b.Ring()
	if !b.Clear() || asked != 2 {
		t.Fatalf("Ring: delivered %v, Intercept asked %d times; want delivered, 2", true, asked)
	}
	if b.Signals() != 2 {
		t.Fatalf("Signals = %d, want 2 (a dropped signal still counts)", b.Signals())
	}
}

// breakRead makes b's eventfd fail the way a bad read does: /dev/null,
// duplicated onto its fd number, polls readable and reads 0 bytes.
func breakRead(t *testing.T, b *Doorbell) {
	t.Helper()
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(null)
	if err := unix.Dup3(null, b.FD(), unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
}

// TestDoorbellFallsBack: an eventfd that fails (a short read here, a poll
// error below) is never a silent hang: OnFail hears of it once, the
// sleeping Wait returns, and rings reach Wait over the channel from then
// on.
func TestDoorbellFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, b *Doorbell)
		want    error
	}{
		{"read", breakRead, ErrDoorbellRead},
		{"poll", func(t *testing.T, b *Doorbell) {
			orig := pollFDs
			pollFDs = func([]unix.PollFd, *unix.Timespec) error { return unix.ENOMEM }
			t.Cleanup(func() { pollFDs = orig })
		}, unix.ENOMEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBell(t)
			var fails []error
			b.OnFail = func(err error) { fails = append(fails, err) }
			tc.breakIt(t, b)
			waitReturns(t, b, "the eventfd failed under it")
			if len(fails) != 1 || !errors.Is(fails[0], tc.want) || !b.Broken() {
				t.Fatalf("OnFail got %v, broken %v; want one %v", fails, b.Broken(), tc.want)
			}
			b.Ring()
			waitReturns(t, b, "rung after the fallback")
			if b.Clear() {
				t.Fatal("a ring delivered twice")
			}
			b.Ring()
			if !b.Clear() {
				t.Fatal("Clear missed a ring after the fallback")
			}
			if len(fails) != 1 {
				t.Fatalf("OnFail called %d times", len(fails))
			}
		})
	}
}

// TestDoorbellClose: Close wakes a Wait blocked on the eventfd (which then
// closes it), and the doorbell still works after Close, over its channel:
// a device reset after its transport's doorbells closed still wakes.
func TestDoorbellClose(t *testing.T) {
	b := newBell(t)
	done := make(chan struct{})
	go func() { b.Wait(); close(done) }()
	closeUnderWait(t, b, done)
	b.Ring()
	waitReturns(t, b, "rung after Close")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// closeUnderWait closes b once a wait (Doorbell.Wait or a Waiter's) is
// blocked on its eventfd, and fails unless the wait returns (done closes)
// and the eventfd is closed after it left.
func closeUnderWait(t *testing.T, b *Doorbell, done <-chan struct{}) {
	t.Helper()
	for !func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.waiting }() {
		time.Sleep(time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake the Wait")
	}
	if _, err := unix.FcntlInt(uintptr(b.FD()), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatal("the eventfd is still open after Close and the Wait left")
	}
}

// TestDoorbellWaitNoAlloc: a device going to sleep on its doorbell
// allocates nothing (it does so once per kick it waits for), also under
// the race detector. The kick is KVM's (a write of 1 from a buffer that is
// already on the heap), so only Wait's own allocations count.
func TestDoorbellWaitNoAlloc(t *testing.T) {
	b := newBell(t)
	one := make([]byte, 8)
	binary.NativeEndian.PutUint64(one, 1)
	n := testing.AllocsPerRun(100, func() {
		if _, err := unix.Write(b.FD(), one); err != nil {
			t.Fatal(err)
		}
		b.Wait()
	})
	if n != 0 {
		t.Fatalf("Wait allocated %v times per kick, want 0", n)
	}
}
