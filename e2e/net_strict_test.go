package e2e

// virtio-net under a driver as strict as Linux's (issue 8): the test
// kernel's receive path follows receive_mergeable, its NAPI completion
// follows napi_complete_done, and a MAC-only polling driver must not have
// to kick for every frame. Each test runs inside its own namespace and
// bounds its flood in count and time.

import (
	"fmt"
	"testing"
	"time"

	"github.com/govm/govm/internal/netnstest"
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
	b, _ := nsExec(ns, append(argv, netnstest.GuestIP)...).CombinedOutput()
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
	v := startVM(t, 120*time.Second, govmNetArgv(ns, "test=net-echo net.serve_ms=50000 net.napi_hold_us=300"))
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

// TestNetMergeableStrict: with 256-byte mergeable receive buffers a
// 1400-byte ping spans six buffers. The test kernel takes a frame's first
// buffer as soon as used idx covers it and requires the other
// num_buffers-1 to be used already, as Linux's receive_mergeable does
// (spec 5.1.6.4: the device uses a packet's buffers together). A device
// that publishes used idx once per buffer makes it print "rx error: M
// buffers out of N missing" and fail net-echo (rx_missing > 0), and a
// Linux guest would drop those frames.
func TestNetMergeableStrict(t *testing.T) {
	needNetns(t)
	for _, vr := range []struct{ name, knobs string }{
		{"poll", "net.poll=1"},
		{"interrupt", ""},
	} {
		t.Run(vr.name, func(t *testing.T) {
			ns := newNetns(t)
			v := startVM(t, 120*time.Second, govmNetArgv(ns, "test=net-echo net.serve_ms=60000 net.rx_buf=256 "+vr.knobs))
			waitReachable(t, ns, v, 30*time.Second)
			const pings = 20000
			sent, recv, out := pingFlood(t, ns, pings, 4, 1400, 40)
			quitGuest(t, ns, v)
			o := v.wait(t)
			r, ok := o.Results["net-echo"]
			if !ok {
				t.Fatalf("no RESULT net-echo\n%s", o.Serial)
			}
			t.Logf("ping: sent %d received %d; guest: rx_merged=%s rx_missing=%s rx_bad=%s interrupts=%s",
				sent, recv, r.KV["rx_merged"], r.KV["rx_missing"], r.KV["rx_bad"], r.KV["interrupts"])
			if !r.Pass {
				t.Errorf("net-echo failed: rx_missing=%s rx_bad=%s\nserial (head):\n%s",
					r.KV["rx_missing"], r.KV["rx_bad"], head(o.Serial, 1500))
			}
			if n, err := r.Int("rx_merged"); err != nil || n < pings/2 {
				t.Errorf("rx_merged=%s: frames did not span several buffers", r.KV["rx_merged"])
			}
			if recv < pings {
				t.Errorf("ping -f -s 1400 -c %d: sent %d received %d\n%s", pings, sent, recv, out)
			}
		})
	}
}

func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TestNetRXKicksMacOnly: a minimal legacy driver (net.mac_only: neither
// EVENT_IDX nor MRG_RXBUF, 128 receive buffers, each re-posted and
// offered to the device right after use, polled with interrupts off)
// under ping -f. The device has buffers the whole time, so it has no use
// for RX kicks and must say so with VRING_USED_F_NO_NOTIFY: at most one
// RX kick per 1000 frames (QEMU: 1 in all).
func TestNetRXKicksMacOnly(t *testing.T) {
	needNetns(t)
	ns := newNetns(t)
	v := startVM(t, 120*time.Second, govmNetArgv(ns, "test=net-echo net.serve_ms=60000 net.mac_only=1 net.poll=1 net.rx_bufs=128"))
	waitReachable(t, ns, v, 30*time.Second)
	const pings = 20000
	sent, recv, out := pingFlood(t, ns, pings, 1, 56, 40)
	quitGuest(t, ns, v)
	o := v.wait(t)
	r := result(t, o, "net-echo")
	rx, _ := r.Int("rx")
	kicks, err := r.Int("rx_kicks")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ping: sent %d received %d; guest: rx=%d rx_kicks=%d kicks_suppressed=%s features=%s",
		sent, recv, rx, kicks, r.KV["kicks_suppressed"], r.KV["features"])
	if r.KV["features"] != "0x20" {
		t.Errorf("features=%s, want 0x20 (MAC only)", r.KV["features"])
	}
	if recv < pings {
		t.Errorf("ping -f -c %d: sent %d received %d\n%s", pings, sent, recv, out)
	}
	if rx < pings || kicks*1000 > rx {
		t.Errorf("%d RX kicks for %d frames received: want at most 1 per 1000 while the device has buffers", kicks, rx)
	}
}
