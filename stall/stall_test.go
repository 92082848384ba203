package stall

import (
	"strings"
	"testing"
	"time"
)

const testT = time.Second

// run feeds the watchdog one sample every period from t0 for d and
// returns the reports.
func run(t *testing.T, w *Detector, t0 time.Time, d time.Duration, q Queue, ok bool) []Report {
	t.Helper()
	var got []Report
	w.cfg.Report = func(r Report) { got = append(got, r) }
	for at := time.Duration(0); at <= d; at += w.cfg.Period {
		w.Observe(t0.Add(at), []Queue{q}, ok)
	}
	return got
}

func newTest() *Detector { return New(Config{T: testT, Period: 100 * time.Millisecond}) }

func healthy() Queue {
	q := Queue{Device: "disk 0"}
	q.Index, q.Name, q.AvailIdx, q.UsedIdx, q.SeenAvail = 0, "requests", 10, 10, 10
	q.Sleeping, q.InterruptsWanted, q.Interrupts, q.EventIdx = true, 5, 5, true
	return q
}

func TestDetections(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Queue)
		kind Kind
		side string
	}{
		{"healthy, asleep with nothing new", func(*Queue) {}, "", ""},
		{"lost kick", func(q *Queue) { q.AvailIdx = 12 }, LostKick, "driver or transport"},
		// The kick is in the doorbell: nobody lost it; the device's
		// thread has not run (it used to be blamed on the driver).
		{"device thread starved", func(q *Queue) { q.AvailIdx, q.KickPending = 12, true }, DeviceStarved, "host: the device's thread did not run"},
		{"lost kick while NO_NOTIFY", func(q *Queue) { q.AvailIdx, q.EventIdx, q.UsedFlags = 12, false, 1 }, LostKick, "device"},
		{"new buffers, device awake", func(q *Queue) { q.AvailIdx, q.Sleeping = 12, false }, "", ""},
		{"lost interrupt", func(q *Queue) { q.InterruptsWanted = 6 }, LostInterrupt, "host"},
		{"stuck ISR", func(q *Queue) { q.ISR = 1 }, StuckISR, "driver"},
		{"RX starvation", func(q *Queue) { q.NeedBuffers, q.RXPending = true, true }, RXStarvation, "driver-side stall"},
		{"RX waiting, no frames", func(q *Queue) { q.NeedBuffers = true }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := healthy()
			tc.mod(&q)
			w := newTest()
			got := run(t, w, time.Unix(1000, 0), 3*testT, q, true)
			if tc.kind == "" {
				if len(got) != 0 {
					t.Fatalf("false positive: %v", got[0])
				}
				return
			}
			if len(got) != 1 || got[0].Kind != tc.kind || !strings.Contains(got[0].Side, tc.side) {
				t.Fatalf("reports %v, want one %s blaming %q", got, tc.kind, tc.side)
			}
			if got[0].For < testT {
				t.Fatalf("reported after %v, before T", got[0].For)
			}
			line := got[0].String()
			for _, want := range []string{string(tc.kind), "disk 0 queue 0 (requests)", "avail idx", "used_event", "avail_event", "at fault: "} {
				if !strings.Contains(line, want) {
					t.Errorf("line lacks %q: %s", want, line)
				}
			}
			if ev := w.Events("disk 0", 0); len(ev) != 1 || ev[0].Count != 1 || ev[0].Last != line {
				t.Errorf("Events = %+v", ev)
			}
		})
	}
}

// TestProgressResetsClock: a condition whose marker moves (the device
// delivers interrupts, only slower than wanted) is not one lost event.
func TestProgressResetsClock(t *testing.T) {
	w := newTest()
	w.cfg.Report = func(r Report) { t.Fatalf("reported %v", r) }
	q := healthy()
	t0 := time.Unix(1000, 0)
	for i := 0; i < 50; i++ {
		q.InterruptsWanted, q.Interrupts = uint64(100+i), uint64(99+i) // always one behind, always moving
		w.Observe(t0.Add(time.Duration(i)*w.cfg.Period), []Queue{q}, true)
	}
}

// TestBusyDriverIsNotStarving: an RX ring the driver leaves empty while it
// works on the device (its TX avail moves, it reads the ISR: an emulated
// guest kernel under ping -f, whose NAPI round takes seconds) is not RX
// starvation; the real Linux guest's L3 suite drew such reports.
func TestBusyDriverIsNotStarving(t *testing.T) {
	w := newTest()
	w.cfg.Report = func(r Report) { t.Fatalf("reported %v", r) }
	q := healthy()
	q.NeedBuffers, q.RXPending = true, true
	t0 := time.Unix(1000, 0)
	for i := 0; i < 50; i++ {
		q.DriverWork = uint64(7 * i) // TX and ISR reads go on
		w.Observe(t0.Add(time.Duration(i)*w.cfg.Period), []Queue{q}, true)
	}
}

// TestNoJudgementAcrossGapsOrPause: time the watchdog did not see (its
// goroutine starved, or the VM paused) does not count towards T.
func TestNoJudgementAcrossGapsOrPause(t *testing.T) {
	q := healthy()
	q.AvailIdx = 12
	w := newTest()
	t0 := time.Unix(1000, 0)
	if got := run(t, w, t0, 500*time.Millisecond, q, true); len(got) != 0 {
		t.Fatal("reported before T")
	}
	// A 10 s gap in our own sampling, then 500 ms more: 1 s of
	// condition in wall time but only 500+500 ms seen, the gap excluded.
	t1 := t0.Add(10 * time.Second)
	if got := run(t, w, t1, 900*time.Millisecond, q, true); len(got) != 0 {
		t.Fatalf("judged across a sampling gap: %v", got[0])
	}
	// Paused: never judged, and the clock restarts after.
	w2 := newTest()
	if got := run(t, w2, t0, 5*testT, q, false); len(got) != 0 {
		t.Fatal("judged a paused VM")
	}
	if got := run(t, w2, t0.Add(5*testT+w2.cfg.Period), 2*testT, q, true); len(got) != 1 {
		t.Fatalf("after resume: %d reports, want 1", len(got))
	}
}

// TestOneReportPerEpisode: a condition that lasts is one report, even if
// the host stalls the watchdog in the middle; with Recover, it is judged
// afresh after the repair.
func TestOneReportPerEpisode(t *testing.T) {
	q := healthy()
	q.InterruptsWanted = 9
	w := newTest()
	t0 := time.Unix(1000, 0)
	n := len(run(t, w, t0, 3*testT, q, true))
	n += len(run(t, w, t0.Add(20*time.Second), 3*testT, q, true)) // after a gap
	if n != 1 {
		t.Fatalf("%d reports of one episode, want 1", n)
	}
	var recovered int
	w = newTest()
	w.cfg.Recover = func(Report) { recovered++ }
	if got := run(t, w, t0, 3*testT-time.Millisecond, q, true); len(got) != 2 || recovered != 2 {
		t.Fatalf("with Recover and no repair effect: %d reports %d recoveries, want 2 each (every T)", len(got), recovered)
	}
}

func TestRunAndStop(t *testing.T) {
	samples := make(chan struct{}, 100)
	w := New(Config{T: 20 * time.Millisecond, Sample: func(dst []Queue) ([]Queue, bool) {
		select {
		case samples <- struct{}{}:
		default:
		}
		return append(dst, healthy()), true
	}})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		<-samples
	}
	w.Stop()
	w.Stop() // idempotent
}
