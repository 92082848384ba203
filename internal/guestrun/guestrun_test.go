package guestrun

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunUntilStopsProcess(t *testing.T) {
	o, err := RunUntil(context.Background(), 20*time.Second, func(s string) bool {
		return strings.Contains(s, "ready")
	}, "sh", "-c", "echo ready; sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	if !o.Stopped || o.TimedOut || o.Elapsed > 10*time.Second || o.ExitCode != -1 {
		t.Fatalf("stopped=%v timedOut=%v elapsed=%v exit=%d", o.Stopped, o.TimedOut, o.Elapsed, o.ExitCode)
	}
}

func TestRunExitCodeAndTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		cancel   bool
		argv     []string
		exit     int
		timedOut bool
		result   string
	}{
		{"exit status", 10 * time.Second, false, []string{"sh", "-c", "echo 'RESULT x pass'; exit 7"}, 7, false, "x"},
		{"timeout", 200 * time.Millisecond, false, []string{"sleep", "30"}, -1, true, ""},
		{"cancelled", 10 * time.Second, true, []string{"sleep", "30"}, -1, true, ""},
		{"exits before until fires", 10 * time.Second, false, []string{"true"}, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			o, err := RunUntil(ctx, tc.timeout, func(string) bool { return false }, tc.argv...)
			if err != nil {
				t.Fatal(err)
			}
			if o.ExitCode != tc.exit || o.TimedOut != tc.timedOut || o.Stopped || o.Elapsed > 5*time.Second {
				t.Fatalf("exit %d timedOut %v stopped %v elapsed %v", o.ExitCode, o.TimedOut, o.Stopped, o.Elapsed)
			}
			if tc.result != "" && !o.Results[tc.result].Pass {
				t.Fatalf("results %v", o.Results)
			}
		})
	}
	if _, err := Run(context.Background(), time.Second); err == nil {
		t.Error("Run with no command succeeded")
	}
}

func TestDebugExit(t *testing.T) {
	for _, tc := range []struct {
		status, code int
		ok           bool
	}{{1, 0, true}, {3, 1, true}, {15, 7, true}, {255, 127, true}, {0, 0, false}, {2, 0, false}, {-1, 0, false}} {
		code, ok := DebugExit(tc.status)
		if code != tc.code || ok != tc.ok {
			t.Errorf("DebugExit(%d) = %d, %v; want %d, %v", tc.status, code, ok, tc.code, tc.ok)
		}
	}
}

func TestQEMUArgs(t *testing.T) {
	a := strings.Join(QEMUArgs("/k", "test=boot x=1", 256, "-drive", "file=d"), " ")
	for _, want := range []string{"qemu-system-x86_64 -accel kvm", "-cpu host,-arch-capabilities", "-m 256M",
		"-bios /usr/share/qemu/qboot.rom", "-device isa-debug-exit,iobase=0x501,iosize=2",
		"-kernel /k -append test=boot x=1 -drive file=d"} {
		if !strings.Contains(a, want) {
			t.Errorf("QEMUArgs = %q, lacks %q", a, want)
		}
	}
}
func TestPatternImage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "disk.img")
	if err := WritePatternImage(path, 64<<10); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(path)
	if err != nil || len(img) != 64<<10 {
		t.Fatalf("image: %d bytes, %v", len(img), err)
	}
	// Spot values straight from blkpattern.h's formula.
	for _, tc := range []struct {
		sector, word uint64
	}{{0, 0}, {0, 63}, {1, 0}, {77, 5}, {127, 63}} {
		got := binary.LittleEndian.Uint64(img[tc.sector*SectorSize+tc.word*8:])
		if want := (tc.sector<<16 | tc.word) ^ 0x9e3779b97f4a7c15; got != want {
			t.Errorf("sector %d word %d = %#x, want %#x", tc.sector, tc.word, got, want)
		}
	}
	var sec [SectorSize]byte
	PatternSector(sec[:], 3, PatternWrite)
	if got := binary.LittleEndian.Uint64(sec[8:]); got != (3<<16|1)^0xdeadbeefcafef00d {
		t.Errorf("write pattern word = %#x", got)
	}
	// The guest's own tool agrees, where Python is installed.
	if py, err := exec.LookPath("python3"); err == nil {
		out, err := exec.Command(py, "../../guest/tools/mkpattern.py", "check", path).CombinedOutput()
		if err != nil {
			t.Errorf("mkpattern.py check: %v: %s", err, out)
		}
	}
	for _, size := range []int64{0, -512, 1000} {
		if err := WritePatternImage(filepath.Join(dir, "bad.img"), size); err == nil {
			t.Errorf("WritePatternImage(size %d) succeeded", size)
		}
	}
	if err := WritePatternImage(filepath.Join(dir, "no", "such", "dir"), 512); err == nil {
		t.Error("WritePatternImage into a missing directory succeeded")
	}
}
