package bootparam

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/govm/govm/arch/x86/layout"
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

// The guest's physical memory map, reported to the kernel in the zero page's
// e820 table (Documentation/x86/zero-page.rst: e820_entries at 0x1e8,
// e820_table at 0x2d0).

// E820 entry types (the ACPI address range types the BIOS call reports).
const (
	E820RAM      = 1
	E820Reserved = 2
)

// MaxE820Entries is the room in boot_params.e820_table.
const MaxE820Entries = 128

// E820Entry is one range of the guest memory map.
type E820Entry struct {
	Addr uint64
	Size uint64
	Type uint32
}

// End is the first address after the entry.
func (e E820Entry) End() uint64 { return e.Addr + e.Size }

// E820Map is the memory map for a guest with memSize bytes of RAM, over the
// addresses in package layout: RAM below the EBDA, the EBDA and BIOS area
// reserved, RAM from 1 MiB up to the PCI hole, and whatever RAM does not
// fit below the hole relocated to layout.HighRAMStart. The VGA hole
// (layout.VGAStart to layout.BIOSStart) is left out: it is not RAM. govm requires
// at least a few MiB of RAM; for a memSize below 1 MiB only the low RAM
// range that exists is reported.
func E820Map(memSize uint64) []E820Entry {
	var m []E820Entry
	if memSize > 0 {
		m = append(m, E820Entry{Addr: 0, Size: min(memSize, layout.EBDAStart), Type: E820RAM})
	}
	m = append(m,
		E820Entry{Addr: layout.EBDAStart, Size: layout.VGAStart - layout.EBDAStart, Type: E820Reserved},
		E820Entry{Addr: layout.BIOSStart, Size: layout.HighMemStart - layout.BIOSStart, Type: E820Reserved})
	if memSize > layout.HighMemStart {
		m = append(m, E820Entry{Addr: layout.HighMemStart, Size: min(memSize, layout.PCIHoleStart) - layout.HighMemStart, Type: E820RAM})
	}
	if memSize > layout.PCIHoleStart {
		m = append(m, E820Entry{Addr: layout.HighRAMStart, Size: memSize - layout.PCIHoleStart, Type: E820RAM})
	}
	return m
}

// LowRAMTop is the end of the RAM below the PCI hole for a guest of memSize
// bytes: the highest address (exclusive) usable for things that must stay
// below 4 GiB, such as the initrd of a kernel without XLF_CAN_BE_LOADED_ABOVE_4G.
func LowRAMTop(memSize uint64) uint64 { return min(memSize, layout.PCIHoleStart) }

// BuildCmdline joins the VMM's default arguments and the user's with a
// space and checks the result against limit, the kernel's cmdline_size
// (SetupHeader.CmdlineLimit; 0 means DefaultCmdlineSz). The kernel reads
// the line as a C string and silently truncates at cmdline_size (boot.rst,
// "THE KERNEL COMMAND LINE"), so a NUL or an overlong line would boot a
// kernel with different arguments than the user asked for: both are errors.
// The returned string has no terminating NUL; the caller writes one.
func BuildCmdline(defaults, user string, limit uint32) (string, error) {
	if limit == 0 {
		limit = DefaultCmdlineSz
	}
	var parts []string
	for _, s := range []string{defaults, user} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	line := strings.Join(parts, " ")
	if i := strings.IndexByte(line, 0); i >= 0 {
		return "", fmt.Errorf("%w: NUL byte at offset %d (the kernel would stop reading there)", ErrCmdline, i)
	}
	if uint64(len(line)) > uint64(limit) {
		return "", fmt.Errorf("%w: %d bytes, the kernel accepts at most %d (cmdline_size)", ErrCmdline, len(line), limit)
	}
	return line, nil
}

const pageSize = 4096

// InitrdAddr chooses where the initrd goes: page-aligned and as high as
// possible, because the kernel unpacks below it and KASLR and the kernel's
// own allocations prefer low memory (boot.rst, "initrd_addr_max": the
// traditional choice is "as high as possible"). The initrd must end at or
// below min(initrd_addr_max+1, end of low RAM), and must not overlap the
// kernel, which ends at kernelEnd (Kernel.End). hdr may be nil for an ELF
// kernel, in which case the pre-2.03 default 0x37ffffff applies.
// An initrdSize of 0 returns 0: no initrd.
func InitrdAddr(hdr *SetupHeader, memSize, initrdSize, kernelEnd uint64) (uint64, error) {
	if initrdSize == 0 {
		return 0, nil
	}
	limit := uint64(defaultInitrdAddrMax) + 1
	if hdr != nil && hdr.InitrdAddrMax != 0 {
		limit = uint64(hdr.InitrdAddrMax) + 1 // inclusive in the header
	}
	top := min(limit, LowRAMTop(memSize))
	// Nothing of the initrd may sit in govm's boot structures below 1 MiB.
	bottom := alignUp(max(kernelEnd, layout.HighMemStart), pageSize)
	if initrdSize > top || bottom > top-initrdSize || (top-initrdSize)&^(pageSize-1) < bottom {
		return 0, fmt.Errorf("%w: initrd is %s, but only %s is free between the kernel's end at %s and %s "+
			"(min of RAM size %s, 3 GiB and the kernel's initrd_addr_max): give the guest more memory or use a smaller initrd",
			ErrInitrdNoRoom, mib(initrdSize), mib(sat(top, bottom)), mib(bottom), mib(top), mib(memSize))
	}
	return (top - initrdSize) &^ (pageSize - 1), nil
}

func alignUp(x, a uint64) uint64 {
	if x > ^uint64(0)-(a-1) {
		return ^uint64(0) &^ (a - 1)
	}
	return (x + a - 1) &^ (a - 1)
}

// sat is x-y, or 0 when y > x.
func sat(x, y uint64) uint64 {
	if y > x {
		return 0
	}
	return x - y
}

// mib formats a byte count as MiB for error messages people read.
func mib(n uint64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
