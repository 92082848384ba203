package main

// L3: a full Linux guest (Debian kernel + the busybox initramfs that
// scripts/mkguest.sh builds) uses govm's virtio-blk disk. A stock kernel
// cannot boot on an emulation-only host, so these tests skip there, saying
// why; on hosts with VT-x/AMD-V they run.

import (
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

// needFullLinux skips when a stock kernel cannot boot here and otherwise
// returns the default guest (building it if needed).
func needFullLinux(t *testing.T) (kernel, initrd string) {
	t.Helper()
	needKVM(t)
	if out, err := exec.Command(govmBin, "host", "--emulation-only").Output(); err == nil {
		t.Skipf("host KVM is emulation-only (%s): a stock Linux kernel dies in KVM's instruction emulator "+
			"(xrstor after its Memory: line, see docs/boot.md), so a full Linux boot cannot run here",
			strings.TrimSpace(string(out)))
	}
	root := repoPath()
	out := filepath.Join(root, "build", "guest")
	if b, err := exec.Command("bash", filepath.Join(root, "scripts", "mkguest.sh"), out).CombinedOutput(); err != nil {
		t.Fatalf("mkguest.sh: %v\n%s", err, b)
	}
	return filepath.Join(out, "bzImage"), filepath.Join(out, "initrd.cpio.gz")
}

// TestLinuxExt4Disk: the guest mounts an ext4 image on /dev/vda, reads a
// file the host put there, writes one; the host reads it after govm exits.
func TestLinuxExt4Disk(t *testing.T) {
	kernel, initrd := needFullLinux(t)
	dir := t.TempDir()
	content := filepath.Join(dir, "content")
	if err := os.MkdirAll(content, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(content, "hello.txt"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.ext4")
	if b, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", content, img, "32M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, b)
	}
	script := "mkdir -p /mnt && mount -t ext4 /dev/vda /mnt && cat /mnt/hello.txt && echo written-by-guest > /mnt/out.txt && umount /mnt && echo L3-DONE; reboot -f"
	o, err := guestrun.RunUntil(context.Background(), 180*time.Second, nil, govmBin, "run",
		"--kernel", kernel, "--initrd", initrd, "-m", "512M", "--disk", img,
		"-p", "govm.cmd="+hex.EncodeToString([]byte(script)))
	if err != nil {
		t.Fatal(err)
	}
	if o.TimedOut || !strings.Contains(o.Serial, "hello from the host") || !strings.Contains(o.Serial, "L3-DONE") {
		t.Fatalf("guest did not read and write the disk (timed out %v)\nserial tail:\n%s", o.TimedOut, tail(o.Serial, 3000))
	}
	// debugfs reads the file back from the image without mounting it.
	b, err := exec.Command("debugfs", "-R", "cat /out.txt", img).Output()
	if err != nil || strings.TrimSpace(string(b)) != "written-by-guest" {
		t.Fatalf("host reads %q from the image (%v), want written-by-guest", b, err)
	}
}
