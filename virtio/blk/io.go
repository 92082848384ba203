package virtioblk

import (
	"errors"
	"io"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// worker is the device's queue goroutine and its state. It alone touches
// the queue (Pop, AddUsed, NeedsInterrupt, notification suppression): the
// queue core is single-threaded. With a pool (pool.go), requests of a
// batch are executed by the pool's goroutines meanwhile and come back to
// it to be completed, in any order (spec 2.7.8: used buffers need not
// come back in the order they were made available).
type worker struct {
	dev  *Device
	mem  *guestmem.Memory
	q    *virtio.Queue
	kick <-chan struct{}
	intr virtio.Interrupt
	stop <-chan struct{}
	x    executor // for requests the queue goroutine executes itself

	pool   *pool
	flight flight
}

// run serves the queue until stop is closed. Buffers the driver published
// before DRIVER_OK are served by the first pass, without waiting for a
// kick. On guest misbehaviour it reports DeviceError and serves no more
// requests until Reset. It returns only after the pool has stopped, so
// once done is closed nothing touches guest memory.
func (w *worker) run(done chan<- struct{}) {
	defer close(done)
	if w.pool != nil {
		w.pool.start(w.stop)
		defer w.pool.shutdown()
	}
	if err := w.serve(); err != nil && !errors.Is(err, errStopped) {
		w.intr.DeviceError(err)
		<-w.stop
	}
}

var errStopped = errors.New("virtioblk: stopped")

// serve is the event loop: a kick means the ring may hold work, a finished
// request comes back from the pool to be completed.
func (w *worker) serve() error {
	poll := true
	for {
		if poll {
			if err := w.process(); err != nil {
				return err
			}
		}
		select {
		case <-w.kick:
			poll = true
		case j := <-w.poolDone():
			if err := w.completeReady(j); err != nil {
				return err
			}
			// At the in-flight cap the ring was left unread with
			// kicks off; now there is room again.
			poll = w.flight.capped
		case <-w.stop:
			return errStopped
		}
	}
}

// poolDone is the pool's completion channel, nil (never ready) without a
// pool.
func (w *worker) poolDone() <-chan *job {
	if w.pool == nil {
		return nil
	}
	return w.pool.done
}

// process is the disable / drain / enable / re-check loop of the queue core
// (see virtio.Queue.EnableNotify): it returns when EnableNotify has
// published that we want kicks and the ring was still empty after it, or,
// at the in-flight cap, with kicks still off (a completion calls it again).
func (w *worker) process() error {
	for {
		if err := w.q.DisableNotify(w.mem); err != nil {
			return err
		}
		derr := w.drain()
		if derr != nil {
			// Finish what was accepted before the bad chain: those
			// requests are valid and the driver waits for them.
			w.settle()
		}
		// Interrupt for whatever completed, even when the drain stopped
		// on a bad chain.
		if err := w.signalIfDue(); err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
		if w.flight.capped {
			return nil
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

// drain takes every available request (up to the in-flight cap) as one
// batch, starts the batch, and collects whatever has finished meanwhile.
func (w *worker) drain() error {
	b := &batch{}
	w.flight.capped = false
	var err error
	for {
		select {
		case <-w.stop:
			err = errStopped
		default:
		}
		if err != nil {
			break
		}
		if w.flight.n >= int(w.q.Size) {
			// A driver cannot have more than Size requests
			// outstanding; a hostile one that re-publishes heads in
			// flight is not served until some complete, which bounds
			// the memory it can make us hold.
			w.flight.capped = true
			break
		}
		var c *virtio.Chain
		c, err = w.q.Pop(w.mem)
		if err != nil || c == nil {
			break
		}
		if err = w.accept(c, b); err != nil {
			break
		}
	}
	if serr := w.startPending(); serr != nil && err == nil {
		err = serr
	}
	if rerr := w.reapReady(); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// accept parses one request. One that needs no backend I/O, or any
// request without a pool, is executed and completed right away; the
// others join the batch.
func (w *worker) accept(c *virtio.Chain, b *batch) error {
	var hdr [HeaderLen]byte
	n, _ := io.ReadFull(c.Reader(), hdr[:])
	r, err := parseRequest(hdr[:n], c.ReadableLen(), c.WritableLen(), w.dev.capacity)
	if err != nil {
		return &virtio.GuestError{Queue: w.q.Index, Head: c.Head, HeadValid: true,
			Err: ErrBadRequest, Reason: err.Error()}
	}
	j := &job{c: c, r: r, status: r.status, batch: b}
	b.left++
	w.flight.n++
	if j.status != StatusOK || w.pool == nil || !j.needsIO(w.dev.cfg.ReadOnly) {
		if j.status == StatusOK {
			j.status, j.data = w.x.execute(c, r)
		}
		return w.complete(j)
	}
	w.flight.add(j)
	return nil
}

// complete finishes one request on the queue goroutine: its status byte
// (written last, after the data), the used ring entry, and the batch
// bookkeeping that decides when to interrupt.
func (w *worker) complete(j *job) error {
	// Cannot fail: parseRequest checked there is a writable byte.
	j.c.WriteAtEnd([]byte{j.status})
	if err := w.q.AddUsed(w.mem, j.c.Head, usedLen(j.c, j.data)); err != nil {
		return err
	}
	w.flight.n--
	// One interrupt per batch: when the last request of a batch is
	// done, whatever else has been used meanwhile rides along.
	if j.batch.left--; j.batch.left == 0 {
		w.flight.signalDue = true
	}
	return nil
}

func (w *worker) signalIfDue() error {
	if !w.flight.signalDue {
		return nil
	}
	w.flight.signalDue = false
	need, err := w.q.NeedsInterrupt(w.mem)
	if err != nil || !need {
		return err
	}
	return w.intr.SignalUsed(w.q.Index)
}

// usedLen is the used length of a finished request (spec 2.7.8.2: bytes
// written into the buffer): what went through the chain's Writer plus the
// status byte (Written), plus data bytes read straight into guest memory,
// never more than the writable part.
func usedLen(c *virtio.Chain, data uint64) uint32 {
	return uint32(min(uint64(c.Written())+data, c.WritableLen()))
}
