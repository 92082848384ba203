package bootparam

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
)

func TestParseSetupHeaderDebian(t *testing.T) {
	path := debianKernel(t)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseSetupHeader(img)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	t.Logf("%s: protocol %#x setup_sects %d payload %#x+%#x pref %#x init_size %#x xlf %#x cmdline_size %d",
		path, h.Version, h.SetupSects, h.PayloadOffset, h.PayloadLength, h.PrefAddress, h.InitSize, h.XLoadFlags, h.CmdlineSize)
	checks := []struct {
		name string
		ok   bool
	}{
		{"boot flag", h.BootFlag == BootFlagMagic},
		{"HdrS", h.Header == HeaderMagic},
		{"protocol >= 2.12", h.Version >= Version64},
		{"64-bit entry", h.Has64BitEntry()},
		{"relocatable", h.RelocatableKernel},
		{"loaded high", h.LoadFlags&LoadedHigh != 0},
		{"payload present", h.PayloadLength > 0},
		{"payload inside file", uint64(h.KernelOffset())+uint64(h.PayloadOffset)+uint64(h.PayloadLength) <= uint64(len(img))},
		{"pref_address 16 MiB", h.PrefAddress == 0x1000000},
		{"alignment 2 MiB", h.KernelAlignment == 0x200000},
		{"cmdline_size 2047 (COMMAND_LINE_SIZE-1)", h.CmdlineSize == 2047},
		{"init_size > payload", uint64(h.InitSize) > uint64(h.PayloadLength)},
		{"raw header ends at 0x202+jmp", len(h.Raw) == offHeader+int(img[offJump+1])-offSetupSects},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: check %q failed", path, c.name)
		}
	}
}

func TestParseSetupHeaderCorrupt(t *testing.T) {
	good := bzWithPayload([]byte("payload"))
	mod := func(f func(img []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	le := binary.LittleEndian
	tests := []struct {
		name string
		img  []byte
		want error
	}{
		{"empty", nil, ErrNotKernel},
		{"too short for HdrS", good[:0x1ff], ErrNotKernel},
		{"truncated in header", good[:0x240], ErrTruncated},
		{"truncated after setup", good[:2*512], ErrTruncated},
		{"bad magic", mod(func(b []byte) []byte { copy(b[offHeader:], "HdrX"); return b }), ErrNotKernel},
		{"bad boot flag", mod(func(b []byte) []byte { le.PutUint16(b[offBootFlag:], 0x55aa); return b }), ErrBootFlag},
		{"protocol 2.05", mod(func(b []byte) []byte { le.PutUint16(b[offVersion:], 0x0205); return b }), ErrOldProtocol},
		{"setup_sects 200", mod(func(b []byte) []byte { b[offSetupSects] = 200; return b }), ErrSetupSects},
		{"setup_sects beyond file", mod(func(b []byte) []byte { b[offSetupSects] = 40; return b }), ErrTruncated},
		{"payload length past end", mod(func(b []byte) []byte { le.PutUint32(b[offPayloadLength:], 0x10000); return b }), ErrPayload},
		{"payload offset past end", mod(func(b []byte) []byte { le.PutUint32(b[offPayloadOffset:], 0xfffffff0); return b }), ErrPayload},
		{"payload offset+length wraps 32 bits", mod(func(b []byte) []byte {
			le.PutUint32(b[offPayloadOffset:], 0xffffffff)
			le.PutUint32(b[offPayloadLength:], 2)
			return b
		}), ErrPayload},
		{"file cut inside payload", good[:len(good)-3], ErrPayload},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseSetupHeader(tc.img)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if h != nil {
				t.Fatal("header returned with error")
			}
		})
	}
}

func TestParseSetupHeaderFields(t *testing.T) {
	tests := []struct {
		name       string
		b          bz
		sects      int
		has64      bool
		payloadLen uint32
	}{
		{"setup_sects 0 means 4", bz{setupSects: 0, version: 0x020f, xlf: XLFKernel64, pm: make([]byte, 16)}, 4, true, 0},
		{"2.11 ignores xloadflags", bz{setupSects: 2, version: 0x020b, xlf: XLFKernel64, pm: make([]byte, 16)}, 2, false, 0},
		{"2.12 without XLF_KERNEL_64", bz{setupSects: 2, version: 0x020c, pm: make([]byte, 16)}, 2, false, 0},
		{"2.07 has no payload fields", bz{setupSects: 1, version: 0x0207, payloadOff: 4, payloadLen: 9999, pm: make([]byte, 16)}, 1, false, 0},
		{"payload", bz{setupSects: 3, version: 0x020f, xlf: XLFKernel64, payloadOff: 4, payloadLen: 8, pm: make([]byte, 16)}, 3, true, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseSetupHeader(tc.b.build())
			if err != nil {
				t.Fatal(err)
			}
			if h.RealSetupSects() != tc.sects || h.KernelOffset() != (tc.sects+1)*512 {
				t.Errorf("setup sects %d offset %d, want %d", h.RealSetupSects(), h.KernelOffset(), tc.sects)
			}
			if h.Has64BitEntry() != tc.has64 {
				t.Errorf("Has64BitEntry = %v", h.Has64BitEntry())
			}
			if h.PayloadLength != tc.payloadLen {
				t.Errorf("payload length %d, want %d", h.PayloadLength, tc.payloadLen)
			}
		})
	}
}
