package api

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/virtio/qstats"
)

// fakeVM records what the API asked of it.
type fakeVM struct {
	mu      sync.Mutex
	paused  bool
	stopped bool
}

func (f *fakeVM) Info() Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := StateRunning
	if f.paused {
		st = StatePaused
	}
	return Info{Name: "fake", PID: os.Getpid(), State: st, CPUs: 2, MemBytes: 64 << 20, Started: time.Now(), Devices: []string{"disk 0"}}
}

func (f *fakeVM) Stats() Stats {
	return Stats{Name: "fake", Time: time.Now(),
		Queues: []QueueStats{{Device: "disk 0", Queue: qstats.Queue{Index: 0, Name: "requests", KicksPort: 3,
			KicksEventFD: 4, Interrupts: 5, SuppressedISRSet: 1, SuppressedNoInterrupt: 2, SuppressedEventIdx: 6,
			Drops: map[string]uint64{"malformed": 7}},
			Watchdog: []WatchdogEvent{{Kind: "lost_kick", Count: 1}}}},
		VCPUs: []VCPUStats{{ID: 0, Exits: map[string]uint64{"io_out": 9}}}}
}

func (f *fakeVM) Pause() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused {
		return ErrAlreadyPaused
	}
	f.paused = true
	return nil
}

func (f *fakeVM) Resume() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.paused {
		return ErrNotPaused
	}
	f.paused = false
	return nil
}

func (f *fakeVM) Stop() { f.mu.Lock(); f.stopped = true; f.mu.Unlock() }

func shortDir(t *testing.T) string {
	t.Helper()
	// Unix socket paths are limited to 108 bytes: t.TempDir can be longer.
	d, err := os.MkdirTemp("", "gvapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestListenModesAndServe(t *testing.T) {
	dir := filepath.Join(shortDir(t), "govm")
	path := filepath.Join(dir, "vm1.sock")
	l, sock, err := Listen(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	vm := &fakeVM{}
	srv := Serve(l, vm)
	defer srv.Close()
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	c := NewClient(path)
	defer c.Close()
	if i, err := c.Info(); err != nil || i.Name != "fake" || i.State != StateRunning {
		t.Fatalf("Info = %+v, %v", i, err)
	}
	if i, err := c.Do("pause"); err != nil || i.State != StatePaused {
		t.Fatalf("pause = %+v, %v", i, err)
	}
	if _, err := c.Do("pause"); err == nil || err.Error() != ErrAlreadyPaused.Error() {
		t.Fatalf("second pause: %v, want %v", err, ErrAlreadyPaused)
	}
	if _, err := c.Do("resume"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do("resume"); err == nil || err.Error() != ErrNotPaused.Error() {
		t.Fatalf("resume of a running VM: %v", err)
	}
	if _, err := c.Do("stop"); err != nil || !vm.stopped {
		t.Fatalf("stop: %v, stopped %v", err, vm.stopped)
	}
	if _, err := c.Do("reboot"); err == nil || !strings.Contains(err.Error(), "no such endpoint") {
		t.Fatalf("unknown action: %v", err)
	}
	s, err := c.Stats()
	if err != nil || len(s.Queues) != 1 || s.Queues[0].SuppressedEventIdx != 6 {
		t.Fatalf("Stats = %+v, %v", s, err)
	}
	vms, err := List(dir)
	if err != nil || len(vms) != 1 || vms[0].Name != "fake" {
		t.Fatalf("List = %+v, %v", vms, err)
	}
}

func TestMetricsFormat(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "m.sock")
	l, sock, err := Listen(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	srv := Serve(l, &fakeVM{})
	defer srv.Close()
	c := NewClient(path)
	defer c.Close()
	m, err := c.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE govm_queue_kicks_total counter",
		`govm_queue_kicks_total{vm="fake",device="disk 0",queue="0",name="requests",via="ioeventfd"} 4`,
		`govm_queue_interrupts_suppressed_total{vm="fake",device="disk 0",queue="0",name="requests",reason="event_idx"} 6`,
		`govm_queue_drops_total{vm="fake",device="disk 0",queue="0",name="requests",reason="malformed"} 7`,
		`govm_watchdog_detections_total{vm="fake",device="disk 0",queue="0",name="requests",kind="lost_kick"} 1`,
		`govm_vcpu_exits_total{vm="fake",vcpu="0",reason="io_out"} 9`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	if strings.Count(m, "# TYPE govm_queue_kicks_total") != 1 {
		t.Errorf("a family's TYPE line must appear once:\n%s", m)
	}
}

// TestStaleSocketReplaced: a socket file whose lock is free (a govm that
// was killed) is replaced; one whose VM holds the lock is ErrInUse.
func TestStaleSocketReplaced(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // the file stays: a dead govm's socket
	if _, err := os.Lstat(path); err != nil {
		t.Fatal(err)
	}
	l2, sock, err := Listen(path, false)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer sock.Close()
	defer l2.Close()
	if _, _, err := Listen(path, false); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Listen on a live socket: %v, want ErrInUse", err)
	}
	// A regular file in the way is not ours to remove.
	file := filepath.Join(filepath.Dir(path), "f.sock")
	os.WriteFile(file, nil, 0o600)
	if _, _, err := Listen(file, false); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: %v", err)
	}
}

// TestExitingVMKeepsItsName: a VM that is exiting (its listener closed,
// its devices still closing) keeps its name, so a new VM of that name
// fails instead of replacing the socket, which the exiting VM would then
// remove from under it. Once gone, the name is free. And a VM removes
// only the socket it bound, not one put there since.
func TestExitingVMKeepsItsName(t *testing.T) {
	path := filepath.Join(shortDir(t), "n.sock")
	la, a, err := Listen(path, false)
	if err != nil {
		t.Fatal(err)
	}
	la.Close() // A is exiting
	if _, _, err := Listen(path, false); !errors.Is(err, ErrInUse) {
		t.Fatalf("Listen while the first VM exits: %v, want ErrInUse", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket still there after Close: %v", err)
	}
	lb, b, err := Listen(path, false)
	if err != nil {
		t.Fatalf("Listen after the first VM is gone: %v", err)
	}
	defer lb.Close()
	// Someone replaces B's socket file; B's Close leaves theirs alone.
	os.Remove(path)
	other, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("Close removed a socket it did not bind: %v", err)
	}
}

// TestOwnDirChecks: govm's own socket directory must be a directory, not a
// symlink to one, closed to others (0700) and this user's; a path the user
// picks (--api-socket) is not judged.
func TestOwnDirChecks(t *testing.T) {
	base := shortDir(t)
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o755)
	for _, c := range []struct {
		dir, want string
	}{{link, "is not a directory (a symbolic link is refused too)"}, {open, "has mode 0755, open to others"}} {
		if _, _, err := Listen(filepath.Join(c.dir, "x.sock"), true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("strict Listen in %s: %v, want %q", c.dir, err, c.want)
		}
		l, s, err := Listen(filepath.Join(c.dir, "y.sock"), false)
		if err != nil {
			t.Errorf("--api-socket in %s: %v", c.dir, err)
			continue
		}
		l.Close()
		s.Close()
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		os.Chown(other, 65534, 65534)
		if _, _, err := Listen(filepath.Join(other, "x.sock"), true); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("strict Listen in someone else's directory: %v", err)
		}
	}
}

func TestClientErrors(t *testing.T) {
	c := NewClient(filepath.Join(shortDir(t), "absent.sock"))
	if _, err := c.Info(); !errors.Is(err, ErrNoVM) {
		t.Fatalf("Info on a missing socket: %v, want ErrNoVM", err)
	}
	if err := CheckName("a/b"); err == nil {
		t.Fatal("a name with '/' accepted")
	}
}
