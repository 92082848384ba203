/* Real-mode setup sectors of the bzImage: the boot sector with the setup
 * header (Documentation/x86/boot.rst, "THE REAL-MODE KERNEL HEADER"), and a
 * 16-bit stub that a BIOS-style loader (QEMU -kernel with qboot/SeaBIOS)
 * runs at setup_seg:0x200 (CS = setup_seg + 0x20, IP = 0).
 *
 * The stub builds its own copy of boot_params at setup_seg:BP_COPY (the
 * setup sectors cannot hold the e820 table: it would overwrite this code),
 * fills its e820 table with BIOS int 0x15 eax=0xe820, switches to 32-bit
 * protected mode and jumps to code32_start with ESI = the copy's linear
 * address: the boot protocol's 32-bit entry. govm never runs this code: it
 * enters the 64-bit entry at code32_start + 0x200 directly.
 *
 * Real mode is emulated on our hosts (~1 M instructions/s): no loops
 * beyond the e820 walk and two short string copies. */

	.code16
	.section .setup, "ax"

/* hdr_at off: the next field starts at setup offset off (.org fails the
 * build if the fields before it ran past off). */
	.macro hdr_at off
	.org \off
	.endm

#define BP_COPY 0x1000          /* boot_params copy (4 KiB) */
#define STACK_TOP 0x3000        /* stack above the copy */
#define SMAP 0x534d4150         /* "SMAP" */

	.globl _setup
_setup:
	/* Boot sector: not bootable from a disk; a BIOS that tries gets a
	 * halt. */
	cli
1:	hlt
	jmp 1b

	.org 0x1f1
	hdr_at 0x1f1
setup_sects:	.byte _setup_sects      /* link.ld: setup size / 512 - 1 */
root_flags:	.word 0
syssize:	.long _syssize          /* protected-mode part, 16-byte units */
ram_size:	.word 0
vid_mode:	.word 0xffff            /* NORMAL_VGA */
root_dev:	.word 0
	hdr_at 0x1fe
boot_flag:	.word 0xaa55
	hdr_at 0x200
	/* The loader jumps here: a 2-byte short jump over the header. */
	.byte 0xeb, start_of_setup - 1f
1:
	hdr_at 0x202
	.ascii "HdrS"
	.word 0x020f                    /* boot protocol 2.15 */
realmode_swtch:	.long 0
start_sys_seg:	.word 0x1000
kernel_version:	.word version_string - 0x200
	hdr_at 0x210
type_of_loader:	.byte 0
loadflags:	.byte 0x01              /* LOADED_HIGH: protected mode at 1 MiB */
setup_move_size: .word 0x8000
	hdr_at 0x214
code32_start:	.long 0x100000
ramdisk_image:	.long 0
ramdisk_size:	.long 0
bootsect_kludge: .long 0
	hdr_at 0x224
heap_end_ptr:	.word 0
ext_loader_ver:	.byte 0
ext_loader_type: .byte 0
	hdr_at 0x228
cmd_line_ptr:	.long 0
	/* Below 2 GiB keeps the initrd inside the identity map. */
initrd_addr_max: .long 0x7fffffff
kernel_alignment: .long 0x200000
relocatable_kernel: .byte 0
min_alignment:	.byte 21
	hdr_at 0x236
xloadflags:	.word 0x0001            /* XLF_KERNEL_64: 64-bit entry at +0x200 */
cmdline_size:	.long 2047
hardware_subarch: .long 0
hardware_subarch_data: .quad 0
	hdr_at 0x248
payload_offset:	.long 0             /* no compressed payload */
payload_length:	.long 0
setup_data:	.quad 0
pref_address:	.quad 0x100000
	hdr_at 0x260
init_size:	.long _init_size        /* image + bss + stacks from 1 MiB */
handover_offset: .long 0
kernel_info_offset: .long 0
	hdr_at 0x26c
hdr_end:

version_string:
	.asciz "govm-test-kernel"

start_of_setup:
	cli
	cld
	/* Make CS equal the setup segment so labels are valid offsets in
	 * every segment register (the loader enters with CS = DS + 0x20). */
	movw %cs, %ax
	subw $0x20, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	movw $STACK_TOP, %sp
	pushw %ax
	pushw $normalized
	lretw
normalized:
	/* boot_params copy: zeroed, then the header the loader filled in
	 * (cmd_line_ptr, ramdisk_*, type_of_loader live there). */
	movw $BP_COPY, %di
	xorl %eax, %eax
	movw $1024, %cx
	rep stosl
	movw $0x1f1, %si
	movw $(BP_COPY + 0x1f1), %di
	movw $(hdr_end - 0x1f1), %cx
	rep movsb

	/* E820 (ACPI "Query System Address Map"), as Linux's
	 * arch/x86/boot/memory.c does it: continue while EBX != 0, stop on
	 * CF or a missing "SMAP" signature, at most 128 entries. */
	movw $(BP_COPY + 0x2d0), %di
	xorl %ebx, %ebx
	xorw %bp, %bp
e820_next:
	movl $0xe820, %eax
	movl $SMAP, %edx
	movl $20, %ecx
	pushw %di
	pushw %bp
	int $0x15
	popw %bp
	popw %di
	jc e820_done
	cmpl $SMAP, %eax
	jne e820_done
	addw $20, %di
	incw %bp
	cmpw $128, %bp
	jae e820_done
	testl %ebx, %ebx
	jnz e820_next
e820_done:
	movw %bp, %ax
	movb %al, (BP_COPY + 0x1e8)

	/* Linear address of this segment: fix up the GDT base, compute ESI. */
	cli
	xorl %eax, %eax
	movw %ds, %ax
	shll $4, %eax
	leal gdt(%eax), %edx
	movl %edx, gdt_base
	leal BP_COPY(%eax), %esi
	movl code32_start, %edx
	movl %edx, pm_target
	lgdtl gdt_desc
	lidtl idt_null                  /* until the kernel loads its IDT */

	movl %cr0, %eax
	orl $1, %eax                    /* CR0.PE */
	movl %eax, %cr0
	ljmpl *pm_target                /* CS = 0x10 (__BOOT_CS), flat 32-bit */

	.balign 8
gdt:
	.quad 0
	.quad 0
	.quad 0x00cf9a000000ffff        /* 0x10 __BOOT_CS: 32-bit code, flat */
	.quad 0x00cf92000000ffff        /* 0x18 __BOOT_DS: data, flat */
gdt_end:
gdt_desc:
	.word gdt_end - gdt - 1
gdt_base:
	.long 0
idt_null:
	.word 0
	.long 0
pm_target:
	.long 0
	.word 0x10
