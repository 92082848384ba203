// Package virtiorng is the entropy device (virtio spec 5.4): one request
// queue of device-writable buffers, which the device fills with bytes from
// the host's getrandom(2). A guest without it can block at boot on
// getrandom until its own entropy pool is ready; with it, Linux's
// virtio_rng feeds the pool (/dev/hwrng).
package virtiorng

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/govm/govm/virtio"
	"golang.org/x/sys/unix"
)

// QueueSize is the request queue's size (spec 5.4.2: requestq). Linux's
// driver keeps one buffer posted.
const QueueSize = 64

// maxChunk bounds the bytes one chain receives: a driver that posts a huge
// buffer gets a prefix (spec 5.4.6.1: the device MAY use less than the
// whole buffer), so one chain cannot hold the loop for long.
const maxChunk = 64 << 10

// ErrBadRequest: a chain the driver must not post (spec 5.4.6.1): one with
// a driver-readable buffer, or no room for a single byte.
var ErrBadRequest = errors.New("virtiorng: malformed request")

// Config configures an entropy device.
type Config struct {
	// Rate bounds the bytes per second the guest gets (0: no bound), as
	// QEMU's rng max-bytes/period and Firecracker's rate limiter do: a
	// guest cannot drain the host's entropy or burn its CPU on it. The
	// guest may take up to one second's worth at once.
	Rate uint64
	// Source supplies the bytes (nil: getrandom(2)). For tests.
	Source io.Reader
}

// Device is a virtio-rng device. The transport serialises Activate and
// Reset; its I/O goroutine shares only the counters.
type Device struct {
	cfg   Config
	src   io.Reader
	io    virtio.Worker
	bytes atomic.Uint64 // entropy bytes handed to the guest
}

var _ virtio.Device = (*Device)(nil)

// New returns an inactive device.
func New(cfg Config) *Device {
	d := &Device{cfg: cfg, src: cfg.Source}
	if d.src == nil {
		d.src = getrandom{}
	}
	return d
}

// Type is virtio.DeviceRNG.
func (d *Device) Type() virtio.DeviceType { return virtio.DeviceRNG }

// Features are the ring features only: the device has none of its own
// (spec 5.4.3).
func (d *Device) Features() uint64 { return virtio.RingFeatures }

// QueueMaxSizes is the one request queue.
func (d *Device) QueueMaxSizes() []uint16 { return []uint16{QueueSize} }

// ReadConfig: the device has no configuration space (spec 5.4.4).
func (d *Device) ReadConfig(off uint64, data []byte) { clear(data) }

// WriteConfig ignores writes: there is nothing to write.
func (d *Device) WriteConfig(off uint64, data []byte) {}

// Bytes is how many entropy bytes the guest has been given since New.
func (d *Device) Bytes() uint64 { return d.bytes.Load() }

var _ virtio.QueueReporter = (*Device)(nil)

// QueueName is "requests" (spec 5.4.2: requestq).
func (d *Device) QueueName(int) string { return "requests" }

// QueueTraffic is not ok: the used lengths are the bytes given.
func (d *Device) QueueTraffic(int) (uint64, map[string]uint64, bool) { return 0, nil, false }

// Activate starts the I/O goroutine: a virtio.Loop with one source, the
// request queue.
func (d *Device) Activate(a virtio.Activation) error {
	if len(a.Queues) != 1 || len(a.Bells) != 1 || a.Mem == nil || a.Intr == nil {
		return fmt.Errorf("virtiorng: activation with %d queues, want 1", len(a.Queues))
	}
	return d.io.Start(a.Bells[:1], func(stop <-chan struct{}) {
		s := &server{dev: d, srv: virtio.Server{Mem: a.Mem, Queue: a.Queues[0], Bell: a.Bells[0],
			Intr: a.Intr, Stop: stop, Member: a.Member}}
		s.bucket.init(d.cfg.Rate, time.Now())
		l := virtio.Loop{Stop: stop, Member: a.Member,
			Sources: []*virtio.Source{{Server: &s.srv, Turn: s.turn, Budget: QueueSize}}}
		l.Run()
	})
}

// Reset stops the I/O goroutine and waits for it (spec 2.4).
func (d *Device) Reset() { d.io.Stop() }

// getrandom reads the host's entropy (getrandom(2), which does not block
// once the host's pool is initialised, long before govm runs).
type getrandom struct{}

func (getrandom) Read(p []byte) (int, error) {
	for {
		n, err := unix.Getrandom(p, 0)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}
