package bench

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/govm/govm/internal/netnstest"
)

// Polled-driver ping benchmark: the guest's driver is the minimal one of issue
// 8 (VIRTIO_NET_F_MAC only: no EVENT_IDX, MRG_RXBUF or STATUS; 128 RX buffers,
// each re-posted with its own kick; interrupts off, the used rings polled at
// CPL3), net-echo answers `ping -f` from the host, one packet in flight. No
// emulated interrupt handler runs per packet, so the round trip is the VMM's own
// kick-to-completion path in both directions. Run with
//
//	go test -run '^$' -bench NetPoll -benchtime 5x ./bench/

// netPollPings is the ping count per run; ~1 s at QEMU's rate on a quiet host.
const netPollPings = 20000

const netPollCmdline = "test=net-echo net.ip=" + netnstest.GuestIP + " net.peer=" + netnstest.HostIP +
	" net.mac_only=1 net.poll=1 net.rx_bufs=128 net.serve_ms=120000"

// netPollRun boots one VMM in ns, waits until the guest answers, runs ping -f
// with a CPU sample before and after, quits the guest and checks it passed. The
// guest's counters cover the whole run (ARP and the reachability pings too: a
// few frames against 2 x netPollPings).
func netPollRun(b *testing.B, ns string, argv []string) (sample, error) {
	v, err := Start(argv...)
	if err != nil {
		return nil, err
	}
	defer v.Kill()
	timeout := benchTimeout(b, 120*time.Second)
	if err := waitReachable(ns, v, timeout); err != nil {
		return nil, err
	}
	pid := v.Cmd.Process.Pid // ip netns exec execs the VMM in place
	ping, pingCPU, o, err := pingThenFinish(ns, v, filepath.Base(argv[4]), pid, netPollPings, timeout)
	if err != nil {
		return nil, err
	}
	echo, ok := o.Results["net-echo"]
	if !ok {
		return nil, fmt.Errorf("no RESULT net-echo\nserial: %s", o.Serial)
	}
	// VIRTIO_NET_F_MAC (bit 5) alone, polled: the driver this benchmark is about.
	if p, err := echo.Int("poll"); err != nil || p != 1 {
		return nil, fmt.Errorf("net-echo poll=%d (%v): the guest did not poll", p, err)
	}
	if f, err := echo.Int("features"); err != nil || f != 1<<5 {
		return nil, fmt.Errorf("net-echo features=%#x (%v): want MAC only (0x20)", f, err)
	}
	s := sample{}
	zero := echo
	zero.KV = map[string]string{"rx": "0", "tx": "0", "kicks": "0", "interrupts": "0"}
	frames, err := counterDelta(zero, echo, s, "pingf")
	if err != nil {
		return nil, err
	}
	s["pingf-pps"] = float64(ping.recv) / ping.time.Seconds()
	s["pingf-rtt-ms"] = ping.rttAvg
	s.addCPU("pingf", pingCPU, frames)
	return s, nil
}

// BenchmarkNetPoll runs govm and QEMU in alternation b.N times each and reports
// medians and govm/QEMU ratios of ping -f packets/s (replies per second of
// ping's own run time), RTT, kicks and interrupts per 1000 frames, and host CPU
// per 1000 frames (vCPU threads and the rest).
func BenchmarkNetPoll(b *testing.B) {
	gs, qs := alternate(b, netPollCmdline, netPollRun, nil)
	reportPairs(b, gs, qs)
}
