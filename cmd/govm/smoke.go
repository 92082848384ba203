package main

// CI boot smoke tests: --timeout, console watching (--fail-on,
// --panic-grace, --ready-marker), --console-log, --result, --exec. The
// exit statuses are listed in docs/usage.md; the verdict's schema in
// docs/result.md.

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/govm/govm/internal/alarm"
	"github.com/govm/govm/internal/outq"
	"github.com/govm/govm/splat"
	"github.com/govm/govm/vmm"
)

// Exit statuses of the smoke-test features. 0, 1, 2 and the odd
// debug-exit statuses (v<<1)|1 are taken; these are even and unused.
const (
	statusPanic   = 4   // the guest kernel panicked
	statusSplat   = 6   // a splat class named by --fail-on was seen
	statusTimeout = 124 // --timeout expired, as timeout(1)
)

// defaultPanicGrace is how long a guest may keep running after its panic
// line: enough for Linux to print the trace and, with panic=1, reboot
// (emulated CPL0 printing is slow), short enough for a CI job.
const defaultPanicGrace = 10 * time.Second

type smokeFlags struct {
	timeout, panicGrace        time.Duration
	failOn                     []string
	consoleLog, result, marker string
	exec                       string
	noPVPanic                  bool
}

func addSmokeFlags(fl *pflag.FlagSet, f *smokeFlags) {
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the VM after DURATION (e.g. 90s, 5m) and exit 124")
	fl.StringSliceVar(&f.failOn, "fail-on", nil, "exit 6 if the guest console shows these splats: "+kindList()+", or all")
	fl.DurationVar(&f.panicGrace, "panic-grace", defaultPanicGrace, "after a guest kernel panic line, stop the VM if it still runs after this long")
	fl.StringVar(&f.consoleLog, "console-log", "", "write the whole guest console to FILE (also when stdout is a terminal)")
	fl.StringVar(&f.result, "result", "", "write a JSON verdict to FILE when the VM ends (docs/result.md)")
	fl.StringVar(&f.marker, "ready-marker", "", "record when STRING first appears on the console (phases_ms.ready in --result)")
	fl.StringVar(&f.exec, "exec", "", "run CMD in the default guest (the initramfs `make linux` builds) and exit with its status")
	fl.BoolVar(&f.noPVPanic, "no-pvpanic", false, "do not add the pvpanic PCI device")
}

func kindList() string {
	var s []string
	for _, k := range splat.Kinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ",")
}

// smoke is one run's smoke-test state.
type smoke struct {
	f        *smokeFlags
	start    time.Time
	failOn   map[splat.Kind]bool
	watch    *splat.Watcher
	log      *os.File
	result   *os.File
	timer    *alarm.Alarm
	grace    *alarm.Alarm
	machine  atomic.Pointer[vmm.Machine]
	vmStart  time.Time
	graceOne sync.Once
}

// newSmoke checks the flags and opens every file and descriptor the run
// will need, before the VM runs (a seccomp filter may forbid opening
// files later).
func newSmoke(f *smokeFlags, start time.Time) (_ *smoke, err error) {
	s := &smoke{f: f, start: start, failOn: map[splat.Kind]bool{}}
	defer func() {
		if err != nil {
			s.setupFailed(err, statusBadInput) // once --result is open
			s.close()
		}
	}()
	if f.timeout < 0 {
		return nil, fmt.Errorf("--timeout %v: must be positive (e.g. --timeout 90s)", f.timeout)
	}
	if f.panicGrace <= 0 {
		return nil, fmt.Errorf("--panic-grace %v: must be positive (e.g. --panic-grace 10s)", f.panicGrace)
	}
	for _, w := range f.failOn {
		w = strings.TrimSpace(strings.ToLower(w))
		if w == "all" {
			for _, k := range splat.Kinds {
				s.failOn[k] = true
			}
			continue
		}
		k, ok := splat.ParseKind(w)
		if !ok {
			return nil, fmt.Errorf("--fail-on %q: unknown splat class; use a comma list of %s, or all", w, kindList())
		}
		s.failOn[k] = true
	}
	if f.consoleLog != "" {
		if s.log, err = os.Create(f.consoleLog); err != nil {
			return nil, fmt.Errorf("--console-log: %w", err)
		}
	}
	if f.result != "" {
		if s.result, err = os.Create(f.result); err != nil {
			return nil, fmt.Errorf("--result: %w", err)
		}
	}
	if s.timer, err = alarm.New(); err != nil {
		return nil, err
	}
	if s.grace, err = alarm.New(); err != nil {
		return nil, err
	}
	s.watch = splat.New(splat.Config{Start: start, ReadyMarker: f.marker, OnSplat: s.onSplat})
	return s, nil
}

// execParams is what --exec adds to the kernel command line: the command,
// hex-encoded because the command line splits on spaces (the init of
// guest/linux/init decodes it, as it does govm.cmd).
func execParams(cmd string) string {
	return "govm.exec=" + hex.EncodeToString([]byte(cmd))
}

// console returns the writer for the guest's console: stdout (through its
// queue), the console log and the watcher. A failing or stalled stdout (a
// closed pipe, a reader that stopped) must not blind the watcher or the
// log, so the tee keeps going and reports what stdout lost itself.
func (s *smoke) console(stdout *outq.Writer) *tee {
	t := &tee{out: stdout, watch: s.watch}
	if s.log != nil {
		t.log = s.log
	}
	return t
}

// onSplat runs on the vCPU thread for each splat line (splat.Watcher).
func (s *smoke) onSplat(sp splat.Splat) {
	if sp.Kind != splat.Panic {
		return
	}
	// A kernel that panics with panic=1 reboot=k resets by itself after
	// a second; one with panic=0, or stuck in its panic path, would run
	// until --timeout. Give it the grace period, then stop it.
	s.graceOne.Do(func() {
		_ = s.grace.Start(s.f.panicGrace, func() {
			if m := s.machine.Load(); m != nil {
				m.Stop(vmm.Result{Status: statusPanic, Kind: vmm.ExitPanic,
					Reason: fmt.Sprintf("still running %v after its panic line", s.f.panicGrace)})
			}
		})
	})
}

// run arms the timeout for m; call it just before m.Run.
func (s *smoke) run(m *vmm.Machine) {
	s.machine.Store(m)
	s.vmStart = time.Now()
	if s.f.timeout > 0 {
		d := s.f.timeout
		_ = s.timer.Start(d, func() {
			m.Stop(vmm.Result{Status: statusTimeout, Kind: vmm.ExitTimeout,
				Reason: fmt.Sprintf("timeout: the guest was still running after %v; stopped it", d)})
		})
	}
}

// stopAlarms disarms the timeout and the panic grace period. Idempotent.
func (s *smoke) stopAlarms() {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.grace != nil {
		s.grace.Stop()
	}
}

// writeResult writes v to the --result file opened by newSmoke, and closes
// it: one verdict per run, whether or not the write worked.
func (s *smoke) writeResult(v verdict) error {
	f := s.result
	s.result = nil
	b, err := v.marshal()
	if err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("--result: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--result: %w", err)
	}
	return nil
}

// finish prints the verdict's lines, writes --result and returns govm's
// exit status as an error (nil for 0).
func (s *smoke) finish(res vmm.Result, m *vmm.Machine, kernel string, console *tee, stderr io.Writer) error {
	v := s.decide(res)
	v.Kernel = kernel
	v.Devices = m.Counters()
	for _, err := range console.errs() {
		fmt.Fprintf(stderr, "govm: %v\n", err)
	}
	if line := splatSummary(v); line != "" {
		fmt.Fprintf(stderr, "govm: %s\n", line)
	}
	fmt.Fprintf(stderr, "govm: %s\n", v.Reason)
	if s.result != nil {
		if err := s.writeResult(v); err != nil {
			fmt.Fprintf(stderr, "govm: %v\n", err)
			if v.Status == 0 {
				v.Status = statusFailure
			}
		}
	}
	if v.Status != 0 {
		return exitError{v.Status}
	}
	return nil
}

// setupFailed writes the --result verdict of a VM that could not be
// created, so a CI job always finds one: exit_reason "setup", the status
// govm exits with, and the error as the reason.
func (s *smoke) setupFailed(err error, status int) {
	if s.result == nil {
		return
	}
	v := verdict{Version: verdictVersion, ExitReason: "setup", Status: status, Reason: oneLine(err.Error()),
		Splats: []splat.Splat{}, SplatCounts: map[string]int{}, FailOn: []string{}, PhasesMS: map[string]float64{}}
	if s.f.exec != "" {
		v.Exec = &s.f.exec
	}
	_ = s.writeResult(v)
}

// close stops the alarms and closes the files. Idempotent.
func (s *smoke) close() {
	s.stopAlarms()
	if s.log != nil {
		s.log.Close()
		s.log = nil
	}
	if s.result != nil {
		s.result.Close()
		s.result = nil
	}
}

// tee is the console writer: it never fails towards the UART, so the
// watcher and the log see everything even after stdout broke.
type tee struct {
	out   *outq.Writer // never blocks: it queues for stdout
	log   io.Writer
	watch io.Writer

	mu        sync.Mutex
	logErr    error
	abandoned uint64 // what closeOut gave up on
}

func (t *tee) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.out.Write(p)
	if t.log != nil && t.logErr == nil {
		if _, err := t.log.Write(p); err != nil {
			t.logErr = fmt.Errorf("--console-log: %w", err)
		}
	}
	_, _ = t.watch.Write(p)
	return len(p), nil
}

// closeOut lets stdout's reader take the rest of the console while it
// keeps up (outq.Writer.Close), and records what was left unwritten.
func (t *tee) closeOut(idle, most time.Duration) {
	ab := t.out.Close(idle, most)
	t.mu.Lock()
	t.abandoned = ab
	t.mu.Unlock()
}

// errs returns what went wrong with the console's destinations, if
// anything: stdout's write error, or the bytes a stalled stdout never
// took; the console log's write error.
func (t *tee) errs() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []error
	lost := t.out.Dropped() + t.abandoned
	switch {
	case t.out.Err() != nil:
		out = append(out, fmt.Errorf("console output: %w (%d bytes dropped)", t.out.Err(), lost))
	case lost > 0:
		out = append(out, fmt.Errorf("console output: %d bytes not written: stdout was not read fast enough (--console-log keeps all of it)", lost))
	}
	if t.logErr != nil {
		out = append(out, t.logErr)
	}
	return out
}
