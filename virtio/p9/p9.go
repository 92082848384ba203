// Package virtio9p is the 9P transport device (virtio device ID 9, as
// QEMU's virtio-9p and Linux's net/9p/trans_virtio.c define it): one
// request queue whose chains each carry a 9P2000.L T-message (the
// device-readable part) and room for its R-message (the device-writable
// part), and a mount tag in config space. The messages are served by
// hugelgupf/p9's server over a share (internal/sharefs), through an
// in-process connection: this package only moves and checks messages.
package virtio9p

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/hugelgupf/p9/p9"
)

// FeatureMountTag is VIRTIO_9P_MOUNT_TAG: config space holds the tag.
const FeatureMountTag = 0

// QueueSize is the request queue's size (Linux's VIRTQUEUE_NUM).
const QueueSize = 128

// MaxTag is the longest mount tag (Linux reads tag_len bytes; QEMU caps it
// at 255 and Linux's mount uses it as the device name).
const MaxTag = 255

// maxMessage bounds a T-message the device reads: Linux's virtio transport
// caps msize at (VIRTQUEUE_NUM - 3) pages, 500 KiB; a larger size field is
// a broken driver, not a bigger buffer to allocate.
const maxMessage = 1 << 20

// ErrBadRequest: a chain that does not hold one well-formed message, or
// has no room for the answer.
var ErrBadRequest = errors.New("virtio9p: malformed request")

// Device is a virtio-9p device serving one share under a mount tag.
type Device struct {
	tag    string
	attach p9.Attacher
	io     virtio.Worker
	sess   session // the I/O goroutine's while one runs

	mu        sync.Mutex
	requests  uint64
	bytesIn   uint64 // T-message bytes
	bytesOut  uint64 // R-message bytes
	reclaimed uint64 // fids clunked by the device after resets
	abandoned uint64 // connections left behind out of step
}

var _ virtio.Device = (*Device)(nil)

// New returns a device serving attach under tag.
func New(tag string, attach p9.Attacher) (*Device, error) {
	if tag == "" || len(tag) > MaxTag {
		return nil, fmt.Errorf("virtio9p: mount tag %q: want 1 to %d bytes", tag, MaxTag)
	}
	return &Device{tag: tag, attach: attach}, nil
}

// Type is virtio.Device9P.
func (d *Device) Type() virtio.DeviceType { return virtio.Device9P }

// Features: the mount tag and the ring features.
func (d *Device) Features() uint64 { return virtio.Bit(FeatureMountTag) | virtio.RingFeatures }

// QueueMaxSizes is the one request queue.
func (d *Device) QueueMaxSizes() []uint16 { return []uint16{QueueSize} }

// ConfigSize is struct virtio_9p_config: le16 tag_len, then the tag.
func (d *Device) ConfigSize() int { return 2 + len(d.tag) }

// ReadConfig reads the config space; bytes past it read as zero.
func (d *Device) ReadConfig(off uint64, data []byte) {
	cfg := binary.LittleEndian.AppendUint16(nil, uint16(len(d.tag)))
	cfg = append(cfg, d.tag...)
	clear(data)
	if off < uint64(len(cfg)) {
		copy(data, cfg[off:])
	}
}

// WriteConfig ignores writes: the tag is the host's.
func (d *Device) WriteConfig(off uint64, data []byte) {}

// Activate starts the I/O goroutine, over the device's 9P connection
// (session.go: it outlives resets; the fids of the last activation were
// clunked when it ended).
func (d *Device) Activate(a virtio.Activation) error {
	if len(a.Queues) != 1 || len(a.Bells) != 1 || a.Mem == nil || a.Intr == nil {
		return fmt.Errorf("virtio9p: activation with %d queues, want 1", len(a.Queues))
	}
	return d.io.Start(a.Bells[:1], func(stop <-chan struct{}) {
		conn := d.sess.open(d.attach)
		// A request in flight when the device is reset gets resetGrace
		// for its answer: handle is blocked reading it meanwhile.
		quit, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-stop:
				conn.SetDeadline(time.Now().Add(resetGrace))
			case <-quit:
			}
		}()
		s := &server{dev: d, conn: conn, srv: virtio.Server{Mem: a.Mem, Queue: a.Queues[0], Bell: a.Bells[0],
			Intr: a.Intr, Stop: stop, Member: a.Member}}
		l := virtio.Loop{Stop: stop, Member: a.Member,
			Sources: []*virtio.Source{{Server: &s.srv, Handle: s.handle, Prompts: true}}}
		l.Run()
		close(quit)
		<-watched
		n := d.sess.clunkAll()
		d.mu.Lock()
		d.reclaimed += uint64(n)
		if d.sess.broken {
			d.abandoned++
		}
		d.mu.Unlock()
	})
}

// Reset stops the I/O goroutine and waits for it (spec 2.4).
func (d *Device) Reset() { d.io.Stop() }

// Stats are the device's message counts.
type Stats struct {
	Requests uint64 `json:"requests"`
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
	// FidsReclaimed counts the fids the device clunked for a driver
	// that reset its device while holding them (session.go).
	FidsReclaimed uint64 `json:"fids_reclaimed"`
	// ConnsAbandoned counts 9P connections left behind out of step
	// (session.go): a reset cut off a request the server did not answer
	// in time, or the clunks after it did not finish in time.
	ConnsAbandoned uint64 `json:"conns_abandoned"`
}

// String is one line for logs.
func (s Stats) String() string {
	return fmt.Sprintf("requests=%d bytes_in=%d bytes_out=%d fids_reclaimed=%d conns_abandoned=%d",
		s.Requests, s.BytesIn, s.BytesOut, s.FidsReclaimed, s.ConnsAbandoned)
}

// Tag is the mount tag.
func (d *Device) Tag() string { return d.tag }

// Stats returns the counts since New.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Stats{Requests: d.requests, BytesIn: d.bytesIn, BytesOut: d.bytesOut,
		FidsReclaimed: d.reclaimed, ConnsAbandoned: d.abandoned}
}

var _ virtio.QueueReporter = (*Device)(nil)

// QueueName is "requests".
func (d *Device) QueueName(int) string { return "requests" }

// QueueTraffic is the 9P bytes both ways.
func (d *Device) QueueTraffic(int) (uint64, map[string]uint64, bool) {
	s := d.Stats()
	return s.BytesIn + s.BytesOut, nil, true
}

// server is the I/O goroutine's state.
type server struct {
	dev  *Device
	conn net.Conn
	srv  virtio.Server
	buf  []byte
}

// handle serves one chain: it reads the T-message, hands it to the 9P
// server, waits for the R-message and writes it into the chain's writable
// part, in order across its buffers (Linux puts the answer's header in the
// first and, for zero-copy reads, the data in the user's pages after it).
// One request at a time, so answers come in order.
func (s *server) handle(c *virtio.Chain) (uint32, error) {
	bad := func(format string, a ...any) error {
		return &virtio.GuestError{Queue: 0, Head: c.Head, HeadValid: true,
			Err: fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, a...)...)}
	}
	var hdr [7]byte
	r := c.Reader()
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, bad("%d readable bytes, shorter than a 9P header", c.ReadableLen())
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size < 7 || uint64(size) > c.ReadableLen() || size > maxMessage {
		return 0, bad("message size %d with %d readable bytes", size, c.ReadableLen())
	}
	if cap(s.buf) < int(size) {
		s.buf = make([]byte, size)
	}
	msg := s.buf[:size]
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[7:]); err != nil {
		return 0, bad("message body: %v", err)
	}
	if ecode, ok := noXattrs[msg[4]]; ok {
		// The share has no extended attributes, and must say so
		// with the errno getxattr(2) gives (ENODATA; creating one:
		// EOPNOTSUPP): overlayfs over a share (govm run -- CMD) asks
		// for its own and fails on anything else. The server would
		// answer EINVAL for any error of the file's (hugelgupf/p9's
		// txattrwalk), so the device answers these itself.
		return s.answer(c, lerror(msg, ecode))
	}
	if !s.dev.sess.admit(msg) {
		// Larger than the msize the guest negotiated: the server would
		// end the connection (session.go), so the device refuses it.
		return s.answer(c, lerror(msg, uint32(syscall.EMSGSIZE)))
	}
	// The answer overwrites msg in s.buf: keep what track reads.
	var head [fidsEnd]byte
	t := head[:copy(head[:], msg)]
	if _, err := s.conn.Write(msg); err != nil {
		s.dev.sess.broken = true
		return 0, fmt.Errorf("virtio9p: to the 9P server: %w", err)
	}
	// The answer: size, then the rest.
	if _, err := io.ReadFull(s.conn, hdr[:]); err != nil {
		s.dev.sess.broken = true
		return 0, fmt.Errorf("virtio9p: from the 9P server: %w", err)
	}
	rsize := binary.LittleEndian.Uint32(hdr[:])
	if rsize < 7 {
		s.dev.sess.broken = true
		return 0, fmt.Errorf("virtio9p: the 9P server answered %d bytes", rsize)
	}
	if rsize > maxMessage+7 {
		// The server answers up to its own limit, 4 MiB (a Tread or
		// Treaddir count beyond any buffer Linux posts): the answer
		// is read, to keep the connection in step, and refused.
		if _, err := io.CopyN(io.Discard, s.conn, int64(rsize-7)); err != nil {
			s.dev.sess.broken = true
			return 0, fmt.Errorf("virtio9p: from the 9P server: %w", err)
		}
		return s.answer(c, lerror(t, uint32(syscall.ENOBUFS)))
	}
	if cap(s.buf) < int(rsize) {
		s.buf = make([]byte, rsize)
	}
	resp := s.buf[:rsize]
	copy(resp, hdr[:])
	if _, err := io.ReadFull(s.conn, resp[7:]); err != nil {
		s.dev.sess.broken = true
		return 0, fmt.Errorf("virtio9p: from the 9P server: %w", err)
	}
	s.dev.sess.track(t, resp)
	s.dev.mu.Lock()
	s.dev.bytesIn += uint64(size)
	s.dev.mu.Unlock()
	return s.answer(c, resp)
}

// answer writes an R-message into c's writable part and counts it.
func (s *server) answer(c *virtio.Chain, resp []byte) (uint32, error) {
	if uint64(len(resp)) > c.WritableLen() {
		return 0, &virtio.GuestError{Queue: 0, Head: c.Head, HeadValid: true,
			Err: fmt.Errorf("%w: an answer of %d bytes and %d writable", ErrBadRequest, len(resp), c.WritableLen())}
	}
	if _, err := c.Writer().Write(resp); err != nil {
		return 0, fmt.Errorf("virtio9p: %w", err)
	}
	s.dev.mu.Lock()
	s.dev.requests++
	s.dev.bytesOut += uint64(len(resp))
	s.dev.mu.Unlock()
	return uint32(len(resp)), nil
}

// noXattrs are the 9P2000.L messages the device answers itself, with the
// errno: Txattrwalk (30), ENODATA; Txattrcreate (32), EOPNOTSUPP.
var noXattrs = map[byte]uint32{30: 61, 32: 95}

// lerror is an Rlerror (type 7) answering t with ecode.
func lerror(t []byte, ecode uint32) []byte {
	r := binary.LittleEndian.AppendUint32(nil, 11)
	r = append(r, 7, t[5], t[6])
	return binary.LittleEndian.AppendUint32(r, ecode)
}
