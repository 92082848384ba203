package main

// How a VM ends: guest reset through the i8042, a signal, console input.

import (
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEndByI8042Reset: without --debug-exit the test kernel's exit write
// to 0x501 goes nowhere and it pulses the reset line through the i8042;
// govm ends with status 0 and says why.
func TestEndByI8042Reset(t *testing.T) {
	needKVM(t)
	o := govm(t, 60*time.Second, "run", "--kernel", testKernel, "--no-default-params", "-p", "test=boot")
	if o.ExitCode != 0 {
		t.Fatalf("exit %d, want 0\n%s", o.ExitCode, o.Stderr)
	}
	if !strings.Contains(o.Stderr, "govm: guest reset via i8042") {
		t.Fatalf("stderr does not give the reason:\n%s", o.Stderr)
	}
	if !o.Summary {
		t.Fatalf("the guest did not finish before the reset:\n%s", o.Serial)
	}
}

// startConsole starts govm on the test kernel's interactive console with a
// pipe on stdin.
func startConsole(t *testing.T) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, func(string)) {
	t.Helper()
	cmd := exec.Command(govmBin, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit", "-p", "test=console")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, &stdout, &stderr, func(s string) { _, _ = in.Write([]byte(s)) }
}

func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(d):
		_ = cmd.Process.Kill()
		t.Fatalf("govm did not exit within %v", d)
		return -1
	}
}

// TestConsoleInput: bytes on govm's stdin reach the guest's UART (RX FIFO,
// RDA) and the guest's echo comes back on stdout; "quit" ends the VM.
func TestConsoleInput(t *testing.T) {
	needKVM(t)
	cmd, stdout, stderr, send := startConsole(t)
	time.Sleep(500 * time.Millisecond)
	send("hello govm\r")
	time.Sleep(500 * time.Millisecond)
	send("quit\r")
	if st := waitExit(t, cmd, 30*time.Second); st != 1 {
		t.Fatalf("exit %d, want 1 (debug-exit 0)\nstdout:\n%s\nstderr:\n%s", st, stdout, stderr)
	}
	if !strings.Contains(stdout.String(), "hello govm") {
		t.Fatalf("the guest did not echo the input:\n%s", stdout)
	}
}

// TestStopBySignal: SIGTERM and SIGINT stop a running guest cleanly: exit
// status 0 and one line saying so.
func TestStopBySignal(t *testing.T) {
	needKVM(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd, _, stderr, _ := startConsole(t)
		time.Sleep(500 * time.Millisecond)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if st := waitExit(t, cmd, 10*time.Second); st != 0 {
			t.Fatalf("%v: exit %d, want 0\n%s", sig, st, stderr)
		}
		if !strings.Contains(stderr.String(), "govm: stopped") {
			t.Fatalf("%v: no reason line:\n%s", sig, stderr)
		}
	}
}
