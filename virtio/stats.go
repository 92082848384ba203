package virtio

import (
	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio/qstats"
)

// Stats is the queue core's part of q's snapshot: its ring (read from mem
// with plain loads, only once enabled: a ring Validate has not accepted is
// not read) and its Watch. Safe while the device runs.
func (q *Queue) Stats(mem *guestmem.Memory, enabled bool) qstats.Queue {
	w := q.watch
	s := qstats.Queue{Index: q.Index, Size: q.Size, Enabled: enabled,
		KicksTaken: w.KicksTaken.Load(), KicksSuppressed: w.KicksSuppressed.Load(), Polled: w.Polled.Load(),
		InterruptsWanted:      w.InterruptsWanted.Load(),
		SuppressedNoInterrupt: w.SuppressedNoInterrupt.Load(), SuppressedEventIdx: w.SuppressedEventIdx.Load(),
		Chains: w.Chains.Load(), UsedBytes: w.UsedBytes.Load(),
		Sleeping: w.Sleeping.Load(), SeenAvail: uint16(w.SeenAvail.Load()), NeedBuffers: w.NeedBuffers.Load()}
	s.Bytes = s.UsedBytes
	if enabled {
		s.Ring = q.ReadRing(mem)
		s.EventIdx = q.EventIdx()
		s.InFlight = s.AvailIdx - s.UsedIdx
	}
	return s
}
