package virtiopci

import (
	"errors"
	"fmt"

	"github.com/govm/govm/virtio"
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

// queueEventFD is one queue's KVM ioeventfd: KVM signals the queue's
// doorbell eventfd when the driver writes the queue's index to
// QUEUE_NOTIFY (datamatch), so the kick skips the exit to user space and
// wakes only the thread of that queue's device goroutine, which waits on
// the doorbell itself (virtio.Doorbell): nothing in between.
type queueEventFD struct {
	queue      int
	fd         int // the doorbell's eventfd
	registered bool
	addr       uint64
}

// notifyEventFD is the set of per-queue ioeventfds of one device.
type notifyEventFD struct {
	reg    IOEventRegistrar
	queues []*queueEventFD
	bells  []*virtio.Doorbell
}

// EnableIOEventFD moves queue notifications to KVM ioeventfds on
// BAR0+QUEUE_NOTIFY, one per queue, each on the queue's doorbell. They
// follow the BAR when the guest moves it (the bus calls IOBARMapped). Call
// Close to undo it.
func (d *Transport) EnableIOEventFD(reg IOEventRegistrar) error {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	if d.ev != nil {
		return ErrIOEventFDEnabled
	}
	ev := &notifyEventFD{reg: reg}
	for q, b := range d.bells {
		ev.queues = append(ev.queues, &queueEventFD{queue: q, fd: b.FD()})
		ev.bells = append(ev.bells, b)
	}
	if d.barMapped {
		if err := ev.register(uint64(d.barBase) + LegacyQueueNotify); err != nil {
			_ = ev.unregister()
			return fmt.Errorf("virtio: %s: %w", d.name, err)
		}
	}
	d.ev = ev
	return nil
}

func (ev *notifyEventFD) register(addr uint64) error {
	for _, qe := range ev.queues {
		// A doorbell whose eventfd failed runs on port-write kicks
		// (bellFailed): KVM must not swallow them into it again.
		if ev.bells[qe.queue].Broken() {
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
		if err := ev.unregisterQueue(qe); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (ev *notifyEventFD) unregisterQueue(qe *queueEventFD) error {
	if !qe.registered {
		return nil
	}
	qe.registered = false
	if err := ev.reg.UnregisterIOEventFDMatch(qe.addr, notifyLen, qe.fd, true, uint64(qe.queue)); err != nil {
		return fmt.Errorf("ioeventfd for queue %d at port %#x: %w", qe.queue, qe.addr, err)
	}
	return nil
}

// bellFailed is queue q's doorbell reporting that its eventfd failed
// (virtio.Doorbell.OnFail), on the device goroutine, before the doorbell
// wakes it and moves to its fallback channel. The queue's KVM registration
// is removed, so the driver's QUEUE_NOTIFY writes exit to user space and
// reach the doorbell through the register handler (the path hosts without
// ioeventfd use); a BAR move does not register it again. Without this the
// queue would hang for good: KVM would keep swallowing its kicks into an
// eventfd nobody can read. It never happens silently: it is logged and
// counted (govm stat: notify eventfds failed).
func (d *Transport) bellFailed(q int, err error) {
	d.evMu.Lock()
	var uerr error
	if d.ev != nil {
		uerr = d.ev.unregisterQueue(d.ev.queues[q])
	}
	d.evMu.Unlock()
	d.counters.eventfdFailures.Add(1)
	d.logf("%s: notify eventfd of queue %d: %v; its kicks exit to user space from now on", d.name, q, err)
	if uerr != nil {
		d.logf("%s: queue %d: removing its ioeventfd: %v", d.name, q, uerr)
	}
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

// Close removes the ioeventfds, if any, and closes the queues' doorbells.
// Call it after Reset (the device must not wait on a doorbell any more);
// kicks after it do nothing.
func (d *Transport) Close() error {
	d.evMu.Lock()
	ev := d.ev
	d.ev = nil
	d.evMu.Unlock()
	var err error
	if ev != nil {
		err = ev.unregister()
	}
	d.closeBells()
	if err != nil {
		return fmt.Errorf("virtio: %s: %w", d.name, err)
	}
	return nil
}

func (d *Transport) closeBells() {
	for _, b := range d.bells {
		_ = b.Close() // a close error on an eventfd leaves nothing to undo
	}
}
