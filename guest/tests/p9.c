/* p9: the virtio-9p device (device ID 9), driven as Linux's
 * net/9p/trans_virtio.c and net/9p/client.c drive it: VIRTIO_9P_MOUNT_TAG
 * required (p9_virtio_probe refuses a device without it), the tag read from
 * config space (le16 tag_len, then the tag), each request one chain of the
 * T-message (device-readable) and a buffer for the answer
 * (device-writable), the answer checked as p9_check_errors and p9_parse_
 * header do: its size within what the device used, the type T+1 or
 * Rlerror, the tag the request's. Not in all: it needs govm run --share
 * with a file hello.txt holding "hello from the host" (e2e TestNinePDriver).
 *
 *   p9          tag= version= read= (hex of what Tread returned)
 *   p9-hostile  a chain whose size field claims more than it holds, and
 *               one with no room for an answer: each must stop the device
 *               with NEEDS_RESET and be neither used nor answered; a reset
 *               device answers Tversion again. */
#include "../lib/alloc.h"
#include "../lib/io.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"
#include "../lib/tsc.h"
#include "../lib/virtio.h"

#define P9_MOUNT_TAG 0
#define P9_BUF 8192
#define P9_TIMEOUT_MS 5000

struct p9 {
	struct virtio_dev *d;
	struct virtqueue *vq;
	uint8_t *out, *in;
	uint32_t olen;
	uint16_t tag;
};

static void put8(struct p9 *p, uint8_t v) { p->out[p->olen++] = v; }
static void put16(struct p9 *p, uint16_t v) { put8(p, v & 0xff); put8(p, v >> 8); }
static void put32(struct p9 *p, uint32_t v) { put16(p, v & 0xffff); put16(p, v >> 16); }
static void put64(struct p9 *p, uint64_t v) { put32(p, (uint32_t)v); put32(p, (uint32_t)(v >> 32)); }
static void puts9(struct p9 *p, const char *s)
{
	uint16_t n = (uint16_t)strlen(s);
	put16(p, n);
	memcpy(p->out + p->olen, s, n);
	p->olen += n;
}
static uint32_t get32(const uint8_t *b) { return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24; }

static void begin(struct p9 *p, uint8_t type)
{
	p->olen = 4;
	put8(p, type);
	put16(p, ++p->tag);
}

/* rpc sends the message built since begin and waits for the answer; it
 * returns the answer's type (7: Rlerror), or -1 when the answer breaks
 * the protocol, never comes, or the ring broke. */
static int rpc(struct p9 *p, uint8_t type)
{
	struct vbuf b[2] = { { p->out, p->olen }, { p->in, P9_BUF } };
	uint64_t deadline = tsc_after(P9_TIMEOUT_MS);
	uint32_t len;

	p->out[0] = p->olen & 0xff;
	p->out[1] = (p->olen >> 8) & 0xff;
	p->out[2] = p->out[3] = 0;
	memset(p->in, 0, P9_BUF);
	if (virtqueue_add(p->vq, b, 1, 1, p->in, false) < 0)
		return -1;
	virtqueue_kick(p->vq);
	while (!virtqueue_get_buf(p->vq, &len)) {
		if (p->vq->broken || rdtsc() > deadline)
			return -1;
		cpu_relax();
	}
	/* p9_parse_header: the size field within the used length, at least
	 * a header; the tag the request's; the type T+1 or Rlerror. */
	uint32_t size = get32(p->in);
	if (len < 7 || size < 7 || size > len)
		return -1;
	if ((p->in[5] | p->in[6] << 8) != p->tag)
		return -1;
	if (p->in[4] != type + 1 && p->in[4] != 7)
		return -1;
	return p->in[4];
}

static bool p9_open(struct p9 *p)
{
	p->vq = 0;
	if (!p->d)
		return false;
	uint32_t host = virtio_begin(p->d);
	if (!virtio_has(host, P9_MOUNT_TAG)) {
		virtio_set_status(p->d, VIRTIO_S_FAILED);
		return false;
	}
	virtio_set_features(p->d, host & (1u << P9_MOUNT_TAG | 1u << VIRTIO_RING_F_EVENT_IDX));
	p->vq = virtio_setup_vq(p->d, 0);
	if (!p->vq)
		return false;
	virtio_driver_ok(p->d);
	p->tag = 0;
	return true;
}

static int version(struct p9 *p)
{
	begin(p, 100);
	p->out[5] = p->out[6] = 0xff; /* NOTAG */
	p->tag = 0xffff;
	put32(p, P9_BUF);
	puts9(p, "9P2000.L");
	int t = rpc(p, 100);
	p->tag = 0;
	return t;
}

static void p9_run(void)
{
	struct p9 p = { .d = virtio_get(VIRTIO_ID_9P, 0), .out = alloc_zeroed(P9_BUF, 64), .in = alloc_zeroed(P9_BUF, 64) };
	char tag[64] = { 0 }, data[64] = { 0 };
	int ok = 0;

	if (!p9_open(&p)) {
		report("p9", false, "reason=%s", p.d ? "no_mount_tag_or_queue" : "no_device");
		return;
	}
	uint16_t tl = (uint16_t)(virtio_config8(p.d, 0) | virtio_config8(p.d, 1) << 8);
	for (int i = 0; i < tl && i < (int)sizeof(tag) - 1; i++)
		tag[i] = (char)virtio_config8(p.d, 2 + i);
	int v = version(&p);
	/* Tattach fid 0, no afid, uname root, aname "", n_uname 0. */
	begin(&p, 104);
	put32(&p, 0);
	put32(&p, ~0u);
	puts9(&p, "root");
	puts9(&p, "");
	put32(&p, 0);
	int a = rpc(&p, 104);
	/* Twalk 0 -> 1 "hello.txt"; Tlopen 1 O_RDONLY; Tread 1 at 0. */
	begin(&p, 110);
	put32(&p, 0);
	put32(&p, 1);
	put16(&p, 1);
	puts9(&p, "hello.txt");
	int w = rpc(&p, 110);
	begin(&p, 12);
	put32(&p, 1);
	put32(&p, 0);
	int o = rpc(&p, 12);
	begin(&p, 116);
	put32(&p, 1);
	put64(&p, 0);
	put32(&p, 63);
	int r = rpc(&p, 116);
	if (r == 117) {
		uint32_t n = get32(p.in + 7);
		if (n < sizeof(data))
			memcpy(data, p.in + 11, n);
		ok = n == 19 && !memcmp(data, "hello from the host", 19);
	}
	report("p9", v == 101 && a == 105 && w == 111 && o == 13 && ok,
	       "tag=%s version=%d attach=%d walk=%d open=%d read=%s", tag, v, a, w, o, ok ? "ok" : "bad");
	virtio_reset(p.d);
}

/* hostile posts one broken chain and reports whether the device stopped
 * with NEEDS_RESET and left the chain unused. */
static bool hostile(struct p9 *p, uint32_t claim, uint32_t inlen)
{
	if (!p9_open(p))
		return false;
	begin(p, 100);
	put32(p, P9_BUF);
	puts9(p, "9P2000.L");
	p->out[0] = claim & 0xff;
	p->out[1] = (claim >> 8) & 0xff;
	p->out[2] = p->out[3] = 0;
	struct vbuf b[2] = { { p->out, p->olen }, { p->in, inlen } };
	virtqueue_add(p->vq, b, 1, inlen ? 1 : 0, p->in, false);
	virtqueue_kick(p->vq);
	uint64_t deadline = tsc_after(P9_TIMEOUT_MS);
	while (!(virtio_status(p->d) & VIRTIO_S_NEEDS_RESET) && rdtsc() < deadline)
		cpu_relax();
	bool stopped = virtio_status(p->d) & VIRTIO_S_NEEDS_RESET;
	bool used = virtqueue_more_used(p->vq);
	virtio_reset(p->d);
	return stopped && !used;
}

static void p9_hostile_run(void)
{
	struct p9 p = { .d = virtio_get(VIRTIO_ID_9P, 0), .out = alloc_zeroed(P9_BUF, 64), .in = alloc_zeroed(P9_BUF, 64) };
	if (!p.d) {
		report("p9-hostile", false, "reason=no_device");
		return;
	}
	bool big = hostile(&p, 4096, 64);  /* the size field claims more than the chain holds */
	bool tiny = hostile(&p, 21, 4);    /* no room for Rversion */
	int again = p9_open(&p) ? version(&p) : -1;
	virtio_reset(p.d);
	report("p9-hostile", big && tiny && again == 101, "oversize=%d no_room=%d after_reset=%d", big, tiny, again);
}

DEFINE_TEST(p9, .name = "p9", .run = p9_run, .in_all = false);
DEFINE_TEST(p9_hostile, .name = "p9-hostile", .run = p9_hostile_run, .in_all = false);
