package virtioblk

import (
	"errors"
	"io"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// worker is the device's single I/O goroutine and its state.
type worker struct {
	dev  *Device
	mem  *guestmem.Memory
	q    *virtio.Queue
	kick <-chan struct{}
	intr virtio.Interrupt
	stop <-chan struct{}
	x    executor
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
		used, err := w.handle(c)
		if err != nil {
			return err
		}
		if err := w.q.AddUsed(w.mem, c.Head, used); err != nil {
			return err
		}
	}
}

// handle parses and executes one request, writes its status byte last, and
// returns the used length for AddUsed.
func (w *worker) handle(c *virtio.Chain) (uint32, error) {
	var hdr [HeaderLen]byte
	n, _ := io.ReadFull(c.Reader(), hdr[:])
	r, err := parseRequest(hdr[:n], c.ReadableLen(), c.WritableLen(), w.dev.capacity)
	if err != nil {
		return 0, &virtio.GuestError{Queue: w.q.Index, Head: c.Head, HeadValid: true,
			Err: ErrBadRequest, Reason: err.Error()}
	}
	status, data := r.status, uint64(0)
	if status == StatusOK {
		status, data = w.x.execute(c, r)
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
