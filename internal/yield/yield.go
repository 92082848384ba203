// Package yield keeps a goroutine that lives in blocking system calls on
// good terms with Go's scheduler.
//
// govm's device goroutines (a virtio queue waiting on its doorbell, RX
// waiting on the tap) go from one blocking system call to the next and
// never park in the scheduler, so their P's schedule tick never moves. Go's
// sysmon takes that for a goroutine hogging its P: after 10 ms it marks it
// for preemption and, finding it in a system call, takes the P away. On the
// way back from the call the goroutine then yields with a wakeup of
// another thread, usually resumes on a different one, and every such
// retake resets sysmon to polling every 20 us: measured with pingrig,
// about 3000 sysmon wakeups a second during ping -f. A goroutine that
// passes through the scheduler itself, cheaply and at most every Interval,
// before it blocks, is never "running" for 10 ms, so none of that happens:
// non-vCPU context switches per ping frame 2.48 -> 1.99, CPU per frame 53
// -> 38 us (medians of 3 interleaved runs, load 6-7, 2 ms interval). Each
// yield wakes an idle thread that finds nothing and sleeps again (perf:
// ~0.24 switches per frame at 2 ms), so the interval is as long as the
// 10 ms slice safely allows: on a quiet host 5 ms gave 1.43 switches and
// 23 us per frame against 1.57 and 25 us at 2 ms. A vCPU thread, which
// loops in KVM_RUN the same way, yields too (vmm/vcpu.go).
package yield

import (
	"runtime"
	"time"
)

// Interval is how long a goroutine goes without passing through the
// scheduler before BeforeBlock yields: half of sysmon's 10 ms preemption
// slice, so sysmon always sees the goroutine's schedule tick move.
const Interval = 5 * time.Millisecond

// Replaced by tests.
var (
	now     = func() int64 { return time.Now().UnixNano() }
	gosched = runtime.Gosched
)

// Point is where one goroutine blocks; the zero value is ready. Not safe
// for concurrent use: each blocking goroutine has its own.
type Point struct {
	// Every replaces Interval when not zero. It must stay under 10 ms.
	Every time.Duration
	last  int64
}

// BeforeBlock is called just before the goroutine blocks in a system call:
// it yields to the scheduler (runtime.Gosched) if it has not for Interval
// (or Every).
func (p *Point) BeforeBlock() {
	every := Interval
	if p.Every != 0 {
		every = p.Every
	}
	if t := now(); t-p.last >= int64(every) {
		p.last = t
		gosched()
	}
}
