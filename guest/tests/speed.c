/* speed: the same loop timed with RDTSC at CPL0 (before the drop to user
 * mode) and at CPL3. On hosts where KVM emulates guest kernel code the
 * ratio shows how much slower CPL0 is; on hardware virtualization it is
 * about 1. No TSC frequency needed for a ratio. */
#include "../lib/cmdline.h"
#include "../lib/io.h"
#include "../lib/report.h"
#include "../lib/test.h"

static volatile unsigned long counter;
static uint64_t cpl0_cycles, cpl0_iters;

static uint64_t timed_loop(unsigned long n)
{
	uint64_t t0 = rdtsc();

	for (unsigned long i = 0; i < n; i++)
		counter += 1;
	return rdtsc() - t0;
}

static void cpl0(void)
{
	/* Emulated: ~5 us per iteration measured under QEMU here, so 50k
	 * iterations cost ~0.25 s of boot time. */
	cpl0_iters = (uint64_t)cmdline_get_int("speed_cpl0_iters", 50000);
	if (cpl0_iters == 0)
		cpl0_iters = 1;
	cpl0_cycles = timed_loop(cpl0_iters);
}

static void run(void)
{
	uint64_t n3 = (uint64_t)cmdline_get_int("speed_cpl3_iters", 100000000);
	uint64_t c3;

	if (n3 == 0)
		n3 = 1;
	c3 = timed_loop(n3);
	if (c3 == 0)
		c3 = 1;
	if (!cpl0_iters) {
		report("speed", false, "reason=no_cpl0_measurement");
		return;
	}
	/* ratio = (c0 / n0) / (c3 / n3), kept in integers. */
	report("speed", true, "cpl0_cycles_per_iter=%llu "
	       "cpl3_cycles_per_iter=%llu ratio=%llu cpl3_millicycles_per_iter=%llu "
	       "cpl0_iters=%llu cpl3_iters=%llu cpl0_cycles=%llu cpl3_cycles=%llu",
	       (unsigned long long)(cpl0_cycles / cpl0_iters),
	       (unsigned long long)(c3 / n3),
	       (unsigned long long)(cpl0_cycles * n3 / (c3 * cpl0_iters)),
	       (unsigned long long)(c3 * 1000 / n3),
	       (unsigned long long)cpl0_iters, (unsigned long long)n3,
	       (unsigned long long)cpl0_cycles, (unsigned long long)c3);
}

DEFINE_TEST(speed, .name = "speed", .run = run, .cpl0 = cpl0, .in_all = true);
