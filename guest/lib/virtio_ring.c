/* Split virtqueue, driver side: the shape of Linux's virtio_ring.c
 * (virtqueue_add_split, virtqueue_kick_prepare_split,
 * virtqueue_get_buf_ctx_split, virtqueue_{disable,enable}_cb_split).
 * Runs at CPL3. The free list lives in driver memory (next_free), like
 * Linux's desc_extra, so a device scribbling on the descriptor table
 * cannot corrupt it. */
#include "virtio.h"
#include "alloc.h"
#include "io.h"
#include "printf.h"

/* BAD_RING (virtio_ring.c): the device handed back something no correct
 * device can; the queue is broken until reset, every later add/get_buf
 * fails, and the reason is printed once (Linux: dev_err + vq->broken). */
static void bad_ring(struct virtqueue *vq, const char *why, uint32_t a,
		     uint32_t b)
{
	vq->bad_used++;
	if (vq->broken)
		return;
	vq->broken = true;
	vq->bad_why = why;
	printf("virtio: BAD_RING vq %u: %s (%u, %u)\n", vq->index, why, a, b);
}

int virtqueue_add(struct virtqueue *vq, const struct vbuf *bufs, int out,
		  int in, void *token, bool indirect)
{
	int total = out + in;
	int used = total;
	uint16_t head, i, prev = 0, slot;
	uint32_t in_bytes = 0;

	if (total <= 0 || !token || vq->broken)
		return -1;
	/* As virtqueue_add_split: indirect only when negotiated and more than
	 * one buffer (a single buffer is cheaper direct). */
	indirect = indirect && vq->indirect && total > 1 &&
		   total <= VIRTIO_MAX_INDIRECT;
	if (indirect)
		used = 1;
	if (vq->num_free < used)
		return -1;
	head = vq->free_head;
	if (indirect) {
		struct vring_desc *t = &vq->indir[(uint32_t)head * VIRTIO_MAX_INDIRECT];

		for (int k = 0; k < total; k++) {
			t[k].addr = virt_to_phys(bufs[k].addr);
			t[k].len = bufs[k].len;
			t[k].flags = (uint16_t)((k >= out ? VRING_DESC_F_WRITE : 0) |
						(k + 1 < total ? VRING_DESC_F_NEXT : 0));
			t[k].next = (uint16_t)(k + 1 < total ? k + 1 : 0);
		}
		vq->desc[head].addr = virt_to_phys(t);
		vq->desc[head].len = (uint32_t)(total * sizeof(struct vring_desc));
		vq->desc[head].flags = VRING_DESC_F_INDIRECT;
		vq->desc[head].next = vq->next_free[head];
		i = vq->next_free[head];
	} else {
		i = head;
		for (int k = 0; k < total; k++) {
			vq->desc[i].addr = virt_to_phys(bufs[k].addr);
			vq->desc[i].len = bufs[k].len;
			vq->desc[i].flags = (uint16_t)(VRING_DESC_F_NEXT |
					(k >= out ? VRING_DESC_F_WRITE : 0));
			vq->desc[i].next = vq->next_free[i];
			prev = i;
			i = vq->next_free[i];
		}
		vq->desc[prev].flags &= (uint16_t)~VRING_DESC_F_NEXT;
	}
	vq->num_free = (uint16_t)(vq->num_free - used);
	vq->free_head = i;
	vq->data[head] = token;
	vq->chain_len[head] = (uint16_t)used;
	for (int k = out; k < total; k++)
		in_bytes += bufs[k].len;
	vq->in_len[head] = in_bytes;

	slot = vq->avail_idx_shadow & (uint16_t)(vq->num - 1);
	vq->avail->ring[slot] = head;
	/* virtio_wmb: descriptors and the ring entry must be visible before
	 * the device can see the new avail idx. */
	virtio_wmb();
	vq->avail_idx_shadow++;
	vq->avail->idx = vq->avail_idx_shadow;
	vq->num_added++;
	/* virtqueue_add_split: kick_prepare computes "old" from num_added,
	 * a 16-bit count; before it wraps, the device must hear of these. */
	if (vq->num_added == 0xffff)
		virtqueue_kick(vq);
	return 0;
}

bool virtqueue_kick_prepare(struct virtqueue *vq)
{
	uint16_t new_idx, old;
	bool needs;

	/* virtio_mb: the avail idx store must be visible before we read the
	 * device's avail_event / used flags; otherwise the device may go to
	 * sleep having read the old idx while we read its old "don't kick". */
	virtio_mb();
	old = (uint16_t)(vq->avail_idx_shadow - vq->num_added);
	new_idx = vq->avail_idx_shadow;
	vq->num_added = 0;
	if (vq->event)
		needs = vring_need_event(*vring_avail_event(vq), new_idx, old);
	else
		needs = !(vq->used->flags & VRING_USED_F_NO_NOTIFY);
	if (!needs)
		vq->kicks_suppressed++;
	return needs;
}

void virtqueue_notify(struct virtqueue *vq)
{
	outw((uint16_t)(vq->vdev->io + VIRTIO_PCI_QUEUE_NOTIFY), vq->index);
	vq->kicks++;
}

bool virtqueue_kick(struct virtqueue *vq)
{
	if (!virtqueue_kick_prepare(vq))
		return false;
	virtqueue_notify(vq);
	return true;
}

bool virtqueue_more_used(struct virtqueue *vq)
{
	return vq->last_used_idx != vq->used->idx;
}

/* Return head's descriptors to the free list (detach_buf_split). The
 * chain occupies head and the next chain_len-1 free-list entries. */
static void detach_buf(struct virtqueue *vq, uint16_t head)
{
	uint16_t tail = head;

	for (uint16_t k = 1; k < vq->chain_len[head]; k++)
		tail = vq->next_free[tail];
	vq->next_free[tail] = vq->free_head;
	vq->free_head = head;
	vq->num_free = (uint16_t)(vq->num_free + vq->chain_len[head]);
	vq->data[head] = 0;
}

void *virtqueue_get_buf(struct virtqueue *vq, uint32_t *len)
{
	uint16_t slot, used_idx;
	uint32_t id, ulen;
	void *token;

	if (vq->broken)
		return 0;
	used_idx = vq->used->idx;
	if (used_idx == vq->last_used_idx)
		return 0;
	/* Stricter than Linux's more_used_split (which takes any idx): the
	 * device cannot have used more entries than the ring holds. */
	if ((uint16_t)(used_idx - vq->last_used_idx) > vq->num) {
		bad_ring(vq, "used idx ahead of last_used by more than the ring",
			 used_idx, vq->last_used_idx);
		return 0;
	}
	/* virtio_rmb: read the used entry only after seeing the idx that
	 * publishes it. */
	virtio_rmb();
	slot = vq->last_used_idx & (uint16_t)(vq->num - 1);
	id = vq->used->ring[slot].id;
	ulen = vq->used->ring[slot].len;
	/* virtqueue_get_buf_ctx_split: BAD_RING "id %u out of range" and
	 * "id %u is not a head!". */
	if (id >= vq->num) {
		bad_ring(vq, "used id out of range", id, vq->num);
		return 0;
	}
	if (!vq->data[id]) {
		bad_ring(vq, "used id is not a head in flight", id, 0);
		return 0;
	}
	/* The length the device says it wrote cannot exceed what the chain
	 * let it write (spec 2.7.8.1: "the device MUST NOT write more than
	 * len bytes" and len counts written bytes). Linux's ring core had
	 * this check for a while (vring_check_used_len, "used len %d is
	 * larger than in buflen %u", since reverted and left to drivers);
	 * virtio_net still makes it per buffer (receive_mergeable's "len %u
	 * exceeds truesize"). Ours keeps it for every queue. */
	if (ulen > vq->in_len[id]) {
		bad_ring(vq, "used len larger than the chain's writable length",
			 ulen, vq->in_len[id]);
		return 0;
	}
	if (len)
		*len = ulen;
	token = vq->data[id];
	detach_buf(vq, (uint16_t)id);
	vq->last_used_idx++;
	vq->completions++;
	/* With interrupts wanted, tell the device the next entry we expect
	 * (used_event), and flush that store before the next more_used load
	 * (virtio_store_mb): else we could miss an entry the device added
	 * after reading the old used_event and chose not to signal. */
	if (!(vq->avail_flags_shadow & VRING_AVAIL_F_NO_INTERRUPT)) {
		*vring_used_event(vq) = vq->last_used_idx;
		virtio_mb();
	}
	return token;
}

void virtqueue_disable_cb(struct virtqueue *vq)
{
	if (vq->avail_flags_shadow & VRING_AVAIL_F_NO_INTERRUPT)
		return;
	vq->avail_flags_shadow |= VRING_AVAIL_F_NO_INTERRUPT;
	if (vq->event)
		/* Linux writes 0 here too: with EVENT_IDX the flag is not
		 * read by the device, so push used_event out of the way. */
		*vring_used_event(vq) = 0;
	else
		vq->avail->flags = vq->avail_flags_shadow;
}

uint16_t virtqueue_enable_cb_prepare(struct virtqueue *vq)
{
	if (vq->avail_flags_shadow & VRING_AVAIL_F_NO_INTERRUPT) {
		vq->avail_flags_shadow &= (uint16_t)~VRING_AVAIL_F_NO_INTERRUPT;
		if (!vq->event)
			vq->avail->flags = vq->avail_flags_shadow;
	}
	*vring_used_event(vq) = vq->last_used_idx;
	return vq->last_used_idx;
}

bool virtqueue_poll(struct virtqueue *vq, uint16_t last_used_idx)
{
	/* virtio_mb: the used_event / flags store above must be visible
	 * before we re-read used idx, or an entry added in between would get
	 * neither an interrupt nor our attention. */
	virtio_mb();
	return last_used_idx != vq->used->idx;
}

bool virtqueue_enable_cb(struct virtqueue *vq)
{
	return !virtqueue_poll(vq, virtqueue_enable_cb_prepare(vq));
}
