/* Interrupt entry stubs, the CPL3 entry and the user-mode halt.
 *
 * Every stub is 16 bytes apart so desc.c can compute the address of
 * vector v's stub as isr_stubs + 16 * v, without a table. A stub pushes a
 * dummy error code when the CPU does not push one, then the vector. */

	.code64
	.text

	.balign 16
	.globl isr_stubs
isr_stubs:
	.set vec, 0
	.rept 256
	.balign 16
	/* Vectors with a CPU-pushed error code: SDM vol. 3, table 6-1. */
	.if (vec == 8) || (vec == 10) || (vec == 11) || (vec == 12) || (vec == 13) || (vec == 14) || (vec == 17) || (vec == 21) || (vec == 29) || (vec == 30)
	.else
	pushq $0
	.endif
	pushq $vec
	jmp isr_common
	.set vec, vec + 1
	.endr

/* Saves only the caller-saved registers: the C dispatcher preserves the
 * rest. Kept short because this host emulates every CPL0 instruction.
 * The stack is 16-byte aligned at the call: CPU frame (40) + error (8) +
 * vector (8) + 9 registers (72) = 128 bytes from the aligned RSP0. */
isr_common:
	pushq %rax
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	movq %rsp, %rdi
	cld
	call intr_dispatch
	popq %r11
	popq %r10
	popq %r9
	popq %r8
	popq %rdi
	popq %rsi
	popq %rdx
	popq %rcx
	popq %rax
	addq $16, %rsp
	iretq

/* void enter_user(void (*fn)(void), void *stack_top) */
	.globl enter_user
enter_user:
	pushq $0x2b             /* SS: user data */
	pushq %rsi              /* RSP */
	pushq $0x3202           /* RFLAGS: IOPL=3, IF=1, reserved bit 1 */
	pushq $0x33             /* CS: user code, 64-bit */
	pushq %rdi              /* RIP */
	xorl %eax, %eax
	movl %eax, %ds
	movl %eax, %es
	iretq

/* A known ud2: the #UD handler halts the CPU at CPL0 when RIP is here. */
	.globl user_halt_ud2
user_halt_ud2:
	ud2
	jmp user_halt_ud2
