package layout

import "testing"

// TestMapIsConsistent checks the relations the rest of govm relies on: the
// boot structures do not overlap, the page tables are page-aligned and map
// exactly the low 4 GiB, the legacy holes are in order, and the hole's
// fixed pages sit between the end of low RAM and 4 GiB without overlapping.
func TestMapIsConsistent(t *testing.T) {
	const (
		page     = 4096
		gdtSize  = 4 * 8 // cpu.BootGDT: four descriptors
		idtSize  = 16    // cpu.WriteGDT: an empty IDT
		zpSize   = 4096  // sizeof(struct boot_params)
		cmdline  = 2048  // x86 Linux COMMAND_LINE_SIZE
		gib      = 1 << 30
		kvmTSS   = 3 * page // KVM_SET_TSS_ADDR takes three pages
		identity = page
	)
	checks := []struct {
		what string
		ok   bool
	}{
		{"GDT ends at or below the IDT", GDTAddr+gdtSize <= IDTAddr},
		{"IDT ends below the zero page", IDTAddr+idtSize <= ZeroPageAddr},
		{"zero page is page-aligned", ZeroPageAddr%page == 0},
		{"stack top is above the zero page", ZeroPageAddr+zpSize <= BootStackTop},
		{"stack top is 16-byte aligned", BootStackTop%16 == 0},
		{"stack top is below the page tables", BootStackTop <= PML4Addr},
		{"PDPT follows the PML4", PML4Addr+page == PDPTAddr},
		{"page directories follow the PDPT", PDPTAddr+page == PDAddr},
		{"page tables are page-aligned", PML4Addr%page == 0 && (PageTablesEnd-PDAddr)%page == 0},
		{"page directories map exactly [0, 4 GiB)", (PageTablesEnd-PDAddr)/page*gib == HighRAMStart},
		{"command line is above the page tables", PageTablesEnd <= CmdlineAddr},
		{"command line fits below the EBDA", CmdlineAddr+cmdline <= EBDAStart},
		{"EBDA, VGA hole and BIOS area are in order", EBDAStart < VGAStart && VGAStart < BIOSStart && BIOSStart < HighMemStart},
		{"MP table is in the BIOS area", BIOSStart <= MPTableAddr && MPTableAddr < HighMemStart && MPTableAddr%16 == 0},
		{"kernel loads in high memory", KernelLoadAddr >= HighMemStart},
		{"PCI hole starts above 1 MiB and below 4 GiB", HighMemStart < PCIHoleStart && PCIHoleStart < HighRAMStart},
		{"IOAPIC, LAPIC, identity map and KVM TSS are in the hole, in order",
			PCIHoleStart <= IOAPICAddr && IOAPICAddr < LAPICAddr && LAPICAddr+page <= KVMIdentityMapAddr},
		{"identity map page is just below the KVM TSS", KVMIdentityMapAddr+identity == KVMTSSAddr},
		{"KVM TSS ends below 4 GiB", KVMTSSAddr+kvmTSS <= HighRAMStart},
		{"high RAM starts at 4 GiB", HighRAMStart == 1<<32},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("layout: %s: false", c.what)
		}
	}
}
