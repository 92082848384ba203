package virtiorng

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// counter is a Source whose bytes are 0, 1, 2, ... (mod 256), so a test
// can tell which bytes went where.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range p {
		p[i] = byte(c.n)
		c.n++
	}
	return len(p), nil
}

const ringFeatures = 1<<virtio.FeatureRingEventIdx | 1<<virtio.FeatureRingIndirectDesc

// start activates a device on a fresh driver with ring features f and
// resets it at the end of the test.
func start(t *testing.T, cfg Config, f uint64) (*Device, *virtiotest.Driver, *virtiotest.RecordingInterrupt) {
	t.Helper()
	d := New(cfg)
	drv := virtiotest.New(t, 1<<20, QueueSize)
	intr := virtiotest.NewRecordingInterrupt()
	if err := d.Activate(virtiotest.Activation(intr, f, drv)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Reset)
	return d, drv, intr
}

// TestFills: each posted buffer comes back full of the source's bytes, in
// order, with its used length the bytes written (spec 5.4.6.1, 2.7.8):
// a 64-byte buffer (Linux's), a 1-byte one, and a chain of two buffers
// (indirect when negotiated).
func TestFills(t *testing.T) {
	for _, f := range []uint64{0, ringFeatures} {
		d, drv, intr := start(t, Config{Source: &counter{}}, f)
		drv.AddChain(nil, []int{64})
		drv.AddChain(nil, []int{1})
		if f&(1<<virtio.FeatureRingIndirectDesc) != 0 {
			drv.AddIndirectChain(nil, []int{3, 5})
		} else {
			drv.AddChain(nil, []int{3, 5})
		}
		drv.Kick()
		if !drv.WaitUsedIdx(3, 5*time.Second) {
			t.Fatalf("features %#x: used %d of 3", f, drv.UsedIdx())
		}
		u := drv.Collect()
		next := 0
		for i, want := range []uint32{64, 1, 8} {
			if u[i].Len != want {
				t.Fatalf("features %#x: chain %d used length %d, want %d", f, i, u[i].Len, want)
			}
			for _, b := range u[i].In {
				for _, v := range b {
					if v != byte(next) {
						t.Fatalf("features %#x: chain %d byte %d = %d, want %d", f, i, next, v, byte(next))
					}
					next++
				}
			}
		}
		if d.Bytes() != 73 || !intr.WaitFor(5*time.Second, func() bool { return intr.Used(0) > 0 }) {
			t.Fatalf("features %#x: %d bytes counted, %d interrupts", f, d.Bytes(), intr.Used(0))
		}
	}
}

// TestLargeBufferGetsAPrefix: a buffer larger than maxChunk gets maxChunk
// bytes (the device MAY use less than the whole buffer), so one chain
// cannot hold the loop.
func TestLargeBufferGetsAPrefix(t *testing.T) {
	_, drv, _ := start(t, Config{}, 0)
	drv.AddChain(nil, []int{maxChunk + 4096})
	drv.Kick()
	if !drv.WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("not used")
	}
	if u := drv.Collect(); u[0].Len != maxChunk {
		t.Fatalf("used length %d, want %d", u[0].Len, maxChunk)
	}
}

// TestRateLimit: with Rate 1000 B/s the guest gets at most one second's
// worth at once, then bytes only as time passes: a buffer posted once the
// allowance is spent stays posted (Linux's driver waits for it) until the
// bucket holds enough to fill it whole, and the total never outruns the
// rate.
func TestRateLimit(t *testing.T) {
	const rate = 1000
	begin := time.Now()
	d, drv, _ := start(t, Config{Rate: rate}, 0)
	drv.AddChain(nil, []int{4096})
	drv.Kick()
	if !drv.WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("first buffer not used")
	}
	if u := drv.Collect(); u[0].Len != rate {
		t.Fatalf("first buffer got %d bytes, want the bucket's %d", u[0].Len, rate)
	}
	for i := 0; i < 3; i++ {
		drv.AddChain(nil, []int{64})
	}
	drv.Kick()
	if !drv.WaitUsedIdx(4, 5*time.Second) {
		t.Fatalf("later buffers not used after the refill: %d of 4", drv.UsedIdx())
	}
	for i, u := range drv.Collect() {
		if u.Len != 64 {
			t.Fatalf("buffer %d after the refill got %d bytes, want all 64 (no trickle of partial answers)", i+2, u.Len)
		}
	}
	elapsed := time.Since(begin)
	if limit := rate + uint64(elapsed.Seconds()*rate) + 1; d.Bytes() > limit {
		t.Fatalf("%d bytes in %v, more than the %d the rate allows", d.Bytes(), elapsed, limit)
	}
}

// TestBadChainStopsQueue: a chain with a driver-readable buffer (spec
// 5.4.6.1: the driver MUST NOT post one) is a guest error: the device
// reports it (NEEDS_RESET) and serves no more.
func TestBadChainStopsQueue(t *testing.T) {
	_, drv, intr := start(t, Config{}, 0)
	drv.AddChain([][]byte{{1, 2}}, []int{8})
	drv.Kick()
	if !intr.WaitFor(5*time.Second, func() bool { return len(intr.Errors()) > 0 }) {
		t.Fatal("no device error")
	}
	var ge *virtio.GuestError
	if err := intr.Errors()[0]; !errors.As(err, &ge) || !errors.Is(err, ErrBadRequest) {
		t.Fatalf("device error %v, want a GuestError wrapping ErrBadRequest", err)
	}
	drv.AddChain(nil, []int{8})
	drv.Kick()
	if drv.WaitUsedIdx(1, 50*time.Millisecond) {
		t.Fatal("a stopped queue served a request")
	}
}

// TestDevice: the identity the transport presents (type 4, no config
// space, no features of its own) and a second Activate refused.
func TestDevice(t *testing.T) {
	d, drv, intr := start(t, Config{}, 0)
	if d.Type() != virtio.DeviceRNG || d.Features() != virtio.RingFeatures || len(d.QueueMaxSizes()) != 1 {
		t.Fatalf("type %d features %#x queues %v", d.Type(), d.Features(), d.QueueMaxSizes())
	}
	b := []byte{1, 2, 3}
	d.ReadConfig(0, b)
	if b[0]|b[1]|b[2] != 0 {
		t.Fatalf("config reads %v, want zeros", b)
	}
	if err := d.Activate(virtiotest.Activation(intr, 0, drv)); !errors.Is(err, virtio.ErrActive) {
		t.Fatalf("second Activate = %v, want ErrActive", err)
	}
}
