/* blk tests: a legacy virtio-blk disk read, written, flushed and probed
 * through lib/vblk (see README.md for the tests and their RESULT keys).
 * Disk contents follow lib/blkpattern.h. Every RESULT line carries the
 * device counters (kicks, interrupts, isr_reads, spurious, completions)
 * so the Go test can compare them (e.g. interrupts <= completions). */
#include "blkio.h"
#include "../lib/alloc.h"
#include "../lib/blkpattern.h"
#include "../lib/cmdline.h"
#include "../lib/crc32.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"
#include "../lib/io.h"
#include "../lib/tsc.h"

#define IO_TIMEOUT_MS 10000

static struct vblk disk[2];

static void opts(struct vblk_opts *o)
{
	vblk_opts_from_cmdline(o);
}

/* Read blk.sectors (256) from blk.start (0) in blk.req_sectors (8) sized
 * requests at queue depth blk.qd (1) and check the read pattern. */
static void read_test(const char *name, const struct vblk_opts *o, int qd)
{
	uintptr_t mark = alloc_mark();
	struct vblk *b = &disk[0];
	uint64_t start = (uint64_t)cmdline_get_int("blk.start", 0);
	uint64_t n = (uint64_t)cmdline_get_int("blk.sectors", 256);
	uint32_t rs = (uint32_t)cmdline_get_int("blk.req_sectors", 8);
	struct io_job j;
	uint8_t *buf;
	uint64_t bad = n;
	bool ok;

	if (!qd)
		qd = (int)cmdline_get_int("blk.qd", 1);
	if (!blk_open(b, 0, o, name))
		return;
	if (o->indirect && !b->vq->indirect) {
		/* Asked for indirect descriptors, but the device does not offer
		 * VIRTIO_RING_F_INDIRECT_DESC: reading with direct ones would
		 * pass without testing what was asked. */
		report_begin_skip(name, "no_indirect");
		vblk_print_features(b);
		report_end();
		alloc_release(mark);
		return;
	}
	if (start + n > b->capacity)
		n = b->capacity > start ? b->capacity - start : 0;
	buf = alloc_zeroed(n * SECTOR_SIZE, 4096);
	ok = buf && io_job_init(&j, b, VIRTIO_BLK_T_IN, start, n, buf, rs, qd) &&
	     io_run(&j, 1, IO_TIMEOUT_MS);
	if (ok) {
		bad = pattern_check(PATTERN_READ, start, n, buf);
		ok = bad == n && n > 0;
	}
	report_begin(name, ok);
	printf(" sectors=%llu crc32=%08x qd=%d req_sectors=%u",
	       (unsigned long long)n, ok ? crc32_ieee(buf, n * SECTOR_SIZE) : 0,
	       qd, rs);
	if (!buf)
		printf(" reason=no_memory");
	else if (j.err)
		printf(" reason=io_error err=%d used_idx=%u last_used=%u isr=%u "
		       "status=0x%x tsc_khz=%llu", j.err, b->vq->used->idx,
		       b->vq->last_used_idx, inb((uint16_t)(b->vd->io + VIRTIO_PCI_ISR)),
		       virtio_status(b->vd), (unsigned long long)tsc_khz());
	else if (bad != n)
		printf(" reason=pattern bad_sector=%llu",
		       (unsigned long long)(start + bad));
	vblk_print_features(b);
	vblk_print_counters(b, "");
	report_end();
	alloc_release(mark);
}

static void run_read(void)
{
	struct vblk_opts o;

	opts(&o);
	read_test("blk-read", &o, 0);
}

static void run_poll(void)
{
	struct vblk_opts o;

	opts(&o);
	o.poll = true;
	read_test("blk-poll", &o, 0);
}

static void run_indirect(void)
{
	struct vblk_opts o;

	opts(&o);
	o.indirect = true;
	read_test("blk-indirect", &o, 0);
}

static void run_qd(void)
{
	struct vblk_opts o;

	opts(&o);
	read_test("blk-qd", &o, (int)cmdline_get_int("blk.qd", 32));
}

static void run_noevent(void)
{
	struct vblk_opts o;

	opts(&o);
	o.event_idx = false;
	read_test("blk-noevent", &o, 0);
}

/* One synchronous request on disk 0 with buf of len bytes. */
static int one(struct vblk *b, uint32_t type, uint64_t sector, void *buf,
	       uint32_t len)
{
	struct vblk_req *r = alloc_zeroed(sizeof(*r), 64);

	if (!r)
		return VBLK_ERR_FULL;
	vblk_prep(r, type, sector, buf, len);
	return vblk_do(b, r, IO_TIMEOUT_MS);
}

/* Write the write pattern to blk.write_start (capacity/2) for
 * blk.write_count (16) sectors, FLUSH, read back and compare. */
static void run_write(void)
{
	uintptr_t mark = alloc_mark();
	struct vblk *b = &disk[0];
	struct vblk_opts o;
	struct io_job j;
	uint64_t start, n, bad;
	uint8_t *buf, *back;
	int flush = -100; /* not attempted */
	bool ok;

	opts(&o);
	if (!blk_open(b, 0, &o, "blk-write"))
		return;
	start = (uint64_t)cmdline_get_int("blk.write_start", (long)(b->capacity / 2));
	n = (uint64_t)cmdline_get_int("blk.write_count", 16);
	if (start >= b->capacity || n > b->capacity - start) {
		report("blk-write", false, "reason=out_of_range capacity=%llu",
		       (unsigned long long)b->capacity);
		return;
	}
	buf = alloc_zeroed(n * SECTOR_SIZE, 4096);
	back = alloc_zeroed(n * SECTOR_SIZE, 4096);
	if (!buf || !back) {
		report("blk-write", false, "reason=no_memory");
		return;
	}
	pattern_fill(PATTERN_WRITE, start, n, buf);
	ok = io_job_init(&j, b, VIRTIO_BLK_T_OUT, start, n, buf,
			 (uint32_t)cmdline_get_int("blk.req_sectors", 8),
			 (int)cmdline_get_int("blk.qd", 1)) &&
	     io_run(&j, 1, IO_TIMEOUT_MS);
	if (ok)
		flush = virtio_has(b->vd->guest_features, VIRTIO_BLK_F_FLUSH) ?
			one(b, VIRTIO_BLK_T_FLUSH, 0, 0, 0) : -1;
	ok = ok && (flush == 0 || flush == -1);
	if (ok)
		ok = io_job_init(&j, b, VIRTIO_BLK_T_IN, start, n, back, 8, 1) &&
		     io_run(&j, 1, IO_TIMEOUT_MS);
	bad = ok ? pattern_check(PATTERN_WRITE, start, n, back) : 0;
	ok = ok && bad == n;
	report_begin("blk-write", ok);
	printf(" sectors=%llu start=%llu crc32=%08x flush=%s",
	       (unsigned long long)n, (unsigned long long)start,
	       crc32_ieee(buf, n * SECTOR_SIZE),
	       flush == 0 ? "ok" : flush == -1 ? "unsupported" :
	       flush == -100 ? "skipped" : flush < 0 ? "timeout" : "error");
	if (j.err)
		printf(" reason=io_error err=%d", j.err);
	else if (!ok)
		printf(" reason=readback bad_sector=%llu",
		       (unsigned long long)(start + bad));
	vblk_print_features(b);
	vblk_print_counters(b, "");
	report_end();
	alloc_release(mark);
}

/* A read-only disk: VIRTIO_BLK_F_RO offered, a write answers IOERR. The
 * sector written holds what is already there, should the device take it. */
static void run_ro(void)
{
	uintptr_t mark = alloc_mark();
	struct vblk *b = &disk[0];
	struct vblk_opts o;
	uint8_t *buf = alloc_zeroed(SECTOR_SIZE, 512);
	int st;
	bool ro;

	opts(&o);
	if (!blk_open(b, 0, &o, "blk-ro"))
		return;
	ro = virtio_has(b->vd->host_features, VIRTIO_BLK_F_RO);
	pattern_fill(PATTERN_READ, 0, 1, buf);
	st = one(b, VIRTIO_BLK_T_OUT, 0, buf, SECTOR_SIZE);
	report_begin("blk-ro", ro && st == VIRTIO_BLK_S_IOERR);
	printf(" status=%d ro_feature=%d", st, ro);
	vblk_print_features(b);
	vblk_print_counters(b, "");
	report_end();
	alloc_release(mark);
}

/* VIRTIO_BLK_T_GET_ID: up to 20 bytes, NUL-padded. blk.serial= (if
 * given) is what the VMM was told. */
static void run_id(void)
{
	uintptr_t mark = alloc_mark();
	struct vblk *b = &disk[0];
	struct vblk_opts o;
	char *id = alloc_zeroed(VIRTIO_BLK_ID_BYTES + 1, 64);
	char want[VIRTIO_BLK_ID_BYTES + 1] = "";
	bool check = cmdline_get("blk.serial", want, sizeof(want));
	size_t n;
	int st;

	opts(&o);
	if (!blk_open(b, 0, &o, "blk-id"))
		return;
	st = one(b, VIRTIO_BLK_T_GET_ID, 0, id, VIRTIO_BLK_ID_BYTES);
	n = strnlen(id, VIRTIO_BLK_ID_BYTES);
	report_begin("blk-id", st == 0 && (!check || strcmp(id, want) == 0));
	printf(" status=%d serial_hex=", st);
	print_hex(id, n);
	vblk_print_counters(b, "");
	report_end();
	alloc_release(mark);
}

/* Sector == capacity, and a 2-sector read straddling the end: IOERR for
 * both (spec 5.2.6.1: the device must not go past capacity). Then the
 * last sector reads fine. */
static void run_range(void)
{
	uintptr_t mark = alloc_mark();
	struct vblk *b = &disk[0];
	struct vblk_opts o;
	uint8_t *buf = alloc_zeroed(2 * SECTOR_SIZE, 4096);
	int st, st2, last;
	bool last_ok;

	opts(&o);
	if (!blk_open(b, 0, &o, "blk-range"))
		return;
	st = one(b, VIRTIO_BLK_T_IN, b->capacity, buf, SECTOR_SIZE);
	st2 = one(b, VIRTIO_BLK_T_IN, b->capacity - 1, buf, 2 * SECTOR_SIZE);
	last = one(b, VIRTIO_BLK_T_IN, b->capacity - 1, buf, SECTOR_SIZE);
	last_ok = last == 0 &&
		  pattern_check(PATTERN_READ, b->capacity - 1, 1, buf) == 1;
	report_begin("blk-range", st == VIRTIO_BLK_S_IOERR &&
		     st2 == VIRTIO_BLK_S_IOERR && last_ok);
	printf(" status=%d straddle_status=%d last_ok=%d", st, st2, last_ok);
	vblk_print_counters(b, "");
	report_end();
	alloc_release(mark);
}

static void run_basic(void)
{
	run_read();
	run_id();
	run_range();
}

/* Two disks with requests in flight on both at once: disk 0 and disk
 * blk.multi_second (1); pick one on the same IRQ to exercise sharing. */
static void run_multi(void)
{
	uintptr_t mark = alloc_mark();
	uint64_t n = (uint64_t)cmdline_get_int("blk.sectors", 256);
	int qd = (int)cmdline_get_int("blk.qd", 4);
	int idx[2] = { 0, (int)cmdline_get_int("blk.multi_second", 1) };
	struct vblk_opts o;
	struct io_job j[2];
	uint8_t *buf[2];
	uint64_t bad[2] = { 0, 0 };
	bool ok = true;

	opts(&o);
	for (int i = 0; i < 2; i++) {
		if (!blk_open(&disk[i], idx[i], &o, "blk-multi"))
			return;
		if (n > disk[i].capacity)
			n = disk[i].capacity;
	}
	for (int i = 0; i < 2; i++) {
		buf[i] = alloc_zeroed(n * SECTOR_SIZE, 4096);
		ok = ok && buf[i] &&
		     io_job_init(&j[i], &disk[i], VIRTIO_BLK_T_IN, 0, n,
				 buf[i], 8, qd);
	}
	ok = ok && io_run(j, 2, IO_TIMEOUT_MS);
	for (int i = 0; ok && i < 2; i++) {
		bad[i] = pattern_check(PATTERN_READ, 0, n, buf[i]);
		ok = bad[i] == n;
	}
	report_begin("blk-multi", ok);
	printf(" disks=2 sectors=%llu", (unsigned long long)n);
	for (int i = 0; i < 2; i++)
		if (bad[i] != n && !j[i].err)
			printf(" reason=pattern disk=%d bad_sector=%llu", i,
			       (unsigned long long)bad[i]);
	for (int i = 0; i < 2; i++) {
		char pre[8];

		printf(" crc32_%d=%08x err_%d=%d irq_%d=%u", i,
		       ok ? crc32_ieee(buf[i], n * SECTOR_SIZE) : 0, i, j[i].err,
		       i, disk[i].vd->irq);
		snprintf(pre, sizeof(pre), "d%d_", i);
		vblk_print_counters(&disk[i], pre);
	}
	report_end();
	alloc_release(mark);
}

DEFINE_TEST(blk_basic, .name = "blk-basic", .run = run_basic);
DEFINE_TEST(blk_read, .name = "blk-read", .run = run_read);
DEFINE_TEST(blk_write, .name = "blk-write", .run = run_write);
DEFINE_TEST(blk_ro, .name = "blk-ro", .run = run_ro);
DEFINE_TEST(blk_id, .name = "blk-id", .run = run_id);
DEFINE_TEST(blk_range, .name = "blk-range", .run = run_range);
DEFINE_TEST(blk_multi, .name = "blk-multi", .run = run_multi);
DEFINE_TEST(blk_poll, .name = "blk-poll", .run = run_poll);
DEFINE_TEST(blk_indirect, .name = "blk-indirect", .run = run_indirect);
DEFINE_TEST(blk_qd, .name = "blk-qd", .run = run_qd);
DEFINE_TEST(blk_noevent, .name = "blk-noevent", .run = run_noevent);
