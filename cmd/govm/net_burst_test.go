package main

// The missed-notification test (issue 8, from the EVENT_IDX thread), both
// directions: bursts of 1 MiB of UDP with a 1 s pause after each. A lost
// kick or interrupt does not lose data while traffic flows (the next
// frame's notification drags the stuck ones along); it shows when traffic
// stops, as a burst whose tail arrives only when the next burst starts,
// about one gap late. The assertion compares each burst's receive span
// with its send span and allows half the gap: it catches a tail that
// waited for the next burst, not a slow host.

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
	// A tail later than this behind its burst waited for the next one.
	burstLate = burstGap / 2
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
// root), so the host socket never drops what the guest sent.
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
		raw.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20)
		})
	}
	if err != nil {
		t.Fatalf("SO_RCVBUFFORCE: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
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
				t.Run(name, func(t *testing.T) { burstRun(t, knobs) })
			}
		}
	}
}

func burstRun(t *testing.T, knobs string) {
	ns := newNetns(t)
	sink := listenBurst(t, ns, burstPort)
	ctl := listenBurst(t, ns, burstPort+2)
	var fromGuest burstSpans
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := sink.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if n == burstPayload {
				fromGuest.add(binary.LittleEndian.Uint32(buf), time.Now())
			}
		}
	}()
	v := startVM(150*time.Second, govmNetArgv(ns, fmt.Sprintf(
		"test=net-burst net.bursts=%d net.burst_bytes=%d net.burst_gap_ms=%d net.burst_port=%d %s",
		burstCount, burstBytes, burstGap.Milliseconds(), burstPort, knobs)))
	waitReachable(t, ns, v, 30*time.Second)
	// A whole burst may sit in the tap's queue while the guest is busy:
	// make the queue longer than a burst so the kernel drops nothing.
	nsCmd(t, ns, "ip", "link", "set", "dev", tapName, "txqueuelen", "4096")

	// Host -> guest, once the guest asks ("go" after its TX bursts).
	ctl.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 64)
	_, guestAddr, err := ctl.ReadFromUDP(buf)
	if err != nil {
		o := v.wait(t)
		t.Fatalf("the guest never asked for the host's bursts: %v\nserial:\n%s", err, o.Serial)
	}
	to := &net.UDPAddr{IP: guestAddr.IP, Port: burstPort + 1}
	var sendSpan [burstCount]time.Duration
	p := make([]byte, burstPayload)
	for k := 0; k < burstCount; k++ {
		t0 := time.Now()
		for i := 0; i < burstPerN; i++ {
			binary.LittleEndian.PutUint32(p, uint32(k)<<24|uint32(i))
			if _, err := sink.WriteToUDP(p, to); err != nil {
				t.Fatalf("burst %d datagram %d: %v", k, i, err)
			}
		}
		sendSpan[k] = time.Since(t0)
		time.Sleep(burstGap)
	}
	o := v.wait(t)
	tx, rx := o.Results["net-burst-tx"], o.Results["net-burst-rx"]
	if tx.Name == "" || rx.Name == "" {
		t.Fatalf("missing RESULT net-burst-tx/rx\nserial:\n%s", o.Serial)
	}
	t.Logf("guest: features=%s tx kicks=%s; rx interrupts=%s napi_missed=%s", tx.KV["features"],
		tx.KV["tx_kicks"], rx.KV["interrupts"], rx.KV["napi_missed"])

	// Guest -> host: each burst's span at the host against the guest's.
	guestSend := usList(t, tx, "send_us")
	fromGuest.mu.Lock()
	for k := 0; k < burstCount; k++ {
		if fromGuest.got[k] != burstPerN {
			t.Errorf("guest->host burst %d: %d of %d datagrams arrived", k, fromGuest.got[k], burstPerN)
			continue
		}
		span := fromGuest.last[k].Sub(fromGuest.first[k])
		t.Logf("guest->host burst %d: sent in %v, arrived over %v", k, guestSend[k], span)
		if span > guestSend[k]+burstLate {
			t.Errorf("guest->host burst %d: its tail arrived %v after its head, the guest sent it in %v: "+
				"the last frames waited for the next burst (a lost kick)", k, span, guestSend[k])
		}
	}
	fromGuest.mu.Unlock()
	if !tx.Pass {
		t.Errorf("net-burst-tx failed (a stall of over 500 ms waiting for TX ring space is a lost kick): %v", tx.KV)
	}

	// Host -> guest.
	if !rx.Pass {
		t.Errorf("net-burst-rx failed (bursts not all received: the tail of the last one never came): got=%s complete=%s",
			rx.KV["got"], rx.KV["complete"])
		return
	}
	guestRecv := usList(t, rx, "recv_us")
	for k := 0; k < burstCount; k++ {
		t.Logf("host->guest burst %d: sent in %v, arrived over %v", k, sendSpan[k], guestRecv[k])
		if guestRecv[k] > sendSpan[k]+burstLate {
			t.Errorf("host->guest burst %d: its tail arrived %v after its head, the host sent it in %v: "+
				"the last frames waited for the next burst (a lost interrupt)", k, guestRecv[k], sendSpan[k])
		}
	}
}
