/* Protected-mode part, loaded at 1 MiB (code32_start):
 *   0x100000  32-bit entry (boot protocol: flat __BOOT_CS/__BOOT_DS,
 *             paging off, ESI = boot_params): enable PAE + long mode with
 *             the static page tables below, far-jump to the 64-bit entry.
 *   0x100200  64-bit entry (boot protocol: identity-mapped paging,
 *             RSI = boot_params): load our GDT and page tables, clear .bss,
 *             call kmain(boot_params) on the kernel stack.
 *
 * Both run emulated here, so the page tables are built by the assembler
 * (.rept), not by a loop. */

	.section .head, "ax"
	.code32
	.globl startup_32
startup_32:
	cli
	cld
	movl $0x18, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	movl %eax, %fs
	movl %eax, %gs
	lgdt gdt_desc                   /* 32-bit lgdt reads a 32-bit base */
	movl %cr4, %eax
	orl $0x20, %eax                 /* CR4.PAE */
	movl %eax, %cr4
	movl $pml4, %eax
	movl %eax, %cr3
	movl $0xc0000080, %ecx          /* EFER */
	rdmsr
	orl $0x100, %eax                /* EFER.LME */
	wrmsr
	movl %cr0, %eax
	orl $0x80000001, %eax           /* CR0.PG | CR0.PE */
	movl %eax, %cr0
	ljmp $0x10, $from32

	.org 0x200
	.code64
	.globl startup_64
startup_64:
	cli
	cld
	movq %rsi, %r15                 /* boot_params */
	lgdt gdt_desc(%rip)
	movl $0x18, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	xorl %eax, %eax
	movl %eax, %fs
	movl %eax, %gs
	leaq kstack_top(%rip), %rsp
	pushq $0x10
	leaq 1f(%rip), %rax
	pushq %rax
	lretq                           /* reload CS from our GDT */
1:
	leaq pml4(%rip), %rax           /* our tables: U/S set everywhere */
	movq %rax, %cr3
	leaq __bss_start(%rip), %rdi
	leaq __bss_end(%rip), %rcx
	subq %rdi, %rcx
	shrq $3, %rcx
	xorl %eax, %eax
	rep stosq
	movq %r15, %rdi
	call kmain
2:	hlt
	jmp 2b

/* From startup_32: the upper halves of registers are undefined after the
 * switch to 64-bit mode, so zero-extend ESI before the common path. */
from32:
	movl %esi, %esi
	jmp startup_64

	.section .data.pgt, "aw"
	.balign 4096
	/* Identity map of the first 4 GiB with 2 MiB pages, present,
	 * writable and user-accessible (the tests run at CPL3). The top GiB
	 * (PCI/MMIO hole: IOAPIC, LAPIC, BARs) is also cache-disabled. */
	.globl pml4
pml4:
	.quad pdpt + 0x7
	.fill 511, 8, 0
pdpt:
	.quad pd + 0x0007
	.quad pd + 0x1007
	.quad pd + 0x2007
	.quad pd + 0x3007
	.fill 508, 8, 0
pd:
	.set i, 0
	.rept 2048
	.if i < 1536
	.quad (i << 21) | 0x87          /* P | RW | US | PS */
	.else
	.quad (i << 21) | 0x9f          /* P | RW | US | PWT | PCD | PS */
	.endif
	.set i, i + 1
	.endr

	.data
	.balign 16
	.globl gdt
gdt:
	.quad 0                         /* 0x00 null */
	.quad 0x00cf9a000000ffff        /* 0x08 32-bit code (unused) */
	.quad 0x00af9a000000ffff        /* 0x10 kernel code, 64-bit */
	.quad 0x00cf92000000ffff        /* 0x18 kernel data */
	.quad 0x00cffa000000ffff        /* 0x20 user code, 32-bit (unused) */
	.quad 0x00cff2000000ffff        /* 0x28 user data (0x2b) */
	.quad 0x00affa000000ffff        /* 0x30 user code, 64-bit (0x33) */
	.quad 0                         /* 0x38 */
	.quad 0, 0                      /* 0x40 TSS, filled by desc_init */
gdt_end:
gdt_desc:
	.word gdt_end - gdt - 1
	.quad gdt

	.section .stack, "aw", @nobits
	.balign 4096
	.space 16384
	.globl kstack_top
kstack_top:
	.space 65536
	.globl ustack_top
ustack_top:
