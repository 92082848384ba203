package ratelog

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestBurstThenOnePerInterval(t *testing.T) {
	var lines []string
	l := New(func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }, 3, time.Second)
	now := time.Unix(1000, 0)
	l.Now = func() time.Time { return now }
	for i := range 100 {
		l.Logf("error %d", i)
	}
	if len(lines) != 3 || l.Printed() != 3 || l.Suppressed() != 97 {
		t.Fatalf("after 100 at once: %d lines, printed %d, suppressed %d", len(lines), l.Printed(), l.Suppressed())
	}
	now = now.Add(1500 * time.Millisecond) // one token back, half a token kept
	if !l.Logf("error %d", 100) || l.Logf("error %d", 101) {
		t.Fatal("one interval later: want exactly one more line")
	}
	if want := "error 100 (97 similar lines suppressed)"; lines[3] != want {
		t.Fatalf("line %q, want %q", lines[3], want)
	}
	now = now.Add(500 * time.Millisecond) // the half token completes
	if !l.Logf("x") || !strings.Contains(lines[4], "(1 similar lines suppressed)") {
		t.Fatalf("refill carried no fraction: %q", lines)
	}
	now = now.Add(time.Hour) // refill never exceeds the burst
	n := 0
	for range 10 {
		if l.Logf("y") {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("after an hour: %d lines, want the burst of 3", n)
	}
}

func TestDefaults(t *testing.T) {
	l := New(nil, 0, 0)
	if l.burst != DefaultBurst || l.every != DefaultEvery {
		t.Fatalf("burst %d every %v", l.burst, l.every)
	}
	for range 2 * DefaultBurst {
		l.Logf("z")
	}
	if l.Printed() != DefaultBurst || l.Suppressed() != DefaultBurst {
		t.Fatalf("printed %d suppressed %d", l.Printed(), l.Suppressed())
	}
}
