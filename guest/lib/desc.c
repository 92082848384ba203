#include "desc.h"
#include "io.h"
#include "printf.h"
#include "report.h"
#include "string.h"

#include <stddef.h>

/* Intel SDM vol. 3, 8.7 "Task Management in 64-bit Mode", figure 8-11. */
struct tss64 {
	uint32_t reserved0;
	uint64_t rsp[3];
	uint64_t reserved1;
	uint64_t ist[7];
	uint64_t reserved2;
	uint16_t reserved3;
	uint16_t iomap_base;
	/* One bit per port, 0 = allowed; plus the 0xff byte the SDM asks for
	 * after the map (the CPU reads two bytes per check). */
	uint8_t iomap[8192 + 1];
} __attribute__((packed, aligned(16)));

static struct tss64 tss = {
	.iomap_base = offsetof(struct tss64, iomap),
	.iomap[8192] = 0xff,
};

static uint64_t idt[512] __attribute__((aligned(16)));
static intr_handler_t handlers[256];
volatile unsigned long intr_count[256];

extern uint64_t gdt[];           /* boot/head.S */
extern char isr_stubs[];         /* lib/entry.S: 256 stubs, 16 bytes apart */
extern char user_halt_ud2[];     /* lib/entry.S */

struct __attribute__((packed)) dtr {
	uint16_t limit;
	uint64_t base;
};

static void set_gate(int vec, uint64_t addr)
{
	/* 64-bit interrupt gate, present, DPL0: IF is cleared on entry. */
	idt[2 * vec] = (addr & 0xffff) | (uint64_t)KERNEL_CS << 16 |
		       (uint64_t)0x8e << 40 | ((addr >> 16) & 0xffff) << 48;
	idt[2 * vec + 1] = addr >> 32;
}

void desc_init(void *kstack_top)
{
	uint64_t base = (uintptr_t)&tss;
	uint64_t limit = sizeof(tss) - 1;
	struct dtr idtr = { sizeof(idt) - 1, (uintptr_t)idt };

	for (int v = 0; v < 256; v++)
		set_gate(v, (uintptr_t)isr_stubs + 16 * v);
	asm volatile("lidt %0" : : "m"(idtr));

	tss.rsp[0] = (uintptr_t)kstack_top;
	/* Available 64-bit TSS (type 9), present; the limit covers the
	 * whole I/O bitmap: HOST.md, port I/O at CPL3 needs it here. */
	gdt[TSS_SEL / 8] = (limit & 0xffff) | (base & 0xffffff) << 16 |
			   (uint64_t)0x89 << 40 | ((limit >> 16) & 0xf) << 48 |
			   ((base >> 24) & 0xff) << 56;
	gdt[TSS_SEL / 8 + 1] = base >> 32;
	asm volatile("ltr %w0" : : "r"(TSS_SEL));
}

void intr_set_handler(int vector, intr_handler_t h)
{
	handlers[vector & 0xff] = h;
}

static const char *const exc_names[32] = {
	"DE", "DB", "NMI", "BP", "OF", "BR", "UD", "NM", "DF", "CSO", "TS",
	"NP", "SS", "GP", "PF", "15", "MF", "AC", "MC", "XM", "VE", "CP",
};

static void __attribute__((noreturn)) fatal(struct intr_frame *f)
{
	static int nested;
	uint64_t cr2;

	asm volatile("mov %%cr2, %0" : "=r"(cr2));
	if (nested++)
		vm_exit(1);
	printf("EXCEPTION vector=%lu (#%s) error=0x%lx rip=0x%lx cs=0x%lx "
	       "rflags=0x%lx rsp=0x%lx cr2=0x%lx\n",
	       f->vector, f->vector < 32 && exc_names[f->vector] ?
	       exc_names[f->vector] : "?", f->error, f->rip, f->cs,
	       f->rflags, f->rsp, cr2);
	if (f->rip < (1ull << 32) - 16) {
		printf("EXCEPTION code=");
		print_hex((const void *)f->rip, 16);
		printf("\n");
	}
	report("exception", false, "vector=%lu error=0x%lx rip=0x%lx",
	       f->vector, f->error, f->rip);
	summary_and_exit();
}

/* Called by isr_common with interrupts off, at CPL0. */
void intr_dispatch(struct intr_frame *f)
{
	uint64_t v = f->vector & 0xff;
	intr_handler_t h = handlers[v];

	intr_count[v]++;
	if (v == 6 && f->rip == (uintptr_t)user_halt_ud2) {
		for (;;)
			asm volatile("cli; hlt");
	}
	if (h) {
		h(f);
		return;
	}
	if (v < 32)
		fatal(f);
	/* Unexpected external interrupt: counted, nothing to acknowledge. */
}

void halt_forever(void)
{
	if (current_cpl() == 0) {
		for (;;)
			asm volatile("cli; hlt");
	}
	asm volatile("jmp user_halt_ud2");
	__builtin_unreachable();
}
