package main

import (
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/splat"
	"github.com/govm/govm/vmm"
)

// newTestSmoke is a smoke with a watcher fed console, no files.
func newTestSmoke(t *testing.T, f smokeFlags, console string) *smoke {
	t.Helper()
	if f.panicGrace == 0 {
		f.panicGrace = time.Hour
	}
	s, err := newSmoke(&f, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	s.watch.Write([]byte(console))
	return s
}

// TestDecide: the status rules of docs/usage.md, first match wins.
func TestDecide(t *testing.T) {
	const (
		panicLine = "[    1.0] Kernel panic - not syncing: boom\n"
		warnLine  = "[    0.5] WARNING: CPU: 0 PID: 1 at a.c:1 f\n"
		bugLine   = "BUG: kernel NULL pointer dereference\n"
	)
	reset := vmm.Result{Status: 0, Kind: vmm.ExitReset, Reason: "guest reset via i8042", GuestCode: -1}
	dbg := vmm.Result{Status: 1, Kind: vmm.ExitDebugExit, Reason: "guest wrote debug-exit port, status 1", GuestCode: 0}
	timeout := vmm.Result{Status: statusTimeout, Kind: vmm.ExitTimeout, Reason: "timeout: ...", GuestCode: -1}
	pv := vmm.Result{Status: 1, Kind: vmm.ExitPanic, Reason: "guest kernel panicked (pvpanic event)", GuestCode: -1}
	for _, c := range []struct {
		name    string
		f       smokeFlags
		console string
		res     vmm.Result
		status  int
		reason  string // substring
		exit    string
	}{
		{"clean reset", smokeFlags{}, "hello\n", reset, 0, "i8042", "reset"},
		{"panic line then reset", smokeFlags{}, panicLine, reset, statusPanic, `guest kernel panic: "Kernel panic - not syncing: boom"`, "panic"},
		{"panic beats guest success", smokeFlags{}, panicLine, dbg, statusPanic, "boom", "panic"},
		{"panic beats timeout", smokeFlags{}, panicLine, timeout, statusPanic, "boom", "panic"},
		{"panic beats fail-on", smokeFlags{failOn: []string{"warn"}}, warnLine + panicLine, reset, statusPanic, "boom", "panic"},
		{"pvpanic without a line", smokeFlags{}, "", pv, statusPanic, "pvpanic", "panic"},
		{"pvpanic with a line", smokeFlags{}, panicLine, pv, statusPanic, "boom\" (guest kernel panicked (pvpanic event))", "panic"},
		{"warn reported only", smokeFlags{}, warnLine, dbg, 1, "debug-exit", "debug-exit"},
		{"warn fails with fail-on", smokeFlags{failOn: []string{"warn"}}, warnLine, dbg, statusSplat, `warn splat (--fail-on): "WARNING: CPU: 0`, "debug-exit"},
		{"first failing splat named", smokeFlags{failOn: []string{"all"}}, bugLine + warnLine, reset, statusSplat, "bug splat", "reset"},
		{"fail-on beats timeout", smokeFlags{failOn: []string{"bug"}}, bugLine, timeout, statusSplat, "bug splat", "timeout"},
		{"timeout", smokeFlags{}, "", timeout, statusTimeout, "timeout", "timeout"},
		{"exec status", smokeFlags{exec: "true"}, "", vmm.Result{Status: 3, Kind: vmm.ExitDebugExit, GuestCode: 3}, 3, "", "debug-exit"},
		{"exec without status", smokeFlags{exec: "true"}, "", reset, 1, "without handing over the command's status", "reset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestSmoke(t, c.f, c.console)
			v := s.decide(c.res)
			if v.Status != c.status || !strings.Contains(v.Reason, c.reason) || v.ExitReason != c.exit {
				t.Fatalf("status %d exit_reason %q reason %q; want %d %q containing %q", v.Status, v.ExitReason, v.Reason, c.status, c.exit, c.reason)
			}
			if (c.res.GuestCode >= 0) != (v.GuestCode != nil) {
				t.Fatalf("guest_code %v for GuestCode %d", v.GuestCode, c.res.GuestCode)
			}
		})
	}
}

func TestNewSmokeRejects(t *testing.T) {
	for _, c := range []struct {
		f    smokeFlags
		want string
	}{
		{smokeFlags{timeout: -time.Second, panicGrace: time.Second}, "--timeout"},
		{smokeFlags{panicGrace: 0}, "--panic-grace"},
		{smokeFlags{panicGrace: time.Second, failOn: []string{"warn", "bogus"}}, `--fail-on "bogus"`},
		{smokeFlags{panicGrace: time.Second, result: "/nonexistent-dir/r.json"}, "--result"},
		{smokeFlags{panicGrace: time.Second, consoleLog: "/nonexistent-dir/c.log"}, "--console-log"},
	} {
		_, err := newSmoke(&c.f, time.Now())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %s", c.f, err, c.want)
		}
	}
}

// TestSplatSummary: one line, classes in --fail-on order, first line quoted.
func TestSplatSummary(t *testing.T) {
	v := verdict{SplatCounts: map[string]int{"warn": 2, "bug": 1}, Splats: []splat.Splat{
		{Kind: splat.Warn, Line: "WARNING: CPU: 0 a"}, {Kind: splat.Bug, Line: "BUG: b"}, {Kind: splat.Warn, Line: "WARNING: CPU: 1 c"}}}
	want := `guest console splats: bug x1 "BUG: b", warn x2 "WARNING: CPU: 0 a"`
	if got := splatSummary(v); got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
	if splatSummary(verdict{}) != "" {
		t.Fatal("summary without splats")
	}
}
