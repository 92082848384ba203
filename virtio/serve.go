package virtio

import (
	"sync/atomic"

	"github.com/govm/govm/guestmem"
)

// The notification discipline lives in this file, once, for every device:
// when the device asks for kicks (enableNotify / disableNotify), when it
// re-checks the ring before sleeping, and when it decides to interrupt the
// driver (needsInterrupt). Devices state only what they do with a chain.
//
// One pass of Serve:
//
//	disableNotify            // VRING_USED_F_NO_NOTIFY, or nothing with EVENT_IDX
//	drain: Pop -> handle -> AddUsed, deciding about an interrupt every Batch chains
//	interrupt decision       // needsInterrupt -> Interrupt.SignalUsed, once per pass
//	enableNotify + re-check  // publish, FENCE, re-read avail idx
//	work arrived?  -> next pass at once (the driver saw kicks off and did not kick)
//	otherwise      -> sleep on the doorbell (or stop)
//
// A goroutine that serves several queues (virtio-net: RX, TX and the
// backend) runs Pass on each and sleeps on all of them at once (Waiter).
// Devices that are not a pure request/response drain (virtio-net RX, whose
// work is driven by the backend) use the same pieces directly: Used /
// UsedBatch, Signal, ArmAvail and Quiet.

// NotifyCounters counts what one queue's notifications did. The device
// goroutine writes them; anyone may read them at any time.
type NotifyCounters struct {
	// Kicks is the number of driver notifications the device woke on.
	Kicks atomic.Uint64
	// Interrupts is the number of used-buffer interrupts signalled.
	Interrupts atomic.Uint64
	// Suppressed is the number of interrupt decisions that found used
	// buffers but no interrupt wanted by the driver (spec 2.7.7).
	Suppressed atomic.Uint64
}

// Handler is what a device does with one chain: it serves it and returns
// the used length for AddUsed (spec 2.7.8: bytes written into the chain).
// An error stops the queue; Serve returns it to the device.
type Handler func(c *Chain) (uint32, error)

// Server runs one queue's notification discipline on the device's I/O
// goroutine. Fill in the fields, then call Serve (or, for a device driven
// by its backend, Used/UsedBatch, Signal, ArmAvail and Quiet). A Server is
// used by one goroutine only, like its Queue.
type Server struct {
	Mem   *guestmem.Memory
	Queue *Queue
	// Bell is the queue's kick, waited on by this goroutine itself.
	Bell *Doorbell
	Intr Interrupt
	// Stop ends Serve (and Pass) when closed: the device is being
	// reset. Whoever closes it then rings Bell, so a Server asleep on
	// the doorbell wakes to see it (the ring stays pending if it is not
	// asleep yet: no lost wakeup).
	Stop <-chan struct{}
	// Batch bounds how many chains are used before an interrupt decision
	// even though work remains: a steady flood must not starve the driver
	// of completions (it frees TX buffers and refills RX on interrupts).
	// 0 means once per pass only. 1 decides after every chain, so the
	// driver hears of the completion it waits for (used_event, spec
	// 2.7.7.1) while the device still works on the rest of the pass:
	// virtio-blk with EVENT_IDX, whose driver then refills the ring
	// meanwhile.
	Batch int
	// Counters, if set, receives the queue's counts (the device may keep
	// them across activations); otherwise the Server keeps its own.
	Counters *NotifyCounters
	// Poll, if set, is Serve's busy-poll window: Serve watches the ring
	// with kicks off for that long before it sleeps.
	Poll *Poller
	// Member is the goroutine's place at the pause gate
	// (Activation.Member); nil: never held.
	Member *Member

	own     NotifyCounters
	pending int // chains used since the last interrupt decision
}

func (s *Server) counters() *NotifyCounters {
	if s.Counters != nil {
		return s.Counters
	}
	return &s.own
}

// Hold waits while the VM is paused (Member.Hold), or until Stop closes.
func (s *Server) Hold() { s.Member.Hold(s.Stop) }

// Stopped reports whether Stop is closed.
func (s *Server) Stopped() bool {
	select {
	case <-s.Stop:
		return true
	default:
		return false
	}
}

// Serve serves the queue with handle until Stop is closed (it then returns
// nil) or a chain cannot be served (it returns the error: a *GuestError from
// Pop or handle, or the handler's host error). Its first pass runs without
// waiting for a kick, so buffers the driver published before DRIVER_OK are
// served. Chains used before an error are still signalled.
func (s *Server) Serve(handle Handler) error {
	for {
		end, _, err := s.Pass(handle, 0)
		if err != nil {
			return err
		}
		if end == PassStopped {
			return nil
		}
		// PassIdle (no budget, so never PassMore): kicks are on and
		// the re-check found the ring empty.
		if more, err := s.poll(); err != nil {
			return err
		} else if more {
			continue
		}
		if !s.sleep() {
			return nil
		}
		if s.Poll != nil {
			s.Poll.Found()
		}
	}
}

// poll watches the ring for the Poller's window with kicks off, before
// Serve sleeps (see Poller). more: the driver published work meanwhile (or
// Stop closed), for the next pass. Otherwise kicks are on again and the
// ring was empty at the re-check, as after Pass.
func (s *Server) poll() (more bool, err error) {
	p := s.Poll
	if p == nil || p.Begin() == 0 {
		return false, nil
	}
	if err := s.Quiet(); err != nil {
		return false, err
	}
	for p.Spinning() {
		if more, err = s.Pending(); err != nil {
			return false, err
		}
		if more {
			p.Found()
			return true, nil
		}
		if s.Stopped() {
			return true, nil
		}
	}
	// The window closed: the same re-check as Pass's before a sleep.
	if more, err = s.Rearm(); more {
		p.Found()
	}
	return more, err
}

// PassEnd says how a Pass ended.
type PassEnd int

const (
	// PassIdle: kicks are on and the re-check found the ring empty; the
	// caller may sleep on Bell.
	PassIdle PassEnd = iota
	// PassMore: the budget was spent with chains possibly left; kicks
	// stay off, so the caller must Pass again before it sleeps.
	PassMore
	// PassStopped: Stop closed (a Reset is under way); no interrupt is
	// owed, the driver forgets the rings.
	PassStopped
)

// Pass serves what the ring holds, at most budget chains (0: no limit),
// without sleeping: Serve's loop body, for a goroutine that serves more than
// one queue (virtio-net's, both queues and its backend) and sleeps on all of
// them at once. It ends with the interrupt decision for the chains it used,
// and says how many it used (served). An error is as for Serve.
func (s *Server) Pass(handle Handler, budget int) (end PassEnd, served int, err error) {
	for {
		if err := s.Queue.disableNotify(s.Mem); err != nil {
			return 0, served, err
		}
		n, stopped, spent, derr := s.drain(handle, budget-served)
		served += n
		if stopped {
			return PassStopped, served, nil
		}
		// The interrupt decision, once per pass, also after a drain
		// that ended on a bad chain: the chains before it are done.
		if err := s.Signal(); err != nil {
			return 0, served, err
		}
		if derr != nil {
			return 0, served, derr
		}
		if spent {
			return PassMore, served, nil
		}
		more, err := s.Rearm()
		if err != nil {
			return 0, served, err
		}
		if !more {
			return PassIdle, served, nil
		}
	}
}

// Rearm asks for kicks again before the device sleeps, with the re-check
// that prevents lost kicks: enableNotify publishes that we want kicks,
// FENCE, then re-reads avail idx (see its ordering comment). A driver that
// added buffers while kicks were off did not kick, so those buffers are
// found here or never: sleeping without this would hang the queue. more:
// they were found; serve them (kicks may be left on) instead of sleeping.
func (s *Server) Rearm() (more bool, err error) {
	more, err = s.Queue.enableNotify(s.Mem)
	if more {
		s.Queue.watch.KicksSuppressed.Add(1)
	}
	return more, err
}

// Pending is for a device polling its ring with kicks off (Quiet, then a
// Poller's window): whether the driver has published work. Work found so
// is counted (Watch.Polled). A poll that finds nothing ends in Rearm.
func (s *Server) Pending() (bool, error) {
	more, err := s.Queue.pending(s.Mem)
	if more {
		s.Queue.watch.Polled.Add(1)
	}
	return more, err
}

// drain serves available chains, at most budget of them (budget <= 0: all;
// Pass passes what its budget has left, never 0 when it had one). It
// returns how many it used, and reports stopped when Stop closed in
// between, spent when it stopped at the budget.
func (s *Server) drain(handle Handler, budget int) (served int, stopped, spent bool, err error) {
	for ; ; served++ {
		if s.Stopped() {
			return served, true, false, nil
		}
		if budget > 0 && served == budget {
			return served, false, true, nil
		}
		s.Hold() // paused: take nothing
		c, err := s.Queue.Pop(s.Mem)
		if err != nil || c == nil {
			return served, false, false, err
		}
		n, err := handle(c)
		if err != nil {
			return served, false, false, err
		}
		if err := s.Used(c.Head, n); err != nil {
			return served, false, false, err
		}
	}
}

// sleep waits for a kick on Bell; false means Stop closed.
func (s *Server) sleep() bool {
	s.Sleeping()
	// This thread blocks in ppoll on the doorbell: a kick wakes it and
	// no other (see Doorbell). Parked meanwhile: a pause need not wait
	// for a kick, and the wakeup goes through the gate.
	s.Member.Idle()
	s.Bell.Wait()
	ok := s.Woke(true)
	s.Member.Wake(s.Stop)
	return ok
}

// Sleeping tells the watchdog the queue is about to sleep on its kick, and
// what it has seen of the ring (it judges SeenAvail only while Sleeping).
// Call Woke when the sleep ends.
func (s *Server) Sleeping() {
	w := s.Queue.watch
	w.SeenAvail.Store(uint32(s.Queue.NextAvail()))
	w.Sleeping.Store(true)
}

// Woke ends a sleep begun with Sleeping; rung says whether the queue's kick
// (Bell) ended it. It returns false when Stop closed meanwhile.
func (s *Server) Woke(rung bool) bool {
	s.Queue.watch.Sleeping.Store(false)
	if s.Stopped() {
		return false // the ring was Reset's
	}
	if rung {
		s.counters().Kicks.Add(1)
	}
	return true
}

// Used returns one chain to the driver (AddUsed) and makes the interrupt
// decision when Batch chains have been used since the last one.
func (s *Server) Used(head uint16, n uint32) error {
	s.Hold() // paused: publish nothing until resumed
	if err := s.Queue.AddUsed(s.Mem, head, n); err != nil {
		return err
	}
	s.Queue.watch.UsedBytes.Add(uint64(n))
	return s.usedN(1)
}

// UsedBatch returns several chains to the driver with one used idx
// publication (Queue.AddUsedBatch): for the buffers of one merged virtio-net
// frame, which the driver must see all together (spec 5.1.6.4).
func (s *Server) UsedBatch(elems []UsedElem) error {
	s.Hold()
	if err := s.Queue.AddUsedBatch(s.Mem, elems); err != nil {
		return err
	}
	for _, e := range elems {
		s.Queue.watch.UsedBytes.Add(uint64(e.Len))
	}
	return s.usedN(len(elems))
}

func (s *Server) usedN(n int) error {
	s.Queue.watch.Used.Add(uint64(n))
	s.pending += n
	if s.Batch > 0 && s.pending >= s.Batch {
		return s.Signal()
	}
	return nil
}

// Signal is the interrupt decision (spec 2.7.7), the only caller of
// needsInterrupt: if chains were used since the last decision and the
// driver wants to hear about them, it signals the queue's interrupt.
func (s *Server) Signal() error {
	if s.pending == 0 {
		return nil
	}
	s.pending = 0
	need, err := s.Queue.needsInterrupt(s.Mem)
	if err != nil {
		return err
	}
	if !need {
		s.counters().Suppressed.Add(1)
		if s.Queue.eventIdx {
			s.Queue.watch.SuppressedEventIdx.Add(1)
		} else {
			s.Queue.watch.SuppressedNoInterrupt.Add(1)
		}
		return nil
	}
	s.counters().Interrupts.Add(1)
	s.Queue.watch.Wanted.Add(1)
	return s.Intr.SignalUsed(s.Queue.Index)
}

// ArmAvail is for a device that found the ring empty while it needs a
// buffer (virtio-net RX): it makes the interrupt decision for what it has
// used (the driver refills on interrupts), asks for kicks and re-checks the
// ring. more: buffers arrived meanwhile, no sleep. Otherwise the device
// sleeps until Bell rings (Sleeping, then Woke). Either way it calls Quiet
// before it goes on, so kicks stay off while it has buffers.
func (s *Server) ArmAvail() (more bool, err error) {
	if err := s.Signal(); err != nil {
		return false, err
	}
	// Same re-check as in Pass: without it a buffer added while kicks
	// were off is never seen.
	return s.Rearm()
}

// Quiet asks the driver for no kicks (disableNotify). A device that polls
// the ring itself while it has work calls it when it starts; ArmAvail turns
// kicks back on only while it waits.
func (s *Server) Quiet() error { return s.Queue.disableNotify(s.Mem) }
