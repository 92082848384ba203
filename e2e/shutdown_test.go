package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

// TestStatsSignalDuringExit: SIGUSR1 (print the queue stats) sent in a
// tight loop while the guest runs and ends. govm prints stats, and neither
// dies of the signal nor faults on guest RAM unmapped under a print: the
// stats printer is joined before the machine closes. Several runs, as the
// exit window is short (too short to hit reliably: vmm's
// TestDeviceStatsAfterClose is the deterministic test of the fault).
func TestStatsSignalDuringExit(t *testing.T) {
	needKVM(t)
	disk := filepath.Join(t.TempDir(), "disk.img")
	if err := guestrun.WritePatternImage(disk, 16<<20); err != nil {
		t.Fatal(err)
	}
	const runs = 5
	for i := range runs {
		p, err := guestrun.Start(guestrun.Options{}, govmBin, "run", "--kernel", testKernel, "--no-default-params",
			"--debug-exit", "--disk", disk+",serial=govm-disk0", "-p", "test=blk-basic blk.serial=govm-disk0")
		if err != nil {
			t.Fatal(err)
		}
		// SIGUSR1 is caught once the VM runs; before that its default
		// action (terminate) is still in place.
		if _, err := p.FirstByte(120 * time.Second); err != nil {
			t.Fatalf("run %d: no console output: %v\nstderr:\n%s", i, err, p.Stderr())
		}
		sent := 0
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				// os.Process.Signal goes through a pidfd: once govm is
				// reaped it fails with ErrProcessDone instead of
				// signalling a reused PID.
				if err := p.Cmd.Process.Signal(syscall.SIGUSR1); errors.Is(err, os.ErrProcessDone) {
					return
				}
				sent++
			}
		}()
		code, err := p.Wait(120 * time.Second)
		close(stop)
		<-done
		o := p.Output()
		if err != nil {
			t.Fatalf("run %d: %v\nstderr:\n%s", i, err, o.Stderr)
		}
		for _, bad := range []string{"fatal error", "panic", "SIGSEGV", "unexpected fault"} {
			if strings.Contains(o.Stderr, bad) {
				t.Fatalf("run %d: govm crashed (%q) after %d SIGUSR1:\n%s", i, bad, sent, o.Stderr)
			}
		}
		if code != 1 || !o.Summary || o.Failed != 0 {
			t.Fatalf("run %d: exit %d (want 1, -1 = killed by a signal) after %d SIGUSR1\nserial:\n%s\nstderr:\n%s",
				i, code, sent, o.Serial, o.Stderr)
		}
		if !strings.Contains(o.Stderr, "govm: stats: virtio-blk") {
			t.Fatalf("run %d: %d SIGUSR1 and no stats line:\n%s", i, sent, o.Stderr)
		}
	}
}
