package guestrun

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestProc drives Proc with /bin/sh standing in for a VMM.
func TestProc(t *testing.T) {
	t.Run("lines and exit status", func(t *testing.T) {
		var hookPID int
		p, err := Start(Options{OnFirstByte: func(pid int) { hookPID = pid }}, "/bin/sh", "-c",
			`sleep 0.05; printf 'boot\r\nRESULT a pass\r\npartial'; sleep 0.05; printf ' line\nSUMMARY pass=1 fail=0 skip=0\n'; exit 3`)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := p.FirstByte(5 * time.Second)
		if err != nil || fb < 50*time.Millisecond {
			t.Fatalf("FirstByte = %v, %v; want >= 50ms (the script sleeps first)", fb, err)
		}
		if hookPID != p.Cmd.Process.Pid {
			t.Errorf("OnFirstByte got pid %d, want %d", hookPID, p.Cmd.Process.Pid)
		}
		if l, err := p.WaitLine("RESULT", 5*time.Second); err != nil || l != "RESULT a pass" {
			t.Fatalf("WaitLine(RESULT) = %q, %v", l, err)
		}
		if l, err := p.WaitLine("partial", 5*time.Second); err != nil || l != "partial line" {
			t.Fatalf("WaitLine(partial) = %q, %v; want the completed line", l, err)
		}
		_, atResult, ok1 := p.LineAt("RESULT")
		_, atPartial, ok2 := p.LineAt("partial")
		if !ok1 || !ok2 || atResult < fb || atPartial-atResult < 40*time.Millisecond {
			t.Errorf("LineAt: RESULT at %v, partial at %v (first byte %v); want partial >= 50ms later",
				atResult, atPartial, fb)
		}
		if _, _, ok := p.LineAt("SUMMARY pass=2"); ok {
			t.Error("LineAt found a line that was never printed")
		}
		status, err := p.Wait(5 * time.Second)
		if err != nil || status != 3 {
			t.Fatalf("Wait = %d, %v; want 3", status, err)
		}
		if p.ExitAfter() < fb || p.MaxRSSKB() <= 0 {
			t.Errorf("ExitAfter = %v (first byte %v), MaxRSSKB = %d", p.ExitAfter(), fb, p.MaxRSSKB())
		}
		if _, err := p.WaitLine("never", time.Second); !errors.Is(err, ErrExited) {
			t.Errorf("WaitLine after exit: err = %v, want ErrExited", err)
		}
		o := p.Output()
		if o.ExitCode != 3 || o.Check() != nil || !o.Results["a"].Pass || !strings.Contains(o.Serial, "partial line") {
			t.Errorf("Output = %+v, Check %v", o, o.Check())
		}
	})
	t.Run("timeout kills the process group", func(t *testing.T) {
		// The child sleep holds the console pipe open: killing only the shell
		// would leave the read side waiting for 30 s.
		p, err := Start(Options{}, "/bin/sh", "-c", "sleep 30; echo never")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := p.FirstByte(100 * time.Millisecond); !errors.Is(err, ErrTimeout) {
			t.Fatalf("FirstByte err = %v, want ErrTimeout", err)
		}
		status, err := p.Wait(5 * time.Second)
		if err != nil || status != -1 || time.Since(start) > 5*time.Second {
			t.Fatalf("after timeout: Wait = %d, %v; want -1 (killed)", status, err)
		}
		if o := p.Output(); o.ExitCode != -1 || !errors.Is(o.Check(), ErrNoSummary) {
			t.Errorf("Output after kill: exit %d, Check %v", o.ExitCode, o.Check())
		}
	})
	t.Run("stderr is kept", func(t *testing.T) {
		p, err := Start(Options{}, "/bin/sh", "-c", "echo oops >&2; exit 1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.FirstByte(5 * time.Second); !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "oops") {
			t.Fatalf("FirstByte err = %v, want ErrExited mentioning stderr", err)
		}
		if p.Stderr() != "oops\n" {
			t.Errorf("Stderr = %q", p.Stderr())
		}
	})
	t.Run("stdin feeds the console", func(t *testing.T) {
		p, err := Start(Options{Stdin: strings.NewReader("quit\r")}, "/bin/sh", "-c", "read -r l; echo got $l")
		if err != nil {
			t.Fatal(err)
		}
		if l, err := p.WaitLine("got", 5*time.Second); err != nil || !strings.HasPrefix(l, "got quit") {
			t.Fatalf("WaitLine = %q, %v", l, err)
		}
	})
	if _, err := Start(Options{}, "/nonexistent/vmm"); err == nil {
		t.Error("Start of a missing binary succeeded")
	}
	if _, err := Start(Options{}); !errors.Is(err, ErrEmptyCommand) {
		t.Errorf("Start() err = %v, want ErrEmptyCommand", err)
	}
}

// A VMM a test left running is killed by KillAll (TestMain's safety net),
// and a reaped one leaves the set. (Other tests' VMMs may still be in the
// set, so only this one is looked for.)
func TestKillAll(t *testing.T) {
	p, err := Start(Options{}, "/bin/sh", "-c", "echo up; sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitLine("up", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !live.has(p) {
		t.Fatal("a running VMM is not in the live set")
	}
	if n := KillAll(); n < 1 {
		t.Fatalf("KillAll killed %d, want at least this test's VMM", n)
	}
	if _, err := p.Wait(10 * time.Second); err != nil {
		t.Fatalf("the VMM outlived KillAll: %v", err)
	}
	if live.has(p) {
		t.Fatal("a reaped VMM is still in the live set")
	}
}
