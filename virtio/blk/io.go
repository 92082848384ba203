package virtioblk

import (
	"errors"
	"fmt"
	"io"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// worker is the state of the device's single I/O goroutine, a virtio.Loop
// with one source: the request queue, served by handle. It serves requests
// one after another, straight between the backend and guest memory; the
// Loop owns notifications and the interrupt decision. Requests run one at a time:
// a pool of I/O goroutines executing a batch's requests in parallel
// (completions in any order, one interrupt per batch, FLUSH held behind
// earlier writes) needs cores to spare, and on a 2-core host, where the
// guest's vCPU spins on one core while it waits, it gains nothing, so the
// simpler serial loop stays (bench/README.md, "Design measurements", says
// where the pool is, for hosts with cores to spare).
type worker struct {
	dev *Device
	mem *guestmem.Memory
	srv virtio.Server
	// bufs is reused for the data buffer lists of requests, so a
	// request allocates no list of its own.
	bufs [][]byte
	// hdr receives each request's header: a local array would escape
	// through the io.Reader it is read with, one allocation per request.
	hdr [HeaderLen]byte
}

// decisionBatch is the Server's Batch for the negotiated features.
//
// With EVENT_IDX, an interrupt decision after every request (1): the
// driver's used_event names the completion it waits for (spec 2.7.7.1),
// and telling it at that completion, while later requests of the turn still
// run, lets its interrupt handler (slow where it is emulated) and its
// refill of the ring overlap the device's reads. Deciding once per turn,
// the device would finish the whole batch, then interrupt and idle until
// the driver resubmitted and kicked, a kick per batch; deciding per
// request, the driver refills a device still at work, which needs no kick.
// A decision costs a fence and a load, and interrupts at most once per
// re-arm of used_event.
//
// Without EVENT_IDX, once per turn (0): VRING_AVAIL_F_NO_INTERRUPT is one
// flag, still clear from the driver's last wait until its completion
// handler sets it again, so every completion decided in between would
// interrupt anew: more interrupts, and no gain.
//
// The measurements behind both choices are in bench/README.md ("Design
// measurements").
func decisionBatch(features uint64) int {
	if features&virtio.Bit(virtio.FeatureRingEventIdx) != 0 {
		return 1
	}
	return 0
}

// handle parses and executes one request, writes its status byte last, and
// returns the used length for AddUsed.
func (w *worker) handle(c *virtio.Chain) (uint32, error) {
	n, _ := io.ReadFull(c.Reader(), w.hdr[:])
	r, err := parseRequest(w.hdr[:n], c.ReadableLen(), c.WritableLen(), w.dev.capacity)
	if err != nil {
		// err wraps ErrBadRequest and says what was wrong.
		return 0, &virtio.GuestError{Queue: w.srv.Queue.Index, Head: c.Head, HeadValid: true, Err: err}
	}
	status, data := r.status, uint64(0)
	if status == StatusOK {
		status, data = w.execute(c, r)
	}
	// Cannot fail: parseRequest checked there is a writable byte.
	c.WriteAtEnd([]byte{status})
	return usedLen(c, data), nil
}

// usedLen is the used length of a finished request (spec 2.7.8.2: bytes
// written into the buffer): what went through the chain's Writer plus the
// status byte (Written), plus data bytes read straight into guest memory,
// never more than the writable part.
func usedLen(c *virtio.Chain, data uint64) uint32 {
	return uint32(min(uint64(c.Written())+data, c.WritableLen()))
}

// errShortChain means the chain's segments hold fewer data bytes than the
// parsed request says. parseRequest derived the request length from the
// same chain, so this is a device bug, not a guest one; the request fails
// with IOERR rather than touching memory outside the chain.
var errShortChain = errors.New("virtioblk: chain shorter than its request")

// dataBufs appends to dst the host views of a request's data area, straight
// into guest RAM (no bounce buffer): n bytes of the chain's writable part
// (writable) or readable part, starting skip bytes into that part. The
// addresses and lengths come only from the segments the queue core
// validated in Pop; they are re-sliced through guestmem, which bounds-checks
// them again, and the result never extends past n bytes, so an IN request
// (n = writable length - 1) cannot reach its own status byte and nothing
// past the chain is ever touched. Empty pieces are left out; n == 0 yields
// no buffers and no error.
func dataBufs(mem *guestmem.Memory, segs []virtio.Segment, writable bool, skip, n uint64, dst [][]byte) ([][]byte, error) {
	for _, s := range segs {
		if n == 0 {
			break
		}
		if s.Write != writable {
			continue
		}
		l := uint64(s.Len)
		if skip >= l {
			skip -= l
			continue
		}
		k := min(l-skip, n)
		b, err := mem.Slice(s.Addr+skip, k)
		if err != nil {
			return dst, fmt.Errorf("virtioblk: segment %#x+%#x: %w", s.Addr, s.Len, err)
		}
		dst = append(dst, b)
		skip, n = 0, n-k
	}
	if n != 0 {
		return dst, errShortChain
	}
	return dst, nil
}

// execute does the backend I/O of a valid request and returns its status
// and the data bytes it put into guest memory directly. Host I/O errors
// become IOERR for the guest; they do not stop the device.
func (w *worker) execute(c *virtio.Chain, r request) (uint8, uint64) {
	switch r.typ {
	case TypeIn:
		return w.read(c, r)
	case TypeOut:
		if w.dev.cfg.ReadOnly {
			return StatusIOErr, 0
		}
		return w.write(c, r), 0
	case TypeFlush:
		if w.dev.cfg.ReadOnly {
			return StatusOK, 0 // nothing can be dirty
		}
		if !w.dev.herr.flush(w.dev.backend.Sync) {
			return StatusIOErr, 0
		}
		return StatusOK, 0
	case TypeGetID:
		// Spec 5.2.6: 20 bytes, NUL-padded (not terminated when 20
		// long); a shorter buffer gets what fits.
		var id [IDLen]byte
		copy(id[:], w.dev.cfg.Serial)
		k := min(uint64(IDLen), c.WritableLen()-1)
		c.Writer().Write(id[:k])
		return StatusOK, 0
	}
	return StatusUnsupp, 0
}

// read fills the request's data area with [r.off, r.off+r.n) of the disk
// and returns the status and the number of data bytes delivered into the
// guest's buffers (for the used length).
func (w *worker) read(c *virtio.Chain, r request) (uint8, uint64) {
	bufs, err := dataBufs(w.mem, c.Segments(), true, 0, r.n, w.bufs[:0])
	w.bufs = bufs[:0]
	if err != nil {
		return StatusIOErr, 0
	}
	got, err := readAtv(w.dev.backend, bufs, int64(r.off))
	if err == io.EOF {
		// The image ended inside the request (it shrank under us, or
		// a backend smaller than it said): like a sparse hole, what is
		// not there reads as zeroes (QEMU's raw driver does the same).
		zeroFrom(bufs, got)
		return StatusOK, r.n
	}
	if err != nil {
		w.dev.herr.ioFailed(false, r.off, r.n, err)
		return StatusIOErr, uint64(got)
	}
	return StatusOK, r.n
}

// write stores the request's data area (after the header) at
// [r.off, r.off+r.n) of the disk.
func (w *worker) write(c *virtio.Chain, r request) uint8 {
	bufs, err := dataBufs(w.mem, c.Segments(), false, HeaderLen, r.n, w.bufs[:0])
	w.bufs = bufs[:0]
	if err != nil {
		return StatusIOErr
	}
	if _, err := writeAtv(w.dev.backend, bufs, int64(r.off)); err != nil {
		w.dev.herr.ioFailed(true, r.off, r.n, err)
		return StatusIOErr
	}
	return StatusOK
}

// readAtv reads into bufs in order from off. A VectoredBackend gets one
// call (preadv for File); any other backend gets one ReadAt per buffer,
// still straight into guest memory. It returns the bytes read and io.EOF
// when the backend ended first, with bufs filled up to that point.
func readAtv(b Backend, bufs [][]byte, off int64) (int, error) {
	if vb, ok := b.(VectoredBackend); ok {
		return vb.ReadAtv(bufs, off)
	}
	total := 0
	for _, p := range bufs {
		n, err := b.ReadAt(p, off)
		total += n
		off += int64(n)
		if n < len(p) {
			// io.ReaderAt: a short count comes with an error; a
			// backend that breaks that rule is taken at its word
			// that nothing more is there.
			if err == nil || err == io.EOF {
				return total, io.EOF
			}
			return total, err
		}
	}
	return total, nil
}

// writeAtv writes bufs in order at off: one call for a VectoredBackend
// (pwritev for File), one WriteAt per buffer otherwise.
func writeAtv(b Backend, bufs [][]byte, off int64) (int, error) {
	if vb, ok := b.(VectoredBackend); ok {
		return vb.WriteAtv(bufs, off)
	}
	total := 0
	for _, p := range bufs {
		n, err := b.WriteAt(p, off)
		total += n
		off += int64(n)
		if err != nil {
			return total, err
		}
		if n < len(p) {
			return total, io.ErrShortWrite
		}
	}
	return total, nil
}

// zeroFrom clears bufs from byte offset skip (counted across all of them)
// to their end.
func zeroFrom(bufs [][]byte, skip int) {
	for _, b := range bufs {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		clear(b[skip:])
		skip = 0
	}
}
