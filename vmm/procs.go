package vmm

import (
	"os"
	"runtime"
)

// Sizing GOMAXPROCS. Each vCPU thread sits in KVM_RUN and each virtio
// device's I/O goroutine sits in ppoll (on its doorbells, and virtio-net's
// also on the tap), and Go counts a thread in a blocking system call
// against GOMAXPROCS until sysmon takes its P away. With the default (one
// P per host CPU) those threads hold every P most of the time, so sysmon
// retakes a P after every 20 us a thread spends in a system call, hands it
// to another thread, and polls again at its shortest period; the thread
// coming back from its system call then finds no P and parks, and another
// thread runs its goroutine later. One P per blocking thread on top of one
// per CPU keeps idle Ps around, so a thread's system call returns to its
// own P and sysmon retakes only Ps blocked for 10 ms. govm's own Go code is
// small, so more Ps never means more busy threads than CPUs for long. The
// context switches and CPU per frame this saves are in bench/README.md
// ("Design measurements").

// sizeProcs raises GOMAXPROCS for the blocking threads of this machine,
// unless the user chose a value (the GOMAXPROCS environment variable).
// It counts one per virtio queue: at least one per device I/O goroutine
// (virtio-net serves its two queues from one), so never too few.
func (m *Machine) sizeProcs() {
	blocking := m.cfg.CPUs
	for _, s := range m.slots {
		blocking += s.dev.NumQueues()
	}
	n := procsFor(os.Getenv("GOMAXPROCS"), runtime.NumCPU(), runtime.GOMAXPROCS(0), blocking)
	if n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
}

// procsFor is the GOMAXPROCS for blocking threads on numCPU CPUs, given
// the environment's GOMAXPROCS setting and the current value: one P per
// CPU plus one per blocking thread, never fewer than now, and the user's
// choice when there is one.
func procsFor(env string, numCPU, current, blocking int) int {
	if env != "" {
		return current
	}
	return max(current, numCPU+blocking)
}
