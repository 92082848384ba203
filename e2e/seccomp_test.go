package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/sandbox/probe"
)

// seccompField returns the Seccomp: line of /proc/PID/status.
func seccompField(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Seccomp:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "Seccomp:"))
		}
	}
	t.Fatal("no Seccomp: line in /proc/PID/status")
	return ""
}

// TestSeccompStatus: a running govm is in seccomp filter mode (2) by
// default, on every thread (TSYNC), and in mode 0 with --seccomp=off.
// The console guest is quit by typing "quit", a path with stdin reads,
// console writes and the exit under the filter.
func TestSeccompStatus(t *testing.T) {
	needKVM(t)
	for _, c := range []struct {
		flag, want string
	}{{"", "2"}, {"--seccomp=off", "0"}, {"--seccomp=on", "2"}} {
		args := []string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit", "-p", "test=console"}
		if c.flag != "" {
			args = append(args, c.flag)
		}
		// GOVM_SECCOMP empty: the default, whatever the caller's
		// environment says.
		t.Setenv("GOVM_SECCOMP", "")
		// An *os.File, so exec hands it to govm directly and waits for
		// no copying goroutine at exit.
		in, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		p, err := guestrun.Start(guestrun.Options{Stdin: in}, append([]string{govmBin}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		in.Close()
		t.Cleanup(func() { p.Kill(); w.Close() })
		// The filter goes on just before the vCPUs run: wait for the
		// guest's first console bytes.
		if _, err := p.FirstByte(60 * time.Second); err != nil {
			t.Fatalf("%q: %v\n%s", c.flag, err, p.Stderr())
		}
		pid := p.Cmd.Process.Pid
		if got := seccompField(t, pid); got != c.want {
			t.Fatalf("%q: Seccomp: %s, want %s", c.flag, got, c.want)
		}
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
			if !strings.Contains(string(b), "Seccomp:\t"+c.want+"\n") {
				t.Fatalf("%q: thread %s is not in seccomp mode %s", c.flag, task.Name(), c.want)
			}
		}
		w.Write([]byte("quit\r"))
		if st, err := p.Wait(60 * time.Second); err != nil || st != 1 {
			t.Fatalf("%q: exit %d (%v), want 1\nserial:\n%s\nstderr:\n%s", c.flag, st, err, p.Serial(), p.Stderr())
		}
	}
}

// TestSeccompRefuses plays the compromised device model against the real
// govm: with its filter on (its own descriptors in the conditions), each
// call a device bug could be turned into (the hidden probe hook makes one
// after the filter is loaded) kills govm with the Go runtime's SIGSYS
// report; in audit mode the same call is allowed.
func TestSeccompRefuses(t *testing.T) {
	needKVM(t)
	run := func(mode, probe string) (string, int) {
		cmd := exec.Command(govmBin, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
			"-p", "test=boot", "--seccomp="+mode, "--name", uniqueName(t))
		cmd.Env = append(os.Environ(), "GOVM_TEST_SECCOMP_PROBE="+probe)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	for _, probe := range []string{"getpriority", "unlink", "socket", "tgkill-other", "kill",
		"mmap-exec", "mprotect-exec", "prlimit-other", "ioctl-other", "dup", "execve"} {
		out, code := run("on", probe)
		if code != 2 || !strings.Contains(out, "SIGSYS: bad system call") || strings.Contains(out, "seccomp probe "+probe+":") {
			t.Errorf("probe %s was not refused (exit %d):\n%s", probe, code, out)
		}
	}
	// Opening a path fails with EPERM (a cgo build's glibc tries one
	// when a thread starts, and copes), and the guest runs on.
	for _, probe := range []string{"open", "create"} {
		out, code := run("on", probe)
		if code != 1 || !strings.Contains(out, "govm: seccomp probe "+probe+": operation not permitted") {
			t.Errorf("probe %s was not refused with EPERM (exit %d):\n%s", probe, code, out)
		}
	}
	out, code := run("audit", "getpriority")
	if code != 1 || !strings.Contains(out, "govm: seccomp probe getpriority: <nil>") || strings.Contains(out, "SIGSYS") {
		t.Fatalf("audit mode refused the probe (exit %d):\n%s", code, out)
	}
	if out, code = run("bogus", "getpriority"); code != 2 || !strings.Contains(out, "--seccomp") {
		t.Fatalf("bad --seccomp value: exit %d:\n%s", code, out)
	}
}

// TestShareSandbox: with --share the filter must allow the name operations
// a 9P server makes (unlinkat among them), which it cannot judge by path;
// Landlock then keeps govm inside the shares. The unlink probe, refused by
// the filter without shares (TestSeccompRefuses), now reaches the kernel
// and is refused there, and the file outside the shares stays.
func TestShareSandbox(t *testing.T) {
	needKVM(t)
	victim := filepath.Join(os.TempDir(), probe.Created)
	if err := os.WriteFile(victim, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(victim)
	cmd := exec.Command(govmBin, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
		"-p", "test=boot", "--share", t.TempDir(), "--name", uniqueName(t))
	cmd.Env = append(os.Environ(), "GOVM_TEST_SECCOMP_PROBE=unlink")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "govm: seccomp probe unlink: permission denied") {
		t.Fatalf("the unlink probe with a share: exit %d, want 1 with EACCES from Landlock:\n%s", code, out)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the file outside the share was removed: %v", err)
	}
}
