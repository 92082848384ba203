package virtio

import "sync/atomic"

// Watch is what a queue's device goroutine publishes for govm's
// lost-notification watchdog (package stall) and for QueueStats: plain
// atomic stores on the data path, read from the watchdog's own goroutine.
// One per Queue, kept across resets.
type Watch struct {
	// Sleeping is true while the device waits for a kick (Loop.sleep);
	// SeenAvail is the avail idx it had consumed up to when it went to
	// sleep. Avail idx moving past SeenAvail while Sleeping stays true
	// is a kick that never arrived.
	Sleeping  atomic.Bool
	SeenAvail atomic.Uint32
	// NeedBuffers is true while a receive queue waits for the driver to
	// post buffers (virtio-net RX): with frames pending in the backend
	// that is RX starvation, a driver-side stall.
	NeedBuffers atomic.Bool
	// KicksTaken counts the driver's notifications the device woke on.
	KicksTaken atomic.Uint64
	// InterruptsWanted counts interrupt decisions that said yes (the
	// device then calls Interrupt.SignalUsed). The transport counts what
	// it delivered; a difference that persists is a lost interrupt on the
	// host side.
	InterruptsWanted atomic.Uint64
	// Interrupt decisions the driver declined, by how it declined
	// (spec 2.7.7): VRING_AVAIL_F_NO_INTERRUPT, or used_event not crossed.
	SuppressedNoInterrupt atomic.Uint64
	SuppressedEventIdx    atomic.Uint64
	// KicksSuppressed counts re-checks that found new buffers with
	// notifications off: buffers the driver published without a kick,
	// because the device had said it was not needed.
	KicksSuppressed atomic.Uint64
	// Polled counts waits for work that busy-polling the ring ended
	// (Poller): the driver published buffers with kicks off while the
	// device watched, so they cost neither a kick nor a wakeup.
	Polled atomic.Uint64
	// Chains counts chains returned to the driver, UsedBytes their used
	// lengths (bytes the device wrote into them).
	Chains, UsedBytes atomic.Uint64
}

// Watch returns the queue's watch counters.
func (q *Queue) Watch() *Watch { return q.watch }
