package e2e

// L3: govm's CI verdicts (docs/ci.md) with a real kernel: the default
// guest panics, warns, exits, hangs, powers off and reboots for real, and
// govm's status and JSON verdict say so.

import (
	"encoding/hex"

	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

// TestLinuxVerdicts boots the default guest once per way of ending. Each
// boot is seconds of emulated kernel on emulation-only hosts, so the cases
// run in parallel (as many as -parallel allows: GOMAXPROCS).
func TestLinuxVerdicts(t *testing.T) {
	kernel, initrd := needLinux(t)
	type verdictCase struct {
		name   string
		args   []string // after govm run -k KERNEL -i INITRD -m 128M --result FILE
		status int
		reason string // the verdict's exit_reason
		stdout string // a line the guest printed, proving it got there
		check  func(t *testing.T, v verdictJSON, p *guestrun.Proc)
	}
	cmd := func(s string) []string { return []string{"-p", "govm.cmd=" + hex.EncodeToString([]byte(s))} }
	cases := []verdictCase{
		{name: "exec status", args: []string{"--exec", "echo L3-EXEC $(uname -s); exit 7"},
			status: 7, reason: "debug-exit", stdout: "L3-EXEC Linux"},
		// --console virtio: Linux's console is hvc0 on govm's
		// virtio-console, and the command's output comes through it.
		{name: "exec on hvc0", args: []string{"--console", "virtio", "--exec", "echo L3-HVC $(cat /sys/class/tty/console/active); exit 3"},
			status: 3, reason: "debug-exit", stdout: "L3-HVC hvc0"},
		{name: "panic via pvpanic", args: cmd("echo L3-PANIC; echo c > /proc/sysrq-trigger"),
			status: statusPanic, reason: "panic", stdout: "L3-PANIC",
			check: func(t *testing.T, v verdictJSON, p *guestrun.Proc) {
				if !strings.Contains(v.Reason, "pvpanic") || !strings.Contains(p.Serial(), "sysrq: Trigger a crash") {
					t.Errorf("reason %q; want the pvpanic event after sysrq's crash", v.Reason)
				}
			}},
		{name: "warning with --fail-on warn", args: append([]string{"--fail-on", "warn"},
			cmd("mount -t debugfs debugfs /sys/kernel/debug && echo WARNING > /sys/kernel/debug/provoke-crash/DIRECT; echo L3-WARNED; poweroff -f")...),
			status: statusSplat, reason: "halt", stdout: "L3-WARNED",
			check: func(t *testing.T, v verdictJSON, p *guestrun.Proc) {
				if v.SplatCounts["warn"] != 1 || !strings.Contains(p.Serial(), "WARNING: CPU: 0 PID:") {
					t.Errorf("splat counts %v; want one real WARNING", v.SplatCounts)
				}
			}},
		{name: "timeout on a hung guest", args: append([]string{"--timeout", "45s"}, cmd("echo L3-HANG; sleep 1000")...),
			status: statusTimeout, reason: "timeout", stdout: "L3-HANG"},
		{name: "poweroff", args: cmd("echo L3-POWEROFF; poweroff"),
			status: 0, reason: "halt", stdout: "L3-POWEROFF",
			check: func(t *testing.T, v verdictJSON, p *guestrun.Proc) {
				// Linux without ACPI halts with interrupts off: govm
				// must see it within a second.
				_, halted, ok := p.LineAt("reboot: System halted")
				if d := p.ExitAfter() - halted; !ok || d > time.Second {
					t.Errorf("govm ended %v after the guest's \"System halted\" (seen %v); want within a second", d, ok)
				} else {
					t.Logf("poweroff: govm ended %v after the guest halted", d.Round(time.Millisecond))
				}
			}},
		{name: "reboot", args: cmd("echo L3-REBOOT; reboot"),
			status: 0, reason: "reset", stdout: "L3-REBOOT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := filepath.Join(t.TempDir(), "r.json")
			argv := append([]string{govmBin, "run", "-k", kernel, "-i", initrd, "-m", "128M", "--result", res}, c.args...)
			p, err := guestrun.Start(guestrun.Options{}, argv...)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Kill()
			status, err := p.Wait(180 * time.Second)
			if err != nil {
				t.Fatalf("govm did not end: %v\nconsole tail:\n%s", err, tail(p.Serial(), 2500))
			}
			v := readVerdict(t, res)
			t.Logf("%s: status %d after %v: %s", c.name, status, p.ExitAfter().Round(time.Millisecond), lastLine(p.Stderr()))
			if status != c.status || v.Status != c.status || v.ExitReason != c.reason || !strings.Contains(p.Serial(), c.stdout) {
				t.Fatalf("status %d, verdict %s/%d (%s); want %d, %s, and %q on the console\nconsole tail:\n%s\nstderr:\n%s",
					status, v.ExitReason, v.Status, v.Reason, c.status, c.reason, c.stdout, tail(p.Serial(), 2500), p.Stderr())
			}
			noWatchdogReports(t, p.Stderr())
			if c.check != nil {
				c.check(t, v, p)
			}
		})
	}
}
