// Package bench compares govm with QEMU on identical guests: boot latency to the
// first serial byte and host memory now; block IOPS and network packet rates later.
//
// This file holds the helpers every benchmark shares: start a VMM process with its
// serial console on a pipe, timestamp the first byte, wait for a line with a timeout,
// kill by PID when the guest hangs, decode the debug-exit status and parse the guest
// test kernel's "RESULT name pass|fail k=v..." protocol (see docs in guest/).
package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrTimeout means the VMM did not produce what was waited for in time.
	ErrTimeout = errors.New("bench: timeout")
	// ErrExited means the VMM exited before producing what was waited for.
	ErrExited = errors.New("bench: vmm exited")
	// ErrBadResult means a line is not a well-formed RESULT or SUMMARY line.
	ErrBadResult = errors.New("bench: malformed result line")
)

// Proc is a running VMM whose stdout carries the guest's serial console.
type Proc struct {
	// Cmd is the started command; Cmd.Process.Pid identifies the VMM.
	Cmd *exec.Cmd
	// Start is taken immediately before fork/exec, so start-up latencies include
	// the VMM's own process creation, dynamic linking and initialisation.
	Start time.Time

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced whenever out grows or the VMM exits
	out       bytes.Buffer  // everything read from stdout (the serial console)
	firstByte time.Time     // when the first stdout byte arrived; zero until then
	firstMem  []Mapping     // /proc/PID/smaps sampled at the first byte; nil if unavailable
	exitAt    time.Time     // when the VMM was reaped
	lineAt    []time.Time   // lineAt[i]: when the i-th '\n' arrived (end of line i)
	stderr    bytes.Buffer
	exited    bool
	waitErr   error
	state     *os.ProcessState
}

// Start runs name with args. Stdin is /dev/null so a VMM never reads the
// benchmark's terminal; stdout is read by a goroutine that timestamps its first byte.
func Start(name string, args ...string) (*Proc, error) {
	p := &Proc{changed: make(chan struct{})}
	p.Cmd = exec.Command(name, args...)
	p.Cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: stdout pipe for %s: %w", name, err)
	}
	p.Start = time.Now()
	if err := p.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", name, err)
	}
	go p.readLoop(stdout)
	return p, nil
}

// lockedWriter lets exec's stderr copier share the Proc mutex.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *Proc) readLoop(r io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			now := time.Now()
			var maps []Mapping
			if p.firstByteZero() {
				// Sample at once, outside the lock: the guest may exit at any
				// moment, and only a live process has mappings to read.
				maps, _ = ReadSmaps(p.Cmd.Process.Pid)
			}
			p.mu.Lock()
			if p.firstByte.IsZero() {
				p.firstByte = now
				p.firstMem = maps
			}
			p.out.Write(buf[:n])
			for range bytes.Count(buf[:n], []byte{'\n'}) {
				p.lineAt = append(p.lineAt, now)
			}
			p.notifyLocked()
			p.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	// stdout is closed: the VMM is gone (or closed it). Reap it to record status.
	err := p.Cmd.Wait()
	now := time.Now()
	p.mu.Lock()
	p.exited, p.waitErr, p.state, p.exitAt = true, err, p.Cmd.ProcessState, now
	p.notifyLocked()
	p.mu.Unlock()
}

func (p *Proc) firstByteZero() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstByte.IsZero()
}

func (p *Proc) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitFor blocks until cond (called with p.mu held) reports true, the VMM exits,
// or timeout passes. On timeout the VMM is killed so nothing outlives a benchmark.
func (p *Proc) waitFor(what string, timeout time.Duration, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		ok, exited, ch := cond(), p.exited, p.changed
		p.mu.Unlock()
		if ok {
			return nil
		}
		if exited {
			return fmt.Errorf("%w before %s (%s)", ErrExited, what, p.statusString())
		}
		select {
		case <-ch:
		case <-deadline.C:
			p.Kill()
			return fmt.Errorf("%w after %v waiting for %s", ErrTimeout, timeout, what)
		}
	}
}

// FirstByte waits for the first serial byte and returns its delay since Start.
func (p *Proc) FirstByte(timeout time.Duration) (time.Duration, error) {
	err := p.waitFor("first serial byte", timeout, func() bool { return !p.firstByte.IsZero() })
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstByte.Sub(p.Start), nil
}

// FirstByteMem returns the VMM's mappings sampled when the first serial byte
// arrived (nil if the process was already gone). Pass them to SplitRSS.
func (p *Proc) FirstByteMem() []Mapping {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstMem
}

// ExitAfter returns how long after Start the VMM was reaped (zero while it runs).
func (p *Proc) ExitAfter() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitAt.IsZero() {
		return 0
	}
	return p.exitAt.Sub(p.Start)
}

// WaitLine waits for a complete serial line starting with prefix and returns it
// without its line ending. Carriage returns (QEMU and 8250 consoles emit CRLF) are
// dropped.
func (p *Proc) WaitLine(prefix string, timeout time.Duration) (string, error) {
	var found string
	err := p.waitFor(fmt.Sprintf("line %q", prefix), timeout, func() bool {
		var ok bool
		found, _, ok = p.lineLocked(prefix)
		return ok
	})
	return found, err
}

// LineAt returns the first complete line starting with prefix and how long after
// Start its last byte arrived, so a benchmark can split a run into phases (guest
// done vs. VMM teardown) without the guest having a clock the host trusts.
func (p *Proc) LineAt(prefix string) (line string, after time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line, at, ok := p.lineLocked(prefix)
	if !ok {
		return "", 0, false
	}
	return line, at.Sub(p.Start), true
}

func (p *Proc) lineLocked(prefix string) (string, time.Time, bool) {
	for i, l := range splitLines(p.out.String()) {
		if strings.HasPrefix(l, prefix) {
			return l, p.lineAt[i], true
		}
	}
	return "", time.Time{}, false
}

// Wait waits for the VMM to exit and returns its exit status (-1 if killed by a
// signal). On timeout the VMM is killed by PID.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	if err := p.waitFor("exit", timeout, func() bool { return p.exited }); err != nil {
		return -1, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.ExitCode(), nil
}

// MaxRSSKB returns the exited VMM's peak resident set in KiB (wait4's ru_maxrss),
// or -1 while it runs. This is the kernel's own high-water mark, so it does not
// depend on sampling at the right moment.
func (p *Proc) MaxRSSKB() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return -1
	}
	if ru, ok := p.state.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return -1
}

// Kill sends SIGKILL to the VMM's PID (never to a process name or group: other
// engineers' VMMs run on the same host). A VMM that already exited is left alone.
func (p *Proc) Kill() {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if !exited && p.Cmd.Process != nil {
		_ = p.Cmd.Process.Kill() // os.Process.Kill is kill(pid, SIGKILL); it may race with exit
	}
}

// Output returns the serial output so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Stderr returns what the VMM wrote to stderr so far.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *Proc) statusString() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return "running"
	}
	s := p.state.String()
	if e := strings.TrimSpace(p.stderr.String()); e != "" {
		s += "; stderr: " + lastLine(e)
	}
	return s
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// splitLines returns the complete lines of s (a trailing partial line is omitted,
// since the guest may still be writing it), with any '\r' removed.
func splitLines(s string) []string {
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return nil
	}
	lines := strings.Split(s[:i], "\n")
	for j, l := range lines {
		lines[j] = strings.ReplaceAll(l, "\r", "")
	}
	return lines
}

// DebugExit decodes a VMM exit status produced by the debug-exit port (0x501):
// both govm and QEMU's isa-debug-exit exit with (v<<1)|1 after the guest writes v.
// ok is false for even statuses, which the guest cannot produce that way.
func DebugExit(status int) (guestCode int, ok bool) {
	if status < 0 || status&1 == 0 {
		return 0, false
	}
	return status >> 1, true
}

// Median returns the median of xs (the mean of the middle two for an even count);
// zero for none. The median, not the mean, because on a shared 2-core host one
// descheduled run would otherwise dominate.
func Median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
