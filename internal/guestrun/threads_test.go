package guestrun

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestThreadsAndShare: our own threads are listed with their scheduler
// times, a busy loop shows up as run time of a non-vCPU thread, and a
// process that is gone has no threads.
func TestThreadsAndShare(t *testing.T) {
	before := Threads(os.Getpid())
	if len(before) == 0 {
		t.Fatal("no threads listed for the test process")
	}
	for _, th := range before {
		if th.TID == 0 || th.Name == "" || th.State == "" {
			t.Fatalf("incomplete thread %+v", th)
		}
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	s := Share(before, Threads(os.Getpid()))
	if s.OtherRun <= 0 || s.VCPURun != 0 {
		t.Fatalf("after a busy loop: %v, want run time on non-vCPU threads only", s)
	}
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Skip(err)
	}
	if th := Threads(c.Process.Pid); len(th) != 0 {
		t.Fatalf("reaped pid %d has threads %+v", c.Process.Pid, th)
	}
}
