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
	if s.Notifies != 2 || s.Raised != 1 || s.Coalesced != 1 || s.ISRReads != 2 || s.ISREmpty != 1 {
		t.Fatalf("stats %+v", s)
	}
	if len(s.Queues) != 2 || !s.Queues[0].Enabled || s.Queues[1].Enabled || s.Queues[0].AvailIdx != 7 {
		t.Fatalf("queue 0 not reported enabled: %+v", s.Queues)
	}
	if line := s.String(); !strings.Contains(line, "kicks 2") || !strings.Contains(line, "q0 avail") {
		t.Fatalf("String() = %q", line)
	}
}
