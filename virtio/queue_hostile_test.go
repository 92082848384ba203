package virtio_test

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

const (
	fNext     = virtio.DescFlagNext
	fWrite    = virtio.DescFlagWrite
	fIndirect = virtio.DescFlagIndirect
)

// TestPopHostile covers each way a driver can corrupt a ring (spec 2.7.5,
// 2.7.5.3, 2.7.6, 2.7.4.2): Pop returns a *GuestError of the right kind,
// does not panic, does not advance, and writes no guest memory.
func TestPopHostile(t *testing.T) {
	const size = 16
	buf := uint64(0x8000) // a valid data buffer
	table := uint64(0x9000)
	tests := []struct {
		name     string
		mem      int
		features uint64
		setup    func(d *virtiotest.Driver) // publishes a bad chain
		want     error
		headOK   bool // the error names a head
	}{
		{"avail idx jump", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(0, buf, 16, 0, 0)
			d.SetAvailIdx(size + 1)
		}, virtio.ErrAvailIdx, false},
		{"avail idx far behind", 0, 0, func(d *virtiotest.Driver) {
			d.SetAvailIdx(0xffff)
		}, virtio.ErrAvailIdx, false},
		{"head >= size", 0, 0, func(d *virtiotest.Driver) {
			d.SetAvailRing(0, size)
			d.SetAvailIdx(1)
		}, virtio.ErrDescIndex, true},
		{"head 0xffff", 0, 0, func(d *virtiotest.Driver) {
			d.SetAvailRing(0, 0xffff)
			d.SetAvailIdx(1)
		}, virtio.ErrDescIndex, true},
		{"next >= size", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(0, buf, 16, fNext, size)
			d.PublishAvail(0)
		}, virtio.ErrDescIndex, true},
		{"self loop", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(3, buf, 16, fNext, 3)
			d.PublishAvail(3)
		}, virtio.ErrDescLoop, true},
		{"two-step loop", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(0, buf, 16, fNext, 1)
			d.SetDesc(1, buf, 16, fNext, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescLoop, true},
		{"full-table loop", 0, 0, func(d *virtiotest.Driver) {
			for i := uint16(0); i < size; i++ {
				d.SetDesc(i, buf, 1, fNext, (i+1)%size)
			}
			d.PublishAvail(0)
		}, virtio.ErrDescLoop, true},
		{"addr+len overflows", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(0, ^uint64(0)-15, 0x100, 0, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescBuffer, true},
		{"buffer beyond RAM", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(0, memSize-8, 16, fWrite, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescBuffer, true},
		{"buffer far beyond RAM", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(0, 1<<40, 1, 0, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescBuffer, true},
		{"second buffer beyond RAM", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(0, buf, 16, fNext, 1)
			d.SetDesc(1, memSize, 1, fWrite, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescBuffer, true},
		{"readable after writable", 0, 0, func(d *virtiotest.Driver) {
			d.SetDesc(0, buf, 16, fWrite|fNext, 1)
			d.SetDesc(1, buf, 16, 0, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescOrder, true},
		{"indirect not negotiated", 0, 0, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, 0)
			d.SetDesc(0, table, 16, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrIndirect, true},
		{"indirect len not multiple of 16", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, 0)
			d.SetDesc(0, table, 24, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrIndirect, true},
		{"indirect zero len", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetDesc(0, table, 0, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrIndirect, true},
		{"indirect with next", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, 0)
			d.SetDesc(0, table, 16, fIndirect|fNext, 1)
			d.SetDesc(1, buf, 16, 0, 0)
			d.PublishAvail(0)
		}, virtio.ErrIndirect, true},
		{"nested indirect", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, table+32, 16, fIndirect, 0)
			d.SetIndirectDesc(table, 2, buf, 16, 0, 0)
			d.SetDesc(0, table, 48, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrIndirect, true},
		{"indirect table beyond RAM", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetDesc(0, memSize-16, 32, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrIndirect, true},
		{"indirect table addr overflows", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetDesc(0, ^uint64(0)-15, 32, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrIndirect, true},
		{"indirect table too long", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetDesc(0, 0, 16*(1<<16+1), fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrIndirect, true},
		{"indirect next >= table len", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, buf, 16, fNext, 2)
			d.SetDesc(0, table, 32, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescIndex, true},
		{"indirect loop", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, buf, 16, fNext, 1)
			d.SetIndirectDesc(table, 1, buf, 16, fNext, 0)
			d.SetDesc(0, table, 32, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescLoop, true},
		{"indirect buffer beyond RAM", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, memSize, 16, 0, 0)
			d.SetDesc(0, table, 16, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescBuffer, true},
		{"indirect readable after writable", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, buf, 16, fWrite|fNext, 1)
			d.SetIndirectDesc(table, 1, buf, 16, 0, 0)
			d.SetDesc(0, table, 32, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescOrder, true},
		{"direct writable then indirect readable", 0, indirectFeatures, func(d *virtiotest.Driver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, 0)
			d.SetDesc(0, buf, 16, fWrite|fNext, 1)
			d.SetDesc(1, table, 16, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescOrder, true},
		{"chain longer than 2^32 bytes", 2 << 20, indirectFeatures, func(d *virtiotest.Driver) {
			// 4097 entries of 1 MiB each, all over the same RAM.
			const n = 4097
			tbl := uint64(1 << 20)
			for i := uint16(0); i < n; i++ {
				d.SetIndirectDesc(tbl, i, 0, 1<<20, fNext, i+1)
			}
			d.SetIndirectDesc(tbl, n-1, 0, 1<<20, 0, 0)
			d.SetDesc(0, tbl, 16*n, fIndirect, 0)
			d.PublishAvail(0)
		}, virtio.ErrChainTooLong, true},
		{"desc table beyond RAM", 0, 0, func(d *virtiotest.Driver) {
			d.Queue.DescAddr = memSize - 64
			d.SetAvailRing(0, 8)
			d.SetAvailIdx(1)
		}, virtio.ErrBadRing, true},
		{"avail ring beyond RAM", 0, 0, func(d *virtiotest.Driver) {
			d.Queue.AvailAddr = 1 << 40
		}, virtio.ErrBadRing, false},
		{"avail idx misaligned", 0, 0, func(d *virtiotest.Driver) {
			d.Queue.AvailAddr++
		}, virtio.ErrBadRing, false},
		{"size not power of 2", 0, 0, func(d *virtiotest.Driver) {
			d.Queue.Size = 10
		}, virtio.ErrBadRing, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := tt.mem
			if ms == 0 {
				ms = memSize
			}
			d := virtiotest.New(t, ms, size)
			d.SetFeatures(tt.features)
			tt.setup(d)
			before := append([]byte(nil), d.RAM...)
			c, err := d.Queue.Pop(d.Mem)
			if c != nil {
				t.Fatalf("Pop returned a chain: %+v", c.Segments())
			}
			var ge *virtio.GuestError
			if !errors.As(err, &ge) || !errors.Is(err, tt.want) {
				t.Fatalf("Pop error = %v, want GuestError %v", err, tt.want)
			}
			if ge.HeadValid != tt.headOK {
				t.Errorf("HeadValid = %v, want %v (%v)", ge.HeadValid, tt.headOK, err)
			}
			if d.Queue.NextAvail() != 0 {
				t.Errorf("queue advanced to %d", d.Queue.NextAvail())
			}
			sameMem(t, d.Mem, before)
			// A second Pop fails the same way: the queue is stuck, not
			// corrupted.
			if _, err2 := d.Queue.Pop(d.Mem); !errors.Is(err2, tt.want) {
				t.Errorf("second Pop = %v", err2)
			}
		})
	}
}

// TestPopHeadInFlight: a driver that offers a head the device still holds
// (popped, not used) gets a GuestError naming it (spec 2.7.13: buffers go
// into free descriptors), and the chain the device holds is not touched:
// the queue reuses one Chain per head, so rebuilding it would change a
// request under the device. Returning the head makes the entry valid, and
// a Reset forgets every head in flight.
func TestPopHeadInFlight(t *testing.T) {
	d := virtiotest.New(t, memSize, 8)
	d.SetFeatures(indirectFeatures)
	held := d.AddChain([][]byte{[]byte("request")}, []int{64, 1})
	c, err := d.Queue.Pop(d.Mem)
	if err != nil || c == nil {
		t.Fatalf("Pop = %v, %v", c, err)
	}
	if _, err := c.Reader().Read(make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	segs := append([]virtio.Segment(nil), c.Segments()...)

	// The same head again, now pointing at an indirect table: a Chain
	// rebuilt from it would have other segments and lengths.
	d.SetIndirectDesc(0x9000, 0, 0x8000, 4096, fWrite, 0)
	d.SetDesc(held, 0x9000, 16, fIndirect, 0)
	d.PublishAvail(held)
	before := append([]byte(nil), d.RAM...)
	c2, err := d.Queue.Pop(d.Mem)
	var ge *virtio.GuestError
	if c2 != nil || !errors.As(err, &ge) || !errors.Is(err, virtio.ErrHeadInFlight) ||
		!ge.HeadValid || ge.Head != held {
		t.Fatalf("Pop of a head in flight: chain %t, error %v; want GuestError ErrHeadInFlight head %d", c2 != nil, err, held)
	}
	sameMem(t, d.Mem, before)
	if d.Queue.NextAvail() != 1 || d.Queue.InFlight() != 1 {
		t.Fatalf("next avail %d, in flight %d; want 1, 1", d.Queue.NextAvail(), d.Queue.InFlight())
	}
	// The held chain is as Pop gave it, reader position included.
	rest, _ := io.ReadAll(c.Reader())
	if c.Head != held || !slices.Equal(c.Segments(), segs) || c.ReadableLen() != 7 ||
		c.WritableLen() != 65 || string(rest) != "uest" {
		t.Fatalf("held chain changed: head %d segs %+v lens %d/%d rest %q", c.Head, c.Segments(),
			c.ReadableLen(), c.WritableLen(), rest)
	}

	// Used, the head is free: the same entry now pops (the indirect form).
	if err := d.Queue.AddUsed(d.Mem, held, 0); err != nil {
		t.Fatal(err)
	}
	c, err = d.Queue.Pop(d.Mem)
	if err != nil || c == nil || c.WritableLen() != 4096 || d.Queue.InFlight() != 1 {
		t.Fatalf("Pop after the head was used = %v, %v", c, err)
	}

	// A Reset starts clean: the head held at reset pops again.
	d.Reset()
	head := d.AddChain(nil, []int{16})
	if head != held {
		t.Fatalf("driver reused head %d, want %d", head, held)
	}
	if c, err := d.Queue.Pop(d.Mem); err != nil || c == nil || c.WritableLen() != 16 || c.ReadableLen() != 0 {
		t.Fatalf("Pop after Reset = %v, %v", c, err)
	}
}
