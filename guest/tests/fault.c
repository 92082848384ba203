/* fault: raise an exception at CPL3 on purpose to check that the VMM
 * delivers it through the guest IDT and that the exception reporter works.
 * Not part of test=all. fault=ud (default) | pf | gp. Expected: an
 * EXCEPTION line, RESULT exception fail ..., exit status 3.
 * fault=triple: the #UD handler (CPL0) loads an empty IDT and faults
 * again: no handler for the #UD, nor for the #GP/#DF that follow, so the
 * CPU shuts down (triple fault). The VMM sees KVM_EXIT_SHUTDOWN.
 * fault=cx16: the #UD handler (CPL0) executes lock cmpxchg16b, which KVM's
 * instruction emulator lacks (HOST.md): on a host without VT-x/AMD-V,
 * where CPL0 code is emulated, the VMM sees KVM_EXIT_INTERNAL_ERROR (govm
 * exits 1). With hardware virtualization the instruction just runs and the
 * test reports "cx16 ran". */
#include "../lib/cmdline.h"
#include "../lib/desc.h"
#include "../lib/printf.h"
#include "../lib/test.h"

#include <stdint.h>

/* CPL0: no IDT at all, then another fault. */
static void triple(struct intr_frame *f)
{
	static const struct __attribute__((packed)) {
		uint16_t limit;
		uint64_t base;
	} empty = { 0, 0 };

	(void)f;
	printf("fault: loading an empty IDT and faulting again\n");
	asm volatile("lidt %0; ud2" : : "m"(empty));
}

/* CPL0: an instruction the emulator cannot run. */
static void cx16(struct intr_frame *f)
{
	static volatile unsigned __int128 slot __attribute__((aligned(16)));
	uint64_t lo = 0, hi = 0;

	printf("fault: lock cmpxchg16b at CPL0\n");
	asm volatile("lock cmpxchg16b %2"
		     : "+a"(lo), "+d"(hi), "+m"(slot)
		     : "b"(1ull), "c"(0ull)
		     : "memory", "cc");
	printf("fault: cx16 ran (hardware virtualization)\n");
	f->rip += 2; /* past the ud2 */
}

static void run(void)
{
	char kind[8] = "ud";

	cmdline_get("fault", kind, sizeof(kind));
	printf("fault: raising #%s at CPL3\n", kind);
	if (kind[0] == 't') {
		intr_set_handler(6, triple);
		asm volatile("ud2");
	} else if (kind[0] == 'c') {
		intr_set_handler(6, cx16);
		asm volatile("ud2");
	} else if (kind[0] == 'p') {
		/* Beyond the 4 GiB identity map: not present. */
		(void)*(volatile uint64_t *)(uintptr_t)0x100000000000ull;
	} else if (kind[0] == 'g') {
		asm volatile("hlt"); /* privileged at CPL3 */
	} else {
		asm volatile("ud2");
	}
	printf("fault: no exception\n");
}

DEFINE_TEST(fault, .name = "fault", .run = run, .in_all = false);
