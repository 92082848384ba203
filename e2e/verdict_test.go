package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govm/govm/api"
	"github.com/govm/govm/internal/guestrun"
)

// TestVerdictFields checks every field of --result and --console-log on a
// run with a disk (device counters), a ready marker, and the marker test:
// a fake "Linux version" banner, marker.ms of guest time, "Run /init",
// marker.ms again, the marker.
func TestVerdictFields(t *testing.T) {
	needKVM(t)
	dir := t.TempDir()
	res, log := filepath.Join(dir, "r.json"), filepath.Join(dir, "console.log")
	img := filepath.Join(dir, "disk.img")
	if err := guestrun.WritePatternImage(img, 8<<20); err != nil {
		t.Fatal(err)
	}
	const ms = 400
	o := runSmoke(t, "", smokeArgs("test=marker marker.ms=400 marker.text=SMOKE-READY",
		"--ready-marker", "SMOKE-READY", "--result", res, "--console-log", log, "--disk", img)...)
	if o.status != 1 {
		t.Fatalf("status %d, want 1\nstderr:\n%s", o.status, o.stderr)
	}
	v := readVerdict(t, res)
	if v.Version != 2 || v.ExitReason != "debug-exit" || v.Status != 1 || v.GuestCode == nil || *v.GuestCode != 0 {
		t.Fatalf("verdict version %d exit_reason %q status %d guest_code %v", v.Version, v.ExitReason, v.Status, v.GuestCode)
	}
	if !strings.Contains(v.Reason, "debug-exit") || len(v.Splats) != 0 || len(v.SplatCounts) != 0 {
		t.Fatalf("reason %q splats %v", v.Reason, v.Splats)
	}
	if v.ConsoleBytes != uint64(len(o.stdout)) {
		t.Fatalf("console_bytes %d, stdout has %d", v.ConsoleBytes, len(o.stdout))
	}
	p := v.PhasesMS
	order := []string{"vm_start", "first_console_byte", "linux_version", "init", "ready", "exit"}
	for i, k := range order {
		if _, ok := p[k]; !ok {
			t.Fatalf("phases_ms has no %s: %v", k, p)
		}
		if i > 0 && p[k] < p[order[i-1]] {
			t.Fatalf("phases_ms %s (%v) before %s (%v)", k, p[k], order[i-1], p[order[i-1]])
		}
	}
	// The guest waits marker.ms by its TSC between the lines, so the host
	// sees at least that much (minus TSC calibration error, a few %)
	// between them: a lower bound, whatever the host's load.
	if d := p["ready"] - p["init"]; d < ms*0.9 {
		t.Fatalf("ready - init = %.1f ms, the guest waited %d ms", d, ms)
	}
	if d := p["init"] - p["linux_version"]; d < ms*0.9 {
		t.Fatalf("init - linux_version = %.1f ms, the guest waited %d ms", d, ms)
	}
	var disk, pv bool
	for _, d := range v.Devices {
		if strings.HasPrefix(d.Name, "disk 0") {
			// The transport's counters and the queue's snapshot, under
			// the names the API uses (docs/result.md, version 2).
			qs, _ := d.Counters["queues"].([]any)
			if q, ok := firstMap(qs); ok && d.Counters["kicks_eventfd"] != nil {
				disk = q["name"] == "requests" && q["chains"] != nil && q["interrupts_wanted"] != nil
			}
		}
		if d.Name == "pvpanic" {
			_, pv = d.Counters["panicked"]
		}
	}
	if !disk || !pv {
		t.Fatalf("devices %+v: want disk 0's transport counters and request queue, and pvpanic", v.Devices)
	}
	b, err := os.ReadFile(log)
	if err != nil || string(b) != o.stdout {
		t.Fatalf("--console-log differs from stdout (%v):\n%q\n%q", err, b, o.stdout)
	}

	// Without --ready-marker there is no ready phase.
	o = runSmoke(t, "", smokeArgs("test=marker marker.ms=10", "--result", res)...)
	if v := readVerdict(t, res); o.status != 1 || v.PhasesMS["ready"] != 0 {
		t.Fatalf("status %d, ready %v without a marker", o.status, v.PhasesMS["ready"])
	}
}

// TestConsoleLogClosedStdout: the log and the watcher keep everything even
// when stdout is gone.
func TestConsoleLogClosedStdout(t *testing.T) {
	needKVM(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "console.log")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // every write to stdout fails with EPIPE
	defer w.Close()
	out := runSmokeTo(t, "", w, smokeArgs("test=panic", "--console-log", log)...)
	if out.status != statusPanic {
		t.Fatalf("status %d, want %d (the watcher must see the console without stdout)\nstderr:\n%s", out.status, statusPanic, out.stderr)
	}
	b, _ := os.ReadFile(log)
	if !strings.Contains(string(b), "Kernel panic - not syncing: govm smoke test") {
		t.Fatalf("console log:\n%s", b)
	}
}

// TestVerdictSetupFailure: a VM that cannot be created still leaves a
// verdict for the CI job to archive.
func TestVerdictSetupFailure(t *testing.T) {
	needKVM(t)
	dir := t.TempDir()
	notKernel, res := filepath.Join(dir, "not-a-kernel"), filepath.Join(dir, "r.json")
	if err := os.WriteFile(notKernel, []byte("just text, no boot header\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := runSmoke(t, "", "run", "-k", notKernel, "--result", res)
	v := readVerdict(t, res)
	if o.status != 2 || v.ExitReason != "setup" || v.Status != 2 || !strings.Contains(lastLine(o.stderr), v.Reason) {
		t.Fatalf("status %d, verdict %+v, stderr %q", o.status, v, o.stderr)
	}

	// Every way the set-up can fail after --result is opened writes the
	// verdict (these left a 0-byte file): a bad --seccomp, an
	// --api-socket that cannot be made, a socket in use.
	sock := filepath.Join(dir, "in-use.sock")
	l, lsock, err := api.Listen(sock, false)
	if err != nil {
		t.Fatal(err)
	}
	defer lsock.Close()
	srv := api.Serve(l, stayingVM{})
	defer srv.Close()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"bad --seccomp", []string{"--seccomp", "maybe"}, "--seccomp"},
		{"bad --api-socket", []string{"--api-socket", filepath.Join(notKernel, "x.sock")}, "--api-socket"}, // under a file
		{"socket in use", []string{"--api-socket", sock}, "already running"},
	} {
		res := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
		o := runSmoke(t, "", append([]string{"run", "-k", testKernel, "--result", res}, c.args...)...)
		v := readVerdict(t, res)
		if o.status != 2 || v.ExitReason != "setup" || v.Status != 2 || !strings.Contains(v.Reason, c.want) {
			t.Errorf("%s: status %d, verdict %+v, stderr %q", c.name, o.status, v, o.stderr)
		}
	}
}

// firstMap is the first element of a JSON array as an object.
func firstMap(a []any) (map[string]any, bool) {
	if len(a) == 0 {
		return nil, false
	}
	m, ok := a[0].(map[string]any)
	return m, ok
}
