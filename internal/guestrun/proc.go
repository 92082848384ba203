package guestrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors from waiting on a Proc.
var (
	// ErrTimeout means the VMM did not produce what was waited for in time; it has
	// been killed.
	ErrTimeout = errors.New("guestrun: timeout")
	// ErrExited means the VMM exited before producing what was waited for.
	ErrExited = errors.New("guestrun: vmm exited")
	// ErrEmptyCommand means Start was given no argv.
	ErrEmptyCommand = errors.New("guestrun: empty command")
)

// Options adjust how Start runs a VMM. The zero value is what tests and
// benchmarks normally want.
type Options struct {
	// Stdin feeds the guest console; nil means /dev/null, so a VMM never reads
	// the terminal of whoever runs the tests.
	Stdin io.Reader
	// OnFirstByte, if set, runs on the goroutine reading the console as soon as the
	// first byte arrives and before FirstByte returns, while the VMM is most likely
	// still alive (benchmarks sample /proc/PID here).
	OnFirstByte func(pid int)
	// HangDump, if positive, watches the console: after this long
	// without output the VMM's threads and goroutines are captured to a
	// file and the VMM is ended (hangdump.go). Zero takes GOVM_HANG_DUMP
	// from the environment (unset: off).
	HangDump time.Duration
	// HangDumpDir is where the capture goes; "" takes
	// GOVM_HANG_DUMP_DIR, else os.TempDir().
	HangDumpDir string
	// Dir is the VMM's working directory ("": this process's).
	Dir string
}

// line is one complete console line and when its '\n' arrived.
type line struct {
	text string // without "\r\n"
	at   time.Time
}

// Proc is a running VMM whose stdout carries the guest's serial console. It runs
// in its own process group, which Kill signals as a whole: a QEMU that hit a KVM
// internal error pauses instead of exiting, and a wrapper script's children would
// otherwise keep the console pipe open.
type Proc struct {
	// Cmd is the started command; Cmd.Process.Pid identifies the VMM.
	Cmd *exec.Cmd
	// Started is taken immediately before fork/exec, so start-up latencies include
	// the VMM's own process creation, dynamic linking and initialisation.
	Started time.Time

	opts      Options
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced whenever output grows or the VMM exits
	out       bytes.Buffer  // everything read from stdout
	lines     []line        // complete lines of out
	partial   []byte        // the unfinished last line of out
	firstByte time.Time     // zero until the first stdout byte
	lastOut   time.Time     // when the latest stdout bytes arrived
	exitAt    time.Time     // when the VMM was reaped
	stderr    bytes.Buffer
	exited    bool
	waitErr   error
	state     *os.ProcessState
}

// Start runs argv[0] with the rest of argv as arguments.
func Start(opts Options, argv ...string) (*Proc, error) {
	if len(argv) == 0 {
		return nil, ErrEmptyCommand
	}
	if err := hangDumpFromEnv(&opts); err != nil {
		return nil, err
	}
	p := &Proc{opts: opts, changed: make(chan struct{})}
	p.Cmd = exec.Command(argv[0], argv[1:]...)
	p.Cmd.Dir = opts.Dir
	if opts.HangDump > 0 {
		// A Go VMM's SIGQUIT dump then shows every goroutine.
		p.Cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	}
	p.Cmd.Stdin = opts.Stdin
	p.Cmd.Stderr = lockedWriter{p}
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("guestrun: stdout pipe for %s: %w", argv[0], err)
	}
	p.Started = time.Now()
	if err := p.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("guestrun: start %s: %w", argv[0], err)
	}
	live.add(p)
	go p.readLoop(stdout)
	if opts.HangDump > 0 {
		go p.watchSilence()
	}
	return p, nil
}

// lockedWriter lets exec's stderr copier share the Proc mutex.
type lockedWriter struct{ p *Proc }

func (l lockedWriter) Write(b []byte) (int, error) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.p.stderr.Write(b)
}

func (p *Proc) readLoop(r io.Reader) {
	buf := make([]byte, 4096)
	first := true
	for {
		n, err := r.Read(buf)
		if n > 0 {
			now := time.Now()
			if first && p.opts.OnFirstByte != nil {
				// Outside the lock, before anyone can see the first byte: the
				// guest may exit at any moment, and only a live process has
				// /proc entries worth reading.
				p.opts.OnFirstByte(p.Cmd.Process.Pid)
			}
			first = false
			p.mu.Lock()
			if p.firstByte.IsZero() {
				p.firstByte = now
			}
			p.lastOut = now
			p.appendLocked(buf[:n], now)
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
	live.remove(p) // reaped: nothing left to kill, before anyone sees it exited
	p.mu.Lock()
	p.exited, p.waitErr, p.state, p.exitAt = true, err, p.Cmd.ProcessState, now
	p.notifyLocked()
	p.mu.Unlock()
}

// appendLocked adds console bytes, splitting off complete lines (CRs dropped:
// QEMU and 8250 consoles emit CRLF).
func (p *Proc) appendLocked(b []byte, now time.Time) {
	p.out.Write(b)
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.partial = append(p.partial, b...)
			return
		}
		p.partial = append(p.partial, b[:i]...)
		text := strings.ReplaceAll(string(p.partial), "\r", "")
		p.lines = append(p.lines, line{text: text, at: now})
		p.partial, b = p.partial[:0], b[i+1:]
	}
}

func (p *Proc) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait blocks until cond (called with p.mu held, after every change, or only
// every poll interval if poll > 0) reports true, the VMM exits, ctx ends or
// timeout passes. On timeout or the end of ctx the VMM is killed, so nothing
// outlives a test. It returns nil when cond held, ErrExited, ErrTimeout, or
// ctx's error.
func (p *Proc) wait(ctx context.Context, what string, timeout, poll time.Duration, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var tick <-chan time.Time
	if poll > 0 {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	for check := true; ; {
		p.mu.Lock()
		exited, ch := p.exited, p.changed
		ok := check && cond()
		p.mu.Unlock()
		if ok {
			return nil
		}
		if exited {
			return fmt.Errorf("%w before %s (%s)", ErrExited, what, p.status())
		}
		check = poll == 0
		select {
		case <-ch:
		case <-tick:
			check = true
		case <-deadline.C:
			p.Kill()
			return fmt.Errorf("%w after %v waiting for %s", ErrTimeout, timeout, what)
		case <-ctx.Done():
			p.Kill()
			return fmt.Errorf("guestrun: waiting for %s: %w", what, ctx.Err())
		}
	}
}

// FirstByte waits for the first serial byte and returns its delay since Started.
func (p *Proc) FirstByte(timeout time.Duration) (time.Duration, error) {
	err := p.wait(context.Background(), "first serial byte", timeout, 0,
		func() bool { return !p.firstByte.IsZero() })
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstByte.Sub(p.Started), nil
}

// WaitLine waits for a complete serial line starting with prefix and returns it
// without its line ending.
func (p *Proc) WaitLine(prefix string, timeout time.Duration) (string, error) {
	var found string
	next := 0 // lines before next have been looked at
	err := p.wait(context.Background(), fmt.Sprintf("line %q", prefix), timeout, 0, func() bool {
		for ; next < len(p.lines); next++ {
			if strings.HasPrefix(p.lines[next].text, prefix) {
				found = p.lines[next].text
				return true
			}
		}
		return false
	})
	return found, err
}

// LineAt returns the first complete line starting with prefix and how long after
// Started its last byte arrived, so a benchmark can split a run into phases (guest
// done vs. VMM teardown) without the guest having a clock the host trusts.
func (p *Proc) LineAt(prefix string) (text string, after time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.HasPrefix(l.text, prefix) {
			return l.text, l.at.Sub(p.Started), true
		}
	}
	return "", 0, false
}

// Wait waits for the VMM to exit and returns its exit status (-1 if killed by a
// signal). On timeout the VMM is killed and Wait returns ErrTimeout.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	err := p.wait(context.Background(), "exit", timeout, 0, func() bool { return p.exited })
	if err != nil {
		return -1, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.ExitCode(), nil
}

// reap waits without a limit for the exit that a Kill has made certain.
func (p *Proc) reap() {
	_ = p.wait(context.Background(), "exit after kill", time.Hour, 0, func() bool { return p.exited })
}

// ExitAfter returns how long after Started the VMM was reaped (zero while it runs).
func (p *Proc) ExitAfter() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitAt.IsZero() {
		return 0
	}
	return p.exitAt.Sub(p.Started)
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

// Kill sends SIGKILL to the VMM's process group, which Start created for this VMM
// alone (never a process name: other engineers' VMMs run on the same host). A VMM
// already reaped is left alone, since its PID may have been reused.
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited && p.Cmd.Process != nil {
		// The group id is the VMM's PID, which stays ours until readLoop reaps it;
		// the window between that wait4 and readLoop taking the lock is the only
		// one in which the id could be stale.
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	}
}

// live is every VMM Start started that has not been reaped yet.
var live = &procSet{m: map[*Proc]struct{}{}}

type procSet struct {
	mu sync.Mutex
	m  map[*Proc]struct{}
}

func (s *procSet) add(p *Proc)    { s.mu.Lock(); s.m[p] = struct{}{}; s.mu.Unlock() }
func (s *procSet) remove(p *Proc) { s.mu.Lock(); delete(s.m, p); s.mu.Unlock() }
func (s *procSet) has(p *Proc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[p]
	return ok
}

// KillAll kills every VMM started by Start that is still running and returns
// how many it killed. A test binary's TestMain calls it after m.Run: a test
// that failed between starting a VMM and waiting for it (or left it paused)
// must not leave the VMM running after the test binary is gone.
func KillAll() int {
	live.mu.Lock()
	ps := make([]*Proc, 0, len(live.m))
	for p := range live.m {
		ps = append(ps, p)
	}
	live.mu.Unlock()
	for _, p := range ps {
		p.Kill()
	}
	return len(ps)
}

// Serial returns the guest console output so far.
func (p *Proc) Serial() string {
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

// Output returns what the run produced so far, with the serial protocol parsed.
// ExitCode is -1 and Elapsed the time so far while the VMM runs.
func (p *Proc) Output() *Output {
	p.mu.Lock()
	o := &Output{Serial: p.out.String(), Stderr: p.stderr.String(), ExitCode: -1, Elapsed: time.Since(p.Started)}
	if p.exited {
		o.ExitCode, o.Elapsed = p.state.ExitCode(), p.exitAt.Sub(p.Started)
	}
	p.mu.Unlock()
	Parse(o.Serial, o)
	return o
}

func (p *Proc) status() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return "running"
	}
	s := p.state.String()
	if e := strings.TrimSpace(p.stderr.String()); e != "" {
		s += "; stderr: " + e[strings.LastIndexByte(e, '\n')+1:]
	}
	return s
}
