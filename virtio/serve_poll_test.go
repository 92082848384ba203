package virtio_test

import (
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// waitFor polls cond until it holds or 5 s pass (a hang guard, not a
// timing assertion).
func waitFor(cond func() bool) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Microsecond)
	}
	return cond()
}

// TestServePolls: a Server with a poll window watches the ring with kicks
// off after it runs out of work, so a chain the driver publishes then is
// served without a kick, and counted as polled. Without the poll the
// Server sleeps on its doorbell and the chain is never used.
func TestServePolls(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	p := &virtio.Poller{Max: time.Hour}
	virtio.SetPollWindow(p, time.Hour)
	var cnt virtio.NotifyCounters
	srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(),
		Intr: virtiotest.NewRecordingInterrupt(), Counters: &cnt, Poll: p}
	halt := serve(t, srv, echo)
	// The first pass finds the ring empty and starts polling: kicks off.
	if !waitFor(func() bool { return d.UsedFlags()&virtio.UsedFlagNoNotify != 0 }) {
		t.Fatal("the Server never turned kicks off to poll")
	}
	for i := 1; i <= 3; i++ {
		// Let the Server settle into its hour-long window (an ordering
		// wait, not a timing assertion: a chain published earlier is
		// found by the pass instead, and counted there).
		time.Sleep(20 * time.Millisecond)
		d.AddChain(nil, []int{1}) // and no kick
		if !d.WaitUsedIdx(uint16(i), 5*time.Second) {
			t.Fatalf("chain %d published without a kick was never used", i)
		}
	}
	if err := halt(); err != nil {
		t.Fatal(err)
	}
	if got := d.Queue.Watch().Polled.Load(); got == 0 {
		t.Error("polled 0: no chain was found by polling")
	}
	if got := cnt.Kicks.Load(); got != 0 {
		t.Errorf("kicks %d, want 0", got)
	}
}

// TestServePollEnds: when the window closes with no work, the Server turns
// kicks back on (with the re-check) and sleeps; a kicked chain is then
// served. Leaving kicks off after the window would hang the queue.
func TestServePollEnds(t *testing.T) {
	for _, features := range []uint64{0, eventIdx} {
		d := virtiotest.New(t, memSize, 16)
		d.SetFeatures(features)
		p := &virtio.Poller{Max: time.Hour}
		virtio.SetPollWindow(p, time.Millisecond)
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(),
			Intr: virtiotest.NewRecordingInterrupt(), Poll: p}
		halt := serve(t, srv, echo)
		if !d.WaitSleeping(5 * time.Second) {
			t.Fatalf("features %#x: the Server never slept after its window", features)
		}
		d.AddChain(nil, []int{1})
		if !d.NeedsKick() {
			t.Fatalf("features %#x: asleep with kicks off", features)
		}
		d.Kick()
		if !d.WaitUsedIdx(1, 5*time.Second) {
			t.Fatalf("features %#x: kicked chain never used", features)
		}
		if err := halt(); err != nil {
			t.Fatal(err)
		}
	}
}
