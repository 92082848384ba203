package virtioblk

import (
	"errors"
	"io"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// ioChunk is the bounce buffer size between guest buffers and the backend.
const ioChunk = 128 << 10

// worker is the device's single I/O goroutine and its state.
type worker struct {
	dev  *Device
	mem  *guestmem.Memory
	q    *virtio.Queue
	kick <-chan struct{}
	intr virtio.Interrupt
	stop <-chan struct{}
	buf  []byte
}

// run serves the queue until stop is closed. Buffers the driver published
// before DRIVER_OK are served by the first pass, without waiting for a
// kick. On guest misbehaviour it reports DeviceError and serves no more
// requests until Reset.
func (w *worker) run(done chan<- struct{}) {
	defer close(done)
	for {
		if err := w.process(); err != nil {
			if !errors.Is(err, errStopped) {
				w.intr.DeviceError(err)
				<-w.stop
			}
			return
		}
		select {
		case <-w.kick:
		case <-w.stop:
			return
		}
	}
}

var errStopped = errors.New("virtioblk: stopped")

// process is the disable / drain / enable / re-check loop of the queue core
// (see virtio.Queue.EnableNotify): it returns only when EnableNotify has
// published that we want kicks and the ring was still empty after it.
func (w *worker) process() error {
	for {
		if err := w.q.DisableNotify(w.mem); err != nil {
			return err
		}
		derr := w.drain()
		// Interrupt for whatever completed, even when the drain stopped
		// on a bad chain: those requests are done.
		if err := w.signal(); err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
		more, err := w.q.EnableNotify(w.mem)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

func (w *worker) signal() error {
	need, err := w.q.NeedsInterrupt(w.mem)
	if err != nil || !need {
		return err
	}
	return w.intr.SignalUsed(w.q.Index)
}

// drain serves every available request.
func (w *worker) drain() error {
	for {
		select {
		case <-w.stop:
			return errStopped
		default:
		}
		c, err := w.q.Pop(w.mem)
		if err != nil || c == nil {
			return err
		}
		if err := w.handle(c); err != nil {
			return err
		}
		if err := w.q.AddUsed(w.mem, c.Head, c.Written()); err != nil {
			return err
		}
	}
}

// handle parses and executes one request and writes its status byte last.
func (w *worker) handle(c *virtio.Chain) error {
	var hdr [HeaderLen]byte
	n, _ := io.ReadFull(c.Reader(), hdr[:])
	r, err := parseRequest(hdr[:n], c.ReadableLen(), c.WritableLen(), w.dev.capacity)
	if err != nil {
		return &virtio.GuestError{Queue: w.q.Index, Head: c.Head, HeadValid: true,
			Err: ErrBadRequest, Reason: err.Error()}
	}
	status := r.status
	if status == StatusOK {
		status = w.execute(c, r)
	}
	// Cannot fail: parseRequest checked there is a writable byte.
	return c.WriteAtEnd([]byte{status})
}

// execute does the backend I/O of a valid request and returns its status.
// Host I/O errors become IOERR for the guest; they do not stop the device.
func (w *worker) execute(c *virtio.Chain, r request) uint8 {
	switch r.typ {
	case TypeIn:
		return w.read(c, r)
	case TypeOut:
		if w.dev.cfg.ReadOnly {
			return StatusIOErr
		}
		return w.write(c, r)
	case TypeFlush:
		if w.dev.cfg.ReadOnly {
			return StatusOK // nothing can be dirty
		}
		if w.dev.backend.Sync() != nil {
			return StatusIOErr
		}
		return StatusOK
	case TypeGetID:
		// Spec 5.2.6: 20 bytes, NUL-padded (not terminated when 20
		// long); a shorter buffer gets what fits.
		var id [IDLen]byte
		copy(id[:], w.dev.cfg.Serial)
		k := min(uint64(IDLen), c.WritableLen()-1)
		c.Writer().Write(id[:k])
		return StatusOK
	}
	return StatusUnsupp
}

// read copies [r.off, r.off+r.n) of the disk into the chain's data part.
func (w *worker) read(c *virtio.Chain, r request) uint8 {
	out := c.Writer()
	for done := uint64(0); done < r.n; {
		k := min(uint64(len(w.buf)), r.n-done)
		got, err := w.dev.backend.ReadAt(w.buf[:k], int64(r.off+done))
		if uint64(got) != k || (err != nil && err != io.EOF) {
			return StatusIOErr
		}
		if _, err := out.Write(w.buf[:k]); err != nil {
			return StatusIOErr
		}
		done += k
	}
	return StatusOK
}

// write copies the chain's data part to [r.off, r.off+r.n) of the disk.
func (w *worker) write(c *virtio.Chain, r request) uint8 {
	in := c.Reader() // positioned after the header
	for done := uint64(0); done < r.n; {
		k := min(uint64(len(w.buf)), r.n-done)
		if _, err := io.ReadFull(in, w.buf[:k]); err != nil {
			return StatusIOErr
		}
		if _, err := w.dev.backend.WriteAt(w.buf[:k], int64(r.off+done)); err != nil {
			return StatusIOErr
		}
		done += k
	}
	return StatusOK
}
