/* emul: instructions that KVM's instruction emulator lacks but that a VMM
 * can carry out, executed at CPL0 (which hosts without VT-x/AMD-V run in
 * that emulator: HOST.md). Linux executes both on ordinary paths (int3 in
 * its alternatives self-test and text_poke_bp, fwait in fpu__drop on every
 * exec), so govm supplies them (vmm/emulate.go):
 *   emul-int3   the guest's #BP handler runs once, as for a trap: the
 *               saved RIP is the instruction after the int3, and the code
 *               there runs next;
 *   emul-fwait  fwait does nothing, and the code after it runs.
 * With hardware virtualization both run natively, with the same results.
 * Without the VMM's help an emulation-only host ends the VM with
 * KVM_EXIT_INTERNAL_ERROR at the int3. */
#include "../lib/desc.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/test.h"

#include <stdint.h>

extern char emul_after_int3[];

static volatile uint64_t bp_count, bp_rip, bp_cs;
static volatile int after_int3, after_fwait;

static void on_bp(struct intr_frame *f)
{
	bp_count++;
	bp_rip = f->rip;
	bp_cs = f->cs;
}

/* Runs at CPL0, as the #UD handler of the ud2 in run(). */
static void at_cpl0(struct intr_frame *f)
{
	asm volatile("int3\n"
		     ".globl emul_after_int3\n"
		     "emul_after_int3:\n" ::: "memory");
	after_int3 = 1;
	asm volatile("fwait" ::: "memory");
	after_fwait = 1;
	f->rip += 2; /* past the ud2 */
}

static void run(void)
{
	intr_set_handler(3, on_bp);
	intr_set_handler(6, at_cpl0);
	printf("emul: int3 and fwait at CPL0\n");
	asm volatile("ud2" ::: "memory");
	report("emul-int3",
	       bp_count == 1 && bp_rip == (uintptr_t)emul_after_int3 && (bp_cs & 3) == 0 && after_int3,
	       "count=%lu rip=0x%lx want=0x%lx cs=0x%lx after=%d", (unsigned long)bp_count,
	       (unsigned long)bp_rip, (unsigned long)(uintptr_t)emul_after_int3, (unsigned long)bp_cs,
	       after_int3);
	report("emul-fwait", after_fwait, "after=%d", after_fwait);
}

DEFINE_TEST(emul, .name = "emul", .run = run, .in_all = false);
