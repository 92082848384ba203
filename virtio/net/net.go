// Package virtionet is the virtio network device (virtio spec 5.1) over a
// tap-like Backend, with the legacy header layout (5.1.6, "legacy
// interface" notes): a 10-byte struct virtio_net_hdr, 12 bytes with
// VIRTIO_NET_F_MRG_RXBUF. Queue 0 receives (host -> guest), queue 1
// transmits; one I/O goroutine, the queue core's virtio.Loop, serves both
// queues and the backend.
package virtionet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/govm/govm/virtio"
)

// Feature bits of the network device (spec 5.1.3).
const (
	FeatureCsum      = 0  // device handles partial checksums (guest TX)
	FeatureGuestCsum = 1  // driver handles partial checksums (guest RX)
	FeatureMAC       = 5  // config space has a MAC
	FeatureGuestTSO4 = 7  // driver receives TSOv4 frames
	FeatureGuestTSO6 = 8  // driver receives TSOv6 frames
	FeatureGuestECN  = 9  // driver receives TSO frames with ECN
	FeatureGuestUFO  = 10 // driver receives UFO frames (not offered)
	FeatureHostTSO4  = 11 // device accepts TSOv4 frames from the driver
	FeatureHostTSO6  = 12 // device accepts TSOv6 frames from the driver
	FeatureHostECN   = 13 // device accepts TSO frames with ECN
	FeatureMrgRxBuf  = 15 // driver merges receive buffers (num_buffers)
	FeatureStatus    = 16 // config space has a status field
)

// Queue indexes (spec 5.1.2, one queue pair).
const (
	RXQueue   = 0
	TXQueue   = 1
	QueueSize = 256
)

// StatusLinkUp is VIRTIO_NET_S_LINK_UP in the config status field (5.1.4).
const StatusLinkUp = 1

// ErrQueues: Activate got fewer queues than the device has.
var ErrQueues = errors.New("virtionet: rx and tx queues not both configured")

// ErrWouldBlock is what a Backend's TryReadv returns (wrapped or not) when
// no frame is pending.
var ErrWouldBlock = errors.New("virtionet: no frame pending")

// Backend carries frames, each preceded by the vnet header, to and from the
// host: a tap (vmm adapts *tap.Tap to it).
type Backend interface {
	// TryReadv reads one frame into iovs, or returns an error wrapping
	// ErrWouldBlock when none is pending. It never blocks.
	TryReadv(iovs [][]byte) (int, error)
	// PollFD is polled (POLLIN) for a frame that may be pending, by
	// the device's I/O goroutine together with its doorbells. It stays
	// valid until the backend is closed, which its owner does only
	// after Reset.
	PollFD() int
	// Writev writes one frame gathered from iovs.
	Writev(iovs [][]byte) (int, error)
	// SetVnetHdrSize sets the header length (10 or 12).
	SetVnetHdrSize(n int) error
	// SetOffload sets the offloads the guest accepts, as Linux's
	// TUN_F_* bits (linux/if_tun.h).
	SetOffload(flags uint) error
}

// Config configures a network device.
type Config struct {
	MAC MAC // unicast, not zero (MAC.Check)
	// PollMax bounds the I/O goroutine's adaptive busy-poll window
	// (virtio.Poller); 0: it sleeps as soon as it has no work.
	PollMax time.Duration
	// Withhold lists feature bits not to offer (govm run --net
	// ...,mrg-rxbuf=off,event-idx=off), as QEMU's device properties do.
	Withhold uint64
}

// Device is a virtio-net device. The transport serialises Activate, Reset
// and config access; its one I/O goroutine (loop) shares only Stats.
type Device struct {
	be       Backend
	pollMax  time.Duration
	withhold uint64

	cfgMu sync.Mutex
	mac   MAC

	stats stats

	io virtio.Worker // the one I/O goroutine (loop)
}

var _ virtio.Device = (*Device)(nil)

// New returns an inactive device on backend.
func New(backend Backend, cfg Config) (*Device, error) {
	if backend == nil {
		return nil, errors.New("virtionet: nil backend")
	}
	if err := cfg.MAC.Check(); err != nil {
		return nil, err
	}
	d := &Device{be: backend, pollMax: cfg.PollMax, withhold: cfg.Withhold}
	d.mac = cfg.MAC
	return d, nil
}

// Type is virtio.DeviceNet.
func (d *Device) Type() virtio.DeviceType { return virtio.DeviceNet }

// Features offered: offloads in both directions (passed through to the
// tap, which does the checksumming and segmentation the guest skipped),
// mergeable RX buffers, MAC and link status, and the ring features.
func (d *Device) Features() uint64 {
	f := virtio.RingFeatures | virtio.Bit(FeatureCsum) | virtio.Bit(FeatureGuestCsum) |
		virtio.Bit(FeatureMAC) | virtio.Bit(FeatureGuestTSO4) | virtio.Bit(FeatureGuestTSO6) |
		virtio.Bit(FeatureGuestECN) | virtio.Bit(FeatureHostTSO4) | virtio.Bit(FeatureHostTSO6) |
		virtio.Bit(FeatureHostECN) | virtio.Bit(FeatureMrgRxBuf) | virtio.Bit(FeatureStatus)
	return f &^ d.withhold
}

// QueueMaxSizes is two queues of QueueSize.
func (d *Device) QueueMaxSizes() []uint16 { return []uint16{QueueSize, QueueSize} }

// config returns the config space (spec 5.1.4): mac[6], then status le16.
// The link is always up: a tap has no carrier of its own to lose.
func (d *Device) config() [8]byte {
	var c [8]byte
	d.cfgMu.Lock()
	copy(c[:6], d.mac[:])
	d.cfgMu.Unlock()
	binary.LittleEndian.PutUint16(c[6:], StatusLinkUp)
	return c
}

// ReadConfig reads config space; bytes past its end read as zero.
func (d *Device) ReadConfig(off uint64, data []byte) {
	c := d.config()
	clear(data)
	if off < uint64(len(c)) {
		copy(data, c[off:])
	}
}

// WriteConfig lets a legacy driver set the MAC bytes (spec 5.1.4, legacy
// note: without VIRTIO_NET_F_CTRL_MAC_ADDR the driver writes mac directly,
// as Linux's virtnet_set_mac_address does). Status is read-only.
func (d *Device) WriteConfig(off uint64, data []byte) {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	for i, b := range data {
		if o := off + uint64(i); o < 6 {
			d.mac[o] = b
		}
	}
}

// MAC returns the current MAC (the driver may have changed it).
func (d *Device) MAC() net.HardwareAddr {
	c := d.config()
	return net.HardwareAddr(append([]byte(nil), c[:6]...))
}

// Activate configures the backend for the negotiated features and starts
// the I/O goroutine that serves both queues.
func (d *Device) Activate(a virtio.Activation) error {
	if d.io.Running() {
		return virtio.ErrActive // before the backend's settings change under it
	}
	if len(a.Queues) < 2 || len(a.Bells) < 2 {
		return fmt.Errorf("%w: got %d", ErrQueues, len(a.Queues))
	}
	hdr := hdrLen(a.Features)
	if err := d.be.SetVnetHdrSize(hdr); err != nil {
		return fmt.Errorf("virtionet: %w", err)
	}
	if err := d.be.SetOffload(offloadFlags(a.Features)); err != nil {
		return fmt.Errorf("virtionet: %w", err)
	}
	return d.io.Start(a.Bells[:2], func(stop <-chan struct{}) {
		r, t := newRX(d, a, hdr, stop), newTX(d, a, hdr, stop)
		l := virtio.Loop{Stop: stop, Member: a.Member, Poll: virtio.Poller{Max: d.pollMax},
			Sources: []*virtio.Source{
				// RX's turn reads the backend, a system call, so
				// while RX waits on it the Loop gives it a turn
				// only when the backend polls ready or TX has
				// served a budget since (see virtio.WaitFD).
				{Server: &r.Server, Turn: r.turn, Budget: passBudget},
				// The guest answers what it receives on TX (a
				// ping's reply): the Loop polls only after TX has
				// served (Prompts), since a guest that only
				// receives has nothing for a poll to find sooner
				// than the tap's wakeup brings it.
				{Server: &t.Server, Handle: t.handle, Budget: passBudget, Prompts: true},
			}}
		l.Run()
	})
}

// passBudget is how many TX chains, or RX frames, one turn serves before
// the other queue's turn, so a flood one way cannot starve the other:
// batchMax, the chains between interrupt decisions.
const passBudget = batchMax

// Reset stops the I/O goroutine and waits for it. A frame read from the
// backend but not yet delivered is lost, like one in flight on a wire that
// is unplugged.
func (d *Device) Reset() { d.io.Stop() }
