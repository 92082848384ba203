package bootparam

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/bootparam/decompress"
)

func TestLoadDebian(t *testing.T) {
	path := debianKernel(t)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := Load(img)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	t.Logf("%s: format %q, decompressed in %v, entry %#x, end %#x", path, k.Format, k.DecompressTime, k.Entry, k.End)
	for i, s := range k.Segments {
		t.Logf("segment %d: gpa %#x file %#x mem %#x", i, s.GPA, len(s.Data), s.MemSize)
	}
	if k.Header == nil || !strings.HasSuffix(k.Format, "->elf") || !strings.HasPrefix(k.Format, "bzImage+") {
		t.Fatalf("format %q: want the payload decompressed to ELF on the host", k.Format)
	}
	if len(k.Segments) == 0 {
		t.Fatal("no segments")
	}
	// Debian's x86-64 kernel is linked at LOAD_PHYSICAL_ADDR 16 MiB,
	// the same as its pref_address, and vmlinux.lds.S makes e_entry the
	// physical startup_64, which is the first byte of .text.
	if k.Segments[0].GPA != 0x1000000 || k.Segments[0].GPA != k.Header.PrefAddress {
		t.Errorf("first segment at %#x, want 16 MiB = pref_address %#x", k.Segments[0].GPA, k.Header.PrefAddress)
	}
	if k.Entry != 0x1000000 {
		t.Errorf("entry %#x, want 0x1000000 (phys_startup_64)", k.Entry)
	}
	inside := false
	var end uint64
	for _, s := range k.Segments {
		if s.GPA < layout.HighMemStart || s.End() > layout.PCIHoleStart || uint64(len(s.Data)) > s.MemSize {
			t.Errorf("segment %#x+%#x (file %#x) out of bounds", s.GPA, s.MemSize, len(s.Data))
		}
		inside = inside || (k.Entry >= s.GPA && k.Entry < s.GPA+uint64(len(s.Data)))
		end = max(end, s.End())
	}
	if !inside {
		t.Errorf("entry %#x is not inside any segment's file data", k.Entry)
	}
	if k.End != end {
		t.Errorf("End %#x, want last segment end %#x", k.End, end)
	}
	// The decompressed kernel is bigger than init_size says the in-place
	// decompression needs only if something is off.
	if end-k.Segments[0].GPA > uint64(k.Header.InitSize) {
		t.Errorf("loaded span %#x exceeds init_size %#x", end-k.Segments[0].GPA, k.Header.InitSize)
	}
}

func TestLoadELF(t *testing.T) {
	img := tinyELF()
	k, err := Load(img)
	if err != nil {
		t.Fatal(err)
	}
	if k.Header != nil || k.Format != "elf" || k.Entry != 0x1000000 || len(k.Segments) != 2 || k.End != 0x1203000 {
		t.Fatalf("got %+v", k)
	}
	if !bytes.Equal(k.Segments[1].Data, img[0x2000:0x2800]) || k.Segments[1].MemSize != 0x3000 {
		t.Errorf("segment 1 data/memsz wrong")
	}
}

func TestLoadBzImage(t *testing.T) {
	elfImg := tinyELF()
	notELF := []byte("just some bytes that are not an ELF file at all")
	lzo := []byte{0x89, 'L', 'Z', 'O', 0, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4}
	tests := []struct {
		name      string
		img       []byte
		format    string // prefix
		entry     uint64
		firstGPA  uint64
		wantErr   error
		errSubstr string
	}{
		{"gzip ELF payload", bzWithPayload(gzipBytes(t, elfImg)), "bzImage+gzip->elf", 0x1000000, 0x1000000, nil, ""},
		{"no payload: 64-bit fallback", bz{setupSects: 1, version: 0x020f, xlf: XLFKernel64, pm: make([]byte, 0x400)}.build(),
			"bzImage, 64-bit entry", 0x100200, 0x100000, nil, ""},
		{"gzip non-ELF payload: fallback", bzWithPayload(gzipBytes(t, notELF)), "bzImage, 64-bit entry", 0x100200, 0x100000, nil, ""},
		{"unknown payload format: fallback", bzWithPayload(notELF), "bzImage, 64-bit entry", 0x100200, 0x100000, nil, ""},
		{"lzo payload: fallback", bzWithPayload(lzo), "bzImage, 64-bit entry", 0x100200, 0x100000, nil, ""},
		{"corrupt gzip payload", bzWithPayload(gzipBytes(t, elfImg)[:40]), "", 0, 0, decompress.ErrCorrupt,
			"bootparam: bzImage: gzip payload: decompress: corrupt compressed data: unexpected EOF"},
		{"ELF payload with bad segment", bzWithPayload(gzipBytes(t, makeELF(0x1000, []phdr{{typ: elfPTLoad, off: 0x100, paddr: 0x1000, filesz: 0x10, memsz: 0x10}}, 0x200))),
			"", 0, 0, ErrBadELF, "outside"},
		{"no 64-bit entry (2.11)", bz{setupSects: 1, version: 0x020b, pm: make([]byte, 0x400)}.build(), "", 0, 0, ErrNot64Bit, "2.11"},
		{"no XLF_KERNEL_64", bz{setupSects: 1, version: 0x020f, pm: make([]byte, 0x400)}.build(), "", 0, 0, ErrNot64Bit, "XLF_KERNEL_64"},
		{"neither bzImage nor ELF", bytes.Repeat([]byte("MZ garbage "), 100), "", 0, 0, ErrNotKernel, ""},
		{"truncated bzImage", bzWithPayload(gzipBytes(t, elfImg))[:1500], "", 0, 0, ErrPayload, "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Load(tc.img)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errSubstr) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.wantErr, tc.errSubstr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(k.Format, tc.format) || k.Entry != tc.entry || k.Segments[0].GPA != tc.firstGPA {
				t.Fatalf("format %q entry %#x gpa %#x", k.Format, k.Entry, k.Segments[0].GPA)
			}
			if tc.firstGPA == layout.KernelLoadAddr {
				h, _ := ParseSetupHeader(tc.img)
				if !bytes.Equal(k.Segments[0].Data, tc.img[h.KernelOffset():]) {
					t.Error("fallback segment is not the protected-mode part")
				}
				// pref_address 16 MiB + init_size 2 MiB in the crafted header.
				if k.End != 0x1200000 {
					t.Errorf("End %#x, want pref_address+init_size 0x1200000", k.End)
				}
			}
		})
	}
}

func TestNotKernelMessage(t *testing.T) {
	_, err := Load([]byte("#!/bin/sh\necho this is a shell script, not a kernel, but long enough to have a header area " + strings.Repeat("x", 600)))
	want := `bootparam: not a Linux kernel image (no bzImage "HdrS" header and no ELF magic)`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want prefix %q", err, want)
	}
}

func TestLoadELFErrors(t *testing.T) {
	load := func(paddr, memsz uint64) phdr {
		return phdr{typ: elfPTLoad, off: 0x1000, vaddr: 0xffffffff81000000, paddr: paddr, filesz: 0x100, memsz: memsz}
	}
	mut := func(f func([]byte)) []byte { b := tinyELF(); f(b); return b }
	tests := []struct {
		name   string
		img    []byte
		substr string
	}{
		{"short", tinyELF()[:40], "shorter"},
		{"ELF32", mut(func(b []byte) { b[4] = 1 }), "class"},
		{"big-endian", mut(func(b []byte) { b[5] = 2 }), "little-endian"},
		{"ET_DYN", mut(func(b []byte) { b[16] = 3 }), "ET_EXEC"},
		{"aarch64", mut(func(b []byte) { b[18] = 183 }), "x86-64"},
		{"phentsize", mut(func(b []byte) { b[54] = 32 }), "e_phentsize"},
		{"no phdrs", mut(func(b []byte) { b[56] = 0 }), "program headers"},
		{"phdrs past end", mut(func(b []byte) { b[32], b[33] = 0xc0, 0x27 }), "past the file end"},
		{"too many phdrs", mut(func(b []byte) { b[56] = 65 }), "program headers"},
		{"phoff huge", mut(func(b []byte) { b[39] = 0xff }), "past the file end"},
		{"no PT_LOAD", makeELF(0x1000000, []phdr{{typ: 4, off: 0x100, filesz: 4, memsz: 4}}, 0x200), "no PT_LOAD"},
		{"filesz > memsz", makeELF(0x1000000, []phdr{load(0x1000000, 0x80)}, 0x1100), "p_filesz"},
		{"data past file end", makeELF(0x1000000, []phdr{load(0x1000000, 0x100)}, 0x1080), "file range"},
		{"offset wraps", makeELF(0x1000000, []phdr{{typ: elfPTLoad, off: ^uint64(0) - 8, paddr: 0x1000000, filesz: 0x100, memsz: 0x100}}, 0x1100), "file range"},
		{"below 1 MiB", makeELF(0x1000000, []phdr{load(0x7000, 0x100)}, 0x1100), "outside"},
		{"into the PCI hole", makeELF(0x1000000, []phdr{load(0xbfffff00, 0x200)}, 0x1100), "outside"},
		{"paddr+memsz wraps", makeELF(0x1000000, []phdr{load(0xffffffffffffff00, 0x200)}, 0x1100), "outside"},
		{"huge memsz", makeELF(0x1000000, []phdr{load(0x1000000, 1<<40)}, 0x1100), "outside"},
		{"overlap", makeELF(0x1000000, []phdr{load(0x1000000, 0x1000), load(0x1000800, 0x1000)}, 0x1100), "overlaps"},
		{"entry outside", makeELF(0x5000000, []phdr{load(0x1000000, 0x1000)}, 0x1100), "entry point"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.img)
			if !errors.Is(err, ErrBadELF) || !strings.Contains(err.Error(), tc.substr) {
				t.Fatalf("err = %v, want ErrBadELF containing %q", err, tc.substr)
			}
		})
	}
}

func TestLoadELFVirtualEntry(t *testing.T) {
	img := makeELF(0xffffffff81000040, []phdr{
		{typ: elfPTLoad, off: 0x1000, vaddr: 0xffffffff81000000, paddr: 0x1000000, filesz: 0x100, memsz: 0x100},
	}, 0x1100)
	k, err := Load(img)
	if err != nil {
		t.Fatal(err)
	}
	if k.Entry != 0x1000040 {
		t.Fatalf("entry %#x, want the virtual entry translated to 0x1000040", k.Entry)
	}
}

// memCache is a PayloadCache in memory that counts its traffic.
type memCache struct {
	m          map[string][]byte
	gets, puts int
}

func (c *memCache) Get(k string) ([]byte, bool) { c.gets++; v, ok := c.m[k]; return v, ok }
func (c *memCache) Put(k string, v []byte)      { c.puts++; c.m[k] = v }

func TestLoadCached(t *testing.T) {
	elfImg := tinyELF()
	img := bzWithPayload(gzipBytes(t, elfImg))
	c := &memCache{m: map[string][]byte{}}
	k1, err := LoadCached(img, c)
	if err != nil {
		t.Fatal(err)
	}
	if c.puts != 1 || strings.Contains(k1.Format, "cache") {
		t.Fatalf("first load: puts %d format %q", c.puts, k1.Format)
	}
	k2, err := LoadCached(img, c)
	if err != nil {
		t.Fatal(err)
	}
	if c.puts != 1 || !strings.Contains(k2.Format, "from the cache") || k2.Entry != k1.Entry ||
		len(k2.Segments) != len(k1.Segments) || !bytes.Equal(k2.Segments[0].Data, k1.Segments[0].Data) {
		t.Fatalf("second load: puts %d format %q entry %#x", c.puts, k2.Format, k2.Entry)
	}
	// A damaged entry is ignored, not booted: the payload is decompressed
	// again and the same ELF loads.
	for key := range c.m {
		c.m[key] = []byte("garbage, not an ELF")
	}
	k3, err := LoadCached(img, c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(k3.Format, "cache") || k3.Entry != k1.Entry || c.puts != 2 {
		t.Fatalf("damaged cache: format %q entry %#x puts %d", k3.Format, k3.Entry, c.puts)
	}
}
