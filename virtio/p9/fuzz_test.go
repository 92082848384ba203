package virtio9p

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/govm/govm/internal/sharefs"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// The fuzz rig's guest RAM: the ring at page 1, buffers anywhere.
const (
	fuzzRAM = 64 << 10
	fuzzPFN = 1
)

// FuzzNinePLoop drives the device's real I/O goroutine, and the 9P server
// behind it, over hostile rings: the input chooses the ring features, the
// queue size and the whole guest memory image (descriptors, avail and used
// rings, and the 9P messages in the buffers). Whatever the input, nothing
// may panic or hang (Reset returns), only guest errors may be reported,
// every chain taken is used once unless a guest error stopped the queue,
// and nothing beside the share changes.
//
// Input: [0] features (virtiotest.FuzzFeatures), [1] queue size
// log2; then the memory (virtiotest.LoadPatches).
func FuzzNinePLoop(f *testing.F) {
	f.Add([]byte{0, 4})
	f.Add(seedNinePLoop(0x01, 4))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		runNinePLoop(t, in, 0)
	})
}

// The rig is not vacuous: on the seed the device answers Tversion.
func TestNinePLoopRigServes(t *testing.T) {
	if ram := runNinePLoop(t, seedNinePLoop(0x01, 4), 1); ram[0x9004] != 101 { // Rversion
		t.Fatalf("answer type %d, want Rversion (101)", ram[0x9004])
	}
}

// seedNinePLoop builds an input whose ring holds one Tversion chain:
// the message at 0x8000, 256 writable bytes at 0x9000.
func seedNinePLoop(feat, sizeLog byte) []byte {
	mem := make([]byte, fuzzRAM)
	le := binary.LittleEndian
	msg := le.AppendUint32(nil, 21)
	msg = append(msg, 100, 0xff, 0xff)
	msg = le.AppendUint32(msg, 8192)
	msg = append(msg, 8, 0, '9', 'P', '2', '0', '0', '0', '.', 'L')
	copy(mem[0x8000:], msg)
	size := uint16(1) << (sizeLog % 7)
	desc, avail, _ := virtio.LegacyRingAddrs(fuzzPFN, size)
	put := func(i int, addr uint64, n uint32, flags, next uint16) {
		d := mem[desc+16*uint64(i):]
		le.PutUint64(d, addr)
		le.PutUint32(d[8:], n)
		le.PutUint16(d[12:], flags)
		le.PutUint16(d[14:], next)
	}
	put(0, 0x8000, uint32(len(msg)), 1, 1) // NEXT
	put(1, 0x9000, 256, 2, 0)              // WRITE
	le.PutUint16(mem[avail+2:], 1)
	return append([]byte{feat, sizeLog}, virtiotest.Patches(mem)...)
}

// runNinePLoop runs one input (virtiotest.LoopRig: want > 0 waits for
// that many used chains), checks nothing appeared beside the share, and
// returns guest RAM.
func runNinePLoop(t *testing.T, in []byte, want uint16) []byte {
	base := t.TempDir()
	share, beside := filepath.Join(base, "share"), filepath.Join(base, "beside")
	for _, d := range []string{share, beside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(beside, filepath.Join(share, "out")); err != nil {
		t.Fatal(err)
	}
	sh, err := sharefs.New(sharefs.Config{Root: share})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	features := virtio.Bit(FeatureMountTag) | virtiotest.FuzzFeatures(in[0])
	r := virtiotest.NewLoopRig(t, fuzzRAM, in[2:], features, []uint32{fuzzPFN}, []uint16{1 << (in[1] % 7)})
	d, err := New("fuzz", sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Activate(r.Activation(features)); err != nil {
		t.Fatal(err)
	}
	r.Run(t, d.Reset, want)
	if ents, _ := os.ReadDir(beside); len(ents) != 0 {
		t.Fatalf("files appeared beside the share: %v", ents)
	}
	return r.RAM
}
