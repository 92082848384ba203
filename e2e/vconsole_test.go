package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVirtioConsole: with --console virtio the test kernel's virtio-console
// driver (guest/tests/vcons.c, strict like Linux's virtio_console) writes
// through transmitq0 to govm's stdout, and a line typed on govm's stdin
// reaches it through receiveq0 (not the UART), which it echoes back.
func TestVirtioConsole(t *testing.T) {
	needKVM(t)
	v := startConsoleVMArgs(t, []string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
		"--console", "virtio", "-p", "test=vcons vcons.ms=30000"})
	waitFor(t, 30*time.Second, "the guest's hello on the virtio console", func() bool {
		return strings.Contains(v.stdout.String(), "vcons: hello from the guest\n")
	})
	if _, err := v.in.Write([]byte("ping from host\n")); err != nil {
		t.Fatal(err)
	}
	if st := waitExit(t, v.cmd, 60*time.Second); st != 1 {
		t.Fatalf("exit %d, want 1 (all passed)\nstdout:\n%s\nstderr:\n%s", st, v.stdout, v.stderr)
	}
	out := v.stdout.String()
	if !strings.Contains(out, "vcons: got ping from host\n") || !strings.Contains(out, "RESULT vcons pass got=70696e672066726f6d20686f7374 tx_used_len=0") {
		t.Fatalf("stdout:\n%s", out)
	}
}

// TestNinePDriver: the test kernel's 9P driver (guest/tests/p9.c, as
// strict as Linux's trans_virtio and client: the mount tag from config
// space, every answer's size, type and tag checked) reads a host file
// through --share, and its hostile cases (a size field beyond the chain,
// no room for the answer) each stop the device with NEEDS_RESET, after
// which a reset device answers again.
func TestNinePDriver(t *testing.T) {
	needKVM(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := bootTest(t, "test=p9,p9-hostile", "--share", dir+",tag=hosttag")
	if r := result(t, o, "p9"); r.KV["tag"] != "hosttag" || r.KV["read"] != "ok" {
		t.Fatalf("p9: %v", r.KV)
	}
	result(t, o, "p9-hostile")
	if n := strings.Count(o.Stderr, "virtio9p: malformed request"); n != 2 {
		t.Fatalf("%d guest-error lines for the two hostile chains:\n%s", n, o.Stderr)
	}
}
