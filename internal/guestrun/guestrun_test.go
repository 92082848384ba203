package guestrun

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	serial := "noise\r\nRESULT cmdline pass len=4 hex=74657374\nxx RESULT irq fail timer=0 serial=3\nSUMMARY pass=1 fail=1\n"
	var o Output
	Parse(serial, &o)
	if !o.Summary || o.Passed != 1 || o.Failed != 1 {
		t.Fatalf("summary: %+v", o)
	}
	c, ok := o.Results["cmdline"]
	if !ok || !c.Pass || c.KV["hex"] != "74657374" {
		t.Fatalf("cmdline result: %+v", c)
	}
	if n, err := c.Int("len"); err != nil || n != 4 {
		t.Fatalf("len = %d, %v", n, err)
	}
	irq := o.Results["irq"]
	if irq.Pass || irq.KV["serial"] != "3" {
		t.Fatalf("irq result: %+v", irq)
	}
	if len(o.Order) != 2 || o.Order[0] != "cmdline" {
		t.Fatalf("order: %v", o.Order)
	}
	if _, err := irq.Int("missing"); err == nil {
		t.Fatal("Int of a missing key succeeded")
	}
}

func TestRunUntilStopsProcess(t *testing.T) {
	o, err := RunUntil(context.Background(), 20*time.Second, func(s string) bool {
		return strings.Contains(s, "ready")
	}, "sh", "-c", "echo ready; sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	if !o.Stopped || o.TimedOut || o.Elapsed > 10*time.Second {
		t.Fatalf("stopped=%v timedOut=%v elapsed=%v", o.Stopped, o.TimedOut, o.Elapsed)
	}
}

func TestRunExitCodeAndTimeout(t *testing.T) {
	o, err := Run(context.Background(), 10*time.Second, "sh", "-c", "echo 'RESULT x pass'; exit 7")
	if err != nil {
		t.Fatal(err)
	}
	if o.ExitCode != 7 || !o.Results["x"].Pass {
		t.Fatalf("exit %d results %v", o.ExitCode, o.Results)
	}
	o, err = Run(context.Background(), 200*time.Millisecond, "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if !o.TimedOut {
		t.Fatal("not timed out")
	}
}
