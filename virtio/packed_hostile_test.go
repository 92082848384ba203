package virtio_test

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// avail1 makes a descriptor available in the first lap (wrap counter 1):
// AVAIL set, USED clear (spec 2.8.1).
var avail1 = virtiotest.PackedAvailFlags(1)

// TestPackedPopNotAvailable: a descriptor whose AVAIL/USED bits do not say
// "available in the device's lap" is not there yet (spec 2.8.1, 2.8.15):
// Pop returns nothing and no error, whatever the rest of it says.
func TestPackedPopNotAvailable(t *testing.T) {
	for _, flags := range []uint16{
		0,                         // the zero-initialized ring
		virtio.PackedDescFlagUsed, // available in the second lap
		virtio.PackedDescFlagAvail | virtio.PackedDescFlagUsed, // used in the first lap
		fNext | fIndirect | fWrite,                             // neither bit
	} {
		d := virtiotest.NewPacked(t, memSize, 8)
		d.SetDesc(0, 1<<40, 1, 0xffff, flags)
		before := append([]byte(nil), d.RAM...)
		for _, poll := range []func() (bool, error){
			func() (bool, error) { c, err := d.Queue.Pop(d.Mem); return c != nil, err },
			func() (bool, error) { return d.Queue.Pending(d.Mem) },
		} {
			if got, err := poll(); got || err != nil {
				t.Fatalf("flags %#x: found work (%v, %v)", flags, got, err)
			}
		}
		sameMem(t, d.Mem, before)
	}
}

// TestPackedPopHostile covers each way a driver can corrupt a packed ring
// (spec 2.8.6, 2.8.7, 2.8.15-2.8.19): Pop returns a *GuestError of the
// right kind, does not panic, does not advance, and writes no guest memory.
func TestPackedPopHostile(t *testing.T) {
	const size = 16
	buf := uint64(0x8000)
	table := uint64(0x9000)
	a := avail1
	tests := []struct {
		name     string
		mem      int
		features uint64
		setup    func(d *virtiotest.PackedDriver)
		want     error
		idOK     bool // the error names a buffer ID
	}{
		{"chain runs into an unavailable descriptor", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, buf, 16, 0, a|fNext)
		}, virtio.ErrDescIndex, false},
		{"chain runs into the next lap's descriptor", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(1, buf, 16, 0, virtiotest.PackedAvailFlags(0))
			d.SetDesc(0, buf, 16, 0, a|fNext)
		}, virtio.ErrDescIndex, false},
		{"chain runs into a used descriptor", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(1, buf, 16, 0, virtio.PackedDescFlagAvail|virtio.PackedDescFlagUsed)
			d.SetDesc(0, buf, 16, 0, a|fNext)
		}, virtio.ErrDescIndex, false},
		{"chain of the whole ring and more", 0, 0, func(d *virtiotest.PackedDriver) {
			for i := uint16(0); i < size; i++ {
				d.SetDesc(i, buf, 1, 0, a|fNext)
			}
		}, virtio.ErrDescLoop, false},
		{"id = size", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, buf, 16, size, a)
		}, virtio.ErrDescIndex, true},
		{"id 0xffff", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, buf, 16, 0xffff, a)
		}, virtio.ErrDescIndex, true},
		{"id out of range in the last descriptor", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(1, buf, 16, 99, a)
			d.SetDesc(0, buf, 16, 0, a|fNext)
		}, virtio.ErrDescIndex, true},
		{"addr+len overflows", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, ^uint64(0)-15, 0x100, 0, a)
		}, virtio.ErrDescBuffer, false},
		{"buffer beyond RAM", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, memSize-8, 16, 0, a|fWrite)
		}, virtio.ErrDescBuffer, false},
		{"buffer far beyond RAM", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, 1<<40, 1, 0, a)
		}, virtio.ErrDescBuffer, false},
		{"second buffer beyond RAM", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(1, memSize, 1, 0, a|fWrite)
			d.SetDesc(0, buf, 16, 0, a|fNext)
		}, virtio.ErrDescBuffer, false},
		{"readable after writable", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetDesc(1, buf, 16, 0, a)
			d.SetDesc(0, buf, 16, 0, a|fWrite|fNext)
		}, virtio.ErrDescOrder, false},
		{"indirect not negotiated", 0, 0, func(d *virtiotest.PackedDriver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, 0)
			d.SetDesc(0, table, 16, 0, a|fIndirect)
		}, virtio.ErrIndirect, false},
		{"indirect len not multiple of 16", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, 0)
			d.SetDesc(0, table, 24, 0, a|fIndirect)
		}, virtio.ErrIndirect, false},
		{"indirect zero len", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, table, 0, 0, a|fIndirect)
		}, virtio.ErrIndirect, false},
		{"indirect with next", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, 0)
			d.SetDesc(1, buf, 16, 0, a)
			d.SetDesc(0, table, 16, 0, a|fIndirect|fNext)
		}, virtio.ErrIndirect, false},
		{"indirect after a direct descriptor", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			// Allowed in a split ring (2.7.5.3.2), not in a packed one
			// (2.8.19).
			d.SetIndirectDesc(table, 0, buf, 16, 0, fWrite)
			d.SetDesc(1, table, 16, 0, a|fIndirect)
			d.SetDesc(0, buf, 16, 0, a|fNext)
		}, virtio.ErrIndirect, false},
		{"nested indirect", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetIndirectDesc(table, 0, table+32, 16, 0, fIndirect)
			d.SetIndirectDesc(table, 2, buf, 16, 0, 0)
			d.SetDesc(0, table, 48, 0, a|fIndirect)
		}, virtio.ErrIndirect, false},
		{"indirect table beyond RAM", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, memSize-16, 32, 0, a|fIndirect)
		}, virtio.ErrIndirect, false},
		{"indirect table addr overflows", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, ^uint64(0)-15, 32, 0, a|fIndirect)
		}, virtio.ErrIndirect, false},
		{"indirect table too long", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetDesc(0, 0, 16*(1<<16+1), 0, a|fIndirect)
		}, virtio.ErrIndirect, false},
		{"indirect buffer beyond RAM", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetIndirectDesc(table, 0, memSize, 16, 0, 0)
			d.SetDesc(0, table, 16, 0, a|fIndirect)
		}, virtio.ErrDescBuffer, false},
		{"indirect readable after writable", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, fWrite)
			d.SetIndirectDesc(table, 1, buf, 16, 0, 0)
			d.SetDesc(0, table, 32, 0, a|fIndirect)
		}, virtio.ErrDescOrder, false},
		{"indirect id out of range", 0, indirectFeatures, func(d *virtiotest.PackedDriver) {
			d.SetIndirectDesc(table, 0, buf, 16, 0, 0)
			d.SetDesc(0, table, 16, size+1, a|fIndirect)
		}, virtio.ErrDescIndex, true},
		{"chain longer than 2^32 bytes", 2 << 20, indirectFeatures, func(d *virtiotest.PackedDriver) {
			const n = 4097 // entries of 1 MiB each, all over the same RAM
			tbl := uint64(1 << 20)
			for i := uint16(0); i < n; i++ {
				d.SetIndirectDesc(tbl, i, 0, 1<<20, 0, 0)
			}
			d.SetDesc(0, tbl, 16*n, 0, a|fIndirect)
		}, virtio.ErrChainTooLong, false},
		{"more descriptors than the ring holds", 0, 0, func(d *virtiotest.PackedDriver) {
			// The ring is full of buffers the device holds; the driver
			// rewrites the oldest as if it were free.
			for i := 0; i < size/2; i++ {
				d.Add([][]byte{{1}}, []int{1})
				if c, err := d.Queue.Pop(d.Mem); c == nil || err != nil {
					panic(err)
				}
			}
			d.SetDesc(0, buf, 16, 0, virtiotest.PackedAvailFlags(0))
		}, virtio.ErrAvailIdx, false},
		{"desc ring beyond RAM", 0, 0, func(d *virtiotest.PackedDriver) {
			d.Queue.DescAddr = memSize
		}, virtio.ErrBadRing, false},
		{"desc ring far beyond RAM", 0, 0, func(d *virtiotest.PackedDriver) {
			d.Queue.DescAddr = 1 << 40
		}, virtio.ErrBadRing, false},
		{"desc ring misaligned", 0, 0, func(d *virtiotest.PackedDriver) {
			d.Queue.DescAddr++
		}, virtio.ErrBadRing, false},
		{"size not power of 2", 0, 0, func(d *virtiotest.PackedDriver) {
			d.Queue.Size = 10
		}, virtio.ErrBadRing, false},
		{"size zero", 0, 0, func(d *virtiotest.PackedDriver) {
			d.Queue.Size = 0
		}, virtio.ErrBadRing, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := tt.mem
			if ms == 0 {
				ms = memSize
			}
			d := virtiotest.NewPacked(t, ms, size)
			d.SetFeatures(tt.features)
			tt.setup(d)
			availBefore, usedBefore := d.Queue.Counters()
			inFlight := d.Queue.InFlight()
			before := append([]byte(nil), d.RAM...)
			c, err := d.Queue.Pop(d.Mem)
			if c != nil {
				t.Fatalf("Pop returned a chain: %+v", c.Segments())
			}
			var ge *virtio.GuestError
			if !errors.As(err, &ge) || !errors.Is(err, tt.want) {
				t.Fatalf("Pop error = %v, want GuestError %v", err, tt.want)
			}
			if ge.HeadValid != tt.idOK {
				t.Errorf("HeadValid = %v, want %v (%v)", ge.HeadValid, tt.idOK, err)
			}
			if a, u := d.Queue.Counters(); a != availBefore || u != usedBefore || d.Queue.InFlight() != inFlight {
				t.Errorf("queue moved: counters %d %d, in flight %d", a, u, d.Queue.InFlight())
			}
			sameMem(t, d.Mem, before)
			if _, err2 := d.Queue.Pop(d.Mem); !errors.Is(err2, tt.want) {
				t.Errorf("second Pop = %v", err2)
			}
		})
	}
}

// TestPackedIndirectIgnoresReserved: in an indirect table only WRITE
// counts; NEXT and the buffer ID are reserved and ignored (spec 2.8.7),
// so every entry is used, in order, whatever they say.
func TestPackedIndirectIgnoresReserved(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 4)
	d.SetFeatures(indirectFeatures)
	tbl := d.Alloc(48)
	b := d.Alloc(16)
	copy(d.RAM[b:], "abcdef")
	d.SetIndirectDesc(tbl, 0, b, 2, 0xbeef, fNext)
	d.SetIndirectDesc(tbl, 1, b+2, 2, 7, 0)            // no NEXT: not the end
	d.SetIndirectDesc(tbl, 2, b+4, 2, 0, fWrite|fNext) // NEXT past the end
	d.SetDesc(0, tbl, 48, 2, avail1|fIndirect|fWrite)  // WRITE ignored here
	c, err := d.Queue.Pop(d.Mem)
	if err != nil || c == nil || c.Head != 2 {
		t.Fatalf("Pop = %v, %v", c, err)
	}
	got, _ := io.ReadAll(c.Reader())
	if string(got) != "abcd" || c.WritableLen() != 2 || len(c.Segments()) != 3 {
		t.Fatalf("read %q, writable %d, %d segments", got, c.WritableLen(), len(c.Segments()))
	}
}

// TestPackedPopIDInFlight: a driver offering an ID the device still holds
// gets a GuestError naming it (spec 2.8.21.1: the next free buffer id),
// and the held chain is not touched. Used, the ID is free: the same
// descriptor then pops.
func TestPackedPopIDInFlight(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 8)
	d.SetFeatures(indirectFeatures)
	held := d.Add([][]byte{[]byte("request")}, []int{64, 1})
	c, err := d.Queue.Pop(d.Mem)
	if err != nil || c == nil {
		t.Fatalf("Pop = %v, %v", c, err)
	}
	if _, err := c.Reader().Read(make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	segs := slices.Clone(c.Segments())

	// The same ID again at the next position, an indirect buffer.
	tbl := d.Alloc(16)
	d.SetIndirectDesc(tbl, 0, 0x8000, 4096, 0, fWrite)
	pos, w := d.NextAvail()
	d.SetDesc(pos, tbl, 16, held, virtiotest.PackedAvailFlags(w)|fIndirect)
	before := append([]byte(nil), d.RAM...)
	c2, err := d.Queue.Pop(d.Mem)
	var ge *virtio.GuestError
	if c2 != nil || !errors.As(err, &ge) || !errors.Is(err, virtio.ErrHeadInFlight) ||
		!ge.HeadValid || ge.Head != held {
		t.Fatalf("Pop of an ID in flight: chain %t, error %v; want GuestError ErrHeadInFlight id %d", c2 != nil, err, held)
	}
	sameMem(t, d.Mem, before)
	if d.Queue.InFlight() != 1 {
		t.Fatalf("in flight %d", d.Queue.InFlight())
	}
	rest, _ := io.ReadAll(c.Reader())
	if c.Head != held || !slices.Equal(c.Segments(), segs) || c.ReadableLen() != 7 ||
		c.WritableLen() != 65 || string(rest) != "uest" {
		t.Fatalf("held chain changed: id %d segs %+v lens %d/%d rest %q", c.Head, c.Segments(),
			c.ReadableLen(), c.WritableLen(), rest)
	}

	if err := d.Queue.AddUsed(d.Mem, held, 0); err != nil {
		t.Fatal(err)
	}
	c, err = d.Queue.Pop(d.Mem)
	if err != nil || c == nil || c.Head != held || c.WritableLen() != 4096 || d.Queue.InFlight() != 1 {
		t.Fatalf("Pop after the ID was used = %v, %v", c, err)
	}
}
