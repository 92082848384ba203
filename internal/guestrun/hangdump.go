package guestrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The silent-guest capture (opt-in). A guest that stops printing may be
// stopped by the host (a vCPU thread blocked in the VMM: a lock, a full
// pipe, a parked vCPU) or may itself be stuck; the difference is gone once
// the test's timeout kills the VMM. With GOVM_HANG_DUMP=30s every VMM that
// Start runs is watched: after 30 s with no console output the watcher
// records, for every thread of every process in the VMM's process group,
// its state, the time it ran and the time it waited runnable in one second
// (schedstat: a thread starved by a loaded host waits runnable, a blocked
// one does neither), wait channel,
// system call and kernel stack, then sends SIGQUIT, which makes a Go VMM
// print all its goroutines (Start sets GOTRACEBACK=all) and exit. All of it
// goes to a file in GOVM_HANG_DUMP_DIR (default os.TempDir()), whose name
// is printed on the test binary's stderr. Only for tests whose guests
// print at least every GOVM_HANG_DUMP: it kills the VMM it dumps.
const (
	hangDumpEnv    = "GOVM_HANG_DUMP"
	hangDumpDirEnv = "GOVM_HANG_DUMP_DIR"
)

// hangDumpFromEnv reads GOVM_HANG_DUMP and GOVM_HANG_DUMP_DIR into opts
// where opts leaves them unset.
func hangDumpFromEnv(opts *Options) error {
	if opts.HangDump == 0 {
		if v := os.Getenv(hangDumpEnv); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("guestrun: %s=%q: want a positive duration such as 30s", hangDumpEnv, v)
			}
			opts.HangDump = d
		}
	}
	if opts.HangDumpDir == "" {
		opts.HangDumpDir = os.Getenv(hangDumpDirEnv)
	}
	if opts.HangDumpDir == "" {
		opts.HangDumpDir = os.TempDir()
	}
	return nil
}

// watchSilence runs while the VMM does; it dumps once, after opts.HangDump
// without console output (counted from Started until the first byte).
func (p *Proc) watchSilence() {
	t := time.NewTicker(p.opts.HangDump / 10)
	defer t.Stop()
	for range t.C {
		p.mu.Lock()
		exited, last := p.exited, p.lastOut
		p.mu.Unlock()
		if exited {
			return
		}
		if last.IsZero() {
			last = p.Started
		}
		if silent := time.Since(last); silent >= p.opts.HangDump {
			p.hangDump(silent)
			return
		}
	}
}

// hangDump writes the capture and ends the VMM with SIGQUIT.
func (p *Proc) hangDump(silent time.Duration) {
	pid := p.Cmd.Process.Pid
	var b bytes.Buffer
	fmt.Fprintf(&b, "guestrun: VMM pid %d silent for %v (%s)\n", pid, silent.Round(time.Millisecond), strings.Join(p.Cmd.Args, " "))
	fmt.Fprintf(&b, "time %s\nloadavg %s\n", time.Now().UTC().Format(time.RFC3339Nano), readTrim("/proc/loadavg"))
	pids := groupPIDs(pid)
	before := taskTimes(pids)
	time.Sleep(time.Second)
	for _, q := range pids {
		fmt.Fprintf(&b, "\n=== process %d: %s\n", q, strings.ReplaceAll(readTrim(fmt.Sprintf("/proc/%d/cmdline", q)), "\x00", " "))
		for _, tid := range tasks(q) {
			dir := fmt.Sprintf("/proc/%d/task/%d", q, tid)
			st := statFields(dir)
			run, wait := schedstat(dir)
			was := before[tid]
			fmt.Fprintf(&b, "--- tid %d %s state=%s wchan=%s ran %v, waited runnable %v in the last second (total %v, %v)\n    syscall: %s\n",
				tid, readTrim(dir+"/comm"), st.state, readTrim(dir+"/wchan"), run-was.run, wait-was.wait,
				run.Round(time.Millisecond), wait.Round(time.Millisecond), readTrim(dir+"/syscall"))
			for _, l := range strings.Split(readTrim(dir+"/stack"), "\n") {
				if l != "" {
					fmt.Fprintf(&b, "    %s\n", l)
				}
			}
		}
	}
	// The goroutine dump: SIGQUIT to the VMM only (a QEMU just dies).
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	_ = p.wait(context.Background(), "exit after SIGQUIT", 10*time.Second, 0, func() bool { return p.exited })
	fmt.Fprintf(&b, "\n=== VMM stderr after SIGQUIT (%s):\n%s\n=== console (last 2000 bytes):\n%s\n", p.status(), p.Stderr(), tail(p.Serial(), 2000))
	name := filepath.Join(p.opts.HangDumpDir, fmt.Sprintf("govm-hang-%d-%s.txt", pid, time.Now().UTC().Format("150405")))
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "guestrun: VMM pid %d silent for %v; cannot write the dump: %v\n%s", pid, silent, err, b.Bytes())
		return
	}
	fmt.Fprintf(os.Stderr, "guestrun: VMM pid %d silent for %v: threads and goroutines in %s\n", pid, silent.Round(time.Second), name)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimRight(string(b), "\n\x00")
}

// groupPIDs lists the processes of process group pgid (Start puts the VMM
// in its own group: wrappers and their children are in it too).
func groupPIDs(pgid int) []int {
	out := []int{pgid}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		q, err := strconv.Atoi(e.Name())
		if err != nil || q == pgid {
			continue
		}
		if g, err := syscall.Getpgid(q); err == nil && g == pgid {
			out = append(out, q)
		}
	}
	return out
}

func tasks(pid int) []int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, t)
		}
	}
	sort.Ints(out)
	return out
}

type taskStat struct{ state string }

// statFields reads a task's state from its stat (proc(5): the field after
// the parenthesised comm, which may itself hold spaces).
func statFields(dir string) taskStat {
	s := readTrim(dir + "/stat")
	i := strings.LastIndexByte(s, ')')
	if i < 0 || len(s) < i+3 {
		return taskStat{state: "?"}
	}
	return taskStat{state: s[i+2 : i+3]}
}

// schedstat is a task's time on a CPU and time runnable but waiting for
// one (/proc/PID/task/TID/schedstat). A thread starved by a loaded host
// waits runnable; a blocked one does neither.
func schedstat(dir string) (run, wait time.Duration) {
	f := strings.Fields(readTrim(dir + "/schedstat"))
	if len(f) < 2 {
		return 0, 0
	}
	r, _ := strconv.ParseInt(f[0], 10, 64)
	w, _ := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(r), time.Duration(w)
}

type sched struct{ run, wait time.Duration }

func taskTimes(pids []int) map[int]sched {
	m := make(map[int]sched)
	for _, q := range pids {
		for _, tid := range tasks(q) {
			r, w := schedstat(fmt.Sprintf("/proc/%d/task/%d", q, tid))
			m[tid] = sched{r, w}
		}
	}
	return m
}
