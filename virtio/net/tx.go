package virtionet

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/govm/govm/virtio"
)

// iovMax is the kernel's UIO_MAXIOV: writev refuses more iovecs.
const iovMax = 1024

// tx moves frames from the driver's transmit chains to the backend (spec
// 5.1.6.2). A chain's readable part is header + frame, laid out any way
// the driver liked (ANY_LAYOUT); it is handed to writev as views of guest
// memory, so the frame is not copied on the way out.
type tx struct {
	vq
	be       Backend
	features uint64
	hdr      int
	max      int // largest frame accepted, header excluded
	iovs     [][]byte
	copyBuf  []byte // for chains with more than iovMax buffers
	hdrCopy  [hdrLenMrg]byte
}

func newTX(d *Device, a virtio.Activation, hdr int) *tx {
	return &tx{
		vq:       newVQ(d, a, TXQueue, &d.stats.tx),
		be:       d.be,
		features: a.Features,
		hdr:      hdr,
		max:      maxTXFrame(a.Features),
	}
}

func (t *tx) run() {
	if err := t.Serve(t.handle); err != nil {
		t.fail(err)
	}
}

// handle sends one chain's frame. Spec 5.1.6.2: the device writes nothing
// into a TX chain, so its used length is 0.
func (t *tx) handle(c *virtio.Chain) (uint32, error) {
	t.c.chains.Add(1)
	return 0, t.send(c)
}

// send writes one chain's frame to the backend, or drops and counts it.
// Only a closed backend is an error.
func (t *tx) send(c *virtio.Chain) error {
	n := c.ReadableLen()
	if why := t.parse(c); why != "" {
		if why == dropLarge {
			t.c.dropTooLarge.Add(1)
		} else {
			t.c.dropMalformed.Add(1)
		}
		return nil
	}
	iovs, ok := t.views(c)
	if !ok {
		// Too many buffers for one writev: gather into our own
		// buffer (the one copy left on this path).
		if cap(t.copyBuf) < int(n) {
			t.copyBuf = make([]byte, hdrLenMrg+maxGSOFrame)
		}
		// parse consumed the header from the chain's reader: the
		// checked copy goes first, the reader supplies the rest.
		b := t.copyBuf[:n]
		copy(b, t.hdrCopy[:t.hdr])
		if _, err := io.ReadFull(c.Reader(), b[t.hdr:]); err != nil {
			t.c.dropMalformed.Add(1)
			return nil
		}
		iovs = append(t.iovs[:0], b)
	}
	if _, err := t.be.Writev(iovs); err != nil {
		t.c.dropBackend.Add(1)
		if errors.Is(err, os.ErrClosed) {
			return fmt.Errorf("backend: %w", err)
		}
		return nil
	}
	t.c.frames.Add(1)
	t.c.bytes.Add(n - uint64(t.hdr))
	return nil
}

const dropLarge = "frame too large"

// parse checks a TX chain: readable part = header + an Ethernet frame of at
// most t.max bytes, header valid for the negotiated features. It returns
// why the chain is dropped, or "". The header is copied once, so the
// driver rewriting it meanwhile cannot make us check one value and use
// another (the kernel re-reads and re-validates it from guest memory).
func (t *tx) parse(c *virtio.Chain) string {
	n := c.ReadableLen()
	switch {
	case n < uint64(t.hdr+ethHeaderLen):
		return "chain shorter than header + Ethernet header"
	case n-uint64(t.hdr) > uint64(t.max):
		return dropLarge
	}
	h := t.hdrCopy[:t.hdr]
	if _, err := io.ReadFull(c.Reader(), h); err != nil {
		return "header unreadable"
	}
	return checkTXHeader(h, t.features)
}

// views returns the chain's readable buffers as host slices of guest
// memory, or false if there are more than writev takes. Pop checked every
// buffer lies in guest RAM; Slice checks again.
func (t *tx) views(c *virtio.Chain) ([][]byte, bool) {
	t.iovs = t.iovs[:0]
	for _, s := range c.Segments() {
		if s.Write {
			break // readable buffers come first (spec 2.7.4.2)
		}
		if s.Len == 0 {
			continue
		}
		if len(t.iovs) == iovMax {
			return nil, false
		}
		b, err := t.Mem.Slice(s.Addr, uint64(s.Len))
		if err != nil {
			return nil, false
		}
		t.iovs = append(t.iovs, b)
	}
	return t.iovs, true
}
