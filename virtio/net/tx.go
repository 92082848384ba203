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
// the driver liked (ANY_LAYOUT). The header is copied and checked; writev
// gets that copy followed by views of guest memory for the frame, so the
// frame is not copied on the way out and the header sent is the one checked.
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

func newTX(d *Device, a virtio.Activation, hdr int, stop <-chan struct{}) *tx {
	return &tx{
		vq:       newVQ(d, a, TXQueue, &d.stats.tx, stop),
		be:       d.be,
		features: a.Features,
		hdr:      hdr,
		max:      maxTXFrame(a.Features),
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
// why the chain is dropped, or "". The header is copied once into
// t.hdrCopy, and that copy is what views sends, so the driver rewriting it
// meanwhile cannot make us check one value and send another.
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

// views returns what goes to writev for a checked chain: first the header
// copy parse checked, then the frame bytes as host slices of guest memory
// (the chain's readable part after its first t.hdr bytes), or false if that
// is more buffers than writev takes. The guest's own header bytes are never
// sent: another vCPU may rewrite them after the check, and the tun driver
// parses the header it is given (gso_type, csum_start / csum_offset). Pop
// checked every buffer lies in guest RAM; Slice checks again.
func (t *tx) views(c *virtio.Chain) ([][]byte, bool) {
	t.iovs = append(t.iovs[:0], t.hdrCopy[:t.hdr])
	skip := uint64(t.hdr)
	for _, s := range c.Segments() {
		if s.Write {
			break // readable buffers come first (spec 2.7.4.2)
		}
		l := uint64(s.Len)
		if skip >= l {
			skip -= l // header bytes (or an empty buffer)
			continue
		}
		if len(t.iovs) == iovMax {
			return nil, false
		}
		b, err := t.Mem.Slice(s.Addr+skip, l-skip)
		if err != nil {
			return nil, false
		}
		t.iovs = append(t.iovs, b)
		skip = 0
	}
	return t.iovs, true
}
