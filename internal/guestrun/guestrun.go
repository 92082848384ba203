// Package guestrun runs a VMM (govm or QEMU) on the test kernel and parses
// the kernel's machine-readable serial output:
//
//	RESULT <name> pass|fail key=value ...
//	SUMMARY pass=N fail=M
//
// It is shared by the end-to-end tests and the benchmarks.
package guestrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Result is one RESULT line.
type Result struct {
	Name string
	Pass bool
	KV   map[string]string
}

// Int returns KV[key] parsed as an integer (decimal or 0x-hex).
func (r Result) Int(key string) (int64, error) {
	v, ok := r.KV[key]
	if !ok {
		return 0, fmt.Errorf("guestrun: RESULT %s has no %s", r.Name, key)
	}
	return strconv.ParseInt(v, 0, 64)
}

// Output is everything a run produced.
type Output struct {
	Serial   string // the guest's console (VMM stdout)
	Stderr   string // the VMM's own messages
	Results  map[string]Result
	Order    []string // result names in the order printed
	Summary  bool     // a SUMMARY line was seen
	Passed   int
	Failed   int
	ExitCode int           // VMM exit status (-1 if killed)
	Elapsed  time.Duration // process start to exit
	TimedOut bool
	Stopped  bool // RunUntil's condition fired and the process was killed
}

// Parse extracts RESULT and SUMMARY lines from serial output.
func Parse(serial string, o *Output) {
	o.Results = map[string]Result{}
	sc := bufio.NewScanner(strings.NewReader(serial))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		// A line may be preceded by other console noise; find the tag.
		if i := strings.Index(line, "RESULT "); i >= 0 {
			f := strings.Fields(line[i+len("RESULT "):])
			if len(f) < 2 {
				continue
			}
			r := Result{Name: f[0], Pass: f[1] == "pass", KV: map[string]string{}}
			for _, kv := range f[2:] {
				if k, v, ok := strings.Cut(kv, "="); ok {
					r.KV[k] = v
				}
			}
			if _, seen := o.Results[r.Name]; !seen {
				o.Order = append(o.Order, r.Name)
			}
			o.Results[r.Name] = r
		} else if i := strings.Index(line, "SUMMARY "); i >= 0 {
			for _, kv := range strings.Fields(line[i+len("SUMMARY "):]) {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.Atoi(v)
				switch k {
				case "pass":
					o.Passed = n
				case "fail":
					o.Failed = n
				}
			}
			o.Summary = true
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Run starts argv, waits for it to exit or for timeout (then kills the
// whole process group: a QEMU that hit a KVM internal error pauses instead
// of exiting), and parses its stdout.
func Run(ctx context.Context, timeout time.Duration, argv ...string) (*Output, error) {
	return RunUntil(ctx, timeout, nil, argv...)
}

// RunUntil is Run that also stops the process (SIGKILL to its group) as
// soon as until returns true for the serial output so far. until is polled
// every 50 ms. Output.Stopped says whether it fired.
func RunUntil(ctx context.Context, timeout time.Duration, until func(serial string) bool, argv ...string) (*Output, error) {
	if len(argv) == 0 {
		return nil, errors.New("guestrun: empty command")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(argv[0], argv[1:]...)
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("guestrun: start %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	o := &Output{}
	var werr error
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case <-tick.C:
			if until != nil && until(stdout.String()) {
				o.Stopped = true
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				werr = <-done
				break wait
			}
		case <-ctx.Done():
			o.TimedOut = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			werr = <-done
			break wait
		}
	}
	o.Elapsed = time.Since(start)
	o.Serial, o.Stderr = stdout.String(), stderr.String()
	o.ExitCode = cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return o, fmt.Errorf("guestrun: %s: %w", argv[0], werr)
	}
	Parse(o.Serial, o)
	return o, nil
}

// QEMUArgs returns the QEMU command line that boots kernel the way the
// test kernel expects (same devices and exit port as govm --debug-exit).
// On this kind of host QEMU needs -cpu host,-arch-capabilities.
func QEMUArgs(kernel, cmdline string, memMiB int, extra ...string) []string {
	a := []string{"qemu-system-x86_64", "-accel", "kvm", "-cpu", "host,-arch-capabilities",
		"-m", strconv.Itoa(memMiB), "-nographic", "-nodefaults", "-no-reboot",
		"-bios", "/usr/share/qemu/qboot.rom", "-serial", "stdio", "-display", "none",
		"-device", "isa-debug-exit,iobase=0x501,iosize=2",
		"-kernel", kernel, "-append", cmdline}
	return append(a, extra...)
}
