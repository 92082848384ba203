package virtionet

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/govm/govm/tap"
	"github.com/govm/govm/virtio"
)

// rx moves frames from the backend into the driver's receive buffers
// (spec 5.1.6.3, 5.1.6.4).
//
// Back-pressure: the backend is read only while at least one receive chain
// is in hand, and a frame that was read is kept until enough chains arrive
// to hold it: it is never dropped for lack of buffers. While it has no
// buffers the goroutine does not read at all, so frames queue in the tap
// (and the kernel drops at its own txqueuelen, as for any slow NIC).
//
// Wakeups: with buffers in hand it waits on the backend (WaitReadable);
// without, it waits for a kick on queue 0 after EnableNotify and a
// re-check. It never waits on both, so no polling and no lost wakeup. It
// signals the interrupt before every wait, and every batchMax frames.
type rx struct {
	vq
	be       Backend
	mrg      bool
	hdr      int
	buf      []byte          // read buffer: header + largest frame
	iov      [1][]byte       // {buf}, kept so a read does not allocate
	frame    []byte          // a frame read but not yet delivered
	held     []*virtio.Chain // chains popped and not yet used
	heldRoom uint64          // their total writable length
}

func newRX(d *Device, a virtio.Activation, hdr int) *rx {
	r := &rx{
		vq:  newVQ(d, a, RXQueue, &d.stats.rx),
		be:  d.be,
		mrg: a.Features&virtio.Bit(FeatureMrgRxBuf) != 0,
		hdr: hdr,
		// One byte more than the largest legal frame, so a read that
		// fills the buffer is known to be oversize (a short buffer
		// truncates silently).
		buf: make([]byte, hdrLenMrg+maxGSOFrame+1),
	}
	r.iov[0] = r.buf
	return r
}

func (r *rx) run() {
	if err := r.loop(); err != nil {
		r.fail(err)
	}
}

func (r *rx) loop() error {
	for !r.Stopped() {
		if len(r.held) == 0 {
			if ok, err := r.pop(); err != nil {
				return err
			} else if !ok {
				if ok, err := r.waitBuffers(); !ok || err != nil {
					return err
				}
				continue
			}
		}
		if r.frame == nil {
			if ok, err := r.read(); !ok || err != nil {
				return err
			}
			continue
		}
		done, err := r.place()
		if err != nil {
			return err
		}
		if !done {
			if ok, err := r.waitBuffers(); !ok || err != nil {
				return err
			}
		}
	}
	return nil
}

// pop takes one more receive chain off the ring.
func (r *rx) pop() (bool, error) {
	c, err := r.Queue.Pop(r.Mem)
	if err != nil || c == nil {
		return false, err
	}
	r.c.chains.Add(1)
	r.held = append(r.held, c)
	r.heldRoom += c.WritableLen()
	return true, nil
}

// waitBuffers is called when the ring is empty and buffers are needed.
func (r *rx) waitBuffers() (bool, error) {
	return r.WaitAvail(func() { r.c.bufferWaits.Add(1) })
}

// read reads one frame, or waits for the backend when none is pending.
// It returns false (no error) when the device is stopping.
func (r *rx) read() (bool, error) {
	n, err := r.be.TryReadv(r.iov[:])
	switch {
	case err == nil:
	case errors.Is(err, tap.ErrWouldBlock):
		if err := r.Signal(); err != nil {
			return false, err
		}
		err := r.be.WaitReadable()
		if r.Stopped() {
			return false, nil
		}
		if err != nil && !isDeadline(err) {
			return false, fmt.Errorf("backend: %w", err)
		}
		return true, nil
	default:
		return false, fmt.Errorf("backend: %w", err)
	}
	switch {
	case n < r.hdr+ethHeaderLen:
		r.c.dropBackend.Add(1) // the tap never does this
	case n >= len(r.buf):
		r.c.dropTooLarge.Add(1)
	default:
		r.frame = r.buf[:n]
	}
	return true, nil
}

// place puts r.frame into held chains, popping more as needed. It returns
// false when the ring ran out before the frame fit: the frame and chains
// stay held until the driver posts more.
func (r *rx) place() (bool, error) {
	need := uint64(len(r.frame))
	if !r.mrg {
		// One chain per frame (spec 5.1.6.3.1 without MRG_RXBUF). A
		// frame larger than this chain is dropped; the chain is kept
		// for the next one.
		c := r.held[0]
		if c.WritableLen() < need {
			r.c.dropTooLarge.Add(1)
			r.frame = nil
			return true, nil
		}
		return true, r.deliver(1)
	}
	for r.heldRoom < need {
		if len(r.held) >= int(r.Queue.Size) {
			// Every buffer the driver can post is in hand and the
			// frame still does not fit: it never will.
			r.c.dropTooLarge.Add(1)
			r.frame = nil
			return true, nil
		}
		ok, err := r.pop()
		if err != nil || !ok {
			return false, err
		}
	}
	// Count the chains the frame spans, then write num_buffers (spec
	// 5.1.6.4 with MRG_RXBUF) before copying, so each chain is written
	// once and returned at once.
	n, room := 0, uint64(0)
	for room < need {
		room += r.held[n].WritableLen()
		n++
	}
	binary.LittleEndian.PutUint16(r.frame[numBuffersAt:], uint16(n))
	return true, r.deliver(n)
}

// deliver copies r.frame into the first n held chains and returns them to
// the driver, in ring order so a merged frame's buffers are consecutive.
func (r *rx) deliver(n int) error {
	rest := r.frame
	for _, c := range r.held[:n] {
		k := min(uint64(len(rest)), c.WritableLen())
		if _, err := c.Writer().Write(rest[:k]); err != nil {
			return fmt.Errorf("rx copy: %w", err)
		}
		rest = rest[k:]
		if err := r.Used(c.Head, uint32(k)); err != nil {
			return err
		}
		r.heldRoom -= c.WritableLen()
	}
	r.c.frames.Add(1)
	r.c.bytes.Add(uint64(len(r.frame) - r.hdr))
	r.frame = nil
	r.held = append(r.held[:0], r.held[n:]...)
	return nil
}
