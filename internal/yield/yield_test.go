package yield

import (
	"testing"
	"time"
)

// TestBeforeBlock: the first block yields, then at most one yield per
// Interval, however often the goroutine blocks.
func TestBeforeBlock(t *testing.T) {
	var clock int64 = 1 << 40
	yields := 0
	origNow, origSched := now, gosched
	now = func() int64 { return clock }
	gosched = func() { yields++ }
	defer func() { now, gosched = origNow, origSched }()

	var p Point
	p.BeforeBlock()
	if yields != 1 {
		t.Fatalf("first block: %d yields, want 1", yields)
	}
	for i := 0; i < 100; i++ {
		clock += int64(Interval / 100)
		if i < 99 {
			p.BeforeBlock()
		}
	}
	if yields != 1 {
		t.Fatalf("blocks within an interval: %d yields, want 1", yields)
	}
	p.BeforeBlock() // Interval after the first
	if yields != 2 {
		t.Fatalf("a block an interval later: %d yields, want 2", yields)
	}
	clock += int64(10 * time.Second)
	p.BeforeBlock()
	if yields != 3 {
		t.Fatalf("after a long wait: %d yields, want 3", yields)
	}

	// Every replaces Interval.
	yields = 0
	q := Point{Every: 4 * Interval}
	q.BeforeBlock()
	clock += int64(2 * Interval)
	q.BeforeBlock()
	if yields != 1 {
		t.Fatalf("Every 4 intervals, 2 intervals in: %d yields, want 1", yields)
	}
	clock += int64(2 * Interval)
	q.BeforeBlock()
	if yields != 2 {
		t.Fatalf("Every 4 intervals, 4 intervals in: %d yields, want 2", yields)
	}
}

// TestBeforeBlockReal runs the real scheduler path once (no fake): it must
// return.
func TestBeforeBlockReal(t *testing.T) {
	var p Point
	p.BeforeBlock()
	p.BeforeBlock()
}
