package virtio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/govm/govm/internal/yield"
	"golang.org/x/sys/unix"
)

// Doorbell is one queue's driver notification (spec 2.7.13 "Supplying
// Buffers to The Device", step 4: notify the device): an eventfd that the
// device's own I/O goroutine waits on in ppoll(2), and that every source of
// a kick writes. KVM writes it when the driver's QUEUE_NOTIFY write matches
// an ioeventfd on FD (the kick never leaves the kernel); Ring writes it for
// a port write that did exit to user space, the watchdog's recovery kick,
// and a device Reset waking its goroutine.
//
// Why not a Go channel fed by a goroutine reading the eventfd through the
// runtime poller: each hop readies a goroutine on another thread
// (netpoller, then the channel receiver, each wakep spinning up an idle
// M), so a kick costs a context switch per hop where one thread's wakeup
// would do. Blocking in ppoll wakes exactly the thread that does the work
// (a device's Loop polls all its doorbells and fds, the tap's, together:
// Waiter).
//
// Kicks coalesce, as the spec allows: rings while nobody waits leave the
// eventfd readable, and the next Wait returns at once. Wait and Clear are
// called by one goroutine at a time (the device's); Ring and Close from any.
//
// If the eventfd ever fails (a read or poll error other than EINTR), the
// doorbell does not go deaf: it calls OnFail once (the transport removes
// the KVM ioeventfd, so the driver's writes exit to user space and come
// back through Ring), returns from Wait as if rung (a kick may have been
// lost with the failed read; a spurious wake only costs the device a look
// at its ring), and carries rings over a channel from then on.
type Doorbell struct {
	fd int

	// Intercept, if set, is asked once for every wake that KVM's
	// signals alone caused; true means the wake is not delivered now:
	// the hook dropped it (GOVM_FAULTS drop-kick, a lost notification
	// for the watchdog to find) or will Ring later (delay-kick). Set
	// before use.
	Intercept func() bool
	// OnFail, if set, is called once, on the goroutine that found the
	// eventfd failing, before the doorbell falls back to its channel.
	// It must not call the doorbell. Set before use.
	OnFail func(error)

	signals atomic.Uint64 // KVM signals taken (see softRing)
	broken  atomic.Bool   // the eventfd failed: rings go through ch
	ch      chan struct{} // capacity 1: rings after a failure or Close

	// mu orders Ring's writes, Close and the fd's life: the fd is closed
	// by Close, or, if a Wait is blocked on it, by that Wait on its way
	// out (Close wakes it), so no call ever uses a closed fd number.
	mu      sync.Mutex
	closed  bool
	waiting bool // a Wait is using the fd
	yield   yield.Point
	// pfd and rbuf are waitFD's ppoll argument and take's read buffer,
	// kept here so a Wait allocates nothing: a local array escapes (the
	// ppoll one through pollFDs, a variable; the read buffer through
	// x/sys's race annotations under -race) and cost an allocation per
	// sleep. Only the goroutine in Wait or Clear uses them (see above).
	pfd  [1]unix.PollFd
	rbuf [8]byte
}

// softRing is what Ring adds to the eventfd counter. KVM's ioeventfd adds
// 1 per signal, so one read tells the two sources apart: the low 32 bits
// count KVM's signals, the high 32 bits Ring's. (An eventfd counter holds
// up to 2^64-2; 2^32 KVM signals between two reads of a queue's doorbell
// would take the guest hours of exits while the device never looks.)
const softRing = 1 << 32

// pollFDs is ppoll(2) on a doorbell (and, for a Waiter, other fds), with an
// optional timeout. A variable so a test can make it fail.
var pollFDs = func(fds []unix.PollFd, timeout *unix.Timespec) error {
	for {
		_, err := unix.Ppoll(fds, timeout, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// ErrDoorbellRead is a doorbell read that returned other than 8 bytes.
var ErrDoorbellRead = errors.New("virtio: short doorbell read")

// NewDoorbell returns a doorbell that has not been rung.
func NewDoorbell() (*Doorbell, error) {
	// Non-blocking: the device blocks in ppoll, and Clear must not block.
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("virtio: doorbell eventfd: %w", err)
	}
	return &Doorbell{fd: fd, ch: make(chan struct{}, 1)}, nil
}

// FD is the eventfd to hand to KVM (KVM_IOEVENTFD). It stays open until
// Close.
func (b *Doorbell) FD() int { return b.fd }

// Ring kicks the queue: the device's Wait returns. Never blocks. After
// Close the ring goes through the fallback channel, so a device stopped
// after its doorbell closed still wakes.
func (b *Doorbell) Ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed && !b.broken.Load() {
		err := b.write(softRing)
		// Written and still not broken: the waiter takes it from the
		// eventfd, or (should it break after our load) the wake that
		// Wait returns on breaking covers it.
		if err == nil && !b.broken.Load() {
			return
		}
		if err != nil {
			b.fail(err)
		}
	}
	select {
	case b.ch <- struct{}{}:
	default:
	}
}

// Wait blocks until the doorbell is rung (or was rung since the last Wait
// or Clear), and takes the ring.
func (b *Doorbell) Wait() {
	if !b.arm() {
		<-b.ch
		return
	}
	b.yield.BeforeBlock() // see internal/yield
	b.waitFD()
	b.disarm()
}

// arm marks the eventfd in use by a waiter, so Close leaves closing it to
// disarm; false: the doorbell runs on its channel (broken or closed).
func (b *Doorbell) arm() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.broken.Load() {
		return false
	}
	b.waiting = true
	return true
}

// disarm ends a wait begun with arm; it reports whether Close came
// meanwhile (and then closes the fd, as Close left it to us).
func (b *Doorbell) disarm() (closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting = false
	if b.closed {
		b.closeFD() // Close woke us and left the fd to us
	}
	return b.closed
}

// waitFD is Wait on the eventfd.
func (b *Doorbell) waitFD() {
	for {
		b.pfd[0] = unix.PollFd{Fd: int32(b.fd), Events: unix.POLLIN}
		if err := pollFDs(b.pfd[:], nil); err != nil {
			b.fail(fmt.Errorf("virtio: doorbell poll: %w", err))
			return
		}
		rung, err := b.take()
		if err != nil {
			b.fail(err)
			return
		}
		if rung {
			return
		}
	}
}

// Clear takes a pending ring without waiting and reports whether there was
// one: a transport resetting its device drops kicks meant for the old
// rings.
func (b *Doorbell) Clear() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.broken.Load() {
		select {
		case <-b.ch:
			return true
		default:
			return false
		}
	}
	rung, err := b.take()
	if err != nil {
		b.fail(err)
		return true
	}
	return rung
}

// Pending reports whether a ring waits for the device to take it: the
// eventfd is readable (or, on the channel, a ring is queued). It takes
// nothing. The watchdog peeks with it: a kick that reached the doorbell of
// a device that does not run is a starved device thread, not a lost kick.
func (b *Doorbell) Pending() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.broken.Load() {
		return len(b.ch) > 0
	}
	fds := [1]unix.PollFd{{Fd: int32(b.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds[:], 0)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
}

// Signals is the number of KVM ioeventfd signals the device has taken
// (rings through Ring are not counted: their sources count themselves).
func (b *Doorbell) Signals() uint64 { return b.signals.Load() }

// Broken reports whether the eventfd failed and the doorbell runs on its
// channel: its FD must not be given to KVM any more.
func (b *Doorbell) Broken() bool { return b.broken.Load() }

// Close closes the eventfd (remove any KVM ioeventfd on FD first). The
// doorbell keeps working over its channel: a Wait blocked on the eventfd
// is woken (it returns as if rung), later rings and waits use the channel.
func (b *Doorbell) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.waiting {
		// The Wait closes the fd when it leaves; wake it.
		if err := b.write(softRing); err != nil {
			return err
		}
		return nil
	}
	return b.closeFD()
}

// closeFD closes the eventfd; mu held.
func (b *Doorbell) closeFD() error {
	if err := unix.Close(b.fd); err != nil {
		return fmt.Errorf("virtio: doorbell close: %w", err)
	}
	return nil
}

// take reads the eventfd counter. false with no error: nothing pending, or
// a wake that Intercept took over.
func (b *Doorbell) take() (bool, error) {
	buf := &b.rbuf
	for {
		n, err := unix.Read(b.fd, buf[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false, nil
		case err != nil:
			return false, fmt.Errorf("virtio: doorbell read: %w", err)
		case n != len(buf):
			return false, fmt.Errorf("%w: %d bytes", ErrDoorbellRead, n)
		}
		v := binary.NativeEndian.Uint64(buf[:]) // eventfd(2): host byte order
		hw := v & (softRing - 1)
		b.signals.Add(hw)
		if v/softRing == 0 && hw != 0 && b.Intercept != nil && b.Intercept() {
			return false, nil
		}
		return v != 0, nil
	}
}

// write adds v to the eventfd counter.
func (b *Doorbell) write(v uint64) error {
	var buf [8]byte
	binary.NativeEndian.PutUint64(buf[:], v)
	for {
		_, err := unix.Write(b.fd, buf[:])
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("virtio: doorbell write: %w", err)
			}
			return nil
		}
	}
}

// fail moves the doorbell to its channel, once, and tells OnFail.
func (b *Doorbell) fail(err error) {
	if !b.broken.CompareAndSwap(false, true) {
		return
	}
	if b.OnFail != nil {
		b.OnFail(err)
	}
}
