// Package tap opens a Linux tap device (Documentation/networking/tuntap.rst)
// for virtio-net: IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, so every frame read or
// written carries a struct virtio_net_hdr in front (virtio spec 5.1.6) and
// offloads (checksum, TSO) pass between guest and host untouched.
//
// Waiting for frames: the tun fd is O_NONBLOCK and deliberately kept out of
// Go's runtime poller (io.go). Reads never block; the goroutine that waits
// for a frame polls the fd (PollFD) in ppoll(2) itself, so the kernel wakes
// that thread directly when a frame arrives: no netpoller thread woken per
// frame, no hand-off to another thread, no spinning scheduler threads
// (why, in io.go; what it saved, in bench/README.md, "Design
// measurements").
package tap

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

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
	// named after the VM (NameForVM(VMName, NIC)) and deletes it on Close.
	Name string
	// VMName and NIC (which of the VM's network devices, from 0) name the
	// created tap when Name is empty.
	VMName string
	NIC    int
	// HostIP is assigned to the host side of the tap (and the link
	// brought up) through netlink. Optional: the zero Prefix means none.
	HostIP netip.Prefix
	// VnetHdr opens the tap with IFF_VNET_HDR (what virtio-net needs).
	VnetHdr bool
}

// Tap is an open tap device. Safe for concurrent use: one reader and one
// writer goroutine at a time (reads of one frame must not interleave).
type Tap struct {
	// mu is held shared by every operation on fd (across a blocking
	// ppoll too) and exclusively by Close, so the fd number is never
	// closed, and so never reused by another open, under a running
	// syscall.
	mu      sync.RWMutex
	fd      int // the tun fd, O_NONBLOCK, not in the runtime poller
	dead    int // eventfd, readable once Close began
	name    string
	created bool
	closed  atomic.Bool

	// The writer's poll set, so a wait for room does not allocate.
	wpoll [2]unix.PollFd
}

// Open opens (and, if needed, creates and configures) the tap cfg names.
// Errors are one line each, suitable for the user.
func Open(cfg Config) (*Tap, error) {
	name := cfg.Name
	create := name == ""
	if create {
		name = NameForVM(cfg.VMName, cfg.NIC)
	}
	if err := ValidName(name); err != nil {
		return nil, err
	}
	var prefix *netip.Prefix
	if cfg.HostIP != (netip.Prefix{}) {
		if err := CheckHostIP(cfg.HostIP); err != nil {
			return nil, err
		}
		prefix = &cfg.HostIP
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
	t := &Tap{fd: fd, dead: -1, name: ifr.Name()} // the kernel may have expanded a "%d" pattern
	if t.dead, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		t.closeFDs()
		return nil, fmt.Errorf("tap: %s: eventfd: %w", t.name, err)
	}
	return t, nil
}

// Name is the interface name.
func (t *Tap) Name() string { return t.name }

// Created reports whether govm created the tap (and Close deletes it).
func (t *Tap) Created() bool { return t.created }

// Close closes the fd, waking a Writev waiting for room, and
// returns once none is using the fd. A tap govm created is non-persistent,
// so the kernel deletes it with the last fd; a pre-existing (persistent)
// tap stays.
func (t *Tap) Close() error {
	if t.closed.Swap(true) {
		return fmt.Errorf("tap: %s: %w", t.name, errClosed)
	}
	// dead stays readable from here on: every wait in progress returns,
	// and every later one returns at once.
	signalEventFD(t.dead)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closeFDs()
}

func (t *Tap) closeFDs() error {
	err := unix.Close(t.fd)
	if t.dead >= 0 {
		unix.Close(t.dead)
	}
	if err != nil {
		return fmt.Errorf("tap: close %s: %w", t.name, err)
	}
	return nil
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
// in frames it reads: the Offload* (TUN_F_*) flags.
func (t *Tap) SetOffload(flags uint) error {
	return t.control("TUNSETOFFLOAD", func(fd int) error {
		return unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, int(flags))
	})
}

func (t *Tap) control(what string, f func(fd int) error) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed.Load() {
		return fmt.Errorf("tap: %s %s: %w", what, t.name, errClosed)
	}
	if err := f(t.fd); err != nil {
		return fmt.Errorf("tap: %s %s: %w", what, t.name, err)
	}
	return nil
}
