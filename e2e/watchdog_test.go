package e2e

// E2e tests of the lost-notification watchdog (watchdog/, --watchdog,
// GOVM_FAULTS): each injected fault is named, on the right queue and side,
// and with --watchdog-recover the guest completes; a driver that does not
// service its interrupt is a stuck ISR; the blk and flood tests elsewhere
// assert the watchdog stays silent (noWatchdogReports).

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/api"
	"github.com/govm/govm/internal/netnstest"
	"github.com/govm/govm/internal/syncbuf"
)

// testWatchdogT is the watchdog period the tests use: short, so a test
// does not wait long, and still far above a kick's or an interrupt's
// delivery time even on a loaded host.
const testWatchdogT = "300ms"

// noWatchdogReports fails the test if govm's watchdog reported anything:
// a healthy guest on a healthy govm loses no notification.
func noWatchdogReports(t *testing.T, stderr string) {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "govm: watchdog:") {
			t.Errorf("watchdog false positive: %s", l)
		}
	}
}

// watchdogVM runs the test kernel's blk-qd at queue depth 1 (a kick and
// an interrupt per request, the device asleep between them) on a pattern
// disk, then its console test (so the guest lives on after the I/O), with
// GOVM_FAULTS and extra flags, until stderr matches every pattern in want.
func watchdogVM(t *testing.T, faults string, want []*regexp.Regexp, flags ...string) *consoleVM {
	t.Helper()
	img := filepath.Join(t.TempDir(), "d.img")
	makePatternDisk(t, img, 8<<20)
	args := append([]string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit", "-p", "test=blk-qd,console blk.qd=1 blk.sectors=64",
		"--disk", img, "--watchdog", testWatchdogT, "--api-socket", "none"}, flags...)
	vm := startConsoleVMArgs(t, args, "GOVM_FAULTS="+faults)
	for _, re := range want {
		end := time.Now().Add(90 * time.Second)
		for !re.MatchString(vm.stderr.String()) {
			if time.Now().After(end) {
				t.Fatalf("no line matching %v within 90 s\nserial:\n%s\nstderr:\n%s", re, vm.stdout, vm.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return vm
}

func TestWatchdogFaults(t *testing.T) {
	needKVM(t)
	for _, tc := range []struct {
		name, faults, kind, side string
	}{
		{"drop-irq", "drop-irq=2", "lost_interrupt", "at fault: host"},
		{"drop-kick", "drop-kick=2", "lost_kick", "at fault: driver or transport"},
		{"delay-irq", "delay-irq=5s", "lost_interrupt", "at fault: host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The report names the kind, the disk's queue 0 and its
			// ring fields, and the side.
			report := regexp.MustCompile(`govm: watchdog: ` + tc.kind + ` on disk 0 \(.*\) queue 0 \(requests\): .*avail idx \d+ used idx \d+ seen \d+, avail flags 0x[0-9a-f]+ used flags 0x[0-9a-f]+, used_event \d+ avail_event \d+ \(event_idx on\), ISR 0x[0-9a-f]+; ` + regexp.QuoteMeta(tc.side))
			vm := watchdogVM(t, tc.faults, []*regexp.Regexp{report})
			if tc.name != "delay-irq" && !strings.Contains(vm.stderr.String(), "fault injection: ") {
				t.Fatalf("no fault injection line:\n%s", vm.stderr)
			}
			if n := strings.Count(vm.stderr.String(), "govm: watchdog: "); n != 1 {
				t.Errorf("%d watchdog lines for one fault, want 1:\n%s", n, vm.stderr)
			}
			_ = vm.cmd.Process.Kill()

			// With --watchdog-recover the guest also completes.
			vm = watchdogVM(t, tc.faults, []*regexp.Regexp{report,
				regexp.MustCompile(`govm: watchdog: recovering ` + tc.kind + ` on disk 0 .* queue 0`)}, "--watchdog-recover")
			waitFor(t, 60*time.Second, "the blk-qd result", func() bool { return strings.Contains(vm.stdout.String(), "RESULT blk-qd ") })
			if !strings.Contains(vm.stdout.String(), "RESULT blk-qd pass") {
				t.Fatalf("with --watchdog-recover the guest failed:\n%s\nstderr:\n%s", vm.stdout, vm.stderr)
			}
			_, _ = vm.in.Write([]byte("quit\r"))
			if st := waitExit(t, vm.cmd, 60*time.Second); st != 1 {
				t.Fatalf("exit %d, want 1 (all passed)\nserial:\n%s\nstderr:\n%s", st, vm.stdout, vm.stderr)
			}
		})
	}
}

// TestWatchdogStuckISR: a driver listening on the wrong IRQ (virtio.irq=5)
// never reads the ISR the device set: a stuck ISR, the driver's fault. The
// detection also shows in govm stat and on /metrics.
func TestWatchdogStuckISR(t *testing.T) {
	needKVM(t)
	img := filepath.Join(t.TempDir(), "d.img")
	makePatternDisk(t, img, 8<<20)
	sock := filepath.Join(shortTemp(t), "vm.sock")
	vm := startConsoleVMArgs(t, []string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
		"-p", "test=blk-qd,console virtio.irq=5", "--disk", img, "--watchdog", testWatchdogT, "--api-socket", sock})
	want := regexp.MustCompile(`govm: watchdog: stuck_isr on disk 0 \(.*\) queue 0 \(requests\): ISR 0x1 and the line high for .* with no ISR read .*; at fault: driver`)
	waitFor(t, 90*time.Second, "the stuck ISR report", func() bool { return want.MatchString(vm.stderr.String()) })

	out, errs, st := govmCmd(t, "stat", "--json", sock)
	var s api.Stats
	if st != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("govm stat --json: exit %d %s\n%s", st, errs, out)
	}
	// The disk's queue has the one detection; the other devices' queues
	// (virtio-rng) none.
	found := 0
	for _, q := range s.Queues {
		switch {
		case strings.HasPrefix(q.Device, "disk 0") && len(q.Watchdog) == 1 && q.Watchdog[0].Kind == "stuck_isr" && q.Watchdog[0].Count == 1:
			found++
		case len(q.Watchdog) != 0:
			t.Fatalf("a detection on %s queue %d:\n%s", q.Device, q.Index, out)
		}
	}
	if found != 1 {
		t.Fatalf("govm stat --json: no stuck_isr on the disk's queue\n%s", out)
	}
	out, _, _ = govmCmd(t, "stat", sock)
	if !strings.Contains(out, "stuck_isr=1") {
		t.Fatalf("govm stat does not show the detection:\n%s", out)
	}
	c := api.NewClient(sock)
	m, err := c.Metrics()
	c.Close()
	if err != nil || !regexp.MustCompile(`govm_watchdog_detections_total\{.*queue="0",name="requests",kind="stuck_isr"\} 1\n`).MatchString(m) {
		t.Fatalf("/metrics: %v\n%s", err, m)
	}
	if _, _, st := govmCmd(t, "stop", sock); st != 0 {
		t.Fatalf("govm stop: exit %d", st)
	}
	waitExit(t, vm.cmd, 30*time.Second)
}

// TestWatchdogQuietOnHealthyBlk: the blk tests under a watchdog four times
// as sensitive as the default: nothing reported.
func TestWatchdogQuietOnHealthyBlk(t *testing.T) {
	needKVM(t)
	img := filepath.Join(t.TempDir(), "d.img")
	makePatternDisk(t, img, 8<<20)
	for _, cmdline := range []string{"test=blk-qd", "test=blk-qd blk.event_idx=0", "test=blk-qd blk.poll=1"} {
		o := bootTest(t, cmdline, "--disk", img, "--watchdog", "250ms")
		noWatchdogReports(t, o.Stderr)
	}
}

// TestWatchdogRXStarvation: the guest's driver posts 4 RX buffers and then
// stalls for 6 s (net.stall_ms) while the host sends frames: the buffers
// fill, frames wait in the tap, and the watchdog names RX starvation as a
// driver-side stall (nothing was lost: afterwards the guest answers).
func TestWatchdogRXStarvation(t *testing.T) {
	needNetns(t)
	ns := newNetns(t)
	argv := append(govmNetArgv(ns, "test=net-echo net.serve_ms=90000 net.stall_ms=6000 net.rx_bufs=4"),
		"--watchdog", testWatchdogT, "--api-socket", "none")
	cmd := exec.Command(argv[0], argv[1:]...)
	vm := &consoleVM{cmd: cmd, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}}
	cmd.Stdout, cmd.Stderr = vm.stdout, vm.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, 30*time.Second, "the tap", func() bool { return linkExists(ns, tapName) })
	// A neighbour entry, so ping sends IPv4 frames without waiting for
	// the stalled guest's ARP reply.
	nsCmd(t, ns, "ip", "neigh", "replace", netnstest.GuestIP, "lladdr", "52:54:00:12:34:56", "dev", tapName)
	_ = nsExec(ns, "ping", "-c", "40", "-i", "0.05", "-W", "1", netnstest.GuestIP).Run()
	want := regexp.MustCompile(`govm: watchdog: rx_starvation on net 0 \(tap0\) queue 0 \(rx\): frames have waited in the backend for .* with no receive buffers posted; .*at fault: driver-side stall`)
	waitFor(t, 60*time.Second, "the RX starvation report", func() bool { return want.MatchString(vm.stderr.String()) })
	if n := strings.Count(vm.stderr.String(), "govm: watchdog: "); n != 1 {
		t.Errorf("%d watchdog lines, want the one RX starvation report:\n%s", n, vm.stderr)
	}
	// After the stall the guest serves again: nothing was lost. (The
	// made-up neighbour goes, so ping learns the guest's real MAC.)
	nsCmd(t, ns, "ip", "neigh", "del", netnstest.GuestIP, "dev", tapName)
	waitFor(t, 60*time.Second, "the guest to answer ping after its stall", func() bool {
		return nsExec(ns, "ping", "-c", "1", "-W", "1", netnstest.GuestIP).Run() == nil
	})
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	for i := 0; i < 40; i++ {
		_ = nsExec(ns, "bash", "-c", "echo -n quit > /dev/udp/"+netnstest.GuestIP+"/9").Run()
		select {
		case <-done:
			i = 40
		case <-time.After(500 * time.Millisecond):
		}
	}
	<-done
	if st := cmd.ProcessState.ExitCode(); st != 1 || !strings.Contains(vm.stdout.String(), "RESULT net-echo pass") {
		t.Fatalf("exit %d, want 1 with net-echo passing\nserial:\n%s\nstderr:\n%s", st, vm.stdout, vm.stderr)
	}
}
