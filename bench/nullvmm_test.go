package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/internal/netnstest"
	"github.com/govm/govm/tap"
)

// The null VMM: what BenchmarkNet's phases reach on this host with no device
// model and no guest, as BenchmarkBlk's host pread loop is blk's limit. It is
// this test binary run again (nullEnv set) inside the benchmark's namespace, a
// process of its own as a VMM is, against the same host peer: it opens tap0
// and plays net-bench's part directly on the tap. TX writes ready-made UDP
// frames as fast as the tap takes them; RX asks the peer for a flood ("rx SIZE
// MS PORT", as the guest does) and reads frames, one readv each, until "end
// SIZE". It never sleeps on the tap: a reader that waits in poll(2) made the
// source pay a wakeup every frame or two and got 0.8x the frames of this one
// (158,000-162,000 against 187,000-197,000 a second at 64 bytes, two runs
// each). It prints the test kernel's RESULT lines, so the bench reads it as it
// reads a guest.
//
// A thread named vcpu0 stands in for the vCPU thread, in one of two modes:
//   - "halt": it sleeps: a guest that costs nothing. RX is then the host
//     source's rate into a tap, TX a tap writer's rate.
//   - "spin": it spins, as the vCPU of our test kernel does: its hot loops run
//     at CPL3 and poll (cpu_relax) while they wait, so the vCPU thread is
//     always runnable and takes its share of the host's 2 cores. For TX that
//     is the bound for a VMM running the test kernel; for RX it is none (the
//     polling reader and the stand-in are two busy threads against the
//     source's one). bench/README.md has what both showed.
//   - "wait": it sleeps, as in "halt", and RX waits in ppoll(2) on the tap
//     whenever it is empty instead of polling it, as both VMMs' readers do.
//     Its vmm-us/1k is what reading a tap costs per frame for a reader
//     that sleeps whenever it has caught up: with nothing else to do, it
//     catches up, and is woken, nearly every frame.

// nullEnv names the null VMM's mode ("halt", "spin" or "wait"); set, the test binary
// is the null VMM instead of running tests (TestMain).
const nullEnv = "GOVM_BENCH_NULL_VMM"

// nullGuestMAC is the address the null VMM sends from, and the host's
// neighbour entry for netnstest.GuestIP (the null VMM does not answer ARP).
var nullGuestMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}

// nullHdrLen is the vnet header both VMMs use with MRG_RXBUF (virtio_net_hdr
// plus num_buffers), left zero: no offloads.
const nullHdrLen = 12

// nullTXPort is the guest's source port in net-bench (0x6f76).
const nullTXPort = 0x6f76

// TestMain is the null VMM when nullEnv is set, the tests otherwise.
func TestMain(m *testing.M) {
	if mode := os.Getenv(nullEnv); mode != "" {
		if err := nullVMM(mode); err != nil {
			fmt.Fprintln(os.Stderr, "null VMM:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// nullVMM runs net-bench's phases on tap0 (created by the bench, see hostTap).
func nullVMM(mode string) error {
	if mode != "halt" && mode != "spin" && mode != "wait" {
		return fmt.Errorf("%s=%q: want halt, spin or wait", nullEnv, mode)
	}
	t, err := tap.Open(tap.Config{Name: "tap0", VnetHdr: true})
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.SetVnetHdrSize(nullHdrLen); err != nil {
		return err
	}
	ifc, err := net.InterfaceByName("tap0")
	if err != nil {
		return err
	}
	// The bench samples this process's CPU at each phase's RESULT line,
	// the last one included: it ends only when released (nullRelease), so
	// neither the stand-in vCPU thread nor the process is gone by then.
	release := make(chan os.Signal, 1)
	signal.Notify(release, nullRelease)
	stop := standInVCPU(mode == "spin")
	defer stop()
	runtime.LockOSThread() // this thread is the I/O thread
	src, dst := net.ParseIP(netnstest.GuestIP).To4(), net.ParseIP(netnstest.HostIP).To4()
	for _, ph := range netPhases {
		var pkts int64
		var d time.Duration
		if ph.rx {
			req := []byte(fmt.Sprintf("rx %d %d %d", ph.size, netPhaseMS, netSink))
			f := udpFrame(ifc.HardwareAddr, nullGuestMAC, src, dst, netSink, netCtl, req)
			if _, err := t.Writev([][]byte{f}); err != nil {
				return err
			}
			pkts, d, err = nullRX(t, ph.size, mode == "wait")
		} else {
			f := udpFrame(ifc.HardwareAddr, nullGuestMAC, src, dst, nullTXPort, netSink, make([]byte, ph.size))
			pkts, d, err = nullTX(t, f, netPhaseMS*time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ph.result, err)
		}
		pps := int64(0)
		if d > 0 {
			pps = pkts * int64(time.Second) / int64(d)
		}
		fmt.Printf("RESULT %s pass size=%d pkts=%d us=%d pps=%d\n", ph.result, ph.size, pkts, d.Microseconds(), pps)
	}
	fmt.Println("RESULT net-bench pass")
	select {
	case <-release:
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("not released (%v) within 60 s of the last phase", nullRelease)
	}
}

// nullRelease tells the null VMM that the bench has taken its last sample.
const nullRelease = syscall.SIGUSR1

// standInVCPU starts the thread named vcpu0 (so ReadCPU counts it as the
// vCPU), spinning or asleep until stop, and returns once it has its name.
func standInVCPU(spin bool) (stop func()) {
	var done atomic.Bool
	named, exited := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		defer close(exited)
		_ = os.WriteFile("/proc/thread-self/comm", []byte("vcpu0"), 0)
		close(named)
		for !done.Load() {
			if !spin {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	<-named
	return func() { done.Store(true); <-exited }
}

// nullTX writes f to the tap for d; it returns the frames written and the
// time taken.
func nullTX(t *tap.Tap, f []byte, d time.Duration) (int64, time.Duration, error) {
	iov := [][]byte{f}
	start := time.Now()
	end := start.Add(d)
	var n int64
	for ; time.Now().Before(end); n++ {
		if _, err := t.Writev(iov); err != nil {
			return n, 0, err
		}
	}
	return n, time.Since(start), nil
}

// nullRX counts size-byte datagrams to netSink, one readv per frame, until
// the peer's "end SIZE" (to netSink+2), as net-bench's bench_rx does: or 3 s
// with nothing, 1 s of silence after traffic, netPhaseMS + 5 s in all. It
// never sleeps unless wait, and then sleeps in ppoll whenever the tap is
// empty. It returns the count and the time from the first datagram to the
// last.
func nullRX(t *tap.Tap, size int, wait bool) (int64, time.Duration, error) {
	buf := make([]byte, 65536)
	iov := [][]byte{buf}
	fds := [1]unix.PollFd{{Fd: int32(t.PollFD()), Events: unix.POLLIN}} // for wait
	timeout := unix.Timespec{Nsec: 100e6}
	end := fmt.Sprintf("end %d", size)
	var n int64
	var first, last time.Time
	stop := time.Now().Add((netPhaseMS + 5000) * time.Millisecond)
	quiet := time.Now().Add(3 * time.Second)
	for now := time.Now(); now.Before(stop) && now.Before(quiet); now = time.Now() {
		k, err := t.TryReadv(iov)
		if errors.Is(err, tap.ErrWouldBlock) {
			if wait {
				// Bounded, so the deadlines above are still checked.
				fds[0].Revents = 0
				if _, err := unix.Ppoll(fds[:], &timeout, nil); err != nil && err != unix.EINTR {
					return n, 0, err
				}
			}
			continue
		}
		if err != nil {
			return n, 0, err
		}
		dport, payload, ok := parseUDP(buf[:min(k, len(buf))])
		switch {
		case !ok:
		case dport == netSink+2 && string(payload) == end:
			return n, last.Sub(first), nil
		case dport == netSink && len(payload) == size:
			last = time.Now()
			if n == 0 {
				first = last
			}
			n++
			quiet = last.Add(time.Second)
		}
	}
	return n, last.Sub(first), nil
}

// udpFrame is a vnet header (zero), Ethernet, IPv4 and UDP (no checksum, which
// IPv4 allows) around payload.
func udpFrame(dstMAC, srcMAC net.HardwareAddr, src, dst net.IP, sport, dport int, payload []byte) []byte {
	f := make([]byte, nullHdrLen+14+20+8+len(payload))
	e := f[nullHdrLen:]
	copy(e[0:6], dstMAC)
	copy(e[6:12], srcMAC)
	binary.BigEndian.PutUint16(e[12:], 0x0800)
	ip := e[14:34]
	ip[0] = 0x45 // version 4, 5 words
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[8] = 64 // TTL
	ip[9] = unix.IPPROTO_UDP
	copy(ip[12:16], src)
	copy(ip[16:20], dst)
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	u := e[34:42]
	binary.BigEndian.PutUint16(u[0:], uint16(sport))
	binary.BigEndian.PutUint16(u[2:], uint16(dport))
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(e[42:], payload)
	return f
}

// ipChecksum is the Internet checksum of an IPv4 header (RFC 1071): over a
// header that holds it, it is 0.
func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// parseUDP finds an IPv4 UDP datagram in a frame read from the tap (vnet
// header first); ok is false for anything else or anything truncated.
func parseUDP(f []byte) (dport int, payload []byte, ok bool) {
	if len(f) < nullHdrLen+14+20 {
		return 0, nil, false
	}
	e := f[nullHdrLen:]
	if binary.BigEndian.Uint16(e[12:]) != 0x0800 {
		return 0, nil, false
	}
	ip := e[14:]
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[0]>>4 != 4 || ihl < 20 || total < ihl+8 || total > len(ip) || ip[9] != unix.IPPROTO_UDP {
		return 0, nil, false
	}
	u := ip[ihl:total]
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	if ulen < 8 || ulen > len(u) {
		return 0, nil, false
	}
	return int(binary.BigEndian.Uint16(u[2:])), u[8:ulen], true
}

// nullArgv runs this test binary as the null VMM in ns.
func nullArgv(ns, mode string) []string {
	return []string{"ip", "netns", "exec", ns, "env", nullEnv + "=" + mode, os.Args[0]}
}

// nullNeighbour gives the host a permanent neighbour entry for the guest's
// address: the null VMM does not answer ARP.
func nullNeighbour(ns string) error {
	out, err := nsCmd(ns, "ip", "neigh", "replace", netnstest.GuestIP, "lladdr", nullGuestMAC.String(),
		"dev", "tap0", "nud", "permanent").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip neigh: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// TestUDPFrame: a frame udpFrame builds parses back (ports, payload), its IP
// header checks, and parseUDP refuses what is not an intact IPv4 UDP datagram.
func TestUDPFrame(t *testing.T) {
	host := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	src, dst := net.IPv4(10, 0, 2, 15).To4(), net.IPv4(10, 0, 2, 1).To4()
	payload := []byte("rx 18 2000 5001")
	f := udpFrame(host, nullGuestMAC, src, dst, 5001, 5002, payload)
	if len(f) != nullHdrLen+14+20+8+len(payload) {
		t.Fatalf("frame is %d bytes", len(f))
	}
	e := f[nullHdrLen:]
	if !slices.Equal(e[0:6], host) || !slices.Equal(e[6:12], nullGuestMAC) {
		t.Errorf("MACs % x", e[:12])
	}
	if c := ipChecksum(e[14:34]); c != 0 {
		t.Errorf("IP header checksums to %#x, want 0", c)
	}
	if !slices.Equal(e[26:30], src) || !slices.Equal(e[30:34], dst) {
		t.Errorf("addresses % x", e[26:34])
	}
	dport, got, ok := parseUDP(f)
	if !ok || dport != 5002 || string(got) != string(payload) {
		t.Errorf("parseUDP = %d %q %v, want 5002 %q true", dport, got, ok, payload)
	}
	// With trailing bytes (Ethernet padding) the payload still ends where
	// UDP's length says.
	if _, got, ok := parseUDP(append(slices.Clone(f), 0, 0, 0, 0)); !ok || string(got) != string(payload) {
		t.Errorf("padded frame: %q %v", got, ok)
	}
	bad := map[string]func([]byte) []byte{
		"truncated": func(f []byte) []byte { return f[:nullHdrLen+14+20+4] },
		"not IPv4":  func(f []byte) []byte { f[nullHdrLen+12] = 0x86; f[nullHdrLen+13] = 0xdd; return f },
		"TCP":       func(f []byte) []byte { f[nullHdrLen+14+9] = unix.IPPROTO_TCP; return f },
		"IHL < 5":   func(f []byte) []byte { f[nullHdrLen+14] = 0x44; return f },
		"IP too long": func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[nullHdrLen+14+2:], 2000)
			return f
		},
		"UDP too long": func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[nullHdrLen+14+20+4:], 2000)
			return f
		},
		"UDP too short": func(f []byte) []byte {
			binary.BigEndian.PutUint16(f[nullHdrLen+14+20+4:], 7)
			return f
		},
		"empty": func([]byte) []byte { return nil },
	}
	for name, spoil := range bad {
		if _, _, ok := parseUDP(spoil(slices.Clone(f))); ok {
			t.Errorf("%s: parseUDP accepted it", name)
		}
	}
}
