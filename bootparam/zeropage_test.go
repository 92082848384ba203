package bootparam

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/govm/govm/arch/x86/layout"
)

func TestE820Map(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	tests := []struct {
		mem  uint64
		want []E820Entry
	}{
		{64 * MiB, []E820Entry{
			{0, 0x9fc00, E820RAM}, {0x9fc00, 0x400, E820Reserved}, {0xf0000, 0x10000, E820Reserved},
			{0x100000, 64*MiB - 0x100000, E820RAM}}},
		{512 * MiB, []E820Entry{
			{0, 0x9fc00, E820RAM}, {0x9fc00, 0x400, E820Reserved}, {0xf0000, 0x10000, E820Reserved},
			{0x100000, 512*MiB - 0x100000, E820RAM}}},
		{3 * GiB, []E820Entry{
			{0, 0x9fc00, E820RAM}, {0x9fc00, 0x400, E820Reserved}, {0xf0000, 0x10000, E820Reserved},
			{0x100000, 3*GiB - 0x100000, E820RAM}}},
		{5 * GiB, []E820Entry{
			{0, 0x9fc00, E820RAM}, {0x9fc00, 0x400, E820Reserved}, {0xf0000, 0x10000, E820Reserved},
			{0x100000, 3*GiB - 0x100000, E820RAM}, {4 * GiB, 2 * GiB, E820RAM}}},
	}
	for _, tc := range tests {
		m := E820Map(tc.mem)
		if len(m) != len(tc.want) {
			t.Fatalf("%d MiB: %d entries %v, want %v", tc.mem>>20, len(m), m, tc.want)
		}
		var ram uint64
		for i, e := range m {
			if e != tc.want[i] {
				t.Errorf("%d MiB: entry %d = %+v, want %+v", tc.mem>>20, i, e, tc.want[i])
			}
			if i > 0 && e.Addr < m[i-1].End() {
				t.Errorf("%d MiB: entry %d overlaps or is out of order", tc.mem>>20, i)
			}
			if e.Type == E820RAM {
				ram += e.Size
				// No RAM in the VGA/BIOS holes or the PCI hole.
				if e.Addr < layout.HighMemStart && e.End() > layout.EBDAStart || e.Addr < layout.HighRAMStart && e.End() > layout.PCIHoleStart {
					t.Errorf("%d MiB: RAM entry %+v crosses a hole", tc.mem>>20, e)
				}
			}
		}
		// All memory is RAM except the 1 KiB EBDA and the 0xa0000-0x100000
		// window, which the guest does not get.
		if want := tc.mem - (layout.HighMemStart - layout.EBDAStart); ram != want {
			t.Errorf("%d MiB: RAM sums to %#x, want %#x", tc.mem>>20, ram, want)
		}
	}
}

func TestBuildZeroPage(t *testing.T) {
	img := bz{setupSects: 1, version: 0x020f, xlf: XLFKernel64, pm: make([]byte, 0x400)}.build()
	h, err := ParseSetupHeader(img)
	if err != nil {
		t.Fatal(err)
	}
	e820 := E820Map(5 << 30)
	zp, err := BuildZeroPage(ZeroPageConfig{
		Header: h, CmdlineAddr: 0x1_2002_0000, CmdlineLen: 30,
		InitrdAddr: 0x1_3000_0000, InitrdSize: 0x1_0000_1234, E820: e820,
	})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(zp) != 4096 {
		t.Fatalf("zero page is %d bytes", len(zp))
	}
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"setup_sects at 0x1f1", uint64(zp[0x1f1]), 1},
		{"boot_flag at 0x1fe", uint64(le.Uint16(zp[0x1fe:])), 0xaa55},
		{`"HdrS" at 0x202`, uint64(le.Uint32(zp[0x202:])), 0x53726448},
		{"version at 0x206", uint64(le.Uint16(zp[0x206:])), 0x020f},
		{"vid_mode at 0x1fa", uint64(le.Uint16(zp[0x1fa:])), 0xffff},
		{"type_of_loader at 0x210", uint64(zp[0x210]), 0xff},
		{"loadflags at 0x211", uint64(zp[0x211]), LoadedHigh | CanUseHeap},
		{"heap_end_ptr at 0x224", uint64(le.Uint16(zp[0x224:])), 0xde00},
		{"cmd_line_ptr at 0x228", uint64(le.Uint32(zp[0x228:])), 0x2002_0000},
		{"ext_cmd_line_ptr at 0x0c8", uint64(le.Uint32(zp[0x0c8:])), 1},
		{"ramdisk_image at 0x218", uint64(le.Uint32(zp[0x218:])), 0x3000_0000},
		{"ext_ramdisk_image at 0x0c0", uint64(le.Uint32(zp[0x0c0:])), 1},
		{"ramdisk_size at 0x21c", uint64(le.Uint32(zp[0x21c:])), 0x1234},
		{"ext_ramdisk_size at 0x0c4", uint64(le.Uint32(zp[0x0c4:])), 1},
		{"e820_entries at 0x1e8", uint64(zp[0x1e8]), uint64(len(e820))},
		{"e820[0].size at 0x2d8", le.Uint64(zp[0x2d8:]), 0x9fc00},
		{"e820[1].addr at 0x2e4", le.Uint64(zp[0x2e4:]), 0x9fc00},
		{"e820[1].type at 0x2f4", uint64(le.Uint32(zp[0x2f4:])), E820Reserved},
		{"e820[4].addr at 0x320", le.Uint64(zp[0x320:]), 4 << 30},
		{"e820[4].size at 0x328", le.Uint64(zp[0x328:]), 2 << 30},
		{"sentinel at 0x1ef stays 0", uint64(zp[0x1ef]), 0},
		{"cmdline_size at 0x238", uint64(le.Uint32(zp[0x238:])), 2047},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %#x, want %#x", c.name, c.got, c.want)
		}
	}
	// Everything between the header's end and the e820 table, and past
	// the table, is zero.
	if end := offE820Table + len(e820)*e820EntrySize; !bytes.Equal(zp[end:], make([]byte, 4096-end)) {
		t.Error("bytes after the e820 table are not zero")
	}
}

func TestBuildZeroPageDebianHeader(t *testing.T) {
	img, err := os.ReadFile(debianKernel(t))
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseSetupHeader(img)
	if err != nil {
		t.Fatal(err)
	}
	zp, err := BuildZeroPage(ZeroPageConfig{Header: h, CmdlineAddr: layout.CmdlineAddr, CmdlineLen: 10, E820: E820Map(512 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	// The header is copied verbatim apart from the fields a loader writes.
	written := map[int]bool{0x1fa: true, 0x1fb: true, 0x210: true, 0x211: true, 0x224: true, 0x225: true,
		0x228: true, 0x229: true, 0x22a: true, 0x22b: true, 0x218: true, 0x219: true, 0x21a: true, 0x21b: true,
		0x21c: true, 0x21d: true, 0x21e: true, 0x21f: true}
	end := offHeader + int(img[0x201])
	for off := 0x1f1; off < end; off++ {
		if !written[off] && zp[off] != img[off] {
			t.Errorf("zero page byte %#x = %#x, image has %#x", off, zp[off], img[off])
		}
	}
	if zp[end] != 0 || end != 0x26c {
		t.Errorf("header end %#x, byte after it %#x", end, zp[end])
	}
}

func TestBuildZeroPageELF(t *testing.T) {
	zp, err := BuildZeroPage(ZeroPageConfig{CmdlineAddr: layout.CmdlineAddr, CmdlineLen: 5, E820: E820Map(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if le.Uint16(zp[0x1fe:]) != 0xaa55 || le.Uint32(zp[0x202:]) != HeaderMagic || zp[0x210] != 0xff ||
		le.Uint32(zp[0x228:]) != layout.CmdlineAddr || le.Uint32(zp[0x238:]) != DefaultCmdlineSz || zp[0x1e8] != 4 ||
		le.Uint32(zp[0x218:]) != 0 || le.Uint32(zp[0x21c:]) != 0 {
		t.Fatalf("synthesized header wrong: % x", zp[0x1f1:0x26c])
	}
}

func TestBuildZeroPageErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  ZeroPageConfig
	}{
		{"no e820", ZeroPageConfig{}},
		{"129 e820 entries", ZeroPageConfig{E820: make([]E820Entry, 129)}},
		{"cmdline longer than cmdline_size", ZeroPageConfig{E820: E820Map(1 << 30), CmdlineLen: 2048}},
		{"initrd wraps", ZeroPageConfig{E820: E820Map(1 << 30), InitrdAddr: ^uint64(0) - 10, InitrdSize: 100}},
	}
	for _, tc := range tests {
		if _, err := BuildZeroPage(tc.cfg); !errors.Is(err, ErrZeroPage) {
			t.Errorf("%s: err = %v, want ErrZeroPage", tc.name, err)
		}
	}
	if _, err := BuildZeroPage(ZeroPageConfig{E820: make([]E820Entry, 128)}); err != nil {
		t.Errorf("128 entries: %v", err)
	}
}
