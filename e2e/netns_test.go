package e2e

// Helpers for the network tests: every frame stays inside a network
// namespace the test creates (and deletes in t.Cleanup); govm runs inside it
// through `ip netns exec`, so the tap it creates is born there and the
// host's own interfaces are never touched.

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/internal/netnstest"
)

// The test network's addresses are netnstest.GuestIP and netnstest.HostIP;
// govm creates the tap under this name inside the namespace.
const tapName = "tap0"

// needNetns skips, with the reason, when namespaces cannot be made here
// (not root, no ip(8)); everything else about the host is required.
func needNetns(t *testing.T) {
	t.Helper()
	needKVM(t)
	if os.Geteuid() != 0 {
		t.Skip("network tests create network namespaces and taps: need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("network tests need ip(8) (iproute2)")
	}
}

// newNetns creates an empty namespace with lo up and deletes it (and with
// it any tap left inside) when the test ends.
func newNetns(t *testing.T) string {
	t.Helper()
	ns, err := netnstest.New(t, "govm-e2e")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// nsCmd runs argv inside ns and fails the test on error.
func nsCmd(t *testing.T, ns string, argv ...string) string {
	t.Helper()
	out, err := nsExec(ns, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("in %s: %s: %v: %s", ns, strings.Join(argv, " "), err, out)
	}
	return string(out)
}

func nsExec(ns string, argv ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
}

// linkExists says whether ns has an interface called name.
func linkExists(ns, name string) bool {
	return exec.Command("ip", "-n", ns, "link", "show", "dev", name).Run() == nil
}

// tapStat reads /sys/class/net/tap0/statistics/<name> inside ns (ip netns
// exec mounts the namespace's own sysfs).
func tapStat(ns, name string) (uint64, error) {
	out, err := nsExec(ns, "cat", "/sys/class/net/"+tapName+"/statistics/"+name).Output()
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
}

// govmNetArgv is govm booting the test kernel with a tap inside the
// namespace whose host side is netnstest.HostIP, printing its queue counters and
// ring indexes on stderr at the end (--stats) for logOnFailure.
func govmNetArgv(ns, cmdline string) []string {
	return []string{"ip", "netns", "exec", ns, govmBin, "run", "--kernel", testKernel,
		"-m", "256M", "--no-default-params", "--debug-exit", "--stats", "-p",
		"net.ip=" + netnstest.GuestIP + " net.peer=" + netnstest.HostIP + " " + cmdline,
		"--net", "tap,ifname=" + tapName + ",host-ip=" + netnstest.HostIP + "/24"}
}

// govmNetEnv puts env assignments (KEY=VALUE) into govmNetArgv's command,
// inside the namespace, for govm alone.
func govmNetEnv(argv []string, env ...string) []string {
	out := append([]string{}, argv[:4]...) // ip netns exec NS
	out = append(append(append(out, "env"), env...), argv[4:]...)
	return out
}

// vmRun is a VM running in the background.
type vmRun struct {
	done chan struct{}
	out  *guestrun.Output
	err  error
}

// startVM runs argv in the background (guestrun.Run, killed after timeout).
// The VM ends with the test at the latest (t.Context), not only at its
// timeout: a test that fails between a pause and its resume, or any
// Fatalf before the guest's end, used to leave the VM running past the
// test binary (one paused VM ran on for minutes, orphaned; TestMain's
// KillAll now also catches those) or ran on into the next tests until its
// timeout.
func startVM(t *testing.T, timeout time.Duration, argv []string) *vmRun {
	v := &vmRun{done: make(chan struct{})}
	ctx := t.Context()
	go func() {
		defer close(v.done)
		v.out, v.err = guestrun.Run(ctx, timeout, argv...)
	}()
	t.Cleanup(func() {
		<-v.done // killed by then (ctx): reaped before the netns goes
		v.logOnFailure(t)
	})
	return v
}

// logOnFailure logs everything the VM said when its test failed: the whole
// serial (every RESULT line with the guest's counters, BAD_RING and rx
// error lines) and govm's stderr (its --stats lines: per-queue counters and
// ring indexes, watchdog reports). A failure message quoting one RESULT
// value cannot tell a lost notification from a slow host; these can.
func (v *vmRun) logOnFailure(t *testing.T) {
	t.Helper()
	if !t.Failed() || v.out == nil {
		return
	}
	t.Logf("VM (exit %d after %v, timed out %v) serial:\n%s\nstderr:\n%s",
		v.out.ExitCode, v.out.Elapsed.Round(time.Millisecond), v.out.TimedOut, v.out.Serial, v.out.Stderr)
}

// wait returns the VM's output once it exited; it fails the test if it
// could not run or timed out.
func (v *vmRun) wait(t *testing.T) *guestrun.Output {
	t.Helper()
	<-v.done
	if v.err != nil {
		t.Fatalf("vm: %v", v.err)
	}
	if v.out.TimedOut {
		t.Fatalf("vm timed out after %v\nserial:\n%s\nstderr:\n%s", v.out.Elapsed, v.out.Serial, v.out.Stderr)
	}
	return v.out
}

func (v *vmRun) exited() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// waitReachable pings the guest once a second until it answers, the VM
// exits, or within passes.
func waitReachable(t *testing.T, ns string, v *vmRun, within time.Duration) {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) && !v.exited() {
		if nsExec(ns, "ping", "-c", "1", "-W", "1", netnstest.GuestIP).Run() == nil {
			return
		}
	}
	if v.exited() {
		o := v.wait(t)
		t.Fatalf("vm exited before answering ping (exit %d)\nserial:\n%s\nstderr:\n%s", o.ExitCode, o.Serial, o.Stderr)
	}
	t.Fatalf("guest %s did not answer ping within %v", netnstest.GuestIP, within)
}

// inNetns runs fn inside ns (netnstest.Do): sockets fn creates belong to
// ns for their whole life.
func inNetns(t *testing.T, ns string, fn func()) {
	t.Helper()
	if err := netnstest.Do(ns, func() error { fn(); return nil }); err != nil {
		t.Fatal(err)
	}
}

// quitGuest sends "quit" to the guest's UDP port 9 a few times (UDP).
func quitGuest(t *testing.T, ns string, v *vmRun) {
	t.Helper()
	for i := 0; i < 20 && !v.exited(); i++ {
		nsExec(ns, "bash", "-c", "echo -n quit > /dev/udp/"+netnstest.GuestIP+"/9").Run()
		select {
		case <-v.done:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// pingSummary parses ping's "N packets transmitted, M received" line.
func pingSummary(out string) (sent, recv int, ok bool) {
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "packets transmitted") {
			continue
		}
		f := strings.Fields(l)
		if len(f) < 4 {
			return 0, 0, false
		}
		s, err1 := strconv.Atoi(f[0])
		r, err2 := strconv.Atoi(f[3])
		return s, r, err1 == nil && err2 == nil
	}
	return 0, 0, false
}

// TestStartVMEndsWithTest: a VM its test leaves running (test=console
// waits for input forever) is killed when the test ends, not at its
// timeout.
func TestStartVMEndsWithTest(t *testing.T) {
	needKVM(t)
	var v *vmRun
	t.Run("leaves a VM running", func(t *testing.T) {
		v = startVM(t, 120*time.Second, []string{govmBin, "run", "--kernel", testKernel,
			"--no-default-params", "--api-socket", "none", "-p", "test=console"})
	})
	select {
	case <-v.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the VM still runs 10 s after its test ended")
	}
}
