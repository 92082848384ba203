package e2e

// How a VM ends: guest reset through the i8042, a signal, console input.

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestEndByTripleFault: a guest that triple-faults (the test kernel loads
// an empty IDT and faults) resets; govm ends with status 0 and says so.
func TestEndByTripleFault(t *testing.T) {
	needKVM(t)
	o := govm(t, 60*time.Second, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
		"-p", "test=fault fault=triple")
	if o.ExitCode != 0 || !strings.Contains(o.Stderr, "govm: guest reset (triple fault on vCPU 0)") {
		t.Fatalf("exit %d, want 0 with the triple-fault reason\nserial:\n%s\nstderr:\n%s", o.ExitCode, o.Serial, o.Stderr)
	}
	if !strings.Contains(o.Serial, "loading an empty IDT") {
		t.Fatalf("the guest did not reach its triple fault:\n%s", o.Serial)
	}
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
	v := startConsoleVM(t)
	time.Sleep(500 * time.Millisecond)
	_, _ = v.in.Write([]byte("hello govm\r"))
	time.Sleep(500 * time.Millisecond)
	_, _ = v.in.Write([]byte("quit\r"))
	if st := waitExit(t, v.cmd, 30*time.Second); st != 1 {
		t.Fatalf("exit %d, want 1 (debug-exit 0)\nstdout:\n%s\nstderr:\n%s", st, v.stdout, v.stderr)
	}
	if !strings.Contains(v.stdout.String(), "hello govm") {
		t.Fatalf("the guest did not echo the input:\n%s", v.stdout)
	}
}

// TestStopBySignal: SIGTERM and SIGINT stop a running guest cleanly: exit
// status 0 and one line saying so.
func TestStopBySignal(t *testing.T) {
	needKVM(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		v := startConsoleVM(t)
		time.Sleep(500 * time.Millisecond)
		if err := v.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if st := waitExit(t, v.cmd, 10*time.Second); st != 0 {
			t.Fatalf("%v: exit %d, want 0\n%s", sig, st, v.stderr)
		}
		if !strings.Contains(v.stderr.String(), "govm: stopped") {
			t.Fatalf("%v: no reason line:\n%s", sig, v.stderr)
		}
	}
}

// TestStatsReportQueues: --stats tells what each queue did, and the
// counts agree with what the guest counted on its side.
func TestStatsReportQueues(t *testing.T) {
	needKVM(t)
	img := filepath.Join(t.TempDir(), "d.img")
	makePatternDisk(t, img, 8<<20)
	o := govm(t, 60*time.Second, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
		"-p", "test=blk-qd", "--disk", img, "--stats")
	r := result(t, o, "blk-qd")
	noWatchdogReports(t, o.Stderr)
	m := regexp.MustCompile(`govm: stats: virtio-blk: status 0x7, kicks (\d+) \(\+(\d+) by ioeventfd\), interrupts (\d+) .*ISR reads (\d+) .*; requests avail (\d+) used (\d+) in flight 0/128`).FindStringSubmatch(o.Stderr)
	if m == nil {
		t.Fatalf("no stats line for the disk:\n%s", o.Stderr)
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(m[i], 10, 64); return v }
	irqs, _ := r.Int("interrupts")
	isr, _ := r.Int("isr_reads")
	done, _ := r.Int("completions")
	if n(3) != irqs || n(4) != isr || n(6) != done || n(5) != n(6) {
		t.Fatalf("govm says interrupts %d ISR reads %d used %d; guest counted interrupts %d ISR reads %d completions %d",
			n(3), n(4), n(6), irqs, isr, done)
	}
	if kicks, _ := r.Int("kicks"); n(1)+n(2) < 1 || kicks < 1 {
		t.Fatalf("no kicks seen (govm %d+%d, guest %d)", n(1), n(2), kicks)
	}
	// And what govm spent before the guest's first instruction.
	su := regexp.MustCompile(`govm: stats: startup: ([0-9.]+) ms CPU before the first KVM_RUN`).FindStringSubmatch(o.Stderr)
	if su == nil {
		t.Fatalf("no start-up line in --stats:\n%s", o.Stderr)
	}
	if v, err := strconv.ParseFloat(su[1], 64); err != nil || v <= 0 {
		t.Fatalf("start-up CPU %q: want a positive number of milliseconds", su[1])
	}
}
