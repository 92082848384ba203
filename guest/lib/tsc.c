#include "tsc.h"
#include "io.h"
#include "pic.h"

#define PIT_CH2 0x42
#define PIT_MODE 0x43
#define PORT_B 0x61 /* bit 0: channel 2 gate, bit 1: speaker, bit 5: OUT2 */

static uint64_t khz;

/* One-shot on channel 2 (mode 0: OUT2 goes high when the count reaches
 * zero), gate on, speaker off; count the TSC until OUT2 rises. */
static uint64_t calibrate(unsigned ms)
{
	unsigned latch = PIT_HZ / (1000 / ms);
	uint64_t t0, t1, limit;
	uint8_t b = inb(PORT_B);

	outb(PORT_B, (uint8_t)((b & ~0x02) | 0x01));
	outb(PIT_MODE, 0xb0); /* channel 2, lo/hi byte, mode 0, binary */
	outb(PIT_CH2, latch & 0xff);
	outb(PIT_CH2, latch >> 8);
	t0 = rdtsc();
	/* A bound in TSC cycles that no plausible clock reaches in time:
	 * 100x the interval at 10 GHz. */
	limit = (uint64_t)ms * 10000000ull * 100;
	while (!(inb(PORT_B) & 0x20)) {
		if (rdtsc() - t0 > limit)
			return 0;
	}
	t1 = rdtsc();
	outb(PORT_B, b);
	return (t1 - t0) / ms;
}

uint64_t tsc_khz(void)
{
	if (!khz) {
		uint64_t a = calibrate(50);

		khz = a ? a : 1000000;
	}
	return khz;
}

uint64_t tsc_after(uint64_t ms)
{
	return rdtsc() + ms * tsc_khz();
}

uint64_t tsc_to_us(uint64_t cycles)
{
	return cycles * 1000 / tsc_khz();
}
