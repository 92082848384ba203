package bench

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// QEMU's vCPU thread with debug-threads=on; comm with ") " inside.
	line := "4242 (CPU 0/KVM) S 1 4242 4242 0 -1 4194624 300 0 0 0 150 25 0 0 20 0 3 0 1000 0 0"
	comm, cpu, err := parseStat(line)
	if err != nil || comm != "CPU 0/KVM" || cpu != 175*clockTick {
		t.Errorf("parseStat = %q %v %v, want CPU 0/KVM 1.75s", comm, cpu, err)
	}
	comm, cpu, err = parseStat("7 (a) b) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 0 0 0")
	if err != nil || comm != "a) b" || cpu != 7*clockTick {
		t.Errorf("parseStat = %q %v %v, want \"a) b\" 70ms", comm, cpu, err)
	}
	for _, bad := range []string{"", "1 (x R 1", "1 (x) R 1 2 3", "1 (x) R 1 1 1 0 -1 0 0 0 0 0 u s"} {
		if _, _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
	for comm, want := range map[string]bool{"vcpu0": true, "CPU 1/KVM": true, "govm": false,
		"qemu-system-x86": false, "CPU 0/TCG": false, "worker": false} {
		if IsVCPUThread(comm) != want {
			t.Errorf("IsVCPUThread(%q) = %v", comm, !want)
		}
	}
}

// TestReadCPU: this process has no vCPU thread, which is an error; once a
// locked thread is named vcpu0 and burns CPU, its time is split out.
func TestReadCPU(t *testing.T) {
	pid := os.Getpid()
	if _, err := ReadCPU(pid); !errors.Is(err, ErrNoVCPUThread) {
		t.Fatalf("ReadCPU without a vCPU thread: %v, want ErrNoVCPUThread", err)
	}
	named, release := make(chan error), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: Go retires the renamed thread
		named <- os.WriteFile("/proc/thread-self/comm", []byte("vcpu0"), 0)
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		}
		<-release
	}()
	if err := <-named; err != nil {
		t.Skipf("cannot name a thread: %v", err)
	}
	s, err := ReadCPU(pid)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if s.Threads != 1 || s.VCPU < 0 || s.VCPU > s.Total || s.Rest() != s.Total-s.VCPU {
		t.Errorf("ReadCPU = %+v, want one vCPU thread within the total", s)
	}
	d := s.Sub(CPUSample{Total: clockTick, VCPU: 0})
	if d.Total != s.Total-clockTick || d.VCPU != s.VCPU {
		t.Errorf("Sub = %+v", d)
	}
}
