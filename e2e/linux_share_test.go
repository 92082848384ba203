package e2e

// L3: govm run --share with the default guest's Linux: its own 9p client
// (net/9p/trans_virtio.c, fs/9p) mounts the host's directories.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

// TestLinuxShare: the guest mounts a read-write and a read-only share,
// reads a file the host wrote, writes one the host then reads, is refused a
// write on the read-only one, and cannot reach a host file beside the share
// through a symlink in it (the guest resolves a symlink's target in its
// own namespace; the server follows none).
func TestLinuxShare(t *testing.T) {
	kernel, initrd := needLinux(t)
	rw, ro, beside := t.TempDir(), t.TempDir(), t.TempDir()
	for p, s := range map[string]string{filepath.Join(rw, "host.txt"): "from-the-host\n",
		filepath.Join(ro, "ro.txt"): "read-only\n", filepath.Join(beside, "secret"): "secret\n"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(beside, filepath.Join(rw, "escape")); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		"mkdir -p /mnt/rw /mnt/ro",
		"mount -t 9p -o trans=virtio,version=9p2000.L rw /mnt/rw || echo S-MOUNT-FAILED",
		"mount -t 9p -o trans=virtio,version=9p2000.L ro /mnt/ro || echo S-MOUNT-FAILED",
		`echo "S-READ $(cat /mnt/rw/host.txt) $(cat /mnt/ro/ro.txt)"`,
		"echo guest-wrote > /mnt/rw/guest.txt && echo S-WROTE",
		"if echo x > /mnt/ro/new.txt; then echo S-RO-WROTE; else echo S-RO-REFUSED; fi",
		"if cat /mnt/rw/escape/secret; then echo S-ESCAPED; else echo S-CONTAINED; fi",
		"umount /mnt/rw && echo S-UMOUNT",
		"exit 5",
	}, "\n")
	argv := []string{govmBin, "run", "-k", kernel, "-i", initrd, "-m", "128M",
		"--share", rw + ",tag=rw", "--share", ro + ",tag=ro,ro", "--stats", "--exec", script}
	p, err := guestrun.Start(guestrun.Options{}, argv...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	status, err := p.Wait(180 * time.Second)
	out := p.Serial()
	if err != nil || status != 5 {
		t.Fatalf("exit %d, %v; want the script's 5\nconsole tail:\n%s\nstderr:\n%s", status, err, tail(out, 3000), p.Output().Stderr)
	}
	for _, want := range []string{"S-READ from-the-host read-only", "S-WROTE", "S-RO-REFUSED", "S-CONTAINED", "S-UMOUNT"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the console:\n%s", want, tail(out, 3000))
		}
	}
	// --stats: a line per share, with the requests its mount made.
	stderr := p.Output().Stderr
	for _, tag := range []string{"rw", "ro"} {
		m := regexp.MustCompile(`govm: stats: share ` + tag + `: requests=(\d+) bytes_in=\d+ bytes_out=\d+ fids_reclaimed=\d+ conns_abandoned=0`).FindStringSubmatch(stderr)
		if m == nil || m[1] == "0" {
			t.Errorf("share %s: no stats line with requests, in:\n%s", tag, stderr)
		}
	}
	for _, bad := range []string{"S-MOUNT-FAILED", "S-RO-WROTE", "S-ESCAPED", "secret\n"} {
		if strings.Contains(out, bad) {
			t.Errorf("%q in the console:\n%s", bad, tail(out, 3000))
		}
	}
	if b, err := os.ReadFile(filepath.Join(rw, "guest.txt")); string(b) != "guest-wrote\n" {
		t.Errorf("the host reads %q, %v from the guest's file", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "new.txt")); err == nil {
		t.Error("a file appeared in the read-only share")
	}
	if ents, _ := os.ReadDir(beside); len(ents) != 1 {
		t.Errorf("beside the share: %v", ents)
	}
}

// TestLinuxHostCommand: `govm run -k KERNEL -- CMD`, as virtme-ng's
// `vng -- CMD`: the default guest boots with the host's / as its root
// (read-only, under a tmpfs), runs CMD in the host's current directory,
// which it may write, prints its output on govm's stdout and ends govm with
// CMD's status. The issue's own example: the host's hostname, status 7.
func TestLinuxHostCommand(t *testing.T) {
	kernel, initrd := needLinux(t)
	host, err := os.ReadFile("/etc/hostname")
	if err != nil {
		t.Skipf("the host has no /etc/hostname to compare: %v", err)
	}
	dir := t.TempDir()
	argv := []string{govmBin, "run", "-k", kernel, "-i", initrd, "-m", "256M", "--",
		"sh", "-c", "cat /etc/hostname; echo in-$(basename $PWD); echo guest > made-by-guest; touch /etc/guest-only 2>/dev/null && echo S-ETC-WRITABLE; exit 7"}
	p, err := guestrun.Start(guestrun.Options{Dir: dir}, argv...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	status, err := p.Wait(240 * time.Second)
	out := p.Serial()
	if err != nil || status != 7 {
		t.Fatalf("exit %d, %v; want CMD's 7\nconsole tail:\n%s\nstderr:\n%s", status, err, tail(out, 3000), p.Output().Stderr)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		lines[strings.TrimRight(l, "\r")] = true
	}
	for _, want := range []string{strings.TrimSpace(string(host)), "in-" + filepath.Base(dir), "S-ETC-WRITABLE"} {
		if !lines[want] {
			t.Errorf("no line %q in the console:\n%s", want, tail(out, 3000))
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "made-by-guest")); string(b) != "guest\n" {
		t.Errorf("the host reads %q, %v from the guest's file in the working directory", b, err)
	}
	if _, err := os.Stat("/etc/guest-only"); err == nil {
		os.Remove("/etc/guest-only")
		t.Error("the guest's write to / reached the host")
	}
}
