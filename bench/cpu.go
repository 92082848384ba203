package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Host CPU time of a VMM, split into its vCPU threads and everything else (I/O
// threads, main loop, runtime), read from /proc at phase boundaries: on our
// 2-core hosts the guest vCPU, the VMM's I/O threads and the traffic source
// share the cores, so CPU per frame is what decides throughput.

// clockTick is USER_HZ, the unit of utime/stime in /proc/PID/stat: 100 on every
// Linux architecture Go supports for KVM (the kernel converts to it for procfs).
const clockTick = 10 * time.Millisecond

// ErrNoVCPUThread means a VMM had no thread named as a vCPU: a sample that
// cannot be split is an error, never a zero vCPU time.
var ErrNoVCPUThread = errors.New("bench: no vCPU thread found")

// CPUSample is a VMM's accumulated CPU time (user+system) at one moment.
type CPUSample struct {
	// Total covers every thread the process ever had (exited ones included).
	Total time.Duration
	// VCPU is the sum over the live vCPU threads; Threads how many there were.
	VCPU    time.Duration
	Threads int
}

// Rest is the CPU time outside the vCPU threads.
func (s CPUSample) Rest() time.Duration { return s.Total - s.VCPU }

// Sub is the time spent between two samples of the same process.
func (s CPUSample) Sub(before CPUSample) CPUSample {
	return CPUSample{Total: s.Total - before.Total, VCPU: s.VCPU - before.VCPU, Threads: s.Threads}
}

// IsVCPUThread reports whether a thread name (comm) is a vCPU thread: govm
// names them "vcpuN" (vmm.nameThread), QEMU with -name debug-threads=on
// "CPU N/KVM".
func IsVCPUThread(comm string) bool {
	return strings.HasPrefix(comm, "vcpu") ||
		strings.HasPrefix(comm, "CPU ") && strings.HasSuffix(comm, "/KVM")
}

// ReadCPU samples process pid: its total from /proc/PID/stat, its vCPU threads
// (IsVCPUThread) from /proc/PID/task/TID/stat.
func ReadCPU(pid int) (CPUSample, error) {
	var s CPUSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("bench: cpu of pid %d: %w", pid, err)
	}
	_, total, err := parseStat(string(b))
	if err != nil {
		return s, err
	}
	s.Total = total
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return s, fmt.Errorf("bench: tasks of pid %d: %w", pid, err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited after the glob; not a vCPU mid-run
		}
		comm, cpu, err := parseStat(string(b))
		if err != nil {
			return s, err
		}
		if IsVCPUThread(comm) {
			s.VCPU += cpu
			s.Threads++
		}
	}
	if s.Threads == 0 {
		return s, fmt.Errorf("%w in pid %d (%d threads)", ErrNoVCPUThread, pid, len(tasks))
	}
	return s, nil
}

// parseStat returns comm and utime+stime from a /proc stat line "pid (comm) state
// ppid ...": utime and stime are fields 14 and 15 (proc(5)), counted after the
// last ')' because comm may contain spaces and parentheses.
func parseStat(line string) (comm string, cpu time.Duration, err error) {
	open, shut := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || shut < open {
		return "", 0, fmt.Errorf("bench: stat line %q", line)
	}
	f := strings.Fields(line[shut+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return "", 0, fmt.Errorf("bench: stat line %q: %d fields", line, len(f)+2)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("bench: stat line %q: utime/stime", line)
	}
	return line[open+1 : shut], time.Duration(ut+st) * clockTick, nil
}
