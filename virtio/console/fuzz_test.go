package virtioconsole

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
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

// runConsoleLoop runs one input and returns the output and the chains each
// queue used; settle waits for both seed chains.
func runConsoleLoop(t *testing.T, in []byte, settle bool) (string, uint16, uint16) {
	ram := make([]byte, fuzzRAM)
	virtiotest.LoadPatches(ram, in[4:])
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
	if err != nil {
		t.Fatal(err)
	}
	features := uint64(0)
	for i, b := range []uint{virtio.FeatureRingEventIdx, virtio.FeatureRingIndirectDesc, virtio.FeatureNotifyOnEmpty} {
		if in[0]&(1<<i) != 0 {
			features |= virtio.Bit(b)
		}
	}
	var qs []*virtio.Queue
	var bells []*virtio.Doorbell
	for i, pfn := range []uint32{fuzzPFNRX, fuzzPFNTX} {
		q := virtio.NewQueue(QueueSize)
		q.Index = i
		q.Size = uint16(1) << (in[1+i] % 7)
		q.DescAddr, q.AvailAddr, q.UsedAddr = virtio.LegacyRingAddrs(pfn, q.Size)
		q.Ready = true
		q.SetFeatures(features)
		if err := q.Validate(mem); err != nil {
			t.Fatal(err)
		}
		bell, err := virtio.NewDoorbell()
		if err != nil {
			t.Fatal(err)
		}
		defer bell.Close() // after the Reset below
		qs, bells = append(qs, q), append(bells, bell)
	}
	out := &syncbuf.Buffer{}
	d, err := New(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	intr := virtiotest.NewRecordingInterrupt()
	if err := d.Activate(virtio.Activation{Mem: mem, Features: features, Queues: qs, Bells: bells, Intr: intr}); err != nil {
		t.Fatal(err)
	}
	given := int(in[3])
	if given > 0 {
		go d.Input(make([]byte, given)) // may block for ever: Close ends it
	}
	for _, b := range bells {
		b.Ring()
	}
	usedIdx := func(q *virtio.Queue) uint16 { u, _ := mem.LoadUint16(q.UsedAddr + 2); return u }
	if settle {
		for deadline := time.Now().Add(10 * time.Second); (usedIdx(qs[0]) != 1 || usedIdx(qs[1]) != 1) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	} else {
		time.Sleep(2 * time.Millisecond)
	}
	reset := make(chan struct{})
	go func() { d.Reset(); close(reset) }()
	select {
	case <-reset:
	case <-time.After(10 * time.Second):
		t.Fatal("Reset did not return: the I/O goroutine hangs")
	}
	errs := intr.Errors()
	for _, err := range errs {
		var ge *virtio.GuestError
		if !errors.As(err, &ge) {
			t.Fatalf("device error %v is not a GuestError", err)
		}
	}
	for _, q := range qs {
		held := uint16(q.InFlight())
		if held > 1 || q.NextUsed()+held != q.NextAvail() {
			t.Fatalf("queue %d: used %d + in flight %d != taken %d (device errors %v)", q.Index, q.NextUsed(), held, q.NextAvail(), errs)
		}
	}
	if s := d.Stats(); s.In > uint64(given) || s.Out != uint64(len(out.String())) {
		t.Fatalf("stats %+v for %d bytes of input and %d of output", s, given, len(out.String()))
	}
	return out.String(), qs[0].NextUsed(), qs[1].NextUsed()
}
