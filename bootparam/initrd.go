package bootparam

import "fmt"

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
	bottom := alignUp(max(kernelEnd, HighMemStart), pageSize)
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
