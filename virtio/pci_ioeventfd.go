package virtio

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// IOEventRegistrar registers KVM ioeventfds (KVM_IOEVENTFD); *kvm.VM
// satisfies it. Behind an interface so the transport is testable without
// KVM.
type IOEventRegistrar interface {
	RegisterIOEventFD(addr uint64, length uint32, fd int, pio bool) error
	UnregisterIOEventFD(addr uint64, length uint32, fd int, pio bool) error
}

// ErrIOEventFDEnabled is returned by a second EnableIOEventFD.
var ErrIOEventFDEnabled = errors.New("virtio: ioeventfd already enabled")

// notifyLen is the width of the QUEUE_NOTIFY register: KVM matches writes
// of exactly this length, and drivers write it with iowrite16.
const notifyLen = 2

// notifyEventFD is one eventfd KVM signals on 16-bit writes to
// QUEUE_NOTIFY, so kicks skip the exit to user space. Without datamatch
// (our kvm wrapper has none) it cannot tell which queue was kicked, so a
// signal kicks every queue; the extra kicks are harmless, the I/O loops
// just find no new buffers.
type notifyEventFD struct {
	reg        IOEventRegistrar
	fd         int      // the raw fd KVM gets (never f.Fd(): that makes f blocking)
	f          *os.File // the same fd, read through Go's poller
	registered bool
	addr       uint64
	done       chan struct{}
}

// EnableIOEventFD moves queue notifications to a KVM ioeventfd on
// BAR0+QUEUE_NOTIFY. It follows the BAR when the guest moves it (the bus
// calls IOBARMapped). Call Close to undo it.
func (d *PCIDevice) EnableIOEventFD(reg IOEventRegistrar) error {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	if d.ev != nil {
		return ErrIOEventFDEnabled
	}
	// Non-blocking so os.File puts it in the runtime poller: the reader
	// goroutine parks instead of holding a thread, and Close wakes it.
	// KVM signals the eventfd the same either way.
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("virtio: %s: eventfd: %w", d.name, err)
	}
	ev := &notifyEventFD{reg: reg, fd: fd, f: os.NewFile(uintptr(fd), d.name+"-notify"), done: make(chan struct{})}
	if d.barMapped {
		if err := ev.register(uint64(d.barBase) + LegacyQueueNotify); err != nil {
			ev.f.Close()
			return fmt.Errorf("virtio: %s: %w", d.name, err)
		}
	}
	d.ev = ev
	go d.eventLoop(ev)
	return nil
}

func (ev *notifyEventFD) register(addr uint64) error {
	if err := ev.reg.RegisterIOEventFD(addr, notifyLen, ev.fd, true); err != nil {
		return fmt.Errorf("ioeventfd at port %#x: %w", addr, err)
	}
	ev.registered, ev.addr = true, addr
	return nil
}

func (ev *notifyEventFD) unregister() error {
	if !ev.registered {
		return nil
	}
	ev.registered = false
	if err := ev.reg.UnregisterIOEventFD(ev.addr, notifyLen, ev.fd, true); err != nil {
		return fmt.Errorf("ioeventfd at port %#x: %w", ev.addr, err)
	}
	return nil
}

// eventLoop turns eventfd signals into kicks until the file is closed.
func (d *PCIDevice) eventLoop(ev *notifyEventFD) {
	defer close(ev.done)
	var buf [8]byte // an eventfd read returns the 8-byte counter
	for {
		if _, err := ev.f.Read(buf[:]); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				d.logf("%s: notify eventfd: %v", d.name, err)
			}
			return
		}
		d.counters.eventfds.Add(1)
		for q := range d.kicks {
			d.KickQueue(q)
		}
	}
}

// IOBARMapped implements pci.BARListener: keeps the ioeventfd on the
// notify register wherever the BAR is decoded, and off while it is not.
func (d *PCIDevice) IOBARMapped(base, size uint16, mapped bool) {
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
func (d *PCIDevice) NotifyAddr() (port uint16, ok bool) {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	return d.barBase + LegacyQueueNotify, d.barMapped
}

// Close removes the ioeventfd, if any, and waits for its goroutine. It does
// not reset the device.
func (d *PCIDevice) Close() error {
	d.evMu.Lock()
	ev := d.ev
	d.ev = nil
	d.evMu.Unlock()
	if ev == nil {
		return nil
	}
	err := ev.unregister()
	ev.f.Close()
	<-ev.done
	if err != nil {
		return fmt.Errorf("virtio: %s: %w", d.name, err)
	}
	return nil
}
