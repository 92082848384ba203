#include "alloc.h"
#include "bootparam.h"
#include "string.h"

#define E820_RAM 1
#define MIB (1ull << 20)

extern char _end[]; /* link.ld: end of .bss and the stacks */

static uintptr_t pool_next, pool_end, low_ram_end;

static uintptr_t align_up(uintptr_t v, uintptr_t a)
{
	return (v + a - 1) & ~(a - 1);
}

uintptr_t ram_top(void)
{
	alloc_init();
	return low_ram_end;
}

void alloc_init(void)
{
	unsigned n = bp_u8(boot_params, BP_E820_ENTRIES);
	uint64_t initrd = bp_u32(boot_params, HDR_RAMDISK_IMAGE);
	uint64_t initrd_size = bp_u32(boot_params, HDR_RAMDISK_SIZE);

	if (pool_end)
		return;
	if (n > BP_E820_MAX)
		n = BP_E820_MAX;
	low_ram_end = 16 * MIB; /* a floor should the e820 be unusable */
	for (unsigned i = 0; i < n; i++) {
		unsigned off = BP_E820_TABLE + i * E820_ENTRY_SIZE;
		uint64_t a = bp_u64(boot_params, off);
		uint64_t s = bp_u64(boot_params, off + 8);

		if (bp_u32(boot_params, off + 16) == E820_RAM && a <= MIB &&
		    a + s > MIB)
			low_ram_end = (uintptr_t)(a + s);
	}
	/* Only the first 4 GiB is mapped; the PCI hole starts at 3 GiB. */
	if (low_ram_end > 0xc0000000u)
		low_ram_end = 0xc0000000u;
	pool_next = align_up((uintptr_t)_end, 2 * MIB);
	pool_end = low_ram_end;
	if (initrd_size && initrd >= pool_next && initrd < pool_end)
		pool_end = (uintptr_t)initrd;
}

void *alloc_zeroed(size_t n, size_t align)
{
	uintptr_t p;

	alloc_init();
	if (align < 16)
		align = 16;
	p = align_up(pool_next, align);
	if (p < pool_next || p + n < p || p + n > pool_end)
		return NULL;
	pool_next = p + n;
	memset((void *)p, 0, n);
	return (void *)p;
}

uintptr_t alloc_mark(void)
{
	alloc_init();
	return pool_next;
}

void alloc_release(uintptr_t mark)
{
	if (mark && mark <= pool_next)
		pool_next = mark;
}
