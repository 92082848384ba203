/* rng: the virtio-rng device (spec 5.4), driven as Linux's
 * drivers/char/hw_random/virtio-rng.c drives it: only the ring features
 * (it has none of its own), one 64-byte device-writable buffer posted at a
 * time (request_entropy), kicked, and taken back on its interrupt
 * (random_recv_done) with the ring's strict checks (lib/virtio_ring.c:
 * a used length beyond the buffer is BAD_RING, as in Linux). rng.reads=N
 * buffers (default 32).
 *
 *   rng          bytes= distinct= (byte values seen) short= (buffers the
 *                device filled only partly) and the counters; fails on a
 *                used length of 0, a timeout, a broken ring, or bytes that
 *                look constant.
 *   rng-hostile  a chain with a driver-readable buffer (the driver MUST
 *                NOT post one, spec 5.4.6.1): the device must stop with
 *                DEVICE_NEEDS_RESET rather than fill or use it; then a
 *                reset device works again. */
#include "../lib/alloc.h"
#include "../lib/cmdline.h"
#include "../lib/io.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/test.h"
#include "../lib/tsc.h"
#include "../lib/virtio.h"

#define RNG_BUF 64
#define RNG_TIMEOUT_MS 5000

/* rng_open brings the first virtio-rng device up with the ring features
 * (virtrng_probe: no feature table, one queue). */
static struct virtqueue *rng_open(struct virtio_dev *d)
{
	uint32_t host = virtio_begin(d);
	struct virtqueue *vq;

	virtio_set_features(d, host & (1u << VIRTIO_RING_F_EVENT_IDX |
				       1u << VIRTIO_RING_F_INDIRECT_DESC));
	vq = virtio_setup_vq(d, 0);
	if (!vq) {
		virtio_set_status(d, VIRTIO_S_FAILED);
		return 0;
	}
	virtio_driver_ok(d);
	return vq;
}

/* rng_get posts buf (one device-writable buffer of n bytes, or, with out,
 * a readable one first), kicks, and waits for it to come back on an
 * interrupt. It returns the used length, or -1 on a timeout or a broken
 * ring. */
static long rng_get(struct virtio_dev *d, struct virtqueue *vq, void *buf,
		    uint32_t n, void *out)
{
	struct vbuf b[2] = { { out, 8 }, { buf, n } };
	uint64_t deadline = tsc_after(RNG_TIMEOUT_MS);
	uint32_t len;

	if (virtqueue_add(vq, out ? b : b + 1, out ? 1 : 0, 1, buf, false) < 0)
		return -1;
	virtqueue_kick(vq);
	for (;;) {
		unsigned long seq = d->irq_seq;

		if (virtqueue_get_buf(vq, &len))
			return len;
		if (vq->broken)
			return -1;
		if (!virtqueue_enable_cb(vq))
			continue;
		while (d->irq_seq == seq) {
			if (rdtsc() > deadline)
				return -1;
			cpu_relax();
		}
	}
}

static void rng_run(void)
{
	struct virtio_dev *d = virtio_get(VIRTIO_ID_RNG, 0);
	struct virtqueue *vq;
	uint8_t *buf = alloc_zeroed(RNG_BUF, 64);
	uint8_t seen[256] = { 0 };
	long reads = cmdline_get_int("rng.reads", 32), bytes = 0, shorts = 0;
	int distinct = 0;
	bool ok = true;

	if (!d) {
		report("rng", false, "reason=no_device");
		return;
	}
	vq = rng_open(d);
	if (!vq) {
		report("rng", false, "reason=no_queue");
		return;
	}
	for (long i = 0; i < reads && ok; i++) {
		long n = rng_get(d, vq, buf, RNG_BUF, 0);

		/* random_recv_done takes len as data_avail; 0 would read as
		 * "interrupted by a cleanup" and end the hwrng read. */
		if (n <= 0) {
			ok = false;
			break;
		}
		if (n < RNG_BUF)
			shorts++;
		for (long k = 0; k < n; k++) {
			distinct += !seen[buf[k]];
			seen[buf[k]] = 1;
		}
		bytes += n;
	}
	/* 2048 random bytes take ~250 distinct values; a constant or
	 * counting device would show far fewer. */
	report("rng", ok && distinct >= 64,
	       "bytes=%ld distinct=%d short=%ld kicks=%lu interrupts=%lu broken=%d",
	       bytes, distinct, shorts, vq->kicks, d->interrupts, vq->broken);
	virtio_reset(d);
}

static void rng_hostile_run(void)
{
	struct virtio_dev *d = virtio_get(VIRTIO_ID_RNG, 0);
	struct virtqueue *vq;
	uint8_t *buf = alloc_zeroed(RNG_BUF, 64), *out = alloc_zeroed(8, 8);
	uint64_t deadline;
	uint8_t st;
	long again;

	if (!d) {
		report("rng-hostile", false, "reason=no_device");
		return;
	}
	vq = rng_open(d);
	if (!vq) {
		report("rng-hostile", false, "reason=no_queue");
		return;
	}
	struct vbuf b[2] = { { out, 8 }, { buf, RNG_BUF } };
	virtqueue_add(vq, b, 1, 1, buf, false);
	virtqueue_kick(vq);
	deadline = tsc_after(RNG_TIMEOUT_MS);
	while (!((st = virtio_status(d)) & VIRTIO_S_NEEDS_RESET) && rdtsc() < deadline)
		cpu_relax();
	bool used = virtqueue_more_used(vq), filled = false;
	for (int k = 0; k < RNG_BUF; k++)
		filled |= buf[k] != 0;
	virtio_reset(d);
	vq = rng_open(d);
	again = vq ? rng_get(d, vq, buf, RNG_BUF, 0) : -1;
	report("rng-hostile", (st & VIRTIO_S_NEEDS_RESET) && !used && !filled && again > 0,
	       "status=0x%x used=%d filled=%d after_reset=%ld", st, (int)used, (int)filled, again);
	virtio_reset(d);
}

DEFINE_TEST(rng, .name = "rng", .run = rng_run, .in_all = false);
DEFINE_TEST(rng_hostile, .name = "rng-hostile", .run = rng_hostile_run, .in_all = false);
