package virtioconsole

import (
	"fmt"
	"io"

	"github.com/govm/govm/virtio"
	"golang.org/x/sys/unix"
)

// tx writes each transmit chain's bytes to the device's output (spec
// 5.3.6.2: the device reads the driver's buffers; nothing is written into
// them, so the used length is 0).
type tx struct {
	dev *Device
	srv virtio.Server
	buf [4096]byte
}

func (t *tx) handle(c *virtio.Chain) (uint32, error) {
	if c.WritableLen() != 0 {
		return 0, &virtio.GuestError{Queue: TXQueue, Head: c.Head, HeadValid: true,
			Err: fmt.Errorf("virtioconsole: transmit chain with %d device-writable bytes", c.WritableLen())}
	}
	// In pieces through a fixed buffer: a chain may span most of guest
	// RAM, and must not make govm allocate as much.
	rd := c.Reader()
	for left := c.ReadableLen(); left > 0; {
		b := t.buf[:min(uint64(len(t.buf)), left)]
		if _, err := io.ReadFull(rd, b); err != nil {
			return 0, fmt.Errorf("virtioconsole: %w", err)
		}
		// A failing output (a closed stdout) loses the guest's bytes
		// but not the guest: the console goes on, as a UART's does.
		t.dev.out.Write(b)
		left -= uint64(len(b))
		t.dev.mu.Lock()
		t.dev.outBytes += uint64(len(b))
		t.dev.mu.Unlock()
	}
	return 0, nil
}

// rx gives waiting host input to the guest's receive buffers (spec
// 5.3.6.1), one chain at a time, as much as each holds.
type rx struct {
	dev *Device
	srv virtio.Server
	buf [4096]byte
}

func (r *rx) turn(budget int) (served int, w virtio.Wait, err error) {
	var clr [8]byte
	unix.Read(r.dev.efd, clr[:]) // take the wakeup before looking: none is lost
	for ; served < budget; served++ {
		if r.srv.Stopped() {
			return served, virtio.Wait{Kind: virtio.WaitRing}, nil
		}
		if !r.dev.pending() {
			return served, virtio.Wait{Kind: virtio.WaitFD, FD: r.dev.efd}, nil
		}
		r.srv.Hold() // paused: take nothing
		c, err := r.srv.Queue.Pop(r.srv.Mem)
		if err != nil || c == nil {
			return served, virtio.Wait{Kind: virtio.WaitRing}, err
		}
		if c.ReadableLen() != 0 || c.WritableLen() == 0 {
			return served, virtio.Wait{}, &virtio.GuestError{Queue: RXQueue, Head: c.Head, HeadValid: true,
				Err: fmt.Errorf("virtioconsole: receive chain with %d readable and %d writable bytes", c.ReadableLen(), c.WritableLen())}
		}
		n := r.dev.take(r.buf[:min(uint64(len(r.buf)), c.WritableLen())])
		if _, err := c.Writer().Write(r.buf[:n]); err != nil {
			return served, virtio.Wait{}, fmt.Errorf("virtioconsole: %w", err)
		}
		if err := r.srv.Used(c.Head, uint32(n)); err != nil {
			return served, virtio.Wait{}, err
		}
	}
	return served, virtio.Wait{Kind: virtio.More}, nil
}
