package virtiopci

import (
	"strings"
	"testing"
)

// TestPCIStatsCounts drives the transport like a driver and checks what
// Stats reports: kicks, raises, coalesced signals, ISR reads, ring indexes.
func TestPCIStatsCounts(t *testing.T) {
	r := newRig(t)
	r.setupQueue(0, 4)
	r.wr(LegacyQueueNotify, 2, 0)
	r.wr(LegacyQueueNotify, 2, 0)
	if err := r.d.SignalUsed(0); err != nil {
		t.Fatal(err)
	}
	if err := r.d.SignalUsed(0); err != nil { // ISR still set: coalesced
		t.Fatal(err)
	}
	if v := r.rd(LegacyISR, 1); v != 1 { // returns 1, clears, lowers
		t.Fatalf("ISR %#x", v)
	}
	r.rd(LegacyISR, 1) // empty
	r.checkLine(t)
	if err := r.mem.StoreUint16(r.d.queues[0].AvailAddr+2, 7); err != nil { // avail->idx
		t.Fatal(err)
	}
	s := r.d.Stats()
	if s.KicksPort != 2 || s.Interrupts != 1 || s.SuppressedISRSet != 1 || s.ISRReads != 2 || s.ISREmpty != 1 {
		t.Fatalf("stats %+v", s)
	}
	if len(s.Queues) != 2 || !s.Queues[0].Enabled || s.Queues[1].Enabled || s.Queues[0].AvailIdx != 7 {
		t.Fatalf("queue 0 not reported enabled: %+v", s.Queues)
	}
	if line := s.String(); !strings.Contains(line, "kicks 2") || !strings.Contains(line, "queue0 avail") {
		t.Fatalf("String() = %q", line)
	}
}

// reportingDevice is a fakeDevice that names its queues and reports their
// traffic (virtio.QueueReporter), as virtio-net does.
type reportingDevice struct{ *fakeDevice }

func (reportingDevice) QueueName(i int) string { return []string{"rx", "tx"}[i] }
func (reportingDevice) QueueTraffic(i int) (uint64, map[string]uint64, bool) {
	return uint64(100 + i), map[string]uint64{"too_large": uint64(i)}, true
}

// TestStatsQueueReporter: the transport's snapshot of each queue carries
// the device's names and traffic, so every reader (API, stat, watchdog,
// metrics, verdict) gets them from the one snapshot; a device that reports
// nothing gets "queueN" and its used lengths as bytes.
func TestStatsQueueReporter(t *testing.T) {
	r := newRig(t)
	d, err := New(reportingDevice{r.dev}, r.mem, r.line, 11, r.log.logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s := d.Stats()
	if len(s.Queues) != 2 || s.Queues[0].Name != "rx" || s.Queues[1].Name != "tx" ||
		s.Queues[1].Bytes != 101 || s.Queues[1].Drops["too_large"] != 1 {
		t.Fatalf("queues %+v: want rx and tx with the device's traffic", s.Queues)
	}
	if q := r.d.Stats().Queues[1]; q.Name != "queue1" || q.Bytes != q.UsedBytes || q.Drops != nil {
		t.Fatalf("queue %+v of a device that reports nothing: want queue1, used bytes, no drops", q)
	}
}
