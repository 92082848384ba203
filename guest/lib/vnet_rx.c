/* virtio-net receive path (lib/vnet.h): the CPL0 interrupt hook and NAPI
 * state, posting receive buffers, and the poll that takes used buffers as
 * strictly as Linux's virtio_net.c takes them. */
#include "vnet.h"
#include "io.h"
#include "printf.h"
#include "string.h"
#include "tsc.h"

/* CPL0 (skb_recv_done + virtqueue_napi_schedule): a queue interrupt while
 * the CPL3 poller sits idle schedules a poll and turns RX callbacks off, so
 * the device stops interrupting until the poll is complete. While a poll is
 * scheduled the CPL3 side owns the ring state and the hook leaves it alone,
 * but it must not forget the interrupt: like napi_schedule_prep it sets
 * MISSED, and the completion then polls again (napi_complete_done).
 * Without that, an interrupt arriving after the poll's last re-check and
 * before it went idle was lost, and with EVENT_IDX the device, having
 * signalled used_event once, never interrupts again. Interrupts are off
 * here and CPL3 changes napi_state only with one locked instruction, so a
 * plain read-modify-write is atomic against it. */
void vnet_irq_hook(struct virtio_dev *d, uint8_t isr)
{
	struct vnet *n = d->priv;

	if (!(isr & VIRTIO_ISR_QUEUE) || !n || !n->rx)
		return;
	if (n->napi_state & VNET_NAPI_SCHED) {
		n->napi_state |= VNET_NAPI_MISSED;
		n->hook_busy++;
		return;
	}
	virtqueue_disable_cb(n->rx);
	n->napi_state = VNET_NAPI_SCHED;
	n->napi_irqs++;
}

/* napi_complete (CPL3) is napi_complete_done: clear SCHED unless MISSED is
 * set, in which case clear MISSED, keep SCHED and return false (poll
 * again). One cmpxchg, so the hook sees either "scheduled" (and sets
 * MISSED, which this loop then sees) or "idle" (and schedules itself). */
static bool napi_complete(struct vnet *n)
{
	uint32_t old = n->napi_state, want;

	do {
		want = (old & VNET_NAPI_MISSED) ? VNET_NAPI_SCHED : 0;
	} while (!__atomic_compare_exchange_n(&n->napi_state, &old, want,
					      false, __ATOMIC_SEQ_CST,
					      __ATOMIC_SEQ_CST));
	return !(old & VNET_NAPI_MISSED);
}

/* napi_schedule_prep at CPL3: take the poll unless the hook already did. */
static bool napi_schedule_prep(struct vnet *n)
{
	uint32_t idle = 0;

	return __atomic_compare_exchange_n(&n->napi_state, &idle,
					   VNET_NAPI_SCHED, false,
					   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* One RX buffer: mergeable buffers are one descriptor with the header at
 * the start. Without MRG_RXBUF a buffer holds header + a full frame; with
 * ANY_LAYOUT that is one descriptor, else the header gets its own (spec
 * 5.1.6.6 legacy: "a single descriptor for the virtio_net_hdr"). */
int vnet_rx_post(struct vnet *n, uint8_t *buf)
{
	struct vbuf v[2];
	int k = 0;

	if (n->mrg || n->any_layout) {
		v[k++] = (struct vbuf){ buf, n->rx_size };
	} else {
		v[k++] = (struct vbuf){ buf, n->hdr_len };
		v[k++] = (struct vbuf){ buf + n->hdr_len, n->rx_size - n->hdr_len };
	}
	if (virtqueue_add(n->rx, v, 0, k, buf, false) < 0) {
		n->rx_refill_fail++;
		return -1;
	}
	return 0;
}

bool vnet_rx_ready(struct vnet *n)
{
	if (n->o.poll)
		return virtqueue_more_used(n->rx);
	return (n->napi_state & VNET_NAPI_SCHED) != 0;
}

/* rx_error counts a receive error (Linux: rx_length_errors) and prints
 * the first few, in Linux's wording, so a log shows what the device did. */
static void rx_error(struct vnet *n, unsigned long *ctr, const char *fmt,
		     uint32_t a, uint32_t b)
{
	(*ctr)++;
	if (n->rx_err_lines < 8) {
		n->rx_err_lines++;
		printf("vnet: rx error: ");
		printf(fmt, a, b);
		printf("\n");
	}
}

/* rx_hdr_ok checks the offload part of a received header against what was
 * negotiated (virtio_net_hdr_to_skb): we negotiate no GUEST_TSO/UFO, so any
 * gso_type is "bad gso" (Linux would take a TCPV4 it never asked for:
 * stricter); NEEDS_CSUM only with GUEST_CSUM, and csum_start + csum_offset
 * must leave room for the 2-byte checksum inside the frame
 * (skb_partial_csum_set: "bad partial csum"). */
static bool rx_hdr_ok(struct vnet *n, const struct virtio_net_hdr *h,
		      uint32_t frame_len)
{
	if (h->gso_type != 0) {
		rx_error(n, &n->rx_bad, "bad gso: type: %u, size: %u",
			 h->gso_type, h->gso_size);
		return false;
	}
	if (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		uint32_t end = (uint32_t)h->csum_start + h->csum_offset + 2;

		if (!n->guest_csum || end > frame_len) {
			rx_error(n, &n->rx_bad, "bad partial csum: csum=%u/%u",
				 h->csum_start, h->csum_offset);
			return false;
		}
	}
	return true;
}

/* rx_buf (virtnet_receive + receive_buf) handles one used RX buffer, the
 * first of a frame, and re-posts every buffer it took. Returns 1 when a
 * frame was delivered. */
static int rx_buf(struct vnet *n, uint8_t *buf, uint32_t len, vnet_rx_fn fn,
		  void *ctx)
{
	struct virtio_net_hdr h;
	uint16_t num;
	uint32_t total;

	n->rx_bufs_used++;
	/* receive_buf: "short packet": not even a header and an Ethernet
	 * header. Only this buffer is dropped (virtnet_rq_free_buf). */
	if (len < n->hdr_len + 14) {
		rx_error(n, &n->rx_bad, "short packet %u (header %u)", len,
			 n->hdr_len);
		vnet_rx_post(n, buf);
		return 0;
	}
	/* The header is read once, before the buffer goes back to the
	 * device (which may write it again at once). */
	memcpy(&h, buf, n->hdr_len);
	if (!n->mrg)
		h.num_buffers = 1;
	if (!n->mrg) {
		/* receive_small: "len %u exceeds max size %d"
		 * (GOOD_PACKET_LEN: Ethernet + VLAN header + MTU). */
		if (len - n->hdr_len > VNET_MAX_FRAME + 4) {
			rx_error(n, &n->rx_bad, "len %u exceeds max size %u",
				 len - n->hdr_len, VNET_MAX_FRAME + 4);
			vnet_rx_post(n, buf);
			return 0;
		}
		if (!rx_hdr_ok(n, &h, len - n->hdr_len)) {
			vnet_rx_post(n, buf);
			return 0;
		}
		n->rx_frames++;
		n->rx_bytes += len - n->hdr_len;
		fn(ctx, buf + n->hdr_len, len - n->hdr_len, h.flags);
		vnet_rx_post(n, buf);
		return 1;
	}
	/* receive_mergeable. num_buffers 0 is nonsense (Linux's --num_buf
	 * loop would run away on it); more buffers than we ever posted
	 * cannot hold one frame. Both stricter than Linux. */
	num = h.num_buffers;
	if (num == 0 || num > n->rx_n) {
		rx_error(n, &n->rx_bad, "num_buffers %u (posted %u)", num,
			 n->rx_n);
		vnet_rx_post(n, buf);
		return 0;
	}
	total = len - n->hdr_len;
	if (num == 1) {
		/* The common case: deliver in place, no copy. */
		if (!rx_hdr_ok(n, &h, total)) {
			vnet_rx_post(n, buf);
			return 0;
		}
		n->rx_frames++;
		n->rx_bytes += total;
		fn(ctx, buf + n->hdr_len, total, h.flags);
		vnet_rx_post(n, buf);
		return 1;
	}
	memcpy(n->reasm, buf + n->hdr_len, total);
	vnet_rx_post(n, buf);
	/* The first buffer was taken as soon as used idx covered it; the
	 * other num-1 must be in the used ring already (spec 5.1.6.4: the
	 * device uses all of a packet's buffers together). Linux does not
	 * wait for them either: "rx error: %d buffers out of %d missing",
	 * the frame is dropped and whatever comes later is parsed as new
	 * frames. (The used length of each was checked against its buffer
	 * by virtqueue_get_buf: receive_mergeable's "exceeds truesize".) */
	for (uint16_t i = 1; i < num; i++) {
		uint32_t l;
		uint8_t *b = virtqueue_get_buf(n->rx, &l);

		if (!b) {
			if (!n->rx->broken)
				rx_error(n, &n->rx_missing,
					 "%u buffers out of %u missing",
					 (uint32_t)(num - i), num);
			return 0;
		}
		n->rx_bufs_used++;
		if (total + l <= VNET_REASM_MAX)
			memcpy(n->reasm + total, b, l);
		total += l;
		vnet_rx_post(n, b);
	}
	if (total > VNET_REASM_MAX) {
		rx_error(n, &n->rx_bad, "merged frame of %u bytes (max %u)",
			 total, VNET_REASM_MAX);
		return 0;
	}
	if (!rx_hdr_ok(n, &h, total))
		return 0;
	n->rx_merged++;
	n->rx_frames++;
	n->rx_bytes += total;
	fn(ctx, n->reasm, total, h.flags);
	return 1;
}

/* rx_drain takes used RX buffers until budget frames were delivered or the
 * ring is empty (virtnet_receive); buffers are re-posted as they are used
 * and, in kick_each mode, the device is told about each at once. */
static int rx_drain(struct vnet *n, int budget, vnet_rx_fn fn, void *ctx)
{
	int done = 0;
	uint8_t *buf;
	uint32_t len;

	while (done < budget && (buf = virtqueue_get_buf(n->rx, &len))) {
		done += rx_buf(n, buf, len, fn, ctx);
		if (n->o.kick_each && n->rx->num_added)
			virtqueue_kick(n->rx);
	}
	return done;
}

int vnet_poll(struct vnet *n, int budget, vnet_rx_fn fn, void *ctx)
{
	uint16_t opaque;
	int done;

	n->polls++;
	if (n->vd->config_irqs != n->config_seen)
		vnet_link_update(n);
	if (!n->o.poll && !(n->napi_state & VNET_NAPI_SCHED))
		return 0;
	done = rx_drain(n, budget, fn, ctx);
	/* try_fill_recv's kick: only for buffers re-posted, and only if
	 * the device asked for one. */
	if (n->rx->num_added)
		virtqueue_kick(n->rx);
	if (vnet_broken(n))
		return -1;
	if (n->o.poll || done >= budget)
		return done; /* stay scheduled, as napi does at full budget */
	/* virtqueue_napi_complete: callbacks on (used_event = last_used),
	 * then napi_complete_done, then re-check the ring: a buffer used
	 * before the re-check is seen here; one used after it finds
	 * callbacks on and interrupts, and the hook schedules a new poll
	 * (or, while we were still scheduled, sets MISSED). */
	opaque = virtqueue_enable_cb_prepare(n->rx);
	if (n->o.napi_hold_us) {
		/* Test knob: keep the completion window open. */
		uint64_t end = rdtsc() + n->o.napi_hold_us * tsc_khz() / 1000;

		while (rdtsc() < end)
			cpu_relax();
	}
	if (!napi_complete(n)) {
		/* MISSED: an interrupt arrived while we were scheduled. */
		virtqueue_disable_cb(n->rx);
		n->napi_missed++;
		return done; /* still scheduled: the caller polls again */
	}
	if (virtqueue_poll(n->rx, opaque) && napi_schedule_prep(n)) {
		virtqueue_disable_cb(n->rx);
		n->napi_repoll++;
	}
	return done;
}

