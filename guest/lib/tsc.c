#include "tsc.h"
#include "io.h"
#include "pic.h"

#include <stdbool.h>

#define PIT_CH0 0x40
#define PIT_CH2 0x42
#define PIT_MODE 0x43
#define PORT_B 0x61 /* bit 0: channel 2 gate, bit 1: speaker, bit 5: OUT2 */

static uint64_t khz;
const char *tsc_method = "none";

unsigned long tsc_cal_rejects;

/* Host preemption. The vCPU is a thread of the host, which may leave it
 * waiting, runnable, for most of each second (seen here at load 26: it ran
 * 13 ms in one second) without the guest noticing. Both clocks run on
 * through such a gap, so one in the middle of a measurement does no harm;
 * one at its edges does (the PIT event seen long after it happened), and
 * so does one longer than a wrap of channel 0's 16-bit count (55 ms: the
 * wraps are missed and the ticks undercounted). Both made the TSC read many
 * times too fast (33 GHz for 2.6 GHz with the VMM stopped 180 ms in every
 * 200), which stretched every TSC-bounded wait as much: a 23 s bound lasted
 * minutes. Linux's pit_calibrate_tsc throws away a run whose longest gap
 * between two reads is over 10x its shortest (an SMI); here each PIT read
 * is bracketed by two TSC reads and trusted only when they are close
 * (SAMPLE_MAX), and channel 0 intervals are used only when shorter than a
 * wrap at any plausible TSC rate (GAP_MAX: 20 ms at 1 GHz). A normal read
 * is one to three port exits, ~30-80 us. */
#define SAMPLE_MAX 2000000ull
#define GAP_MAX 20000000ull
#define CH2_TRIES 10

/* Linux's pit_calibrate_tsc: one-shot on channel 2 (mode 0: OUT2 rises
 * when the count reaches zero), gate on, speaker off; count the TSC until
 * OUT2 rises. The count starts between a and t0; OUT2 rose after the read
 * that last saw it low (begun at prev) and before the one that saw it high
 * (ended at t1). Returns 0 when port 0x61 does not show channel 2 (OUT2
 * must read low right after the mode write; a port that reads 0xff fails)
 * or when either edge was not seen within SAMPLE_MAX cycles (*tight). */
static uint64_t calibrate_ch2(unsigned ms, bool *tight)
{
	unsigned latch = PIT_HZ / (1000 / ms);
	uint64_t a, t0, t1, prev, limit;
	uint8_t b = inb(PORT_B), v;

	*tight = false;
	outb(PORT_B, (uint8_t)((b & ~0x02) | 0x01));
	outb(PIT_MODE, 0xb0); /* channel 2, lo/hi byte, mode 0, binary */
	outb(PIT_CH2, latch & 0xff);
	a = rdtsc();
	outb(PIT_CH2, latch >> 8);
	t0 = rdtsc();
	if (inb(PORT_B) & 0x20) {
		outb(PORT_B, b);
		return 0;
	}
	/* A bound in TSC cycles no plausible clock reaches in time: 100x
	 * the interval at 10 GHz. */
	limit = (uint64_t)ms * 10000000ull * 100;
	prev = t0;
	for (;;) {
		uint64_t before = rdtsc();

		v = inb(PORT_B);
		t1 = rdtsc();
		if (v & 0x20)
			break;
		prev = before;
		if (t1 - t0 > limit) {
			outb(PORT_B, b);
			return 0;
		}
	}
	outb(PORT_B, b);
	*tight = t0 - a < SAMPLE_MAX && t1 - prev < SAMPLE_MAX;
	/* The midpoints of the two brackets. */
	return ((t1 + prev) / 2 - (t0 + a) / 2) / ms;
}

static unsigned read_ch0(void)
{
	unsigned lo, hi;

	outb(PIT_MODE, 0x00); /* latch channel 0 */
	lo = inb(PIT_CH0);
	hi = inb(PIT_CH0);
	return lo | hi << 8;
}

/* sample_ch0 reads channel 0's count and the TSC just before its latch;
 * false when a gap came between the two (the pair cannot be trusted). */
static bool sample_ch0(uint64_t *t, unsigned *count)
{
	uint64_t a = rdtsc();

	*count = read_ch0();
	*t = a;
	return rdtsc() - a < SAMPLE_MAX;
}

/* Fallback: channel 0 free-running (mode 2, reload 0x10000, IRQ 0 stays
 * masked at the PIC), its count latched and read back. The TSC and the
 * ticks are summed only over intervals between two trusted samples that
 * are too short to hide a wrap, until they add up to ms of ticks. */
static uint64_t calibrate_ch0(unsigned ms)
{
	uint64_t want = (uint64_t)PIT_HZ * ms / 1000, ticks = 0, cycles = 0;
	uint64_t limit = (uint64_t)ms * 10000000ull * 100, t, pt, start;
	unsigned c, pc;
	bool ok, pok;

	outb(PIT_MODE, 0x34); /* channel 0, lo/hi, mode 2 */
	outb(PIT_CH0, 0);
	outb(PIT_CH0, 0);
	pok = sample_ch0(&pt, &pc);
	start = pt;
	while (ticks < want) {
		ok = sample_ch0(&t, &c);
		if (ok && pok && t - pt < GAP_MAX) {
			ticks += (pc - c) & 0xffff;
			cycles += t - pt;
		} else {
			tsc_cal_rejects++;
		}
		pt = t;
		pc = c;
		pok = ok;
		if (t - start > limit)
			break;
	}
	pit_stop();
	if (ticks < want)
		return 0;
	return cycles * PIT_HZ / ticks / 1000;
}

uint64_t tsc_khz(void)
{
	if (!khz) {
		bool tight = false;

		tsc_method = "pit_ch2";
		for (int i = 0; i < CH2_TRIES && !tight; i++) {
			khz = calibrate_ch2(50, &tight);
			if (!khz)
				break; /* no channel 2 behind port 0x61 */
			if (!tight)
				tsc_cal_rejects++;
		}
		if (!tight)
			khz = 0;
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
