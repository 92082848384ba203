package virtiorng

import (
	"encoding/binary"
	"testing"

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

// runRNGLoop runs one input (virtiotest.LoopRig: want > 0 waits for that
// many used chains) and returns the chains used.
func runRNGLoop(t *testing.T, in []byte, want uint16) uint16 {
	features := virtiotest.FuzzFeatures(in[0])
	r := virtiotest.NewLoopRig(t, fuzzRAM, in[2:], features, []uint32{fuzzPFN}, []uint16{1 << (in[1] % 7)})
	src := &counter{}
	cfg := Config{Source: src}
	if in[0]&8 != 0 {
		cfg.Rate = 100
		r.MayHold = true // a buffer the rate cannot fill yet waits (see turn)
	}
	d := New(cfg)
	if err := d.Activate(r.Activation(features)); err != nil {
		t.Fatal(err)
	}
	r.Run(t, d.Reset, want)
	if uint64(src.n) != d.Bytes() {
		t.Fatalf("%d bytes read from the source, %d counted as given", src.n, d.Bytes())
	}
	return r.Queues[0].NextUsed()
}
