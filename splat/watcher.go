package splat

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// Phase names a boot milestone seen on the console; the names are the keys
// of the verdict's phases_ms.
type Phase string

// The milestones, in boot order.
const (
	// FirstByte: the first console output. The UART hands output over a
	// line at a time (or after a 10 ms pause), so this is at most one
	// line or 10 ms late.
	FirstByte Phase = "first_console_byte"
	// LinuxVersion: init/main.c start_kernel() prints linux_banner
	// ("Linux version ...") first of all.
	LinuxVersion Phase = "linux_version"
	// Init: init/main.c run_init_process() "Run %s as init process", or
	// free_initmem()'s "Freeing unused kernel image ... memory", whichever
	// comes first: user space is about to start.
	Init Phase = "init"
	// Ready: the line containing Config.ReadyMarker.
	Ready Phase = "ready"
)

// Bounds on what a hostile guest can make the watcher keep.
const (
	maxLine   = 4096 // longer lines are classified by their first maxLine bytes
	maxSplats = 256  // splats kept in full; later ones are only counted
)

// Splat is one recognised splat.
type Splat struct {
	Kind Kind `json:"kind"`
	// Line is the splat's first line without the printk prefix and
	// without the line ending (truncated to 4 KiB).
	Line string `json:"line"`
	// TimeMS is when govm saw the line, in ms since Config.Start.
	TimeMS float64 `json:"time_ms"`
}

// Config says what to look for and whom to tell.
type Config struct {
	// Start is the origin of the times reported (time.Now() if zero).
	Start time.Time
	// ReadyMarker, if not empty, is a string whose first appearance on
	// the console sets the Ready phase; it may be in a line that has no
	// newline yet (a prompt).
	ReadyMarker string
	// OnSplat, if set, is called for each splat, on the goroutine calling
	// Write and with no lock held. It must not block for long: Write is on
	// the guest's console path.
	OnSplat func(Splat)
	// now is time.Now, replaceable in tests.
	now func() time.Time
}

// Watcher is an io.Writer that watches a console byte stream. Lines end
// with "\n"; a "\r" before it (or several) is dropped, so "\r\n" and "\n"
// consoles read alike. Safe for concurrent use.
type Watcher struct {
	cfg    Config
	marker []byte

	mu       sync.Mutex
	line     []byte // the current line so far (up to maxLine bytes)
	splats   []Splat
	counts   map[Kind]int
	phases   map[Phase]float64
	bytes    uint64
	overflow bool // the current line is longer than maxLine
}

// New returns a Watcher for cfg.
func New(cfg Config) *Watcher {
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.Start.IsZero() {
		cfg.Start = cfg.now()
	}
	return &Watcher{
		cfg:    cfg,
		marker: []byte(cfg.ReadyMarker),
		line:   make([]byte, 0, 256),
		counts: make(map[Kind]int),
		phases: make(map[Phase]float64),
	}
}

// Write implements io.Writer; it never fails.
func (w *Watcher) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var found []Splat
	w.mu.Lock()
	if w.bytes == 0 {
		w.phases[FirstByte] = w.msSince()
	}
	w.bytes += uint64(len(p))
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.appendLine(rest)
			break
		}
		w.appendLine(rest[:i])
		if s, ok := w.endLine(); ok {
			found = append(found, s)
		}
		rest = rest[i+1:]
	}
	// A marker in a line without its newline yet (a shell prompt).
	if len(w.marker) > 0 && len(w.line) > 0 {
		w.checkMarker(w.line)
	}
	w.mu.Unlock()
	if w.cfg.OnSplat != nil {
		for _, s := range found {
			w.cfg.OnSplat(s)
		}
	}
	return len(p), nil
}

func (w *Watcher) appendLine(b []byte) {
	if room := maxLine - len(w.line); len(b) > room {
		b = b[:room]
		w.overflow = true
	}
	w.line = append(w.line, b...)
}

// endLine classifies the finished line and starts the next one.
func (w *Watcher) endLine() (Splat, bool) {
	line := bytes.TrimRight(w.line, "\r")
	defer func() { w.line, w.overflow = w.line[:0], false }()
	if len(w.marker) > 0 {
		w.checkMarker(line)
	}
	if len(line) == 0 {
		return Splat{}, false
	}
	s := string(line)
	msg := StripPrefix(s)
	if _, ok := w.phases[LinuxVersion]; !ok && strings.HasPrefix(msg, "Linux version ") {
		w.phases[LinuxVersion] = w.msSince()
	}
	if _, ok := w.phases[Init]; !ok && isInitLine(msg) {
		w.phases[Init] = w.msSince()
	}
	kind, ok := Classify(s)
	if !ok {
		return Splat{}, false
	}
	sp := Splat{Kind: kind, Line: msg, TimeMS: w.msSince()}
	w.counts[kind]++
	if len(w.splats) < maxSplats {
		w.splats = append(w.splats, sp)
	}
	return sp, true
}

func (w *Watcher) checkMarker(line []byte) {
	if _, ok := w.phases[Ready]; !ok && bytes.Contains(line, w.marker) {
		w.phases[Ready] = w.msSince()
	}
}

func isInitLine(msg string) bool {
	return strings.HasPrefix(msg, "Run /") && strings.Contains(msg, " as init process") ||
		strings.HasPrefix(msg, "Freeing unused kernel")
}

// msSince is the time since Start in ms, to the microsecond.
func (w *Watcher) msSince() float64 {
	return float64(w.cfg.now().Sub(w.cfg.Start).Microseconds()) / 1000
}

// Splats returns the splats seen so far (the first 256 of them).
func (w *Watcher) Splats() []Splat {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Splat(nil), w.splats...)
}

// Count returns how many splats of kind k were seen (all of them, also
// beyond the 256 kept).
func (w *Watcher) Count(k Kind) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[k]
}

// First returns the first splat of kind k.
func (w *Watcher) First(k Kind) (Splat, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.splats {
		if s.Kind == k {
			return s, true
		}
	}
	return Splat{}, false
}

// Phases returns the milestones seen so far, in ms since Start.
func (w *Watcher) Phases() map[Phase]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[Phase]float64, len(w.phases))
	for k, v := range w.phases {
		out[k] = v
	}
	return out
}

// Bytes returns how many console bytes were written.
func (w *Watcher) Bytes() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}
