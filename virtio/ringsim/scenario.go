package ringsim

import (
	"fmt"

	"github.com/govm/govm/virtio/vring"
)

// Layout is the ring format under test.
type Layout string

// The layouts.
const (
	Split  Layout = "split"  // spec 2.7, legacy layout (2.7.2)
	Packed Layout = "packed" // spec 2.8
)

// Scenario is one steady state of a ring.
//
// The model is a loop of rounds. In each, the driver reaps used buffers and
// adds new ones until InFlight chains are outstanding (added, not yet
// reaped), then the device pops the chains the driver added, completes
// Batch of them and decides about the interrupt. What lies between the
// positions of the four (driver adds, device pops, device completes,
// driver reaps) is the ring's fullness: see lags.
type Scenario struct {
	Layout Layout
	Line   uint64 // cache line size: 64 or 128
	Size   uint16 // queue size
	// InFlight is the number of chains outstanding (the ring's fullness);
	// Batch is how many the device completes, and the driver re-adds,
	// per round. Batch <= InFlight.
	InFlight, Batch int
	// Chain is the number of buffers per chain (N in the thread).
	Chain    int
	Indirect bool // VIRTIO_RING_F_INDIRECT_DESC: a table for Chain > 1
	EventIdx bool // VIRTIO_RING_F_EVENT_IDX
	// Poll makes the driver poll its used ring with callbacks disabled;
	// otherwise it is interrupt-driven, reaping everything in the
	// callback as virtio-blk's and virtio-net's do.
	Poll bool
	// OutOfOrder makes the device complete held chains in a random
	// order, as a block device does; otherwise in the order popped.
	OutOfOrder bool
	// Eager makes the device pop every chain as soon as it is available
	// and hold the slack itself (QEMU, vhost and govm's Loop drain the
	// avail ring when they run); otherwise the slack waits on the avail
	// side, a device that lags behind its driver (see lags).
	Eager bool
	Reuse vring.Reuse // the driver's free list (Linux: LIFO)
	// OwnLineEvents gives used_event and avail_event a cache line of
	// their own instead of the place spec 2.7 gives them (the end of
	// the other side's ring), to answer Avi's question.
	OwnLineEvents bool
	Seed          int64 // for OutOfOrder
}

// Name is a short label for tables.
func (s Scenario) Name() string {
	n := fmt.Sprintf("%s n=%d inflight=%d batch=%d", s.Layout, s.Chain, s.InFlight, s.Batch)
	if s.Indirect {
		n += " indirect"
	}
	if !s.EventIdx {
		n += " no-event-idx"
	}
	if s.Poll {
		n += " poll"
	}
	if s.OutOfOrder {
		n += " out-of-order"
	}
	if s.Eager {
		n += " eager"
	}
	if s.Reuse == vring.FIFO {
		n += " fifo"
	}
	if s.OwnLineEvents {
		n += " own-line-events"
	}
	return n
}

// descsPerChain is how many descriptors of the ring one chain takes.
func (s Scenario) descsPerChain() int {
	if s.Indirect && s.Chain > 1 {
		return 1
	}
	return s.Chain
}

// Validate checks that the scenario can run.
func (s Scenario) Validate() error {
	switch {
	case s.Layout != Split && s.Layout != Packed:
		return fmt.Errorf("layout %q: want split or packed", s.Layout)
	case s.Line != 64 && s.Line != 128:
		return fmt.Errorf("line %d: want 64 or 128", s.Line)
	case s.Size == 0 || s.Size&(s.Size-1) != 0:
		return fmt.Errorf("size %d: want a power of 2", s.Size)
	case s.Chain < 1 || s.Batch < 1 || s.InFlight < s.Batch:
		return fmt.Errorf("chain %d, batch %d, in flight %d: want 1 <= batch <= in flight and chain >= 1",
			s.Chain, s.Batch, s.InFlight)
	case s.InFlight*s.descsPerChain() > int(s.Size):
		return fmt.Errorf("%d chains of %d descriptors do not fit a ring of %d",
			s.InFlight, s.descsPerChain(), s.Size)
	}
	return nil
}

// lags splits the slack of a round (InFlight - Batch) between the
// positions: availLag chains stay available ahead of the device, hold
// chains stay popped by an out-of-order device, usedLag chains stay used
// and not yet reaped by a polling driver. An interrupt-driven driver reaps
// everything its interrupt finds, so it keeps no used lag.
//
// An eager device holds all of its side's share: nothing waits on the
// avail side.
func (s Scenario) lags() (availLag, hold, usedLag int) {
	slack := s.InFlight - s.Batch
	switch {
	case s.Eager && s.Poll:
		usedLag = slack / 2
		return 0, slack - usedLag, usedLag
	case s.Eager:
		return 0, slack, 0
	case s.OutOfOrder:
		hold = slack / 2
		slack -= hold
	}
	if s.Poll {
		usedLag = slack / 2
	}
	return slack - usedLag, hold, usedLag
}
