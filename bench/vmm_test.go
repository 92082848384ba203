package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

// What every benchmark shares: where the binaries and the test kernel are, the
// two VMMs' command lines, and one checked run.

// guestRAMMB is the guest RAM both VMMs are given; SplitRSS uses it to find the
// guest RAM mapping.
const guestRAMMB = 256

// benchTimeout bounds each VMM run. Guest CPL0 code is emulated on our hosts (~1M
// instructions/s), so def is generous for the test kernel but not for a stock
// Linux. GOVM_BENCH_TIMEOUT (a Go duration) overrides it.
func benchTimeout(b testing.TB, def time.Duration) time.Duration {
	if s := os.Getenv("GOVM_BENCH_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("GOVM_BENCH_TIMEOUT=%q: %v", s, err)
		}
		return d
	}
	return def
}

// locate returns the file named by env var key, or def (relative to this
// package's directory, where go test runs), skipping the benchmark if it is absent.
func locate(b testing.TB, key, def, what string) string {
	p := os.Getenv(key)
	if p == "" {
		p = def
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		b.Fatalf("%s: %v", p, err)
	}
	if _, err := os.Stat(abs); err != nil {
		b.Skipf("%s not found at %s (build it, or set %s): %v", what, abs, key, err)
	}
	return abs
}

func testKernel(b testing.TB) string {
	return locate(b, "GOVM_TEST_KERNEL", "../guest/build/bzImage", "test kernel")
}

// govmArgv is the govm command line, with the same guest RAM as QEMU, then
// extra, then GOVM_ARGS (space-separated).
func govmArgv(b testing.TB, kernel, cmdline string, extra ...string) []string {
	bin := locate(b, "GOVM_BIN", "../bin/govm", "govm binary")
	argv := []string{bin, "run", "--kernel", kernel, "-m", fmt.Sprintf("%dM", guestRAMMB),
		"-p", cmdline, "--debug-exit"}
	argv = append(argv, extra...)
	return append(argv, strings.Fields(os.Getenv("GOVM_ARGS"))...)
}

// qemuArgv is guestrun.QEMUArgs, the fastest QEMU configuration for a small
// guest on our hosts (HOST.md: qboot instead of SeaBIOS, no default devices,
// serial on stdout), with the binary from QEMU_BIN or $PATH.
func qemuArgv(b testing.TB, kernel, cmdline string, extra ...string) []string {
	bin := os.Getenv("QEMU_BIN")
	if bin == "" {
		bin = "qemu-system-x86_64"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		b.Skipf("QEMU not found (apt-get install qemu-system-x86, or set QEMU_BIN): %v", err)
	}
	argv := guestrun.QEMUArgs(kernel, cmdline, guestRAMMB, extra...)
	for _, a := range argv {
		if strings.HasSuffix(a, ".rom") {
			if _, err := os.Stat(a); err != nil {
				b.Skipf("%s not found (package qemu-system-data): %v", a, err)
			}
		}
	}
	argv[0] = path
	return argv
}

// runChecked runs argv to completion and checks that the guest really passed:
// debug-exit code 0 and a clean RESULT/SUMMARY report. A number from a guest that
// failed, or a first byte that was an error message, is not a measurement.
func runChecked(argv []string, timeout time.Duration) (*VMM, *guestrun.Output, error) {
	v, err := Start(argv...)
	if err != nil {
		return nil, nil, err
	}
	defer v.Kill()
	status, err := v.Wait(timeout)
	o := v.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("%w\nserial: %q\nstderr: %s", err, o.Serial, o.Stderr)
	}
	if code, ok := guestrun.DebugExit(status); !ok || code != 0 {
		return nil, nil, fmt.Errorf("exit status %d is not debug-exit code 0\nserial: %q\nstderr: %s",
			status, o.Serial, o.Stderr)
	}
	if err := o.Check(); err != nil {
		return nil, nil, fmt.Errorf("%w\nserial: %q", err, o.Serial)
	}
	return v, o, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mb(kb int64) float64        { return float64(kb) / 1024 }
