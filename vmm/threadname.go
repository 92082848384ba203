package vmm

// threadCommPath is the calling thread's name in procfs, which tests read.
const threadCommPath = "/proc/thread-self/comm"

// nameThread names the calling OS thread, which the caller has locked
// (runtime.LockOSThread), so that per-thread host accounting (/proc/PID/task/
// TID/{comm,stat}, top -H, perf) can tell vCPU threads from the VMM's I/O
// threads; bench splits a VMM's CPU time by it, as QEMU's "CPU n/KVM" names
// (-name debug-threads=on) allow there. The kernel keeps at most 15 bytes.
// It uses prctl(PR_SET_NAME), not procfs: vCPU threads start under the
// seccomp filter, which allows no open.
//
// It returns a function that puts the old name back, to call before the thread
// is unlocked: Go reuses unlocked threads for other goroutines, which must not
// be counted as a vCPU. Naming is diagnostics only, so failures are ignored.
func nameThread(name string) (restore func()) {
	old, err := threadName()
	if err != nil || setThreadName(name) != nil {
		return func() {}
	}
	return func() { _ = setThreadName(old) }
}
