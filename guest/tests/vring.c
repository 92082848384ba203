/* vring-strict: the test kernel's ring and virtio-net receive path against
 * a device that misbehaves, played by this test on rings no VMM serves.
 * Each case is one thing a correct device never does; the driver must
 * refuse it the way Linux does (BAD_RING in virtio_ring.c, rx_length_errors
 * and "rx error: ..." in virtio_net.c), or more strictly, and a correct
 * use must still work. Needs no device: runs under any VMM.
 *
 *   vring-ok        add one buffer, the device uses it: token and len back
 *   vring-id-range  used id >= ring size          -> broken (BAD_RING)
 *   vring-id-free   used id not a head in flight  -> broken
 *   vring-len       used len > writable length    -> broken
 *   vring-idx-jump  used idx > last_used + size   -> broken
 *   vnet-mrg-ok     a frame over 3 buffers, all used together: delivered
 *   vnet-mrg-missing  only the first of 3 used: "rx error: 2 buffers out
 *                   of 3 missing", no frame, and the late buffers are
 *                   then parsed as frames (as Linux does) and rejected
 *   vnet-num0       num_buffers 0                 -> rx_bad, nothing out
 *   vnet-num-big    num_buffers > buffers posted  -> rx_bad
 *   vnet-short      shorter than header + Ethernet header -> rx_bad
 *   vnet-small-long without MRG_RXBUF, a frame over 1518 bytes -> rx_bad
 *   vnet-gso        a gso_type we never negotiated     -> rx_bad
 *   vnet-csum       NEEDS_CSUM without GUEST_CSUM, and with it but
 *                   csum_start + csum_offset past the frame -> rx_bad;
 *                   a good one with GUEST_CSUM is delivered
 *   vnet-mac        multicast / zero MACs are invalid, a unicast one valid
 *   vnet-link-down  STATUS negotiated, link down: nothing is transmitted
 *   vblk-blk-size   blk_size must be a power of two in [512, 4096]
 *   vblk-segs       more data segments than seg_max, or one longer than
 *                   size_max: not submitted (VBLK_ERR_SEGS) */
#include "../lib/alloc.h"
#include "../lib/io.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"
#include "../lib/vblk.h"
#include "../lib/vnet.h"

#define QSIZE 16

static struct virtio_dev fdev;

/* The fake device: where it is in the avail ring, how far it published. */
struct fake {
	struct virtqueue vq;
	uint16_t next_avail, next_used;
};

static int fake_init(struct fake *f, int index)
{
	memset(f, 0, sizeof(*f));
	if (virtqueue_init(&f->vq, &fdev, index, QSIZE) < 0)
		return -1;
	/* No kicks wanted: the fake device is never asleep. */
	f->vq.used->flags = VRING_USED_F_NO_NOTIFY;
	return 0;
}

/* fake_take returns the next available head (as a device's Pop). */
static uint16_t fake_take(struct fake *f)
{
	uint16_t head = f->vq.avail->ring[f->next_avail & (QSIZE - 1)];

	f->next_avail++;
	return head;
}

static void *fake_buf(struct fake *f, uint16_t head)
{
	return (void *)(uintptr_t)f->vq.desc[head].addr;
}

/* fake_used writes a used element; publish moves used idx by that many. */
static void fake_used(struct fake *f, uint32_t id, uint32_t len)
{
	volatile struct vring_used_elem *e =
		&f->vq.used->ring[f->next_used & (QSIZE - 1)];

	e->id = id;
	e->len = len;
	f->next_used++;
}

static void fake_publish(struct fake *f)
{
	virtio_wmb(); /* elements before the idx, as a device must */
	f->vq.used->idx = f->next_used;
}

static char tok[QSIZE];

static void ring_case(const char *name, uint32_t id_off, int how)
{
	struct fake f;
	uint8_t buf[64];
	struct vbuf v = { buf, sizeof(buf) };
	uint32_t len = 0;
	void *t;
	uint16_t head;
	bool ok;

	fdev.guest_features = 0;
	if (fake_init(&f, 0) < 0) {
		report(name, false, "reason=no_memory");
		return;
	}
	virtqueue_add(&f.vq, &v, 0, 1, &tok[0], false);
	head = fake_take(&f);
	switch (how) {
	case 0: /* correct */
		fake_used(&f, head, 10);
		break;
	case 1: /* id out of range */
		fake_used(&f, QSIZE + id_off, 10);
		break;
	case 2: /* id of a free descriptor */
		fake_used(&f, (uint32_t)(head + 1) % QSIZE, 10);
		break;
	case 3: /* more than the buffer holds */
		fake_used(&f, head, sizeof(buf) + 1);
		break;
	case 4: /* idx far ahead of anything in flight */
		fake_used(&f, head, 10);
		f.next_used = (uint16_t)(f.next_used + QSIZE);
		break;
	}
	fake_publish(&f);
	t = virtqueue_get_buf(&f.vq, &len);
	if (how == 0)
		ok = t == &tok[0] && len == 10 && !f.vq.broken &&
		     f.vq.num_free == QSIZE;
	else
		ok = t == 0 && f.vq.broken && f.vq.bad_used > 0 &&
		     virtqueue_add(&f.vq, &v, 0, 1, &tok[1], false) < 0;
	report(name, ok, "broken=%d bad_used=%lu len=%u why=%s", f.vq.broken,
	       f.vq.bad_used, len, f.vq.bad_why ? "set" : "none");
}

/* Frames the fake device hands the driver, and what came out. */
static struct vnet fnet;
static struct fake frx, ftx;
static unsigned long delivered;
static uint32_t delivered_len;
/* Offload fields the fake device puts in the next frame's header. */
static struct virtio_net_hdr hdr_tmpl;

static void on_frame(void *ctx, uint8_t *frame, uint32_t len, uint8_t flags)
{
	(void)ctx;
	(void)frame;
	(void)flags;
	delivered++;
	delivered_len = len;
}

static bool net_setup(bool mrg, uint32_t rx_size)
{
	fdev.guest_features = mrg ? 1u << VIRTIO_NET_F_MRG_RXBUF : 0;
	memset(&hdr_tmpl, 0, sizeof(hdr_tmpl));
	delivered = 0;
	delivered_len = 0;
	return fake_init(&frx, 0) == 0 && fake_init(&ftx, 1) == 0 &&
	       vnet_fake_open(&fnet, &fdev, &frx.vq, &ftx.vq, 8, rx_size) == 0;
}

/* rx_frame: the device writes a frame of len bytes (header included) over
 * nbufs buffers, each full but the last, num_buffers = num; publishes the
 * first `publish` of them. */
static void rx_frame(uint32_t len, uint16_t nbufs, uint16_t num,
		     uint16_t publish)
{
	uint32_t left = len;

	for (uint16_t i = 0; i < nbufs; i++) {
		uint16_t head = fake_take(&frx);
		uint8_t *b = fake_buf(&frx, head);
		uint32_t k = left < fnet.rx_size ? left : fnet.rx_size;

		memset(b, 0xab, k);
		if (i == 0) {
			memcpy(b, &hdr_tmpl, fnet.hdr_len);
			((struct virtio_net_hdr *)b)->num_buffers = num;
		}
		fake_used(&frx, head, k);
		left -= k;
		if (i + 1 == publish)
			fake_publish(&frx);
	}
}

static void net_case(const char *name, bool mrg, uint32_t rx_size,
		     uint32_t len, uint16_t nbufs, uint16_t num,
		     uint16_t publish, bool want_frame)
{
	bool ok;

	if (!net_setup(mrg, rx_size)) {
		report(name, false, "reason=no_memory");
		return;
	}
	rx_frame(len, nbufs, num, publish);
	vnet_poll(&fnet, 64, on_frame, 0);
	if (want_frame)
		ok = delivered == 1 && delivered_len == len - fnet.hdr_len &&
		     vnet_ok(&fnet);
	else
		ok = delivered == 0 && !vnet_ok(&fnet) && !vnet_broken(&fnet);
	if (publish < nbufs) {
		/* The late buffers arrive: parsed as frames of their own
		 * (their "header" is payload), they must not pass either. */
		fake_publish(&frx);
		vnet_poll(&fnet, 64, on_frame, 0);
		ok = ok && delivered == 0 && fnet.rx_missing == 1;
	}
	/* Every buffer taken went back to the device. */
	ok = ok && frx.vq.num_free == QSIZE - fnet.rx_n;
	report(name, ok, "delivered=%lu len=%u rx_bad=%lu rx_missing=%lu "
	       "rx_merged=%lu reposted=%d", delivered, delivered_len,
	       fnet.rx_bad, fnet.rx_missing, fnet.rx_merged,
	       frx.vq.num_free == QSIZE - fnet.rx_n);
}

/* One frame of 200 bytes with header h; guest_csum as negotiated. */
static bool offload_frame(const struct virtio_net_hdr *h, bool guest_csum)
{
	if (!net_setup(true, 256))
		return false;
	hdr_tmpl = *h;
	fnet.guest_csum = guest_csum;
	rx_frame(200, 1, 1, 1);
	vnet_poll(&fnet, 64, on_frame, 0);
	return delivered == 1 && vnet_ok(&fnet);
}

static void offload_cases(void)
{
	struct virtio_net_hdr gso = { .gso_type = 1, .gso_size = 1448 };
	struct virtio_net_hdr csum = { .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
				       .csum_start = 34, .csum_offset = 6 };
	struct virtio_net_hdr past = { .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
				       .csum_start = 180, .csum_offset = 16 };
	bool g, c_no, c_past, c_ok;

	g = offload_frame(&gso, true);
	report("vnet-gso", !g && fnet.rx_bad == 1, "delivered=%d rx_bad=%lu",
	       g, fnet.rx_bad);
	c_no = offload_frame(&csum, false);
	c_past = offload_frame(&past, true);
	c_ok = offload_frame(&csum, true);
	report("vnet-csum", !c_no && !c_past && c_ok,
	       "without_guest_csum=%d past_frame=%d good=%d", c_no, c_past,
	       c_ok);
}

static void blk_cases(void)
{
	static const uint32_t bad[] = { 0, 256, 511, 768, 8192, 0x80000000u };
	static const uint32_t good[] = { 512, 1024, 2048, 4096 };
	struct fake f;
	struct vblk b;
	struct vblk_req r;
	static uint8_t data[8192];
	bool ok = true;
	int e3, e2, eb, egood;

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok = ok && !vblk_blk_size_valid(bad[i]);
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok = ok && vblk_blk_size_valid(good[i]);
	report("vblk-blk-size", ok, "bad=%u good=%u",
	       (unsigned)(sizeof(bad) / sizeof(bad[0])),
	       (unsigned)(sizeof(good) / sizeof(good[0])));

	fdev.guest_features = 0;
	memset(&b, 0, sizeof(b));
	if (fake_init(&f, 0) < 0) {
		report("vblk-segs", false, "reason=no_memory");
		return;
	}
	b.vd = &fdev;
	b.vq = &f.vq;
	b.seg_max = 2;
	b.size_max = 4096;
	b.o.seg_bytes = 1024;
	vblk_prep(&r, VIRTIO_BLK_T_IN, 0, data, 3072); /* 3 segments */
	e3 = vblk_submit(&b, &r);
	vblk_prep(&r, VIRTIO_BLK_T_IN, 0, data, 2048); /* 2 segments */
	e2 = vblk_submit(&b, &r);
	b.o.seg_bytes = 0;
	vblk_prep(&r, VIRTIO_BLK_T_IN, 0, data, 8192); /* 1 > size_max */
	eb = vblk_submit(&b, &r);
	vblk_prep(&r, VIRTIO_BLK_T_IN, 0, data, 4096);
	egood = vblk_submit(&b, &r);
	report("vblk-segs", e3 == VBLK_ERR_SEGS && e2 == 0 &&
	       eb == VBLK_ERR_SEGS && egood == 0,
	       "three_of_two=%d two=%d over_size_max=%d at_size_max=%d", e3,
	       e2, eb, egood);
}

static void mac_case(void)
{
	static const uint8_t good[6] = { 0x52, 0x54, 0, 1, 2, 3 };
	static const uint8_t mcast[6] = { 0x01, 0, 0x5e, 0, 0, 1 };
	static const uint8_t zero[6];

	report("vnet-mac", vnet_mac_valid(good) && !vnet_mac_valid(mcast) &&
	       !vnet_mac_valid(zero), "good=%d multicast=%d zero=%d",
	       vnet_mac_valid(good), vnet_mac_valid(mcast),
	       vnet_mac_valid(zero));
}

static void link_case(void)
{
	bool ok = net_setup(true, 256);
	uint8_t *up, *down;

	fdev.guest_features |= 1u << VIRTIO_NET_F_STATUS;
	up = ok ? vnet_tx_buf(&fnet) : 0;
	fnet.status = 0; /* what a config interrupt read: carrier off */
	down = ok ? vnet_tx_buf(&fnet) : 0;
	report("vnet-link-down", ok && up && !down && fnet.tx_link_down == 1,
	       "tx_when_up=%d tx_when_down=%d tx_link_down=%lu", up != 0,
	       down != 0, fnet.tx_link_down);
}

static void run(void)
{
	uintptr_t mark = alloc_mark();

	fdev.config_irqs = 0;
	ring_case("vring-ok", 0, 0);
	ring_case("vring-id-range", 3, 1);
	ring_case("vring-id-free", 0, 2);
	ring_case("vring-len", 0, 3);
	ring_case("vring-idx-jump", 0, 4);
	/* 12-byte header + 600 bytes over 256-byte buffers: 3 buffers. */
	net_case("vnet-mrg-ok", true, 256, 612, 3, 3, 3, true);
	net_case("vnet-mrg-missing", true, 256, 612, 3, 3, 1, false);
	net_case("vnet-num0", true, 256, 200, 1, 0, 1, false);
	net_case("vnet-num-big", true, 256, 200, 1, 9, 1, false);
	net_case("vnet-short", true, 256, 12 + 13, 1, 1, 1, false);
	net_case("vnet-small-long", false, 2048, 10 + 1519, 1, 0, 1, false);
	offload_cases();
	mac_case();
	link_case();
	blk_cases();
	alloc_release(mark);
}

DEFINE_TEST(vring_strict, .name = "vring-strict", .run = run,
	    .in_all = false);
