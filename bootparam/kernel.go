package bootparam

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/bootparam/decompress"
)

// Where the loader puts a kernel. The addresses are package layout's: a
// kernel segment lies in [layout.HighMemStart, layout.PCIHoleStart), above
// govm's zero page, page tables, command line and the BIOS area, and below
// the PCI hole; the fallback boot loads at layout.KernelLoadAddr.
const (
	// Entry64Offset is the 64-bit entry point relative to the start of
	// the protected-mode part (boot.rst, "64-BIT BOOT PROTOCOL").
	Entry64Offset = 0x200
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
// protocol: the protected-mode code at layout.KernelLoadAddr, entry at +0x200; that
// needs protocol >= 2.12 with XLF_KERNEL_64. A payload in a known format
// that fails to decompress is an error, not a fallback: the kernel's own
// decompressor would fail on it too, only minutes later.
func Load(img []byte) (*Kernel, error) { return load(img, MaxDecompressed, nil) }

// PayloadCache keeps decompressed bzImage payloads between runs, keyed by a
// digest of the compressed payload. Host-side decompression of a distro
// kernel's xz payload takes about a second; repeated boots of the same
// kernel (CI smoke tests) skip it. What Get returns is validated exactly as
// a fresh decompression would be, so a corrupt cache cannot load anything a
// bad kernel could not.
type PayloadCache interface {
	Get(key string) ([]byte, bool)
	Put(key string, data []byte)
}

// LoadCached is Load with a payload cache (nil: no cache).
func LoadCached(img []byte, cache PayloadCache) (*Kernel, error) {
	return load(img, MaxDecompressed, cache)
}

// decompressCached decompresses payload, or takes it from cache.
func decompressCached(payload []byte, limit int64, cache PayloadCache) ([]byte, decompress.Format, bool, error) {
	if cache == nil {
		raw, f, err := decompress.Payload(payload, limit)
		return raw, f, false, err
	}
	sum := sha256.Sum256(payload)
	key := hex.EncodeToString(sum[:])
	// Only an ELF can have been stored; anything else is a damaged cache
	// entry, and the payload is decompressed afresh.
	if raw, ok := cache.Get(key); ok && int64(len(raw)) <= limit && IsELF(raw) {
		return raw, decompress.Detect(payload), true, nil
	}
	raw, f, err := decompress.Payload(payload, limit)
	if err == nil && IsELF(raw) {
		cache.Put(key, raw)
	}
	return raw, f, false, err
}

// load is Load with a chosen decompression cap (the fuzz test uses a small
// one to stay fast).
func load(img []byte, limit int64, cache PayloadCache) (*Kernel, error) {
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
		raw, f, cached, err := decompressCached(payload, limit, cache)
		took := time.Since(start)
		switch {
		case err == nil && IsELF(raw):
			segs, entry, err := loadELF(raw)
			if err != nil {
				return nil, fmt.Errorf("bzImage %s payload: %w", f, err)
			}
			format := "bzImage+" + string(f) + "->elf"
			if cached {
				format += " (decompressed payload from the cache)"
				took = 0
			}
			return &Kernel{
				Header: h, Segments: segs, Entry: entry,
				// vmlinux runs where it is loaded: its memsz already
				// covers bss and brk, and init_size is the
				// decompressor's need, which we skip.
				End:            segmentsEnd(segs),
				Format:         format,
				DecompressTime: took,
			}, nil
		case err == nil:
			reason = fmt.Sprintf("%s payload is not ELF", f)
		case errors.Is(err, decompress.ErrUnsupported), errors.Is(err, decompress.ErrUnknownFormat):
			reason = err.Error()
		default:
			// decompress names the payload and its format.
			return nil, fmt.Errorf("bootparam: bzImage: %w", err)
		}
	}
	if !h.Has64BitEntry() {
		return nil, fmt.Errorf("%w: protocol %d.%02d, xloadflags %#x (need protocol >= 2.12 with XLF_KERNEL_64); and the payload cannot be loaded directly: %s",
			ErrNot64Bit, h.Version>>8, h.Version&0xff, h.XLoadFlags, reason)
	}
	if uint64(len(pm)) > layout.PCIHoleStart-layout.KernelLoadAddr {
		return nil, fmt.Errorf("%w: protected-mode kernel of %d bytes does not fit below %#x", ErrPayload, len(pm), uint64(layout.PCIHoleStart))
	}
	if uint64(len(pm)) <= Entry64Offset {
		// The vCPU would start outside everything loaded (found by FuzzLoad).
		return nil, fmt.Errorf("%w: protected-mode kernel of %d bytes ends before its 64-bit entry at +%#x", ErrPayload, len(pm), Entry64Offset)
	}
	seg := Segment{GPA: layout.KernelLoadAddr, Data: pm, MemSize: uint64(len(pm))}
	return &Kernel{
		Header: h, Segments: []Segment{seg},
		Entry:  layout.KernelLoadAddr + Entry64Offset,
		End:    max(seg.End(), bzImageEnd(h, len(pm))),
		Format: "bzImage, 64-bit entry at 1 MiB + 0x200 (" + reason + ")",
	}, nil
}

// bzImageEnd is where the memory a bzImage's own decompressor may use ends:
// init_size bytes from the higher of the load address and pref_address
// (arch/x86/boot/compressed/head_64.S moves itself there before unpacking).
func bzImageEnd(h *SetupHeader, pmLen int) uint64 {
	base := max(uint64(layout.KernelLoadAddr), h.PrefAddress)
	if base > layout.PCIHoleStart {
		base = layout.KernelLoadAddr
	}
	return max(layout.KernelLoadAddr+uint64(pmLen), base+uint64(h.InitSize))
}

func segmentsEnd(segs []Segment) uint64 {
	var end uint64
	for _, s := range segs {
		end = max(end, s.End())
	}
	return end
}

// A minimal ELF64 reader for x86-64 vmlinux files. debug/elf would do, but it
// parses far more than we need (sections, symbols) from an untrusted file;
// program headers are all a loader reads, the same as linux-loader's
// Elf::load and Firecracker's use of it.

const (
	elfHeaderLen   = 64
	elfPhdrLen     = 56
	elfMaxPhdrs    = 64 // vmlinux has five; anything far beyond is not a kernel
	elfClass64     = 2
	elfDataLSB     = 1
	elfTypeExec    = 2
	elfMachineX64  = 62
	elfPTLoad      = 1
	elfVersionCurr = 1
)

// Segment is one piece of the kernel to place in guest RAM: copy Data to
// GPA, then zero from GPA+len(Data) to GPA+MemSize (the ELF bss).
type Segment struct {
	GPA     uint64
	Data    []byte
	MemSize uint64
}

// End is the first guest physical address after the segment.
func (s Segment) End() uint64 { return s.GPA + s.MemSize }

// IsELF reports whether img starts with the ELF magic.
func IsELF(img []byte) bool {
	return len(img) >= 4 && img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F'
}

// loadELF validates an ELF64 x86-64 executable and returns its PT_LOAD
// segments (placed at p_paddr) and its physical entry point.
func loadELF(img []byte) ([]Segment, uint64, error) {
	if len(img) < elfHeaderLen {
		return nil, 0, fmt.Errorf("%w: %d bytes, shorter than the ELF header", ErrBadELF, len(img))
	}
	le := binary.LittleEndian
	switch {
	case img[4] != elfClass64:
		return nil, 0, fmt.Errorf("%w: ELF class %d, need ELF64", ErrBadELF, img[4])
	case img[5] != elfDataLSB:
		return nil, 0, fmt.Errorf("%w: not little-endian", ErrBadELF)
	case le.Uint16(img[16:]) != elfTypeExec:
		return nil, 0, fmt.Errorf("%w: e_type %d, need ET_EXEC", ErrBadELF, le.Uint16(img[16:]))
	case le.Uint16(img[18:]) != elfMachineX64:
		return nil, 0, fmt.Errorf("%w: e_machine %d, need x86-64 (62)", ErrBadELF, le.Uint16(img[18:]))
	case le.Uint32(img[20:]) != elfVersionCurr:
		return nil, 0, fmt.Errorf("%w: e_version %d", ErrBadELF, le.Uint32(img[20:]))
	}
	entry := le.Uint64(img[24:])
	phoff := le.Uint64(img[32:])
	phentsize := le.Uint16(img[54:])
	phnum := uint64(le.Uint16(img[56:]))
	if phentsize != elfPhdrLen {
		return nil, 0, fmt.Errorf("%w: e_phentsize %d, need %d", ErrBadELF, phentsize, elfPhdrLen)
	}
	if phnum == 0 || phnum > elfMaxPhdrs {
		return nil, 0, fmt.Errorf("%w: %d program headers (need 1..%d)", ErrBadELF, phnum, elfMaxPhdrs)
	}
	if phoff > uint64(len(img)) || phnum*elfPhdrLen > uint64(len(img))-phoff {
		return nil, 0, fmt.Errorf("%w: program headers at %#x (%d of them) run past the file end %#x", ErrBadELF, phoff, phnum, len(img))
	}
	var segs []Segment
	var vaddrs []uint64 // p_vaddr of each segment, to translate a virtual e_entry
	for i := uint64(0); i < phnum; i++ {
		ph := img[phoff+i*elfPhdrLen:][:elfPhdrLen]
		if le.Uint32(ph[0:]) != elfPTLoad {
			continue
		}
		off, vaddr, paddr := le.Uint64(ph[8:]), le.Uint64(ph[16:]), le.Uint64(ph[24:])
		filesz, memsz := le.Uint64(ph[32:]), le.Uint64(ph[40:])
		if memsz == 0 {
			continue // nothing to place; the kernel never emits these
		}
		if filesz > memsz {
			return nil, 0, fmt.Errorf("%w: segment %d: p_filesz %#x > p_memsz %#x", ErrBadELF, i, filesz, memsz)
		}
		if off > uint64(len(img)) || filesz > uint64(len(img))-off {
			return nil, 0, fmt.Errorf("%w: segment %d: file range %#x+%#x outside the %#x-byte file", ErrBadELF, i, off, filesz, len(img))
		}
		// The guest's boot structures live below 1 MiB and the
		// PCI hole starts at 3 GiB: a segment must fit between.
		if paddr < layout.HighMemStart || paddr > layout.PCIHoleStart || memsz > layout.PCIHoleStart-paddr {
			return nil, 0, fmt.Errorf("%w: segment %d: physical range %#x+%#x outside [%#x, %#x)", ErrBadELF, i, paddr, memsz, layout.HighMemStart, layout.PCIHoleStart)
		}
		s := Segment{GPA: paddr, Data: img[off : off+filesz], MemSize: memsz}
		for j, o := range segs {
			if s.GPA < o.End() && o.GPA < s.End() {
				return nil, 0, fmt.Errorf("%w: segment %d [%#x, %#x) overlaps load segment %d [%#x, %#x)", ErrBadELF, i, s.GPA, s.End(), j, o.GPA, o.End())
			}
		}
		segs = append(segs, s)
		vaddrs = append(vaddrs, vaddr)
	}
	if len(segs) == 0 {
		return nil, 0, fmt.Errorf("%w: no PT_LOAD segment", ErrBadELF)
	}
	// arch/x86/kernel/vmlinux.lds.S sets ENTRY(phys_startup_64), so e_entry
	// of an x86-64 vmlinux is already physical. Accept a virtual entry too
	// (other linkers, hand-made images) by translating it through the
	// segment that contains it.
	for _, s := range segs {
		if entry >= s.GPA && entry < s.End() {
			return segs, entry, nil
		}
	}
	for i, s := range segs {
		if entry >= vaddrs[i] && entry-vaddrs[i] < s.MemSize {
			return segs, entry - vaddrs[i] + s.GPA, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: entry point %#x is in no load segment", ErrBadELF, entry)
}
