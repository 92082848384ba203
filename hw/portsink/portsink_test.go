package portsink

import (
	"testing"

	"github.com/govm/govm/iobus"
)

func TestSinkOnBus(t *testing.T) {
	var bus iobus.Bus
	if err := bus.Register(POSTPort, 1, New(0xff)); err != nil {
		t.Fatal(err)
	}
	if !bus.Write(POSTPort, []byte{0x42}) {
		t.Fatal("write to 0x80 unclaimed")
	}
	b := []byte{0}
	if !bus.Read(POSTPort, b) || b[0] != 0xff {
		t.Fatalf("read %#x", b[0])
	}
	s := New(0)
	w := []byte{1, 2}
	s.Read(0, w)
	if w[0] != 0 || w[1] != 0 {
		t.Fatalf("fill 0 read %x", w)
	}
}
