package virtionet

import (
	"testing"
	"time"
)

// TestRXServeBudget: RX reads at most its budget of frames per turn and
// then returns rxGo (more to do, TX's turn first), even while the backend
// and the ring have plenty: a flood into the guest cannot starve TX, which
// shares the loop. When the ring runs dry it says it waits for chains.
// (Without the budget, one turn read all 16 frames.)
func TestRXServeBudget(t *testing.T) {
	be := (&nullBackend{}).setFrame(hdrLenBase, frame(100, 3))
	d, a, ds := stepRig(t, 0, be)
	r := newRX(d, a, hdrLenBase)
	for i := 0; i < 16; i++ {
		ds[RXQueue].AddChain(nil, []int{hdrLenBase + maxFrame})
	}
	for turn, want := range []uint64{4, 8, 12} {
		w, did, err := r.serve(4)
		if err != nil || w != rxGo || did == 0 {
			t.Fatalf("turn %d: serve = %v, %d, %v; want rxGo after work", turn, w, did, err)
		}
		if got := d.Stats().RX.Frames; got != want {
			t.Fatalf("turn %d: %d frames delivered, want %d", turn, got, want)
		}
	}
	// The last 4 buffers take the last 4 frames; then the ring is empty.
	w, _, err := r.serve(4)
	if err != nil || w != rxWaitChains {
		t.Fatalf("ring empty: serve = %v, %v; want a wait for chains", w, err)
	}
	if d.Stats().RX.Frames != 16 {
		t.Fatalf("%d frames delivered, want 16", d.Stats().RX.Frames)
	}
}

// TestLoopPolls: with Config.PollMax the loop busy-polls before it sleeps
// (virtio.Poller). Every wait for work within PollMax doubles the window
// from 4 us, so after 24 frames it is past a minute, and a TX frame the
// driver publishes then without a kick is sent. Without PollMax the loop
// sleeps on its doorbells and leaves such a frame alone.
func TestLoopPolls(t *testing.T) {
	for _, max := range []time.Duration{time.Hour, 0} {
		e := newEnvConfig(t, 0, false, nil, Config{MAC: testMAC, PollMax: max})
		h := make([]byte, e.hdr)
		for i := 0; i < 24; i++ {
			e.tx.AddChain([][]byte{h, frame(60, uint32(i))}, nil)
			e.tx.KickIfNeeded()
			e.waitUsed(e.tx, uint16(i+1))
		}
		e.tx.AddChain([][]byte{h, frame(60, 24)}, nil) // no kick
		served := e.tx.WaitUsedIdx(25, 2*time.Second)
		polled := e.tx.Queue.Watch().Polled.Load()
		if max > 0 && (!served || polled == 0 || len(e.be.written()) != 25) {
			t.Fatalf("PollMax %v: frame without a kick served %v, polled %d, %d frames sent; want served by polling",
				max, served, polled, len(e.be.written()))
		}
		if max == 0 && (served || polled != 0) {
			t.Fatalf("PollMax 0: frame without a kick served %v, polled %d; want neither", served, polled)
		}
	}
}

// TestLoopSpinsOnlyAfterSend: a loop whose guest has only received since it
// last slept does not spin, however wide its window has grown: 24 frames
// into the guest (each wait within PollMax doubles the window) and then a
// TX frame published without a kick stays unsent, because the loop sleeps
// on its doorbells. Without that rule the spin finds and sends it; in a
// flood into the guest the spinning thread only took CPU from the guest
// and the sender (see loop.spin).
func TestLoopSpinsOnlyAfterSend(t *testing.T) {
	e := newEnvConfig(t, 0, false, nil, Config{MAC: testMAC, PollMax: time.Hour})
	for i := 0; i < 30; i++ {
		e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
	}
	e.rx.KickIfNeeded()
	for i := 0; i < 24; i++ {
		e.be.inject(append(make([]byte, hdrLenBase), frame(60, uint32(i))...))
		e.waitUsed(e.rx, uint16(i+1))
	}
	e.tx.AddChain([][]byte{make([]byte, e.hdr), frame(60, 99)}, nil) // no kick
	if e.tx.WaitUsedIdx(1, 300*time.Millisecond) {
		t.Fatalf("a TX frame published without a kick was sent (polled %d) by a loop whose guest had only received",
			e.tx.Queue.Watch().Polled.Load())
	}
	// The kick it needs still works.
	e.tx.Kick()
	e.waitUsed(e.tx, 1)
}
