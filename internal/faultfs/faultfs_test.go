package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestFaults(t *testing.T) {
	s := MountT(t, 8192)
	f, err := os.OpenFile(s.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != 8192 {
		t.Fatalf("stat %v %v", st, err)
	}
	if _, err := f.WriteAt([]byte("hello"), 100); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := f.ReadAt(b, 100); err != nil || string(b) != "hello" {
		t.Fatalf("read %q %v", b, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Fail(Read, syscall.EIO)
	s.Fail(Write, syscall.ENOSPC)
	s.Fail(Fsync, syscall.EIO)
	if _, err := f.ReadAt(b, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read: %v, want EIO", err)
	}
	if _, err := f.WriteAt(b, 0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write: %v, want ENOSPC", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync: %v, want EIO", err)
	}
	s.Fail(Read, 0)
	if _, err := f.ReadAt(b, 100); err != nil || string(b) != "hello" {
		t.Fatalf("read after clearing: %q %v", b, err)
	}
	if s.Calls(Fsync) != 2 || string(s.Bytes()[100:105]) != "hello" {
		t.Fatalf("fsync calls %d", s.Calls(Fsync))
	}
}

// TestStall: a stalled read waits until Release, then completes.
func TestStall(t *testing.T) {
	s := MountT(t, 8192)
	f, err := os.OpenFile(s.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.Stall(Read)
	done := make(chan error, 1)
	go func() {
		_, err := f.ReadAt(make([]byte, 10), 0)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stalled() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("stalled read returned (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if s.Stalled() != 1 {
		t.Fatalf("%d ops stalled, want 1", s.Stalled())
	}
	s.Release()
	if err := <-done; err != nil {
		t.Fatalf("read after Release: %v", err)
	}
}

func TestFullTmpfs(t *testing.T) {
	path := FullTmpfsT(t, 1<<20)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, _ := f.Stat(); st.Size() != 1<<20 {
		t.Fatalf("size %d", st.Size())
	}
	b := make([]byte, 4096)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatalf("read of a hole: %v", err)
	}
	if _, err := f.WriteAt(b, 512<<10); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write into a hole of a full tmpfs: %v, want ENOSPC", err)
	}
	if filepath.Base(path) != FileName {
		t.Fatal(path)
	}
}
