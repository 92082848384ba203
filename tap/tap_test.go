package tap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Every test that touches real interfaces runs in a network namespace of
// its own, so nothing (no address, no frame) ever reaches the host's
// namespace.

var nsCount atomic.Int32

// enterNetns moves the test goroutine into a fresh named namespace
// govm-tap-test-<pid>-<n> for the rest of the test. The goroutine keeps its
// OS thread locked: when the test ends, the goroutine exits and Go
// destroys the thread instead of reusing a thread in a foreign namespace.
// The named namespace is deleted in cleanup.
func enterNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) for network namespaces")
	}
	if _, err := os.Stat(tunPath); err != nil {
		t.Skipf("no %s: %v", tunPath, err)
	}
	runtime.LockOSThread() // deliberately never unlocked, see above
	name := fmt.Sprintf("govm-tap-test-%d-%d", os.Getpid(), nsCount.Add(1))
	orig, err := netns.Get()
	if err != nil {
		t.Fatalf("netns.Get: %v", err)
	}
	ns, err := netns.NewNamed(name)
	if err != nil {
		orig.Close()
		t.Fatalf("netns.NewNamed(%s): %v", name, err)
	}
	t.Cleanup(func() {
		ns.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
		orig.Close()
	})
	if cur, _ := netns.Get(); cur.Equal(orig) {
		t.Fatalf("still in the original namespace")
	}
	// No IPv6 in the namespace: an interface going up would otherwise
	// send MLD reports and DAD probes into the tap, and tests that expect
	// an idle tap would read them. /proc/sys/net belongs to the namespace
	// of the thread that opens it: this one.
	for _, c := range []string{"all", "default"} {
		f := "/proc/sys/net/ipv6/conf/" + c + "/disable_ipv6"
		if err := os.WriteFile(f, []byte("1"), 0); err != nil && !os.IsNotExist(err) {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

func waitGone(name string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !linkExists(name) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return !linkExists(name)
}

func TestOpenCreatesConfiguresAndDeletes(t *testing.T) {
	enterNetns(t)
	tp, err := Open(Config{VMName: "t1", HostIP: netip.MustParsePrefix("10.99.0.1/24"), VnetHdr: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if tp.Name() != "govm-t1" || !tp.Created() {
		t.Errorf("Name %q Created %v, want govm-t1 true", tp.Name(), tp.Created())
	}
	link, err := netlink.LinkByName("govm-t1")
	if err != nil {
		t.Fatalf("LinkByName: %v", err)
	}
	if link.Type() != "tuntap" || link.Attrs().Flags&(1<<0) == 0 { // net.FlagUp
		t.Errorf("link type %q flags %v, want an up tuntap", link.Type(), link.Attrs().Flags)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatalf("AddrList: %v", err)
	}
	if len(addrs) != 1 || addrs[0].IPNet.String() != "10.99.0.1/24" {
		t.Errorf("addresses %v, want [10.99.0.1/24]", addrs)
	}
	if err := tp.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !waitGone("govm-t1", 2*time.Second) {
		t.Errorf("govm-t1 still exists after Close")
	}
}

func TestOpenKernelPicksName(t *testing.T) {
	enterNetns(t)
	tp, err := Open(Config{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer tp.Close()
	if !strings.HasPrefix(tp.Name(), "govm") || strings.Contains(tp.Name(), "%") || !linkExists(tp.Name()) {
		t.Errorf("name %q: want an existing govmN", tp.Name())
	}
}

func TestOpenBusy(t *testing.T) {
	enterNetns(t)
	a, err := Open(Config{Name: "tapbusy0", VnetHdr: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer a.Close()
	b, err := Open(Config{Name: "tapbusy0", VnetHdr: true})
	if err == nil {
		b.Close()
		t.Fatalf("second Open of tapbusy0 succeeded")
	}
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "tap tapbusy0 is busy (in use by another process?)") {
		t.Errorf("error %q: want ErrBusy with the busy line", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q spans lines", err)
	}
}

func TestOpenPersistentIsKept(t *testing.T) {
	enterNetns(t)
	la := netlink.NewLinkAttrs()
	la.Name = "tappers0"
	if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: la, Mode: netlink.TUNTAP_MODE_TAP,
		Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR}); err != nil {
		t.Fatalf("create persistent tap: %v", err)
	}
	tp, err := Open(Config{Name: "tappers0", HostIP: netip.MustParsePrefix("10.98.0.1/24"), VnetHdr: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if tp.Created() {
		t.Errorf("Created() true for a pre-existing tap")
	}
	tp.Close()
	time.Sleep(50 * time.Millisecond)
	if !linkExists("tappers0") {
		t.Errorf("pre-existing tap deleted by Close")
	}
	// Opening it again re-adds the existing address without failing.
	tp, err = Open(Config{Name: "tappers0", HostIP: netip.MustParsePrefix("10.98.0.1/24"), VnetHdr: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	tp.Close()
}

func TestOpenErrors(t *testing.T) {
	enterNetns(t)
	la := netlink.NewLinkAttrs()
	la.Name = "govm-taken"
	if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: la, Mode: netlink.TUNTAP_MODE_TAP}); err != nil {
		t.Fatalf("add tap: %v", err)
	}
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"vm tap exists", Config{VMName: "taken"}, ErrExists},
		{"bad name", Config{Name: "a/b"}, ErrBadName},
		{"long name", Config{Name: "abcdefghijklmnop"}, ErrBadName},
		{"network address as host ip", Config{Name: "tapx0", HostIP: netip.MustParsePrefix("10.0.0.0/24")}, ErrBadAddr},
		{"multicast host ip", Config{Name: "tapx0", HostIP: netip.MustParsePrefix("224.0.0.1/4")}, ErrBadAddr},
		{"invalid prefix", Config{Name: "tapx0", HostIP: netip.PrefixFrom(netip.MustParseAddr("10.0.0.1"), 33)}, ErrBadAddr},
	}
	for _, tt := range tests {
		tp, err := Open(tt.cfg)
		if err == nil {
			tp.Close()
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: Open = %v, want %v", tt.name, err, tt.want)
		}
	}
	if linkExists("tapx0") {
		t.Errorf("a failed Open left tapx0 behind")
	}
}

// TestTryReadvAndPollFD: on an idle tap TryReadv says ErrWouldBlock at
// once and PollFD does not poll readable; once a frame is pending it does,
// and TryReadv returns the frame (TestFramesBothWays). After Close every
// operation says os.ErrClosed.
func TestTryReadvAndPollFD(t *testing.T) {
	enterNetns(t)
	tp, err := Open(Config{VMName: "blk", VnetHdr: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	buf := [][]byte{make([]byte, 2000)}
	if _, err := tp.TryReadv(buf); !errors.Is(err, ErrWouldBlock) {
		t.Errorf("TryReadv on an idle tap: %v, want ErrWouldBlock", err)
	}
	// The link is down: nothing arrives.
	p := []unix.PollFd{{Fd: int32(tp.PollFD()), Events: unix.POLLIN}}
	if n, err := unix.Poll(p, 0); err != nil || n != 0 {
		t.Errorf("PollFD on an idle tap polls %d (%v), want 0", n, err)
	}
	if err := tp.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, op := range []struct {
		name string
		err  error
	}{
		{"TryReadv", func() error { _, err := tp.TryReadv(buf); return err }()},
		{"Writev", func() error { _, err := tp.Writev(buf); return err }()},
		{"SetOffload", tp.SetOffload(0)},
		{"second Close", tp.Close()},
	} {
		if !errors.Is(op.err, os.ErrClosed) {
			t.Errorf("%s after Close: %v, want os.ErrClosed", op.name, op.err)
		}
	}
}

// etherTest is an IEEE local-experimental EtherType: the namespace's stack
// ignores it, and only our packet socket cares.
const etherTest = 0x88b5

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func testFrame(seq byte) []byte {
	f := make([]byte, 60)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], etherTest)
	for i := 14; i < len(f); i++ {
		f[i] = seq + byte(i)
	}
	return f
}

// TestFramesBothWays writes a frame into the tap fd (the "wire" side) and
// sees it arrive on the interface through a packet socket, then sends one
// out of the interface and reads it from the fd, vnet header included.
func TestFramesBothWays(t *testing.T) {
	enterNetns(t)
	tp, err := Open(Config{VMName: "frames", HostIP: netip.MustParsePrefix("10.97.0.1/24"), VnetHdr: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer tp.Close()
	if err := tp.SetVnetHdrSize(10); err != nil {
		t.Fatalf("SetVnetHdrSize: %v", err)
	}
	if err := tp.SetOffload(unix.TUN_F_CSUM | unix.TUN_F_TSO4); err != nil {
		t.Fatalf("SetOffload: %v", err)
	}
	ifc, err := netlink.LinkByName(tp.Name())
	if err != nil {
		t.Fatal(err)
	}
	idx := ifc.Attrs().Index
	s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(etherTest)))
	if err != nil {
		t.Fatalf("packet socket: %v", err)
	}
	defer unix.Close(s)
	if err := unix.Bind(s, &unix.SockaddrLinklayer{Protocol: htons(etherTest), Ifindex: idx}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)

	// fd -> interface: header and frame in separate iovecs.
	in := testFrame(1)
	if n, err := tp.Writev([][]byte{make([]byte, 10), in}); err != nil || n != 10+len(in) {
		t.Fatalf("Writev = %d, %v", n, err)
	}
	buf := make([]byte, 2000)
	n, _, err := unix.Recvfrom(s, buf, 0)
	if err != nil {
		t.Fatalf("packet socket saw nothing: %v", err)
	}
	if !bytes.Equal(buf[:n], in) {
		t.Errorf("interface got % x\nwant % x", buf[:n], in)
	}

	// interface -> fd.
	out := testFrame(2)
	if err := unix.Sendto(s, out, 0, &unix.SockaddrLinklayer{Protocol: htons(etherTest), Ifindex: idx, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}); err != nil {
		t.Fatalf("sendto: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	hdr := make([]byte, 10)
	for {
		// As virtio-net's loop does: poll PollFD, then TryReadv.
		p := []unix.PollFd{{Fd: int32(tp.PollFD()), Events: unix.POLLIN}}
		if _, err := unix.Poll(p, int(time.Until(deadline).Milliseconds())+1); err != nil && err != unix.EINTR {
			t.Fatalf("poll: %v", err)
		}
		n, err := tp.TryReadv([][]byte{hdr, buf})
		if errors.Is(err, ErrWouldBlock) && time.Now().Before(deadline) {
			continue
		}
		if err != nil {
			t.Fatalf("TryReadv: %v (frame never came out of the tap)", err)
		}
		if n < 10+14 || binary.BigEndian.Uint16(buf[12:]) != etherTest {
			continue // IPv6 autoconfiguration and the like
		}
		if !bytes.Equal(buf[:n-10], out) {
			t.Errorf("tap fd got % x\nwant % x", buf[:n-10], out)
		}
		if !bytes.Equal(hdr, make([]byte, 10)) {
			t.Errorf("vnet header % x, want zero (no offload on this frame)", hdr)
		}
		break
	}
}
