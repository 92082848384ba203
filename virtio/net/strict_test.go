package virtionet

import (
	"bytes"
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// checkOnSignal is an Interrupt that runs check at every used-buffer
// notification: what the driver's interrupt handler would see.
type checkOnSignal struct {
	*virtiotest.RecordingInterrupt
	check func()
}

func (c *checkOnSignal) SignalUsed(q int) error {
	if q == RXQueue {
		c.check()
	}
	return c.RecordingInterrupt.SignalUsed(q)
}

// TestRXMergedFrameAtomic: the buffers of one merged frame become visible
// to the driver together (spec 5.1.6.4: the device MUST use all the
// buffers of one packet together). Linux's receive_mergeable takes buffer 1
// as soon as used idx covers it and requires the other num_buffers-1 to be
// there already. Neither a reader spinning on used idx nor the interrupt
// handler (the device interrupts every batchMax chains, which 3 does not
// divide) may ever see a used idx inside a frame.
func TestRXMergedFrameAtomic(t *testing.T) {
	const bufLen, per, frames = 1024, 3, 300
	var e *env
	partial := make(chan uint16, 2)
	report := func(idx uint16) {
		select {
		case partial <- idx:
		default:
		}
	}
	e = newEnvIntr(t, feat(FeatureMrgRxBuf), false, func(r *virtiotest.RecordingInterrupt) virtio.Interrupt {
		return &checkOnSignal{RecordingInterrupt: r, check: func() {
			if idx := e.rx.UsedIdx(); idx%per != 0 {
				report(idx)
			}
		}}
	})
	frameLen := per*bufLen - hdrLenMrg // header + frame fill exactly per buffers
	for i := 0; i < QueueSize; i++ {
		e.rx.AddChain(nil, []int{bufLen})
	}
	e.rx.KickIfNeeded()

	stop, readerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if idx := e.rx.UsedIdx(); idx%per != 0 {
				report(idx)
				return
			}
		}
	}()
	for i := 0; i < frames; i++ {
		e.be.inject(append(make([]byte, hdrLenMrg), frame(frameLen, uint32(i))...))
	}
	got, left := 0, 0
	deadline := time.Now().Add(20 * time.Second)
	for got < frames && time.Now().Before(deadline) {
		us := e.rx.Collect()
		for _, u := range us {
			if left == 0 {
				left = int(binary.LittleEndian.Uint16(u.In[0][numBuffersAt:]))
				if left != per {
					t.Fatalf("frame %d: num_buffers %d, want %d", got, left, per)
				}
			}
			if left--; left == 0 {
				got++
			}
			e.rx.AddChain(nil, []int{bufLen})
		}
		e.rx.KickIfNeeded()
		if len(us) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(stop)
	<-readerDone
	select {
	case idx := <-partial:
		t.Fatalf("the driver saw used idx %d: a merged frame of %d buffers published in part", idx, per)
	default:
	}
	if got != frames {
		t.Fatalf("received %d of %d frames; stats %v", got, frames, e.dev.Stats().RX)
	}
}

// TestRXNoKicksWhileBuffersRemain: receive notifications are off from
// activation and stay off while the device holds buffers, so a driver that
// reposts each buffer right after use (and polls) does not kick for it
// (virtio_net.c try_fill_recv kicks only when virtqueue_kick_prepare says
// so). Spec 2.7.10: VRING_USED_F_NO_NOTIFY / avail_event are how the device
// says it does not need kicks.
func TestRXNoKicksWhileBuffersRemain(t *testing.T) {
	for _, f := range []uint64{0, feat(virtio.FeatureRingEventIdx)} {
		e := newEnv(t, f, false)
		for i := 0; i < QueueSize/2; i++ {
			e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
		}
		e.rx.KickIfNeeded() // the first buffers may kick: the device has none yet
		const n = 1000
		kicks := 0
		for i := 0; i < n; i++ {
			e.be.inject(append(make([]byte, e.hdr), frame(60, uint32(i))...))
			e.waitUsed(e.rx, uint16(i+1))
			for range e.rx.Collect() {
				e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
			}
			if e.rx.KickIfNeeded() {
				kicks++
			}
		}
		if kicks > n/1000 {
			t.Errorf("features %#x: %d kicks for %d reposted buffers while buffers remained; want <= %d", f, kicks, n, n/1000)
		}
	}
}

// TestRXReadErrorGoesOn: a failed tap read is counted and RX reads on, as
// QEMU does; it does not stop the queue (a legacy Linux driver never acts on
// DEVICE_NEEDS_RESET).
func TestRXReadErrorGoesOn(t *testing.T) {
	e := newEnv(t, 0, false)
	e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
	e.rx.KickIfNeeded()
	e.be.injectErr(syscall.EIO)
	e.be.injectErr(syscall.EFAULT)
	in := append(hdrWith(hdrLenBase), frame(100, 1)...)
	e.be.inject(in)
	if !e.rx.WaitUsedIdx(1, 5*time.Second) {
		t.Fatalf("no frame after a read error; errors %v stats %v", e.intr.Errors(), e.dev.Stats().RX)
	}
	u := e.rx.Collect()
	if !bytes.Equal(u[0].In[0][:u[0].Len], in) {
		t.Errorf("frame after the errors differs")
	}
	if errs := e.intr.Errors(); len(errs) != 0 {
		t.Errorf("DeviceError %v for a read error", errs)
	}
	if s := e.dev.Stats().RX; s.ReadErrors != 2 || s.Frames != 1 {
		t.Errorf("stats %v, want 2 read errors and 1 frame", s)
	}
}

// TestTXSendsCheckedHeader: the header that reaches the backend is the
// copy the device checked, not the guest's bytes, which another vCPU can
// rewrite between the check and the write (time of check to time of use).
// The tun driver would parse whatever it is given (gso_type, csum_start).
func TestTXSendsCheckedHeader(t *testing.T) {
	layouts := map[string]func(h, f []byte) [][]byte{
		"header apart": func(h, f []byte) [][]byte { return [][]byte{h, f} },
		"one buffer":   func(h, f []byte) [][]byte { return [][]byte{append(append([]byte{}, h...), f...)} },
		"split header": func(h, f []byte) [][]byte {
			b := append(append([]byte{}, h...), f...)
			return [][]byte{b[:3], b[3:11], b[11:]}
		},
	}
	for name, layout := range layouts {
		e := newEnv(t, feat(FeatureCsum, FeatureHostTSO4), false)
		h := gsoHdr(hdrLenBase, gsoTCPv4)
		f := frame(300, 5)
		head := e.tx.BuildChain(layout(h, f), nil)
		at := e.tx.Segment0(head)
		e.be.beforeWrite = func() {
			// The guest's second vCPU, after the check: an
			// unchecked gso_type and a csum_start past the frame.
			// The first bytes of the chain are the header's in
			// every layout (the split one's first buffer is 3 bytes,
			// so only flags..hdr_len lie there).
			e.tx.RAM[at+1] = 5 // VIRTIO_NET_HDR_GSO_UDP, not offered
			e.tx.RAM[at+2] = 0xff
		}
		e.tx.PublishAvail(head)
		e.tx.KickIfNeeded()
		e.waitUsed(e.tx, 1)
		w := e.be.written()
		want := append(append([]byte{}, h...), f...)
		if len(w) != 1 || !bytes.Equal(w[0], want) {
			var got []byte
			if len(w) > 0 {
				got = w[0][:hdrLenBase]
			}
			t.Errorf("%s: backend got header % x, want the checked % x", name, got, h)
		}
	}
}

// TestTXGatherManyBuffers: a chain of more buffers than writev takes
// (UIO_MAXIOV) is gathered into one buffer, still behind the checked
// header copy.
func TestTXGatherManyBuffers(t *testing.T) {
	e := newEnv(t, feat(FeatureCsum, virtio.FeatureRingIndirectDesc), false)
	h := hdrWith(hdrLenBase)
	f := frame(iovMax+100, 9)
	bufs := [][]byte{h}
	for i := range f {
		bufs = append(bufs, f[i:i+1])
	}
	head := e.tx.BuildIndirectChain(bufs, nil)
	hdrAt := e.tx.Segment0(head)
	e.be.beforeWrite = func() { e.tx.RAM[hdrAt+1] = 5 } // rewritten after the check
	e.tx.PublishAvail(head)
	e.tx.KickIfNeeded()
	e.waitUsed(e.tx, 1)
	w := e.be.written()
	if len(w) != 1 || !bytes.Equal(w[0], append(append([]byte{}, h...), f...)) {
		t.Fatalf("backend got %d frames; stats %v", len(w), e.dev.Stats().TX)
	}
}
