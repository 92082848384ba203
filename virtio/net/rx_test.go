package virtionet

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
)

// hdrWith returns a vnet header of length n with recognisable offload
// fields (flags NEEDS_CSUM, csum_start 34, csum_offset 16), as the tap
// would write for a partially checksummed frame.
func hdrWith(n int) []byte {
	h := make([]byte, n)
	h[0] = hdrFNeedsCsum
	binary.LittleEndian.PutUint16(h[6:], 34)
	binary.LittleEndian.PutUint16(h[8:], 16)
	return h
}

func TestRXOneChainPerFrame(t *testing.T) {
	e := newEnv(t, feat(FeatureGuestCsum), false)
	for i := 0; i < 3; i++ {
		e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
	}
	e.rx.KickIfNeeded()
	var want [][]byte
	for i, n := range []int{60, 1514, 200} {
		in := append(hdrWith(hdrLenBase), frame(n, uint32(i))...)
		want = append(want, in)
		e.be.inject(in)
	}
	e.waitUsed(e.rx, 3)
	got := e.rx.Collect()
	for i, u := range got {
		if int(u.Len) != len(want[i]) || !bytes.Equal(u.In[0][:u.Len], want[i]) {
			t.Errorf("frame %d: len %d, % x...; want len %d", i, u.Len, u.In[0][:16], len(want[i]))
		}
	}
	s := e.dev.Stats().RX
	if s.Frames != 3 || s.Bytes != 60+1514+200 || s.Popped != 3 || s.DropTooLarge != 0 {
		t.Errorf("stats %v", s)
	}
	if e.intr.Used(RXQueue) == 0 {
		t.Errorf("no RX interrupt")
	}
}

// TestRXBackendWaits: holding a buffer with the backend empty, the device
// waits on the backend and counts the wait (RX signals before each such
// wait, so their number bounds its interrupts; govm run --stats shows it).
func TestRXBackendWaits(t *testing.T) {
	e := newEnv(t, 0, false)
	e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
	e.rx.KickIfNeeded()
	deadline := time.Now().Add(2 * time.Second)
	for e.dev.Stats().RX.BackendWaits < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := e.dev.Stats().RX; s.BackendWaits < 1 || s.Popped != 1 || s.Frames != 0 {
		t.Errorf("holding a buffer, backend empty: stats %v, want a backend wait", s)
	}
	e.be.inject(append(hdrWith(hdrLenBase), frame(60, 1)...))
	e.waitUsed(e.rx, 1)
}

func TestRXMergeable(t *testing.T) {
	e := newEnv(t, feat(FeatureMrgRxBuf), false)
	for i := 0; i < 4; i++ {
		e.rx.AddChain(nil, []int{100})
	}
	e.rx.KickIfNeeded()
	big := append(hdrWith(hdrLenMrg), frame(250, 7)...) // 262 bytes: 100+100+62
	e.be.inject(big)
	e.waitUsed(e.rx, 3)
	got := e.rx.Collect()
	if len(got) != 3 || got[0].Len != 100 || got[1].Len != 100 || got[2].Len != 62 {
		t.Fatalf("used lens %v, want 100 100 62", got)
	}
	var joined []byte
	for _, u := range got {
		joined = append(joined, u.In[0][:u.Len]...)
	}
	if nb := binary.LittleEndian.Uint16(joined[numBuffersAt:]); nb != 3 {
		t.Errorf("num_buffers %d, want 3", nb)
	}
	binary.LittleEndian.PutUint16(big[numBuffersAt:], 3)
	if !bytes.Equal(joined, big) {
		t.Errorf("merged frame differs")
	}
	// A small frame takes the remaining buffer, num_buffers 1.
	small := append(hdrWith(hdrLenMrg), frame(60, 8)...)
	e.be.inject(small)
	e.waitUsed(e.rx, 4)
	got = e.rx.Collect()
	if len(got) != 1 || int(got[0].Len) != len(small) || binary.LittleEndian.Uint16(got[0].In[0][numBuffersAt:]) != 1 {
		t.Errorf("small frame: %+v", got)
	}
}

// TestRXNoBuffers: a frame that arrives while the driver has posted no
// (or not enough) buffers waits for them, and is delivered after the kick.
func TestRXNoBuffers(t *testing.T) {
	for _, mrg := range []bool{false, true} {
		f := uint64(0)
		bufLen, chains := hdrLenBase+maxFrame, 1
		if mrg {
			f, bufLen, chains = feat(FeatureMrgRxBuf), 200, 3
		}
		e := newEnv(t, f, false)
		in := append(hdrWith(e.hdr), frame(500, 1)...)
		e.be.inject(in)
		if mrg {
			// One buffer: the device reads the frame and holds it.
			e.rx.AddChain(nil, []int{bufLen})
			e.rx.KickIfNeeded()
		}
		deadline := time.Now().Add(2 * time.Second)
		for e.dev.Stats().RX.BufferWaits < 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		s := e.dev.Stats().RX
		if s.BufferWaits < 1 || s.Frames != 0 || s.DropTooLarge+s.DropBackend != 0 || e.rx.UsedIdx() != 0 {
			t.Fatalf("mrg=%v before buffers: stats %v used %d", mrg, s, e.rx.UsedIdx())
		}
		if mrg && e.be.queued() != 0 {
			t.Errorf("mrg: frame not read into the held buffer")
		}
		if !mrg && e.be.queued() != 1 {
			t.Errorf("no buffers, yet the device read from the backend")
		}
		for i := 0; i < chains-btoi(mrg); i++ {
			e.rx.AddChain(nil, []int{bufLen})
		}
		if !e.rx.KickIfNeeded() {
			t.Errorf("mrg=%v: device did not ask for a kick while waiting for buffers", mrg)
		}
		e.waitUsed(e.rx, uint16(chains))
		var joined []byte
		for _, u := range e.rx.Collect() {
			joined = append(joined, u.In[0][:u.Len]...)
		}
		if mrg {
			binary.LittleEndian.PutUint16(in[numBuffersAt:], 3)
		}
		if !bytes.Equal(joined, in) {
			t.Errorf("mrg=%v: delivered frame differs (%d bytes, want %d)", mrg, len(joined), len(in))
		}
		if s := e.dev.Stats().RX; s.Frames != 1 || e.rx.Queue.Watch().KicksTaken.Load() < 1 {
			t.Errorf("mrg=%v: stats %v", mrg, s)
		}
	}
}

// TestRXNotStarvedBeforeFirstBuffer: frames pending before the driver has
// posted any receive buffer (Linux posts them only when the interface
// comes up) are not RX starvation; once it posted and used them all, the
// same wait is.
func TestRXNotStarvedBeforeFirstBuffer(t *testing.T) {
	e := newEnv(t, 0, false)
	e.be.inject(append(hdrWith(e.hdr), frame(60, 1)...))
	deadline := time.Now().Add(2 * time.Second)
	for e.dev.Stats().RX.BufferWaits < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w := e.rx.Queue.Watch()
	if e.dev.Stats().RX.BufferWaits < 1 || w.NeedBuffers.Load() {
		t.Fatalf("before any buffer: %d buffer waits, NeedBuffers %v; want a wait that is not starvation",
			e.dev.Stats().RX.BufferWaits, w.NeedBuffers.Load())
	}
	e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
	e.rx.KickIfNeeded()
	e.waitUsed(e.rx, 1)
	e.be.inject(append(hdrWith(e.hdr), frame(60, 2)...))
	deadline = time.Now().Add(2 * time.Second)
	for !w.NeedBuffers.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !w.NeedBuffers.Load() {
		t.Errorf("buffers used up with a frame pending: NeedBuffers false, want true")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRXTooLarge: without MRG_RXBUF a frame larger than the chain is
// dropped and counted; the chain serves the next frame.
func TestRXTooLarge(t *testing.T) {
	e := newEnv(t, 0, false)
	e.rx.AddChain(nil, []int{100})
	e.rx.KickIfNeeded()
	e.be.inject(append(hdrWith(hdrLenBase), frame(500, 1)...))
	ok := append(hdrWith(hdrLenBase), frame(90, 2)...)
	e.be.inject(ok)
	e.waitUsed(e.rx, 1)
	got := e.rx.Collect()
	if int(got[0].Len) != len(ok) || !bytes.Equal(got[0].In[0][:got[0].Len], ok) {
		t.Errorf("second frame not delivered intact")
	}
	if s := e.dev.Stats().RX; s.DropTooLarge != 1 || s.Frames != 1 {
		t.Errorf("stats %v", s)
	}
}

// TestRXGuestError: a corrupt RX ring stops the queue with a DeviceError.
func TestRXGuestError(t *testing.T) {
	e := newEnv(t, 0, false)
	e.rx.SetAvailIdx(QueueSize + 5)
	e.rx.Kick()
	if !e.intr.WaitFor(2*time.Second, func() bool { return len(e.intr.Errors()) == 1 }) {
		t.Fatalf("no DeviceError for an avail idx jump")
	}
	if err := e.intr.Errors()[0]; !errorsIs(err, virtio.ErrAvailIdx) {
		t.Errorf("error %v", err)
	}
}

// TestRXYieldsInAFlood: RX that finds the tap empty after reading frames
// in a turn (a flood it caught up with) yields the CPU and reads once more
// before it sleeps, and takes the frame the sender wrote meanwhile without
// waiting on the tap; after a single frame (ping -f) it sleeps at once.
func TestRXYieldsInAFlood(t *testing.T) {
	for _, burst := range []int{gatherAfter, gatherAfter - 1} {
		wantYield, wantWaits := uint64(1), uint64(1)
		if burst < gatherAfter {
			wantYield, wantWaits = 0, 2
		}
		e := newEnv(t, 0, false)
		late := append(hdrWith(hdrLenBase), frame(60, 99)...)
		e.be.mu.Lock()
		e.be.onEmpty = func() []byte { return late }
		e.be.mu.Unlock()
		for i := 0; i < burst; i++ {
			e.be.inject(append(hdrWith(hdrLenBase), frame(60, uint32(i))...))
		}
		// One buffer more than frames, so RX ends waiting on the tap.
		for i := 0; i < burst+2; i++ {
			e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
		}
		e.rx.KickIfNeeded()
		e.waitUsed(e.rx, uint16(burst+1))
		deadline := time.Now().Add(2 * time.Second)
		for e.dev.Stats().RX.BackendWaits < wantWaits && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if s := e.dev.Stats().RX; s.Frames != uint64(burst+1) || s.YieldReads != wantYield || s.BackendWaits != wantWaits {
			t.Errorf("burst of %d, then a frame as the tap is found empty: stats %v; want yield_reads %d, backend_waits %d",
				burst, s, wantYield, wantWaits)
		}
	}
}
