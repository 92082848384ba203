package virtionet

import (
	"testing"
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
