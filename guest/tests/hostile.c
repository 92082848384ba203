/* hostile-blk: a deliberately broken driver on disk 0. Each case writes a
 * malformed ring (or misuses the transport) and kicks; then the test
 * looks for the device's answer (DEVICE_NEEDS_RESET, spec 2.1.2, or a
 * completion with VIRTIO_BLK_S_IOERR), resets disk 0 (status 0),
 * re-initialises it and proves it reads correctly again, and checks that
 * disk 1 kept working. The Go side asserts the VMM survived and the host
 * image files are intact.
 *
 *   hostile.case=<name>   one case (default: all, in order)
 *   hostile.wait_ms=N     how long to wait for the device's answer (500)
 *   hostile.strict=0      accept "no answer" (QEMU: a legacy device that
 *                         hits virtio_error just stops, without NEEDS_RESET) */
#include "blkio.h"
#include "../lib/alloc.h"
#include "../lib/blkpattern.h"
#include "../lib/cmdline.h"
#include "../lib/io.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"
#include "../lib/tsc.h"

#define CHECK_SECTORS 8
#define IO_TIMEOUT_MS 10000

enum outcome { OUT_NONE, OUT_NEEDS_RESET, OUT_IOERR, OUT_OK, OUT_USED };

static const char *const outcome_names[] = {
	"none", "needs_reset", "ioerr", "ok", "used_other",
};

/* What one injection left in flight. */
struct inj {
	struct vblk_req *req;  /* status byte to look at, or NULL */
	bool features_late;    /* answer = does normal I/O still work */
	uint32_t features;
};

static struct vblk disk[2];

/* Raw ring writes: descriptors 0.. of a freshly initialised queue, then
 * one avail entry, bypassing virtqueue_add. */
static void raw_desc(struct virtqueue *vq, int i, uint64_t addr, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	vq->desc[i].addr = addr;
	vq->desc[i].len = len;
	vq->desc[i].flags = flags;
	vq->desc[i].next = next;
}

static void raw_publish(struct virtqueue *vq, uint16_t head, uint16_t idx_add)
{
	vq->avail->ring[vq->avail_idx_shadow & (vq->num - 1)] = head;
	virtio_wmb(); /* ring entry before the idx that exposes it */
	vq->avail_idx_shadow = (uint16_t)(vq->avail_idx_shadow + idx_add);
	vq->avail->idx = vq->avail_idx_shadow;
	virtio_mb(); /* idx visible before the notify (and its exit) */
	virtqueue_notify(vq);
}

static struct vblk_req *new_req(uint32_t type, uint64_t sector, uint32_t len)
{
	struct vblk_req *r = alloc_zeroed(sizeof(*r), 64);
	void *buf = alloc_zeroed(len ? len : 16, 4096);

	if (r)
		vblk_prep(r, type, sector, buf, len);
	return r;
}

/* A three-descriptor read whose middle (data) descriptor is given. */
static void bad_data(struct vblk *b, struct inj *in, uint64_t addr,
		     uint32_t len)
{
	struct virtqueue *vq = b->vq;
	struct vblk_req *r = new_req(VIRTIO_BLK_T_IN, 0, 4096);

	in->req = r;
	raw_desc(vq, 0, virt_to_phys(&r->hdr), sizeof(r->hdr),
		 VRING_DESC_F_NEXT, 1);
	raw_desc(vq, 1, addr, len, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	raw_desc(vq, 2, virt_to_phys(&r->status), 1, VRING_DESC_F_WRITE, 0);
	raw_publish(vq, 0, 1);
}

static void case_loop(struct vblk *b, struct inj *in)
{
	struct virtqueue *vq = b->vq;
	struct vblk_req *r = new_req(VIRTIO_BLK_T_OUT, 0, 512);

	in->req = r;
	/* 0 -> 1 -> 2 -> 1 -> ...: all device-readable, so only a bounded
	 * walk (at most queue-size hops) ends it, not the "readable after
	 * writable" ordering check. */
	raw_desc(vq, 0, virt_to_phys(&r->hdr), sizeof(r->hdr),
		 VRING_DESC_F_NEXT, 1);
	raw_desc(vq, 1, virt_to_phys(r->buf), 256, VRING_DESC_F_NEXT, 2);
	raw_desc(vq, 2, virt_to_phys(r->buf) + 256, 256, VRING_DESC_F_NEXT, 1);
	raw_publish(vq, 0, 1);
}

static void case_next_oob(struct vblk *b, struct inj *in)
{
	struct virtqueue *vq = b->vq;
	struct vblk_req *r = new_req(VIRTIO_BLK_T_IN, 0, 512);

	in->req = r;
	raw_desc(vq, 0, virt_to_phys(&r->hdr), sizeof(r->hdr),
		 VRING_DESC_F_NEXT, (uint16_t)(vq->num + 5));
	raw_publish(vq, 0, 1);
}

static void case_addr_overflow(struct vblk *b, struct inj *in)
{
	bad_data(b, in, 0xfffffffffffff000ull, 0x2000);
}

static void case_beyond_ram(struct vblk *b, struct inj *in)
{
	/* 64 GiB: far past any RAM these tests give the VM. */
	bad_data(b, in, 0x1000000000ull, 4096);
}

static void case_avail_jump(struct vblk *b, struct inj *in)
{
	struct virtqueue *vq = b->vq;

	in->req = NULL;
	/* idx moves by more than the ring holds (spec 2.6.6: at most num
	 * entries can be outstanding). */
	raw_publish(vq, 0, (uint16_t)(vq->num + 1));
}

static void case_indirect_len(struct vblk *b, struct inj *in)
{
	struct virtqueue *vq = b->vq;
	struct vblk_req *r = new_req(VIRTIO_BLK_T_IN, 0, 512);
	struct vring_desc *t = alloc_zeroed(4 * sizeof(*t), 64);

	in->req = r;
	t[0] = (struct vring_desc){ virt_to_phys(&r->hdr), sizeof(r->hdr),
				    VRING_DESC_F_NEXT, 1 };
	t[1] = (struct vring_desc){ virt_to_phys(r->buf), 512,
				    VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2 };
	t[2] = (struct vring_desc){ virt_to_phys(&r->status), 1,
				    VRING_DESC_F_WRITE, 0 };
	/* Not a multiple of 16 (spec 2.6.5.3.1). */
	raw_desc(vq, 0, virt_to_phys(t), 3 * sizeof(*t) + 1,
		 VRING_DESC_F_INDIRECT, 0);
	raw_publish(vq, 0, 1);
}

static void case_no_status(struct vblk *b, struct inj *in)
{
	struct virtqueue *vq = b->vq;
	struct vblk_req *r = new_req(VIRTIO_BLK_T_IN, 0, 512);

	in->req = r;
	/* Header and a device-readable data buffer: nothing writable, so
	 * there is no status byte (spec 5.2.6: the status is the last byte
	 * the device writes). */
	raw_desc(vq, 0, virt_to_phys(&r->hdr), sizeof(r->hdr),
		 VRING_DESC_F_NEXT, 1);
	raw_desc(vq, 1, virt_to_phys(r->buf), 512, 0, 0);
	raw_publish(vq, 0, 1);
}

static void case_features_late(struct vblk *b, struct inj *in)
{
	in->features_late = true;
	/* Everything the device offers, including ring formats we did not
	 * negotiate, after DRIVER_OK (spec 2.2: features are fixed then). */
	in->features = b->vd->host_features | 1u << VIRTIO_RING_F_INDIRECT_DESC;
	outl((uint16_t)(b->vd->io + VIRTIO_PCI_GUEST_FEATURES), in->features);
}

/* Bad PFN: the transport itself is misused, so this case brings up
 * disk 0 by hand: features, a queue whose PFN points past RAM, DRIVER_OK
 * and a kick. */
static void case_bad_pfn(struct vblk *b, struct inj *in)
{
	struct virtio_dev *d = b->vd;

	in->req = NULL;
	virtio_reset(d);
	virtio_set_status(d, VIRTIO_S_ACKNOWLEDGE);
	virtio_set_status(d, VIRTIO_S_ACKNOWLEDGE | VIRTIO_S_DRIVER);
	outl((uint16_t)(d->io + VIRTIO_PCI_GUEST_FEATURES), 0);
	outw((uint16_t)(d->io + VIRTIO_PCI_QUEUE_SEL), 0);
	/* PFN 0xfffffff: the ring would sit at ~1 TiB. */
	outl((uint16_t)(d->io + VIRTIO_PCI_QUEUE_PFN), 0x0fffffffu);
	virtio_set_status(d, VIRTIO_S_ACKNOWLEDGE | VIRTIO_S_DRIVER |
				     VIRTIO_S_DRIVER_OK);
	outw((uint16_t)(d->io + VIRTIO_PCI_QUEUE_NOTIFY), 0);
}

struct hcase {
	const char *name;
	void (*inject)(struct vblk *b, struct inj *in);
	bool indirect; /* needs VIRTIO_RING_F_INDIRECT_DESC */
};

static const struct hcase cases[] = {
	{ "loop", case_loop, false },
	{ "next-oob", case_next_oob, false },
	{ "addr-overflow", case_addr_overflow, false },
	{ "beyond-ram", case_beyond_ram, false },
	{ "avail-jump", case_avail_jump, false },
	{ "bad-pfn", case_bad_pfn, false },
	{ "features-late", case_features_late, false },
	{ "indirect-len", case_indirect_len, true },
	{ "no-status", case_no_status, false },
};

/* Read CHECK_SECTORS at sector s of b and check the pattern. */
static bool read_ok(struct vblk *b, uint64_t s)
{
	uintptr_t mark = alloc_mark();
	uint8_t *buf = alloc_zeroed(CHECK_SECTORS * SECTOR_SIZE, 4096);
	struct io_job j;
	bool ok;

	if (s + CHECK_SECTORS > b->capacity)
		s = 0;
	ok = buf && io_job_init(&j, b, VIRTIO_BLK_T_IN, s, CHECK_SECTORS, buf,
				CHECK_SECTORS, 1) &&
	     io_run(&j, 1, IO_TIMEOUT_MS) &&
	     pattern_check(PATTERN_READ, s, CHECK_SECTORS, buf) == CHECK_SECTORS;
	alloc_release(mark);
	return ok;
}

static enum outcome watch(struct vblk *b, struct inj *in, uint64_t wait_ms)
{
	uint64_t deadline = tsc_after(wait_ms);
	struct virtqueue *vq = b->vq;

	if (in->features_late) {
		/* The device either ignores the late write or flags itself;
		 * both are fine, as long as it does not act on it. */
		if (virtio_status(b->vd) & VIRTIO_S_NEEDS_RESET)
			return OUT_NEEDS_RESET;
		return read_ok(b, 0) ? OUT_OK : OUT_NONE;
	}
	for (;;) {
		if (virtio_status(b->vd) & VIRTIO_S_NEEDS_RESET)
			return OUT_NEEDS_RESET;
		if (vq && vq->num && vq->used->idx != 0) {
			virtio_rmb(); /* the entry after the idx */
			if (in->req && in->req->status == VIRTIO_BLK_S_IOERR)
				return OUT_IOERR;
			if (in->req && in->req->status == VIRTIO_BLK_S_OK)
				return OUT_OK;
			return OUT_USED;
		}
		if (rdtsc() > deadline)
			return OUT_NONE;
		cpu_relax();
	}
}

enum verdict { V_FAIL, V_PASS, V_SKIP };

static enum verdict run_case(const struct hcase *c, const struct vblk_opts *o,
			     uint64_t wait_ms, bool strict, int n)
{
	uintptr_t mark = alloc_mark();
	struct vblk_opts oo = *o;
	struct vblk *b = &disk[0];
	struct inj in;
	enum outcome out = OUT_NONE;
	bool skipped = false, recovered, other_ok, answered, ok;
	uint8_t status = 0;
	unsigned long inj_cfg = 0, inj_irqs = 0;
	char name[48];

	snprintf(name, sizeof(name), "hostile-%s", c->name);
	memset(&in, 0, sizeof(in));
	oo.indirect = c->indirect;
	if (vblk_open(b, 0, &oo) != 0) {
		report(name, false, "reason=open");
		return V_FAIL;
	}
	/* A case that needs INDIRECT_DESC cannot inject anything into a device
	 * that does not offer it: skip it, but still check the recovery. */
	if (c->indirect && !b->vq->indirect) {
		skipped = true;
	} else {
		c->inject(b, &in);
		out = watch(b, &in, wait_ms);
		status = virtio_status(b->vd);
		inj_cfg = b->vd->config_irqs;
		inj_irqs = b->vd->interrupts;
	}
	/* Recover: reset, initialise again, read. */
	virtio_reset(b->vd);
	recovered = vblk_open(b, 0, o) == 0 && read_ok(b, (uint64_t)n * 64);
	other_ok = read_ok(&disk[1], (uint64_t)n * 64);
	answered = out == OUT_NEEDS_RESET || out == OUT_IOERR ||
		   (in.features_late && out == OUT_OK);
	ok = recovered && other_ok && (answered || !strict);
	if (skipped && recovered && other_ok)
		report_begin_skip(name, "no_indirect");
	else
		report_begin(name, ok && !skipped);
	printf(" needs_reset=%d outcome=%s status=0x%x recovered=%d "
	       "other_disk=%d inj_interrupts=%lu inj_config_irqs=%lu",
	       out == OUT_NEEDS_RESET, outcome_names[out], status, recovered,
	       other_ok, inj_irqs, inj_cfg);
	vblk_print_counters(b, "");
	report_end();
	alloc_release(mark);
	if (skipped)
		return recovered && other_ok ? V_SKIP : V_FAIL;
	return ok ? V_PASS : V_FAIL;
}

static void run(void)
{
	char only[32] = "";
	uint64_t wait_ms = (uint64_t)cmdline_get_int("hostile.wait_ms", 500);
	bool strict = cmdline_get_int("hostile.strict", 1) != 0;
	struct vblk_opts o;
	int ran = 0, passed = 0, skipped = 0;
	bool ok0, ok1;

	vblk_opts_from_cmdline(&o);
	cmdline_get("hostile.case", only, sizeof(only));
	if (!blk_open(&disk[1], 1, &o, "hostile-recovery"))
		return;
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (only[0] && strcmp(only, cases[i].name) != 0)
			continue;
		ran++;
		switch (run_case(&cases[i], &o, wait_ms, strict, (int)i)) {
		case V_PASS:
			passed++;
			break;
		case V_SKIP:
			skipped++;
			break;
		case V_FAIL:
			break;
		}
	}
	ok0 = vblk_open(&disk[0], 0, &o) == 0 && read_ok(&disk[0], 0);
	ok1 = read_ok(&disk[1], 0);
	report("hostile-recovery", ran > 0 && ok0 && ok1,
	       "cases=%d passed=%d skipped=%d disk0=%d disk1=%d", ran, passed,
	       skipped, ok0, ok1);
}

DEFINE_TEST(hostile_blk, .name = "hostile-blk", .run = run);
