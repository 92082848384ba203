package vmm

import "github.com/govm/govm/guestmem"

// walkPageTables translates a linear address with the guest's 4-level
// (or PAE/32-bit) page tables, for diagnostics only. Every table read is
// bounds-checked: the guest's CR3 may point anywhere.
func walkPageTables(mem *guestmem.Memory, cr3, cr4, efer, lin uint64) (uint64, bool) {
	const present, large = 1, 1 << 7
	const addrMask = 0x000f_ffff_ffff_f000
	if efer&(1<<10) == 0 || cr4&(1<<5) == 0 {
		// Not long mode: 32-bit paging without PAE.
		if cr4&(1<<5) != 0 {
			return 0, false // 32-bit PAE: not needed by anything we boot
		}
		pde, err := mem.Uint32(cr3&0xffff_f000 + (lin>>22&0x3ff)*4)
		if err != nil || pde&present == 0 {
			return 0, false
		}
		if pde&large != 0 && cr4&(1<<4) != 0 {
			return uint64(pde&0xffc0_0000) | lin&0x3f_ffff, true
		}
		pte, err := mem.Uint32(uint64(pde&0xffff_f000) + (lin>>12&0x3ff)*4)
		if err != nil || pte&present == 0 {
			return 0, false
		}
		return uint64(pte&0xffff_f000) | lin&0xfff, true
	}
	table := cr3 & addrMask
	for level := 3; level >= 0; level-- {
		shift := uint(12 + 9*level)
		e, err := mem.Uint64(table + (lin>>shift&0x1ff)*8)
		if err != nil || e&present == 0 {
			return 0, false
		}
		if level > 0 && level < 3 && e&large != 0 {
			mask := uint64(1)<<shift - 1
			return e&addrMask&^mask | lin&mask, true
		}
		table = e & addrMask
	}
	return table | lin&0xfff, true
}
