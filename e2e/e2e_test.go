package e2e

// End-to-end (L1) tests: the govm binary boots the project's test kernel
// (guest/) on /dev/kvm and the kernel reports what it saw on the serial
// port. They need /dev/kvm and gcc; CI has both.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/kvm"
)

var (
	govmBin    string // path of the govm binary under test
	testKernel string // path of guest/build/bzImage
	setupErr   error
)

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "govm-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	setupErr = locateBinaries(tmp)
	code := m.Run()
	if n := guestrun.KillAll(); n > 0 {
		fmt.Fprintf(os.Stderr, "e2e: killed %d VMM(s) a test left running\n", n)
	}
	os.RemoveAll(tmp)
	os.Exit(code)
}

// locateBinaries finds (or builds) govm and the test kernel. make test
// passes both through the environment; a plain `go test` builds them.
func locateBinaries(tmp string) error {
	root := repoPath()
	govmBin = os.Getenv("GOVM_BIN")
	if govmBin == "" {
		govmBin = filepath.Join(tmp, "govm")
		out, err := exec.Command("go", "build", "-o", govmBin, repoPath("cmd", "govm")).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	testKernel = os.Getenv("GOVM_TEST_KERNEL")
	if testKernel == "" {
		testKernel = filepath.Join(root, "guest", "build", "bzImage")
		out, err := exec.Command("make", "-C", filepath.Join(root, "guest")).CombinedOutput()
		if err != nil {
			return fmt.Errorf("make -C guest: %v\n%s", err, out)
		}
	}
	return nil
}

// repoPath is elem joined below the repository's root (found from this
// file's directory, so it holds whatever the test's working directory).
func repoPath(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), ".."}, elem...)...)
}

// needKVM fails the test when the binaries could not be built and skips it,
// with the reason, only when the host has no /dev/kvm at all.
func needKVM(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("setting up e2e tests: %v", setupErr)
	}
	if _, err := os.Stat(kvm.DefaultPath); err != nil {
		t.Skipf("no %s on this host (%v): L1 tests boot a real VM", kvm.DefaultPath, err)
	}
}

// govm runs the govm binary with args and a generous timeout: the test
// kernel's CPL0 start-up is emulated on kvm_pvm hosts.
func govm(t *testing.T, timeout time.Duration, args ...string) *guestrun.Output {
	t.Helper()
	o, err := guestrun.Run(context.Background(), timeout, append([]string{govmBin}, args...)...)
	if err != nil {
		t.Fatalf("govm %v: %v", args, err)
	}
	if o.TimedOut {
		t.Fatalf("govm %v: timed out after %v\nserial:\n%s\nstderr:\n%s", args, timeout, o.Serial, o.Stderr)
	}
	return o
}

// bootTest boots the test kernel with the given command line (no govm
// defaults) and extra flags, and requires a clean SUMMARY with no failures
// and no skips.
func bootTest(t *testing.T, cmdline string, flags ...string) *guestrun.Output {
	t.Helper()
	args := append([]string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit", "-p", cmdline}, flags...)
	o := govm(t, 120*time.Second, args...)
	if err := o.Check(); err != nil {
		t.Fatalf("test kernel did not pass (exit %d): %v\nserial:\n%s\nstderr:\n%s", o.ExitCode, err, o.Serial, o.Stderr)
	}
	// All tests passed: the kernel writes 0 to the debug-exit port, which
	// govm turns into (0<<1)|1, like QEMU's isa-debug-exit.
	if o.ExitCode != 1 {
		t.Fatalf("exit status %d, want 1 (debug-exit value 0)\nstderr:\n%s", o.ExitCode, o.Stderr)
	}
	noWatchdogReports(t, o.Stderr)
	return o
}

func result(t *testing.T, o *guestrun.Output, name string) guestrun.Result {
	t.Helper()
	r, ok := o.Results[name]
	if !ok {
		t.Fatalf("no RESULT %s in serial output:\n%s", name, o.Serial)
	}
	if !r.Pass {
		t.Fatalf("RESULT %s %s: %v", name, r.Verdict(), r.KV)
	}
	return r
}
