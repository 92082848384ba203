package virtio_test

import (
	"testing"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/qstats"
)

// TestReadRing: ReadRing finds each field where the split ring's layout
// puts it (spec 2.7.6, 2.7.8), for a legacy ring of size 8: avail flags,
// idx, ring[8], used_event; used flags, idx, ring[8], avail_event.
func TestReadRing(t *testing.T) {
	ram := make([]byte, 64<<10)
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
	if err != nil {
		t.Fatal(err)
	}
	q := virtio.NewQueue(8)
	q.Size = 8
	q.DescAddr, q.AvailAddr, q.UsedAddr = virtio.LegacyRingAddrs(1, 8)
	want := qstats.Ring{AvailFlags: 1, AvailIdx: 2, UsedEvent: 3, UsedFlags: 4, UsedIdx: 5, AvailEvent: 6}
	for _, f := range []struct {
		gpa uint64
		v   uint16
	}{{q.AvailAddr, 1}, {q.AvailAddr + 2, 2}, {q.AvailAddr + 4 + 2*8, 3},
		{q.UsedAddr, 4}, {q.UsedAddr + 2, 5}, {q.UsedAddr + 4 + 8*8, 6}} {
		if err := mem.PutUint16(f.gpa, f.v); err != nil {
			t.Fatal(err)
		}
	}
	if got := q.ReadRing(mem); got != want {
		t.Fatalf("ReadRing = %+v, want %+v", got, want)
	}
}
