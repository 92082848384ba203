// Package layout is the one home of govm's guest-physical memory map: every
// fixed address a guest sees, in the spirit of Firecracker's
// arch/x86_64/layout.rs. vmm, bootparam, cpu, cmos and mptable read these
// constants and declare no guest address of their own. (Tests may still
// write expected values out, as an independent statement of what the guest
// must see; the test kernel in guest/ scans memory as Linux does, not by
// this map.)
//
// docs/boot.md ("Guest physical memory") shows the same map as a table, and
// TestBootDocTableMatchesConstants checks that table against these
// constants both ways: a constant missing from the table, a row naming an
// unknown constant, or a value that differs fails `go test ./layout`.
// Change an address here and in the table together.
//
// Ranges are half-open, [start, end). Every constant here is an address;
// the package has no imports, so any package may read it.
package layout

// Boot-time structures below 1 MiB, written by govm before the first vCPU
// runs (Linux x86 64-bit boot protocol, Documentation/arch/x86/boot.rst,
// "64-bit BOOT PROTOCOL": the kernel must find the zero page, command line
// and its own image identity mapped, and CS/DS selectors in a GDT).
const (
	// GDTAddr is the boot GDT: four 8-byte entries (null, TSS
	// placeholder, __BOOT_CS, __BOOT_DS), ending at IDTAddr.
	GDTAddr = 0x500
	// IDTAddr is the empty boot IDT (limit 0): any exception before the
	// kernel loads its own IDT triple-faults, which a VMM wants to see.
	IDTAddr = 0x520
	// ZeroPageAddr is struct boot_params (4 KiB); RSI points here at the
	// 64-bit entry.
	ZeroPageAddr = 0x7000
	// BootStackTop is the boot vCPU's initial RSP: the stack grows down
	// into the page above the zero page, and stays below the page tables.
	BootStackTop = 0x8ff0
	// PML4Addr is the boot page tables' root (CR3): one PML4 page, then
	// the PDPT, then the page directories, up to PageTablesEnd.
	PML4Addr = 0x9000
	// PDPTAddr is the page-directory-pointer table PML4[0] points at.
	PDPTAddr = 0xa000
	// PDAddr is the first of the page directories that identity map the
	// low 4 GiB with 2 MiB pages, one 4 KiB directory per GiB.
	PDAddr = 0xb000
	// PageTablesEnd ends the page directories: (PageTablesEnd-PDAddr)/4096
	// directories map [0, HighRAMStart), the PCI hole included, so the
	// kernel can reach the IOAPIC and LAPIC before it builds its own map.
	PageTablesEnd = 0xf000
	// CmdlineAddr is the NUL-terminated kernel command line; the zero
	// page's cmd_line_ptr points here. It lies above the page tables and
	// below the EBDA: 511 KiB of room, where x86 Linux's
	// COMMAND_LINE_SIZE is 2048.
	CmdlineAddr = 0x20000
)

// The legacy PC holes below 1 MiB. The e820 map (bootparam.E820Map)
// reserves the EBDA and the BIOS area and leaves the VGA hole out: Linux
// and legacy code expect firmware data there, not RAM to allocate.
const (
	// EBDAStart is the extended BIOS data area, [EBDAStart, VGAStart):
	// reserved. Low RAM ends here.
	EBDAStart = 0x9fc00
	// VGAStart is the VGA frame buffer and option-ROM hole,
	// [VGAStart, BIOSStart): neither RAM nor reported.
	VGAStart = 0xa0000
	// BIOSStart is the system BIOS area, [BIOSStart, HighMemStart):
	// reserved, and where the MP table lives.
	BIOSStart = 0xf0000
	// MPTableAddr is the MP floating pointer and configuration table: in
	// the BIOS area, one of the places Linux scans for "_MP_" (MP spec
	// 1.4, 4.1).
	MPTableAddr = 0xf0000
)

// RAM for the kernel and initrd, and the 32-bit MMIO gap.
const (
	// HighMemStart is 1 MiB, where "extended" memory begins: the lowest
	// address a kernel segment or the initrd may occupy, so that nothing
	// the guest loads overwrites the boot structures above.
	HighMemStart = 0x100000
	// KernelLoadAddr is where the protected-mode part of a bzImage goes
	// when govm boots it without decompressing (code32_start's traditional
	// value; boot.rst, "LOADING THE REST OF THE KERNEL").
	KernelLoadAddr = 0x100000
	// PCIHoleStart is 3 GiB: low RAM ends here at the latest, and
	// [PCIHoleStart, HighRAMStart) is the 32-bit MMIO gap (IOAPIC, LAPIC,
	// KVM's private pages). Every kernel segment and the initrd end below
	// it.
	PCIHoleStart = 0xc000_0000
	// IOAPICAddr is the IOAPIC's MMIO base (KVM's in-kernel IOAPIC, and
	// Linux's default, IO_APIC_DEFAULT_PHYS_BASE).
	IOAPICAddr = 0xfec0_0000
	// LAPICAddr is the local APIC's MMIO base
	// (APIC_DEFAULT_PHYS_BASE).
	LAPICAddr = 0xfee0_0000
	// KVMIdentityMapAddr is the page KVM_SET_IDENTITY_MAP_ADDR gets: KVM
	// keeps an identity page table there for unpaged guest modes. It
	// must be in the hole, outside RAM and any MMIO, and sits directly
	// below KVMTSSAddr.
	KVMIdentityMapAddr = 0xfffb_c000
	// KVMTSSAddr is the start of the three pages KVM_SET_TSS_ADDR gets
	// (KVM's real-mode TSS on Intel): in the hole, outside RAM and any
	// MMIO, ending at 0xfffc0000.
	KVMTSSAddr = 0xfffb_d000
	// HighRAMStart is 4 GiB, the first address past 32 bits: RAM beyond
	// PCIHoleStart's worth of --mem resumes here.
	HighRAMStart = 0x1_0000_0000
)
