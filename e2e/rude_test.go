package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRudeGuest: the test kernel's rude test writes garbage to every I/O
// port and every PCI config offset (guest/tests/rude.c), for garbage
// values other than the default one TestGuestTable's [rude] entry uses. govm must not panic or hang, must let the guest end with its own
// status, keep the disks working (the guest re-initialises disk 0 and reads
// it back), leave the images untouched, and keep its log short: transport
// errors are logged once per kind, guest errors through the rate limiter.
func TestRudeGuest(t *testing.T) {
	needKVM(t)
	for _, v := range []int{0x00, 0xff} {
		t.Run(fmt.Sprintf("value=%#x", v), func(t *testing.T) {
			dir := t.TempDir()
			var args []string
			var paths []string
			var imgs [][]byte
			for i, size := range []int64{16 << 20, 8 << 20} {
				p := filepath.Join(dir, fmt.Sprintf("disk%d.img", i))
				img := makePatternDisk(t, p, size)
				args = append(args, "--disk", p)
				paths, imgs = append(paths, p), append(imgs, img)
			}
			args = append([]string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
				"--mem", "256M", "-p", fmt.Sprintf("test=rude rude.value=%d", v)}, args...)
			o := govm(t, 240*time.Second, args...)
			if o.ExitCode != 1 || !o.Summary || o.Failed != 0 {
				t.Fatalf("exit %d, want 1 (all passed)\nserial:\n%s\nstderr:\n%s", o.ExitCode, o.Serial, o.Stderr)
			}
			for _, r := range []string{"rude-pci", "rude-disk"} {
				result(t, o, r)
			}
			for _, bad := range []string{"panic", "fatal error", "SIGSYS", "SIGSEGV"} {
				if strings.Contains(o.Stderr, bad) {
					t.Fatalf("govm stderr has %q:\n%s", bad, o.Stderr)
				}
			}
			// Two disks: per device at most a handful of once-only
			// kinds plus the rate limiter's burst; the rest is start-up
			// and the exit line.
			if n := strings.Count(o.Stderr, "\n"); n > 40 {
				t.Fatalf("%d lines on stderr for one rude guest:\n%s", n, o.Stderr)
			}
			for i, p := range paths {
				got, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, imgs[i]) {
					t.Fatalf("disk %d changed", i)
				}
			}
		})
	}
}
