package e2e

// Two VMMs writing one image corrupt it: govm and QEMU must refuse each
// other's image, both ways, as QEMU refuses a second QEMU.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/syncbuf"
	"golang.org/x/sys/unix"
)

// lockByteHeld reports whether any process holds a lock on byte off of
// path (QEMU's lock bytes: 100 someone reads, 101 writes, 201 refuses
// writers).
func lockByteHeld(t *testing.T, path string, off int64) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: off, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	return lk.Type != unix.F_UNLCK
}

// qemuHolding starts a QEMU (stopped: -S) with img on a legacy virtio-blk
// disk; it returns a channel closed when QEMU exits, and its stderr.
func qemuHolding(t *testing.T, img string, ro bool) (<-chan struct{}, *syncbuf.Buffer) {
	t.Helper()
	drive := "file=" + img + ",format=raw,if=none,id=d0"
	if ro {
		drive += ",readonly=on"
	}
	cmd := exec.Command("qemu-system-x86_64", "-S", "-nodefaults", "-display", "none", "-accel", "tcg",
		"-m", "64M", "-drive", drive, "-device", "virtio-blk-pci,drive=d0,disable-modern=on")
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("qemu-system-x86_64 (apt-get install qemu-system-x86): %v", err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return done, stderr
}

func TestDiskLockAgainstQEMU(t *testing.T) {
	needKVM(t)
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	disk := func(ro bool) string {
		if ro {
			return img + ",ro"
		}
		return img
	}
	for _, c := range []struct {
		name           string
		qemuRO, govmRO bool
		conflict       bool
	}{
		{"both write", false, false, true},
		{"QEMU writes, govm reads", false, true, true},
		{"QEMU reads, govm writes", true, false, true},
		{"both read", true, true, false},
	} {
		t.Run("QEMU first: "+c.name, func(t *testing.T) {
			qdone, qerr := qemuHolding(t, img, c.qemuRO)
			waitFor(t, 30*time.Second, "QEMU to lock the image", func() bool { return lockByteHeld(t, img, 100) })
			o := runSmoke(t, "", "run", "-k", testKernel, "--no-default-params", "--debug-exit", "-m", "64M",
				"-p", "test=boot", "--api-socket", "none", "--disk", disk(c.govmRO))
			if c.conflict {
				wantOneLine(t, "govm after QEMU", o.stderr, o.status, "is locked by another process (another govm, or a QEMU?)")
			} else if o.status != 1 {
				t.Fatalf("both read-only: govm exit %d, want 1 (the guest passed)\n%s", o.status, o.stderr)
			}
			select {
			case <-qdone:
				t.Fatalf("QEMU ended meanwhile: %s", qerr)
			default:
			}
		})
		t.Run("govm first: "+c.name, func(t *testing.T) {
			vm := startConsoleVM(t, "--api-socket", "none", "--disk", disk(c.govmRO))
			waitFor(t, 30*time.Second, "govm to lock the image", func() bool { return lockByteHeld(t, img, 100) })
			qdone, qerr := qemuHolding(t, img, c.qemuRO)
			select {
			case <-qdone:
				if !c.conflict {
					t.Fatalf("both read-only: QEMU ended: %s", qerr)
				}
				if !strings.Contains(qerr.String(), `Failed to get "write" lock`) &&
					!strings.Contains(qerr.String(), `Failed to get shared "write" lock`) {
					t.Fatalf("QEMU ended without naming the lock: %s", qerr)
				}
			case <-time.After(3 * time.Second):
				if c.conflict {
					t.Fatalf("QEMU still running on an image govm %s", map[bool]string{true: "reads", false: "writes"}[c.govmRO])
				}
			}
			_, _ = vm.in.Write([]byte("quit\r"))
			waitExit(t, vm.cmd, 30*time.Second)
		})
	}
}
