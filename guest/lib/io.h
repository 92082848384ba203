/* Port I/O and a few privileged-instruction wrappers.
 *
 * Port I/O works at CPL3 too: the TSS carries an all-zero I/O permission
 * bitmap (see desc.c), which is what this host requires because IOPL in
 * RFLAGS is not honoured at CPL3 (HOST.md). */
#ifndef LIB_IO_H
#define LIB_IO_H

#include <stdint.h>

static inline void outb(uint16_t port, uint8_t v)
{
	asm volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outw(uint16_t port, uint16_t v)
{
	asm volatile("outw %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outl(uint16_t port, uint32_t v)
{
	asm volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;
	asm volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint16_t inw(uint16_t port)
{
	uint16_t v;
	asm volatile("inw %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint32_t inl(uint16_t port)
{
	uint32_t v;
	asm volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* CPL0 only. */
static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;
	asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((uint64_t)hi << 32) | lo;
}

static inline void cpu_relax(void)
{
	asm volatile("pause" ::: "memory");
}

static inline void barrier(void)
{
	asm volatile("" ::: "memory");
}

/* Current privilege level from CS.RPL. On this host CS reads 0x33 at CPL3
 * whatever the IRETQ frame said (HOST.md), which still has RPL 3. */
static inline int current_cpl(void)
{
	uint16_t cs;
	asm volatile("mov %%cs, %0" : "=r"(cs));
	return cs & 3;
}

/* phys turns a physical address (identity-mapped below 4 GiB) into a
 * pointer; the empty asm hides the constant from gcc's array-bounds
 * checks, which reject small literal addresses such as the BDA's. */
static inline void *phys(uintptr_t addr)
{
	asm("" : "+r"(addr));
	return (void *)addr;
}

static inline uint32_t mmio_read32(uintptr_t addr)
{
	return *(volatile uint32_t *)addr;
}

static inline void mmio_write32(uintptr_t addr, uint32_t v)
{
	*(volatile uint32_t *)addr = v;
}

#endif
