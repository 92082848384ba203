#include "tsc.h"
#include "io.h"
#include "pic.h"

#define PIT_CH0 0x40
#define PIT_CH2 0x42
#define PIT_MODE 0x43
#define PORT_B 0x61 /* bit 0: channel 2 gate, bit 1: speaker, bit 5: OUT2 */

static uint64_t khz;
const char *tsc_method = "none";

/* Linux's pit_calibrate_tsc: one-shot on channel 2 (mode 0: OUT2 rises
 * when the count reaches zero), gate on, speaker off; count the TSC until
 * OUT2 rises. Returns 0 when port 0x61 does not show channel 2: OUT2 must
 * read low right after the mode write (a port that reads 0xff fails). */
static uint64_t calibrate_ch2(unsigned ms)
{
	unsigned latch = PIT_HZ / (1000 / ms);
	uint64_t t0, t1, limit;
	uint8_t b = inb(PORT_B);

	outb(PORT_B, (uint8_t)((b & ~0x02) | 0x01));
	outb(PIT_MODE, 0xb0); /* channel 2, lo/hi byte, mode 0, binary */
	outb(PIT_CH2, latch & 0xff);
	outb(PIT_CH2, latch >> 8);
	t0 = rdtsc();
	if (inb(PORT_B) & 0x20) {
		outb(PORT_B, b);
		return 0;
	}
	/* A bound in TSC cycles no plausible clock reaches in time: 100x
	 * the interval at 10 GHz. */
	limit = (uint64_t)ms * 10000000ull * 100;
	while (!(inb(PORT_B) & 0x20)) {
		if (rdtsc() - t0 > limit) {
			outb(PORT_B, b);
			return 0;
		}
	}
	t1 = rdtsc();
	outb(PORT_B, b);
	return (t1 - t0) / ms;
}

static unsigned read_ch0(void)
{
	unsigned lo, hi;

	outb(PIT_MODE, 0x00); /* latch channel 0 */
	lo = inb(PIT_CH0);
	hi = inb(PIT_CH0);
	return lo | hi << 8;
}

/* Fallback: channel 0 free-running (mode 2, reload 0x10000, IRQ 0 stays
 * masked at the PIC), its count latched and read back; each read is one
 * port exit (~26 us), far below a 55 ms wrap, so wraps are never missed. */
static uint64_t calibrate_ch0(unsigned ms)
{
	uint64_t want = (uint64_t)PIT_HZ * ms / 1000, ticks = 0, t0, t1;
	uint64_t limit = (uint64_t)ms * 10000000ull * 100;
	unsigned prev, cur;

	outb(PIT_MODE, 0x34); /* channel 0, lo/hi, mode 2 */
	outb(PIT_CH0, 0);
	outb(PIT_CH0, 0);
	prev = read_ch0();
	t0 = rdtsc();
	while (ticks < want) {
		cur = read_ch0();
		ticks += (prev - cur) & 0xffff;
		prev = cur;
		if (rdtsc() - t0 > limit)
			break;
	}
	t1 = rdtsc();
	pit_stop();
	if (ticks < want)
		return 0;
	return (t1 - t0) * PIT_HZ / ticks / 1000;
}

uint64_t tsc_khz(void)
{
	if (!khz) {
		tsc_method = "pit_ch2";
		khz = calibrate_ch2(50);
		if (!khz) {
			tsc_method = "pit_ch0";
			khz = calibrate_ch0(50);
		}
		if (!khz) {
			tsc_method = "default";
			khz = 1000000;
		}
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
