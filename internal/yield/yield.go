// Package yield keeps a goroutine that lives in blocking system calls on
// good terms with Go's scheduler.
//
// govm's device I/O goroutines (each asleep in ppoll on its doorbells and,
// for virtio-net, the tap's fd: virtio.Doorbell, virtio.Waiter) go from
// one blocking system call to the next and never park in the scheduler,
// so their P's schedule tick never moves. Go's sysmon takes that for a
// goroutine hogging its P: after 10 ms it marks it for preemption and,
// finding it in a system call, takes the P away. On the way back from the
// call the goroutine then yields with a wakeup of another thread, usually
// resumes on a different one, and every such retake resets sysmon to
// polling every 20 us. A goroutine that passes through the scheduler
// itself, cheaply and at most every Interval, before it blocks, is never
// "running" for 10 ms, so none of that happens. The same goes for one
// that a flood keeps from sleeping at all (virtio.Waiter.Busy, the
// Poller's spin). Each yield wakes an idle thread that finds nothing and
// sleeps again, so the interval is as long as the 10 ms slice safely
// allows. A vCPU thread, which loops in KVM_RUN the same way, yields too
// (vmm/vcpu.go). What this saved, in context switches and CPU per frame,
// is in bench/README.md ("Design measurements").
package yield

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
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

// CPU offers the CPU to any other thread runnable on it (sched_yield(2))
// and returns when this thread is scheduled again: at once if none is. For
// a goroutine that would otherwise sleep on work another thread on its CPU
// is about to produce (virtio.Poller's spin; virtio-net RX after a burst).
// A raw system call: it never blocks, so Go's scheduler keeps the P with
// the thread.
func CPU() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
