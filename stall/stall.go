// Package stall detects stalled virtqueues while a guest runs (the judge
// behind govm's --watchdog): a kick that never reached a sleeping device,
// an interrupt the device wanted that never reached the line, an ISR the
// driver does not service, and a receive queue starved of buffers while
// frames wait; and, so that none of those is blamed on the guest or the
// transport, a device thread that does not run although its kick arrived.
// It judges samples of each queue's ring and device state taken from its
// own goroutine; the data path only publishes atomics (virtio.Watch). It knows
// nothing of KVM or PCI: vmm fills in the samples.
package stall

import (
	"fmt"
	"sync"
	"time"

	"github.com/govm/govm/virtio/qstats"
)

// Kind is one kind of lost notification.
type Kind string

// The kinds the watchdog detects.
const (
	LostKick      Kind = "lost_kick"
	LostInterrupt Kind = "lost_interrupt"
	StuckISR      Kind = "stuck_isr"
	RXStarvation  Kind = "rx_starvation"
	// DeviceStarved is a kick that reached the doorbell of a sleeping
	// device that has not taken it: nothing was lost; the device's
	// thread did not run (an overloaded host, a thread stuck elsewhere).
	DeviceStarved Kind = "device_starved"
)

// Kinds lists every kind, in report order.
var Kinds = []Kind{LostKick, LostInterrupt, StuckISR, RXStarvation, DeviceStarved}

// Split ring flags (spec 2.7.6, 2.7.8).
const (
	availFlagNoInterrupt = 1
	usedFlagNoNotify     = 1
)

// Queue is one sample of one queue: the queue's snapshot, and what the
// sampler knows of its device.
type Queue struct {
	Device string // "disk 0 (/var/d.img)"
	// Slot is the sampler's index of the device, handed back in a
	// Report for Recover to find it by; opaque here.
	Slot int
	qstats.Queue
	ISR       uint8  // the device's ISR (legacy: one per device)
	ISRReads  uint64 // the driver's ISR reads so far
	RXPending bool   // frames wait in the backend (RX queues)
	// DriverWork moves whenever the driver does anything on the queue's
	// device: it is the sum of every queue's avail idx and the ISR
	// reads. A driver whose RX ring stays empty while this moves is
	// busy (an emulated guest kernel under a flood), not stalled.
	DriverWork uint64
}

// Report is one detection.
type Report struct {
	Kind  Kind
	Queue Queue
	For   time.Duration // how long the condition held
	Side  string        // which side looks at fault
}

// String is the one log line.
func (r Report) String() string {
	q := r.Queue
	what := map[Kind]string{
		LostKick: fmt.Sprintf("avail idx %d is ahead of the %d the device consumed, and the device has slept waiting for a kick for %v",
			q.AvailIdx, q.SeenAvail, r.For.Round(time.Millisecond)),
		LostInterrupt: fmt.Sprintf("the device wanted %d interrupts, %d reached the line; none for %v",
			q.InterruptsWanted, q.Delivered(), r.For.Round(time.Millisecond)),
		StuckISR: fmt.Sprintf("ISR %#x and the line high for %v with no ISR read (%d reads so far)",
			q.ISR, r.For.Round(time.Millisecond), q.ISRReads),
		RXStarvation: fmt.Sprintf("frames have waited in the backend for %v with no receive buffers posted",
			r.For.Round(time.Millisecond)),
		DeviceStarved: fmt.Sprintf("avail idx %d is ahead of the %d the device consumed, its kick has waited in the doorbell for %v, and the device has not run to take it",
			q.AvailIdx, q.SeenAvail, r.For.Round(time.Millisecond)),
	}[r.Kind]
	ev := "off"
	if q.EventIdx {
		ev = "on"
	}
	return fmt.Sprintf("watchdog: %s on %s queue %d (%s): %s; avail idx %d used idx %d seen %d, avail flags %#x used flags %#x, used_event %d avail_event %d (event_idx %s), ISR %#x; at fault: %s",
		r.Kind, q.Device, q.Index, q.Name, what, q.AvailIdx, q.UsedIdx, q.SeenAvail,
		q.AvailFlags, q.UsedFlags, q.UsedEvent, q.AvailEvent, ev, q.ISR, r.Side)
}

// Event counts one kind of detection on one queue.
type Event struct {
	Kind  Kind
	Count uint64
	Last  string // the last report's line
}

// Config configures a Detector.
type Config struct {
	// T is how long a condition must hold, unchanged, to be reported.
	T time.Duration
	// Period is the sampling period (default T/4, at least 5 ms).
	Period time.Duration
	// Sample appends the current samples to dst; ok false means the
	// guest cannot run now (paused): nothing is judged then.
	Sample func(dst []Queue) (samples []Queue, ok bool)
	// Report receives each detection (govm logs its line).
	Report func(Report)
	// Recover, if set, is called after each report (--watchdog-recover).
	Recover func(Report)
}

type key struct {
	dev string
	q   int
}

// holding is one condition on one queue: since when it has held with the
// same progress marker, and whether this episode was reported.
type holding struct {
	since    time.Time
	marker   [2]uint64
	reported bool
}

// Detector judges samples. Observe is the judge; Run samples on a timer.
type Detector struct {
	cfg  Config
	last time.Time // the previous sample

	stopFD int           // Run's eventfd; written by Stop
	done   chan struct{} // closed when Run's goroutine ends

	mu     sync.Mutex
	hold   map[key]map[Kind]*holding
	events map[key]map[Kind]*Event
}

// New returns a watchdog; call Run to start sampling.
func New(cfg Config) *Detector {
	if cfg.Period <= 0 {
		cfg.Period = max(cfg.T/4, 5*time.Millisecond)
	}
	return &Detector{cfg: cfg, hold: map[key]map[Kind]*holding{}, events: map[key]map[Kind]*Event{}}
}

// Events returns the detections on one queue so far, in Kinds order.
func (w *Detector) Events(device string, q int) []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Event
	for _, k := range Kinds {
		if e := w.events[key{device, q}][k]; e != nil {
			out = append(out, *e)
		}
	}
	return out
}

// Observe judges one round of samples taken at now. ok false (the guest
// is paused) and a gap since the previous round longer than two periods
// (our own goroutine did not run: an overloaded host) both restart every
// clock: nothing is judged across time we did not see.
func (w *Detector) Observe(now time.Time, samples []Queue, ok bool) {
	gap := w.last.IsZero() || now.Sub(w.last) > 2*w.cfg.Period
	w.last = now
	if !ok || gap {
		// Restart the clocks but remember what was reported, so one
		// episode is one report however often the host stalls us.
		for _, kinds := range w.hold {
			for _, h := range kinds {
				h.since = now
			}
		}
		return
	}
	seenISR := map[string]bool{}
	for _, q := range samples {
		k := key{q.Device, q.Index}
		if w.hold[k] == nil {
			w.hold[k] = map[Kind]*holding{}
		}
		behind := q.Sleeping && q.AvailIdx != q.SeenAvail
		w.judge(now, k, LostKick, q, behind && !q.KickPending,
			[2]uint64{uint64(q.SeenAvail), uint64(q.AvailIdx)}, kickSide(q))
		w.judge(now, k, DeviceStarved, q, behind && q.KickPending,
			[2]uint64{uint64(q.SeenAvail), uint64(q.AvailIdx)},
			"host: the device's thread did not run (an overloaded host, or the thread blocked elsewhere); the driver and transport did their part")
		w.judge(now, k, LostInterrupt, q, q.InterruptsWanted > q.Delivered(),
			[2]uint64{q.Delivered()}, "host: the device decided to interrupt the driver and the transport never raised the line")
		// The ISR is per device: judged once, on its first queue.
		if !seenISR[q.Device] {
			seenISR[q.Device] = true
			w.judge(now, k, StuckISR, q, q.ISR != 0,
				[2]uint64{q.ISRReads}, "driver: its interrupt is pending and it does not read the ISR (not servicing the device)")
		}
		w.judge(now, k, RXStarvation, q, q.NeedBuffers && q.RXPending && q.AvailIdx == q.SeenAvail,
			[2]uint64{uint64(q.AvailIdx), q.DriverWork}, "driver-side stall: the driver posts no receive buffers and does nothing else on the device (the device is waiting for them, not lost)")
	}
}

// kickSide says who failed when a sleeping device missed new buffers.
func kickSide(q Queue) string {
	if !q.EventIdx && q.UsedFlags&usedFlagNoNotify != 0 {
		return "device: it sleeps with VRING_USED_F_NO_NOTIFY set, so the driver rightly did not kick"
	}
	return "driver or transport: notifications were enabled, so a kick was due; the driver did not send it or it was lost before the device"
}

func (w *Detector) judge(now time.Time, k key, kind Kind, q Queue, cond bool, marker [2]uint64, side string) {
	h := w.hold[k][kind]
	if !cond {
		delete(w.hold[k], kind)
		return
	}
	if h == nil || h.marker != marker {
		w.hold[k][kind] = &holding{since: now, marker: marker}
		return
	}
	if h.reported || now.Sub(h.since) < w.cfg.T {
		return
	}
	h.reported = true
	r := Report{Kind: kind, Queue: q, For: now.Sub(h.since), Side: side}
	line := r.String()
	w.mu.Lock()
	if w.events[k] == nil {
		w.events[k] = map[Kind]*Event{}
	}
	e := w.events[k][kind]
	if e == nil {
		e = &Event{Kind: kind}
		w.events[k][kind] = e
	}
	e.Count++
	e.Last = line
	w.mu.Unlock()
	if w.cfg.Report != nil {
		w.cfg.Report(r)
	}
	if w.cfg.Recover != nil {
		w.cfg.Recover(r)
		// Judge the queue afresh: if the repair did not help, that is
		// reported again after another T.
		delete(w.hold[k], kind)
	}
}
