package bench

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/internal/netnstest"
)

// Network benchmark: the test kernel's net-bench (guest TX and RX packets/s at
// 64-byte frames and 1500-byte packets, with guest-side kicks and interrupts per
// 1000 packets) against a host-side Go UDP sink/source, then `ping -f` from the
// host while net-echo serves. govm and QEMU (legacy virtio-net-pci, vhost=off)
// run the same kernel on a tap in a fresh network namespace each, so nothing
// leaves the namespace. Each VMM's host CPU time is sampled at every phase
// boundary and split into vCPU threads and the rest (cpu.go). Run with
//
//	go test -run '^$' -bench 'Net$' -benchtime 5x ./bench/
//
// See README.md for how to read the numbers.

const (
	netSink    = 5001 // guest TX lands here; host RX source sends from here
	netCtl     = 5002 // "rx SIZE MS PORT" requests from the guest
	netPings   = 10000
	netPhaseMS = 2000 // bench.ms: each phase's length
)

// netPhases are the RESULT lines net-bench prints, one per measurement, in
// order, the short names the metrics use ("pingf" is ping -f afterwards), and
// what each measures: received (rx) or sent datagrams of size bytes of UDP
// payload (18: 64-byte Ethernet frames; 1472: 1500-byte IP packets).
var netPhases = []struct {
	result, short string
	rx            bool
	size          int
}{
	{"net-bench-tx-64", "tx-64", false, 18},
	{"net-bench-tx-1500", "tx-1500", false, 1472},
	{"net-bench-rx-64", "rx-64", true, 18},
	{"net-bench-rx-1500", "rx-1500", true, 1472},
}

// sample is one VMM run's figures by metric name ("tx-64-pps", "pingf-rtt-ms",
// ...). A figure that could not be measured is absent, never zero.
type sample map[string]float64

// hostPeer is the host side: a sink counting datagrams by size, and a source
// that answers the guest's "rx SIZE MS PORT" with MS milliseconds of SIZE-byte
// datagrams as fast as the socket takes them, then "end SIZE" to PORT+2.
type hostPeer struct {
	sink, ctl *net.UDPConn
	first     chan struct{} // closed when the sink gets its first datagram
	mu        sync.Mutex
	got       map[int]uint64
	wg        sync.WaitGroup
}

func startPeer(ns string) (*hostPeer, error) {
	p := &hostPeer{got: map[int]uint64{}, first: make(chan struct{})}
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
	for n := 0; ; n++ {
		size, _, err := p.sink.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if n == 0 {
			close(p.first)
		}
		p.mu.Lock()
		p.got[size]++
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
		for end := time.Now().Add(time.Duration(msec) * time.Millisecond); time.Now().Before(end); {
			p.sink.WriteToUDP(payload, to) // the sink socket is the guest's "peer" port
		}
		for i := 0; i < 5; i++ {
			p.sink.WriteToUDP([]byte(fmt.Sprintf("end %d", size)), &net.UDPAddr{IP: from.IP, Port: port + 2})
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (p *hostPeer) close() {
	p.sink.Close()
	p.ctl.Close()
	p.wg.Wait()
}

// addCPU records the CPU a phase of frames cost, per 1000 frames, in µs:
// PHASE-vcpu-us/1k (the vCPU threads) and PHASE-vmm-us/1k (every other thread).
func (s sample) addCPU(phase string, d CPUSample, frames int64) {
	if frames <= 0 {
		return
	}
	per := func(t time.Duration) float64 { return float64(t.Microseconds()) * 1000 / float64(frames) }
	s[phase+"-vcpu-us/1k"] = per(d.VCPU)
	s[phase+"-vmm-us/1k"] = per(d.Rest())
}

// netCmdline runs net-bench, then net-echo for ping -f until "quit".
var netCmdline = "test=net-bench,net-echo net.ip=" + netnstest.GuestIP + " net.peer=" + netnstest.HostIP +
	" bench.ms=" + strconv.Itoa(netPhaseMS) + " net.serve_ms=120000"

// netRun boots one VMM in ns (argv already wrapped in ip netns exec), runs
// net-bench with a CPU sample at each phase boundary (the sink's first datagram,
// then each phase's RESULT line), then ping -f against net-echo, then quits the
// guest and checks it passed.
func netRun(b *testing.B, ns string, argv []string) (sample, error) {
	s := sample{}
	peer, err := startPeer(ns)
	if err != nil {
		return nil, err
	}
	defer peer.close()
	v, err := Start(argv...)
	if err != nil {
		return nil, err
	}
	defer v.Kill()
	timeout := benchTimeout(b, 120*time.Second)
	pid := v.Cmd.Process.Pid // ip netns exec execs the VMM in place
	cpu, err := phaseCPU(v, peer, pid, timeout)
	if err != nil {
		return nil, err
	}
	ping, pingCPU, o, err := pingThenFinish(ns, v, filepath.Base(argv[4]), pid, netPings, 120*time.Second)
	if err != nil {
		return nil, err
	}
	if err := phaseFigures(o, cpu, s, guestFigures); err != nil {
		return nil, err
	}
	// ping -f: net-echo's device counters run on from net-bench's.
	frames, err := counterDelta(o.Results["net-bench"], o.Results["net-echo"], s, "pingf")
	if err != nil {
		return nil, err
	}
	s["pingf-pps"] = float64(ping.recv) / ping.time.Seconds()
	s["pingf-rtt-ms"] = ping.rttAvg
	s.addCPU("pingf", pingCPU, frames)
	peer.mu.Lock()
	b.Logf("%s: host sink got %v datagrams by size", filepath.Base(argv[4]), peer.got)
	peer.mu.Unlock()
	return s, nil
}

// phaseCPU samples pid's CPU at every phase boundary of net-bench, as it
// runs: the sink's first datagram (the first phase's first frame), then each
// phase's RESULT line; then it waits for net-bench's own RESULT.
func phaseCPU(v *VMM, peer *hostPeer, pid int, timeout time.Duration) ([]CPUSample, error) {
	select {
	case <-peer.first:
	case <-time.After(timeout):
		v.Kill()
		return nil, fmt.Errorf("no datagram from the guest within %v\nserial: %s\nstderr: %s", timeout, v.Serial(), v.Stderr())
	}
	cpu := make([]CPUSample, 0, len(netPhases)+1)
	c, err := ReadCPU(pid)
	if err != nil {
		return nil, err
	}
	cpu = append(cpu, c)
	for _, ph := range netPhases {
		if _, err := v.WaitLine("RESULT "+ph.result+" ", timeout); err != nil {
			return nil, fmt.Errorf("%s: %w\nserial: %s\nstderr: %s", ph.result, err, v.Serial(), v.Stderr())
		}
		if c, err = ReadCPU(pid); err != nil {
			return nil, err
		}
		cpu = append(cpu, c)
	}
	if _, err := v.WaitLine("RESULT net-bench ", timeout); err != nil {
		return nil, fmt.Errorf("net-bench: %w\nserial: %s", err, v.Serial())
	}
	return cpu, nil
}

// figure is a RESULT key and the metric it becomes (PHASE-metric).
type figure struct{ key, metric string }

// guestFigures are what net-bench reports per phase; the null VMM reports
// only pps (it has no kicks or interrupts).
var guestFigures = []figure{{"pps", "pps"}, {"kicks_per_1k", "kicks/1k"}, {"irqs_per_1k", "irqs/1k"}}

// phaseFigures records each phase's figures from its RESULT line, and the CPU
// it cost per 1000 of its frames (cpu: phaseCPU's samples).
func phaseFigures(o *guestrun.Output, cpu []CPUSample, s sample, figs []figure) error {
	for i, ph := range netPhases {
		r, ok := o.Results[ph.result]
		if !ok {
			return fmt.Errorf("no RESULT %s", ph.result)
		}
		pkts, err := r.Int("pkts")
		if err != nil {
			return err
		}
		for _, k := range figs {
			n, err := r.Int(k.key)
			if err != nil {
				return err
			}
			s[ph.short+"-"+k.metric] = float64(n)
		}
		s.addCPU(ph.short, cpu[i+1].Sub(cpu[i]), pkts)
	}
	return nil
}

// counterDelta records kicks and interrupts per 1000 frames between two of the
// guest's cumulative counter reports (rx=, tx=, kicks=, interrupts=) as
// PHASE-kicks/1k and PHASE-irqs/1k, and returns the frames (rx+tx) in between.
func counterDelta(from, to guestrun.Result, s sample, phase string) (int64, error) {
	var d [4]int64
	for i, k := range []string{"rx", "tx", "kicks", "interrupts"} {
		a, err1 := from.Int(k)
		z, err2 := to.Int(k)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("counter %s: %v %v", k, err1, err2)
		}
		d[i] = z - a
	}
	frames := d[0] + d[1]
	if frames <= 0 {
		return 0, fmt.Errorf("no frames between %s and %s", from.Name, to.Name)
	}
	s[phase+"-kicks/1k"] = float64(d[2]) * 1000 / float64(frames)
	s[phase+"-irqs/1k"] = float64(d[3]) * 1000 / float64(frames)
	return frames, nil
}

// BenchmarkNet runs govm and QEMU in alternation (the order flips every
// iteration) b.N times each, and reports per-VMM medians and govm/QEMU ratios.
// Each iteration then runs the null VMM (nullvmm_test.go), with its stand-in
// vCPU halted and spinning, and halted with a reader that sleeps on the tap,
// and reports each VMM's figures against those (govm/null-halt-rx-64-pps,
// ...).
func BenchmarkNet(b *testing.B) {
	modes := []string{"halt", "spin", "wait"}
	nulls := make([][]sample, len(modes))
	gs, qs := alternate(b, netCmdline, netRun, func(i int) {
		for j, mode := range modes {
			s, err := nullRun(b, benchNetns(b), mode)
			if err != nil {
				b.Fatalf("run %d of the null VMM (%s): %v", i, mode, err)
			}
			nulls[j] = append(nulls[j], s)
			b.Logf("run %d null-%s: %s", i, mode, s)
		}
	})
	reportPairs(b, gs, qs)
	for j, mode := range modes {
		for _, vmm := range []struct {
			name string
			ss   []sample
		}{{"govm", gs}, {"qemu", qs}} {
			m := pairMetrics(vmm.name, vmm.ss, "null-"+mode, nulls[j])
			for _, k := range sortedMetricKeys([]sample{m}) {
				if !strings.HasPrefix(k, vmm.name+"-") { // reportPairs has those
					b.ReportMetric(m[k], k)
				}
			}
		}
	}
}

// nullRun runs the null VMM in mode in ns against a host peer, as netRun runs a
// VMM, and returns its figures: pps and CPU per phase.
func nullRun(b *testing.B, ns, mode string) (sample, error) {
	hostTap(b, ns)
	if err := nullNeighbour(ns); err != nil {
		return nil, err
	}
	peer, err := startPeer(ns)
	if err != nil {
		return nil, err
	}
	defer peer.close()
	v, err := Start(nullArgv(ns, mode)...)
	if err != nil {
		return nil, err
	}
	defer v.Kill()
	cpu, err := phaseCPU(v, peer, v.Cmd.Process.Pid, benchTimeout(b, 120*time.Second))
	if err != nil {
		return nil, err
	}
	if err := v.Cmd.Process.Signal(nullRelease); err != nil {
		return nil, fmt.Errorf("null VMM: %w", err)
	}
	if status, err := v.Wait(30 * time.Second); err != nil || status != 0 {
		return nil, fmt.Errorf("null VMM: exit %d, %v\nstderr: %s", status, err, v.Stderr())
	}
	s := sample{}
	if err := phaseFigures(v.Output(), cpu, s, []figure{{"pps", "pps"}}); err != nil {
		return nil, err
	}
	return s, nil
}
