package virtioblk

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tempDisk(t *testing.T, size int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, bytes.Repeat([]byte{0x5a}, size), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenFileLocks(t *testing.T) {
	p := tempDisk(t, 4096)
	tests := []struct {
		name        string
		first, then bool // readOnly of the first and second open
		wantLocked  bool
	}{
		{"rw then rw", false, false, true},
		{"rw then ro", false, true, true},
		{"ro then rw", true, false, true},
		{"ro then ro", true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := OpenFile(p, tt.first)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			g, err := OpenFile(p, tt.then)
			if tt.wantLocked {
				if !errors.Is(err, ErrLocked) {
					t.Fatalf("second open = %v, want ErrLocked", err)
				}
				want := "virtioblk: disk " + p + " is locked by another process (another govm, or a QEMU?)"
				if err.Error() != want {
					t.Fatalf("message %q, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("second open: %v", err)
			}
			g.Close()
		})
	}
	// The lock goes with Close.
	f, err := OpenFile(p, false)
	if err != nil {
		t.Fatalf("open after all closed: %v", err)
	}
	f.Close()
}

func TestOpenFileRejects(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.img")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want error
		msg  string
	}{
		{dir, ErrIsDir, "is a directory"},
		{empty, ErrEmpty, "is empty (0 bytes)"},
		{filepath.Join(dir, "missing"), os.ErrNotExist, "no such file"},
		{filepath.Join(dir, "missing", "x.img"), os.ErrNotExist, "no such file"},
	}
	for _, tt := range tests {
		_, err := OpenFile(tt.path, false)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("OpenFile(%s) = %v, want %v", tt.path, err, tt.want)
		}
		// One line that names the image once (os errors carry the path).
		if n := strings.Count(err.Error(), tt.path); n != 1 {
			t.Errorf("OpenFile(%s) = %q: the path appears %d times", tt.path, err, n)
		}
	}
}

func TestFileBackend(t *testing.T) {
	p := tempDisk(t, 8192)
	f, err := OpenFile(p, false)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Size(); n != 8192 {
		t.Fatalf("Size %d", n)
	}
	if _, err := f.WriteAt([]byte("hello"), 512); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ro, err := OpenFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	b := make([]byte, 5)
	if _, err := ro.ReadAt(b, 512); err != nil || string(b) != "hello" {
		t.Fatalf("ReadAt = %q, %v", b, err)
	}
	if _, err := ro.WriteAt(b, 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("WriteAt on read-only = %v", err)
	}
	// A read-only device over the file answers writes with IOERR and
	// the file keeps its bytes.
	dev, err := New(ro, Config{ReadOnly: true})
	if err != nil || dev.Capacity() != 16 {
		t.Fatalf("New: %v, capacity %d", err, dev.Capacity())
	}
}

// TestQEMULockBytes: govm holds the bytes QEMU's file-posix tests, and
// honours those a QEMU holds (played here by a second open file
// description taking QEMU's bytes, without any flock).
func TestQEMULockBytes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	probe, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	held := func(off int64) bool {
		h, err := ofdHeld(int(probe.Fd()), off)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, ro := range []bool{false, true} {
		f, err := OpenFile(p, ro)
		if err != nil {
			t.Fatal(err)
		}
		// What QEMU looks at: 101 (someone writes), 201 (someone
		// refuses writers), 100 (someone reads).
		if held(100) != true || held(101) != !ro || held(201) != true || held(200) || held(203) {
			t.Errorf("ro=%v: bytes 100 %v 101 %v 200 %v 201 %v 203 %v", ro, held(100), held(101), held(200), held(201), held(203))
		}
		f.Close()
		if held(100) || held(201) {
			t.Errorf("ro=%v: lock bytes still held after Close", ro)
		}
	}
	for _, c := range []struct {
		name       string
		qemuRO, ro bool
		conflict   bool
	}{
		{"QEMU writes, govm reads", false, true, true},
		{"QEMU writes, govm writes", false, false, true},
		{"QEMU reads, govm writes", true, false, true},
		{"QEMU reads, govm reads", true, true, false},
	} {
		q, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		perm, shared := diskPerms(c.qemuRO)
		if err := lockLikeQEMU(int(q.Fd()), perm, shared); err != nil {
			t.Fatalf("%s: the QEMU stand-in could not lock: %v", c.name, err)
		}
		f, err := OpenFile(p, c.ro)
		if c.conflict != errors.Is(err, ErrLocked) {
			t.Errorf("%s: OpenFile = %v, want conflict %v", c.name, err, c.conflict)
		}
		if err == nil {
			f.Close()
		}
		q.Close()
	}
}
