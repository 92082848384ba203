package bootparam

// The guest's physical memory map, reported to the kernel in the zero page's
// e820 table (Documentation/x86/zero-page.rst: e820_entries at 0x1e8,
// e820_table at 0x2d0).

// E820 entry types (the ACPI address range types the BIOS call reports).
const (
	E820RAM      = 1
	E820Reserved = 2
)

// Guest physical layout boundaries (team brief, "Guest physical memory
// layout").
const (
	// EBDAStart: [EBDAStart, 0xa0000) is the extended BIOS data area,
	// reserved so the kernel does not use what legacy code expects there.
	EBDAStart = 0x9fc00
	// VGAStart to BIOSStart is the legacy VGA/option-ROM hole, not RAM.
	VGAStart = 0xa0000
	// BIOSStart: [BIOSStart, HighMemStart) holds the MP tables; reserved.
	BIOSStart = 0xf0000
	// HighMemStart is 1 MiB, where "extended" memory begins.
	HighMemStart = 0x100000
	// LowRAMEnd is the start of the 32-bit PCI/MMIO hole (3 GiB).
	LowRAMEnd = 0xc0000000
	// HighRAMStart is where RAM beyond LowRAMEnd is mapped (4 GiB).
	HighRAMStart = 0x100000000
	// MaxE820Entries is the room in boot_params.e820_table.
	MaxE820Entries = 128
)

// E820Entry is one range of the guest memory map.
type E820Entry struct {
	Addr uint64
	Size uint64
	Type uint32
}

// End is the first address after the entry.
func (e E820Entry) End() uint64 { return e.Addr + e.Size }

// E820Map is the memory map for a guest with memSize bytes of RAM: RAM below
// the EBDA, the EBDA and BIOS area reserved, RAM from 1 MiB up to the PCI
// hole, and whatever RAM does not fit below 3 GiB relocated above 4 GiB.
// The VGA hole (0xa0000-0xf0000) is left out: it is not RAM. govm requires
// at least a few MiB of RAM; for a memSize below 1 MiB only the low RAM
// range that exists is reported.
func E820Map(memSize uint64) []E820Entry {
	var m []E820Entry
	if memSize > 0 {
		m = append(m, E820Entry{Addr: 0, Size: min(memSize, EBDAStart), Type: E820RAM})
	}
	m = append(m,
		E820Entry{Addr: EBDAStart, Size: VGAStart - EBDAStart, Type: E820Reserved},
		E820Entry{Addr: BIOSStart, Size: HighMemStart - BIOSStart, Type: E820Reserved})
	if memSize > HighMemStart {
		m = append(m, E820Entry{Addr: HighMemStart, Size: min(memSize, LowRAMEnd) - HighMemStart, Type: E820RAM})
	}
	if memSize > LowRAMEnd {
		m = append(m, E820Entry{Addr: HighRAMStart, Size: memSize - LowRAMEnd, Type: E820RAM})
	}
	return m
}

// LowRAMTop is the end of the RAM below the PCI hole for a guest of memSize
// bytes: the highest address (exclusive) usable for things that must stay
// below 4 GiB, such as the initrd of a kernel without XLF_CAN_BE_LOADED_ABOVE_4G.
func LowRAMTop(memSize uint64) uint64 { return min(memSize, LowRAMEnd) }
