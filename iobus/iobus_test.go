package iobus

import (
	"errors"
	"testing"
)

type recDev struct {
	reads, writes []uint16
	last          []byte
}

func (d *recDev) Read(off uint16, data []byte) {
	d.reads = append(d.reads, off)
	for i := range data {
		data[i] = byte(off) + byte(i)
	}
}
func (d *recDev) Write(off uint16, data []byte) {
	d.writes = append(d.writes, off)
	d.last = append([]byte(nil), data...)
}

func TestDispatchOffsetsAndUnclaimed(t *testing.T) {
	var b Bus
	a, c := &recDev{}, &recDev{}
	if err := b.Register(0x3f8, 8, a); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(0x60, 1, c); err != nil {
		t.Fatal(err)
	}
	d := make([]byte, 2)
	if !b.Read(0x3fd, d) || d[0] != 5 || d[1] != 6 {
		t.Fatalf("read 0x3fd: % x", d)
	}
	if !b.Write(0x3f8, []byte{0x41}) || a.writes[0] != 0 || a.last[0] != 0x41 {
		t.Fatalf("write 0x3f8: %v %v", a.writes, a.last)
	}
	if !b.Read(0x60, d[:1]) || len(c.reads) != 1 {
		t.Fatal("read 0x60")
	}
	// Unclaimed: reads float high, writes vanish, neither reaches a device.
	for _, p := range []uint16{0x3f7, 0x400, 0x61, 0x0, 0xffff} {
		d := []byte{0, 0}
		if b.Read(p, d) || d[0] != 0xff || d[1] != 0xff {
			t.Errorf("read of unclaimed %#x: claimed or % x", p, d)
		}
		if b.Write(p, d) {
			t.Errorf("write of unclaimed %#x claimed", p)
		}
	}
	if len(a.reads) != 1 || len(c.reads) != 1 {
		t.Fatal("an unclaimed access reached a device")
	}
}

func TestRegisterRejects(t *testing.T) {
	var b Bus
	if err := b.Register(0x100, 0x10, &recDev{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ base, n uint16 }{{0x108, 1}, {0xf0, 0x11}, {0x10f, 4}} {
		if err := b.Register(r.base, r.n, &recDev{}); !errors.Is(err, ErrOverlap) {
			t.Errorf("Register(%#x, %#x) = %v, want ErrOverlap", r.base, r.n, err)
		}
	}
	if err := b.Register(0xfff0, 0x20, &recDev{}); err == nil {
		t.Error("range past 0xffff accepted")
	}
	if err := b.Register(0x200, 0, &recDev{}); err == nil {
		t.Error("empty range accepted")
	}
	b.Unregister(0x100)
	if err := b.Register(0x108, 1, &recDev{}); err != nil {
		t.Fatalf("after Unregister: %v", err)
	}
}
