package e2e

import (
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
