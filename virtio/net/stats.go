package virtionet

import (
	"fmt"
	"sync/atomic"

	"github.com/govm/govm/virtio"
)

// QueueStats says what one queue has been doing since New.
// The queue's notifications and used chains are in its snapshot
// (qstats.Queue); these are what only the device sees.
type QueueStats struct {
	Popped       uint64 `json:"popped"`        // descriptor chains popped
	Frames       uint64 `json:"frames"`        // frames delivered to the guest (RX) or the backend (TX)
	Bytes        uint64 `json:"bytes"`         // frame bytes, vnet header excluded
	BufferWaits  uint64 `json:"buffer_waits"`  // RX: times a frame waited for the driver to post buffers
	BackendWaits uint64 `json:"backend_waits"` // RX: times the backend was found empty and waited on
	// YieldReads, RX: frames found by the read after yielding the CPU on
	// a backend found empty mid-flood, each a sleep on it saved.
	YieldReads uint64 `json:"yield_reads"`

	DropTooLarge  uint64 `json:"drop_too_large"` // frame larger than the buffers (RX) or the limit (TX)
	DropMalformed uint64 `json:"drop_malformed"` // TX chain too short or header breaking spec 5.1.6.2.1
	DropBackend   uint64 `json:"drop_backend"`   // the backend rejected or failed the frame
	ReadErrors    uint64 `json:"read_errors"`    // RX: backend reads that failed (counted, RX goes on)
}

// Stats holds both queues' counters.
type Stats struct {
	RX QueueStats `json:"rx"`
	TX QueueStats `json:"tx"`
}

// String is one line for logs.
func (s QueueStats) String() string {
	return fmt.Sprintf("popped=%d frames=%d bytes=%d waits=%d backend_waits=%d yield_reads=%d drops(large=%d malformed=%d backend=%d) read_errors=%d",
		s.Popped, s.Frames, s.Bytes, s.BufferWaits, s.BackendWaits, s.YieldReads,
		s.DropTooLarge, s.DropMalformed, s.DropBackend, s.ReadErrors)
}

type counters struct {
	chains, frames, bytes, bufferWaits, backendWaits     atomic.Uint64
	yieldReads                                           atomic.Uint64
	dropTooLarge, dropMalformed, dropBackend, readErrors atomic.Uint64
}

func (c *counters) snapshot() QueueStats {
	return QueueStats{
		Popped: c.chains.Load(), Frames: c.frames.Load(), Bytes: c.bytes.Load(),
		BufferWaits: c.bufferWaits.Load(), BackendWaits: c.backendWaits.Load(),
		YieldReads:   c.yieldReads.Load(),
		DropTooLarge: c.dropTooLarge.Load(), DropMalformed: c.dropMalformed.Load(),
		DropBackend: c.dropBackend.Load(), ReadErrors: c.readErrors.Load(),
	}
}

type stats struct{ rx, tx counters }

// Stats returns a snapshot of the counters. Safe to call any time.
func (d *Device) Stats() Stats {
	return Stats{RX: d.stats.rx.snapshot(), TX: d.stats.tx.snapshot()}
}

// batchMax bounds how many chains a queue uses before it makes an interrupt
// decision even though it still has work (virtio.Server.Batch): a steady
// flood must not starve the driver of completions (it frees TX buffers and
// refills RX on interrupts).
const batchMax = 64

// vq is what RX and TX each need of their queue: the queue core's serve
// loop, which owns notifications and the interrupt decision.
type vq struct {
	virtio.Server
	c *counters
}

func newVQ(d *Device, a virtio.Activation, idx int, c *counters, stop <-chan struct{}) vq {
	return vq{Server: virtio.Server{Mem: a.Mem, Queue: a.Queues[idx], Bell: a.Bells[idx],
		Intr: a.Intr, Stop: stop, Batch: batchMax, Member: a.Member}, c: c}
}

var _ virtio.QueueReporter = (*Device)(nil)

// QueueName is "rx" for receiveq1 and "tx" for transmitq1 (spec 5.1.2).
func (d *Device) QueueName(i int) string {
	switch i {
	case RXQueue:
		return "rx"
	case TXQueue:
		return "tx"
	}
	return fmt.Sprintf("queue%d", i)
}

// QueueTraffic is queue i's frame bytes (vnet headers excluded) and its
// drops by reason.
func (d *Device) QueueTraffic(i int) (uint64, map[string]uint64, bool) {
	var c QueueStats
	switch i {
	case RXQueue:
		c = d.stats.rx.snapshot()
	case TXQueue:
		c = d.stats.tx.snapshot()
	default:
		return 0, nil, false
	}
	return c.Bytes, map[string]uint64{"too_large": c.DropTooLarge, "malformed": c.DropMalformed, "backend": c.DropBackend}, true
}
