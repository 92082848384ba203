package stall

import (
	"testing"
	"time"
)

// BenchmarkObserve is the judgement of one sample of three healthy queues
// (a disk and a NIC's rx and tx), what the watchdog does four times a
// second; docs/usage.md quotes it for the watchdog's cost.
func BenchmarkObserve(b *testing.B) {
	w := newTest()
	qs := []Queue{healthy(), healthy(), healthy()}
	qs[1].Device, qs[1].Name = "net 0", "rx"
	qs[2].Device, qs[2].Index, qs[2].Name = "net 0", 1, "tx"
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(w.cfg.Period)
		w.Observe(now, qs, true)
	}
}
