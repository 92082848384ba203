/* TSC rate, measured against the 8254 PIT so that durations printed by the
 * benchmarks are in real time on every VMM. */
#ifndef LIB_TSC_H
#define LIB_TSC_H

#include <stdint.h>

/* tsc_khz calibrates once (about 50 ms, PIT channel 2 polled through port
 * 0x61 like Linux's pit_calibrate_tsc) and caches the result. Works at
 * CPL3. Falls back to 1 GHz if the PIT never counts down. Robust against
 * the host descheduling the vCPU meanwhile (tsc.c). */
uint64_t tsc_khz(void);
/* tsc_method says how: "pit_ch2", "pit_ch0" (channel 0 read back, when
 * port 0x61 does not show OUT2) or "default". */
extern const char *tsc_method;
/* tsc_cal_rejects counts PIT measurements the calibration threw away
 * because a gap (the host not running this vCPU) hit them. */
extern unsigned long tsc_cal_rejects;

/* tsc_after returns the TSC value ms milliseconds from now. */
uint64_t tsc_after(uint64_t ms);

/* tsc_to_us converts a TSC delta to microseconds. */
uint64_t tsc_to_us(uint64_t cycles);

#endif
