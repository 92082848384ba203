package e2e

// E2e tests of the control plane (api/, docs/api.md): govm list, stat,
// pause, resume, stop, /metrics, and the API socket's rules. Each VM gets a
// name unique to this test process, because other test binaries may run
// VMs at the same time in the same socket directory.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/api"
	"github.com/govm/govm/internal/netnstest"
	"github.com/govm/govm/internal/syncbuf"
)

// consoleVM is a govm running the test kernel's console test (it polls the
// UART and echoes what it reads) with extra run flags.
type consoleVM struct {
	cmd            *exec.Cmd
	stdout, stderr *syncbuf.Buffer
	in             io.WriteCloser
}

func startConsoleVM(t *testing.T, flags ...string) *consoleVM {
	t.Helper()
	return startConsoleVMArgs(t, append([]string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit", "-p", "test=console"}, flags...))
}

// startConsoleVMArgs starts govm with args, extra environment variables
// and a pipe on stdin.
func startConsoleVMArgs(t *testing.T, args []string, env ...string) *consoleVM {
	t.Helper()
	v := &consoleVM{cmd: exec.Command(govmBin, args...), stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}}
	v.cmd.Env = append(os.Environ(), env...)
	v.cmd.Stdout, v.cmd.Stderr = v.stdout, v.stderr
	in, err := v.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	v.in = in
	if err := v.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.cmd.Process.Kill(); _ = v.cmd.Wait() })
	return v
}

// uniqueName is a VM name no other test process uses.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("t%d-%s", os.Getpid(), strings.ToLower(strings.TrimPrefix(t.Name(), "Test")))
}

// govmCmd runs a govm command (not a VM) and returns stdout, stderr and
// the exit status.
func govmCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	o := runSmoke(t, "", args...)
	return o.stdout, o.stderr, o.status
}

// waitFor polls cond every 50 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

func statJSON(t *testing.T, target string) api.Stats {
	t.Helper()
	out, errs, st := govmCmd(t, "stat", "--json", target)
	if st != 0 {
		t.Fatalf("govm stat --json %s: exit %d: %s", target, st, errs)
	}
	var s api.Stats
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("govm stat --json: %v\n%s", err, out)
	}
	return s
}

func totalExits(s api.Stats) uint64 {
	var n uint64
	for _, v := range s.VCPUs {
		for r, c := range v.Exits {
			if r != "intr" { // pausing itself causes one signal exit
				n += c
			}
		}
	}
	return n
}

// wantOneLine checks a bad-input answer: status 2 and exactly one line
// on stderr containing want.
func wantOneLine(t *testing.T, what, stderr string, status int, want string) {
	t.Helper()
	if status != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("%s: exit %d, stderr %q; want exit 2 and one line with %q", what, status, stderr, want)
	}
}

// TestControlCommands: govm list shows a running VM; stat shows its vCPU
// exits; pause stops the vCPUs (no exits, console input not echoed) and
// resume loses nothing (the input is echoed); /metrics answers; stop ends
// the VM with status 0 and removes its socket. Repeats and unknown VMs are
// one line and exit 2.
func TestControlCommands(t *testing.T) {
	needKVM(t)
	name := uniqueName(t)
	vm := startConsoleVM(t, "--name", name)
	sock := api.SocketPath(name)
	waitFor(t, 30*time.Second, "the API socket", func() bool {
		out, _, st := govmCmd(t, "list", "--json")
		return st == 0 && strings.Contains(out, `"name": "`+name+`"`)
	})

	out, _, st := govmCmd(t, "list")
	if st != 0 || !strings.HasPrefix(out, "NAME ") {
		t.Fatalf("govm list: exit %d\n%s", st, out)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name+" ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 6 || f[1] != fmt.Sprint(vm.cmd.Process.Pid) || f[2] != "running" || f[3] != "1" || f[4] != "512M" {
		t.Fatalf("govm list row for %s: %q\n%s", name, row, out)
	}

	out, _, st = govmCmd(t, "stat", name)
	if st != 0 || !strings.Contains(out, "VCPU") || !strings.Contains(out, "io_out") {
		t.Fatalf("govm stat: exit %d\n%s", st, out)
	}
	if s := statJSON(t, name); len(s.VCPUs) != 1 || s.VCPUs[0].Exits["io_in"] == 0 {
		t.Fatalf("stat --json: want one vCPU with port-read exits (the guest polls its UART): %+v", s.VCPUs)
	}

	out, errs, st := govmCmd(t, "pause", name)
	if st != 0 || out != name+": paused\n" {
		t.Fatalf("govm pause: exit %d, %q %q", st, out, errs)
	}
	_, errs, st = govmCmd(t, "pause", name)
	wantOneLine(t, "second pause", errs, st, "already paused")
	before := statJSON(t, name)
	if _, err := vm.in.Write([]byte("while-paused\r")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	after := statJSON(t, name)
	if b, a := totalExits(before), totalExits(after); a != b {
		t.Fatalf("vCPU exits went from %d to %d while paused: the vCPU ran", b, a)
	}
	if strings.Contains(vm.stdout.String(), "while-paused") {
		t.Fatal("the guest echoed console input while paused")
	}
	if out, _, _ := govmCmd(t, "list"); !strings.Contains(out, "paused") {
		t.Fatalf("govm list does not show the pause:\n%s", out)
	}

	out, _, st = govmCmd(t, "resume", name)
	if st != 0 || out != name+": running\n" {
		t.Fatalf("govm resume: exit %d, %q", st, out)
	}
	waitFor(t, 30*time.Second, "the echo of the input sent while paused", func() bool {
		return strings.Contains(vm.stdout.String(), "while-paused")
	})
	_, errs, st = govmCmd(t, "resume", name)
	wantOneLine(t, "resume of a running VM", errs, st, "not paused")

	out, _, st = govmCmd(t, "stat", "--watch", "--count", "2", name)
	if st != 0 || strings.Count(out, "--- "+name) != 2 || !strings.Contains(out, "/s") {
		t.Fatalf("govm stat --watch --count 2: exit %d\n%s", st, out)
	}

	c := api.NewClient(sock)
	m, err := c.Metrics()
	c.Close()
	if err != nil || !strings.Contains(m, fmt.Sprintf(`govm_vcpu_exits_total{vm=%q,vcpu="0",reason="io_in"}`, name)) {
		t.Fatalf("/metrics: %v\n%s", err, m)
	}

	out, _, st = govmCmd(t, "stop", name)
	if st != 0 || out != name+": stopped\n" {
		t.Fatalf("govm stop: exit %d, %q", st, out)
	}
	if st := waitExit(t, vm.cmd, 30*time.Second); st != 0 || !strings.Contains(vm.stderr.String(), "govm: stopped: govm stop") {
		t.Fatalf("the VM's govm: exit %d, want 0 with the reason\n%s", st, vm.stderr)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket %s left behind: %v", sock, err)
	}
	for _, cmd := range []string{"stat", "pause", "resume", "stop"} {
		_, errs, st = govmCmd(t, cmd, name)
		wantOneLine(t, "govm "+cmd+" of an ended VM", errs, st, "no such VM")
	}
}

// shortTemp is a directory whose socket paths fit the 108-byte limit.
func shortTemp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gvctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// TestAPISocketRules: the socket is 0600; a stale socket of a dead govm is
// replaced; a second VM with a live VM's name fails with one line and exit
// 2 before it creates anything; --api-socket none makes none.
func TestAPISocketRules(t *testing.T) {
	needKVM(t)
	dir := shortTemp(t)
	sock := filepath.Join(dir, "vm.sock")
	// A dead govm's socket: bound, then closed without unlinking.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()

	name := uniqueName(t)
	vm := startConsoleVM(t, "--name", name, "--api-socket", sock)
	waitFor(t, 30*time.Second, "the VM to answer on the replaced socket", func() bool {
		_, _, st := govmCmd(t, "stat", sock)
		return st == 0
	})
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v, want 0600", st.Mode(), err)
	}

	_, errs, st := govmCmd(t, "run", "--kernel", testKernel, "--no-default-params", "-p", "test=boot", "--name", name, "--api-socket", sock)
	wantOneLine(t, "a second VM on a live socket", errs, st, fmt.Sprintf("a VM named %q is already running", name))

	// A VM of the same name without its own socket: nothing to collide.
	none := startConsoleVM(t, "--name", name+"-none", "--api-socket", "none")
	time.Sleep(time.Second)
	if _, err := os.Lstat(api.SocketPath(name + "-none")); !os.IsNotExist(err) {
		t.Fatalf("--api-socket none made a socket: %v", err)
	}
	if _, err := none.in.Write([]byte("quit\r")); err != nil {
		t.Fatal(err)
	}
	waitExit(t, none.cmd, 30*time.Second)

	if _, err := vm.in.Write([]byte("quit\r")); err != nil {
		t.Fatal(err)
	}
	if st := waitExit(t, vm.cmd, 30*time.Second); st != 1 {
		t.Fatalf("exit %d, want 1 (debug-exit 0)\n%s", st, vm.stderr)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after the guest ended: %v", err)
	}
}

// TestControlPermissionDenied: another user's VM is one line, exit 2,
// saying permission denied. Runs govm as nobody (needs root to switch).
func TestControlPermissionDenied(t *testing.T) {
	needKVM(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run govm as nobody")
	}
	dir := shortTemp(t)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "vm.sock")
	vm := startConsoleVM(t, "--name", uniqueName(t), "--api-socket", sock)
	waitFor(t, 30*time.Second, "the API socket", func() bool { _, _, st := govmCmd(t, "stat", sock); return st == 0 })
	// nobody must be able to run the binary itself.
	bin := filepath.Join(shortTemp(t), "govm")
	data, err := os.ReadFile(govmBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(bin), 0o755)
	for _, action := range []string{"stat", "pause", "stop"} {
		cmd := exec.Command(bin, action, sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		_ = cmd.Run()
		wantOneLine(t, "govm "+action+" as nobody", errb.String(), cmd.ProcessState.ExitCode(), "permission denied")
	}
	if s := statJSON(t, sock); len(s.VCPUs) != 1 {
		t.Fatal("the VM did not survive")
	}
	_, _ = vm.in.Write([]byte("quit\r"))
	waitExit(t, vm.cmd, 30*time.Second)
}

// TestPauseHoldsDevices: while paused, frames the host sends wait in the
// tap: the virtio-net RX queue takes no buffer (its used idx stands still,
// which it would not if only the vCPUs stopped); after resume they are
// all delivered and the guest answers again.
func TestPauseHoldsDevices(t *testing.T) {
	needNetns(t)
	ns := newNetns(t)
	sock := filepath.Join(shortTemp(t), "vm.sock")
	v := startVM(t, 120*time.Second, append(govmNetArgv(ns, "test=net-echo net.serve_ms=90000"), "--api-socket", sock))
	waitReachable(t, ns, v, 30*time.Second)
	rx := func() api.QueueStats {
		s := statJSON(t, sock)
		for _, q := range s.Queues {
			if q.Name == "rx" {
				return q
			}
		}
		t.Fatalf("no rx queue in %+v", s.Queues)
		return api.QueueStats{}
	}
	if _, errs, st := govmCmd(t, "pause", sock); st != 0 {
		t.Fatalf("pause: %s", errs)
	}
	before := rx()
	// Ten echo requests while paused: they cannot be answered now.
	_ = nsExec(ns, "ping", "-c", "10", "-i", "0.1", "-W", "1", netnstest.GuestIP).Run()
	after := rx()
	if after.UsedIdx != before.UsedIdx || after.Chains != before.Chains {
		t.Fatalf("RX took buffers while paused: used idx %d -> %d, chains %d -> %d",
			before.UsedIdx, after.UsedIdx, before.Chains, after.Chains)
	}
	if _, errs, st := govmCmd(t, "resume", sock); st != 0 {
		t.Fatalf("resume: %s", errs)
	}
	// The frames held in the tap (at least the ten requests) arrive.
	waitFor(t, 30*time.Second, "the held frames to be delivered", func() bool { return rx().Chains >= after.Chains+10 })
	out, err := nsExec(ns, "ping", "-c", "3", "-W", "2", netnstest.GuestIP).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " 0% packet loss") {
		t.Errorf("ping -c 3 after resume: %v\n%s", err, out)
	}
	quitGuest(t, ns, v)
	o := v.wait(t)
	if r := result(t, o, "net-echo"); r.KV["end"] != "quit" {
		t.Errorf("net-echo end=%s, want quit", r.KV["end"])
	}
	noWatchdogReports(t, o.Stderr)
}

// TestAPISocketUnusableDefault: when the default socket directory cannot
// be made (here: a non-root user whose XDG_RUNTIME_DIR is read-only), the
// VM still runs, with one warning; an explicit --api-socket there is bad
// input. Runs govm as nobody in the kvm group (needs root to switch).
func TestAPISocketUnusableDefault(t *testing.T) {
	needKVM(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run govm as nobody")
	}
	st, err := os.Stat("/dev/kvm")
	if err != nil {
		t.Skip(err)
	}
	kvmGID := st.Sys().(*syscall.Stat_t).Gid
	dir := shortTemp(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, govmBin, filepath.Join(dir, "govm"), 0o755)
	copyFile(t, testKernel, filepath.Join(dir, "bzImage"), 0o644)
	run := func(extra ...string) (string, int) {
		args := append([]string{"run", "--kernel", filepath.Join(dir, "bzImage"), "--no-default-params", "--debug-exit",
			"-p", "test=boot"}, extra...)
		cmd := exec.Command(filepath.Join(dir, "govm"), args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=/proc/govm-no-such-dir", "GOVM_CACHE_DIR=off"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{kvmGID}}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run()
		return stderr.String(), cmd.ProcessState.ExitCode()
	}
	stderr, status := run()
	if status != 1 || strings.Count(stderr, "govm: warning: no API socket") != 1 {
		t.Fatalf("default socket unusable: exit %d, want 1 (the guest passed) with one warning\n%s", status, stderr)
	}
	stderr, status = run("--api-socket", "/proc/govm-no-such-dir/vm.sock")
	wantOneLine(t, "explicit unusable --api-socket", stderr, status, "--api-socket")

	// A path the user picks in a shared directory someone else owns (a
	// sticky /tmp) is theirs to judge: it works (it was refused as
	// "belongs to uid 0").
	shared := shortTemp(t)
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	stderr, status = run("--api-socket", filepath.Join(shared, "vm.sock"))
	if status != 1 || strings.Contains(stderr, "belongs to uid") {
		t.Fatalf("--api-socket in a shared root-owned directory, as nobody: exit %d\n%s", status, stderr)
	}
}
