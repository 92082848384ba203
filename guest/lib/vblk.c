#include "vblk.h"
#include "cmdline.h"
#include "io.h"
#include "printf.h"
#include "tsc.h"

#define BLK_CFG_CAPACITY 0
#define BLK_CFG_SIZE_MAX 8
#define BLK_CFG_SEG_MAX 12
#define BLK_CFG_BLK_SIZE 20

void vblk_opts_from_cmdline(struct vblk_opts *o)
{
	o->poll = cmdline_get_int("blk.poll", 0) != 0;
	o->indirect = cmdline_get_int("blk.indirect", 0) != 0;
	o->event_idx = cmdline_get_int("blk.event_idx", 1) != 0;
	o->seg_bytes = (uint32_t)cmdline_get_int("blk.seg_bytes", 0);
}

/* virtblk_probe's order: features, config, queue, DRIVER_OK. */
int vblk_open(struct vblk *b, int index, const struct vblk_opts *o)
{
	struct virtio_dev *d = virtio_get(VIRTIO_ID_BLOCK, index);
	uint32_t host, want;

	b->vd = d;
	b->index = index;
	b->o = *o;
	b->inflight = 0;
	/* No PIC line (none assigned, or a GSI above 15): poll instead of
	 * waiting for an interrupt that cannot come. */
	if (d && !d->irq)
		b->o.poll = true;
	b->vq = 0;
	if (!d)
		return -1;
	host = virtio_begin(d);
	want = 1u << VIRTIO_BLK_F_SIZE_MAX | 1u << VIRTIO_BLK_F_SEG_MAX |
	       1u << VIRTIO_BLK_F_GEOMETRY | 1u << VIRTIO_BLK_F_RO |
	       1u << VIRTIO_BLK_F_BLK_SIZE | 1u << VIRTIO_BLK_F_FLUSH |
	       1u << VIRTIO_BLK_F_TOPOLOGY;
	if (o->event_idx)
		want |= 1u << VIRTIO_RING_F_EVENT_IDX;
	if (o->indirect)
		want |= 1u << VIRTIO_RING_F_INDIRECT_DESC;
	virtio_set_features(d, host & want);
	b->capacity = virtio_config64(d, BLK_CFG_CAPACITY);
	b->seg_max = virtio_has(d->guest_features, VIRTIO_BLK_F_SEG_MAX) ?
		     virtio_config32(d, BLK_CFG_SEG_MAX) : 0;
	b->size_max = virtio_has(d->guest_features, VIRTIO_BLK_F_SIZE_MAX) ?
		      virtio_config32(d, BLK_CFG_SIZE_MAX) : 0;
	b->blk_size = SECTOR_SIZE;
	if (virtio_has(d->guest_features, VIRTIO_BLK_F_BLK_SIZE)) {
		b->blk_size = virtio_config32(d, BLK_CFG_BLK_SIZE);
		/* virtblk_probe: "virtio_blk: invalid block size: 0x%x",
		 * and the disk is not created. */
		if (!vblk_blk_size_valid(b->blk_size)) {
			printf("virtio_blk: invalid block size: 0x%x\n",
			       b->blk_size);
			virtio_set_status(d, VIRTIO_S_FAILED);
			return -3;
		}
	}
	b->vq = virtio_setup_vq(d, 0);
	if (!b->vq) {
		virtio_set_status(d, VIRTIO_S_FAILED);
		return -2;
	}
	if (o->poll)
		virtqueue_disable_cb(b->vq);
	virtio_driver_ok(d);
	return 0;
}

bool vblk_blk_size_valid(uint32_t bsize)
{
	return bsize >= 512 && bsize <= 4096 && !(bsize & (bsize - 1));
}

void vblk_prep(struct vblk_req *r, uint32_t type, uint64_t sector, void *buf,
	       uint32_t len)
{
	r->hdr.type = type;
	r->hdr.ioprio = 0;
	r->hdr.sector = sector;
	r->status = VBLK_STATUS_UNSET;
	r->done = false;
	r->used_len = 0;
	r->buf = buf;
	r->len = len;
}

int vblk_submit(struct vblk *b, struct vblk_req *r)
{
	struct vbuf v[VIRTIO_MAX_INDIRECT];
	int n = 0, in;
	bool write = r->hdr.type == VIRTIO_BLK_T_OUT;
	uint32_t seg = b->o.seg_bytes ? b->o.seg_bytes : r->len;

	v[n++] = (struct vbuf){ (void *)&r->hdr, sizeof(r->hdr) };
	for (uint32_t off = 0; off < r->len; off += seg) {
		uint32_t l = r->len - off < seg ? r->len - off : seg;

		/* The device's limits, as virtblk_probe hands them to the
		 * block layer (blk_queue_max_segments(seg_max),
		 * max_segment_size(size_max)); and no silent truncation
		 * when the table is full. */
		if (n >= VIRTIO_MAX_INDIRECT - 1 ||
		    (b->seg_max && (uint32_t)n > b->seg_max) ||
		    (b->size_max && l > b->size_max))
			return VBLK_ERR_SEGS;
		v[n++] = (struct vbuf){ (char *)r->buf + off, l };
	}
	v[n++] = (struct vbuf){ (void *)&r->status, 1 };
	/* Readable first: header (+ data for a write); then writable. */
	in = write ? 1 : n - 1;
	if (virtqueue_add(b->vq, v, n - in, in, r, b->o.indirect) < 0)
		return VBLK_ERR_FULL;
	b->inflight++;
	return 0;
}

void vblk_kick(struct vblk *b)
{
	virtqueue_kick(b->vq);
}

static int drain(struct vblk *b)
{
	struct vblk_req *r;
	uint32_t len;
	int n = 0;

	while ((r = virtqueue_get_buf(b->vq, &len))) {
		r->done = true;
		r->used_len = len;
		b->inflight--;
		n++;
	}
	return n;
}

/* The shape of virtblk_done: callbacks off while draining, back on, and
 * drain again if enabling found new entries (else that interrupt is
 * lost). The CPL0 handler has already read the ISR; here we only wait
 * for its counter to move. */
int vblk_reap(struct vblk *b, uint64_t deadline)
{
	struct virtqueue *vq = b->vq;
	int n = 0;

	for (;;) {
		unsigned long seq = b->vd->irq_seq;

		if (!b->o.poll)
			virtqueue_disable_cb(vq);
		n += drain(b);
		if (vq->broken)
			return VBLK_ERR_BROKEN;
		if (b->o.poll) {
			if (n)
				return n;
		} else {
			if (!virtqueue_enable_cb(vq))
				continue;
			if (n)
				return n;
		}
		while (b->o.poll ? !virtqueue_more_used(vq) :
				   b->vd->irq_seq == seq) {
			if (rdtsc() > deadline) {
				b->timeouts++;
				return VBLK_ERR_TIMEOUT;
			}
			cpu_relax();
		}
	}
}

int vblk_do(struct vblk *b, struct vblk_req *r, uint64_t timeout_ms)
{
	uint64_t deadline = tsc_after(timeout_ms);
	int e = vblk_submit(b, r);

	if (e < 0)
		return e;
	vblk_kick(b);
	while (!r->done) {
		e = vblk_reap(b, deadline);
		if (e < 0)
			return e;
	}
	return r->status;
}

void vblk_print_counters(struct vblk *b, const char *prefix)
{
	struct virtio_counters c;

	virtio_counters(b->vd, &c);
	printf(" %skicks=%lu %sinterrupts=%lu %sisr_reads=%lu %sspurious=%lu "
	       "%scompletions=%lu %skicks_suppressed=%lu %sconfig_irqs=%lu",
	       prefix, c.kicks, prefix, c.interrupts, prefix, c.isr_reads,
	       prefix, c.spurious, prefix, c.completions, prefix,
	       c.kicks_suppressed, prefix, c.config_irqs);
}

void vblk_print_features(struct vblk *b)
{
	printf(" host_features=0x%x features=0x%x event_idx=%d indirect=%d "
	       "poll=%d qsize=%u capacity=%llu irq=%u seg_max=%u size_max=%u "
	       "blk_size=%u",
	       b->vd->host_features, b->vd->guest_features,
	       b->vq && b->vq->event, b->vq && b->vq->indirect, b->o.poll,
	       b->vq ? b->vq->num : 0, (unsigned long long)b->capacity,
	       b->vd->irq, b->seg_max, b->size_max, b->blk_size);
}
