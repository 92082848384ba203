/* Physical memory for device rings and buffers: a bump allocator over the
 * low RAM above the kernel image (identity-mapped, so a pointer is its own
 * guest-physical address). Nothing is ever freed one by one: a test takes
 * a mark and releases everything above it when done. */
#ifndef LIB_ALLOC_H
#define LIB_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* alloc_init finds the pool: from the first 2 MiB boundary after the
 * kernel to the end of the e820 RAM range that holds 1 MiB, stopping below
 * an initrd placed there. Idempotent; works at CPL3. */
void alloc_init(void);

/* alloc_zeroed returns n zeroed bytes aligned to align (a power of two),
 * or NULL when the pool is exhausted. Zeroing runs wherever the caller
 * runs: call it at CPL3 (native) for anything large. */
void *alloc_zeroed(size_t n, size_t align);

/* alloc_mark / alloc_release: everything allocated after the mark is
 * returned to the pool. */
uintptr_t alloc_mark(void);
void alloc_release(uintptr_t mark);

/* ram_top is the end of the e820 RAM range that holds 1 MiB. */
uintptr_t ram_top(void);

/* virt_to_phys: identity map (boot/head.S). */
static inline uint64_t virt_to_phys(const volatile void *p)
{
	return (uint64_t)(uintptr_t)p;
}

#endif
