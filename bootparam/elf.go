package bootparam

import (
	"encoding/binary"
	"fmt"
)

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
		if paddr < MinLoadAddr || paddr > MaxLoadEnd || memsz > MaxLoadEnd-paddr {
			return nil, 0, fmt.Errorf("%w: segment %d: physical range %#x+%#x outside [%#x, %#x)", ErrBadELF, i, paddr, memsz, MinLoadAddr, MaxLoadEnd)
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
