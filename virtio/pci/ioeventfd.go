package virtiopci

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// IOEventRegistrar registers KVM ioeventfds that match one written value
// (KVM_IOEVENTFD with KVM_IOEVENTFD_FLAG_DATAMATCH); *kvm.VM satisfies it.
// Behind an interface so the transport is testable without KVM.
type IOEventRegistrar interface {
	RegisterIOEventFDMatch(addr uint64, length uint32, fd int, pio bool, data uint64) error
	UnregisterIOEventFDMatch(addr uint64, length uint32, fd int, pio bool, data uint64) error
}

// ErrIOEventFDEnabled is returned by a second EnableIOEventFD.
var ErrIOEventFDEnabled = errors.New("virtio: ioeventfd already enabled")

// notifyLen is the width of the QUEUE_NOTIFY register: KVM matches writes
// of exactly this length, and drivers write it with iowrite16.
const notifyLen = 2

// queueEventFD is one eventfd that KVM signals when the driver writes the
// queue's index to QUEUE_NOTIFY (datamatch), so the kick skips the exit to
// user space and wakes only that queue's device goroutine.
type queueEventFD struct {
	queue      int
	fd         int      // the raw fd KVM gets (never f.Fd(): that makes f blocking)
	f          *os.File // the same fd, read through Go's poller
	registered bool
	// failed is set when reading the eventfd failed: the queue's kicks
	// go through the port write (an exit to user space) from then on,
	// and the eventfd is never registered again. Guarded by evMu.
	failed bool
	addr   uint64
	done   chan struct{}
}

// readEventFD reads an eventfd's counter; tests replace it to make a read
// fail.
var readEventFD = func(f *os.File, b []byte) (int, error) { return f.Read(b) }

// notifyEventFD is the set of per-queue eventfds of one device.
type notifyEventFD struct {
	reg    IOEventRegistrar
	queues []*queueEventFD
}

// EnableIOEventFD moves queue notifications to KVM ioeventfds on
// BAR0+QUEUE_NOTIFY, one per queue. They follow the BAR when the guest
// moves it (the bus calls IOBARMapped). Call Close to undo it.
func (d *Transport) EnableIOEventFD(reg IOEventRegistrar) error {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	if d.ev != nil {
		return ErrIOEventFDEnabled
	}
	ev := &notifyEventFD{reg: reg}
	for q := range d.kicks {
		// Non-blocking so os.File puts it in the runtime poller: the
		// reader goroutine parks instead of holding a thread, and
		// Close wakes it. KVM signals the eventfd the same either way.
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			ev.close()
			return fmt.Errorf("virtio: %s: eventfd: %w", d.name, err)
		}
		ev.queues = append(ev.queues, &queueEventFD{queue: q, fd: fd,
			f: os.NewFile(uintptr(fd), fmt.Sprintf("%s-notify-%d", d.name, q)), done: make(chan struct{})})
	}
	if d.barMapped {
		if err := ev.register(uint64(d.barBase) + LegacyQueueNotify); err != nil {
			_ = ev.unregister()
			ev.close()
			return fmt.Errorf("virtio: %s: %w", d.name, err)
		}
	}
	d.ev = ev
	for _, qe := range ev.queues {
		go d.eventLoop(ev, qe)
	}
	return nil
}

func (ev *notifyEventFD) register(addr uint64) error {
	for _, qe := range ev.queues {
		if qe.failed {
			continue
		}
		if err := ev.reg.RegisterIOEventFDMatch(addr, notifyLen, qe.fd, true, uint64(qe.queue)); err != nil {
			return fmt.Errorf("ioeventfd for queue %d at port %#x: %w", qe.queue, addr, err)
		}
		qe.registered, qe.addr = true, addr
	}
	return nil
}

func (ev *notifyEventFD) unregister() error {
	var first error
	for _, qe := range ev.queues {
		if !qe.registered {
			continue
		}
		qe.registered = false
		if err := ev.reg.UnregisterIOEventFDMatch(qe.addr, notifyLen, qe.fd, true, uint64(qe.queue)); err != nil && first == nil {
			first = fmt.Errorf("ioeventfd for queue %d at port %#x: %w", qe.queue, qe.addr, err)
		}
	}
	return first
}

// close closes the eventfds, which ends their goroutines.
func (ev *notifyEventFD) close() {
	for _, qe := range ev.queues {
		qe.f.Close()
	}
}

// eventLoop turns one queue's eventfd signals into kicks until the file is
// closed. It never ends silently while the device is live: a read that
// fails for any other reason hands the queue back to the port-write path
// (fallBack) before the goroutine ends.
func (d *Transport) eventLoop(ev *notifyEventFD, qe *queueEventFD) {
	defer close(qe.done)
	var buf [8]byte // an eventfd read returns the 8-byte counter
	for {
		if _, err := readEventFD(qe.f, buf[:]); err != nil {
			if !errors.Is(err, os.ErrClosed) { // closed: Close is under way
				d.fallBack(ev, qe, err)
			}
			return
		}
		if d.dropKick() {
			continue
		}
		d.counters.eventfds.Add(1)
		d.qcounters[qe.queue].eventfds.Add(1)
		d.kick(qe.queue)
	}
}

// fallBack stops using a queue's eventfd after a failed read. Its KVM
// registration is removed, so the driver's QUEUE_NOTIFY writes exit to user
// space and reach KickQueue through the register handler (the path hosts
// without ioeventfd use); then the queue is kicked once, because a kick may
// have been lost with the failed read, and a spurious one costs the device
// only a look at an empty ring. Without this the queue would hang for good:
// KVM would keep swallowing its kicks into an eventfd nobody reads.
func (d *Transport) fallBack(ev *notifyEventFD, qe *queueEventFD, err error) {
	d.evMu.Lock()
	qe.failed = true
	var uerr error
	if qe.registered {
		qe.registered = false
		uerr = ev.reg.UnregisterIOEventFDMatch(qe.addr, notifyLen, qe.fd, true, uint64(qe.queue))
	}
	d.evMu.Unlock()
	d.counters.eventfdFailures.Add(1)
	d.logf("%s: notify eventfd of queue %d: %v; its kicks exit to user space from now on", d.name, qe.queue, err)
	if uerr != nil {
		d.logf("%s: queue %d: removing its ioeventfd: %v", d.name, qe.queue, uerr)
	}
	d.KickQueue(qe.queue)
}

// IOBARMapped implements pci.BARListener: keeps the ioeventfd on the
// notify register wherever the BAR is decoded, and off while it is not.
func (d *Transport) IOBARMapped(base, size uint16, mapped bool) {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	d.barBase, d.barMapped = base, mapped
	if d.ev == nil {
		return
	}
	if err := d.ev.unregister(); err != nil {
		d.logf("%s: %v", d.name, err)
	}
	if mapped {
		if err := d.ev.register(uint64(base) + LegacyQueueNotify); err != nil {
			// Kicks still work: the write exits to user space instead.
			d.logf("%s: %v", d.name, err)
		}
	}
}

// NotifyAddr returns the port of the QUEUE_NOTIFY register, and false while
// BAR0 is not decoded.
func (d *Transport) NotifyAddr() (port uint16, ok bool) {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	return d.barBase + LegacyQueueNotify, d.barMapped
}

// Close removes the ioeventfd, if any, and waits for its goroutine. It does
// not reset the device.
func (d *Transport) Close() error {
	d.evMu.Lock()
	ev := d.ev
	d.ev = nil
	d.evMu.Unlock()
	if ev == nil {
		return nil
	}
	err := ev.unregister()
	ev.close()
	for _, qe := range ev.queues {
		<-qe.done
	}
	if err != nil {
		return fmt.Errorf("virtio: %s: %w", d.name, err)
	}
	return nil
}
