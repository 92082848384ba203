package main

// virtio-net under a driver as strict as Linux's (issue 8): the test
// kernel's receive path follows receive_mergeable, its NAPI completion
// follows napi_complete_done, and a MAC-only polling driver must not have
// to kick for every frame. Each test runs inside its own namespace and
// bounds its flood in count and time.

import (
	"fmt"
	"testing"
	"time"
)

// pingFlood runs ping -f -q inside ns, bounded by count and by -w seconds,
// and returns its summary numbers and output. With -w, ping waits for
// count replies (not just count requests); with a preload it may send a
// few more than count, so callers check recv >= count.
func pingFlood(t *testing.T, ns string, count, preload, size, deadline int) (sent, recv int, out string) {
	t.Helper()
	argv := []string{"timeout", fmt.Sprint(deadline + 30), "ping", "-q", "-f", "-c", fmt.Sprint(count),
		"-w", fmt.Sprint(deadline), "-s", fmt.Sprint(size)}
	if preload > 1 {
		argv = append(argv, "-l", fmt.Sprint(preload))
	}
	b, _ := nsExec(ns, append(argv, guestIP)...).CombinedOutput()
	sent, recv, ok := pingSummary(string(b))
	if !ok {
		t.Errorf("ping %v: no summary line\n%s", argv, b)
	}
	return sent, recv, string(b)
}

// TestNetNAPIMissed: the test kernel holds its NAPI completion window
// open (net.napi_hold_us: RX callbacks back on, the poll not yet marked
// idle) while ping -f -l 8 keeps frames arriving, so the device's
// interrupts land inside the window. The CPL0 hook sees a poll still
// scheduled; unless completion notices that (NAPI_STATE_MISSED) and polls
// again, the interrupt is gone, and with EVENT_IDX the device never
// interrupts again: the guest stops answering (BenchmarkNet's 120 s hang).
func TestNetNAPIMissed(t *testing.T) {
	needNetns(t)
	ns := newNetns(t)
	v := startVM(120*time.Second, govmNetArgv(ns, "test=net-echo net.serve_ms=50000 net.napi_hold_us=300"))
	waitReachable(t, ns, v, 30*time.Second)
	const pings = 5000
	sent, recv, out := pingFlood(t, ns, pings, 8, 56, 30)
	if recv < pings {
		t.Errorf("ping -f -l 8 -c %d: sent %d, received %d (the guest stopped answering)\n%s", pings, sent, recv, out)
	}
	quitGuest(t, ns, v)
	o := v.wait(t)
	r := result(t, o, "net-echo")
	t.Logf("ping: sent %d received %d; guest: napi_irqs=%s hook_busy=%s napi_missed=%s napi_repoll=%s interrupts=%s",
		sent, recv, r.KV["napi_irqs"], r.KV["hook_busy"], r.KV["napi_missed"], r.KV["napi_repoll"], r.KV["interrupts"])
	// The window must actually have been hit, or this proved nothing.
	if n, err := r.Int("napi_missed"); err != nil || n == 0 {
		t.Errorf("napi_missed=%s: no interrupt landed in the held completion window", r.KV["napi_missed"])
	}
	if r.KV["end"] != "quit" {
		t.Errorf("net-echo end=%s, want quit", r.KV["end"])
	}
}
