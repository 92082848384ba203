package stall

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Run samples every Period until Stop. It sleeps in ppoll on an eventfd,
// not on a Go timer: a runtime timer firing every few milliseconds was
// measured slowing polled blk I/O by ~25% (the timer wakes the runtime's
// scheduler on the threads the vCPUs and device goroutines want).
func (w *Detector) Run() error {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watchdog: eventfd: %w", err)
	}
	w.stopFD = fd
	w.done = make(chan struct{})
	go w.loop()
	return nil
}

func (w *Detector) loop() {
	defer close(w.done)
	var buf []Queue
	fds := []unix.PollFd{{Fd: int32(w.stopFD), Events: unix.POLLIN}}
	for {
		ts := unix.NsecToTimespec(w.cfg.Period.Nanoseconds())
		n, err := unix.Ppoll(fds, &ts, nil)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n > 0 {
			return // Stop
		}
		var ok bool
		buf, ok = w.cfg.Sample(buf[:0])
		w.Observe(time.Now(), buf, ok)
	}
}

// Stop ends Run's goroutine and waits for it.
func (w *Detector) Stop() {
	if w.done == nil {
		return
	}
	var one [8]byte
	one[0] = 1 // eventfd counter, host-endian (x86: little)
	_, _ = unix.Write(w.stopFD, one[:])
	<-w.done
	_ = unix.Close(w.stopFD)
	w.done = nil
}
