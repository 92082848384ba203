package vmm

import (
	"os"
	"strings"
)

// threadCommPath is the calling thread's name in procfs (Linux 3.17+). Writing
// it is prctl(PR_SET_NAME) without an unsafe pointer.
const threadCommPath = "/proc/thread-self/comm"

// nameThread names the calling OS thread, which the caller has locked
// (runtime.LockOSThread), so that per-thread host accounting (/proc/PID/task/
// TID/{comm,stat}, top -H, perf) can tell vCPU threads from the VMM's I/O
// threads; bench splits a VMM's CPU time by it, as QEMU's "CPU n/KVM" names
// (-name debug-threads=on) allow there. The kernel keeps at most 15 bytes.
//
// It returns a function that puts the old name back, to call before the thread
// is unlocked: Go reuses unlocked threads for other goroutines, which must not
// be counted as a vCPU. Naming is diagnostics only, so failures are ignored
// (a kernel without /proc/thread-self just leaves the name as it was).
func nameThread(name string) (restore func()) {
	old, err := os.ReadFile(threadCommPath)
	if err != nil {
		return func() {}
	}
	if err := os.WriteFile(threadCommPath, []byte(name), 0); err != nil {
		return func() {}
	}
	return func() { _ = os.WriteFile(threadCommPath, []byte(strings.TrimSuffix(string(old), "\n")), 0) }
}
