// Package virtioblk is the virtio block device (virtio spec 5.2) over a
// file-like backend. Request parsing (request.go) is kept apart from the
// I/O (io.go) so the guest-controlled part can be fuzzed on its own.
package virtioblk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/govm/govm/virtio"
)

// Feature bits (spec 5.2.3).
const (
	FeatureSizeMax  = 1 // size_max holds the largest segment
	FeatureSegMax   = 2 // seg_max holds the most segments per request
	FeatureGeometry = 4 // geometry is valid
	FeatureRO       = 5 // the disk is read-only
	FeatureBlkSize  = 6 // blk_size is valid
	FeatureFlush    = 9 // VIRTIO_BLK_T_FLUSH is supported
)

const (
	// SectorSize is the unit of the request header's sector field and of
	// capacity, whatever blk_size says (spec 5.2.6).
	SectorSize = 512
	// QueueSize is the size of the single request queue.
	QueueSize = 128
	// SizeMax is the size_max advertised: the largest single segment.
	SizeMax = 1 << 20
	// SegMax is seg_max: Linux adds a header and a status descriptor to
	// the data segments, so the whole chain still fits a direct ring.
	SegMax = QueueSize - 2
	// IDLen is the length of the GET_ID answer (spec 5.2.6:
	// VIRTIO_BLK_ID_BYTES).
	IDLen = 20
)

// Config-space layout (spec 5.2.4, struct virtio_blk_config).
const (
	cfgCapacity = 0  // le64, in 512-byte sectors
	cfgSizeMax  = 8  // le32
	cfgSegMax   = 12 // le32
	cfgGeometry = 16 // le16 cylinders, u8 heads, u8 sectors
	cfgBlkSize  = 20 // le32
	cfgLen      = 24
)

var (
	// ErrNoBackend is returned by New without a backend.
	ErrNoBackend = errors.New("virtioblk: no backend")
	// ErrBadActivation is returned when the transport hands over the
	// wrong number of queues or doorbells (or no memory or interrupt).
	ErrBadActivation = errors.New("virtioblk: activation needs 1 queue and 1 doorbell")
	// ErrBadRequest is the kind of a *virtio.GuestError for a request
	// whose framing is broken (no status byte, short header).
	ErrBadRequest = errors.New("virtioblk: malformed request")
)

// Backend is the disk: an *os.File fits through File.
type Backend interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Size() (int64, error)
}

// VectoredBackend is a Backend that moves a request's data between the disk
// and several buffers (the guest's own, scattered over guest RAM) in one
// call, like preadv/pwritev. The device uses it when the backend has it;
// File does. The semantics are those of io.ReaderAt / io.WriterAt over the
// concatenation of bufs: a count short of the total comes with an error,
// io.EOF when a read ran past the end of the disk.
type VectoredBackend interface {
	Backend
	ReadAtv(bufs [][]byte, off int64) (int, error)
	WriteAtv(bufs [][]byte, off int64) (int, error)
}

// Config is the device configuration chosen by the user.
type Config struct {
	// ReadOnly offers VIRTIO_BLK_F_RO and fails writes with IOERR.
	ReadOnly bool
	// Serial is the GET_ID answer (at most 20 bytes).
	Serial string
	// Log (may be nil) receives host I/O error lines, rate-limited.
	Log func(format string, args ...any)
	// PollMax bounds the request queue's adaptive busy-poll window
	// (virtio.Poller); 0: the I/O goroutine sleeps as soon as the ring
	// is empty.
	PollMax time.Duration
	// Withhold lists feature bits not to offer (govm run --disk
	// ...,event-idx=off,indirect=off), as QEMU's device properties do.
	Withhold uint64
}

// Validate checks cfg against the device's limits: the serial is the
// GET_ID answer, at most IDLen bytes (spec 5.2.6).
func (cfg Config) Validate() error {
	if len(cfg.Serial) > IDLen {
		return fmt.Errorf("virtioblk: serial %q is longer than %d bytes (the GET_ID answer)", cfg.Serial, IDLen)
	}
	return nil
}

// Device is a virtio-blk device with one request queue served by one I/O
// goroutine.
type Device struct {
	backend  Backend
	cfg      Config
	capacity uint64 // sectors
	config   [cfgLen]byte
	herr     hostErrors // hosterr.go

	io virtio.Worker // the request queue's I/O goroutine
}

var _ virtio.Device = (*Device)(nil)

// New returns a device over backend. The capacity is the backend's size in
// whole 512-byte sectors, read once: a disk does not change size under a
// running guest.
func New(backend Backend, cfg Config) (*Device, error) {
	if backend == nil {
		return nil, ErrNoBackend
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	size, err := backend.Size()
	if err != nil {
		return nil, fmt.Errorf("virtioblk: backend size: %w", err)
	}
	if size < SectorSize {
		return nil, fmt.Errorf("virtioblk: disk of %d bytes is smaller than one sector", size)
	}
	d := &Device{backend: backend, cfg: cfg, capacity: uint64(size) / SectorSize}
	d.herr.init(cfg.Log)
	d.fillConfig()
	return d, nil
}

// fillConfig lays out struct virtio_blk_config (spec 5.2.4).
func (d *Device) fillConfig() {
	le := binary.LittleEndian
	le.PutUint64(d.config[cfgCapacity:], d.capacity)
	le.PutUint32(d.config[cfgSizeMax:], SizeMax)
	le.PutUint32(d.config[cfgSegMax:], SegMax)
	// A conventional CHS geometry (16 heads, 63 sectors per track),
	// only informational for Linux.
	cyl := d.capacity / (16 * 63)
	if cyl > 0xffff {
		cyl = 0xffff
	}
	le.PutUint16(d.config[cfgGeometry:], uint16(cyl))
	d.config[cfgGeometry+2] = 16
	d.config[cfgGeometry+3] = 63
	le.PutUint32(d.config[cfgBlkSize:], SectorSize)
}

// Capacity returns the disk size in 512-byte sectors.
func (d *Device) Capacity() uint64 { return d.capacity }

// Type returns virtio.DeviceBlk.
func (d *Device) Type() virtio.DeviceType { return virtio.DeviceBlk }

// Features returns the offered bits: the block features of spec 5.2.3 plus
// the ring features of the queue core. GET_ID has no feature bit in legacy
// virtio; Linux simply tries it.
func (d *Device) Features() uint64 {
	f := virtio.Bit(FeatureSizeMax) | virtio.Bit(FeatureSegMax) | virtio.Bit(FeatureGeometry) |
		virtio.Bit(FeatureBlkSize) | virtio.Bit(FeatureFlush) | virtio.RingFeatures
	if d.cfg.ReadOnly {
		f |= virtio.Bit(FeatureRO)
	}
	return f &^ d.cfg.Withhold
}

// QueueMaxSizes returns the one request queue (spec 5.2.2).
func (d *Device) QueueMaxSizes() []uint16 { return []uint16{QueueSize} }

// ReadConfig reads struct virtio_blk_config; bytes past it read as zero.
func (d *Device) ReadConfig(off uint64, data []byte) {
	for i := range data {
		data[i] = 0
		if o := off + uint64(i); o >= off && o < cfgLen {
			data[i] = d.config[o]
		}
	}
}

// WriteConfig ignores writes: the only writable field (writeback, with
// CONFIG_WCE) is not offered.
func (d *Device) WriteConfig(off uint64, data []byte) {}

// Activate starts the I/O goroutine (spec 3.1.1: the device is live after
// DRIVER_OK).
func (d *Device) Activate(a virtio.Activation) error {
	if len(a.Queues) != 1 || len(a.Bells) != 1 || a.Mem == nil || a.Intr == nil {
		return ErrBadActivation
	}
	return d.io.Start(a.Bells[:1], func(stop <-chan struct{}) {
		w := &worker{dev: d, mem: a.Mem, srv: virtio.Server{Mem: a.Mem, Queue: a.Queues[0],
			Bell: a.Bells[0], Intr: a.Intr, Stop: stop, Batch: decisionBatch(a.Features),
			Member: a.Member}}
		// The driver answers a completion with its next request:
		// polling for it may pay (Prompts).
		l := virtio.Loop{Stop: stop, Member: a.Member, Poll: virtio.Poller{Max: d.cfg.PollMax},
			Sources: []*virtio.Source{{Server: &w.srv, Handle: w.handle, Prompts: true}}}
		l.Run()
	})
}

// Reset stops the I/O goroutine and waits for it: when Reset returns the
// device touches neither guest memory nor the queue (spec 2.4).
func (d *Device) Reset() { d.io.Stop() }

var _ virtio.QueueReporter = (*Device)(nil)

// QueueName is "requests", the one request queue (spec 5.2.2: requestq).
func (d *Device) QueueName(int) string { return "requests" }

// QueueTraffic is not ok: the queue core's used lengths are the traffic.
func (d *Device) QueueTraffic(int) (uint64, map[string]uint64, bool) { return 0, nil, false }
