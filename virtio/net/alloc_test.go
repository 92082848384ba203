package virtionet

import (
	"testing"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// nullBackend is a tap that allocates nothing: every read returns the same
// frame, writes are counted and dropped. For allocation counts, which the
// recording fakeBackend would swamp.
type nullBackend struct {
	frame   []byte // header + frame, what every TryReadv returns
	written int
}

func (b *nullBackend) TryReadv(iovs [][]byte) (int, error) {
	n := 0
	for _, v := range iovs {
		n += copy(v, b.frame[n:])
	}
	return len(b.frame), nil
}

func (b *nullBackend) Writev(iovs [][]byte) (int, error) {
	n := 0
	for _, v := range iovs {
		n += len(v)
	}
	b.written += n
	return n, nil
}

// PollFD: ppoll ignores a negative fd; a read never waits anyway.
func (b *nullBackend) PollFD() int                 { return -1 }
func (b *nullBackend) SetVnetHdrSize(n int) error  { return nil }
func (b *nullBackend) SetOffload(flags uint) error { return nil }
func (b *nullBackend) setFrame(hdr int, f []byte) *nullBackend {
	b.frame = append(make([]byte, hdr), f...)
	return b
}

// stepRig is a device whose RX and TX halves are driven step by step on the
// test goroutine (no I/O goroutines), so an allocation count sees only the
// per-chain and per-frame paths. The driver asks for no interrupts: the
// recording interrupt allocates per signal, the device's decision does not.
func stepRig(t *testing.T, features uint64, be Backend) (*Device, virtio.Activation, []*virtiotest.Driver) {
	t.Helper()
	ds := virtiotest.NewQueues(t, 4<<20, QueueSize, QueueSize)
	d, err := New(be, Config{MAC: testMAC})
	if err != nil {
		t.Fatal(err)
	}
	a := virtiotest.Activation(virtiotest.NewRecordingInterrupt(), features, ds...)
	for _, dr := range ds {
		dr.SetAvailFlags(virtio.AvailFlagNoInterrupt)
	}
	return d, a, ds
}

// TestTXSendNoAlloc: sending a frame (Pop, header check, writev of guest
// memory views, AddUsed) allocates nothing in steady state.
func TestTXSendNoAlloc(t *testing.T) {
	features := feat(FeatureMrgRxBuf, FeatureCsum, FeatureHostTSO4, virtio.FeatureRingIndirectDesc)
	be := &nullBackend{}
	d, a, ds := stepRig(t, features, be)
	tx := newTX(d, a, hdrLen(features), make(chan struct{}))
	f := frame(1514, 1)
	heads := []uint16{
		ds[TXQueue].BuildChain([][]byte{gsoHdr(hdrLenMrg, gsoTCPv4), f}, nil),
		ds[TXQueue].BuildIndirectChain([][]byte{make([]byte, hdrLenMrg), f[:100], f[100:]}, nil),
	}
	send := func() {
		ds[TXQueue].PublishAvail(heads...)
		for range heads {
			c, err := tx.Queue.Pop(tx.Mem)
			if err != nil || c == nil {
				t.Fatalf("Pop = %v, %v", c, err)
			}
			n, err := tx.handle(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Used(c.Head, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	send()
	allocs := testing.AllocsPerRun(200, send)
	if s := d.Stats().TX; s.Frames != 2*202 || s.DropMalformed+s.DropTooLarge != 0 {
		t.Fatalf("stats %v: frames not sent", s)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per 2 frames sent, want 0", allocs)
	}
}

// TestRXDeliverNoAlloc: receiving a frame (Pop, backend read, placing it,
// one used publication) allocates nothing in steady state, with a frame
// merged over two buffers (MRG_RXBUF) and one frame per buffer.
func TestRXDeliverNoAlloc(t *testing.T) {
	for _, tt := range []struct {
		name string
		feat uint64
		bufs []int // buffer sizes posted per frame
	}{
		{"merged", feat(FeatureMrgRxBuf), []int{1024, 1024}},
		{"one chain", 0, []int{hdrLenBase + maxFrame}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := hdrLen(tt.feat)
			be := (&nullBackend{}).setFrame(hdr, frame(1514, 7))
			d, a, ds := stepRig(t, tt.feat, be)
			r := newRX(d, a, hdr, make(chan struct{}))
			var heads []uint16
			for _, n := range tt.bufs {
				heads = append(heads, ds[RXQueue].BuildChain(nil, []int{n}))
			}
			recv := func() {
				ds[RXQueue].PublishAvail(heads...)
				// Pops, reads, delivers, finds the ring empty.
				_, w, err := r.turn(passBudget)
				if err != nil || w.Kind != virtio.WaitRing {
					t.Fatalf("turn = %v, %v; want a wait for chains", w, err)
				}
			}
			recv()
			allocs := testing.AllocsPerRun(200, recv)
			if s := d.Stats().RX; s.Frames != 202 || s.Popped != uint64(202*len(heads)) {
				t.Fatalf("stats %v: frames not delivered", s)
			}
			if allocs != 0 {
				t.Fatalf("%v allocations per frame received, want 0", allocs)
			}
		})
	}
}
