package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecStatus: the host half of --exec. The test kernel's exec test
// speaks the protocol of the default guest's init (guest/linux/init): it decodes
// govm.exec=HEX from its command line, runs the command (a tiny shell),
// writes the status byte to the debug-exit port, then resets. govm exits
// with that status itself, not QEMU's (v<<1)|1.
func TestExecStatus(t *testing.T) {
	needKVM(t)
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initrd")
	if err := os.WriteFile(initrd, []byte("stand-in for the default guest's initramfs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(dir, "r.json")
	for _, c := range []struct {
		cmd    string
		status int
		out    string
	}{
		{"echo hello from exec; exit 3", 3, "hello from exec\n"},
		{"true", 0, ""},
		{"false", 1, ""},
		{"no-such-command", 127, "sh: no-such-command: not found\n"},
		{"exit 200", 200, ""},
	} {
		o := runSmoke(t, "", "run", "-k", testKernel, "-i", initrd, "-m", "64M", "-p", "test=exec", "--exec", c.cmd, "--result", res)
		if o.status != c.status || !strings.Contains(o.stdout, "govm exec: "+c.cmd+"\n"+c.out) {
			t.Fatalf("--exec %q: status %d, want %d\nserial:\n%s\nstderr:\n%s", c.cmd, o.status, c.status, o.stdout, o.stderr)
		}
		v := readVerdict(t, res)
		if v.ExitReason != "debug-exit" || v.Status != c.status || v.GuestCode == nil || *v.GuestCode != c.status ||
			v.Exec == nil || *v.Exec != c.cmd {
			t.Fatalf("--exec %q: verdict %+v", c.cmd, v)
		}
	}
}

// TestExecNeedsInitrd: --exec without --initrd and without the default
// guest image is bad input, with the way to build it.
func TestExecNeedsInitrd(t *testing.T) {
	needKVM(t)
	o := runSmoke(t, t.TempDir(), "run", "-k", testKernel, "--exec", "true")
	if o.status != 2 || !strings.Contains(o.stderr, "--exec needs the default guest's initramfs") || strings.Count(o.stderr, "\n") != 1 {
		t.Fatalf("status %d stderr %q", o.status, o.stderr)
	}
}
