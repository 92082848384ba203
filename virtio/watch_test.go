package virtio_test

import (
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// TestWatchCounters: the serve loop publishes, for govm stat and the
// watchdog, why it did not interrupt (NO_INTERRUPT without EVENT_IDX,
// used_event not crossed with it), each interrupt it wanted, and that it
// sleeps for a kick with the avail idx it had consumed.
func TestWatchCounters(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features uint64
		suppress func(d *virtiotest.Driver)
		noIntr   bool // which counter the suppression lands in
	}{
		{"no_interrupt", 0, func(d *virtiotest.Driver) { d.SetAvailFlags(1) }, true},
		{"event_idx", eventIdx, func(d *virtiotest.Driver) { d.SetUsedEvent(100) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := virtiotest.New(t, memSize, 16)
			d.SetFeatures(tc.features)
			intr := virtiotest.NewRecordingInterrupt()
			w := d.Queue.Watch()
			d.AddChain(nil, []int{1})
			srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(), Intr: intr}
			halt := serve(t, srv, echo)
			if !d.WaitUsedIdx(1, 5*time.Second) {
				t.Fatal("first chain not used")
			}
			waitTrue(t, "the device asleep", w.Sleeping.Load)
			if w.InterruptsWanted.Load() != 1 || w.SeenAvail.Load() != 1 {
				t.Fatalf("after one interrupting chain: wanted %d seen avail %d, want 1 and 1", w.InterruptsWanted.Load(), w.SeenAvail.Load())
			}
			tc.suppress(d)
			d.AddChain(nil, []int{1})
			d.Kick()
			if !d.WaitUsedIdx(2, 5*time.Second) {
				t.Fatal("second chain not used")
			}
			waitTrue(t, "the device asleep again", w.Sleeping.Load)
			if err := halt(); err != nil {
				t.Fatal(err)
			}
			noIntr, evIdx := w.SuppressedNoInterrupt.Load(), w.SuppressedEventIdx.Load()
			if tc.noIntr && (noIntr != 1 || evIdx != 0) || !tc.noIntr && (noIntr != 0 || evIdx != 1) {
				t.Fatalf("suppressed no_interrupt %d event_idx %d", noIntr, evIdx)
			}
			if w.Chains.Load() != 2 {
				t.Fatalf("used %d chains, counted %d", 2, w.Chains.Load())
			}
			if w.InterruptsWanted.Load() != 1 || w.SeenAvail.Load() != 2 || w.Sleeping.Load() {
				t.Fatalf("wanted %d seen %d sleeping %v; want 1, 2, false after stop", w.InterruptsWanted.Load(), w.SeenAvail.Load(), w.Sleeping.Load())
			}
			// The counters belong to the queue and survive its reset.
			d.Queue.Reset()
			if d.Queue.Watch() != w {
				t.Fatal("Reset replaced the watch counters")
			}
		})
	}
}

func waitTrue(t *testing.T, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !f(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
