package tap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Frame I/O on the tun fd. Each call is one readv(2) or writev(2) of one
// frame. Reads never block: the caller polls PollFD itself, together with
// whatever else it waits for (virtio-net's I/O goroutine: the tap and its
// two doorbells in one ppoll), and reads with TryReadv.
//
// Why not Go's runtime poller (an *os.File): there every wait for the
// next frame goes through the scheduler - the poller thread woken by
// epoll, the goroutine handed to a P, idle threads woken to spin and
// re-poll - several epoll_pwait calls and context switches per wait, and
// while RX waits for guest buffers instead, each frame arriving on the
// (edge-triggered, registered) fd wakes the poller thread for nothing.
// Polling the fd in ppoll costs one context switch per wait and none per
// frame that nobody waits for.

// errClosed is os.ErrClosed: operations on a closed tap wrap it.
var errClosed = os.ErrClosed

// TryReadv reads one frame (with its vnet header when VnetHdr) scattered
// over iovs if one is pending, and returns ErrWouldBlock otherwise. It never
// blocks. Too short iovs get the frame truncated; the count is the frame's
// length all the same (tun's behaviour).
func (t *Tap) TryReadv(iovs [][]byte) (int, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
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

// PollFD is the tun fd, for a caller that polls it together with fds of its
// own (virtio-net's I/O goroutine: the tap and its doorbells in one ppoll)
// and then reads with TryReadv. It is valid until Close; polling it is the
// caller's business to end before then.
func (t *Tap) PollFD() int { return t.fd }

// Writev writes one frame (with its vnet header when VnetHdr) gathered from
// iovs (at most IOV_MAX of them).
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

// waitWrite blocks until the fd is writable or Close begins. mu held
// shared.
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
