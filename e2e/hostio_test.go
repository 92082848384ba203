package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/internal/faultfs"
	"github.com/govm/govm/internal/guestrun"
)

// TestDiskHostEIO: the disk image sits on a FUSE file system that fails
// every read with EIO (a dying disk, from the kernel's real error path).
// The guest's reads end IOERR and it says so; the device goes on (GET_ID
// afterwards works), govm logs the errors rate-limited, counts them in the
// stats, and ends with the guest's own status, the seccomp filter on.
func TestDiskHostEIO(t *testing.T) {
	needKVM(t)
	fs := faultfs.MountT(t, 16<<20)
	img := make([]byte, 16<<20)
	for s := range uint64(len(img) / 512) {
		guestrun.PatternSector(img[s*512:(s+1)*512], s, 0)
	}
	if err := writeAll(fs.Path, img); err != nil {
		t.Fatal(err)
	}
	fs.Fail(faultfs.Read, syscall.EIO)
	o := govm(t, 120*time.Second, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
		"--disk", fs.Path+",serial=govm-disk0", "--stats", "-p", "test=blk-read,blk-id blk.serial=govm-disk0")
	if o.ExitCode != 3 {
		t.Fatalf("exit %d, want 3 (the guest saw failures)\nserial:\n%s\nstderr:\n%s", o.ExitCode, o.Serial, o.Stderr)
	}
	if r, ok := o.Results["blk-read"]; !ok || r.Pass || r.KV["reason"] != "io_error" {
		t.Fatalf("blk-read: %+v, want a fail with reason=io_error\nserial:\n%s", r, o.Serial)
	}
	result(t, o, "blk-id") // the device still answers after the errors
	for _, bad := range []string{"panic", "fatal error", "SIGSYS"} {
		if strings.Contains(o.Stderr, bad) {
			t.Fatalf("stderr has %q:\n%s", bad, o.Stderr)
		}
	}
	logged := strings.Count(o.Stderr, "host I/O error: read")
	m := regexp.MustCompile(`disk 0: .*host errors: read (\d+), write 0, flush 0, log lines suppressed (\d+)`).FindStringSubmatch(o.Stderr)
	if m == nil {
		t.Fatalf("no disk stats line:\n%s", o.Stderr)
	}
	reads, _ := strconv.Atoi(m[1])
	suppressed, _ := strconv.Atoi(m[2])
	if reads < 1 || logged < 1 || logged > 10 || logged+suppressed != reads {
		t.Fatalf("%d read errors, %d logged, %d suppressed\n%s", reads, logged, suppressed, o.Stderr)
	}
	if fs.Calls(faultfs.Read) < reads {
		t.Fatalf("govm counted %d read errors, the file system failed %d reads", reads, fs.Calls(faultfs.Read))
	}
}

// writeAll writes b at the start of the existing file path (a FUSE file
// of fixed size: no truncation).
func writeAll(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestDiskHostStalled: the disk's reads never return (a stalled FUSE or
// NFS mount). --timeout still ends govm, with 124, within stopWait (2 s)
// of the timeout and names the stuck device (whose read the file system
// only gives up when govm's exit interrupts it).
func TestDiskHostStalled(t *testing.T) {
	needKVM(t)
	fs := faultfs.MountT(t, 1<<20)
	fs.Stall(faultfs.Read)
	start := time.Now()
	o := govm(t, 60*time.Second, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
		"--disk", fs.Path, "--timeout", "3s", "--api-socket", "none", "-p", "test=blk-read")
	took := time.Since(start)
	if o.ExitCode != statusTimeout || took > 7*time.Second ||
		!strings.Contains(o.Stderr, "did not stop within 2s: its host I/O does not return") {
		t.Fatalf("exit %d after %v (want %d within 7 s)\nstderr:\n%s", o.ExitCode, took, statusTimeout, o.Stderr)
	}
	if fs.Calls(faultfs.Read) == 0 {
		t.Fatalf("no read reached the file system: the test proved nothing")
	}
	t.Logf("ended %v after start: %s", took.Round(time.Millisecond), lastLineWith(o.Stderr, "did not stop"))
}

// TestDiskPartialSector: an image whose size is not a multiple of 512
// bytes loses its tail to the guest (capacity counts sectors); govm says
// so, once, at start (it used to truncate silently).
func TestDiskPartialSector(t *testing.T) {
	needKVM(t)
	img := filepath.Join(t.TempDir(), "odd.img")
	if err := os.WriteFile(img, make([]byte, 1<<20+100), 0o644); err != nil {
		t.Fatal(err)
	}
	o := govm(t, 60*time.Second, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
		"-p", "test=boot", "--disk", img, "--api-socket", "none")
	want := "1048676 bytes is not a multiple of 512: the guest sees 1048576 bytes, not the last 100"
	if o.ExitCode != 1 || strings.Count(o.Stderr, want) != 1 {
		t.Fatalf("exit %d, stderr:\n%s\nwant once: %s", o.ExitCode, o.Stderr, want)
	}
}

// TestPauseWaitsForDisk: a pause returns only once every device has
// parked. With the guest's write stuck in the host's file system, pause
// fails after its bound (5 s), naming the disk, and the VM runs on; a
// second pause waits for the write and succeeds once the file system lets
// it return, after which the image does not change until resume. (govm
// used to report paused at once while the write was still in flight, so
// an image copied "while paused" could miss it.)
func TestPauseWaitsForDisk(t *testing.T) {
	needKVM(t)
	fs := faultfs.MountT(t, 1<<20)
	fs.Stall(faultfs.Write)
	sock := filepath.Join(shortTemp(t), "vm.sock")
	v := startVM(t, 120*time.Second, []string{govmBin, "run", "--kernel", testKernel, "--no-default-params",
		"--debug-exit", "--disk", fs.Path, "--api-socket", sock,
		"-p", "test=blk-write blk.write_start=100 blk.write_count=16"})
	waitFor(t, 30*time.Second, "the guest's write to reach the file system", func() bool { return fs.Stalled() > 0 })

	start := time.Now()
	_, errs, st := govmCmd(t, "pause", sock)
	took := time.Since(start)
	if st == 0 || !strings.Contains(errs, "disk 0 (") || !strings.Contains(errs, "did not park within 5s") || took < 4*time.Second {
		t.Fatalf("pause with a write in flight: exit %d after %v, want a failure naming disk 0 after 5 s\n%s", st, took, errs)
	}
	if _, errs, st := govmCmd(t, "resume", sock); st == 0 || !strings.Contains(errs, "not paused") {
		t.Fatalf("resume after the failed pause: exit %d, %s (want: not paused, the VM runs on)", st, errs)
	}

	paused := make(chan error, 1)
	go func() {
		_, errs, st := govmCmd(t, "pause", sock)
		if st != 0 {
			paused <- fmt.Errorf("exit %d: %s", st, errs)
			return
		}
		paused <- nil
	}()
	time.Sleep(time.Second)
	select {
	case err := <-paused:
		t.Fatalf("pause returned with the write still in flight (%v)", err)
	default:
	}
	fs.Release()
	if err := <-paused; err != nil {
		t.Fatalf("pause after the write returned: %v", err)
	}
	img := fs.Bytes()
	time.Sleep(500 * time.Millisecond)
	if !bytes.Equal(img, fs.Bytes()) || fs.Stalled() != 0 {
		t.Fatal("the image changed while paused")
	}
	if _, errs, st := govmCmd(t, "resume", sock); st != 0 {
		t.Fatalf("resume: %s", errs)
	}
	o := v.wait(t)
	if o.ExitCode != 1 {
		t.Fatalf("exit %d, want 1 (the guest passed)", o.ExitCode)
	}
	result(t, o, "blk-write")
}
