package virtionet

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// TestRXHeadPostedTwice: a hostile driver offers a receive buffer's head
// again while RX still holds it (popped, waiting for a frame), after
// shrinking its descriptor. RX counts the room of the chains it holds
// (heldRoom); had the queue rebuilt the held chain, that count would say
// 1024 bytes where 64 are, and placing a frame would index past the held
// chains. Instead the queue refuses the head (virtio.ErrHeadInFlight), RX
// reports the GuestError and stops, nothing panics, and after a device
// reset the same head works again.
func TestRXHeadPostedTwice(t *testing.T) {
	features := feat(FeatureMrgRxBuf)
	e := newEnv(t, features, false)
	head := e.rx.AddChain(nil, []int{1024})
	e.rx.KickIfNeeded()
	for deadline := time.Now().Add(2 * time.Second); e.dev.Stats().RX.Popped < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("RX did not take the buffer: %v", e.dev.Stats().RX)
		}
		time.Sleep(time.Millisecond)
	}
	// Same head, now 64 bytes, then a fresh buffer, then a frame that
	// needs more than the held 1024 bytes.
	addr := e.rx.Segment0(head)
	e.rx.SetDesc(head, addr, 64, virtio.DescFlagWrite, 0)
	e.rx.PublishAvail(head)
	e.rx.AddChain(nil, []int{512})
	e.rx.KickIfNeeded()
	e.be.inject(append(hdrWith(hdrLenMrg), frame(1500, 1)...))

	var ge *virtio.GuestError
	for deadline := time.Now().Add(2 * time.Second); ; {
		if errs := e.intr.Errors(); len(errs) > 0 {
			if len(errs) != 1 || !errors.As(errs[0], &ge) || !errors.Is(errs[0], virtio.ErrHeadInFlight) ||
				ge.Queue != RXQueue || !ge.HeadValid || ge.Head != head {
				t.Fatalf("device errors %v; want one GuestError ErrHeadInFlight, queue %d head %d", errs, RXQueue, head)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no device error; RX %v, used idx %d", e.dev.Stats().RX, e.rx.UsedIdx())
		}
		time.Sleep(time.Millisecond)
	}
	if e.rx.UsedIdx() != 0 || e.dev.Stats().RX.Frames != 0 {
		t.Fatalf("a frame was delivered into the chains: used idx %d, RX %v", e.rx.UsedIdx(), e.dev.Stats().RX)
	}

	// Reset (status 0, rings set up again): the head held at the reset
	// is the driver's again, and RX works.
	e.dev.Reset()
	e.rx.Reset()
	e.tx.Reset()
	e.be.mu.Lock()
	e.be.toGuest = nil
	e.be.mu.Unlock()
	if err := e.dev.Activate(virtiotest.Activation(e.intr, features, e.rx, e.tx)); err != nil {
		t.Fatal(err)
	}
	if h := e.rx.AddChain(nil, []int{hdrLenMrg + maxFrame}); h != head {
		t.Fatalf("driver posted head %d, want the formerly held %d", h, head)
	}
	e.rx.KickIfNeeded()
	in := append(hdrWith(hdrLenMrg), frame(1500, 2)...)
	e.be.inject(in)
	e.waitUsed(e.rx, 1)
	u := e.rx.Collect()
	in[numBuffersAt] = 1 // num_buffers, written by the device
	if len(u) != 1 || u[0].ID != head || !bytes.Equal(u[0].In[0][:u[0].Len], in) {
		t.Fatalf("after reset: used %+v", u)
	}
	if n := len(e.intr.Errors()); n != 1 {
		t.Fatalf("%d device errors after reset, want the 1 from before", n)
	}
}
