package virtiorng

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// The fuzz rig's guest RAM: the ring at page 1, buffers anywhere.
const (
	fuzzRAM = 64 << 10
	fuzzPFN = 1
)

// FuzzRNGLoop drives the device's real I/O goroutine over hostile rings:
// the input chooses the ring features, the queue size, a rate limit or
// none, and the whole guest memory image (descriptor table, avail and used
// rings, event fields). Whatever the input, the device must not panic or
// hang (Reset returns), must report only guest errors, must use every chain
// it took exactly once unless a guest error stopped the queue, and must
// give no more bytes than it counted.
//
// Input: [0] features (bit 0 EVENT_IDX, 1 INDIRECT_DESC, 2 NOTIFY_ON_EMPTY,
// 3 rate-limited), [1] queue size log2; then the memory
// (virtiotest.LoadPatches).
func FuzzRNGLoop(f *testing.F) {
	f.Add([]byte{0, 6})
	f.Add(seedRNGLoop(0x01, 4))
	f.Add(seedRNGLoop(0x0b, 2))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		runRNGLoop(t, in, 0)
	})
}

// The rig is not vacuous: on the well-formed seed the real loop fills all
// three buffers.
func TestRNGLoopRigServes(t *testing.T) {
	if used := runRNGLoop(t, seedRNGLoop(0x01, 4), 3); used != 3 {
		t.Fatalf("%d buffers used, want 3", used)
	}
}

// seedRNGLoop builds an input whose ring holds three writable buffers of
// 64, 16 and 1 bytes.
func seedRNGLoop(feat, sizeLog byte) []byte {
	mem := make([]byte, fuzzRAM)
	size := uint16(1) << (sizeLog % 8)
	desc, avail, _ := virtio.LegacyRingAddrs(fuzzPFN, size)
	le := binary.LittleEndian
	for i, n := range []uint32{64, 16, 1} {
		d := mem[desc+16*uint64(i):]
		le.PutUint64(d, 0x8000+uint64(i)*0x100)
		le.PutUint32(d[8:], n)
		le.PutUint16(d[12:], 2) // VRING_DESC_F_WRITE
		le.PutUint16(mem[avail+4+2*uint64(i):], uint16(i))
	}
	le.PutUint16(mem[avail+2:], 3)
	return append([]byte{feat, sizeLog}, virtiotest.Patches(mem)...)
}

// runRNGLoop runs one input; want > 0 waits for that many used chains,
// otherwise until the used idx stops moving. It returns the chains used.
func runRNGLoop(t *testing.T, in []byte, want uint16) uint16 {
	feat, sizeLog := in[0], in[1]
	ram := make([]byte, fuzzRAM)
	virtiotest.LoadPatches(ram, in[2:])
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
	if err != nil {
		t.Fatal(err)
	}
	features := uint64(0)
	for i, b := range []uint{virtio.FeatureRingEventIdx, virtio.FeatureRingIndirectDesc, virtio.FeatureNotifyOnEmpty} {
		if feat&(1<<i) != 0 {
			features |= virtio.Bit(b)
		}
	}
	q := virtio.NewQueue(QueueSize)
	q.Size = uint16(1) << (sizeLog % 7)
	q.DescAddr, q.AvailAddr, q.UsedAddr = virtio.LegacyRingAddrs(fuzzPFN, q.Size)
	q.Ready = true
	q.SetFeatures(features)
	if err := q.Validate(mem); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Source: &counter{}}
	if feat&8 != 0 {
		cfg.Rate = 100
	}
	d := New(cfg)
	bell, err := virtio.NewDoorbell()
	if err != nil {
		t.Fatal(err)
	}
	defer bell.Close() // after the Reset below
	intr := virtiotest.NewRecordingInterrupt()
	if err := d.Activate(virtio.Activation{Mem: mem, Features: features, Queues: []*virtio.Queue{q},
		Bells: []*virtio.Doorbell{bell}, Intr: intr}); err != nil {
		t.Fatal(err)
	}
	bell.Ring()
	usedIdx := func() uint16 { u, _ := mem.LoadUint16(q.UsedAddr + 2); return u }
	if want != 0 {
		for deadline := time.Now().Add(10 * time.Second); usedIdx() != want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	} else {
		last, stable := usedIdx(), 0
		for deadline := time.Now().Add(50 * time.Millisecond); stable < 5 && time.Now().Before(deadline); {
			time.Sleep(200 * time.Microsecond)
			if now := usedIdx(); now == last {
				stable++
			} else {
				last, stable = now, 0
			}
		}
	}
	reset := make(chan struct{})
	go func() { d.Reset(); close(reset) }()
	select {
	case <-reset:
	case <-time.After(10 * time.Second):
		t.Fatalf("Reset did not return: the I/O goroutine hangs (used idx %d, next avail %d)", usedIdx(), q.NextAvail())
	}
	errs := intr.Errors()
	for _, err := range errs {
		var ge *virtio.GuestError
		if !errors.As(err, &ge) {
			t.Fatalf("device error %v is not a GuestError", err)
		}
	}
	held := uint16(q.InFlight())
	if held > 1 || (held == 1 && len(errs) == 0) || q.NextUsed()+held != q.NextAvail() {
		t.Fatalf("used %d + in flight %d != taken %d (device errors %v)", q.NextUsed(), held, q.NextAvail(), errs)
	}
	src := cfg.Source.(*counter)
	if uint64(src.n) != d.Bytes() {
		t.Fatalf("%d bytes read from the source, %d counted as given", src.n, d.Bytes())
	}
	return q.NextUsed()
}
