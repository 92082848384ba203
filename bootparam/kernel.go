package bootparam

import (
	"errors"
	"fmt"
	"time"

	"github.com/govm/govm/bootparam/decompress"
)

// Guest physical addresses the loader uses (see the memory layout in the
// team brief).
const (
	// KernelLoadAddr is where the protected-mode part of a bzImage goes
	// (code32_start's traditional value; boot.rst "LOADING THE REST OF THE
	// KERNEL").
	KernelLoadAddr = 0x100000
	// Entry64Offset is the 64-bit entry point relative to KernelLoadAddr
	// (boot.rst, "64-BIT BOOT PROTOCOL").
	Entry64Offset = 0x200
	// MinLoadAddr is the lowest address a kernel segment may occupy: below
	// it are govm's zero page, page tables, command line and the BIOS area.
	MinLoadAddr = 0x100000
	// MaxLoadEnd bounds every kernel segment and the initrd: low RAM ends
	// at the 3 GiB PCI hole.
	MaxLoadEnd = LowRAMEnd
	// MaxDecompressed caps a bzImage payload's decompressed size.
	MaxDecompressed = decompress.DefaultLimit
)

// Kernel describes a kernel ready to copy into guest RAM.
type Kernel struct {
	// Header is the bzImage setup header, nil for a raw ELF vmlinux.
	Header *SetupHeader
	// Segments to copy into guest RAM, each zero-filled to its MemSize.
	Segments []Segment
	// Entry is the guest physical address to start the boot vCPU at, in
	// 64-bit mode with RSI pointing at the zero page.
	Entry uint64
	// End is the first address after all memory the kernel occupies
	// while booting: its segments and, for a bzImage, the init_size bytes
	// its own decompressor needs. Pass it to InitrdAddr.
	End uint64
	// Format says how the image was loaded, for a log line, e.g.
	// "bzImage+xz->elf" or "elf".
	Format string
	// DecompressTime is how long host-side decompression took (0 if none).
	DecompressTime time.Duration
}

// Load turns a kernel file into a Kernel. It accepts a bzImage and an ELF64
// x86-64 vmlinux.
//
// For a bzImage with a payload (protocol >= 2.08) that decompresses to an
// ELF vmlinux, the vmlinux is loaded at its p_paddr and entered at e_entry:
// the guest never runs the kernel's decompressor, which on our hosts is
// emulated and would take minutes. When the payload is absent, in an
// unsupported format or not ELF, Load falls back to the 64-bit boot
// protocol: the protected-mode code at KernelLoadAddr, entry at +0x200; that
// needs protocol >= 2.12 with XLF_KERNEL_64. A payload in a known format
// that fails to decompress is an error, not a fallback: the kernel's own
// decompressor would fail on it too, only minutes later.
func Load(img []byte) (*Kernel, error) { return load(img, MaxDecompressed) }

// load is Load with a chosen decompression cap (the fuzz test uses a small
// one to stay fast).
func load(img []byte, limit int64) (*Kernel, error) {
	if IsELF(img) {
		segs, entry, err := loadELF(img)
		if err != nil {
			return nil, err
		}
		return &Kernel{Segments: segs, Entry: entry, End: segmentsEnd(segs), Format: "elf"}, nil
	}
	h, err := ParseSetupHeader(img)
	if err != nil {
		return nil, err
	}
	pm := img[h.KernelOffset():]
	reason := "payload_length is 0"
	if h.Version < versionPayload {
		reason = "protocol older than 2.08 has no payload fields"
	} else if h.PayloadLength > 0 {
		payload := pm[h.PayloadOffset:][:h.PayloadLength] // bounds checked by ParseSetupHeader
		start := time.Now()
		raw, f, err := decompress.Payload(payload, limit)
		took := time.Since(start)
		switch {
		case err == nil && IsELF(raw):
			segs, entry, err := loadELF(raw)
			if err != nil {
				return nil, fmt.Errorf("bzImage %s payload: %w", f, err)
			}
			return &Kernel{
				Header: h, Segments: segs, Entry: entry,
				// vmlinux runs where it is loaded: its memsz already
				// covers bss and brk, and init_size is the
				// decompressor's need, which we skip.
				End:            segmentsEnd(segs),
				Format:         "bzImage+" + string(f) + "->elf",
				DecompressTime: took,
			}, nil
		case err == nil:
			reason = fmt.Sprintf("%s payload is not ELF", f)
		case errors.Is(err, decompress.ErrUnsupported), errors.Is(err, decompress.ErrUnknownFormat):
			reason = err.Error()
		default:
			return nil, fmt.Errorf("bootparam: bzImage payload: %w", err)
		}
	}
	if !h.Has64BitEntry() {
		return nil, fmt.Errorf("%w: protocol %d.%02d, xloadflags %#x (need protocol >= 2.12 with XLF_KERNEL_64); and the payload cannot be loaded directly: %s",
			ErrNot64Bit, h.Version>>8, h.Version&0xff, h.XLoadFlags, reason)
	}
	if uint64(len(pm)) > MaxLoadEnd-KernelLoadAddr {
		return nil, fmt.Errorf("%w: protected-mode kernel of %d bytes does not fit below %#x", ErrPayload, len(pm), uint64(MaxLoadEnd))
	}
	seg := Segment{GPA: KernelLoadAddr, Data: pm, MemSize: uint64(len(pm))}
	return &Kernel{
		Header: h, Segments: []Segment{seg},
		Entry:  KernelLoadAddr + Entry64Offset,
		End:    max(seg.End(), bzImageEnd(h, len(pm))),
		Format: "bzImage (64-bit entry, kernel decompresses itself: " + reason + ")",
	}, nil
}

// bzImageEnd is where the memory a bzImage's own decompressor may use ends:
// init_size bytes from the higher of the load address and pref_address
// (arch/x86/boot/compressed/head_64.S moves itself there before unpacking).
func bzImageEnd(h *SetupHeader, pmLen int) uint64 {
	base := max(uint64(KernelLoadAddr), h.PrefAddress)
	if base > MaxLoadEnd {
		base = KernelLoadAddr
	}
	return max(KernelLoadAddr+uint64(pmLen), base+uint64(h.InitSize))
}

func segmentsEnd(segs []Segment) uint64 {
	var end uint64
	for _, s := range segs {
		end = max(end, s.End())
	}
	return end
}
