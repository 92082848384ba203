package virtioconsole

import (
	"encoding/binary"
	"testing"

	"github.com/govm/govm/internal/syncbuf"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// The fuzz rig's guest RAM: receiveq0's ring at page 1, transmitq0's at
// page 8, buffers anywhere.
const (
	fuzzRAM   = 64 << 10
	fuzzPFNRX = 1
	fuzzPFNTX = 8
)

// FuzzConsoleLoop drives the device's real I/O goroutine over hostile
// rings: the input chooses the ring features, both queue sizes, host input
// and the whole guest memory image (both descriptor tables, avail and used
// rings, event fields). Whatever the input, the device must not panic or
// hang (Reset returns), must report only guest errors, must use every
// chain it took exactly once unless a guest error stopped that queue, must
// never give the guest more input than it was given, and must write no
// more output than the guest's transmit chains held.
//
// Input: [0] features (bit 0 EVENT_IDX, 1 INDIRECT_DESC, 2 NOTIFY_ON_EMPTY),
// [1] RX queue size log2, [2] TX queue size log2, [3] host input bytes;
// then the memory (virtiotest.LoadPatches).
func FuzzConsoleLoop(f *testing.F) {
	f.Add([]byte{0, 4, 4, 0})
	f.Add(seedConsoleLoop(0x01, 4, 4, 8))
	f.Add(seedConsoleLoop(0x03, 2, 3, 200))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 4 {
			return
		}
		runConsoleLoop(t, in, false)
	})
}

// The rig is not vacuous: on the well-formed seed the loop sends the
// guest's output and fills its receive buffer with the host's input.
func TestConsoleLoopRigServes(t *testing.T) {
	out, rxUsed, txUsed := runConsoleLoop(t, seedConsoleLoop(0x01, 4, 4, 8), true)
	if out != "guest says hi" || rxUsed != 1 || txUsed != 1 {
		t.Fatalf("output %q, rx used %d, tx used %d", out, rxUsed, txUsed)
	}
}

// seedConsoleLoop builds an input whose receiveq0 holds one 32-byte
// buffer and transmitq0 one chain of "guest says hi".
func seedConsoleLoop(feat, rxLog, txLog, input byte) []byte {
	mem := make([]byte, fuzzRAM)
	le := binary.LittleEndian
	put := func(pfn uint32, sizeLog byte, addr uint64, n uint32, flags uint16) {
		desc, avail, _ := virtio.LegacyRingAddrs(pfn, uint16(1)<<(sizeLog%7))
		le.PutUint64(mem[desc:], addr)
		le.PutUint32(mem[desc+8:], n)
		le.PutUint16(mem[desc+12:], flags)
		le.PutUint16(mem[avail+4:], 0)
		le.PutUint16(mem[avail+2:], 1)
	}
	put(fuzzPFNRX, rxLog, 0xe000, 32, 2) // VRING_DESC_F_WRITE
	copy(mem[0xf000:], "guest says hi")
	put(fuzzPFNTX, txLog, 0xf000, 13, 0)
	return append([]byte{feat, rxLog, txLog, input}, virtiotest.Patches(mem)...)
}

// runConsoleLoop runs one input (virtiotest.LoopRig; settle waits for one
// used chain on each queue, the seed's) and returns the output and the
// chains each queue used.
func runConsoleLoop(t *testing.T, in []byte, settle bool) (string, uint16, uint16) {
	features := virtiotest.FuzzFeatures(in[0])
	r := virtiotest.NewLoopRig(t, fuzzRAM, in[4:], features, []uint32{fuzzPFNRX, fuzzPFNTX},
		[]uint16{1 << (in[1] % 7), 1 << (in[2] % 7)})
	out := &syncbuf.Buffer{}
	d, err := New(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Activate(r.Activation(features)); err != nil {
		t.Fatal(err)
	}
	given := int(in[3])
	if given > 0 {
		go d.Input(make([]byte, given)) // may block for ever: Close ends it
	}
	var want []uint16
	if settle {
		want = []uint16{1, 1}
	}
	r.Run(t, d.Reset, want...)
	if s := d.Stats(); s.In > uint64(given) || s.Out != uint64(len(out.String())) {
		t.Fatalf("stats %+v for %d bytes of input and %d of output", s, given, len(out.String()))
	}
	return out.String(), r.Queues[0].NextUsed(), r.Queues[1].NextUsed()
}
