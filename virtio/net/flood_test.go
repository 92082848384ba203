package virtionet

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// TestFlood drives both queues at once through a loopback backend: the
// driver keeps RX buffers posted and sends N frames; every frame must come
// back exactly once, in order, and the driver, which sleeps only on
// interrupts (as a real one does), must never wait more than a second.
func TestFlood(t *testing.T) {
	tests := []struct {
		name   string
		feat   uint64
		n      int
		rxBuf  int
		maxLen int
	}{
		{"mrg event-idx", feat(FeatureMrgRxBuf, virtio.FeatureRingEventIdx, virtio.FeatureRingIndirectDesc), 20000, 128, 400},
		{"plain", feat(virtio.FeatureNotifyOnEmpty), 5000, hdrLenBase + maxFrame, maxFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { flood(t, tt.feat, tt.n, tt.rxBuf, tt.maxLen) })
	}
}

func flood(t *testing.T, features uint64, n, rxBuf, maxLen int) {
	e := newEnv(t, features, true)
	eventIdx := features&virtio.Bit(virtio.FeatureRingEventIdx) != 0
	sent, recv := 0, 0
	var partial []byte // a merged frame being collected
	left := 0          // its buffers still to come
	size := func(i int) int { return 60 + (i*37)%(maxLen-60+1) }
	for recv < n {
		progress := false
		for e.rx.FreeDescs() > 0 {
			h, _ := e.rx.TryBuildChain(nil, []int{rxBuf})
			e.rx.PublishAvail(h)
			progress = true
		}
		e.rx.KickIfNeeded()
		for sent < n && e.tx.FreeDescs() >= 2 {
			e.tx.PublishAvail(e.tx.BuildChain([][]byte{make([]byte, e.hdr), frame(size(sent), uint32(sent))}, nil))
			sent++
			progress = true
		}
		e.tx.KickIfNeeded()
		if len(e.tx.Collect()) > 0 {
			progress = true
		}
		for _, u := range e.rx.Collect() {
			progress = true
			b := u.In[0][:u.Len]
			if left == 0 {
				partial = append(partial[:0], b...)
				left = 1
				if e.hdr == hdrLenMrg {
					left = int(binary.LittleEndian.Uint16(b[numBuffersAt:]))
				}
			} else {
				partial = append(partial, b...)
			}
			if left--; left > 0 {
				continue
			}
			f := partial[e.hdr:]
			if got := seqOf(f); got != uint32(recv) || len(f) != size(recv) || string(f) != string(frame(size(recv), uint32(recv))) {
				t.Fatalf("frame %d: got seq %d len %d (want len %d)", recv, got, len(f), size(recv))
			}
			recv++
		}
		if progress {
			continue
		}
		// Nothing to do: arm interrupts the way virtqueue_enable_cb does
		// and sleep on them.
		ch := e.intr.Changed()
		if eventIdx {
			e.rx.SetUsedEvent(e.rx.LastUsed())
			e.tx.SetUsedEvent(e.tx.LastUsed())
		}
		guestmem.Fence()
		if e.rx.UsedIdx() != e.rx.LastUsed() || e.tx.UsedIdx() != e.tx.LastUsed() {
			continue
		}
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatalf("stalled > 1 s at sent %d recv %d; stats %+v", sent, recv, e.dev.Stats())
		}
	}
	s := e.dev.Stats()
	if s.TX.Frames != uint64(n) || s.RX.Frames != uint64(n) || s.RX.DropTooLarge+s.RX.DropBackend+s.TX.DropMalformed+s.TX.DropTooLarge+s.TX.DropBackend != 0 {
		t.Errorf("stats %+v", s)
	}
	t.Logf("rx %v", s.RX)
	t.Logf("tx %v", s.TX)
}
