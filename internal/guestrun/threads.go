package guestrun

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Thread is one thread of a VMM as the host's scheduler accounts for it:
// what tells a guest the host starved (its threads waited runnable, or
// were stopped) from one stuck in the VMM (its threads ran, or slept, with
// nothing to wait for).
type Thread struct {
	TID   int
	Name  string        // comm: govm names its vCPU threads vcpuN
	State string        // R running or runnable, S sleeping, T stopped, ...
	Run   time.Duration // time on a CPU since the thread started
	Wait  time.Duration // time runnable but waiting for a CPU
}

// Threads lists the threads of process pid; none once it is gone.
func Threads(pid int) []Thread {
	var out []Thread
	for _, tid := range tasks(pid) {
		dir := fmt.Sprintf("/proc/%d/task/%d", pid, tid)
		run, wait := schedstat(dir)
		out = append(out, Thread{TID: tid, Name: readTrim(dir + "/comm"), State: statFields(dir).state, Run: run, Wait: wait})
	}
	return out
}

// CPUShare is what a VMM's threads got from the host over an interval.
type CPUShare struct {
	VCPURun, VCPUWait   time.Duration // vCPU threads (named vcpuN)
	OtherRun, OtherWait time.Duration // the VMM's other threads
	MaxWait             time.Duration // the longest any one thread waited
}

// Share sums what each thread in now ran and waited since before.
func Share(before, now []Thread) CPUShare {
	was := make(map[int]Thread, len(before))
	for _, t := range before {
		was[t.TID] = t
	}
	var s CPUShare
	for _, t := range now {
		run, wait := t.Run-was[t.TID].Run, t.Wait-was[t.TID].Wait
		s.MaxWait = max(s.MaxWait, wait)
		if strings.HasPrefix(t.Name, "vcpu") {
			s.VCPURun += run
			s.VCPUWait += wait
		} else {
			s.OtherRun += run
			s.OtherWait += wait
		}
	}
	return s
}

// String is one line for a test log.
func (s CPUShare) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("vCPU threads ran %v, waited runnable %v; other threads ran %v, waited runnable %v; one thread waited at most %v",
		r(s.VCPURun), r(s.VCPUWait), r(s.OtherRun), r(s.OtherWait), r(s.MaxWait))
}

// NetnsVMM returns the pid of the process running binary inside network
// namespace ns (ip netns pids), or 0: a VMM started through `ip netns
// exec` has no pid of its own in guestrun's Output.
func NetnsVMM(ns, binary string) int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return 0
	}
	want, err := os.Stat(binary)
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if got, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && os.SameFile(got, want) {
			return pid
		}
	}
	return 0
}
