package virtio

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/govm/govm/guestmem"
)

// TestChainSlicesBounded: a Chain keeps its slices for the next chain at
// its head for chains of up to retainSegs segments, and drops slices grown
// past 2*retainSegs: a hostile driver's indirect tables of thousands of
// entries, once used (or failed), leave nothing pinned, so the queue's
// memory between chains stays bounded whatever the driver posted. (An
// internal test: virtiotest imports this package.)
func TestChainSlicesBounded(t *testing.T) {
	const table, buf = 0x10000, 0x8000
	ram := make([]byte, 1<<20)
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
	if err != nil {
		t.Fatal(err)
	}
	q := NewQueue(4)
	q.DescAddr, q.AvailAddr, q.UsedAddr = LegacyRingAddrs(1, 4)
	q.Ready = true
	q.SetFeatures(Bit(FeatureRingIndirectDesc))
	putDesc := func(at, addr uint64, n uint32, flags, next uint16) {
		binary.LittleEndian.PutUint64(ram[at:], addr)
		binary.LittleEndian.PutUint32(ram[at+8:], n)
		binary.LittleEndian.PutUint16(ram[at+12:], flags)
		binary.LittleEndian.PutUint16(ram[at+14:], next)
	}
	avail := uint16(0)
	// offer publishes head 0 as an indirect table of n one-byte readable
	// buffers, the last at addr last.
	offer := func(n int, last uint64) {
		for i := range n {
			addr, flags := uint64(buf), uint16(DescFlagNext)
			if i == n-1 {
				addr, flags = last, 0
			}
			putDesc(table+16*uint64(i), addr, 1, flags, uint16(i+1))
		}
		putDesc(q.DescAddr, table, uint32(16*n), DescFlagIndirect, 0)
		binary.LittleEndian.PutUint16(ram[q.availRingAddr(avail&3):], 0)
		avail++
		binary.LittleEndian.PutUint16(ram[q.AvailAddr+2:], avail)
	}
	kept := func() int { c := &q.chains[0]; return cap(c.segs) + cap(c.out) + cap(c.in) }

	for _, n := range []int{retainSegs, 2*retainSegs + 1, 4096} {
		offer(n, buf)
		c, err := q.Pop(mem)
		if err != nil || c == nil || len(c.Segments()) != n {
			t.Fatalf("%d entries: Pop = %v, %v", n, c, err)
		}
		if err := q.AddUsed(mem, 0, 0); err != nil {
			t.Fatal(err)
		}
		switch k := kept(); {
		case n <= retainSegs && k < 2*n:
			t.Errorf("%d segments: capacity %d kept, want the slices kept for reuse", n, k)
		case n > 2*retainSegs && k != 0:
			t.Errorf("%d segments: capacity %d kept after use, want 0", n, k)
		}
	}
	// A long table whose last buffer lies outside RAM: the walk fails
	// after growing the slices, and keeps nothing.
	offer(4096, 1<<40)
	if _, err := q.Pop(mem); !errors.Is(err, ErrDescBuffer) {
		t.Fatalf("Pop = %v, want ErrDescBuffer", err)
	}
	if k := kept(); k != 0 {
		t.Errorf("failed 4096-entry walk: capacity %d kept, want 0", k)
	}
}
