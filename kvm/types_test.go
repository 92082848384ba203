package kvm

import (
	"encoding/binary"
	"reflect"
	"testing"
)

func TestCPUID2RoundTrip(t *testing.T) {
	in := []CPUIDEntry{
		{Function: 0, EAX: 0xd, EBX: 0x68747541, ECX: 0x444d4163, EDX: 0x69746e65},
		{Function: 7, Index: 1, Flags: CPUIDFlagSignificantIndex, EAX: 1, EBX: 2, ECX: 3, EDX: 4},
	}
	buf := encodeCPUID2(in, 4)
	if len(buf) != 8+4*40 {
		t.Fatalf("len = %d, want %d", len(buf), 8+4*40)
	}
	if got := binary.LittleEndian.Uint32(buf); got != 4 {
		t.Fatalf("nent = %d, want 4", got)
	}
	// Second entry's function/index/flags at 8+40, eax at +12.
	if got := binary.LittleEndian.Uint32(buf[8+40+4:]); got != 1 {
		t.Errorf("entry 1 index = %d, want 1", got)
	}
	if got := binary.LittleEndian.Uint32(buf[8+40+12:]); got != 1 {
		t.Errorf("entry 1 eax = %d, want 1", got)
	}
	binary.LittleEndian.PutUint32(buf, 2) // the kernel rewrites nent
	out, err := decodeCPUID2(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip = %+v, want %+v", out, in)
	}
}

func TestDecodeCPUID2Rejects(t *testing.T) {
	tests := []struct {
		name string
		buf  []byte
	}{
		{"short header", []byte{1, 0, 0}},
		{"nent beyond buffer", append([]byte{3, 0, 0, 0, 0, 0, 0, 0}, make([]byte, 80)...)},
		{"huge nent", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		if _, err := decodeCPUID2(tt.buf); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestMSRsEncoding(t *testing.T) {
	in := []MSREntry{{Index: 0x10, Data: 0x1122334455667788}, {Index: 0xc0000080, Data: 0x500}}
	buf := encodeMSRs(in)
	if len(buf) != 8+2*16 {
		t.Fatalf("len = %d", len(buf))
	}
	if n := binary.LittleEndian.Uint32(buf); n != 2 {
		t.Fatalf("nmsrs = %d", n)
	}
	if idx := binary.LittleEndian.Uint32(buf[8+16:]); idx != 0xc0000080 {
		t.Errorf("entry 1 index = %#x", idx)
	}
	if d := binary.LittleEndian.Uint64(buf[8+8:]); d != 0x1122334455667788 {
		t.Errorf("entry 0 data = %#x", d)
	}
	if got := decodeMSRs(buf, 2); !reflect.DeepEqual(got, in) {
		t.Errorf("decode = %+v", got)
	}
	if got := decodeMSRs(buf, 1); len(got) != 1 {
		t.Errorf("decode n=1 gave %d entries", len(got))
	}
	if got := decodeMSRs(buf, 9); len(got) != 2 {
		t.Errorf("decode n beyond buffer gave %d entries", len(got))
	}
}

func TestLAPICReg(t *testing.T) {
	var l LAPICState
	l.SetReg(0x350, 0x700)
	l.SetReg(0x360, 0x12345678)
	if l[0x360] != 0x78 || l[0x363] != 0x12 {
		t.Fatalf("little-endian store wrong: % x", l[0x360:0x364])
	}
	if got := l.Reg(0x350); got != 0x700 {
		t.Errorf("Reg(0x350) = %#x", got)
	}
	if got := l.Reg(0x360); got != 0x12345678 {
		t.Errorf("Reg(0x360) = %#x", got)
	}
}

func TestOpenMissingDevice(t *testing.T) {
	_, err := Open("/nonexistent/kvm")
	if err == nil {
		t.Fatal("Open of a missing path succeeded")
	}
	if !errorsIs(err, ErrNoKVM) {
		t.Fatalf("err = %v, want ErrNoKVM", err)
	}
}
