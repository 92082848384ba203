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

	"github.com/govm/govm/sandbox/probe"
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

// testParams are a child's Params: its pid, and descriptors it opens
// before the filter, as govm's API socket is.
func testParams(t testing.TB) Params { return Params{PID: os.Getpid(), Listener: 7, SocketDir: 8} }

// Every name in the list is a system call this architecture has (the
// library refuses unknown ones) and none is listed twice.
func TestFilterAssembles(t *testing.T) {
	for _, m := range []Mode{On, Audit} {
		f := Filter(m, testParams(t))
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
	for _, c := range conditioned(testParams(t)) {
		if seen[c.Name] {
			t.Errorf("%s is both unconditional and conditioned", c.Name)
		}
	}
	// What a compromised govm would want: none of it is allowed at all.
	for _, never := range []string{"execve", "execveat", "fork", "vfork", "clone3", "ptrace", "mount", "init_module",
		"getpriority", "kexec_load", "open", "openat", "openat2", "creat", "unlink", "rename", "renameat2", "mkdirat",
		"symlinkat", "linkat", "socket", "socketpair", "connect", "bind", "listen", "sendto", "sendmsg", "kill",
		"tkill", "prlimit64", "dup", "dup2", "dup3", "flock", "getdents64", "process_vm_readv", "process_vm_writev",
		"pidfd_open", "memfd_create", "mremap", "pkey_mprotect", "chmod", "fchmodat", "chown", "truncate"} {
		if seen[never] {
			t.Errorf("%s is allowed", never)
		}
		for _, c := range conditioned(testParams(t)) {
			if c.Name == never {
				t.Errorf("%s is allowed (with conditions)", never)
			}
		}
	}
	t.Logf("allow-list: %d system calls, %d of them with argument conditions", AllowListSize(testParams(t)), len(conditionedNames()))
}

func conditionedNames() map[string]bool {
	out := map[string]bool{}
	for _, c := range conditioned(Params{PID: 1, Listener: 3, SocketDir: 4}) {
		out[c.Name] = true
	}
	return out
}

// The child half of the tests below: load the filter in this process (the
// test binary run again) with the descriptors a govm has (an API listener
// and its directory), make the calls a running govm makes, then the one
// call the parent names, as a compromised device model would.
func init() {
	mode := os.Getenv("SANDBOX_TEST_CHILD")
	if mode == "" {
		return
	}
	m, _ := ParseMode(mode)
	dir, err := os.MkdirTemp("", "sandbox")
	if err != nil {
		fmt.Println("dir:", err)
		os.Exit(11)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(dir+"/stale", nil, 0o600)
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("dirfd:", err)
		os.Exit(11)
	}
	ln, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		err = unix.Bind(ln, &unix.SockaddrUnix{Name: dir + "/l.sock"})
	}
	if err == nil {
		err = unix.Listen(ln, 1)
	}
	if err != nil {
		fmt.Println("listener:", err)
		os.Exit(11)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		fmt.Println("pipe:", err)
		os.Exit(11)
	}
	if err := Install(m, Params{PID: os.Getpid(), Listener: ln, SocketDir: dirfd}); err != nil {
		fmt.Println("install:", err)
		os.Exit(10)
	}
	// Allowed calls work: I/O on descriptors opened before, new threads
	// (clone), a GC, signals to our own threads, the API's accept, the
	// socket's removal through its directory, a thread's name.
	pw.Write([]byte("x"))
	pr.Read(make([]byte, 1))
	if _, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC); err != unix.EAGAIN {
		fmt.Println("accept4:", err)
		os.Exit(12)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, "stale", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		fmt.Println("newfstatat:", err)
		os.Exit(12)
	}
	if err := unix.Unlinkat(dirfd, "stale", 0); err != nil {
		fmt.Println("unlinkat:", err)
		os.Exit(12)
	}
	if err := unix.Tgkill(os.Getpid(), unix.Gettid(), 0); err != nil {
		fmt.Println("tgkill:", err)
		os.Exit(12)
	}
	if _, err := unix.FcntlInt(pr.Fd(), unix.F_GETFL, 0); err != nil {
		fmt.Println("fcntl:", err)
		os.Exit(12)
	}
	_, _ = unix.IoctlGetTermios(0, unix.TCGETS) // ENOTTY on a pipe: allowed, just not a terminal
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
	_ = make([]byte, 64<<20)
	runtime.GC()
	debug.FreeOSMemory()
	fmt.Println("allowed calls ok")
	what := os.Getenv("SANDBOX_TEST_REFUSE")
	fmt.Printf("%s: %v\n", what, refusable(what, dir, dirfd))
	os.Exit(0)
}

// refusable makes one call a compromised govm would want (sandbox/probe,
// and the ones only this test makes; each harmless if allowed: signal 0,
// its own files only).
func refusable(name, dir string, dirfd int) error {
	switch name {
	case "fork":
		// ForkExec opens nothing before its clone (exec.Command would
		// open /dev/null, which fails first).
		_, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		return err
	case "unlink-elsewhere":
		return unix.Unlinkat(unix.AT_FDCWD, dir+"/l.sock", 0)
	case "rmdir-in-dir":
		return unix.Unlinkat(dirfd, ".", unix.AT_REMOVEDIR)
	case "fcntl-dup":
		_, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 100)
		return err
	}
	if known, err := probe.Call(name, dir); known {
		return err
	}
	return fmt.Errorf("unknown call %q", name)
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

// refused are the calls the tests below make after the calls govm needs.
var refused = []string{"getpriority", "fork", "unlink-elsewhere", "rmdir-in-dir", "socket",
	"tgkill-other", "kill", "mmap-exec", "mprotect-exec", "prlimit-other", "ioctl-other", "fcntl-dup", "dup"}

// TestOnRefuses plays the compromised device model: with the filter on,
// what a running govm needs works, and each call above then kills the
// process with the Go runtime's SIGSYS report; opening a path fails with
// EPERM.
func TestOnRefuses(t *testing.T) {
	for _, name := range []string{"create", "open"} {
		out, code := runChild(t, "on", "SANDBOX_TEST_REFUSE="+name)
		if !strings.Contains(out, name+": operation not permitted") || code != 0 {
			t.Errorf("%s did not fail with EPERM (exit %d):\n%s", name, code, out)
		}
	}
	for _, name := range refused {
		out, code := runChild(t, "on", "SANDBOX_TEST_REFUSE="+name)
		if !strings.Contains(out, "allowed calls ok") {
			t.Fatalf("%s: the calls govm needs failed (exit %d):\n%s", name, code, out)
		}
		if strings.Contains(out, name+":") || !strings.Contains(out, "SIGSYS: bad system call") || code != 2 {
			t.Errorf("%s was not refused with a SIGSYS report (exit %d):\n%s", name, code, out)
		}
	}
}

// Audit mode allows (and has the kernel log) what on refuses.
func TestAuditAllows(t *testing.T) {
	out, code := runChild(t, "audit", "SANDBOX_TEST_REFUSE=getpriority")
	if !strings.Contains(out, "getpriority: ") || strings.Contains(out, "SIGSYS") || code != 0 {
		t.Fatalf("audit mode refused a call (exit %d):\n%s", code, out)
	}
}
