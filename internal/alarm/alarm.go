// Package alarm calls a function once after a delay, from a goroutine that
// sleeps in ppoll(2) on an eventfd rather than on a Go runtime timer.
//
// Why not time.AfterFunc: a pending runtime timer is checked by the
// scheduler on every scheduling round, and an earlier attempt measured
// polled guest I/O slowing down while a long --timeout timer was pending.
// A goroutine blocked in a system call costs the scheduler nothing; the
// eventfd lets Stop wake it at once. The price is one OS thread for the
// life of the alarm.
package alarm

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Alarm is one armed alarm. Create it with New (which opens the eventfd,
// so a caller can do it before a seccomp filter forbids eventfd2), then
// Start it.
type Alarm struct {
	efd      int
	stopOnce sync.Once
	startMu  sync.Mutex
	started  bool
	done     chan struct{}
}

// New opens the alarm's eventfd.
func New() (*Alarm, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("alarm: eventfd: %w", err)
	}
	return &Alarm{efd: fd, done: make(chan struct{})}, nil
}

// Start calls f once, on the alarm's goroutine, after d, unless Stop is
// called first. Start may be called once.
func (a *Alarm) Start(d time.Duration, f func()) error {
	a.startMu.Lock()
	defer a.startMu.Unlock()
	if a.started {
		return errors.New("alarm: already started")
	}
	a.started = true
	deadline := time.Now().Add(d)
	go func() {
		defer close(a.done)
		if a.sleep(deadline) {
			f()
		}
	}()
	return nil
}

// sleep waits in ppoll until deadline (true) or until Stop signals the
// eventfd (false).
func (a *Alarm) sleep(deadline time.Time) bool {
	fds := []unix.PollFd{{Fd: int32(a.efd), Events: unix.POLLIN}}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return true
		}
		ts := unix.NsecToTimespec(left.Nanoseconds())
		n, err := unix.Ppoll(fds, &ts, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			// A signal landed on this thread: recompute what is left.
		case err != nil:
			// ppoll cannot fail on one valid fd short of ENOMEM; firing
			// early would be wrong, so fall back to a plain sleep.
			time.Sleep(time.Until(deadline))
			return true
		case n > 0:
			return false
		}
	}
}

// Stop disarms the alarm: after Stop returns, f is not running and will
// not be called (unless it already was). Stop is idempotent and also
// releases the eventfd; an alarm that was never started is just closed.
func (a *Alarm) Stop() {
	a.stopOnce.Do(func() {
		var one [8]byte
		one[0] = 1 // eventfd counters are host-endian; x86 is little-endian
		_, _ = unix.Write(a.efd, one[:])
		a.startMu.Lock()
		started := a.started
		a.started = true // a Start after Stop fails
		a.startMu.Unlock()
		if started {
			<-a.done
		}
		_ = unix.Close(a.efd)
	})
}
