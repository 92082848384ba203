package bench

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/internal/netnstest"
)

// Network benchmarks: the test kernel's net-bench (guest TX and RX packets/s at
// 64-byte frames and 1500-byte packets, with guest-side kicks and interrupts per
// 1000 packets) against a host-side Go UDP sink/source, then `ping -f` from the
// host (RTT average) while net-echo serves. govm and QEMU (legacy virtio-net-pci,
// vhost=off) run the same kernel on a tap in a fresh network namespace each, so
// nothing leaves the namespace. Run with
//
//	go test -run '^$' -bench Net -benchtime 1x ./bench/

const (
	netGuestIP = "10.0.2.15"
	netHostIP  = "10.0.2.1"
	netSink    = 5001 // guest TX lands here; host RX source sends from here
	netCtl     = 5002 // "rx SIZE MS PORT" requests from the guest
	netPings   = 10000
)

// netPhases are the RESULT lines net-bench prints, one per measurement.
var netPhases = []string{"net-bench-tx-64", "net-bench-tx-1500", "net-bench-rx-64", "net-bench-rx-1500"}

// netSample is one VMM's run.
type netSample struct {
	pps, kicks, irqs map[string]float64 // per phase: packets/s, per 1000 packets
	hostRX           map[int]uint64     // datagrams the sink got, by payload size
	rttAvgMs         float64
}

// benchNetns creates a namespace (lo up), deleted when the benchmark ends.
func benchNetns(b *testing.B) string {
	ns, err := netnstest.New(b, "govm-bench")
	if err != nil {
		b.Skipf("cannot create a network namespace (need root and iproute2): %v", err)
	}
	return ns
}

// inNS runs fn on a thread inside ns: the sockets it opens live there.
func inNS(ns string, fn func() error) error { return netnstest.Do(ns, fn) }

// hostPeer is the host side: a sink counting datagrams by size, and a source
// that answers the guest's "rx SIZE MS PORT" with MS milliseconds of SIZE-byte
// datagrams as fast as the socket takes them, then "end SIZE" to PORT+2.
type hostPeer struct {
	sink, ctl *net.UDPConn
	mu        sync.Mutex
	got       map[int]uint64
	sent      map[int]uint64
	wg        sync.WaitGroup
}

func startPeer(ns string) (*hostPeer, error) {
	p := &hostPeer{got: map[int]uint64{}, sent: map[int]uint64{}}
	err := inNS(ns, func() error {
		var err error
		if p.sink, err = net.ListenUDP("udp4", &net.UDPAddr{Port: netSink}); err != nil {
			return err
		}
		p.ctl, err = net.ListenUDP("udp4", &net.UDPAddr{Port: netCtl})
		return err
	})
	if err != nil {
		return nil, err
	}
	p.sink.SetReadBuffer(4 << 20)
	p.wg.Add(2)
	go p.sinkLoop()
	go p.ctlLoop()
	return p, nil
}

func (p *hostPeer) sinkLoop() {
	defer p.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, _, err := p.sink.ReadFromUDP(buf)
		if err != nil {
			return
		}
		p.mu.Lock()
		p.got[n]++
		p.mu.Unlock()
	}
}

func (p *hostPeer) ctlLoop() {
	defer p.wg.Done()
	buf := make([]byte, 256)
	for {
		n, from, err := p.ctl.ReadFromUDP(buf)
		if err != nil {
			return
		}
		f := strings.Fields(string(buf[:n]))
		if len(f) != 4 || f[0] != "rx" {
			continue
		}
		size, _ := strconv.Atoi(f[1])
		msec, _ := strconv.Atoi(f[2])
		port, _ := strconv.Atoi(f[3])
		if size < 0 || size > 1472 || msec <= 0 || msec > 60000 {
			continue
		}
		to := &net.UDPAddr{IP: from.IP, Port: port}
		payload := make([]byte, size)
		var sent uint64
		for end := time.Now().Add(time.Duration(msec) * time.Millisecond); time.Now().Before(end); {
			// The sink socket sends too: it is the guest's "peer" port.
			if _, err := p.sink.WriteToUDP(payload, to); err == nil {
				sent++
			}
		}
		for i := 0; i < 5; i++ {
			p.sink.WriteToUDP([]byte(fmt.Sprintf("end %d", size)), &net.UDPAddr{IP: from.IP, Port: port + 2})
			time.Sleep(20 * time.Millisecond)
		}
		p.mu.Lock()
		p.sent[size] += sent
		p.mu.Unlock()
	}
}

func (p *hostPeer) close() {
	p.sink.Close()
	p.ctl.Close()
	p.wg.Wait()
}

// netRun boots one VMM in ns (argv already wrapped in ip netns exec), runs
// net-bench, then ping -f against net-echo, then quits the guest.
func netRun(b *testing.B, ns string, argv []string) (netSample, error) {
	s := netSample{pps: map[string]float64{}, kicks: map[string]float64{}, irqs: map[string]float64{}}
	peer, err := startPeer(ns)
	if err != nil {
		return s, err
	}
	defer peer.close()
	v, err := Start(argv...)
	if err != nil {
		return s, err
	}
	defer v.Kill()
	timeout := benchTimeout(b, 120*time.Second)
	if _, err := v.WaitLine("RESULT net-bench ", timeout); err != nil {
		return s, fmt.Errorf("net-bench: %w\nserial: %s\nstderr: %s", err, v.Serial(), v.Stderr())
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "timeout", "120", "ping", "-q", "-f", "-c",
		strconv.Itoa(netPings), netGuestIP).CombinedOutput()
	if err != nil {
		return s, fmt.Errorf("ping -f: %v\n%s", err, out)
	}
	s.rttAvgMs = rttAvg(string(out))
	for i := 0; i < 20; i++ {
		exec.Command("ip", "netns", "exec", ns, "bash", "-c", "echo -n quit > /dev/udp/"+netGuestIP+"/9").Run()
		if _, err := v.WaitLine("SUMMARY ", 500*time.Millisecond); err == nil {
			break
		}
	}
	status, err := v.Wait(30 * time.Second)
	o := v.Output()
	if err != nil {
		return s, err
	}
	if code, ok := guestrun.DebugExit(status); !ok || code != 0 {
		return s, fmt.Errorf("exit status %d\nserial: %s", status, o.Serial)
	}
	if err := o.Check(); err != nil {
		return s, fmt.Errorf("%w\nserial: %s", err, o.Serial)
	}
	for _, ph := range netPhases {
		r, ok := o.Results[ph]
		if !ok {
			return s, fmt.Errorf("no RESULT %s", ph)
		}
		pps, _ := r.Int("pps")
		k, _ := r.Int("kicks_per_1k")
		i, _ := r.Int("irqs_per_1k")
		s.pps[ph], s.kicks[ph], s.irqs[ph] = float64(pps), float64(k), float64(i)
	}
	peer.mu.Lock()
	s.hostRX = map[int]uint64{}
	for k, v := range peer.got {
		s.hostRX[k] = v
	}
	peer.mu.Unlock()
	return s, nil
}

// rttAvg parses "rtt min/avg/max/mdev = a/b/c/d ms".
func rttAvg(out string) float64 {
	_, after, ok := strings.Cut(out, "min/avg/max/mdev = ")
	if !ok {
		return 0
	}
	f := strings.Split(after, "/")
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[1], 64)
	return v
}

const netCmdline = "test=net-bench,net-echo net.ip=" + netGuestIP + " net.peer=" + netHostIP +
	" bench.ms=2000 net.serve_ms=120000"

func govmNetArgv(b *testing.B, ns string) []string {
	argv := govmArgv(b, testKernel(b), netCmdline, "--net", "tap,ifname=tap0,host-ip="+netHostIP+"/24")
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

func qemuNetArgv(b *testing.B, ns string) []string {
	for _, c := range [][]string{
		{"ip", "-n", ns, "tuntap", "add", "dev", "tap0", "mode", "tap", "vnet_hdr"},
		{"ip", "-n", ns, "addr", "add", netHostIP + "/24", "dev", "tap0"},
		{"ip", "-n", ns, "link", "set", "tap0", "up"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	argv := qemuArgv(b, testKernel(b), netCmdline,
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no,vhost=off",
		"-device", "virtio-net-pci,netdev=n0,disable-modern=on")
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// BenchmarkNet runs govm and QEMU back to back b.N times and reports each one's
// medians and the govm/QEMU ratios (above 1: govm faster for pps, slower for RTT).
func BenchmarkNet(b *testing.B) {
	var gs, qs []netSample
	for i := 0; i < b.N; i++ {
		ns := benchNetns(b)
		g, err := netRun(b, ns, govmNetArgv(b, ns))
		if err != nil {
			b.Fatalf("govm: %v", err)
		}
		gs = append(gs, g)
		ns = benchNetns(b)
		q, err := netRun(b, ns, qemuNetArgv(b, ns))
		if err != nil {
			b.Fatalf("qemu: %v", err)
		}
		qs = append(qs, q)
	}
	med := func(ss []netSample, f func(netSample) float64) float64 {
		var xs []float64
		for _, s := range ss {
			xs = append(xs, f(s))
		}
		return Median(xs)
	}
	for _, ph := range netPhases {
		short := strings.TrimPrefix(ph, "net-bench-")
		g := med(gs, func(s netSample) float64 { return s.pps[ph] })
		q := med(qs, func(s netSample) float64 { return s.pps[ph] })
		b.ReportMetric(g, "govm-"+short+"-pps")
		b.ReportMetric(q, "qemu-"+short+"-pps")
		if q > 0 {
			b.ReportMetric(g/q, short+"-pps-ratio")
		}
		b.ReportMetric(med(gs, func(s netSample) float64 { return s.kicks[ph] }), "govm-"+short+"-kicks/1k")
		b.ReportMetric(med(qs, func(s netSample) float64 { return s.kicks[ph] }), "qemu-"+short+"-kicks/1k")
		b.ReportMetric(med(gs, func(s netSample) float64 { return s.irqs[ph] }), "govm-"+short+"-irqs/1k")
		b.ReportMetric(med(qs, func(s netSample) float64 { return s.irqs[ph] }), "qemu-"+short+"-irqs/1k")
	}
	g := med(gs, func(s netSample) float64 { return s.rttAvgMs })
	q := med(qs, func(s netSample) float64 { return s.rttAvgMs })
	b.ReportMetric(g, "govm-pingf-rtt-ms")
	b.ReportMetric(q, "qemu-pingf-rtt-ms")
	if g > 0 {
		b.ReportMetric(q/g, "pingf-rtt-ratio")
	}
	for i := range gs {
		b.Logf("run %d host sink got: govm %v, qemu %v", i, gs[i].hostRX, qs[i].hostRX)
	}
}

// TestRTTAvg checks the ping summary parser on iputils' output.
func TestRTTAvg(t *testing.T) {
	cases := []struct {
		out  string
		want float64
	}{
		{"rtt min/avg/max/mdev = 0.165/1.283/1334.760/20.896 ms, pipe 70, ipg/ewma 0.763/0.203 ms\n", 1.283},
		{"10 packets transmitted, 0 received, 100% packet loss\n", 0},
		{"rtt min/avg/max/mdev = 0.1\n", 0},
	}
	for _, c := range cases {
		if got := rttAvg(c.out); got != c.want {
			t.Errorf("rttAvg(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}
