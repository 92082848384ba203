package tap

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Frame I/O on the tun fd. Each call is one readv(2) or writev(2) of one
// frame; a call that must wait blocks its OS thread in ppoll(2) on the tun fd
// together with eventfds that end the wait (a passed read deadline, Close).
//
// Why not Go's runtime poller (an *os.File): measured under a UDP flood
// into the guest (bench/ net-bench rx-64), every wait for the next frame
// went through the scheduler - the poller thread woken by epoll, the
// goroutine handed to a P, idle threads woken to spin and re-poll - about
// ten epoll_pwait calls and seven context switches per wait, and while the
// RX goroutine was waiting for guest buffers instead, each frame arriving
// on the (edge-triggered, registered) fd woke the poller thread for
// nothing. Blocking in ppoll costs one context switch per wait and none per
// frame that nobody waits for.

// errClosed is os.ErrClosed: operations on a closed tap wrap it.
var errClosed = os.ErrClosed

// Read reads one frame (with its vnet header when VnetHdr), blocking until
// one is pending. A p shorter than the frame gets the frame truncated.
func (t *Tap) Read(p []byte) (int, error) { return t.Readv([][]byte{p}) }

// Write writes one frame (with its vnet header when VnetHdr).
func (t *Tap) Write(p []byte) (int, error) { return t.Writev([][]byte{p}) }

// Readv reads one frame scattered over iovs, blocking until one is pending,
// the read deadline passes (os.ErrDeadlineExceeded) or the tap is closed
// (os.ErrClosed).
func (t *Tap) Readv(iovs [][]byte) (int, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for {
		n, err := t.readv(iovs)
		if err != ErrWouldBlock {
			return n, err
		}
		if err := t.waitRead(); err != nil {
			return 0, err
		}
	}
}

// TryReadv reads one frame scattered over iovs if one is pending, and
// returns ErrWouldBlock otherwise. It never blocks.
func (t *Tap) TryReadv(iovs [][]byte) (int, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.readv(iovs)
}

// readv is one non-blocking readv; called with mu held shared.
func (t *Tap) readv(iovs [][]byte) (int, error) {
	if t.closed.Load() {
		return 0, fmt.Errorf("tap: %s: %w", t.name, errClosed)
	}
	for {
		n, err := unix.Readv(t.fd, iovs)
		switch err {
		case nil:
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, ErrWouldBlock
		}
		return 0, fmt.Errorf("tap: readv %s: %w", t.name, err)
	}
}

// WaitReadable blocks until a frame may be pending (a following TryReadv
// can still find none), the read deadline passes (os.ErrDeadlineExceeded)
// or the tap is closed (os.ErrClosed). It looks at the fd itself, so a
// frame that arrived since the caller's last TryReadv is never missed.
func (t *Tap) WaitReadable() error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.waitRead()
}

// PollFD is the tun fd, for a caller that polls it together with fds of its
// own (virtio-net's I/O goroutine: the tap and its doorbells in one ppoll)
// and then reads with TryReadv. It is valid until Close; polling it is the
// caller's business to end before then.
func (t *Tap) PollFD() int { return t.fd }

// Writev writes one frame gathered from iovs (at most IOV_MAX of them).
func (t *Tap) Writev(iovs [][]byte) (int, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for {
		if t.closed.Load() {
			return 0, fmt.Errorf("tap: %s: %w", t.name, errClosed)
		}
		n, err := unix.Writev(t.fd, iovs)
		switch err {
		case nil:
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			// The tun driver does not push back on writers today;
			// should it, wait for room rather than drop.
			if err := t.waitWrite(); err != nil {
				return 0, err
			}
			continue
		}
		return 0, fmt.Errorf("tap: writev %s: %w", t.name, err)
	}
}

// SetReadDeadline makes reads and waits fail with os.ErrDeadlineExceeded
// once d has passed; the zero time clears it. A deadline already passed
// also ends the reads and waits in progress at once (that is how a device
// Reset unblocks its RX goroutine). A future deadline set while a read is
// already blocked takes effect from the next read.
func (t *Tap) SetReadDeadline(d time.Time) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed.Load() {
		return fmt.Errorf("tap: %s: %w", t.name, errClosed)
	}
	ns := int64(0)
	if !d.IsZero() {
		ns = max(d.UnixNano(), 1) // 0 means "no deadline"
	}
	t.deadline.Store(ns)
	// intr is readable exactly while a deadline has passed: set it now
	// for a past one; clear it otherwise (a later expiry is the ppoll
	// timeout's to notice).
	if ns != 0 && ns <= time.Now().UnixNano() {
		signalEventFD(t.intr)
	} else {
		drainEventFD(t.intr)
	}
	return nil
}

// waitRead blocks until the fd is readable (or in error: the next readv
// says which), the read deadline passes or Close begins. mu held shared.
func (t *Tap) waitRead() error {
	for {
		if t.closed.Load() {
			return fmt.Errorf("tap: %s: %w", t.name, errClosed)
		}
		var timeout *unix.Timespec
		if d := t.deadline.Load(); d != 0 {
			left := d - time.Now().UnixNano()
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			ts := unix.NsecToTimespec(left)
			timeout = &ts
		}
		// This goroutine lives in system calls: see internal/yield.
		t.yield.BeforeBlock()
		p := &t.rpoll
		*p = [3]unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLIN}, {Fd: int32(t.intr), Events: unix.POLLIN},
			{Fd: int32(t.dead), Events: unix.POLLIN}}
		if err := ppoll(p[:], timeout); err != nil {
			return fmt.Errorf("tap: %s: %w", t.name, err)
		}
		if p[0].Revents != 0 {
			return nil
		}
		// Timeout, deadline or Close: the checks above decide.
	}
}

// waitWrite blocks until the fd is writable or Close begins. mu held
// shared. The read deadline does not apply to writes.
func (t *Tap) waitWrite() error {
	for {
		if t.closed.Load() {
			return fmt.Errorf("tap: %s: %w", t.name, errClosed)
		}
		p := &t.wpoll
		*p = [2]unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLOUT}, {Fd: int32(t.dead), Events: unix.POLLIN}}
		if err := ppoll(p[:], nil); err != nil {
			return fmt.Errorf("tap: %s: %w", t.name, err)
		}
		if p[0].Revents != 0 {
			return nil
		}
	}
}

// ppoll is ppoll(2), retried on EINTR. unix.Ppoll enters the syscall the
// blocking way, so the Go scheduler runs other goroutines on other threads
// meanwhile.
func ppoll(fds []unix.PollFd, timeout *unix.Timespec) error {
	for {
		_, err := unix.Ppoll(fds, timeout, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// signalEventFD adds 1 to an eventfd's counter, making it readable.
func signalEventFD(fd int) {
	var one = [8]byte{1}
	for {
		if _, err := unix.Write(fd, one[:]); err != unix.EINTR {
			return
		}
	}
}

// drainEventFD resets an eventfd's counter to zero (it is non-blocking).
func drainEventFD(fd int) {
	var buf [8]byte
	for {
		if _, err := unix.Read(fd, buf[:]); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// Pending reports whether a frame is waiting to be read, without reading
// it (poll with a zero timeout): govm's watchdog asks it while the
// guest's receive queue has no buffers, to tell RX starvation from an
// idle link.
func (t *Tap) Pending() bool {
	pending := false
	_ = t.control("poll", func(fd int) error {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		pending = err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
		return nil
	})
	return pending
}
