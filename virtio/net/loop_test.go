package virtionet

import (
	"testing"
	"time"

	"github.com/govm/govm/virtio"
)

// TestRXServeBudget: RX reads at most its budget of frames per turn and
// then says More (TX's turn first), even while the backend
// and the ring have plenty: a flood into the guest cannot starve TX, which
// shares the loop. When the ring runs dry it says it waits for chains.
// (Without the budget, one turn read all 16 frames.)
func TestRXServeBudget(t *testing.T) {
	be := (&nullBackend{}).setFrame(hdrLenBase, frame(100, 3))
	d, a, ds := stepRig(t, 0, be)
	r := newRX(d, a, hdrLenBase, make(chan struct{}))
	for i := 0; i < 16; i++ {
		ds[RXQueue].AddChain(nil, []int{hdrLenBase + maxFrame})
	}
	for turn, want := range []uint64{4, 8, 12} {
		did, w, err := r.turn(4)
		if err != nil || w.Kind != virtio.More || did == 0 {
			t.Fatalf("turn %d: turn = %v, %d, %v; want More after work", turn, w, did, err)
		}
		if got := d.Stats().RX.Frames; got != want {
			t.Fatalf("turn %d: %d frames delivered, want %d", turn, got, want)
		}
	}
	// The last 4 buffers take the last 4 frames; then the ring is empty.
	_, w, err := r.turn(4)
	if err != nil || w.Kind != virtio.WaitRing {
		t.Fatalf("ring empty: turn = %v, %v; want a wait for chains", w, err)
	}
	if d.Stats().RX.Frames != 16 {
		t.Fatalf("%d frames delivered, want 16", d.Stats().RX.Frames)
	}
}

// TestLoopPolls: with Config.PollMax the loop busy-polls before it sleeps
// (virtio.Loop, virtio.Poller), with TX's kicks off. A driver that sends a frame as soon
// as the one before is used, and kicks only when the device asks
// (KickIfNeeded), then finds kicks off for some of them: the loop found
// them by polling. Without PollMax the loop sleeps on its doorbells after
// each frame, so every frame needs its kick and none is polled, and a frame
// published without one while it sleeps stays unsent.
func TestLoopPolls(t *testing.T) {
	for _, max := range []time.Duration{time.Hour, 0} {
		e := newEnvConfig(t, 0, false, nil, Config{MAC: testMAC, PollMax: max})
		h := make([]byte, e.hdr)
		for i := 0; i < 64; i++ {
			e.tx.AddChain([][]byte{h, frame(60, uint32(i))}, nil)
			e.tx.KickIfNeeded()
			e.waitUsed(e.tx, uint16(i+1))
		}
		polled := e.tx.Queue.Watch().Polled.Load()
		if len(e.be.written()) != 64 {
			t.Fatalf("PollMax %v: %d frames sent, want 64", max, len(e.be.written()))
		}
		if max > 0 && polled == 0 {
			t.Fatalf("PollMax %v: no frame found by polling", max)
		}
		if max == 0 {
			if polled != 0 {
				t.Fatalf("PollMax 0: polled %d, want 0", polled)
			}
			// TX's Sleeping: the loop sleeps on its doorbells.
			if !e.tx.WaitSleeping(5 * time.Second) {
				t.Fatal("PollMax 0: the loop never slept")
			}
			e.tx.AddChain([][]byte{h, frame(60, 64)}, nil) // no kick
			if e.tx.WaitUsedIdx(65, 300*time.Millisecond) {
				t.Fatal("PollMax 0: a frame published without a kick to a sleeping loop was sent")
			}
		}
	}
}

// TestLoopSpinsOnlyAfterSend: a loop whose guest has only received since it
// last slept does not spin, however its window has grown: after 24 frames
// into the guest (each wait within PollMax moves the window up), a TX frame
// published right after the last one, and kicked only if the device asks
// (KickIfNeeded), is sent on its kick, not found by polling. Without that
// rule the loop spins after each frame it delivers, with TX's kicks off, and
// finds it; in a flood into the guest the spinning thread only took CPU
// from the guest and the sender (see virtio.Source.Prompts).
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
	e.tx.AddChain([][]byte{make([]byte, e.hdr), frame(60, 99)}, nil)
	e.tx.KickIfNeeded()
	e.waitUsed(e.tx, 1)
	if polled := e.tx.Queue.Watch().Polled.Load(); polled != 0 {
		t.Fatalf("polled %d: a loop whose guest had only received was spinning", polled)
	}
}
