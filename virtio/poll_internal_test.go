package virtio

import (
	"testing"
	"time"
)

// TestPollerAdapt: the window grows while waits fall within Max, holds
// while polling finds the work in time, shrinks when waits run past Max,
// and never exceeds Max or moves off 0 when Max is 0. The waits are given,
// not timed.
func TestPollerAdapt(t *testing.T) {
	us := time.Microsecond
	p := &Poller{Max: 256 * us}
	if p.Window() != 0 {
		t.Fatalf("new Poller window %v, want 0 (no evidence yet that polling pays)", p.Window())
	}
	steps := []struct {
		wait, want time.Duration
		why        string
	}{
		{150 * us, pollMin, "a wait within Max opens the window"},
		{150 * us, 2 * pollMin, "doubles"},
		{150 * us, 4 * pollMin, "doubles"},
		{150 * us, 8 * pollMin, "doubles"},
		{150 * us, 16 * pollMin, "doubles"},
		{150 * us, 32 * pollMin, "doubles (128us)"},
		{150 * us, 256 * us, "capped at Max"},
		{150 * us, 256 * us, "found within the window: holds"},
		{3 * us, 256 * us, "found within the window: holds"},
		{256 * us, 256 * us, "at Max: holds"},
		{time.Millisecond, 128 * us, "past Max: halves"},
		{time.Millisecond, 64 * us, "halves"},
		{100 * us, 128 * us, "within Max again: doubles"},
	}
	for i, s := range steps {
		p.adapt(s.wait)
		if p.Window() != s.want {
			t.Fatalf("step %d (wait %v): window %v, want %v: %s", i, s.wait, p.Window(), s.want, s.why)
		}
	}
	for i := 0; i < 10; i++ {
		p.adapt(time.Second)
	}
	if p.Window() != 0 {
		t.Fatalf("after long waits window %v, want 0 (below pollMin polling stops)", p.Window())
	}
	off := &Poller{}
	for i := 0; i < 10; i++ {
		off.adapt(time.Microsecond)
	}
	if off.Window() != 0 {
		t.Fatalf("Max 0: window %v, want 0", off.Window())
	}
}

// TestPollerBegin: Begin returns the window, and Spinning ends once it
// has passed.
func TestPollerBegin(t *testing.T) {
	p := &Poller{Max: time.Second}
	if w := p.Begin(); w != 0 {
		t.Fatalf("Begin = %v, want 0", w)
	}
	if p.Spinning() {
		t.Fatal("Spinning with a 0 window")
	}
	p.window = time.Millisecond
	if w := p.Begin(); w != time.Millisecond {
		t.Fatalf("Begin = %v, want 1ms", w)
	}
	for p.Spinning() { // ends: the test would hang otherwise
	}
	if since := time.Since(p.start); since < time.Millisecond {
		t.Fatalf("Spinning ended after %v, before the 1ms window", since)
	}
}
