package virtiopci

import (
	"sync/atomic"
	"time"

	"github.com/govm/govm/virtio"
)

// Faults are deliberate notification losses, for proving govm's
// lost-notification watchdog (docs/usage.md, GOVM_FAULTS). They are a
// wrapper SetFaults installs around the transport's kick and interrupt
// paths; a transport without them runs none of this code.
type Faults struct {
	DropInterrupt  uint64        // drop the Nth used-buffer signal of the device (1-based; 0 = none)
	DropKick       uint64        // drop the Nth driver notification of the device (1-based; 0 = none)
	DelayInterrupt time.Duration // raise every used-buffer interrupt this much later
	// DelayKick wakes the queue's device this much after each driver
	// notification: a device goroutine the host schedules late, which
	// a loaded host does to us at random, made deterministic. Nothing
	// is lost; a driver that reports (or powers off) without waiting
	// for the device to use what it queued is caught by it.
	DelayKick time.Duration
}

// faulty is the wrapper: it counts towards the Nth signal and kick.
type faulty struct {
	Faults
	d              *Transport
	signals, kicks atomic.Uint64
}

// SetFaults installs f's wrapper (or removes it, for the zero Faults):
// the port notifications, the ioeventfd kicks the devices take from their
// doorbells, and the used-buffer signals of the device's next activation
// go through it. Call before the guest runs.
func (d *Transport) SetFaults(f Faults) {
	d.notify, d.intr = d.notifyQueue, virtio.Interrupt(d)
	for _, b := range d.bells {
		b.Intercept = nil
	}
	if f == (Faults{}) {
		return
	}
	w := &faulty{Faults: f, d: d}
	d.notify, d.intr = w.notify, faultyInterrupt{d, w}
	for i, b := range d.bells {
		// A KVM ioeventfd writes the same eventfd (ioeventfd.go).
		b.Intercept = func() bool { return w.dropKick() || w.delayKick(i) }
	}
}

// notify is a port-write notification of queue q under the faults.
func (w *faulty) notify(q int) {
	if w.dropKick() {
		return
	}
	w.d.countNotify(q)
	if !w.delayKick(q) {
		w.d.KickQueue(q)
	}
}

// dropKick reports whether this kick is the one to lose.
func (w *faulty) dropKick() bool {
	if w.DropKick == 0 {
		return false
	}
	if w.kicks.Add(1) == w.DropKick {
		w.d.logf("%s: fault injection: dropped kick %d", w.d.name, w.DropKick)
		return true
	}
	return false
}

// delayKick rings queue q's doorbell DelayKick from now and reports true,
// or reports false when kicks are not delayed. The doorbells are never
// replaced, so a late kick after a reset only costs the device a look at
// an empty ring.
func (w *faulty) delayKick(q int) bool {
	if w.DelayKick <= 0 {
		return false
	}
	time.AfterFunc(w.DelayKick, func() { w.d.KickQueue(q) })
	return true
}

// faultyInterrupt is the transport as the devices' virtio.Interrupt with
// the interrupt faults applied to used-buffer signals.
type faultyInterrupt struct {
	*Transport
	w *faulty
}

// SignalUsed drops the DropInterrupt-th signal, or raises every signal
// DelayInterrupt later, or passes it on.
func (fi faultyInterrupt) SignalUsed(q int) error {
	w := fi.w
	if w.DropInterrupt != 0 && w.signals.Add(1) == w.DropInterrupt {
		fi.logf("%s: fault injection: dropped interrupt %d (queue %d)", fi.name, w.DropInterrupt, q)
		return nil
	}
	if w.DelayInterrupt > 0 {
		time.AfterFunc(w.DelayInterrupt, func() { _ = fi.deliver(q, false) })
		return nil
	}
	return fi.Transport.SignalUsed(q)
}

// Reraise is the watchdog's repair of a lost interrupt
// (--watchdog-recover): it raises queue q's interrupt again, counted as
// recovered. A lost kick needs no method of its own: KickQueue makes the
// device re-check its ring.
func (d *Transport) Reraise(q int) {
	if q < 0 || q >= len(d.qcounters) {
		return
	}
	d.qcounters[q].recovered.Add(1)
	if err := d.deliver(q, true); err != nil {
		d.logOnce(logLineError, "%v", err)
	}
}
