// Package ratelog limits how many lines a source the host does not control
// (a guest driver, a failing disk) can put into govm's log. A hostile guest
// can make the same error thousands of times a second (reset, break the
// queue, reset again); each line costs the host disk space and hides the
// lines that matter, so after a burst only one line per interval gets
// through, and the number of lines dropped meanwhile is counted (for the
// stats) and said in the next line that is printed.
package ratelog

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for New: ten lines at once, then one a minute. A driver that
// breaks ten times in a row is already well described by ten lines.
const (
	DefaultBurst = 10
	DefaultEvery = time.Minute
)

// Limiter is a token bucket over log lines: Burst lines may be printed at
// once, and one more token comes back every Every. The zero value is not
// usable: build it with New.
type Limiter struct {
	logf  func(format string, args ...any)
	burst int
	every time.Duration
	// Now is the clock; tests replace it before the first Logf.
	Now func() time.Time

	mu      sync.Mutex
	tokens  int
	last    time.Time // when tokens were last refilled
	pending uint64    // dropped since the last printed line
	dropped atomic.Uint64
	printed atomic.Uint64
	started bool
}

// New returns a limiter printing through logf (nil discards). burst < 1
// and every <= 0 take the defaults.
func New(logf func(format string, args ...any), burst int, every time.Duration) *Limiter {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if burst < 1 {
		burst = DefaultBurst
	}
	if every <= 0 {
		every = DefaultEvery
	}
	return &Limiter{logf: logf, burst: burst, every: every, Now: time.Now}
}

// Logf prints one line if the bucket has a token, and otherwise counts it
// as suppressed. A printed line that follows suppressed ones says how many
// were left out. It reports whether the line was printed.
func (l *Limiter) Logf(format string, args ...any) bool {
	l.mu.Lock()
	now := l.Now()
	if !l.started {
		l.started, l.tokens, l.last = true, l.burst, now
	}
	if n := int(now.Sub(l.last) / l.every); n > 0 {
		l.tokens = min(l.burst, l.tokens+n)
		l.last = l.last.Add(time.Duration(n) * l.every)
	}
	if l.tokens == 0 {
		l.pending++
		l.mu.Unlock()
		l.dropped.Add(1)
		return false
	}
	l.tokens--
	pending := l.pending
	l.pending = 0
	l.mu.Unlock()
	l.printed.Add(1)
	msg := fmt.Sprintf(format, args...)
	if pending > 0 {
		msg = fmt.Sprintf("%s (%d similar lines suppressed)", msg, pending)
	}
	l.logf("%s", msg)
	return true
}

// Suppressed returns how many lines were dropped in all.
func (l *Limiter) Suppressed() uint64 { return l.dropped.Load() }

// Printed returns how many lines were printed in all.
func (l *Limiter) Printed() uint64 { return l.printed.Load() }
