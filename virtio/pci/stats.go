package virtiopci

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// pciCounters are the transport's view of what the driver and device do:
// every field is updated atomically on the hot path and read by Stats from
// any goroutine.
type pciCounters struct {
	notifies atomic.Uint64 // QUEUE_NOTIFY port writes that reached user space
	// (ioeventfd signals, the kicks that skipped the exit, are counted by
	// each queue's doorbell as the device takes them.)
	// eventfdFailures counts queues whose doorbell eventfd failed and
	// whose kicks went back to port writes (ioeventfd.go bellFailed).
	eventfdFailures atomic.Uint64
	raised          atomic.Uint64 // line raised: ISR went from 0 to non-zero
	coalesced       atomic.Uint64 // signals that found the ISR already set (no raise)
	isrReads        atomic.Uint64 // driver ISR reads
	isrEmpty        atomic.Uint64 // ISR reads that found 0 (shared line, or spurious)
	configIRQs      atomic.Uint64 // configuration-change signals
	guestErrs       atomic.Uint64 // DeviceError / transport guest errors
}

// queueCounters are one queue's share of the transport's counters (govm
// stat shows a row per queue). Atomic like pciCounters.
type queueCounters struct {
	notifies  atomic.Uint64 // QUEUE_NOTIFY port writes for this queue
	raised    atomic.Uint64 // this queue's SignalUsed raised the line
	coalesced atomic.Uint64 // this queue's SignalUsed found the ISR set
	recovered atomic.Uint64 // watchdog re-raises standing in for a late delivery
}

// QueueStats is one virtqueue as the guest's ring shows it.
type QueueStats struct {
	Index    int
	Size     uint16
	Enabled  bool
	AvailIdx uint16 // driver's avail->idx
	UsedIdx  uint16 // device's used->idx

	// Kicks by port write (counted as written) and by ioeventfd (KVM
	// signals, counted as the device takes them from its doorbell).
	Notifies, EventFDs uint64
	Raised, Coalesced  uint64 // used-buffer signals that raised the line / found the ISR set

	// The rest of the ring's notification state (spec 2.7.6-2.7.10):
	// the driver's avail flags and used_event, the device's used flags
	// and avail_event (the event fields mean something with EventIdx).
	AvailFlags, UsedFlags, UsedEvent, AvailEvent uint16
	EventIdx                                     bool
	// The device goroutine's published state (virtio.Watch).
	Sleeping, NeedBuffers bool
	// Rung: a kick waits in the queue's doorbell, not yet taken.
	Rung                                                          bool
	SeenAvail                                                     uint16
	Wanted, SuppressedNoInterrupt, SuppressedEventIdx, KickSupprs uint64
	// Polled counts waits for work that busy-polling ended (virtio.Watch).
	Polled          uint64
	Used, UsedBytes uint64 // chains used, their used lengths
}

// Delivered is how many of the device's wanted interrupts the transport
// delivered (raised, or coalesced into an ISR already set).
func (q QueueStats) Delivered() uint64 { return q.Raised + q.Coalesced }

// Stats is a snapshot of a device's transport counters and queues.
type Stats struct {
	Name               string
	Status             uint8
	Notifies, EventFDs uint64
	// EventFDFailures counts queues moved off a failed notify eventfd
	// back to port-write kicks.
	EventFDFailures                       uint64
	Raised, Coalesced, ISRReads, ISREmpty uint64
	ConfigInterrupts, GuestErrors         uint64
	// GuestLogSuppressed counts guest-error lines the rate limit kept
	// out of the log.
	GuestLogSuppressed uint64
	ISR                uint8 // the ISR byte at the snapshot
	Queues             []QueueStats
}

// Stats returns the transport counters and, for each enabled queue, the
// ring indexes read from guest memory (atomically: the device may be
// running). A ring whose memory cannot be read reports zeros.
func (d *Transport) Stats() Stats {
	s := Stats{
		Name:             d.name,
		Status:           d.Status(),
		Notifies:         d.counters.notifies.Load(),
		EventFDFailures:  d.counters.eventfdFailures.Load(),
		Raised:           d.counters.raised.Load(),
		Coalesced:        d.counters.coalesced.Load(),
		ISRReads:         d.counters.isrReads.Load(),
		ISREmpty:         d.counters.isrEmpty.Load(),
		ConfigInterrupts: d.counters.configIRQs.Load(),
		GuestErrors:      d.counters.guestErrs.Load(),
		// Read before the mutex below, like the counters: the limiter
		// has its own lock.
		GuestLogSuppressed: d.guestLog.Suppressed(),
	}
	d.intMu.Lock()
	s.ISR = d.isr
	d.intMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, q := range d.queues {
		c := &d.qcounters[i]
		qs := QueueStats{Index: i, Size: q.Size, Enabled: d.pfns[i] != 0,
			Notifies: c.notifies.Load(), EventFDs: d.bells[i].Signals(),
			Raised: c.raised.Load(), Coalesced: c.coalesced.Load(), Rung: d.bells[i].Pending()}
		if qs.Enabled {
			r := q.ReadRing(d.mem)
			qs.AvailFlags, qs.AvailIdx, qs.UsedEvent = r.AvailFlags, r.AvailIdx, r.UsedEvent
			qs.UsedFlags, qs.UsedIdx, qs.AvailEvent = r.UsedFlags, r.UsedIdx, r.AvailEvent
			qs.EventIdx = q.EventIdx()
		}
		w := q.Watch()
		qs.Sleeping, qs.NeedBuffers = w.Sleeping.Load(), w.NeedBuffers.Load()
		qs.SeenAvail = uint16(w.SeenAvail.Load())
		qs.Wanted = w.Wanted.Load()
		qs.SuppressedNoInterrupt, qs.SuppressedEventIdx = w.SuppressedNoInterrupt.Load(), w.SuppressedEventIdx.Load()
		qs.KickSupprs, qs.Polled = w.KicksSuppressed.Load(), w.Polled.Load()
		qs.Used, qs.UsedBytes = w.Used.Load(), w.UsedBytes.Load()
		s.EventFDs += qs.EventFDs
		s.Queues = append(s.Queues, qs)
	}
	return s
}

// String is one line for govm's log.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: status %#x, kicks %d (+%d by ioeventfd), interrupts %d (+%d coalesced while ISR set), ISR reads %d (%d empty), config %d, guest errors %d (%d log lines suppressed)",
		s.Name, s.Status, s.Notifies, s.EventFDs, s.Raised, s.Coalesced, s.ISRReads, s.ISREmpty, s.ConfigInterrupts, s.GuestErrors, s.GuestLogSuppressed)
	if s.EventFDFailures > 0 {
		fmt.Fprintf(&b, ", notify eventfds failed %d", s.EventFDFailures)
	}
	for _, q := range s.Queues {
		if !q.Enabled {
			continue
		}
		fmt.Fprintf(&b, "; q%d avail %d used %d in flight %d/%d", q.Index, q.AvailIdx, q.UsedIdx, q.AvailIdx-q.UsedIdx, q.Size)
	}
	return b.String()
}
