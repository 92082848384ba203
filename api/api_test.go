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
		Queues: []QueueStats{{Device: "disk 0", Queue: 0, Name: "requests", KicksPort: 3, KicksEventFD: 4, Interrupts: 5,
			SuppressedISR: 1, SuppressedNoIntr: 2, SuppressedEventIdx: 6, Drops: map[string]uint64{"malformed": 7},
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
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
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
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
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

// TestStaleSocketReplaced: a socket file nobody listens on (a govm that
// was killed) is replaced; one a live server answers on is ErrInUse.
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
	l2, err := Listen(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer l2.Close()
	if _, err := Listen(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Listen on a live socket: %v, want ErrInUse", err)
	}
	// A regular file in the way is not ours to remove.
	file := filepath.Join(filepath.Dir(path), "f.sock")
	os.WriteFile(file, nil, 0o600)
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: %v", err)
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
