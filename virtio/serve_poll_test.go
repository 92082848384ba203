package virtio_test

import (
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// pollWindow gives a Loop a poll window of d (Max an hour), as past waits
// would have.
func pollWindow(d time.Duration) func(*virtio.Loop) {
	return func(l *virtio.Loop) {
		l.Poll.Max = time.Hour
		virtio.SetPollWindow(&l.Poll, d)
	}
}

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

// TestServePolls: a Loop with a poll window watches the ring with kicks
// off after it runs out of work, so a chain the driver publishes then is
// served without a kick, and counted as polled. Without the poll the
// Loop sleeps on its doorbell and the chain is never used.
func TestServePolls(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(),
		Intr: virtiotest.NewRecordingInterrupt()}
	// The first chain, published before the Loop starts, is served by
	// its first turn; then the Loop finds the ring empty and polls, with
	// kicks off.
	d.AddChain(nil, []int{1})
	halt := serve(t, srv, echo, pollWindow(time.Hour))
	if !waitFor(func() bool { return d.UsedFlags()&virtio.UsedFlagNoNotify != 0 }) {
		t.Fatal("the Loop never turned kicks off to poll")
	}
	if !d.WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("the first chain was never used")
	}
	for i := 2; i <= 4; i++ {
		// Let the Loop settle into its hour-long window (an ordering
		// wait, not a timing assertion: a chain published earlier is
		// found by a turn instead, and not counted).
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
	if got := d.Queue.Watch().KicksTaken.Load(); got != 0 {
		t.Errorf("kicks %d, want 0", got)
	}
}

// TestServePollEnds: when the window closes with no work, the Loop turns
// kicks back on (with the re-check) and sleeps; a kicked chain is then
// served. Leaving kicks off after the window would hang the queue.
func TestServePollEnds(t *testing.T) {
	for _, features := range []uint64{0, eventIdx} {
		d := virtiotest.New(t, memSize, 16)
		d.SetFeatures(features)
		srv := &virtio.Server{Mem: d.Mem, Queue: d.Queue, Bell: d.Bell(),
			Intr: virtiotest.NewRecordingInterrupt()}
		// One chain served: the Loop polls after work the driver
		// answers (Source.Prompts).
		d.AddChain(nil, []int{1})
		halt := serve(t, srv, echo, pollWindow(time.Millisecond))
		if !d.WaitUsedIdx(1, 5*time.Second) {
			t.Fatalf("features %#x: the first chain was never used", features)
		}
		if !d.WaitSleeping(5 * time.Second) {
			t.Fatalf("features %#x: the Loop never slept after its window", features)
		}
		d.AddChain(nil, []int{1})
		if !d.NeedsKick() {
			t.Fatalf("features %#x: asleep with kicks off", features)
		}
		d.Kick()
		if !d.WaitUsedIdx(2, 5*time.Second) {
			t.Fatalf("features %#x: kicked chain never used", features)
		}
		if err := halt(); err != nil {
			t.Fatal(err)
		}
	}
}
