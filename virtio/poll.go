package virtio

import (
	"time"

	"github.com/govm/govm/internal/yield"
)

// Poller is an I/O goroutine's adaptive busy-poll window: when the goroutine
// runs out of work it watches its rings (kicks off) for up to Window before
// it asks for kicks and sleeps. The anchors are QEMU's iothread poll-max-ns
// and vhost-net's busyloop_timeout.
//
// Why: a request that arrives while the device polls costs the driver no
// kick (a VM exit) and the device no wakeup, and is often done before the
// driver's completion path has re-enabled interrupts (virtqueue_enable_cb
// finds it), so it needs no interrupt either. At queue depth 1 the wait
// between a completion and the next request is the driver's turnaround,
// long where the guest's interrupt handler runs in KVM's instruction
// emulator: there polling pays most, in requests per second and in
// interrupts saved (docs/usage.md, "Polling").
//
// Adaptive, so that it costs nothing when it does not pay: every wait for
// work (from the end of the work to the next work, polled or slept) moves
// the window.
//   - The work came within the window: polling paid; keep it.
//   - The work came later, but within Max: polling would have paid with a
//     longer window; double it (from pollMin).
//   - The work came after more than Max: the driver's pace is beyond any
//     window we may spin; halve it, and below pollMin stop polling.
//
// So an idle queue, or one used every few milliseconds, never spins, and a
// queue at queue depth 1 spins for about its driver's turnaround. A Poller
// with Max 0 never polls. One goroutine owns a Poller.
type Poller struct {
	// Max bounds the window (govm run --poll-max); 0 turns polling off.
	Max time.Duration

	window time.Duration
	start  time.Time // when the current wait began (Begin)
	end    time.Time // when its window closes
	// yield lets the spin pass through Go's scheduler, as a sleep
	// would (see internal/yield).
	yield yield.Point
}

// pollMin is the first window once waits show polling may pay: a few
// microseconds, about what a wakeup costs.
const pollMin = 4 * time.Microsecond

// Begin starts a wait for work: the goroutine found none. It returns the
// window to spin for now (0: do not spin, sleep at once). Found ends the
// wait.
func (p *Poller) Begin() time.Duration {
	if p.Max <= 0 {
		return 0 // polling off: not even a clock read
	}
	p.start = time.Now()
	p.end = p.start.Add(p.window)
	return p.window
}

// Spinning reports whether the window begun by Begin is still open. The
// goroutine looks at its rings between calls.
func (p *Poller) Spinning() bool {
	p.yield.BeforeBlock()
	// Every look offers the CPU (sched_yield), so a spin gives way to the
	// vCPU or the traffic source when they share its CPU. It is not
	// enough to make a spin free on a busy host: an RX flood into the
	// guest loses about as much with it as without, which is why a Loop
	// spins only after work the driver answers (Source.Prompts).
	yield.CPU()
	return time.Now().Before(p.end)
}

// Found ends the wait begun by Begin: work arrived while spinning, or the
// sleep after the window ended (a kick). It adapts the window to how long
// the wait took.
func (p *Poller) Found() {
	if p.Max > 0 {
		p.adapt(time.Since(p.start))
	}
}

// Window is the current window.
func (p *Poller) Window() time.Duration { return p.window }

// adapt moves the window after a wait for work that took d.
func (p *Poller) adapt(d time.Duration) {
	switch {
	case p.Max <= 0:
		p.window = 0
	case d <= p.window:
		// Polling found it: the window fits the driver's pace.
	case d > p.Max:
		if p.window /= 2; p.window < pollMin {
			p.window = 0
		}
	default:
		p.window = min(max(2*p.window, pollMin), p.Max)
	}
}
