/* Descriptor tables, privilege switches and interrupt dispatch.
 *
 * The GDT and page tables are static (boot/head.S); desc_init builds the
 * IDT and the TSS at CPL0. Layout of the GDT (Linux's x86-64 order):
 *   0x10 kernel code (64-bit)  0x18 kernel data   (= __BOOT_CS/__BOOT_DS)
 *   0x2b user data             0x33 user code (64-bit)
 *   0x40 TSS (16 bytes): RSP0 and an all-zero I/O permission bitmap. */
#ifndef LIB_DESC_H
#define LIB_DESC_H

#include <stdint.h>

#define KERNEL_CS 0x10
#define KERNEL_DS 0x18
#define USER_DS 0x2b
#define USER_CS 0x33
#define TSS_SEL 0x40

#define RFLAGS_IF (1u << 9)
#define RFLAGS_IOPL3 (3u << 12)

/* What isr_common (lib/entry.S) leaves on the stack, lowest address first. */
struct intr_frame {
	uint64_t r11, r10, r9, r8, rdi, rsi, rdx, rcx, rax;
	uint64_t vector, error;
	uint64_t rip, cs, rflags, rsp, ss; /* pushed by the CPU */
};

typedef void (*intr_handler_t)(struct intr_frame *f);

/* desc_init loads the IDT (all 256 vectors), fills the TSS descriptor
 * (RSP0 = kstack_top) and loads TR. CPL0 only. */
void desc_init(void *kstack_top);

/* intr_set_handler routes vector to h (CPL0 context, keep it short: it is
 * emulated on this host). Vectors 0-31 without a handler end the VM. */
void intr_set_handler(int vector, intr_handler_t h);

/* intr_count counts every interrupt and exception taken, per vector. */
extern volatile unsigned long intr_count[256];

/* enter_user IRETQs to fn at CPL3 on stack_top with IOPL=3 and IF=1. */
void __attribute__((noreturn)) enter_user(void (*fn)(void), void *stack_top);

/* halt_forever stops this CPU: at CPL0 cli+hlt; at CPL3 it executes the
 * ud2 at user_halt_ud2, which the #UD handler recognizes (HOST.md: a
 * software interrupt at CPL3 does not reach the guest IDT, an exception
 * does). */
void __attribute__((noreturn)) halt_forever(void);

#endif
