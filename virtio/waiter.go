package virtio

import (
	"fmt"
	"time"

	"github.com/govm/govm/internal/yield"
	"golang.org/x/sys/unix"
)

// Waiter sleeps one goroutine on several doorbells and other file
// descriptors at once, in one ppoll(2): for a device whose one I/O goroutine
// serves several queues and a backend (virtio-net: RX, TX and the tap, as
// in Firecracker's and QEMU's net devices). Whatever becomes ready wakes
// exactly that thread. A Waiter belongs to one goroutine; it allocates
// nothing per Wait once its buffer has grown.
type Waiter struct {
	pfd   []unix.PollFd
	armed []bool
	yield yield.Point
	zero  unix.Timespec // Peek's timeout, here so a Peek allocates nothing
}

// fallbackPoll bounds a Wait while one of its doorbells runs on its
// channel (its eventfd failed, or it was closed): the channel cannot be
// polled with the rest, so the Wait looks at it this often. Never on the
// normal path; the price of staying awake to kicks after a host failure.
const fallbackPoll = time.Millisecond

// Wait blocks until one of bells rings (or was rung since it was last
// taken), one of fds polls readable (or in error: the next read says which),
// or timeout passes (0: no timeout). rung[i] reports whether bells[i] was
// rung, and those rings are taken; ready[i] whether fds[i] polled ready. A
// negative fd is ignored. rung and ready must be as long as bells and fds.
// A doorbell whose eventfd fails is treated as rung, as in Doorbell.Wait.
func (w *Waiter) Wait(bells []*Doorbell, rung []bool, fds []int, ready []bool, timeout time.Duration) {
	n := len(bells)
	if cap(w.pfd) < n+len(fds) {
		w.pfd = make([]unix.PollFd, n+len(fds))
		w.armed = make([]bool, n)
	}
	w.pfd, w.armed = w.pfd[:n+len(fds)], w.armed[:n]
	fallback := false
	for i, b := range bells {
		rung[i] = false
		w.armed[i] = b.arm()
		if w.armed[i] {
			w.pfd[i] = unix.PollFd{Fd: int32(b.fd), Events: unix.POLLIN}
		} else {
			// ppoll ignores a negative fd.
			w.pfd[i] = unix.PollFd{Fd: -1}
			fallback = true
		}
	}
	for i, fd := range fds {
		w.pfd[n+i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	if fallback && (timeout <= 0 || timeout > fallbackPoll) {
		timeout = fallbackPoll
	}
	var ts *unix.Timespec
	if timeout > 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	w.yield.BeforeBlock() // see internal/yield
	err := pollFDs(w.pfd, ts)
	for i := range fds {
		ready[i] = w.pfd[n+i].Revents != 0
	}
	for i, b := range bells {
		if !w.armed[i] {
			select {
			case <-b.ch:
				rung[i] = true
			default:
			}
			continue
		}
		if b.disarm() {
			rung[i] = true // Close woke us; later rings use the channel
			continue
		}
		if err != nil {
			b.fail(fmt.Errorf("virtio: doorbell poll: %w", err))
			rung[i] = true
			continue
		}
		if w.pfd[i].Revents == 0 {
			continue
		}
		r, terr := b.take()
		if terr != nil {
			b.fail(terr)
			r = true
		}
		rung[i] = r
	}
}

// Peek reports, without blocking, whether one of fds polls readable (or in
// error: the next read says which): for a goroutine busy-polling its
// backend as well as its rings (Poller). A negative fd is ignored; a poll
// error reports true, so the caller goes and reads.
func (w *Waiter) Peek(fds []int) bool {
	if cap(w.pfd) < len(fds) {
		w.pfd = make([]unix.PollFd, len(fds))
	}
	w.pfd = w.pfd[:len(fds)]
	for i, fd := range fds {
		w.pfd[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	w.zero = unix.Timespec{}
	if err := pollFDs(w.pfd, &w.zero); err != nil {
		return true
	}
	for i := range fds {
		if w.pfd[i].Revents != 0 {
			return true
		}
	}
	return false
}

// Busy is for the Waiter's goroutine going around without sleeping (work in
// hand): at most every internal/yield's interval it passes through Go's
// scheduler, as Wait does before it blocks. A flood can keep the goroutine
// from sleeping for seconds, and a goroutine that never parks looks to Go's
// sysmon like one hogging its P: it preempts it every 10 ms and then polls
// every 20 us.
func (w *Waiter) Busy() { w.yield.BeforeBlock() }
