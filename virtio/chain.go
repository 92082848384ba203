package virtio

import "io"

// Segment is one data buffer of a chain, as the driver described it.
type Segment struct {
	Addr  uint64 // guest-physical address
	Len   uint32
	Write bool // device-writable
}

// Chain is one validated descriptor chain taken off the available ring.
// Every buffer was checked to lie inside guest RAM when Pop built it; the
// device reads the request through Reader and writes the response through
// Writer, and never does address arithmetic itself. The buffers alias guest
// RAM, so the guest may change what Reader returns while it is read: devices
// copy what they parse (each field is read once).
//
// A Chain belongs to its Queue (or PackedQueue), which keeps one per head
// (buffer ID) and reuses it, so that Pop allocates nothing in steady state.
// It is the device's from Pop until its head goes back through AddUsed /
// AddUsedBatch (or the queue is Reset); after that the next Pop of the same
// head rebuilds it, so a device must not touch a chain it has returned.
type Chain struct {
	// Head is what AddUsed wants back: in a split ring the index of the
	// first descriptor, in a packed ring (PackedQueue) the buffer ID.
	Head uint16

	segs        []Segment
	out, in     [][]byte // host views of the readable / writable buffers
	readableLen uint64
	writableLen uint64

	r chainReader
	w chainWriter

	// inFlight: popped and not yet used. Pop refuses the head meanwhile
	// (see Queue.chainFor).
	inFlight bool
}

// retainSegs is the longest chain whose slices a Chain keeps once its head
// is used: every chain Linux's drivers build for our devices (virtio-blk:
// seg_max + 2 = 128; virtio-net: MAX_SKB_FRAGS + 2 for TX, one buffer per
// RX chain with MRG_RXBUF), so those reuse their slices. A slice grown
// beyond 2*retainSegs (append may round a retainSegs-long one up to that)
// is dropped when its chain is used or fails: only an indirect table (up
// to 65536 entries) makes one, and a driver must not be able to make the
// queue pin Size of those. What a queue keeps between chains is at most
// Size * 2*retainSegs * 64 bytes (a Segment and two views each: 4 MiB for
// 256 entries).
const retainSegs = 128

// reuse readies c for a new chain at head: everything zero, but the slices
// keep their backing arrays.
func (c *Chain) reuse(head uint16) {
	c.trim()
	*c = Chain{Head: head, segs: c.segs[:0], out: c.out[:0], in: c.in[:0]}
}

// trim drops slices grown beyond 2*retainSegs (see there).
func (c *Chain) trim() {
	if cap(c.segs) > 2*retainSegs {
		c.segs = nil
	}
	if cap(c.out) > 2*retainSegs {
		c.out = nil
	}
	if cap(c.in) > 2*retainSegs {
		c.in = nil
	}
}

// Segments returns the chain's buffers in order (readable ones first). The
// caller must not modify the returned slice.
func (c *Chain) Segments() []Segment { return c.segs }

// ReadableLen is the total length of the device-readable buffers.
func (c *Chain) ReadableLen() uint64 { return c.readableLen }

// WritableLen is the total length of the device-writable buffers.
func (c *Chain) WritableLen() uint64 { return c.writableLen }

// Written is the number of bytes written so far through Writer: the length
// a device reports to AddUsed (spec 2.7.8: len is the bytes written into
// the buffer).
func (c *Chain) Written() uint32 {
	n := c.w.n + c.w.tail
	if n > c.writableLen {
		n = c.writableLen // WriteAtEnd overlapped bytes Write had written
	}
	return uint32(n) // Pop capped the chain at 2^32-1 bytes
}

// Reader returns the reader over the device-readable buffers, in order. It
// is the same reader on every call: reads continue where the last stopped,
// and it returns io.EOF at the end of the readable part.
func (c *Chain) Reader() io.Reader {
	c.r.bufs = c.out
	return &c.r
}

// Writer returns the writer over the device-writable buffers, in order. It
// is the same writer on every call. A write past the end writes what fits
// and returns io.ErrShortWrite.
func (c *Chain) Writer() io.Writer {
	c.w.bufs = c.in
	return &c.w
}

// WriteAtEnd writes p into the last len(p) bytes of the writable part
// without moving the writer, for devices whose status byte ends the chain
// (virtio-blk, spec 5.2.6). Written counts those bytes too, so a request
// that failed before any data was written reports only its status. It fails with io.ErrShortWrite if the writable part is
// shorter than p.
func (c *Chain) WriteAtEnd(p []byte) error {
	if uint64(len(p)) > c.writableLen {
		return io.ErrShortWrite
	}
	skip := c.writableLen - uint64(len(p))
	rest := p
	for _, b := range c.in {
		if skip >= uint64(len(b)) {
			skip -= uint64(len(b))
			continue
		}
		n := copy(b[skip:], rest)
		rest = rest[n:]
		skip = 0
	}
	c.w.tail = uint64(len(p))
	return nil
}

type chainReader struct {
	bufs [][]byte
	i    int    // current buffer
	off  uint64 // offset in it
}

func (r *chainReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.bufs) {
		b := r.bufs[r.i][r.off:]
		k := copy(p[n:], b)
		n += k
		r.off += uint64(k)
		if r.off == uint64(len(r.bufs[r.i])) {
			r.i, r.off = r.i+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

type chainWriter struct {
	bufs [][]byte
	i    int
	off  uint64
	n    uint64 // bytes written through Write
	tail uint64 // bytes WriteAtEnd wrote at the end
}

func (w *chainWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) && w.i < len(w.bufs) {
		b := w.bufs[w.i][w.off:]
		k := copy(b, p[n:])
		n += k
		w.off += uint64(k)
		if w.off == uint64(len(w.bufs[w.i])) {
			w.i, w.off = w.i+1, 0
		}
	}
	w.n += uint64(n)
	if n < len(p) {
		return n, io.ErrShortWrite
	}
	return n, nil
}
