package bootparam

import (
	"testing"

	"github.com/govm/govm/arch/x86/layout"
)

// FuzzLoad feeds arbitrary bytes to Load: a kernel image comes from the
// user, and a hostile one must never panic govm or yield segments outside
// the guest's loadable range.
func FuzzLoad(f *testing.F) {
	f.Add(tinyELF())
	f.Add(bz{setupSects: 1, version: 0x020f, xlf: XLFKernel64, pm: make([]byte, 0x400)}.build())
	f.Add(bzWithPayload(gzipBytes(f, tinyELF())))
	f.Add(bzWithPayload([]byte("not compressed")))
	f.Fuzz(func(t *testing.T, img []byte) {
		k, err := load(img, 4<<20, nil)
		if err != nil {
			if k != nil {
				t.Fatal("kernel returned with an error")
			}
			return
		}
		if len(k.Segments) == 0 {
			t.Fatal("no segments")
		}
		inside := false
		for _, s := range k.Segments {
			if s.GPA < layout.HighMemStart || s.MemSize > layout.PCIHoleStart || s.GPA > layout.PCIHoleStart-s.MemSize {
				t.Fatalf("segment %#x+%#x outside [%#x, %#x)", s.GPA, s.MemSize, layout.HighMemStart, layout.PCIHoleStart)
			}
			if uint64(len(s.Data)) > s.MemSize {
				t.Fatalf("segment data %#x > memsz %#x", len(s.Data), s.MemSize)
			}
			if s.End() > k.End {
				t.Fatalf("segment end %#x beyond Kernel.End %#x", s.End(), k.End)
			}
			inside = inside || (k.Entry >= s.GPA && k.Entry < s.End())
		}
		if !inside {
			t.Fatalf("entry %#x outside every segment", k.Entry)
		}
		if k.Header != nil {
			if _, err := BuildZeroPage(ZeroPageConfig{Header: k.Header, E820: E820Map(256 << 20)}); err != nil {
				t.Fatalf("zero page for a loaded kernel: %v", err)
			}
		}
	})
}
