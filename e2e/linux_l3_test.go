package e2e

// L3: the default guest (the minimal Linux that scripts/linux.sh builds and
// the busybox initramfs of scripts/initramfs.sh) under govm, with Linux's
// own drivers as the test of every device. One boot runs a whole in-guest
// suite (guest/linux/l3/suite.sh); the host side checks what it reports
// against the images, the bytes sent and the host's own pings.

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/internal/initramfs"
	"github.com/govm/govm/internal/netnstest"
)

var (
	linuxOnce                sync.Once
	linuxKernel, linuxInitrd string
	linuxErr                 error
)

// needLinux returns the default guest's kernel and initramfs: those make
// test passes (GOVM_LINUX_KERNEL, GOVM_LINUX_INITRD), or built here by the
// scripts `make linux` runs (the kernel from the cache after the first
// build on a machine).
func needLinux(t *testing.T) (kernel, initrd string) {
	t.Helper()
	needKVM(t)
	linuxOnce.Do(func() {
		linuxKernel, linuxInitrd = os.Getenv("GOVM_LINUX_KERNEL"), os.Getenv("GOVM_LINUX_INITRD")
		if linuxKernel != "" && linuxInitrd != "" {
			return
		}
		out := repoPath("build", "linux")
		for _, argv := range [][]string{
			{"sh", repoPath("scripts", "linux.sh"), out},
			{"sh", repoPath("scripts", "initramfs.sh"), filepath.Join(out, "initramfs.cpio")},
		} {
			if b, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				linuxErr = fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, b)
				return
			}
		}
		linuxKernel, linuxInitrd = filepath.Join(out, "bzImage"), filepath.Join(out, "initramfs.cpio")
	})
	if linuxErr != nil {
		t.Fatal(linuxErr)
	}
	return linuxKernel, linuxInitrd
}

// l3Initrd writes the default initramfs with files appended (an archive
// of its own after the base one, as Linux allows) and returns its path.
func l3Initrd(t *testing.T, base string, files map[string][]byte) string {
	t.Helper()
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = initramfs.Append(&buf, b, func(w *initramfs.Writer) error {
		dirs := map[string]bool{}
		for name, data := range files {
			if d := filepath.Dir(name); !dirs[d] {
				dirs[d] = true
				if err := w.Dir(d, 0o755); err != nil {
					return err
				}
			}
			if err := w.File(name, 0o755, data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "initramfs.cpio")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// featureBits turns a virtio device's sysfs "features" string (one '0' or
// '1' per bit, bit 0 first) into the list of set bits.
func featureBits(s string) []int {
	var bits []int
	for i, c := range s {
		if c == '1' {
			bits = append(bits, i)
		}
	}
	return bits
}

// The feature bits Linux 6.1's drivers negotiate with govm's devices over
// the legacy transport: what govm offers (virtio/blk, virtio/net), less what
// the driver's legacy feature table lacks (drivers/block/virtio_blk.c and
// drivers/net/virtio_net.c features_legacy; vring_transport_features keeps
// INDIRECT_DESC and EVENT_IDX and drops NOTIFY_ON_EMPTY, 24).
var (
	// SIZE_MAX 1, SEG_MAX 2, GEOMETRY 4, BLK_SIZE 6, FLUSH 9 (RO 5 on a
	// read-only disk), INDIRECT_DESC 28, EVENT_IDX 29.
	blkBits   = []int{1, 2, 4, 6, 9, 28, 29}
	blkROBits = []int{1, 2, 4, 5, 6, 9, 28, 29}
	// CSUM 0, GUEST_CSUM 1, MAC 5, GUEST_TSO4/6 7 8, GUEST_ECN 9,
	// HOST_TSO4/6 11 12, HOST_ECN 13, MRG_RXBUF 15, STATUS 16,
	// ANY_LAYOUT 27 (virtio_net's legacy table), INDIRECT_DESC 28,
	// EVENT_IDX 29.
	netBits = []int{0, 1, 5, 7, 8, 9, 11, 12, 13, 15, 16, 27, 28, 29}
	// virtio-rng has no features of its own: the ring's, always all on.
	rngBits = []int{28, 29}
)

// without returns bits less drop.
func without(bits []int, drop ...int) []int {
	var out []int
	for _, b := range bits {
		keep := true
		for _, d := range drop {
			keep = keep && b != d
		}
		if keep {
			out = append(out, b)
		}
	}
	return out
}

// l3Config is one way to run the suite: the feature switches every
// device gets, and what Linux's drivers should then negotiate.
type l3Config struct {
	name     string
	switches string // appended to every --disk and --net value
	blk      []int
	blkRO    []int
	net      []int
}

// TestLinuxL3 boots the default guest once per configuration and runs the
// in-guest suite: Linux's drivers bind every device; /dev/vda reads the
// host's bytes and writes the guest's, flushed, the host finding them in
// the image afterwards; a read-only disk refuses writes; an ext4 image
// mounts; the network pings both ways, moves 1 MiB each way over TCP
// intact (offloads and mergeable buffers negotiated by the real driver)
// and survives ping -f -c 1000 from the host with no loss, and ping -f
// again after a UDP flood far beyond what it can take; the negotiated
// feature bits are those expected. The guest ends with poweroff -f, which
// must end govm with status 0, and the watchdog must report nothing. The
// second configuration turns EVENT_IDX, INDIRECT_DESC and MRG_RXBUF off,
// so Linux's virtio_ring writes VRING_AVAIL_F_NO_INTERRUPT instead of
// used_event and virtio_net posts big receive buffers.
func TestLinuxL3(t *testing.T) {
	needNetns(t)
	kernel, base := needLinux(t)
	for _, c := range []l3Config{
		{name: "all-features", blk: blkBits, blkRO: blkROBits, net: netBits},
		{name: "features-off", switches: ",event-idx=off,indirect=off",
			blk: without(blkBits, 28, 29), blkRO: without(blkROBits, 28, 29), net: without(netBits, 15, 28, 29)},
	} {
		t.Run(c.name, func(t *testing.T) { runL3Suite(t, kernel, base, c) })
	}
}

func runL3Suite(t *testing.T, kernel, base string, c l3Config) {
	ns := newNetns(t)
	// No IPv6 on the host side: the guest has none, and would count the
	// host's neighbour discovery frames in rx_dropped, which the suite
	// asserts is 0.
	nsCmd(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, uint64(crc32.ChecksumIEEE([]byte(c.name)))))
	blob := make([]byte, 1<<20)
	for i := range blob {
		blob[i] = byte(rng.Uint32())
	}
	suite, err := os.ReadFile(repoPath("guest", "linux", "l3", "suite.sh"))
	if err != nil {
		t.Fatal(err)
	}
	initrd := l3Initrd(t, base, map[string][]byte{"l3/suite.sh": suite, "l3/blob": blob})

	vda, vdb, vdc := filepath.Join(dir, "vda.img"), filepath.Join(dir, "vdb.img"), filepath.Join(dir, "vdc.ext4")
	for _, img := range []struct {
		path string
		size int64
	}{{vda, 4 << 20}, {vdb, 1 << 20}} {
		if err := guestrun.WritePatternImage(img.path, img.size); err != nil {
			t.Fatal(err)
		}
	}
	vdaBefore, _ := os.ReadFile(vda)
	vdbBefore, _ := os.ReadFile(vdb)
	content := filepath.Join(dir, "content")
	os.MkdirAll(content, 0o755)
	os.WriteFile(filepath.Join(content, "hello.txt"), []byte("hello from the host\n"), 0o644)
	if b, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", content, vdc, "16M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, b)
	}

	// The host's ends of the two TCP transfers, inside the namespace. They
	// close when the VM has ended (or the test failed), which ends an
	// Accept the guest never answered.
	var fromGuest, toGuest net.Listener
	if err := netnstest.Do(ns, func() (err error) {
		if fromGuest, err = net.Listen("tcp", ":7002"); err != nil {
			return err
		}
		toGuest, err = net.Listen("tcp", ":7003")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	closeListeners := sync.OnceFunc(func() { fromGuest.Close(); toGuest.Close() })
	t.Cleanup(closeListeners)
	var got []byte
	var gotErr error
	gotDone := make(chan struct{})
	go func() {
		defer close(gotDone)
		c, err := fromGuest.Accept()
		if err != nil {
			gotErr = err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(120 * time.Second))
		got, gotErr = io.ReadAll(c)
	}()
	go func() {
		c, err := toGuest.Accept()
		if err != nil {
			return
		}
		c.SetDeadline(time.Now().Add(120 * time.Second))
		c.Write(blob)
		c.Close()
	}()

	sw := c.switches
	argv := []string{"ip", "netns", "exec", ns, govmBin, "run", "--kernel", kernel, "--initrd", initrd,
		"-m", "128M", "--stats", "--timeout", "300s",
		"--disk", vda + sw, "--disk", vdb + ",ro" + sw, "--disk", vdc + sw,
		"--net", "tap,ifname=" + tapName + ",host-ip=" + netnstest.HostIP + "/24" + sw + map[bool]string{true: ",mrg-rxbuf=off"}[sw != ""],
		"-p", "govm.ip=" + netnstest.GuestIP + "/24 govm.cmd=" + hex.EncodeToString([]byte("/l3/suite.sh "+netnstest.HostIP+"; poweroff -f"))}
	p, err := guestrun.Start(guestrun.Options{}, argv...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	fail := func(format string, args ...any) {
		t.Helper()
		p.Kill()
		o := p.Output()
		t.Fatalf(format+"\nserial:\n%s\nstderr:\n%s", append(args, o.Serial, o.Stderr)...)
	}
	start := time.Now()
	if _, err := p.WaitLine("L3 net-ready", 240*time.Second); err != nil {
		fail("the suite did not reach its network part: %v", err)
	}
	t.Logf("%s: suite at its network part after %v", c.name, time.Since(start).Round(time.Millisecond))

	// The host pings the guest, then floods it (ping -f: a request for
	// each reply and at least every 10 ms): 1000 requests, none lost.
	if out, err := nsExec(ns, "ping", "-c", "3", "-W", "5", netnstest.GuestIP).CombinedOutput(); err != nil {
		fail("ping host->guest: %v\n%s", err, out)
	}
	fstart := time.Now()
	out, err := nsExec(ns, "timeout", "120", "ping", "-q", "-f", "-c", "1000", netnstest.GuestIP).CombinedOutput()
	if sent, recv, ok := pingSummary(string(out)); err != nil || !ok || sent != 1000 || recv != 1000 {
		fail("ping -f -c 1000 host->guest: %v\n%s", err, out)
	}
	t.Logf("%s: ping -f -c 1000 in %v: %s", c.name, time.Since(fstart).Round(time.Millisecond), lastLineWith(string(out), "rtt"))
	// A UDP flood into the guest, far faster than its emulated kernel
	// takes frames (bounded: l3FloodFrames or l3FloodTime), to a port
	// nobody listens on. The device leaves what the guest has no
	// buffers for in the tap, whose queues fill and drop the rest, as
	// on any congested link; the guest works through that backlog
	// (seconds, at the emulator's pace). Once a ping comes back, ping -f
	// again, with no loss: the device and Linux's driver came through
	// the flood without a hang.
	fstart = time.Now()
	flooded, err := udpFlood(ns, netnstest.GuestIP+":9", l3FloodFrames, l3FloodTime)
	if err != nil || flooded == 0 {
		fail("UDP flood host->guest: %d datagrams sent, %v", flooded, err)
	}
	for end := time.Now().Add(60 * time.Second); ; {
		out, err = nsExec(ns, "ping", "-c", "1", "-W", "2", netnstest.GuestIP).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(end) {
			fail("no ping answered for 60 s after a flood of %d datagrams: %v\n%s", flooded, err, out)
		}
	}
	drained := time.Since(fstart)
	out, err = nsExec(ns, "timeout", "120", "ping", "-q", "-f", "-c", "200", netnstest.GuestIP).CombinedOutput()
	if sent, recv, ok := pingSummary(string(out)); err != nil || !ok || sent != 200 || recv != 200 {
		fail("ping -f -c 200 after a flood of %d datagrams: %v\n%s", flooded, err, out)
	}
	t.Logf("%s: %d datagrams flooded, a ping answered after %v, then ping -f -c 200: %s", c.name, flooded,
		drained.Round(time.Millisecond), lastLineWith(string(out), "rtt"))
	// Let the guest go on: it listens on 7001 just after its "net-ready"
	// line, so a first dial may come too early.
	if err := netnstest.Do(ns, func() error {
		var err error
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			var conn net.Conn
			if conn, err = net.DialTimeout("tcp", netnstest.GuestIP+":7001", 10*time.Second); err == nil {
				return conn.Close()
			}
		}
		return err
	}); err != nil {
		fail("releasing the guest: %v", err)
	}
	code, err := p.Wait(120 * time.Second)
	if err != nil {
		fail("govm did not end after the suite: %v", err)
	}
	closeListeners()
	o := p.Output()
	t.Logf("%s: govm ended with %d after %v", c.name, code, p.ExitAfter().Round(time.Millisecond))
	if code != 0 || !strings.Contains(o.Stderr, "halted with interrupts off") {
		fail("poweroff -f: exit %d, want 0 with the halt named", code)
	}
	noWatchdogReports(t, o.Stderr)

	// What the suite saw.
	r := func(name string) guestrun.Result {
		t.Helper()
		res, ok := o.Results[name]
		if !ok {
			fail("no RESULT %s", name)
		}
		if !res.Pass {
			t.Errorf("RESULT %s %s: %v", name, res.Verdict(), res.KV)
		}
		return res
	}
	wantDevs := []struct {
		device, driver string
		bits           []int
	}{{"0x0002", "virtio_blk", c.blk}, {"0x0002", "virtio_blk", c.blkRO}, {"0x0002", "virtio_blk", c.blk}, {"0x0001", "virtio_net", c.net},
		{"0x0004", "virtio_rng", rngBits}}
	for i, w := range wantDevs {
		d := r(fmt.Sprintf("dev-virtio%d", i))
		if d.KV["device"] != w.device || d.KV["driver"] != w.driver {
			t.Errorf("virtio%d: device %s bound to %s; want %s bound to %s", i, d.KV["device"], d.KV["driver"], w.device, w.driver)
		}
		if got := featureBits(d.KV["features"]); fmt.Sprint(got) != fmt.Sprint(w.bits) {
			t.Errorf("virtio%d (%s): negotiated feature bits %v, want %v", i, w.driver, got, w.bits)
		}
	}
	if _, ok := o.Results["dev-virtio5"]; ok {
		t.Errorf("a sixth virtio device: %v", o.Results["dev-virtio5"].KV)
	}
	// Entropy: Linux's virtio_rng is the current hwrng, and /dev/hwrng
	// reads what govm's device gives: getrandom's bytes, so 1024 of them
	// take far more than 64 distinct values (about 250).
	if h := r("hwrng"); !strings.HasPrefix(h.KV["current"], "virtio_rng") || h.KV["bytes"] != "1024" || atoi(h.KV["distinct"]) < 64 {
		t.Errorf("hwrng: %v; want virtio_rng current and 1024 random bytes read", h.KV)
	}
	r("pvpanic")

	// Block: the guest read the host's bytes; the host finds the guest's.
	if got := r("vda-read").KV["md5"]; got != md5hex(vdaBefore) {
		t.Errorf("guest read /dev/vda with md5 %s, the image has %s", got, md5hex(vdaBefore))
	}
	w := r("vda-write")
	if n, err := w.Int("flushes"); err != nil || n < 1 || w.KV["write_cache"] != "write_back" {
		t.Errorf("vda write: cache %q, %s flushes after fsync; want write_back and at least one VIRTIO_BLK_T_FLUSH", w.KV["write_cache"], w.KV["flushes"])
	}
	chunk := blob[:256<<10]
	if got := r("vda-readback").KV["md5"]; got != md5hex(chunk) {
		t.Errorf("O_DIRECT read-back md5 %s, want %s", got, md5hex(chunk))
	}
	vdaAfter, _ := os.ReadFile(vda)
	wantVda := append(append(append([]byte{}, vdaBefore[:1<<20]...), chunk...), vdaBefore[1<<20+len(chunk):]...)
	if !bytes.Equal(vdaAfter, wantVda) {
		t.Errorf("vda.img after the run is not the pattern with 256 KiB of the blob at 1 MiB")
	}
	if ro := r("vdb-ro"); ro.KV["ro"] != "1" || ro.KV["write"] != "refused" {
		t.Errorf("read-only disk: sysfs ro=%s, a write was %s; want 1 and refused", ro.KV["ro"], ro.KV["write"])
	}
	if vdbAfter, _ := os.ReadFile(vdb); !bytes.Equal(vdbAfter, vdbBefore) {
		t.Errorf("the read-only image changed")
	}
	if e := r("vdc-ext4"); e.KV["hello"] != "hello_from_the_host" {
		t.Errorf("ext4: guest read %q from hello.txt", e.KV["hello"])
	}
	if b, err := exec.Command("debugfs", "-R", "cat /out.txt", vdc).Output(); err != nil || strings.TrimSpace(string(b)) != "written-by-guest" {
		t.Errorf("host reads %q from the ext4 image (%v), want written-by-guest", b, err)
	}

	// Network.
	if e := r("eth0"); e.KV["operstate"] != "up" || e.KV["mtu"] != "1500" {
		t.Errorf("eth0: %v", e.KV)
	}
	if ph := r("ping-host"); ph.KV["sent"] != "3" || ph.KV["received"] != "3" {
		t.Errorf("guest ping to the host: %v", ph.KV)
	}
	if pf := r("ping-flood-host"); pf.KV["sent"] != "200" || pf.KV["received"] != "200" {
		t.Errorf("guest ping -A -c 200 to the host: %v", pf.KV)
	}
	r("tcp-out")
	<-gotDone
	if gotErr != nil || !bytes.Equal(got, blob) {
		t.Errorf("host received %d bytes (md5 %s, %v) from the guest; want the 1 MiB blob (md5 %s)", len(got), md5hex(got), gotErr, md5hex(blob))
	}
	if got := r("tcp-in").KV["md5"]; got != md5hex(blob) {
		t.Errorf("guest received md5 %s, want %s", got, md5hex(blob))
	}
	r("host-done")
	if s := r("eth0-stats"); s.KV["rx_errors"] != "0" || s.KV["rx_dropped"] != "0" {
		t.Errorf("eth0 counters: %v", s.KV)
	}
}

// atoi is s as a number, or -1.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// The L3 suite's UDP flood into the guest: at most this many 64-byte
// frames, for at most this long.
const (
	l3FloodFrames = 50000
	l3FloodTime   = 2 * time.Second
)

// udpFlood sends up to n datagrams of 18 bytes (64-byte frames) to addr
// from namespace ns, as fast as the socket takes them, for at most d, and
// returns how many the socket took (a full tap queue refuses some).
func udpFlood(ns, addr string, n int, d time.Duration) (int, error) {
	sent := 0
	err := netnstest.Do(ns, func() error {
		to, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return err
		}
		// Not connected: the guest's port-unreachable answers must not
		// fail the sends that follow them.
		conn, err := net.ListenPacket("udp4", ":0")
		if err != nil {
			return err
		}
		defer conn.Close()
		payload := make([]byte, 18)
		end := time.Now().Add(d)
		for i := 0; i < n && (i%256 != 0 || time.Now().Before(end)); i++ {
			if _, err := conn.WriteTo(payload, to); err == nil {
				sent++
			}
		}
		return nil
	})
	return sent, err
}
