package virtio_test

import (
	"testing"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// steadyRing is a driver with one chain of each shape the devices see,
// built once: a virtio-net RX buffer (one writable descriptor), a
// virtio-blk read (header, two data buffers, status) and a TX frame in an
// indirect table. Re-publishing their heads replays the steady state of a
// driver that recycles its descriptors, without allocating on the driver
// side.
func steadyRing(t testing.TB) (*virtiotest.Driver, []uint16) {
	d := virtiotest.New(t, memSize, 16)
	d.SetFeatures(indirectFeatures)
	heads := []uint16{
		d.BuildChain(nil, []int{1526}),
		d.BuildChain([][]byte{make([]byte, 16)}, []int{2048, 2048, 1}),
		d.BuildIndirectChain([][]byte{make([]byte, 12), make([]byte, 64), make([]byte, 1400)}, nil),
	}
	return d, heads
}

// cycle publishes heads, pops them all (so they are in flight together, as
// virtio-net RX holds chains), reads and writes each through its Reader and
// Writer, and returns them with one AddUsedBatch.
func cycle(t testing.TB, d *virtiotest.Driver, heads []uint16, used []virtio.UsedElem, buf []byte) {
	d.PublishAvail(heads...)
	used = used[:0]
	for range heads {
		c, err := d.Queue.Pop(d.Mem)
		if err != nil || c == nil {
			t.Fatalf("Pop = %v, %v", c, err)
		}
		if _, err := c.Reader().Read(buf); err != nil && c.ReadableLen() > 0 {
			t.Fatal(err)
		}
		c.Writer().Write(buf[:min(uint64(len(buf)), c.WritableLen())])
		used = append(used, virtio.UsedElem{Head: c.Head, Len: c.Written()})
	}
	if err := d.Queue.AddUsedBatch(d.Mem, used); err != nil {
		t.Fatal(err)
	}
}

// TestPopAddUsedNoAlloc: once every head has been used once, taking chains
// and returning them allocates nothing. Pop runs once per chain on every
// device's data path; a new Chain (and its grown slices) per Pop was ~1.5%
// of govm's CPU under BenchmarkNet, plus the GC work.
func TestPopAddUsedNoAlloc(t *testing.T) {
	d, heads := steadyRing(t)
	used := make([]virtio.UsedElem, 0, len(heads))
	buf := make([]byte, 64)
	cycle(t, d, heads, used, buf) // first use of each head sizes its slices
	allocs := testing.AllocsPerRun(200, func() {
		cycle(t, d, heads, used, buf)
		// And one at a time, as the serve loop does.
		d.PublishAvail(heads[1])
		c, err := d.Queue.Pop(d.Mem)
		if err != nil || c == nil {
			t.Fatalf("Pop = %v, %v", c, err)
		}
		if err := d.Queue.AddUsed(d.Mem, c.Head, 1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 4 Pop+AddUsed, want 0", allocs)
	}
}

// BenchmarkPopAddUsed is one Pop and one AddUsed of a chain shaped like
// each device's, in steady state.
func BenchmarkPopAddUsed(b *testing.B) {
	for i, name := range []string{"rx-1seg", "blk-4seg", "tx-indirect-3"} {
		b.Run(name, func(b *testing.B) {
			d, heads := steadyRing(b)
			h := heads[i : i+1]
			b.ReportAllocs()
			for b.Loop() {
				d.PublishAvail(h...)
				c, err := d.Queue.Pop(d.Mem)
				if err != nil || c == nil {
					b.Fatalf("Pop = %v, %v", c, err)
				}
				if err := d.Queue.AddUsed(d.Mem, c.Head, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
