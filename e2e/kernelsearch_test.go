package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFile copies src to dst (making its directory) with mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// TestKernelSearchAndShortFlags: without --kernel govm takes
// ./arch/x86/boot/bzImage, and ./bzImage before it, saying which; the
// kvmtool short flags -i, -d, -n (and -k) work. The boot test checks the
// initrd arrived.
func TestKernelSearchAndShortFlags(t *testing.T) {
	needKVM(t)
	dir := t.TempDir()
	copyFile(t, testKernel, filepath.Join(dir, "arch", "x86", "boot", "bzImage"), 0o644)
	if err := os.WriteFile(filepath.Join(dir, "initrd"), []byte("initrd for the boot test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--no-default-params", "--debug-exit", "-m", "64M", "-p", "test=boot",
		"-i", "initrd", "-d", img + ",ro", "-n", "none"}
	o := runSmoke(t, dir, args...)
	if o.status != 1 || !strings.Contains(o.stdout, "RESULT initrd pass") {
		t.Fatalf("status %d\nserial:\n%s\nstderr:\n%s", o.status, o.stdout, o.stderr)
	}
	if !strings.Contains(o.stderr, "govm: no --kernel given: using ./arch/x86/boot/bzImage (searched ./bzImage, ./arch/x86/boot/bzImage, /boot/vmlinuz-") {
		t.Fatalf("stderr does not say which kernel:\n%s", o.stderr)
	}
	if !strings.Contains(o.stderr, "virtio") && !strings.Contains(o.stdout, "RESULT") {
		t.Fatalf("no disk")
	}
	copyFile(t, testKernel, filepath.Join(dir, "bzImage"), 0o644)
	o = runSmoke(t, dir, args...)
	if o.status != 1 || !strings.Contains(o.stderr, "using ./bzImage (") {
		t.Fatalf("status %d, stderr:\n%s", o.status, o.stderr)
	}
	// -k wins over the search.
	o = runSmoke(t, dir, append([]string{"run", "-k", testKernel}, args[1:]...)...)
	if o.status != 1 || strings.Contains(o.stderr, "no --kernel given") {
		t.Fatalf("-k: status %d, stderr:\n%s", o.status, o.stderr)
	}
}
