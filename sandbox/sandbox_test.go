package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"on": On, "": On, "off": Off, "audit": Audit} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseMode("yes"); !errors.Is(err, ErrMode) {
		t.Errorf("ParseMode(yes) = %v, want ErrMode", err)
	}
	for _, m := range []Mode{On, Off, Audit} {
		if back, _ := ParseMode(m.String()); back != m {
			t.Errorf("%v does not round-trip", m)
		}
	}
}

// Every name in the list is a system call this architecture has (the
// library refuses unknown ones) and none is listed twice.
func TestFilterAssembles(t *testing.T) {
	for _, m := range []Mode{On, Audit} {
		f := Filter(m)
		if _, err := f.Policy.Assemble(); err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if !f.NoNewPrivs || f.Flag == 0 {
			t.Fatalf("%v: no_new_privs %v flag %v", m, f.NoNewPrivs, f.Flag)
		}
	}
	seen := map[string]bool{}
	for _, g := range allowed {
		for _, n := range g {
			if seen[n] {
				t.Errorf("%s listed twice", n)
			}
			seen[n] = true
		}
	}
	for _, never := range []string{"execve", "execveat", "fork", "vfork", "clone3", "ptrace", "mount", "init_module", "getpriority", "kexec_load"} {
		if seen[never] {
			t.Errorf("%s is allowed", never)
		}
	}
	t.Logf("allow-list: %d system calls", AllowListSize())
}

// The child half of the tests below: load the filter in this process (the
// test binary run again), then make the calls the parent asked for.
func init() {
	mode := os.Getenv("SANDBOX_TEST_CHILD")
	if mode == "" {
		return
	}
	m, _ := ParseMode(mode)
	if err := Install(m); err != nil {
		fmt.Println("install:", err)
		os.Exit(10)
	}
	// Allowed calls work: file I/O, a new thread (clone), a timer.
	f, err := os.CreateTemp("", "sandbox")
	if err != nil {
		fmt.Println("file:", err)
		os.Exit(11)
	}
	f.Write([]byte("x"))
	f.Sync()
	f.Close()
	os.Remove(f.Name())
	// New OS threads: goroutines locked to their threads, all alive at
	// once, make the runtime clone more.
	var wg, hold sync.WaitGroup
	hold.Add(1)
	for range 8 {
		wg.Add(1)
		go func() {
			runtime.LockOSThread()
			syscall.Gettid()
			wg.Done()
			hold.Wait()
		}()
	}
	wg.Wait()
	hold.Done()
	// A garbage collection, and the scavenger returning memory.
	_ = make([]byte, 64<<20)
	runtime.GC()
	debug.FreeOSMemory()
	fmt.Println("allowed calls ok")
	// Refused: fork (clone without CLONE_THREAD), then getpriority.
	if os.Getenv("SANDBOX_TEST_FORK") != "" {
		_, err := exec.Command("/bin/true").CombinedOutput()
		fmt.Println("fork:", err)
	}
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	fmt.Println("getpriority:", prio, err)
	os.Exit(0)
}

func runChild(t *testing.T, mode string, env ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "SANDBOX_TEST_CHILD="+mode), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// With the filter on, a call outside the list kills the process with
// the Go runtime's SIGSYS report naming the call; calls on the list work.
func TestOnRefuses(t *testing.T) {
	out, code := runChild(t, "on")
	if !strings.Contains(out, "allowed calls ok") {
		t.Fatalf("allowed calls failed (exit %d):\n%s", code, out)
	}
	if strings.Contains(out, "getpriority:") || !strings.Contains(out, "SIGSYS: bad system call") ||
		!strings.Contains(out, "unix.Getpriority") || code != 2 {
		t.Fatalf("getpriority was not refused with a SIGSYS report (exit %d):\n%s", code, out)
	}
}

// A fork (clone without CLONE_THREAD, as os/exec makes) is refused.
func TestOnRefusesFork(t *testing.T) {
	out, code := runChild(t, "on", "SANDBOX_TEST_FORK=1")
	if strings.Contains(out, "fork: <nil>") || !strings.Contains(out, "SIGSYS: bad system call") || code != 2 {
		t.Fatalf("fork was not refused (exit %d):\n%s", code, out)
	}
}

// Audit mode allows (and has the kernel log) what on refuses.
func TestAuditAllows(t *testing.T) {
	out, code := runChild(t, "audit")
	if !strings.Contains(out, "getpriority: ") || strings.Contains(out, "SIGSYS") || code != 0 {
		t.Fatalf("audit mode refused a call (exit %d):\n%s", code, out)
	}
}
