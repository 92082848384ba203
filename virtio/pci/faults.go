package virtiopci

import (
	"sync/atomic"
	"time"
)

// Faults are deliberate notification losses, for proving govm's
// lost-notification watchdog (docs/usage.md, GOVM_FAULTS). The zero value
// injects nothing, and a transport without faults pays one pointer load
// per signal and kick.
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

// faultState counts towards the Nth signal and kick.
type faultState struct {
	Faults
	signals, kicks atomic.Uint64
}

// SetFaults arms f. Call before the guest runs.
func (d *Transport) SetFaults(f Faults) {
	if f == (Faults{}) {
		d.faults = nil
		return
	}
	d.faults = &faultState{Faults: f}
}

// dropKick reports whether this kick is the one to lose.
func (d *Transport) dropKick() bool {
	f := d.faults
	if f == nil || f.DropKick == 0 {
		return false
	}
	if f.kicks.Add(1) == f.DropKick {
		d.logf("%s: fault injection: dropped kick %d", d.name, f.DropKick)
		return true
	}
	return false
}

// kick passes a port-write notification of queue q to its device: at
// once, or DelayKick later. The doorbells are never replaced, so a late
// kick after a reset only costs the device a look at an empty ring.
func (d *Transport) kick(q int) {
	if !d.delayKick(q) {
		d.KickQueue(q)
	}
}

// delayKick rings queue q's doorbell DelayKick from now and reports true,
// or reports false when kicks are not delayed.
func (d *Transport) delayKick(q int) bool {
	f := d.faults
	if f == nil || f.DelayKick <= 0 {
		return false
	}
	time.AfterFunc(f.DelayKick, func() { d.KickQueue(q) })
	return true
}

// eventfdKick applies the kick faults to an ioeventfd notification of
// queue q, which the device takes from its doorbell without a port exit
// (virtio.Doorbell.Intercept): true when it is dropped or rung later.
func (d *Transport) eventfdKick(q int) bool {
	return d.dropKick() || d.delayKick(q)
}

// faultSignal applies the interrupt faults to a used-buffer signal of
// queue q. It reports true when the fault took the signal over (dropped,
// or raised later by a timer).
func (d *Transport) faultSignal(q int) bool {
	f := d.faults
	if f == nil {
		return false
	}
	if f.DropInterrupt != 0 && f.signals.Add(1) == f.DropInterrupt {
		d.logf("%s: fault injection: dropped interrupt %d (queue %d)", d.name, f.DropInterrupt, q)
		return true
	}
	if f.DelayInterrupt > 0 {
		time.AfterFunc(f.DelayInterrupt, func() { _ = d.deliver(q, false) })
		return true
	}
	return false
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
