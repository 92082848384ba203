package virtio

import (
	"errors"
	"fmt"

	"github.com/govm/govm/guestmem"
)

// Handler is what a device does with one chain: it serves it and returns
// the used length for AddUsed (spec 2.7.8: bytes written into the chain).
// An error stops the queue (Loop.Run says how).
type Handler func(c *Chain) (uint32, error)

// Server is one queue's part of the serve loop (Loop): what a device calls
// as it uses chains (Used, UsedBatch, Hold), and what the Loop calls around
// a turn (drain, signal, sleeping, woke). A Server is used by one goroutine
// only, like its Queue.
type Server struct {
	Mem   *guestmem.Memory
	Queue *Queue
	// Bell is the queue's kick, waited on by this goroutine itself.
	Bell *Doorbell
	Intr Interrupt
	// Stop is the Loop's: closed when the device is being reset.
	Stop <-chan struct{}
	// Batch bounds how many chains are used before an interrupt decision
	// even though work remains: a steady flood must not starve the driver
	// of completions (it frees TX buffers and refills RX on interrupts).
	// 0 means once per turn only. 1 decides after every chain, so the
	// driver hears of the completion it waits for (used_event, spec
	// 2.7.7.1) while the device still works on the rest of the turn:
	// virtio-blk with EVENT_IDX, whose driver then refills the ring
	// meanwhile.
	Batch int
	// Member is the Loop's place at the pause gate (Activation.Member);
	// nil: never held.
	Member *Member

	pending int // chains used since the last interrupt decision
}

// Hold waits while the VM is paused (Member.Hold), or until Stop closes.
func (s *Server) Hold() { s.Member.Hold(s.Stop) }

// Stopped reports whether Stop is closed.
func (s *Server) Stopped() bool { return closed(s.Stop) }

// drain is the turn of a request/response source (Source.Handle): it
// serves available chains, at most budget of them (0: all), and says how
// many it used and whether it stopped at the budget (More) or on an empty
// ring (WaitRing). Stop closing ends it as an empty ring would: the Loop
// sees Stop before it waits.
func (s *Server) drain(handle Handler, budget int) (served int, w Wait, err error) {
	for ; ; served++ {
		if s.Stopped() {
			return served, Wait{Kind: WaitRing}, nil
		}
		if budget > 0 && served == budget {
			return served, Wait{Kind: More}, nil
		}
		s.Hold() // paused: take nothing
		c, err := s.Queue.Pop(s.Mem)
		if err != nil || c == nil {
			return served, Wait{Kind: WaitRing}, err
		}
		n, err := handle(c)
		if err != nil {
			return served, Wait{}, err
		}
		if err := s.Used(c.Head, n); err != nil {
			return served, Wait{}, err
		}
	}
}

// sleeping tells the watchdog the queue is about to sleep on its kick, and
// what it has seen of the ring (it judges SeenAvail only while Sleeping).
func (s *Server) sleeping() {
	w := s.Queue.watch
	w.SeenAvail.Store(uint32(s.Queue.NextAvail()))
	w.Sleeping.Store(true)
}

// woke ends a sleep begun with sleeping; rung says whether the queue's
// kick (Bell) ended it.
func (s *Server) woke(rung bool) {
	s.Queue.watch.Sleeping.Store(false)
	if rung {
		s.Queue.watch.KicksTaken.Add(1)
	}
}

// fail reports an error that stops the queue: guest misbehaviour or a dead
// backend. The transport sets DEVICE_NEEDS_RESET and logs it once. A
// GuestError names its queue already, and the transport's log line names
// the device; any other error says neither.
func (s *Server) fail(err error) {
	var ge *GuestError
	if !errors.As(err, &ge) {
		err = fmt.Errorf("queue %d: %w", s.Queue.Index, err)
	}
	s.Intr.DeviceError(err)
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
	s.Queue.watch.Chains.Add(uint64(n))
	s.pending += n
	if s.Batch > 0 && s.pending >= s.Batch {
		return s.signal()
	}
	return nil
}

// signal is the interrupt decision (spec 2.7.7), the only caller of
// needsInterrupt: if chains were used since the last decision and the
// driver wants to hear about them, it signals the queue's interrupt.
func (s *Server) signal() error {
	if s.pending == 0 {
		return nil
	}
	s.pending = 0
	need, err := s.Queue.needsInterrupt(s.Mem)
	if err != nil {
		return err
	}
	if !need {
		if s.Queue.eventIdx {
			s.Queue.watch.SuppressedEventIdx.Add(1)
		} else {
			s.Queue.watch.SuppressedNoInterrupt.Add(1)
		}
		return nil
	}
	s.Queue.watch.InterruptsWanted.Add(1)
	return s.Intr.SignalUsed(s.Queue.Index)
}
