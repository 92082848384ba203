package cpu

import (
	"testing"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/kvm"
)

func fakeMem(t *testing.T, size int) *guestmem.Memory {
	t.Helper()
	m, err := guestmem.New(guestmem.Region{GPA: 0, Host: make([]byte, size)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// translate walks the 4-level tables in mem the way the MMU does and
// returns the physical address for virtual address va.
func translate(t *testing.T, mem *guestmem.Memory, cr3, va uint64) (uint64, bool) {
	t.Helper()
	const addrMask = 0x000ffffffffff000
	pml4e, err := mem.Uint64(cr3&addrMask + (va>>39&0x1ff)*8)
	if err != nil || pml4e&pteP == 0 {
		return 0, false
	}
	pdpte, err := mem.Uint64(pml4e&addrMask + (va>>30&0x1ff)*8)
	if err != nil || pdpte&pteP == 0 || pdpte&ptePS != 0 {
		return 0, false
	}
	pde, err := mem.Uint64(pdpte&addrMask + (va>>21&0x1ff)*8)
	if err != nil || pde&pteP == 0 || pde&ptePS == 0 || pde&pteRW == 0 {
		return 0, false
	}
	return pde&0x000fffffffe00000 | va&(pageSize2M-1), true
}

func TestWritePageTablesIdentity(t *testing.T) {
	mem := fakeMem(t, 64<<10)
	if err := WritePageTables(mem); err != nil {
		t.Fatal(err)
	}
	for _, va := range []uint64{0, 0x7000, 0x100200, 0x1ffff8, 0x200000, 0x3fe00123, 0x40000000,
		0x7fffffff, 0x80000000, 0xc0000000, 0xfec00000, 0xfee00300, 0xffffffff} {
		pa, ok := translate(t, mem, layout.PML4Addr, va)
		if !ok || pa != va {
			t.Errorf("va %#x -> %#x (mapped %v), want identity", va, pa, ok)
		}
	}
	if _, ok := translate(t, mem, layout.PML4Addr, 0x100000000); ok {
		t.Error("4 GiB is mapped; the boot map covers only the first 4 GiB")
	}
	// Only PML4[0] is present.
	for i := uint64(1); i < 512; i++ {
		if e, _ := mem.Uint64(layout.PML4Addr + 8*i); e != 0 {
			t.Fatalf("PML4[%d] = %#x, want 0", i, e)
		}
	}
	if e, _ := mem.Uint64(layout.PDAddr + 3*4096 + 511*8); e != 0xffe00000|0x83 {
		t.Errorf("last PD entry = %#x, want 0xffe00083", e)
	}
}

func TestWritePageTablesTooSmall(t *testing.T) {
	if err := WritePageTables(fakeMem(t, 0x9000)); err == nil {
		t.Fatal("page tables written past the end of RAM")
	}
}

func TestBootGDTDescriptors(t *testing.T) {
	gdt := BootGDT()
	tests := []struct {
		name string
		sel  uint16
		want uint64
	}{
		{"null", 0, 0},
		// Flat 64-bit code: limit 0xfffff, access 0x9b, G|L.
		{"code", SelectorCode, 0x00af9b000000ffff},
		// Flat data: access 0x93, G|D/B.
		{"data", SelectorData, 0x00cf93000000ffff},
		// Busy TSS, limit 0x67.
		{"tss", SelectorTSS, 0x00008b0000000067},
	}
	for _, tt := range tests {
		if got := gdt[tt.sel/8]; got != tt.want {
			t.Errorf("%s descriptor = %#016x, want %#016x", tt.name, got, tt.want)
		}
	}
	mem := fakeMem(t, 64<<10)
	if err := WriteGDT(mem); err != nil {
		t.Fatal(err)
	}
	for i, d := range gdt {
		if got, _ := mem.Uint64(layout.GDTAddr + uint64(i)*8); got != d {
			t.Errorf("GDT[%d] in memory = %#x, want %#x", i, got, d)
		}
	}
	if layout.GDTAddr+gdtEntries*8 > layout.IDTAddr {
		t.Fatalf("GDT [%#x,%#x) overlaps the IDT at %#x", layout.GDTAddr, layout.GDTAddr+gdtEntries*8, layout.IDTAddr)
	}
}

func TestSegmentFromDescriptorRoundTrip(t *testing.T) {
	tests := []struct {
		access, flags uint8
		base, limit   uint32
		want          kvm.Segment
	}{
		{0x9b, 0xa, 0, 0xfffff, kvm.Segment{Limit: 0xffffffff, Type: 0xb, S: 1, Present: 1, L: 1, G: 1}},
		{0x93, 0xc, 0, 0xfffff, kvm.Segment{Limit: 0xffffffff, Type: 0x3, S: 1, Present: 1, DB: 1, G: 1}},
		{0xf3, 0x4, 0x12345678, 0xabcde, kvm.Segment{Base: 0x12345678, Limit: 0xabcde, Type: 3, S: 1, DPL: 3, Present: 1, DB: 1}},
		{0x8b, 0x1, 0xff000000, 0x67, kvm.Segment{Base: 0xff000000, Limit: 0x67, Type: 0xb, Present: 1, AVL: 1}},
	}
	for _, tt := range tests {
		got := segmentFromDescriptor(0x28, descriptor(tt.access, tt.flags, tt.base, tt.limit))
		tt.want.Selector = 0x28
		if got != tt.want {
			t.Errorf("access %#x flags %#x: got %+v, want %+v", tt.access, tt.flags, got, tt.want)
		}
	}
}

func TestBootSregs(t *testing.T) {
	base := kvm.Sregs{APICBase: 0xfee00900, CR0: 0x60000010, LDT: kvm.Segment{Type: 2, Present: 1, Limit: 0xffff}}
	s := BootSregs(base)
	if s.CR0 != 0x80000011 {
		t.Errorf("CR0 = %#x, want PE|ET|PG (0x80000011)", s.CR0)
	}
	if s.CR3 != layout.PML4Addr || s.CR4 != 0x20 || s.EFER != 0x500 {
		t.Errorf("CR3 %#x CR4 %#x EFER %#x", s.CR3, s.CR4, s.EFER)
	}
	if s.APICBase != base.APICBase || s.LDT != base.LDT {
		t.Error("APIC base or LDT not carried over from base")
	}
	if s.CS.Selector != 0x10 || s.CS.L != 1 || s.CS.DB != 0 || s.CS.Type != 0xb || s.CS.Present != 1 || s.CS.S != 1 {
		t.Errorf("CS = %+v, want 64-bit code at __BOOT_CS", s.CS)
	}
	for name, seg := range map[string]kvm.Segment{"DS": s.DS, "ES": s.ES, "FS": s.FS, "GS": s.GS, "SS": s.SS} {
		if seg.Selector != 0x18 || seg.Type != 3 || seg.Base != 0 || seg.Limit != 0xffffffff || seg.Present != 1 {
			t.Errorf("%s = %+v, want flat data at __BOOT_DS", name, seg)
		}
	}
	if s.TR.Type != 0xb || s.TR.S != 0 || s.TR.Present != 1 {
		t.Errorf("TR = %+v, want a present busy 64-bit TSS", s.TR)
	}
	if s.GDT.Base != 0x500 || s.GDT.Limit != 31 || s.IDT.Base != 0x520 {
		t.Errorf("GDTR %+v IDTR %+v", s.GDT, s.IDT)
	}
}

func TestBootRegsFPUMSRs(t *testing.T) {
	r := BootRegs(0x100200, 0x7000)
	if r.RIP != 0x100200 || r.RSI != 0x7000 || r.RSP != layout.BootStackTop || r.RFLAGS != 2 {
		t.Errorf("regs = %+v", r)
	}
	if f := BootFPU(); f.FCW != 0x37f || f.MXCSR != 0x1f80 {
		t.Errorf("fpu fcw %#x mxcsr %#x", f.FCW, f.MXCSR)
	}
	want := map[uint32]uint64{0x174: 0, 0x175: 0, 0x176: 0, 0xc0000081: 0, 0xc0000082: 0,
		0xc0000083: 0, 0xc0000084: 0, 0xc0000102: 0, 0x10: 0, 0x1a0: 1, 0x2ff: 0x806}
	got := BootMSRs()
	if len(got) != len(want) {
		t.Fatalf("%d MSRs, want %d", len(got), len(want))
	}
	for _, m := range got {
		if v, ok := want[m.Index]; !ok || v != m.Data {
			t.Errorf("MSR %#x = %#x, want %#x (listed %v)", m.Index, m.Data, v, ok)
		}
	}
}

func TestVirtualWireLVT(t *testing.T) {
	tests := []struct{ in0, in1, want0, want1 uint32 }{
		{0x10000, 0x10000, 0x10700, 0x10400}, // masked stays masked
		{0, 0, 0x700, 0x400},
		{0x7ff, 0x3ff, 0x7ff, 0x4ff}, // vector bits kept, mode replaced
	}
	for _, tt := range tests {
		g0, g1 := VirtualWireLVT(tt.in0, tt.in1)
		if g0 != tt.want0 || g1 != tt.want1 {
			t.Errorf("VirtualWireLVT(%#x, %#x) = %#x, %#x; want %#x, %#x", tt.in0, tt.in1, g0, g1, tt.want0, tt.want1)
		}
	}
}
