package vmm

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Startup is what govm spent before the guest's first instruction: the
// process's CPU time (every thread, the Go runtime's included) when the
// first vCPU first entered KVM_RUN. Firecracker's start-up bar is stated
// in the same terms (CPU milliseconds to the first KVM_RUN).
type Startup struct {
	CPU time.Duration // user and system, all threads
}

func (s Startup) String() string {
	return fmt.Sprintf("startup: %.2f ms CPU before the first KVM_RUN", float64(s.CPU.Microseconds())/1000)
}

// startupRecord takes the sample once, from the first vCPU thread to run.
type startupRecord struct {
	once sync.Once
	mu   sync.Mutex
	s    Startup
	ok   bool
}

func (r *startupRecord) take() {
	r.once.Do(func() {
		// CLOCK_PROCESS_CPUTIME_ID rather than getrusage: the
		// sandbox, in place by now, allows clock_gettime.
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
			return // the sample is a report, never a reason to stop
		}
		r.mu.Lock()
		r.s = Startup{CPU: time.Duration(ts.Nano())}
		r.ok = true
		r.mu.Unlock()
	})
}

// Startup returns the start-up sample, false before the first KVM_RUN.
func (m *Machine) Startup() (Startup, bool) {
	m.startup.mu.Lock()
	defer m.startup.mu.Unlock()
	return m.startup.s, m.startup.ok
}
