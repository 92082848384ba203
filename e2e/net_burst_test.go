package e2e

// The missed-notification test (issue 8, from the EVENT_IDX thread), both
// directions: bursts of 1 MiB of UDP with a 1 s pause after each. A lost
// kick or interrupt does not lose data while traffic flows (the next
// frame's notification drags the stuck ones along); it shows when traffic
// stops. The verdict is not a speed: after each burst the sender sends
// nothing until the receiver has it all (10 s at most), so a lost
// notification has nothing to rescue it and the burst never completes,
// while a slow, loaded host only makes the wait longer (on this 2-core
// host at load 24 a device was seen to stall for 1.3 s and go on by
// itself). The send and receive times of each burst are compared too:
// guest->host, the host's kernel timestamps of a burst's first and last
// datagram must lie within the guest's time from queueing the first frame
// to the device having used the last (plus half a gap for clock error);
// host->guest they are logged.

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

const (
	burstCount   = 6
	burstBytes   = 1 << 20
	burstPayload = 1472 // UDP payload of a 1500-byte IP packet
	burstPerN    = (burstBytes + burstPayload - 1) / burstPayload
	burstGap     = time.Second
	burstPort    = 5010
	// burstWait is how long a sender waits, silent, for a burst to be
	// complete at the receiver (net.burst_wait_ms).
	burstWait = 10 * time.Second
	// burstSlack covers the two clocks (guest TSC, host) disagreeing.
	burstSlack = burstGap / 2
)

// burstSpans records, per burst, when its first and last datagram arrived
// and how many did.
type burstSpans struct {
	mu          sync.Mutex
	first, last [burstCount]time.Time
	got         [burstCount]int
}

func (b *burstSpans) add(seq uint32, at time.Time) {
	k, i := int(seq>>24), int(seq&0xffffff)
	if k >= burstCount || i >= burstPerN {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.got[k] == 0 {
		b.first[k] = at
	}
	b.got[k]++
	if b.got[k] == burstPerN {
		b.last[k] = at
	}
}

// listenBurst binds UDP port p on the host side of the namespace with a
// receive buffer big enough for a whole burst (SO_RCVBUFFORCE: we are
// root), so the host socket never drops what the guest sent, and kernel
// receive timestamps (SO_TIMESTAMPNS), so a busy test process does not
// move the arrival times.
func listenBurst(t *testing.T, ns string, p int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	var err error
	inNetns(t, ns, func() {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{Port: p})
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.SyscallConn()
	if err == nil {
		cerr := raw.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20)
			if err == nil {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("socket options: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// kernelTime returns the SO_TIMESTAMPNS time in oob, or now.
func kernelTime(oob []byte) time.Time {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err == nil {
		for _, m := range msgs {
			if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_TIMESTAMPNS && len(m.Data) >= 16 {
				sec := int64(binary.LittleEndian.Uint64(m.Data))
				nsec := int64(binary.LittleEndian.Uint64(m.Data[8:]))
				return time.Unix(sec, nsec)
			}
		}
	}
	return time.Now()
}

// usList parses a RESULT value "a,b,c" of microseconds.
func usList(t *testing.T, r guestrun.Result, key string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, f := range strings.Split(r.KV[key], ",") {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("RESULT %s %s=%q: %v", r.Name, key, r.KV[key], err)
		}
		out = append(out, time.Duration(n)*time.Microsecond)
	}
	if len(out) != burstCount {
		t.Fatalf("RESULT %s %s has %d values, want %d", r.Name, key, len(out), burstCount)
	}
	return out
}

func TestNetBursts(t *testing.T) {
	needNetns(t)
	if testing.Short() {
		t.Skip("-short: 8 configurations of about 15 s each")
	}
	for _, event := range []int{1, 0} {
		for _, mrg := range []int{1, 0} {
			for _, poll := range []int{0, 1} {
				name := fmt.Sprintf("event_idx=%d,mrg=%d,poll=%d", event, mrg, poll)
				knobs := fmt.Sprintf("net.event_idx=%d net.mrg=%d net.poll=%d", event, mrg, poll)
				t.Run(name, func(t *testing.T) { burstRun(t, knobs, "") })
			}
		}
	}
	// A device goroutine the host schedules late (here every kick
	// reaches the device 300 ms after the driver wrote it, which CI's
	// loaded runs do at random): the guest's last ack sat in the TX ring
	// when it reported and powered off, and the host waited 10 s for
	// "ack 5" (issue 8's flaky failure). Nothing may be lost, only late.
	t.Run("event_idx=0,mrg=1,poll=0,delay-kick", func(t *testing.T) {
		burstRun(t, "net.event_idx=0 net.mrg=1 net.poll=0", "delay-kick=300ms")
	})
}

// burstRun runs net-burst with the guest's knobs; faults, if not empty, is
// govm's GOVM_FAULTS.
func burstRun(t *testing.T, knobs, faults string) {
	ns := newNetns(t)
	sink := listenBurst(t, ns, burstPort)
	ctl := listenBurst(t, ns, burstPort+2)
	var fromGuest burstSpans
	go func() {
		buf, oob := make([]byte, 2048), make([]byte, 128)
		for {
			n, oobn, _, _, err := sink.ReadMsgUDP(buf, oob)
			if err != nil {
				return
			}
			if n == burstPayload {
				fromGuest.add(binary.LittleEndian.Uint32(buf), kernelTime(oob[:oobn]))
			}
		}
	}()
	argv := govmNetArgv(ns, fmt.Sprintf(
		"test=net-burst net.bursts=%d net.burst_bytes=%d net.burst_gap_ms=%d net.burst_wait_ms=%d net.burst_port=%d %s",
		burstCount, burstBytes, burstGap.Milliseconds(), burstWait.Milliseconds(), burstPort, knobs))
	if faults != "" {
		argv = govmNetEnv(argv, "GOVM_FAULTS="+faults)
	}
	v := startVM(t, 240*time.Second, argv)
	waitReachable(t, ns, v, 30*time.Second)
	// A whole burst may sit in the tap's queue while the guest is busy:
	// make the queue longer than a burst so the kernel drops nothing.
	nsCmd(t, ns, "ip", "link", "set", "dev", tapName, "txqueuelen", "4096")

	// Host -> guest, once the guest asks ("go" after its TX bursts); each
	// burst only after the guest acked the one before and a gap.
	buf := make([]byte, 64)
	ctl.SetReadDeadline(time.Now().Add(burstCount * (burstGap + burstWait + 5*time.Second)))
	_, guestAddr, err := ctl.ReadFromUDP(buf)
	if err != nil {
		o := v.wait(t)
		t.Fatalf("the guest never asked for the host's bursts: %v\nserial:\n%s", err, o.Serial)
	}
	to := &net.UDPAddr{IP: guestAddr.IP, Port: burstPort + 1}
	var sendSpan [burstCount]time.Duration
	p := make([]byte, burstPayload)
	acked := 0
	for k := 0; k < burstCount; k++ {
		t0 := time.Now()
		for i := 0; i < burstPerN; i++ {
			binary.LittleEndian.PutUint32(p, uint32(k)<<24|uint32(i))
			if _, err := sink.WriteToUDP(p, to); err != nil {
				t.Fatalf("burst %d datagram %d: %v", k, i, err)
			}
		}
		sendSpan[k] = time.Since(t0)
		if !waitAck(ctl, k, t0.Add(burstWait+burstSlack)) {
			// Why is the guest's to say (net-burst-rx below): it
			// never had the whole burst, or its ack never left.
			t.Errorf("host->guest burst %d: no ack within %v while nothing else was sent", k, burstWait)
			break
		}
		acked++
		time.Sleep(burstGap)
	}
	o := v.wait(t)
	tx, rx := o.Results["net-burst-tx"], o.Results["net-burst-rx"]
	if tx.Name == "" || rx.Name == "" {
		t.Fatalf("missing RESULT net-burst-tx/rx\nserial:\n%s", o.Serial)
	}
	t.Logf("guest: features=%s tx kicks=%s; rx interrupts=%s napi_missed=%s", tx.KV["features"],
		tx.KV["tx_kicks"], rx.KV["interrupts"], rx.KV["napi_missed"])

	// Guest -> host.
	if !tx.Pass {
		t.Errorf("net-burst-tx failed (short_bursts=%s: the TX ring stayed full; lost=%s: a burst was "+
			"never all sent while the guest stayed silent): a lost kick; send_us=%s done_us=%s",
			tx.KV["short_bursts"], tx.KV["lost"], tx.KV["send_us"], tx.KV["done_us"])
	} else {
		done := usList(t, tx, "done_us")
		stall := usList(t, tx, "stall_us")
		fromGuest.mu.Lock()
		for k := 0; k < burstCount; k++ {
			if fromGuest.got[k] != burstPerN {
				t.Errorf("guest->host burst %d: %d of %d datagrams arrived", k, fromGuest.got[k], burstPerN)
				continue
			}
			span := fromGuest.last[k].Sub(fromGuest.first[k])
			t.Logf("guest->host burst %d: sent and used in %v (longest wait for ring space %v), arrived over %v",
				k, done[k], stall[k], span)
			if span > done[k]+burstSlack {
				t.Errorf("guest->host burst %d: arrived over %v but the device had used it all after %v",
					k, span, done[k])
			}
		}
		fromGuest.mu.Unlock()
	}

	// Host -> guest. The guest's verdict first: it names the side.
	if !rx.Pass {
		t.Errorf("net-burst-rx failed: got=%s complete=%s lost=%s (a burst never completed: a lost "+
			"interrupt or RX kick) tx_unsent=%s (acks the device never sent: a lost TX kick); see rx_bad, "+
			"rx_missing and BAD_RING in the serial", rx.KV["got"], rx.KV["complete"], rx.KV["lost"], rx.KV["tx_unsent"])
		return
	}
	if acked != burstCount {
		t.Errorf("net-burst-rx passed (every burst complete, acks the device never sent: tx_unsent=%s) "+
			"but the host had only %d of %d acks", rx.KV["tx_unsent"], acked, burstCount)
		return
	}
	guestRecv := usList(t, rx, "recv_us")
	for k := 0; k < burstCount; k++ {
		t.Logf("host->guest burst %d: sent in %v, arrived over %v", k, sendSpan[k], guestRecv[k])
	}
}

// waitAck reads the control socket until "ack k" or the deadline.
func waitAck(ctl *net.UDPConn, k int, deadline time.Time) bool {
	buf := make([]byte, 64)
	want := fmt.Sprintf("ack %d", k)
	ctl.SetReadDeadline(deadline)
	for {
		n, _, err := ctl.ReadFromUDP(buf)
		if err != nil {
			return false
		}
		if string(buf[:n]) == want {
			return true
		}
	}
}
