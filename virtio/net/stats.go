package virtionet

import (
	"fmt"
	"sync/atomic"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// QueueStats says what one queue has been doing since New.
type QueueStats struct {
	Chains      uint64 // descriptor chains popped
	Frames      uint64 // frames delivered to the guest (RX) or the backend (TX)
	Bytes       uint64 // frame bytes, vnet header excluded
	Kicks       uint64 // driver notifications received
	Interrupts  uint64 // used-buffer interrupts signalled
	BufferWaits uint64 // RX: times a frame waited for the driver to post buffers

	DropTooLarge  uint64 // frame larger than the buffers (RX) or the limit (TX)
	DropMalformed uint64 // TX chain too short or header breaking spec 5.1.6.2.1
	DropBackend   uint64 // the backend rejected or failed the frame
}

// Stats holds both queues' counters.
type Stats struct{ RX, TX QueueStats }

// String is one line for logs.
func (s QueueStats) String() string {
	return fmt.Sprintf("chains=%d frames=%d bytes=%d kicks=%d irqs=%d waits=%d drops(large=%d malformed=%d backend=%d)",
		s.Chains, s.Frames, s.Bytes, s.Kicks, s.Interrupts, s.BufferWaits,
		s.DropTooLarge, s.DropMalformed, s.DropBackend)
}

type counters struct {
	chains, frames, bytes, kicks, interrupts, bufferWaits atomic.Uint64
	dropTooLarge, dropMalformed, dropBackend              atomic.Uint64
}

func (c *counters) snapshot() QueueStats {
	return QueueStats{
		Chains: c.chains.Load(), Frames: c.frames.Load(), Bytes: c.bytes.Load(),
		Kicks: c.kicks.Load(), Interrupts: c.interrupts.Load(), BufferWaits: c.bufferWaits.Load(),
		DropTooLarge: c.dropTooLarge.Load(), DropMalformed: c.dropMalformed.Load(),
		DropBackend: c.dropBackend.Load(),
	}
}

type stats struct{ rx, tx counters }

// Stats returns a snapshot of the counters. Safe to call any time.
func (d *Device) Stats() Stats {
	return Stats{RX: d.stats.rx.snapshot(), TX: d.stats.tx.snapshot()}
}

// batchMax bounds how many chains a queue completes before it interrupts
// even though it still has work: a steady flood must not starve the driver
// of completions (it frees TX buffers and refills RX on interrupts).
const batchMax = 64

// vq is what both I/O goroutines need of their queue.
type vq struct {
	idx     int
	mem     *guestmem.Memory
	q       *virtio.Queue
	kick    <-chan struct{}
	intr    virtio.Interrupt
	stop    <-chan struct{}
	c       *counters
	pending int // chains used since the last interrupt decision
}

func newVQ(d *Device, a virtio.Activation, idx int, c *counters) vq {
	return vq{idx: idx, mem: a.Mem, q: a.Queues[idx], kick: a.Kicks[idx], intr: a.Intr, stop: d.stop, c: c}
}

// used returns a chain to the driver.
func (v *vq) used(head uint16, n uint32) error {
	if err := v.q.AddUsed(v.mem, head, n); err != nil {
		return err
	}
	v.pending++
	return nil
}

// signal is the once-per-batch interrupt decision (spec 2.7.7).
func (v *vq) signal() error {
	if v.pending == 0 {
		return nil
	}
	v.pending = 0
	need, err := v.q.NeedsInterrupt(v.mem)
	if err != nil || !need {
		return err
	}
	v.c.interrupts.Add(1)
	return v.intr.SignalUsed(v.idx)
}

// waitKick enables notifications and sleeps until the driver kicks, unless
// work arrived meanwhile (the re-check that closes the lost-kick window,
// spec 2.7.10). It returns false when the device is stopping.
func (v *vq) waitKick(onWait func()) (bool, error) {
	more, err := v.q.EnableNotify(v.mem)
	if err != nil {
		return false, err
	}
	if !more {
		if onWait != nil {
			onWait()
		}
		select {
		case <-v.kick:
			v.c.kicks.Add(1)
		case <-v.stop:
			return false, nil
		}
	}
	return true, v.q.DisableNotify(v.mem)
}

// fail reports an error that stops this queue: guest misbehaviour or a dead
// backend. The transport sets NEEDS_RESET and logs it once.
func (v *vq) fail(err error) {
	v.intr.DeviceError(fmt.Errorf("virtio-net queue %d: %w", v.idx, err))
}
