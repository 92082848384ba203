// Package tap opens a Linux tap device (Documentation/networking/tuntap.rst)
// for virtio-net: IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, so every frame read or
// written carries a struct virtio_net_hdr in front (virtio spec 5.1.6) and
// offloads (checksum, TSO) pass between guest and host untouched.
//
// Blocking design: the tun fd is opened O_NONBLOCK and wrapped in an
// *os.File, so Go's runtime poller (epoll) owns the waiting. Read, Readv,
// Write and Writev block the calling goroutine only, never an OS thread;
// TryReadv never blocks and WaitReadable parks until a frame may be pending.
// Read deadlines (SetReadDeadline) and Close wake every waiter, which is how
// a virtio device's Reset unblocks its RX goroutine without closing the tap.
package tap

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Errors of this package. Each is wrapped with the interface name.
var (
	// ErrBusy: the tap exists and another process (or another Open in
	// this one) has it attached.
	ErrBusy = errors.New("tap: busy")
	// ErrNoTun: /dev/net/tun is missing.
	ErrNoTun = errors.New("tap: /dev/net/tun not available")
	// ErrExists: govm was to create a tap named after the VM, but an
	// interface with that name already exists.
	ErrExists = errors.New("tap: interface already exists")
	// ErrBadName: an interface name the kernel would reject.
	ErrBadName = errors.New("tap: bad interface name")
	// ErrBadMAC: a MAC address govm cannot give a NIC.
	ErrBadMAC = errors.New("tap: bad MAC address")
	// ErrBadAddr: a host address that is not ADDR/PREFIX.
	ErrBadAddr = errors.New("tap: bad host address")
	// ErrWouldBlock: TryReadv found no frame pending.
	ErrWouldBlock = errors.New("tap: no frame pending")
)

// tunPath is the clone device (Documentation/networking/tuntap.rst 3.2).
const tunPath = "/dev/net/tun"

// Config says which tap to open and how to set it up.
type Config struct {
	// Name of an existing (persistent) or new tap. Empty: govm creates one
	// named after the VM ("govm-" + VMName) and deletes it on Close.
	Name string
	// VMName names the created tap when Name is empty.
	VMName string
	// HostIP, "ADDR/PREFIX", is assigned to the host side of the tap (and
	// the link brought up) through netlink. Optional.
	HostIP string
	// VnetHdr opens the tap with IFF_VNET_HDR (what virtio-net needs).
	VnetHdr bool
}

// Tap is an open tap device. Safe for concurrent use: one reader and one
// writer goroutine at a time (reads of one frame must not interleave).
type Tap struct {
	f       *os.File
	rc      syscall.RawConn
	name    string
	created bool
	closed  atomic.Bool // RawConn reports a closed fd with an internal error; see pollResult
}

// Open opens (and, if needed, creates and configures) the tap cfg names.
// Errors are one line each, suitable for the user.
func Open(cfg Config) (*Tap, error) {
	name := cfg.Name
	create := name == ""
	if create {
		name = NameForVM(cfg.VMName)
	}
	if err := ValidName(name); err != nil {
		return nil, err
	}
	var prefix *hostAddr
	if cfg.HostIP != "" {
		a, err := ParseHostIP(cfg.HostIP)
		if err != nil {
			return nil, err
		}
		prefix = &a
	}
	existed := linkExists(name)
	if create && existed {
		return nil, fmt.Errorf("%w: %s (pass its name to use it, or delete it)", ErrExists, name)
	}
	t, err := open(name, cfg.VnetHdr)
	if err != nil {
		return nil, err
	}
	t.created = !existed
	if prefix != nil || t.created {
		// A tap govm created is brought up even without an address, so
		// it can be bridged; a pre-existing one is only touched when
		// asked to (HostIP).
		if err := configure(t.name, prefix); err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

// open does TUNSETIFF on a fresh /dev/net/tun fd.
func open(name string, vnetHdr bool) (*Tap, error) {
	fd, err := unix.Open(tunPath, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
			return nil, fmt.Errorf("%w: %v (try: modprobe tun)", ErrNoTun, err)
		}
		return nil, fmt.Errorf("tap: open %s: %w", tunPath, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w %q: %v", ErrBadName, name, err)
	}
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if vnetHdr {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("%w: tap %s is busy (in use by another process?)", ErrBusy, name)
		}
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("tap: TUNSETIFF %s: %w (needs CAP_NET_ADMIN or a tap owned by this user)", name, err)
		}
		return nil, fmt.Errorf("tap: TUNSETIFF %s: %w", name, err)
	}
	// The fd is non-blocking, so os.NewFile registers it with the runtime
	// poller (the tun driver implements poll).
	f := os.NewFile(uintptr(fd), tunPath)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tap: %s: %w", name, err)
	}
	// The kernel may have expanded a "%d" pattern: report the real name.
	return &Tap{f: f, rc: rc, name: ifr.Name()}, nil
}

// Name is the interface name.
func (t *Tap) Name() string { return t.name }

// Created reports whether govm created the tap (and Close deletes it).
func (t *Tap) Created() bool { return t.created }

// Close closes the fd, waking any goroutine blocked in a read or wait. A tap
// govm created is non-persistent, so the kernel deletes it with the last fd;
// a pre-existing (persistent) tap stays.
func (t *Tap) Close() error {
	t.closed.Store(true)
	return t.f.Close()
}

// Read reads one frame (with its vnet header when VnetHdr), blocking until
// one is pending. A p shorter than the frame gets the frame truncated.
func (t *Tap) Read(p []byte) (int, error) { return t.f.Read(p) }

// Write writes one frame (with its vnet header when VnetHdr).
func (t *Tap) Write(p []byte) (int, error) { return t.f.Write(p) }

// Readv reads one frame scattered over iovs, blocking until one is pending.
func (t *Tap) Readv(iovs [][]byte) (int, error) {
	var n int
	var opErr error
	err := t.rc.Read(func(fd uintptr) bool {
		n, opErr = unix.Readv(int(fd), iovs)
		return opErr != unix.EAGAIN
	})
	return t.ioResult("readv", n, err, opErr)
}

// TryReadv reads one frame scattered over iovs if one is pending, and
// returns ErrWouldBlock otherwise. It never blocks.
func (t *Tap) TryReadv(iovs [][]byte) (int, error) {
	var n int
	var opErr error
	err := t.rc.Control(func(fd uintptr) {
		n, opErr = unix.Readv(int(fd), iovs)
	})
	if opErr == unix.EAGAIN {
		return 0, ErrWouldBlock
	}
	return t.ioResult("readv", n, err, opErr)
}

// WaitReadable blocks until a frame may be pending (a following TryReadv
// can still find none), the read deadline passes (os.ErrDeadlineExceeded)
// or the tap is closed (os.ErrClosed).
func (t *Tap) WaitReadable() error {
	return t.pollResult(t.rc.Read(func(fd uintptr) bool {
		// The poller forgets earlier readiness when a wait starts, so
		// look at the fd itself: a frame that arrived since the caller's
		// last TryReadv is seen here, not lost.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(pfd, 0)
			if err == unix.EINTR {
				continue
			}
			return err != nil || n > 0
		}
	}))
}

// SetReadDeadline makes blocked and future reads and waits fail with
// os.ErrDeadlineExceeded after t; the zero time clears it.
func (t *Tap) SetReadDeadline(d time.Time) error { return t.f.SetReadDeadline(d) }

// Writev writes one frame gathered from iovs (at most IOV_MAX of them).
func (t *Tap) Writev(iovs [][]byte) (int, error) {
	var n int
	var opErr error
	err := t.rc.Write(func(fd uintptr) bool {
		n, opErr = unix.Writev(int(fd), iovs)
		return opErr != unix.EAGAIN
	})
	return t.ioResult("writev", n, err, opErr)
}

func (t *Tap) ioResult(op string, n int, pollErr, opErr error) (int, error) {
	if pollErr != nil {
		return 0, t.pollResult(pollErr)
	}
	if opErr != nil {
		return 0, fmt.Errorf("tap: %s: %w", op, opErr)
	}
	return n, nil
}

// pollResult turns the poller's "use of closed file" into os.ErrClosed, as
// os.File's own methods do; deadline errors already are
// os.ErrDeadlineExceeded.
func (t *Tap) pollResult(err error) error {
	if err != nil && t.closed.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("tap: %s: %w", t.name, os.ErrClosed)
	}
	return err
}

// SetVnetHdrSize sets the virtio_net_hdr length the kernel reads and writes
// in front of each frame: 10 (struct virtio_net_hdr) or 12 (with
// num_buffers, legacy VIRTIO_NET_F_MRG_RXBUF; spec 5.1.6).
func (t *Tap) SetVnetHdrSize(n int) error {
	return t.control("TUNSETVNETHDRSZ", func(fd int) error {
		return unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, n)
	})
}

// SetOffload tells the kernel which offloads the reader (the guest) accepts
// in frames it reads: TUN_F_* flags, see OffloadFlags.
func (t *Tap) SetOffload(flags uint) error {
	return t.control("TUNSETOFFLOAD", func(fd int) error {
		return unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, int(flags))
	})
}

func (t *Tap) control(what string, f func(fd int) error) error {
	var opErr error
	if err := t.rc.Control(func(fd uintptr) { opErr = f(int(fd)) }); err != nil {
		return fmt.Errorf("tap: %s %s: %w", what, t.name, err)
	}
	if opErr != nil {
		return fmt.Errorf("tap: %s %s: %w", what, t.name, opErr)
	}
	return nil
}
