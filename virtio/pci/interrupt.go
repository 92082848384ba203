package virtiopci

import "fmt"

// The legacy transport's interrupt: one level-triggered INTx line and the
// ISR status byte (spec 4.1.4.5, 4.1.5.3, 4.1.5.4). The line is high exactly
// while the ISR is non-zero. Every ISR change and the matching line change
// happen under intMu, so a guest's read-to-clear cannot interleave with a
// device goroutine's SignalUsed: either the signal lands before the read
// (the read returns it and lowers the line) or after (the line goes up
// again for it). Nothing is lost and the line is never left high with a
// zero ISR, which would be an interrupt storm in a level-triggered guest.

// SignalUsed implements Interrupt: ISR bit 0 for any queue (legacy has a
// single ISR for all queues).
func (d *Transport) SignalUsed(q int) error {
	return d.deliver(q, false)
}

// deliver sets the queue bit of the ISR for queue q and counts it as
// delivered (raised, or coalesced into an ISR already set), which the
// watchdog compares with what the device wanted. A late delivery (a
// delayed fault) that a recovery already stood in for is not counted
// twice.
func (d *Transport) deliver(q int, recovery bool) error {
	d.intMu.Lock()
	defer d.intMu.Unlock()
	if q >= 0 && q < len(d.qcounters) {
		c := &d.qcounters[q]
		switch {
		case !recovery && c.recovered.Load() > 0:
			c.recovered.Add(^uint64(0))
		case d.isr != 0:
			c.coalesced.Add(1)
		default:
			c.raised.Add(1)
		}
	}
	return d.raiseLocked(ISRQueue)
}

// SignalConfig implements Interrupt: ISR bit 1.
func (d *Transport) SignalConfig() error {
	d.counters.configIRQs.Add(1)
	return d.raise(ISRConfig)
}

// DeviceError implements Interrupt: the device stopped because the driver
// misbehaved.
func (d *Transport) DeviceError(err error) {
	d.guestError(err)
}

// guestError is the common path for a driver error the device cannot go on
// from: DEVICE_NEEDS_RESET (spec 2.1.2), a configuration change interrupt
// so the driver looks at the status, and one log line. Repeats before the
// driver resets are not logged again; after a reset the next error would be
// a new line, so a guest looping "break the queue, reset" (two port writes
// per error) could flood the host log: the lines go through the device's
// rate limiter (guestLog), which counts what it drops for the stats.
// Never called with intMu held.
func (d *Transport) guestError(err error) {
	d.counters.guestErrs.Add(1)
	d.intMu.Lock()
	first := d.status&StatusNeedsReset == 0
	d.status |= StatusNeedsReset
	d.intMu.Unlock()
	if first {
		d.guestLog.Logf("%s: guest error, device needs reset: %v", d.name, err)
	}
	if rerr := d.raise(ISRConfig); rerr != nil {
		d.logOnce(logLineError, "%v", rerr)
	}
}

// raise sets ISR bits and drives the line high if the ISR was clear; while
// it is already non-zero the line is already high and stays so.
func (d *Transport) raise(bits uint8) error {
	d.intMu.Lock()
	defer d.intMu.Unlock()
	return d.raiseLocked(bits)
}

func (d *Transport) raiseLocked(bits uint8) error {
	if d.isr != 0 {
		// The line is already high; the driver sees this reason on its
		// next ISR read. No second raise.
		d.counters.coalesced.Add(1)
	}
	return d.setISRLocked(d.isr | bits)
}

// readISR is a driver read of the ISR register: it returns the bits and
// clears them, deasserting the line (spec 4.1.4.5.1).
func (d *Transport) readISR() uint8 {
	d.intMu.Lock()
	defer d.intMu.Unlock()
	v := d.isr
	d.counters.isrReads.Add(1)
	if v == 0 {
		d.counters.isrEmpty.Add(1)
	}
	if err := d.setISRLocked(0); err != nil {
		d.logOnce(logLineError, "%v", err)
	}
	return v
}

// setISRLocked sets the ISR to v and moves the line when its level must
// change. If the line cannot be moved the ISR keeps its old value, so the
// invariant line == (isr != 0) holds and a later signal retries.
func (d *Transport) setISRLocked(v uint8) error {
	if (d.isr != 0) != (v != 0) {
		if err := d.line.Set(v != 0); err != nil {
			return fmt.Errorf("virtio: %s: interrupt line to %v: %w", d.name, v != 0, err)
		}
		if v != 0 {
			d.counters.raised.Add(1)
		}
	}
	d.isr = v
	return nil
}
