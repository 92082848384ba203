package cpu

import (
	"encoding/binary"
	"fmt"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/kvm"
)

// The boot-time structures live at package layout's addresses (GDTAddr,
// IDTAddr, BootStackTop, PML4Addr, PDPTAddr, PDAddr to PageTablesEnd).
const (
	// numPDs is how many page directories fit in the layout, one per GiB
	// identity mapped: 4, covering the PCI hole up to layout.HighRAMStart.
	numPDs     = (layout.PageTablesEnd - layout.PDAddr) / 4096
	pageSize2M = 2 << 20
)

// Boot GDT selectors. Linux's 64-bit boot protocol wants __BOOT_CS (0x10)
// and __BOOT_DS (0x18) with flat 4G segments. The TSS placeholder sits at
// 0x08 because the IDT starts at layout.IDTAddr, leaving room for four
// entries.
const (
	SelectorTSS  = 0x08
	SelectorCode = 0x10 // __BOOT_CS
	SelectorData = 0x18 // __BOOT_DS
	gdtEntries   = 4
)

// Segment descriptor fields (Intel SDM vol. 3A, 3.4.5): access byte P, DPL,
// S, type; flags nibble G, D/B, L, AVL.
const (
	accessCode64 = 0x9b // P=1 DPL=0 S=1 type=0xb execute/read, accessed
	accessData   = 0x93 // P=1 DPL=0 S=1 type=0x3 read/write, accessed
	accessTSS    = 0x8b // P=1 DPL=0 S=0 type=0xb busy 64-bit TSS
	flagsCode64  = 0xa  // G=1 L=1
	flagsData    = 0xc  // G=1 D/B=1
	tssLimit     = 0x67 // a minimal 104-byte TSS
)

// Control-register and EFER bits.
const (
	cr0PE    = 1 << 0
	cr0ET    = 1 << 4
	cr0PG    = 1 << 31
	cr4PAE   = 1 << 5
	eferLME  = 1 << 8
	eferLMA  = 1 << 10
	pteP     = 1 << 0
	pteRW    = 1 << 1
	ptePS    = 1 << 7 // 2 MiB page in a PD entry
	rflagsR1 = 1 << 1 // reserved, always 1
)

// descriptor encodes a segment descriptor.
func descriptor(access, flags uint8, base, limit uint32) uint64 {
	return uint64(limit&0xffff) |
		uint64(base&0xffffff)<<16 |
		uint64(access)<<40 |
		uint64(limit>>16&0xf)<<48 |
		uint64(flags&0xf)<<52 |
		uint64(base>>24)<<56
}

// segmentFromDescriptor is what a CPU would load into the hidden part of a
// segment register from descriptor d with selector sel.
func segmentFromDescriptor(sel uint16, d uint64) kvm.Segment {
	access := uint8(d >> 40)
	flags := uint8(d >> 52 & 0xf)
	limit := uint32(d&0xffff) | uint32(d>>48&0xf)<<16
	g := flags >> 3 & 1
	if g == 1 {
		limit = limit<<12 | 0xfff
	}
	return kvm.Segment{
		Base:     d>>16&0xffffff | (d>>56)<<24,
		Limit:    limit,
		Selector: sel,
		Type:     access & 0xf,
		S:        access >> 4 & 1,
		DPL:      access >> 5 & 3,
		Present:  access >> 7,
		AVL:      flags & 1,
		L:        flags >> 1 & 1,
		DB:       flags >> 2 & 1,
		G:        g,
	}
}

// BootGDT returns the boot GDT: null, TSS placeholder (never loaded with
// LTR; KVM takes TR from the sregs), flat 64-bit code, flat data.
func BootGDT() [gdtEntries]uint64 {
	return [gdtEntries]uint64{
		0,
		descriptor(accessTSS, 0, 0, tssLimit),
		descriptor(accessCode64, flagsCode64, 0, 0xfffff),
		descriptor(accessData, flagsData, 0, 0xfffff),
	}
}

// WriteGDT writes BootGDT at layout.GDTAddr and an empty IDT at
// layout.IDTAddr: any
// exception before the kernel loads its own IDT triple-faults, which
// is what a VMM wants to see.
func WriteGDT(mem *guestmem.Memory) error {
	var b [gdtEntries * 8]byte
	for i, d := range BootGDT() {
		binary.LittleEndian.PutUint64(b[i*8:], d)
	}
	if err := mem.WriteAt(b[:], layout.GDTAddr); err != nil {
		return fmt.Errorf("cpu: writing boot GDT: %w", err)
	}
	if err := mem.WriteAt(make([]byte, 16), layout.IDTAddr); err != nil {
		return fmt.Errorf("cpu: writing boot IDT: %w", err)
	}
	return nil
}

// WritePageTables writes the identity map of the first 4 GiB with 2 MiB
// pages: PML4[0] -> PDPT, PDPT[i] -> PD i, PD i entry j maps
// (i*512+j) * 2 MiB. The boot protocol requires the kernel, zero page and
// command line to be identity mapped; mapping all 4 GiB also covers the
// 32-bit MMIO hole.
func WritePageTables(mem *guestmem.Memory) error {
	const pml4, pdpt, pd = layout.PML4Addr, layout.PDPTAddr, layout.PDAddr
	tables := make([]byte, layout.PageTablesEnd-pml4)
	le := binary.LittleEndian
	le.PutUint64(tables[0:], pdpt|pteP|pteRW)
	for i := uint64(0); i < numPDs; i++ {
		le.PutUint64(tables[pdpt-pml4+8*i:], (pd+i*4096)|pteP|pteRW)
		for j := uint64(0); j < 512; j++ {
			le.PutUint64(tables[pd-pml4+i*4096+8*j:], (i*512+j)*pageSize2M|pteP|pteRW|ptePS)
		}
	}
	if err := mem.WriteAt(tables, pml4); err != nil {
		return fmt.Errorf("cpu: writing boot page tables: %w", err)
	}
	return nil
}

// BootSregs returns base (the vCPU's current sregs, for APIC base and the
// LDT) switched to 64-bit long mode as the boot protocol requires: paging
// on with CR3 = layout.PML4Addr, CR4.PAE, EFER.LME|LMA, CS = __BOOT_CS,
// DS/ES/FS/GS/SS = __BOOT_DS, all taken from BootGDT so the hidden
// segment state matches the GDT in memory.
func BootSregs(base kvm.Sregs) kvm.Sregs {
	s := base
	gdt := BootGDT()
	s.CS = segmentFromDescriptor(SelectorCode, gdt[SelectorCode/8])
	data := segmentFromDescriptor(SelectorData, gdt[SelectorData/8])
	s.DS, s.ES, s.FS, s.GS, s.SS = data, data, data, data, data
	s.TR = segmentFromDescriptor(SelectorTSS, gdt[SelectorTSS/8])
	s.GDT = kvm.DTable{Base: layout.GDTAddr, Limit: gdtEntries*8 - 1}
	s.IDT = kvm.DTable{Base: layout.IDTAddr, Limit: 0}
	s.CR0 = cr0PE | cr0ET | cr0PG
	s.CR2 = 0
	s.CR3 = layout.PML4Addr
	s.CR4 = cr4PAE
	s.EFER = eferLME | eferLMA
	return s
}

// BootRegs returns the general registers at the 64-bit entry point: RIP =
// entry, RSI = the zero page, RSP = layout.BootStackTop, RFLAGS with
// only the reserved bit (interrupts off).
func BootRegs(entry, bootParams uint64) kvm.Regs {
	return kvm.Regs{RIP: entry, RSI: bootParams, RSP: layout.BootStackTop, RBP: layout.BootStackTop, RFLAGS: rflagsR1}
}

// BootFPU returns the x87/SSE reset state (FNINIT control word, MXCSR with
// all exceptions masked).
func BootFPU() kvm.FPU {
	return kvm.FPU{FCW: 0x37f, MXCSR: 0x1f80}
}

// MSR indices (Intel SDM vol. 4).
const (
	msrTSC           = 0x10
	msrSysenterCS    = 0x174
	msrSysenterESP   = 0x175
	msrSysenterEIP   = 0x176
	msrMiscEnable    = 0x1a0
	msrMTRRDefType   = 0x2ff
	msrSTAR          = 0xc0000081
	msrLSTAR         = 0xc0000082
	msrCSTAR         = 0xc0000083
	msrSyscallMask   = 0xc0000084
	msrKernelGSBase  = 0xc0000102
	miscEnableFastSt = 1 << 0
	mtrrEnable       = 1 << 11
	mtrrTypeWB       = 6
)

// BootMSRs returns the MSR values at entry: syscall/sysenter targets
// cleared, TSC at 0, fast-string operations enabled, and MTRRs enabled
// with write-back as the default type (otherwise Linux would see all RAM
// as uncacheable).
func BootMSRs() []kvm.MSREntry {
	return []kvm.MSREntry{
		{Index: msrSysenterCS}, {Index: msrSysenterESP}, {Index: msrSysenterEIP},
		{Index: msrSTAR}, {Index: msrLSTAR}, {Index: msrCSTAR}, {Index: msrSyscallMask},
		{Index: msrKernelGSBase},
		{Index: msrTSC},
		{Index: msrMiscEnable, Data: miscEnableFastSt},
		{Index: msrMTRRDefType, Data: mtrrEnable | mtrrTypeWB},
	}
}

// SetupLongMode prepares vCPU v to enter a 64-bit Linux kernel at entry
// with the zero page at bootParams (Documentation/x86/boot.rst, "64-bit
// BOOT PROTOCOL"): it writes the boot GDT, IDT and page tables into mem and
// sets sregs, regs, FPU and MSRs. Set the CPUID table (SetCPUID) first.
func SetupLongMode(mem *guestmem.Memory, v *kvm.VCPU, entry, bootParams uint64) error {
	if err := WriteGDT(mem); err != nil {
		return err
	}
	if err := WritePageTables(mem); err != nil {
		return err
	}
	base, err := v.GetSregs()
	if err != nil {
		return err
	}
	s := BootSregs(*base)
	if err := v.SetSregs(&s); err != nil {
		return err
	}
	r := BootRegs(entry, bootParams)
	if err := v.SetRegs(&r); err != nil {
		return err
	}
	f := BootFPU()
	if err := v.SetFPU(&f); err != nil {
		return err
	}
	return v.SetMSRs(BootMSRs())
}
