/* blk-bench (not in `all`): throughput of disk 0 at CPL3, for comparing
 * VMMs on identical guest behaviour (bench/ runs it under govm and QEMU):
 *
 *   blk-bench-rand-qd1   4 KiB random reads, queue depth 1
 *   blk-bench-rand-qd1-poll  the same with the used ring polled and
 *                        interrupts off (VRING_AVAIL_F_NO_INTERRUPT): the
 *                        VMM's own kick-to-completion latency, without the
 *                        emulated CPL0 interrupt handler per request
 *   blk-bench-rand-qd32  4 KiB random reads, queue depth 32
 *   blk-bench-seq        1 MiB sequential reads, queue depth bench.seq_qd (4)
 *
 * each for bench.ms (2000) milliseconds of TSC time, the TSC calibrated
 * against the PIT. Keys: reqs= us= iops= mbps= (10^6 bytes/s) kicks_per_1k=
 * irqs_per_1k= bad= (requests whose data failed a spot check of the
 * pattern: first and last word) plus the device counters. */
#include "blkio.h"
#include "../lib/alloc.h"
#include "../lib/blkpattern.h"
#include "../lib/cmdline.h"
#include "../lib/io.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/test.h"
#include "../lib/tsc.h"

#define MAX_QD 64

static struct vblk disk0;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static bool spot_ok(const struct vblk_req *r)
{
	const uint64_t *w = r->buf;
	uint64_t n = r->len / SECTOR_SIZE;

	return w[0] == pattern_word(PATTERN_READ, r->hdr.sector, 0) &&
	       w[n * WORDS_PER_SECTOR - 1] ==
		       pattern_word(PATTERN_READ, r->hdr.sector + n - 1,
				    WORDS_PER_SECTOR - 1);
}

static void bench(const char *name, uint32_t bytes, int qd, bool random,
		  bool poll, uint64_t ms)
{
	uintptr_t mark = alloc_mark();
	struct vblk *b = &disk0;
	uint64_t sect = bytes / SECTOR_SIZE, span, next = 0, reqs = 0, bad = 0;
	uint64_t t0, t1, end, deadline;
	struct vblk_req *reqs_mem;
	uint8_t *bufs;
	bool busy[MAX_QD] = { false };
	struct vblk_opts o;
	int err = 0;

	if (qd > MAX_QD)
		qd = MAX_QD;
	vblk_opts_from_cmdline(&o);
	if (poll)
		o.poll = true;
	if (!blk_open(b, 0, &o, name))
		return;
	span = b->capacity / sect;
	reqs_mem = alloc_zeroed(sizeof(struct vblk_req) * (size_t)qd, 64);
	bufs = alloc_zeroed((uint64_t)bytes * (uint64_t)qd, 4096);
	if (!reqs_mem || !bufs || span == 0) {
		report(name, false, "reason=%s", span ? "no_memory" : "disk_too_small");
		alloc_release(mark);
		return;
	}
	t0 = rdtsc();
	end = t0 + ms * tsc_khz();
	deadline = end + 10000 * tsc_khz();
	for (;;) {
		bool added = false, stop = rdtsc() >= end;
		int inflight = 0;

		for (int k = 0; k < qd; k++) {
			struct vblk_req *r = &reqs_mem[k];

			if (busy[k] && r->done) {
				busy[k] = false;
				reqs++;
				if (r->status != VIRTIO_BLK_S_OK || !spot_ok(r))
					bad++;
			}
			if (!busy[k] && !stop) {
				uint64_t blk = random ? xorshift() % span : next++ % span;

				vblk_prep(r, VIRTIO_BLK_T_IN, blk * sect,
					  bufs + (uint64_t)k * bytes, bytes);
				if (vblk_submit(b, r) == 0) {
					busy[k] = true;
					added = true;
				}
			}
			inflight += busy[k];
		}
		if (added)
			vblk_kick(b);
		if (!inflight)
			break;
		err = vblk_reap(b, deadline);
		if (err < 0)
			break;
		err = 0;
	}
	t1 = rdtsc();
	{
		uint64_t us = tsc_to_us(t1 - t0);
		struct virtio_counters c;

		virtio_counters(b->vd, &c);
		if (!us)
			us = 1;
		report_begin(name, err == 0 && bad == 0 && reqs > 0);
		printf(" reqs=%llu us=%llu iops=%llu mbps=%llu kicks_per_1k=%llu "
		       "irqs_per_1k=%llu bad=%llu qd=%d bytes=%u err=%d tsc_khz=%llu "
		       "tsc_method=%s",
		       (unsigned long long)reqs, (unsigned long long)us,
		       (unsigned long long)(reqs * 1000000 / us),
		       (unsigned long long)(reqs * bytes / us),
		       (unsigned long long)(reqs ? c.kicks * 1000 / reqs : 0),
		       (unsigned long long)(reqs ? c.interrupts * 1000 / reqs : 0),
		       (unsigned long long)bad, qd, bytes, err,
		       (unsigned long long)tsc_khz(), tsc_method);
		vblk_print_features(b);
		vblk_print_counters(b, "");
		report_end();
	}
	alloc_release(mark);
}

static void run(void)
{
	uint64_t ms = (uint64_t)cmdline_get_int("bench.ms", 2000);

	bench("blk-bench-rand-qd1", 4096, 1, true, false, ms);
	bench("blk-bench-rand-qd1-poll", 4096, 1, true, true, ms);
	bench("blk-bench-rand-qd32", 4096, 32, true, false, ms);
	bench("blk-bench-seq", 1 << 20, (int)cmdline_get_int("bench.seq_qd", 4),
	      false, false, ms);
}

DEFINE_TEST(blk_bench, .name = "blk-bench", .run = run);
