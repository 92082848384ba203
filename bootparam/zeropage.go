package bootparam

import (
	"encoding/binary"
	"fmt"
)

// Offsets in struct boot_params (Documentation/x86/zero-page.rst) that are
// not part of the setup header.
const (
	// ZeroPageSize is sizeof(struct boot_params).
	ZeroPageSize       = 4096
	offExtRamdiskImage = 0x0c0
	offExtRamdiskSize  = 0x0c4
	offExtCmdLinePtr   = 0x0c8
	offE820Entries     = 0x1e8
	offE820Table       = 0x2d0
	e820EntrySize      = 20 // struct boot_e820_entry: u64 addr, u64 size, u32 type (packed)
)

// Values govm writes into the header (boot.rst, "DETAILS OF HEADER FIELDS").
const (
	// LoaderUndefined is type_of_loader 0xff: "undefined" boot loader,
	// the value for loaders without an assigned ID.
	LoaderUndefined = 0xff
	// VidModeNormal is vid_mode 0xffff, "normal" VGA text mode: ask the
	// kernel for no mode change.
	VidModeNormal = 0xffff
	// heapEndPtr is heap_end_ptr for a setup heap ending at 0xe000 within
	// the real-mode segment, minus 0x200 as boot.rst prescribes. govm
	// never runs the real-mode setup, but the value keeps CAN_USE_HEAP
	// honest for any code that looks.
	heapEndPtr = 0xe000 - 0x200
	// defaultInitrdAddrMax is initrd_addr_max for protocols before 2.03
	// and for ELF kernels without a header (boot.rst).
	defaultInitrdAddrMax = 0x37ffffff
	// synthVersion is the protocol version written into the header we
	// synthesize for an ELF kernel: 2.15, what Linux 5.5+ itself reports;
	// every field it implies is either filled in or zero, which the
	// kernel reads as "not provided".
	synthVersion = 0x020f
)

// ZeroPageConfig is what BuildZeroPage needs to know.
type ZeroPageConfig struct {
	// Header is the kernel's setup header (copied in verbatim before the
	// loader fields are set), or nil for an ELF kernel, in which case a
	// minimal valid header is written.
	Header *SetupHeader
	// CmdlineAddr and CmdlineLen locate the NUL-terminated command line
	// (CmdlineLen excludes the NUL). CmdlineAddr 0 means none.
	CmdlineAddr uint64
	CmdlineLen  uint32
	// InitrdAddr and InitrdSize locate the initrd; size 0 means none.
	InitrdAddr, InitrdSize uint64
	// E820 is the memory map, at most MaxE820Entries entries.
	E820 []E820Entry
}

// BuildZeroPage returns the 4096-byte struct boot_params for the 64-bit
// boot protocol (boot.rst, "64-BIT BOOT PROTOCOL": the setup header copied
// from the image, then the loader's fields filled in).
func BuildZeroPage(cfg ZeroPageConfig) ([]byte, error) {
	if len(cfg.E820) == 0 || len(cfg.E820) > MaxE820Entries {
		return nil, fmt.Errorf("%w: %d e820 entries (need 1..%d)", ErrZeroPage, len(cfg.E820), MaxE820Entries)
	}
	if lim := cfg.Header.CmdlineLimit(); cfg.CmdlineLen > lim {
		return nil, fmt.Errorf("%w: command line of %d bytes exceeds the kernel's cmdline_size %d", ErrZeroPage, cfg.CmdlineLen, lim)
	}
	if cfg.InitrdSize > 0 && cfg.InitrdAddr+cfg.InitrdSize < cfg.InitrdAddr {
		return nil, fmt.Errorf("%w: initrd %#x+%#x wraps around", ErrZeroPage, cfg.InitrdAddr, cfg.InitrdSize)
	}
	zp := make([]byte, ZeroPageSize)
	le := binary.LittleEndian
	if cfg.Header != nil && len(cfg.Header.Raw) > 0 {
		copy(zp[offSetupSects:setupHeaderMaxEnd], cfg.Header.Raw)
	} else {
		// An ELF vmlinux has no header; the kernel still checks the
		// magic values and reads the loader fields below.
		le.PutUint16(zp[offBootFlag:], BootFlagMagic)
		zp[offJump], zp[offJump+1] = 0xeb, setupHeaderEnd+4-offHeader // short jmp over the header, as in the kernel's own
		le.PutUint32(zp[offHeader:], HeaderMagic)
		le.PutUint16(zp[offVersion:], synthVersion)
		zp[offLoadFlags] = LoadedHigh
		le.PutUint32(zp[offInitrdAddrMax:], defaultInitrdAddrMax)
		le.PutUint32(zp[offKernelAlign:], 0x200000)
		le.PutUint16(zp[offXLoadFlags:], XLFKernel64)
		le.PutUint32(zp[offCmdlineSize:], DefaultCmdlineSz)
	}
	le.PutUint16(zp[offVidMode:], VidModeNormal)
	zp[offTypeOfLoader] = LoaderUndefined
	zp[offLoadFlags] |= CanUseHeap
	le.PutUint16(zp[offHeapEndPtr:], heapEndPtr)

	// 64-bit values are split: low half in the header field, high half in
	// the ext_ field (protocol 2.12, zero-page.rst).
	le.PutUint32(zp[offCmdLinePtr:], uint32(cfg.CmdlineAddr))
	le.PutUint32(zp[offExtCmdLinePtr:], uint32(cfg.CmdlineAddr>>32))
	if cfg.InitrdSize > 0 {
		le.PutUint32(zp[offRamdiskImage:], uint32(cfg.InitrdAddr))
		le.PutUint32(zp[offExtRamdiskImage:], uint32(cfg.InitrdAddr>>32))
		le.PutUint32(zp[offRamdiskSize:], uint32(cfg.InitrdSize))
		le.PutUint32(zp[offExtRamdiskSize:], uint32(cfg.InitrdSize>>32))
	} else {
		// The image's own header may carry nonzero ramdisk fields.
		le.PutUint32(zp[offRamdiskImage:], 0)
		le.PutUint32(zp[offRamdiskSize:], 0)
	}

	zp[offE820Entries] = uint8(len(cfg.E820))
	for i, e := range cfg.E820 {
		p := zp[offE820Table+i*e820EntrySize:]
		le.PutUint64(p[0:], e.Addr)
		le.PutUint64(p[8:], e.Size)
		le.PutUint32(p[16:], e.Type)
	}
	return zp, nil
}
