package vmm

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestNameThread: the locked thread carries the name while it runs guest code
// and gets its old name back before it returns to Go's pool.
func TestNameThread(t *testing.T) {
	if _, err := os.Stat(threadCommPath); err != nil {
		t.Skipf("no %s (Linux before 3.17?): %v", threadCommPath, err)
	}
	comm := func() string {
		b, _ := os.ReadFile(threadCommPath)
		return strings.TrimSuffix(string(b), "\n")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before := comm()
		restore := nameThread("vcpu7")
		if got := comm(); got != "vcpu7" {
			t.Errorf("thread name %q after nameThread, want vcpu7", got)
		}
		restore()
		if got := comm(); got != before {
			t.Errorf("thread name %q after restore, want %q", got, before)
		}
	}()
	<-done
}
