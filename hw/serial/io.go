package serial

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Input queues received bytes (from stdin) in the RX FIFO and raises the
// receive interrupt. It applies back-pressure instead of dropping: it
// blocks until every byte of b is queued, waiting while the FIFO is full
// (until the guest reads RBR) or while the UART is in loopback (the
// receiver is disconnected from the outside then). It returns len(b), or
// fewer only after Close.
func (u *UART) Input(b []byte) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for n < len(b) {
		for !u.closed && (u.rxLen >= u.rxCap() || u.loopback()) {
			u.space.Wait()
		}
		if u.closed {
			break
		}
		for n < len(b) && u.rxLen < u.rxCap() {
			u.rx[(u.rxHead+u.rxLen)%FIFOSize] = b[n]
			u.rxLen++
			n++
		}
		u.updateIRQ()
	}
	return n
}

// Close makes blocked and future Input calls return, and flushes output.
// Register access keeps working (the vCPU may still be running).
func (u *UART) Close() {
	u.mu.Lock()
	u.closed = true
	u.space.Broadcast()
	u.mu.Unlock()
	u.out.flush()
}

// Flush writes buffered output now (call it before the process exits).
func (u *UART) Flush() { u.out.flush() }

// Err reports the first host-side failure: an interrupt line that could
// not be set, or an output write error (after which output is discarded
// and counted, so the guest keeps running).
func (u *UART) Err() error {
	u.mu.Lock()
	lineErr := u.lineErr
	u.mu.Unlock()
	if lineErr != nil {
		return lineErr
	}
	return u.out.error()
}

// Output buffering: a byte per VM exit would otherwise be a write syscall
// per character of boot log.
const (
	outBufMax  = 4096                  // flush when this much is buffered
	flushDelay = 10 * time.Millisecond // flush when the guest pauses this long
)

// output buffers transmitted bytes for w, flushing on newline, when full,
// and flushDelay after the first unflushed byte (so a prompt without a
// newline still appears).
type output struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	timer   *time.Timer
	armed   bool
	err     error  // first write error
	dropped uint64 // bytes discarded after a write error
}

func newOutput(w io.Writer) *output {
	o := &output{w: w, buf: make([]byte, 0, outBufMax)}
	o.timer = time.AfterFunc(time.Hour, o.flush)
	o.timer.Stop()
	return o
}

func (o *output) put(b byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, b)
	if b == '\n' || len(o.buf) >= outBufMax {
		o.flushLocked()
		return
	}
	if !o.armed {
		o.armed = true
		o.timer.Reset(flushDelay)
	}
}

func (o *output) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushLocked()
}

func (o *output) flushLocked() {
	if o.armed {
		o.timer.Stop()
		o.armed = false
	}
	if len(o.buf) == 0 {
		return
	}
	if o.err != nil || o.w == nil {
		o.dropped += uint64(len(o.buf))
		o.buf = o.buf[:0]
		return
	}
	n, err := o.w.Write(o.buf)
	if err == nil && n < len(o.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		// Nowhere to put the console any more (closed pipe, full
		// disk): remember why, count what is lost, keep the guest
		// running.
		o.err = fmt.Errorf("serial: console output: %w", err)
		o.dropped += uint64(len(o.buf) - n)
	}
	o.buf = o.buf[:0]
}

func (o *output) error() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil && o.dropped > 0 {
		return fmt.Errorf("%w (%d bytes dropped)", o.err, o.dropped)
	}
	return o.err
}
