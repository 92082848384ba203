package bench

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/internal/netnstest"
)

// What the network benchmarks and the soak share: a namespace per VMM run with
// a tap in it, the two VMMs' command lines, reaching and quitting the guest,
// and reading ping's report. Nothing leaves the namespace.

// benchNetns creates a namespace (lo up), deleted when the benchmark ends.
func benchNetns(tb testing.TB) string {
	ns, err := netnstest.New(tb, "govm-bench")
	if err != nil {
		tb.Skipf("cannot create a network namespace (need root and iproute2): %v", err)
	}
	return ns
}

// inNS runs fn on a thread inside ns: the sockets it opens live there.
func inNS(ns string, fn func() error) error { return netnstest.Do(ns, fn) }

// nsCmd is argv run inside ns.
func nsCmd(ns string, argv ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
}

// govmNetArgv runs govm inside ns; govm creates tap0 there itself.
func govmNetArgv(tb testing.TB, ns, cmdline string) []string {
	argv := govmArgv(tb, testKernel(tb), cmdline, "--net", "tap,ifname=tap0,host-ip="+netnstest.HostIP+"/24")
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// qemuNetArgv creates tap0 in ns (QEMU does not configure the host side) and
// runs QEMU there with legacy virtio-net-pci and vhost=off (no /dev/vhost-net on
// our hosts, and govm has no vhost either). debug-threads=on names QEMU's vCPU
// threads "CPU N/KVM", which ReadCPU splits out.
func qemuNetArgv(tb testing.TB, ns, cmdline string) []string {
	hostTap(tb, ns)
	argv := qemuArgv(tb, testKernel(tb), cmdline,
		"-name", "govm-bench,debug-threads=on",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no,vhost=off",
		"-device", "virtio-net-pci,netdev=n0,disable-modern=on")
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// hostTap creates tap0 in ns, with vnet headers, the host's address, and up:
// for a VMM that does not configure the host side (QEMU, the null VMM).
func hostTap(tb testing.TB, ns string) {
	for _, c := range [][]string{
		{"ip", "-n", ns, "tuntap", "add", "dev", "tap0", "mode", "tap", "vnet_hdr"},
		{"ip", "-n", ns, "addr", "add", netnstest.HostIP + "/24", "dev", "tap0"},
		{"ip", "-n", ns, "link", "set", "tap0", "up"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			tb.Fatalf("%v: %v: %s", c, err, out)
		}
	}
}

// waitReachable pings the guest until it answers (net-echo is serving).
func waitReachable(ns string, v *VMM, within time.Duration) error {
	for end := time.Now().Add(within); time.Now().Before(end); {
		if nsCmd(ns, "ping", "-c", "1", "-W", "1", netnstest.GuestIP).Run() == nil {
			return nil
		}
		if _, _, done := v.LineAt("SUMMARY "); done {
			break // the guest finished without serving
		}
	}
	return fmt.Errorf("guest %s did not answer ping within %v\nserial: %s\nstderr: %s",
		netnstest.GuestIP, within, v.Serial(), v.Stderr())
}

// quitGuest sends "quit" to the guest's UDP port 9 until a line starting with
// until appears (each "quit" ends the test the guest is in: the flood, then
// net-echo).
// (LineAt, not WaitLine: a WaitLine timeout kills the VMM.)
func quitGuest(ns string, v *VMM, until string) error {
	for i := 0; i < 20; i++ {
		nsCmd(ns, "bash", "-c", "echo -n quit > /dev/udp/"+netnstest.GuestIP+"/9").Run()
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, _, ok := v.LineAt(until); ok {
				return nil
			}
		}
	}
	return fmt.Errorf("no %q after 20 quits\nserial: %s", until, v.Serial())
}

// finish waits for the VMM's exit and checks the guest passed: debug-exit code
// 0 and a clean RESULT/SUMMARY report.
func finish(v *VMM) (*guestrun.Output, error) {
	status, err := v.Wait(30 * time.Second)
	o := v.Output()
	if err != nil {
		return o, fmt.Errorf("%w\nserial: %s\nstderr: %s", err, o.Serial, o.Stderr)
	}
	if code, ok := guestrun.DebugExit(status); !ok || code != 0 {
		return o, fmt.Errorf("exit status %d is not debug-exit code 0\nserial: %s\nstderr: %s", status, o.Serial, o.Stderr)
	}
	if err := o.Check(); err != nil {
		return o, fmt.Errorf("%w\nserial: %s", err, o.Serial)
	}
	return o, nil
}

// pingFloodCPU runs ping -f -c count at the guest from ns (killed after
// limit, rounded down to seconds), samples pid's CPU time before and after,
// and requires every request answered. vmm names the VMM in errors.
func pingFloodCPU(ns string, v *VMM, vmm string, pid, count int, limit time.Duration) (pingReport, CPUSample, error) {
	before, err := ReadCPU(pid)
	if err != nil {
		return pingReport{}, CPUSample{}, err
	}
	out, err := nsCmd(ns, "timeout", strconv.Itoa(int(limit/time.Second)), "ping", "-q", "-f", "-c",
		strconv.Itoa(count), netnstest.GuestIP).CombinedOutput()
	if err != nil {
		return pingReport{}, CPUSample{}, fmt.Errorf("ping -f (VMM %s): %v\n%s\nserial: %s", vmm, err, out, v.Serial())
	}
	after, err := ReadCPU(pid)
	if err != nil {
		return pingReport{}, CPUSample{}, err
	}
	ping, ok := parsePing(string(out))
	if !ok || ping.recv != count || ping.time <= 0 {
		return pingReport{}, CPUSample{}, fmt.Errorf("ping -f -c %d: %s", count, out)
	}
	return ping, after.Sub(before), nil
}

// pingThenFinish is pingFloodCPU, then "quit" to net-echo until the guest's
// SUMMARY, then finish: the end of every run that serves ping -f.
func pingThenFinish(ns string, v *VMM, vmm string, pid, count int, limit time.Duration) (pingReport, CPUSample, *guestrun.Output, error) {
	ping, cpu, err := pingFloodCPU(ns, v, vmm, pid, count, limit)
	if err != nil {
		return ping, cpu, nil, err
	}
	if err := quitGuest(ns, v, "SUMMARY "); err != nil {
		return ping, cpu, nil, err
	}
	o, err := finish(v)
	return ping, cpu, o, err
}

// pingReport is what iputils ping prints at the end.
type pingReport struct {
	sent, recv             int
	time                   time.Duration // "time Nms": first send to the end
	rttMin, rttAvg, rttMax float64       // ms
}

// parsePing reads "N packets transmitted, M received, ... time Tms" and
// "rtt min/avg/max/mdev = a/b/c/d ms"; ok is false unless both are there.
func parsePing(out string) (r pingReport, ok bool) {
	var haveCount, haveRTT bool
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " packets transmitted, ") {
			f := strings.Fields(l)
			if len(f) < 4 {
				return r, false
			}
			s, err1 := strconv.Atoi(f[0])
			n, err2 := strconv.Atoi(f[3])
			_, t, found := strings.Cut(l, ", time ")
			ms, err3 := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(t), "ms"), 64)
			if err1 != nil || err2 != nil || !found || err3 != nil {
				return r, false
			}
			r.sent, r.recv, r.time = s, n, time.Duration(ms*float64(time.Millisecond))
			haveCount = true
		}
		if _, after, found := strings.Cut(l, "min/avg/max/mdev = "); found {
			fs := strings.Fields(after)
			if len(fs) == 0 {
				return r, false
			}
			f := strings.Split(fs[0], "/")
			if len(f) != 4 {
				return r, false
			}
			var v [3]float64
			for i := range v {
				var err error
				if v[i], err = strconv.ParseFloat(f[i], 64); err != nil {
					return r, false
				}
			}
			r.rttMin, r.rttAvg, r.rttMax = v[0], v[1], v[2]
			haveRTT = true
		}
	}
	return r, haveCount && haveRTT
}

// TestParsePing checks the ping summary parser on iputils' output.
func TestParsePing(t *testing.T) {
	out := "--- 10.0.2.15 ping statistics ---\n" +
		"10000 packets transmitted, 9999 received, 0.01% packet loss, time 1234ms\n" +
		"rtt min/avg/max/mdev = 0.165/1.283/1334.760/20.896 ms, pipe 70, ipg/ewma 0.763/0.203 ms\n"
	r, ok := parsePing(out)
	if !ok || r.sent != 10000 || r.recv != 9999 || r.time != 1234*time.Millisecond ||
		r.rttMin != 0.165 || r.rttAvg != 1.283 || r.rttMax != 1334.760 {
		t.Errorf("parsePing = %+v %v", r, ok)
	}
	for _, bad := range []string{
		"10 packets transmitted, 0 received, 100% packet loss, time 9000ms\n", // no rtt line
		"rtt min/avg/max/mdev = 0.1/0.2/0.3/0.4 ms\n",                         // no count line
		"x packets transmitted, 1 received, time 1ms\nrtt min/avg/max/mdev = 0.1/0.2/0.3/0.4 ms\n",
		"1 packets transmitted, 1 received, time 1ms\nrtt min/avg/max/mdev = 0.1/0.2 ms\n",
	} {
		if r, ok := parsePing(bad); ok {
			t.Errorf("parsePing(%q) = %+v, want not ok", bad, r)
		}
	}
}
