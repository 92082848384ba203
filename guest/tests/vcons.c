/* vcons: the virtio-console device (spec 5.3, one port, no features), as
 * Linux's drivers/char/virtio_console.c uses it for hvc0 without
 * MULTIPORT: receive buffers posted on receiveq0 (fill_queue), output
 * sent on transmitq0 and reclaimed (__send_to_port), strict used lengths
 * (lib/virtio_ring.c). Not in all: it needs govm run --console virtio and
 * input on stdin.
 *
 *   vcons   writes "vcons: hello from the guest\n" through transmitq0,
 *           then waits up to vcons.ms= (10000) for a line of input on
 *           receiveq0 and writes "vcons: got <line>\n" back: got=<line
 *           in hex> tx_used_len= (0: the device writes nothing into
 *           output buffers) rx_bytes= kicks= interrupts=. */
#include "../lib/alloc.h"
#include "../lib/cmdline.h"
#include "../lib/io.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"
#include "../lib/tsc.h"
#include "../lib/virtio.h"

#define VC_RXBUFS 4
#define VC_BUF 256

/* vc_send writes n bytes through transmitq0 and waits for the buffer to
 * come back; it returns its used length, or -1. */
static long vc_send(struct virtqueue *tx, const char *s, uint32_t n, uint64_t deadline)
{
	char *b = alloc_zeroed(VC_BUF, 16);
	struct vbuf v = { b, n };
	uint32_t len;

	memcpy(b, s, n);
	if (virtqueue_add(tx, &v, 1, 0, b, false) < 0)
		return -1;
	virtqueue_kick(tx);
	while (!virtqueue_get_buf(tx, &len)) {
		if (tx->broken || rdtsc() > deadline)
			return -1;
		cpu_relax();
	}
	return len;
}

static void vcons_run(void)
{
	struct virtio_dev *d = virtio_get(VIRTIO_ID_CONSOLE, 0);
	struct virtqueue *rx, *tx;
	uint64_t deadline = tsc_after(cmdline_get_int("vcons.ms", 10000));
	char line[VC_BUF], hex[2 * VC_BUF + 1], msg[VC_BUF + 16];
	uint32_t got = 0, rx_bytes = 0, len;
	long txlen;
	bool eol = false;

	if (!d) {
		report("vcons", false, "reason=no_device");
		return;
	}
	virtio_set_features(d, virtio_begin(d) & (1u << VIRTIO_RING_F_EVENT_IDX |
						  1u << VIRTIO_RING_F_INDIRECT_DESC));
	rx = virtio_setup_vq(d, 0);
	tx = virtio_setup_vq(d, 1);
	if (!rx || !tx) {
		virtio_set_status(d, VIRTIO_S_FAILED);
		report("vcons", false, "reason=no_queues");
		return;
	}
	for (int i = 0; i < VC_RXBUFS; i++) {
		struct vbuf v = { alloc_zeroed(VC_BUF, 16), VC_BUF };
		virtqueue_add(rx, &v, 0, 1, v.addr, false);
	}
	virtio_driver_ok(d);
	virtqueue_kick(rx);
	txlen = vc_send(tx, "vcons: hello from the guest\n", 28, deadline);
	/* Input: polled (the used ring), as hvc's poll does. */
	while (!eol && rdtsc() < deadline && !rx->broken) {
		char *b = virtqueue_get_buf(rx, &len);
		if (!b) {
			cpu_relax();
			continue;
		}
		rx_bytes += len;
		for (uint32_t k = 0; k < len && !eol; k++) {
			if (b[k] == '\n' || b[k] == '\r')
				eol = got > 0;
			else if (got < sizeof(line) - 1)
				line[got++] = b[k];
		}
		struct vbuf v = { b, VC_BUF };
		virtqueue_add(rx, &v, 0, 1, b, false);
		virtqueue_kick(rx);
	}
	line[got] = 0;
	for (uint32_t k = 0; k < got; k++)
		snprintf(hex + 2 * k, 3, "%02x", (unsigned char)line[k]);
	hex[2 * got] = 0;
	if (eol) {
		int n = snprintf(msg, sizeof(msg), "vcons: got %s\n", line);
		vc_send(tx, msg, (uint32_t)n, deadline);
	}
	report("vcons", txlen == 0 && eol && !rx->broken && !tx->broken,
	       "got=%s tx_used_len=%ld rx_bytes=%u kicks=%lu interrupts=%lu", got ? hex : "none",
	       txlen, rx_bytes, rx->kicks + tx->kicks, d->interrupts);
	virtio_reset(d);
}

DEFINE_TEST(vcons, .name = "vcons", .run = vcons_run, .in_all = false);
