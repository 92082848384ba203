package pvpanic

import (
	"encoding/binary"
	"testing"

	"github.com/govm/govm/pci"
)

func TestIdentity(t *testing.T) {
	d, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	d.ConfigRead(pci.OffVendorID, b[:])
	if v, dev := binary.LittleEndian.Uint16(b[:]), binary.LittleEndian.Uint16(b[2:]); v != 0x1b36 || dev != 0x0011 {
		t.Fatalf("IDs %04x:%04x, want 1b36:0011 (Linux pvpanic-pci binds by them)", v, dev)
	}
	_, size, _ := d.IOBAR()
	if size != 4 {
		t.Fatalf("BAR size %d", size)
	}
}

func TestEvents(t *testing.T) {
	var got []uint8
	d, err := New(func(ev uint8) { got = append(got, ev) })
	if err != nil {
		t.Fatal(err)
	}
	io := d.BARIO()
	var r [1]byte
	io.Read(0, r[:])
	if r[0] != Panicked|CrashLoaded {
		t.Fatalf("capability read %#x", r[0])
	}
	io.Write(0, []byte{Panicked})
	io.Write(0, []byte{CrashLoaded | 0x80}) // unsupported bit dropped
	io.Write(0, []byte{0x80})               // nothing supported: counted only
	io.Write(1, []byte{Panicked})           // not the register
	io.Write(0, nil)
	if len(got) != 2 || got[0] != Panicked || got[1] != CrashLoaded {
		t.Fatalf("events %v", got)
	}
	if c := d.Counters(); c != (Counters{Panicked: 1, CrashLoaded: 1, Unknown: 1}) {
		t.Fatalf("counters %+v", c)
	}
}
