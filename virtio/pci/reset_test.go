package virtiopci

import "testing"

// TestReset: the VMM's Reset does what a driver's status write of 0 does:
// the device is reset once, the queues are forgotten, the ISR is clear and
// the line low, and the device can be brought up again.
func TestReset(t *testing.T) {
	r := newRig(t)
	r.setupQueue(0, 1)
	r.wr(LegacyStatus, 1, StatusAcknowledge|StatusDriver|StatusDriverOK)
	if err := r.d.SignalUsed(0); err != nil {
		t.Fatal(err)
	}
	if !r.line.level() {
		t.Fatal("line not raised by SignalUsed")
	}
	r.d.Reset()
	if r.dev.resets != 1 {
		t.Fatalf("device Reset called %d times, want 1", r.dev.resets)
	}
	if q := r.d.queues[0]; q.Ready || r.d.pfns[0] != 0 || r.d.active {
		t.Fatalf("queue 0 %+v, active %v after Reset", q, r.d.active)
	}
	if r.isrLevel() != 0 || r.line.level() || r.d.Status() != 0 {
		t.Fatalf("after Reset: ISR %#x line %v status %#x, want all clear", r.isrLevel(), r.line.level(), r.d.Status())
	}
	r.setupQueue(0, 1)
	r.wr(LegacyStatus, 1, StatusDriverOK)
	if len(r.dev.activations) != 2 {
		t.Fatalf("%d activations after re-init, want 2", len(r.dev.activations))
	}
}
