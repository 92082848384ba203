package e2e

// E2e tests of the CI boot smoke-test features (issue 11): the test kernel's
// smoke tests (guest/tests/smoke.c) print Linux-like console lines and use
// the exit paths a Linux guest would.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/splat"
)

// smokeOut is one govm run.
type smokeOut struct {
	stdout, stderr string
	status         int
}

// runSmoke runs govm in dir (the test's working directory if "") with stdin
// from /dev/null, as CI does, and a generous limit for loaded hosts.
func runSmoke(t *testing.T, dir string, args ...string) smokeOut {
	t.Helper()
	return runSmokeTo(t, dir, nil, args...)
}

// runSmokeTo is runSmoke with govm's stdout on f (captured when f is nil).
func runSmokeTo(t *testing.T, dir string, f *os.File, args ...string) smokeOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, govmBin, args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if f != nil {
		cmd.Stdout = f
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("govm %v did not end within 180s\nstdout:\n%s\nstderr:\n%s", args, o.String(), e.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("govm %v: %v", args, err)
	}
	return smokeOut{o.String(), e.String(), cmd.ProcessState.ExitCode()}
}

// smokeArgs boots the test kernel with cmdline and govm's debug-exit.
func smokeArgs(cmdline string, extra ...string) []string {
	return append([]string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit", "-m", "64M", "-p", cmdline}, extra...)
}

// lastLine is govm's final message (its one-line reason).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// verdictJSON is the --result file as a test reads it.
type verdictJSON struct {
	Version     int                `json:"version"`
	ExitReason  string             `json:"exit_reason"`
	Status      int                `json:"status"`
	Reason      string             `json:"reason"`
	GuestCode   *int               `json:"guest_code"`
	Splats      []splat.Splat      `json:"splats"`
	SplatCounts map[string]int     `json:"splat_counts"`
	PhasesMS    map[string]float64 `json:"phases_ms"`
	Devices     []struct {
		Name     string         `json:"name"`
		Counters map[string]any `json:"counters"`
	} `json:"devices"`
	ConsoleBytes uint64  `json:"console_bytes"`
	Exec         *string `json:"exec"`
}

func readVerdict(t *testing.T, path string) verdictJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v verdictJSON
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("--result is not JSON: %v\n%s", err, b)
	}
	return v
}

// TestTimeout: a guest that never ends (the console test waits for input
// that never comes) is stopped after --timeout with status 124 and one
// line.
func TestTimeout(t *testing.T) {
	needKVM(t)
	res := filepath.Join(t.TempDir(), "r.json")
	o := runSmoke(t, "", smokeArgs("test=console", "--timeout", "3s", "--result", res)...)
	if o.status != statusTimeout {
		t.Fatalf("status %d, want 124\nstderr:\n%s", o.status, o.stderr)
	}
	if l := lastLine(o.stderr); !strings.HasPrefix(l, "govm: timeout: ") || !strings.Contains(l, "3s") {
		t.Fatalf("last line %q, want govm: timeout: ... 3s ...", l)
	}
	if v := readVerdict(t, res); v.ExitReason != "timeout" || v.Status != 124 {
		t.Fatalf("verdict exit_reason %q status %d", v.ExitReason, v.Status)
	}
}

// TestPanicLine: a guest that prints a panic line and then resets through
// the i8042 (what panic=1 reboot=k does) fails with the panic status, and
// the reason quotes the panic line.
func TestPanicLine(t *testing.T) {
	needKVM(t)
	o := runSmoke(t, "", smokeArgs("test=panic")...)
	if o.status != statusPanic {
		t.Fatalf("status %d, want %d\nstderr:\n%s", o.status, statusPanic, o.stderr)
	}
	want := `govm: guest kernel panic: "Kernel panic - not syncing: govm smoke test"`
	if l := lastLine(o.stderr); l != want {
		t.Fatalf("last line\n%q, want\n%q", l, want)
	}
}

// TestPanicSpin: a guest that spins after its panic line is stopped after
// --panic-grace, still with the panic status.
func TestPanicSpin(t *testing.T) {
	needKVM(t)
	o := runSmoke(t, "", smokeArgs("test=panic panic.after=spin", "--panic-grace", "2s")...)
	if o.status != statusPanic {
		t.Fatalf("status %d, want %d\nstderr:\n%s", o.status, statusPanic, o.stderr)
	}
	if l := lastLine(o.stderr); !strings.Contains(l, "Kernel panic - not syncing: govm smoke test") || !strings.Contains(l, "after its panic line") {
		t.Fatalf("last line %q", l)
	}
}

// TestPanicBeatsGuestStatus: a guest that panics but then reports success
// through debug-exit still fails.
func TestPanicBeatsGuestStatus(t *testing.T) {
	needKVM(t)
	o := runSmoke(t, "", smokeArgs("test=panic panic.after=exit")...)
	if o.status != statusPanic {
		t.Fatalf("status %d, want %d\nstderr:\n%s", o.status, statusPanic, o.stderr)
	}
}

// TestSplatClasses: each splat class the test kernel prints is recognised
// (reported in the verdict and on stderr, status unchanged), and
// --fail-on=CLASS makes exactly that class fail the run.
func TestSplatClasses(t *testing.T) {
	needKVM(t)
	kinds := []splat.Kind{splat.Bug, splat.Oops, splat.Warn, splat.KASAN, splat.UBSAN,
		splat.Lockdep, splat.Hung, splat.SoftLockup, splat.RCUStall}
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			dir := t.TempDir()
			res := filepath.Join(dir, "r.json")
			// Reported only: the guest passes, govm keeps its status.
			o := runSmoke(t, "", smokeArgs("test=splat splat.kinds="+string(k), "--result", res)...)
			if o.status != 1 {
				t.Fatalf("without --fail-on: status %d, want 1 (guest passed)\nstderr:\n%s", o.status, o.stderr)
			}
			v := readVerdict(t, res)
			if len(v.Splats) != 1 || v.Splats[0].Kind != k || v.SplatCounts[string(k)] != 1 {
				t.Fatalf("splats %+v counts %v, want one %s", v.Splats, v.SplatCounts, k)
			}
			if !strings.Contains(o.stderr, "govm: guest console splats: "+string(k)+" x1") {
				t.Fatalf("stderr does not report the splat:\n%s", o.stderr)
			}
			// Failing: --fail-on names the class.
			o = runSmoke(t, "", smokeArgs("test=splat splat.kinds="+string(k), "--fail-on", "oops,"+string(k))...)
			if o.status != statusSplat {
				t.Fatalf("--fail-on %s: status %d, want %d\nstderr:\n%s", k, o.status, statusSplat, o.stderr)
			}
			if l := lastLine(o.stderr); !strings.Contains(l, "guest kernel "+string(k)+" splat (--fail-on): ") {
				t.Fatalf("last line %q", l)
			}
		})
	}
	// Another class does not fail a run.
	o := runSmoke(t, "", smokeArgs("test=splat splat.kinds=warn", "--fail-on", "bug,kasan")...)
	if o.status != 1 {
		t.Fatalf("warn with --fail-on bug,kasan: status %d, want 1\nstderr:\n%s", o.status, o.stderr)
	}
	// all = every class.
	o = runSmoke(t, "", smokeArgs("test=splat splat.kinds=rcu", "--fail-on", "all")...)
	if o.status != statusSplat {
		t.Fatalf("--fail-on all: status %d\nstderr:\n%s", o.status, o.stderr)
	}
}

func TestFailOnBadInput(t *testing.T) {
	needKVM(t)
	o := runSmoke(t, "", smokeArgs("test=boot", "--fail-on", "warn,nonsense")...)
	if o.status != 2 || !strings.Contains(o.stderr, `--fail-on "nonsense"`) || strings.Count(o.stderr, "\n") != 1 {
		t.Fatalf("status %d stderr %q, want 2 and one line naming the class", o.status, o.stderr)
	}
}

// TestPVPanic: the test kernel finds the pvpanic PCI device, reads its
// capabilities and reports a panic through it without printing any panic
// line; govm stops at once with the panic status (the 1h grace period
// and the 120s timeout never come into play).
func TestPVPanic(t *testing.T) {
	needKVM(t)
	res := filepath.Join(t.TempDir(), "r.json")
	o := runSmoke(t, "", smokeArgs("test=pvpanic", "--panic-grace", "1h", "--timeout", "120s", "--result", res)...)
	if o.status != statusPanic {
		t.Fatalf("status %d, want %d\nserial:\n%s\nstderr:\n%s", o.status, statusPanic, o.stdout, o.stderr)
	}
	if !strings.Contains(o.stdout, "RESULT pvpanic pass found=1") || !strings.Contains(o.stdout, "caps=0x3") {
		t.Fatalf("guest did not find the device:\n%s", o.stdout)
	}
	v := readVerdict(t, res)
	if v.ExitReason != "panic" || !strings.Contains(v.Reason, "pvpanic") || len(v.Splats) != 0 {
		t.Fatalf("verdict %q %q splats %v", v.ExitReason, v.Reason, v.Splats)
	}
	found := false
	for _, d := range v.Devices {
		if d.Name == "pvpanic" {
			found = d.Counters["panicked"] == float64(1)
		}
	}
	if !found {
		t.Fatalf("devices %+v: want pvpanic panicked 1", v.Devices)
	}
	// Without the device the guest finds nothing and says so.
	o = runSmoke(t, "", smokeArgs("test=pvpanic", "--no-pvpanic")...)
	if o.status != 3 || !strings.Contains(o.stdout, "RESULT pvpanic fail found=0") {
		t.Fatalf("--no-pvpanic: status %d\n%s", o.status, o.stdout)
	}
}
