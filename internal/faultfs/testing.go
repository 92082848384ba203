package faultfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// MountT mounts a fault file system with a file of size bytes for a test
// and unmounts it in cleanup (after the test's own cleanups, which close
// the file). Where FUSE cannot exist (no /dev/fuse, not root) the test is
// skipped with the reason.
func MountT(t testing.TB, size int) *FS {
	t.Helper()
	ensureDevFUSE()
	s, err := Mount(t.TempDir(), size)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no FUSE on this host: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("faultfs: unmount %s: %v", s.Dir, err)
		}
	})
	return s
}

// ensureDevFUSE makes /dev/fuse exist where it can: a fresh machine may
// not have loaded the fuse module yet (modprobe, from kmod, which
// scripts/deps.sh installs), and a minimal /dev (a container) may lack the
// node although the kernel has FUSE (mknod c 10 229, its fixed
// misc-device number). Without root neither works and Mount reports
// ErrUnavailable.
func ensureDevFUSE() {
	if _, err := os.Stat("/dev/fuse"); err == nil {
		return
	}
	_ = exec.Command("modprobe", "fuse").Run()
	if _, err := os.Stat("/dev/fuse"); err == nil {
		return
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err == nil && strings.Contains(string(fs), "\tfuse\n") {
		_ = unix.Mknod("/dev/fuse", unix.S_IFCHR|0o666, int(unix.Mkdev(10, 229)))
	}
}

// FullTmpfsT mounts a small tmpfs for a test, creates FileName in it as a
// sparse file of size bytes (all holes), and fills the rest of the tmpfs, so
// reads succeed and any write into the file fails with ENOSPC, a real
// "disk full" from the kernel. It returns the file's path; the tmpfs is
// unmounted in cleanup. Skipped with the reason when mount(2) is refused
// (not root).
func FullTmpfsT(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("cannot mount a tmpfs (not root?): %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	page := make([]byte, 4096)
	for {
		if _, err := filler.Write(page); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill tmpfs: %v", err)
			}
			return path
		}
	}
}
