// Package outq puts a bounded queue and a goroutine of its own between a
// writer and a destination that may be slow or stalled (a pipe nobody
// reads): Write never waits for the destination, so a vCPU printing on the
// console or a device logging a line never blocks on the host's stdout or
// stderr, and Close can give up on what cannot be written when govm must
// end.
package outq

import (
	"io"
	"sync"
	"time"
)

// Writer queues up to Max bytes for its goroutine to write to W, in order.
// Bytes that do not fit are dropped and counted (the destination is that
// far behind); after W fails, everything is dropped and counted.
type Writer struct {
	w   interface{ Write([]byte) (int, error) }
	max int

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []byte
	inflight int // bytes the goroutine is writing (inside W.Write)
	closed   bool
	err      error  // W's first error
	dropped  uint64 // bytes that did not fit, or came after err or Close
	written  uint64 // bytes W took
	done     chan struct{}
}

// New starts the goroutine that writes to w; max bounds the queue.
func New(w interface{ Write([]byte) (int, error) }, max int) *Writer {
	q := &Writer{w: w, max: max, done: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	go q.run()
	return q
}

// Write queues p, or as much of it as fits; it never blocks on W. It
// reports len(p): what is dropped is counted (Dropped), not an error for
// the caller, whose work must go on.
func (q *Writer) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.err != nil {
		q.dropped += uint64(len(p))
		return len(p), nil
	}
	n := min(len(p), q.max-len(q.queue))
	q.queue = append(q.queue, p[:n]...)
	q.dropped += uint64(len(p) - n)
	if n > 0 {
		q.cond.Signal()
	}
	return len(p), nil
}

func (q *Writer) run() {
	defer close(q.done)
	var buf []byte
	q.mu.Lock()
	for {
		for len(q.queue) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.queue) == 0 {
			q.mu.Unlock()
			return
		}
		// Swap buffers: Write appends to the other one meanwhile.
		buf, q.queue = q.queue, buf[:0]
		rest := buf
		for len(rest) > 0 && q.err == nil {
			q.inflight = len(rest)
			q.mu.Unlock()
			n, err := q.w.Write(rest)
			q.mu.Lock()
			n = min(max(n, 0), len(rest))
			q.written += uint64(n)
			rest = rest[n:]
			if err == nil && n == 0 {
				err = io.ErrShortWrite
			}
			if err != nil {
				q.err = err
				q.dropped += uint64(len(rest) + len(q.queue))
				q.queue = q.queue[:0]
			}
		}
		q.inflight = 0
	}
}

// Close stops taking bytes and waits for the queue to reach W for as long
// as W keeps taking bytes: it gives up once W has taken nothing for idle
// (a reader that stalled), or after most in all. abandoned counts what
// was still queued or inside a stalled W.Write; the goroutine is then
// left blocked in W.Write until the process exits. Safe to call more
// than once.
func (q *Writer) Close(idle, most time.Duration) (abandoned uint64) {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	end := time.Now().Add(most)
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		written := q.Written()
		select {
		case <-q.done:
			return 0
		case <-t.C:
		}
		if q.Written() == written || time.Now().After(end) {
			break
		}
		t.Reset(idle)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-q.done:
		return 0
	default:
	}
	return uint64(len(q.queue) + q.inflight)
}

// Written is how many bytes W has taken so far.
func (q *Writer) Written() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.written
}

// Dropped is how many bytes did not fit the queue, came after a write
// error or after Close.
func (q *Writer) Dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// Err is W's first write error (after which bytes are dropped).
func (q *Writer) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}
