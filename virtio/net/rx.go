package virtionet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/govm/govm/internal/yield"
	"github.com/govm/govm/virtio"
)

// rx moves frames from the backend into the driver's receive buffers
// (spec 5.1.6.3, 5.1.6.4). It is a state machine, one source of the
// device's Loop (its Turn). Each state names what the device lacks; a state
// that cannot go on ends the turn with what it waits for, and the Loop
// sleeps on that together with the TX doorbell:
//
//	state             has                 next                            waits on
//	needChains        nothing             chain popped -> needFrame       RX ring (WaitRing)
//	needFrame         chains              frame read -> placing;          backend PollFD (WaitFD)
//	                                      bad frame or read error:
//	                                      counted -> needFrame
//	placing           chains, a frame     delivered -> needFrame, or
//	                                      needChains if none is left;
//	                                      too large: dropped -> needFrame
//	                                      MRG_RXBUF, ring empty ->
//	                                      frameNeedsChains
//	frameNeedsChains  a frame, too few    buffers posted -> placing       RX ring (WaitRing)
//	                  chains
//
//	needChains --pop--> needFrame --read--> placing --delivered--> needFrame
//	   ^  |                ^   |              |  ^
//	   +--+ ring empty     +---+ tap empty    |  | buffers posted
//	        (WaitRing)           (WaitFD)     v  |
//	                                      frameNeedsChains (WaitRing)
//
// Back-pressure: the backend is read only while at least one receive chain
// is in hand, and a frame that was read is kept until enough chains arrive
// to hold it: it is never dropped for lack of buffers. While it has no
// buffers the device does not read at all, so frames queue in the tap (and
// the kernel drops at its own txqueuelen, as for any slow NIC).
//
// Notifications are the Loop's: kicks are on only while RX waits on its
// ring, so a driver that reposts buffers while the device holds some does
// not kick (spec 2.7.10).
type rx struct {
	vq
	be  Backend
	mrg bool
	hdr int
	buf []byte    // read buffer: header + largest frame
	iov [1][]byte // {buf}, kept so a read does not allocate

	frame    []byte            // a frame read but not yet delivered (in buf)
	held     []*virtio.Chain   // chains popped and not yet used, in ring order
	heldRoom uint64            // their total writable length
	used     []virtio.UsedElem // one frame's used elements, reused
	backoff  time.Duration     // wait after a failed backend read
	until    time.Time         // no read before this (backing off); zero: none

	state rxState // where the state machine stands
	// starved: the last turn ended waiting for buffers and said so in
	// the queue's Watch (NeedBuffers).
	starved bool
	// posted says the driver has posted a receive buffer since
	// activation. Linux posts them when the interface comes up
	// (virtnet_open): until then an empty ring is an interface that is
	// down, not a driver that stopped keeping up.
	posted bool
}

// rxState is where the RX state machine stands: what the device lacks.
type rxState int

const (
	// needChains: no receive chain in hand.
	needChains rxState = iota
	// needFrame: chains in hand, no frame: read the backend.
	needFrame
	// placing: a frame in hand, fitting it into held chains.
	placing
	// frameNeedsChains: a frame in hand (MRG_RXBUF) that the held
	// chains cannot hold, and the ring is empty.
	frameNeedsChains
)

// Backing off after failed backend reads: a tap whose reads keep failing
// (say, detached) must not make the I/O goroutine spin.
const (
	minReadBackoff = time.Millisecond
	maxReadBackoff = 100 * time.Millisecond
)

func newRX(d *Device, a virtio.Activation, hdr int, stop <-chan struct{}) *rx {
	r := &rx{
		vq:  newVQ(d, a, RXQueue, &d.stats.rx, stop),
		be:  d.be,
		mrg: a.Features&virtio.Bit(FeatureMrgRxBuf) != 0,
		hdr: hdr,
		// One byte more than the largest legal frame, so a read that
		// fills the buffer is known to be oversize (a short buffer
		// truncates silently).
		buf:  make([]byte, hdrLenMrg+maxGSOFrame+1),
		used: make([]virtio.UsedElem, 0, a.Queues[RXQueue].Size),
		held: make([]*virtio.Chain, 0, a.Queues[RXQueue].Size),
	}
	r.iov[0] = r.buf
	return r
}

// turn runs the state machine until it must wait, and returns on what, or
// until it has read budget frames (More: the other queue gets its turn
// first). served counts the chains popped and frames read. An error stops
// the queue (guest misbehaviour, or a closed backend).
func (r *rx) turn(budget int) (served int, w virtio.Wait, err error) {
	if r.starved {
		r.starved = false
		r.Queue.Watch().NeedBuffers.Store(false)
	}
	reads := 0
	for !r.Stopped() {
		w = virtio.Wait{}
		prev := r.state
		switch r.state {
		case needChains:
			r.state, w, err = r.needChains()
		case needFrame:
			if reads == budget {
				return served, virtio.Wait{Kind: virtio.More}, nil
			}
			r.state, w, err = r.readFrame(reads)
			reads++
		case placing:
			r.state, err = r.place()
		case frameNeedsChains:
			r.state, w = r.waitChains(placing)
		}
		if err != nil {
			return served, w, err
		}
		if w.Kind != virtio.More {
			return served, w, nil
		}
		if prev != placing {
			served++ // a chain popped or a frame read
		}
	}
	return served, virtio.Wait{Kind: virtio.More}, nil
}

// needChains pops a chain, or waits for the driver to post one.
func (r *rx) needChains() (rxState, virtio.Wait, error) {
	got, err := r.pop()
	if err != nil {
		return 0, virtio.Wait{}, err
	}
	if got {
		return needFrame, virtio.Wait{}, nil
	}
	s, w := r.waitChains(needChains)
	return s, w, nil
}

// waitChains is for an empty ring: next runs once the driver has posted
// buffers (the Loop asks for kicks and re-checks the ring first).
func (r *rx) waitChains(next rxState) (rxState, virtio.Wait) {
	// The watchdog calls this wait RX starvation when it lasts while
	// frames are pending in the backend; not before the first buffer.
	if r.posted {
		r.starved = true
		r.Queue.Watch().NeedBuffers.Store(true)
	}
	r.c.bufferWaits.Add(1)
	return next, virtio.Wait{Kind: virtio.WaitRing}
}

// pop takes one more receive chain off the ring; false when it is empty.
func (r *rx) pop() (bool, error) {
	r.Hold() // paused: take no buffer
	c, err := r.Queue.Pop(r.Mem)
	if err != nil || c == nil {
		return false, err
	}
	r.c.chains.Add(1)
	r.posted = true
	r.held = append(r.held, c)
	r.heldRoom += c.WritableLen()
	return true, nil
}

// gatherAfter is how many frames a turn reads before it takes an empty
// backend for a gap in a flood rather than the end of a burst: readFrame
// then yields the CPU and reads once more before it waits (see there). One
// frame per wakeup (ping -f, a request and its answer) never yields.
const gatherAfter = 2

// readFrame reads one frame from the backend, or says to wait for one;
// read is how many reads the turn made before this one (each found a
// frame: a read that finds none ends the turn).
func (r *rx) readFrame(read int) (rxState, virtio.Wait, error) {
	if !r.until.IsZero() {
		if time.Now().Before(r.until) {
			return needFrame, virtio.Wait{Kind: virtio.WaitUntil, Until: r.until}, nil // still backing off
		}
		r.until = time.Time{}
	}
	// Paused: the frame stays in the backend, not in a guest buffer.
	r.Hold()
	n, err := r.be.TryReadv(r.iov[:])
	if errors.Is(err, ErrWouldBlock) && read >= gatherAfter {
		// The reader caught up with a flood: the thread writing the
		// frames (a sender on the host) may be waiting for this very
		// CPU. Offering it the CPU before sleeping lets frames gather,
		// and the read after the yield often finds some: no sleep in
		// ppoll and no wakeup from the writer for them, fewer wakeups
		// per frame (bench/README.md, "Design measurements"). With
		// nothing else runnable the yield returns at once, and the
		// price is one more read.
		yield.CPU()
		r.Hold() // a pause may have begun meanwhile
		n, err = r.be.TryReadv(r.iov[:])
		if err == nil {
			r.c.yieldReads.Add(1)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrWouldBlock):
		// Nothing pending (the Loop makes the interrupt decision for
		// what was delivered before it waits on the backend).
		r.c.backendWaits.Add(1)
		return needFrame, virtio.Wait{Kind: virtio.WaitFD, FD: r.be.PollFD()}, nil
	default:
		return r.readFailed(err)
	}
	r.backoff = 0
	switch {
	case n < r.hdr+ethHeaderLen:
		r.c.dropBackend.Add(1) // the tap never does this
	case n >= len(r.buf):
		r.c.dropTooLarge.Add(1)
	default:
		r.frame = r.buf[:n]
		return placing, virtio.Wait{}, nil
	}
	return needFrame, virtio.Wait{}, nil
}

// readFailed handles a backend read or wait that failed. A closed backend
// stops the queue: nothing will ever arrive. Any other error is counted and
// RX goes on after a short, growing pause (TX is still served meanwhile), as
// QEMU's tap_send does (it stops reading on an error and waits for the fd
// again); stopping the queue instead would end RX for good, since a legacy
// Linux driver never acts on DEVICE_NEEDS_RESET.
func (r *rx) readFailed(err error) (rxState, virtio.Wait, error) {
	if errors.Is(err, os.ErrClosed) {
		return 0, virtio.Wait{}, fmt.Errorf("backend: %w", err)
	}
	r.c.readErrors.Add(1)
	r.backoff = min(max(2*r.backoff, minReadBackoff), maxReadBackoff)
	r.until = time.Now().Add(r.backoff)
	return needFrame, virtio.Wait{Kind: virtio.WaitUntil, Until: r.until}, nil
}

// place puts r.frame into held chains, popping more as needed.
func (r *rx) place() (rxState, error) {
	need := uint64(len(r.frame))
	if !r.mrg {
		// One chain per frame (spec 5.1.6.3.1 without MRG_RXBUF). A
		// frame larger than this chain is dropped; the chain is kept
		// for the next one.
		if r.held[0].WritableLen() < need {
			r.c.dropTooLarge.Add(1)
			r.frame = nil
			return needFrame, nil
		}
		return r.deliver(1)
	}
	for r.heldRoom < need {
		if len(r.held) >= int(r.Queue.Size) {
			// Every buffer the driver can post is in hand and the
			// frame still does not fit: it never will.
			r.c.dropTooLarge.Add(1)
			r.frame = nil
			return needFrame, nil
		}
		got, err := r.pop()
		if err != nil {
			return 0, err
		}
		if !got {
			return frameNeedsChains, nil
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
	return r.deliver(n)
}

// deliver copies r.frame into the first n held chains and returns them to
// the driver in ring order with ONE used idx publication (UsedBatch): a
// merged frame's buffers become visible together (spec 5.1.6.4).
func (r *rx) deliver(n int) (rxState, error) {
	rest := r.frame
	r.used = r.used[:0]
	for _, c := range r.held[:n] {
		k := min(uint64(len(rest)), c.WritableLen())
		if _, err := c.Writer().Write(rest[:k]); err != nil {
			return 0, fmt.Errorf("rx copy: %w", err)
		}
		rest = rest[k:]
		r.used = append(r.used, virtio.UsedElem{Head: c.Head, Len: uint32(k)})
		r.heldRoom -= c.WritableLen()
	}
	if err := r.UsedBatch(r.used); err != nil {
		return 0, err
	}
	r.c.frames.Add(1)
	r.c.bytes.Add(uint64(len(r.frame) - r.hdr))
	r.frame = nil
	r.held = append(r.held[:0], r.held[n:]...)
	if len(r.held) == 0 {
		return needChains, nil
	}
	return needFrame, nil
}
