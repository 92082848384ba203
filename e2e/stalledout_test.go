package e2e

// A reader that stops reading govm's stdout (or stderr) must not keep govm
// alive: --timeout, SIGTERM and govm stop end the VM within 2 s, and govm
// says how much console output it could not write.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/api"
)

// stalledVM runs the test kernel's spew test (console output without end)
// with stdout on a pipe nobody reads, plus args; stderr goes to errTo, or
// the same pipe when errTo is nil. It returns the running command and a
// channel that yields its exit status.
func stalledVM(t *testing.T, errTo *os.File, args ...string) (*exec.Cmd, <-chan int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd := exec.Command(govmBin, append([]string{"run", "-k", testKernel, "--no-default-params", "-m", "64M",
		"-p", "test=spew"}, args...)...)
	cmd.Stdout = w
	cmd.Stderr = errTo
	if errTo == nil {
		cmd.Stderr = w
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	done := make(chan int, 1)
	go func() {
		cmd.Wait()
		done <- cmd.ProcessState.ExitCode()
	}()
	return cmd, done
}

// waitStatus waits at most d for the status; it fails the test otherwise.
func waitStatus(t *testing.T, done <-chan int, d time.Duration, what string) int {
	t.Helper()
	select {
	case st := <-done:
		return st
	case <-time.After(d):
		t.Fatalf("govm still running %v after %s with a stalled stdout", d, what)
		return -1
	}
}

// stderrFile is a file for govm's stderr that the test reads afterwards.
func stderrFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readStderr(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStalledStdoutTimeout: --timeout ends a VM whose console nobody reads
// (the pipe filled long before) with 124, within 2 s of the timeout, and
// says what it could not write; with stderr on the same stalled pipe too.
func TestStalledStdoutTimeout(t *testing.T) {
	needKVM(t)
	errf := stderrFile(t)
	start := time.Now()
	_, done := stalledVM(t, errf, "--timeout", "4s", "--api-socket", "none")
	st := waitStatus(t, done, 6*time.Second, "its 4 s timeout")
	stderr := readStderr(t, errf)
	if st != statusTimeout || !strings.Contains(stderr, "bytes not written: stdout was not read fast enough") {
		t.Fatalf("status %d after %v, stderr:\n%s", st, time.Since(start), stderr)
	}
	t.Logf("ended %v after start: %s", time.Since(start).Round(time.Millisecond), lastLineWith(stderr, "console output"))

	// Both stdout and stderr on the stalled pipe: no message gets out,
	// and govm still ends.
	_, done = stalledVM(t, nil, "--timeout", "4s", "--api-socket", "none")
	if st := waitStatus(t, done, 6*time.Second, "its 4 s timeout (stderr stalled too)"); st != statusTimeout {
		t.Fatalf("status %d, want %d", st, statusTimeout)
	}
}

// TestStalledStdoutSignalAndStop: SIGTERM, and govm stop, end such a VM
// within 2 s; govm stop says it stopped only once the VM is gone.
func TestStalledStdoutSignalAndStop(t *testing.T) {
	needKVM(t)
	cmd, done := stalledVM(t, stderrFile(t), "--api-socket", "none")
	time.Sleep(3 * time.Second) // the pipe is full by now
	cmd.Process.Signal(syscall.SIGTERM)
	if st := waitStatus(t, done, 2*time.Second, "SIGTERM"); st != 0 {
		t.Fatalf("SIGTERM: status %d, want 0", st)
	}

	name := "stalled-" + strings.ReplaceAll(t.Name(), "/", "-")
	_, done = stalledVM(t, stderrFile(t), "--name", name)
	time.Sleep(3 * time.Second)
	stop := runSmoke(t, "", "stop", name)
	select {
	case st := <-done:
		if st != 0 || stop.status != 0 || !strings.Contains(stop.stdout, "stopped") {
			t.Fatalf("govm stop: status %d (%q %q), VM status %d", stop.status, stop.stdout, stop.stderr, st)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("VM still running 2 s after govm stop returned (stop said %q, status %d)", stop.stdout, stop.status)
	}
}

// stayingVM answers the API but ignores stop: a govm that does not go away.
type stayingVM struct{}

func (stayingVM) Info() api.Info   { return api.Info{Name: "staying", State: "running"} }
func (stayingVM) Stats() api.Stats { return api.Stats{} }
func (stayingVM) Pause() error     { return nil }
func (stayingVM) Resume() error    { return nil }
func (stayingVM) Stop()            {}

// TestStopSaysWhenTheVMStays: govm stop exits 1, with one line, when the
// VM's socket is still there after --wait; it used to print "stopped" and
// exit 0 whatever happened.
func TestStopSaysWhenTheVMStays(t *testing.T) {
	needKVM(t)
	path := filepath.Join(t.TempDir(), "staying.sock")
	l, sock, err := api.Listen(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	srv := api.Serve(l, stayingVM{})
	defer srv.Close()
	o := runSmoke(t, "", "stop", path, "--wait", "500ms")
	if o.status != statusFailure || !strings.Contains(o.stderr, "staying did not stop within 500ms") || strings.Contains(o.stdout, "stopped") {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", o.status, o.stdout, o.stderr)
	}
}
