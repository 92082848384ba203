package virtiopci

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/qstats"
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

// Stats is a snapshot of a device's transport counters and queues. The
// JSON names are the API's (api.DeviceStats) and the --result verdict's.
type Stats struct {
	Name   string `json:"name"`
	Status uint8  `json:"status"`
	// All queues' kicks (qstats.Queue), and the queues moved off a
	// failed notify eventfd back to port-write kicks.
	KicksPort       uint64 `json:"kicks_port"`
	KicksEventFD    uint64 `json:"kicks_eventfd"`
	EventFDFailures uint64 `json:"eventfd_failures"`
	// Used-buffer signals that raised the line, and that found the ISR
	// set (no second raise).
	Interrupts       uint64 `json:"interrupts"`
	SuppressedISRSet uint64 `json:"suppressed_isr_set"`
	// The driver's ISR reads, and those that found 0 (a shared line, or
	// spurious).
	ISRReads         uint64 `json:"isr_reads"`
	ISREmpty         uint64 `json:"isr_empty"`
	ConfigInterrupts uint64 `json:"config_interrupts"`
	GuestErrors      uint64 `json:"guest_errors"`
	// GuestLogSuppressed counts guest-error lines the rate limit kept
	// out of the log.
	GuestLogSuppressed uint64         `json:"guest_log_suppressed"`
	ISR                uint8          `json:"isr"` // the ISR byte at the snapshot
	Queues             []qstats.Queue `json:"queues"`
}

// Stats returns the transport counters and every queue's snapshot: the
// queue core's (ring indexes read from guest memory, atomically: the device
// may be running), the transport's counts, and the device's names and
// traffic if it reports them (virtio.QueueReporter). A ring whose memory
// cannot be read reports zeros.
func (d *Transport) Stats() Stats {
	s := Stats{
		Name:             d.name,
		Status:           d.Status(),
		KicksPort:        d.counters.notifies.Load(),
		EventFDFailures:  d.counters.eventfdFailures.Load(),
		Interrupts:       d.counters.raised.Load(),
		SuppressedISRSet: d.counters.coalesced.Load(),
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
	rep, _ := d.dev.(virtio.QueueReporter)
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, q := range d.queues {
		c := &d.qcounters[i]
		qs := q.Stats(d.mem, d.pfns[i] != 0)
		qs.Name = fmt.Sprintf("queue%d", i)
		qs.KicksPort, qs.KicksEventFD, qs.KickPending = c.notifies.Load(), d.bells[i].Signals(), d.bells[i].Pending()
		qs.Interrupts, qs.SuppressedISRSet = c.raised.Load(), c.coalesced.Load()
		if rep != nil {
			qs.Name = rep.QueueName(i)
			if b, drops, ok := rep.QueueTraffic(i); ok {
				qs.Bytes, qs.Drops = b, drops
			}
		}
		s.KicksEventFD += qs.KicksEventFD
		s.Queues = append(s.Queues, qs)
	}
	return s
}

// String is one line for govm's log.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: status %#x, kicks %d (+%d by ioeventfd), interrupts %d (+%d coalesced while ISR set), ISR reads %d (%d empty), config %d, guest errors %d (%d log lines suppressed)",
		s.Name, s.Status, s.KicksPort, s.KicksEventFD, s.Interrupts, s.SuppressedISRSet, s.ISRReads, s.ISREmpty, s.ConfigInterrupts, s.GuestErrors, s.GuestLogSuppressed)
	if s.EventFDFailures > 0 {
		fmt.Fprintf(&b, ", notify eventfds failed %d", s.EventFDFailures)
	}
	for _, q := range s.Queues {
		if !q.Enabled {
			continue
		}
		fmt.Fprintf(&b, "; %s avail %d used %d in flight %d/%d", q.Name, q.AvailIdx, q.UsedIdx, q.InFlight, q.Size)
	}
	return b.String()
}
