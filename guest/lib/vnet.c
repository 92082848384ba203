#include "vnet.h"
#include "alloc.h"
#include "cmdline.h"
#include "io.h"
#include "printf.h"
#include "string.h"
#include "tsc.h"

#define NET_CFG_MAC 0
#define NET_CFG_STATUS 6
#define REASM_MAX 65536

void vnet_opts_from_cmdline(struct vnet_opts *o)
{
	o->poll = cmdline_get_int("net.poll", 0) != 0;
	o->mrg = cmdline_get_int("net.mrg", 1) != 0;
	o->event_idx = cmdline_get_int("net.event_idx", 1) != 0;
	o->any_layout = cmdline_get_int("net.any_layout", 1) != 0;
	o->csum = cmdline_get_int("net.csum", 0) != 0;
	o->rx_bufs = (uint32_t)cmdline_get_int("net.rx_bufs", 256);
	o->rx_buf = (uint32_t)cmdline_get_int("net.rx_buf", VNET_BUF_SIZE);
	o->napi_hold_us = (uint32_t)cmdline_get_int("net.napi_hold_us", 0);
	o->mac_only = cmdline_get_int("net.mac_only", 0) != 0;
	o->kick_each = o->mac_only;
}

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
static void vnet_irq_hook(struct virtio_dev *d, uint8_t isr)
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
static int rx_post(struct vnet *n, uint8_t *buf)
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

int vnet_open(struct vnet *n, int index, const struct vnet_opts *o)
{
	struct virtio_dev *d = virtio_get(VIRTIO_ID_NET, index);
	uint32_t host, want;

	memset(n, 0, sizeof(*n));
	n->o = *o;
	n->vd = d;
	if (!d)
		return -1;
	/* No PIC line: nothing would ever schedule a poll. */
	if (!d->irq)
		n->o.poll = true;
	d->irq_hook = 0;
	d->priv = n;
	host = virtio_begin(d);
	want = 1u << VIRTIO_NET_F_MAC;
	if (!o->mac_only) {
		want |= 1u << VIRTIO_NET_F_STATUS;
		if (o->mrg)
			want |= 1u << VIRTIO_NET_F_MRG_RXBUF;
		if (o->event_idx)
			want |= 1u << VIRTIO_RING_F_EVENT_IDX;
		if (o->any_layout)
			want |= 1u << VIRTIO_F_ANY_LAYOUT;
		if (o->csum)
			want |= 1u << VIRTIO_NET_F_CSUM |
				1u << VIRTIO_NET_F_GUEST_CSUM;
	}
	virtio_set_features(d, host & want);
	n->mrg = virtio_has(d->guest_features, VIRTIO_NET_F_MRG_RXBUF);
	n->any_layout = virtio_has(d->guest_features, VIRTIO_F_ANY_LAYOUT);
	n->csum = virtio_has(d->guest_features, VIRTIO_NET_F_CSUM);
	n->guest_csum = virtio_has(d->guest_features, VIRTIO_NET_F_GUEST_CSUM);
	n->hdr_len = n->mrg ? VNET_HDR_MRG_LEN : VNET_HDR_LEN;
	if (virtio_has(d->guest_features, VIRTIO_NET_F_MAC))
		for (int i = 0; i < 6; i++)
			n->mac[i] = virtio_config8(d, NET_CFG_MAC + i);
	else
		memcpy(n->mac, "\x52\x54\x00\x12\x34\x56", 6);
	/* virtnet_probe takes the device's MAC as is, but the interface
	 * then refuses to come up (eth_validate_addr at dev_open:
	 * -EADDRNOTAVAIL) when it is multicast or zero. */
	if (!vnet_mac_valid(n->mac)) {
		printf("vnet: invalid MAC %02x:%02x:%02x:%02x:%02x:%02x\n",
		       n->mac[0], n->mac[1], n->mac[2], n->mac[3], n->mac[4],
		       n->mac[5]);
		virtio_set_status(d, VIRTIO_S_FAILED);
		return -3;
	}
	n->status = VIRTIO_NET_S_LINK_UP;
	vnet_link_update(n);
	n->rx = virtio_setup_vq(d, 0);
	n->tx = virtio_setup_vq(d, 1);
	if (!n->rx || !n->tx)
		goto fail;
	/* Mergeable buffers may be small (net.rx_buf) to force frames to
	 * span several; otherwise every buffer holds a whole frame. */
	n->rx_size = VNET_BUF_SIZE;
	if (n->mrg && o->rx_buf >= 64 && o->rx_buf <= 16384)
		n->rx_size = o->rx_buf;
	n->rx_n = o->rx_bufs ? o->rx_bufs : 256;
	/* Without ANY_LAYOUT (and without MRG_RXBUF) a buffer takes two
	 * descriptors: header and frame (spec 5.1.6.6, legacy). */
	if (n->rx_n > n->rx->num / (n->mrg || n->any_layout ? 1u : 2u))
		n->rx_n = n->rx->num / (n->mrg || n->any_layout ? 1u : 2u);
	n->tx_n = n->tx->num;
	n->rx_pool = alloc_zeroed((size_t)n->rx_n * n->rx_size, 64);
	n->tx_pool = alloc_zeroed((size_t)n->tx_n * VNET_BUF_SIZE, 64);
	n->tx_free = alloc_zeroed(sizeof(uint16_t) * n->tx_n, 16);
	n->reasm = alloc_zeroed(REASM_MAX, 64);
	if (!n->rx_pool || !n->tx_pool || !n->tx_free || !n->reasm)
		goto fail;
	for (uint32_t i = 0; i < n->tx_n; i++)
		n->tx_free[i] = (uint16_t)i;
	n->tx_nfree = n->tx_n;
	/* TX completions are reaped on demand: no TX interrupts. */
	virtqueue_disable_cb(n->tx);
	for (uint32_t i = 0; i < n->rx_n; i++)
		if (rx_post(n, n->rx_pool + (size_t)i * n->rx_size) < 0)
			break;
	if (n->o.poll) {
		virtqueue_disable_cb(n->rx);
	} else {
		d->irq_hook = vnet_irq_hook;
		/* Start with a poll scheduled: the first vnet_poll enables
		 * callbacks and re-checks, as virtnet_open's napi_enable +
		 * schedule does. */
		virtqueue_disable_cb(n->rx);
		n->napi_state = VNET_NAPI_SCHED;
	}
	virtio_driver_ok(d);
	/* Buffers posted before DRIVER_OK: tell the device (virtnet_open
	 * kicks after try_fill_recv). */
	virtqueue_kick(n->rx);
	return 0;
fail:
	virtio_set_status(d, VIRTIO_S_FAILED);
	return -2;
}

int vnet_fake_open(struct vnet *n, struct virtio_dev *d,
		   struct virtqueue *rx, struct virtqueue *tx, uint32_t rx_n,
		   uint32_t rx_size)
{
	memset(n, 0, sizeof(*n));
	n->vd = d;
	n->rx = rx;
	n->tx = tx;
	n->o.poll = true;
	n->o.mrg = virtio_has(d->guest_features, VIRTIO_NET_F_MRG_RXBUF);
	n->mrg = n->o.mrg;
	n->any_layout = true;
	n->hdr_len = n->mrg ? VNET_HDR_MRG_LEN : VNET_HDR_LEN;
	n->status = VIRTIO_NET_S_LINK_UP;
	n->config_seen = d->config_irqs;
	n->rx_n = rx_n < rx->num ? rx_n : rx->num;
	n->rx_size = rx_size;
	n->tx_n = tx->num;
	n->rx_pool = alloc_zeroed((size_t)n->rx_n * n->rx_size, 64);
	n->tx_pool = alloc_zeroed((size_t)n->tx_n * VNET_BUF_SIZE, 64);
	n->tx_free = alloc_zeroed(sizeof(uint16_t) * n->tx_n, 16);
	n->reasm = alloc_zeroed(REASM_MAX, 64);
	if (!n->rx_pool || !n->tx_pool || !n->tx_free || !n->reasm)
		return -2;
	for (uint32_t i = 0; i < n->tx_n; i++)
		n->tx_free[i] = (uint16_t)i;
	n->tx_nfree = n->tx_n;
	virtqueue_disable_cb(rx);
	virtqueue_disable_cb(tx);
	for (uint32_t i = 0; i < n->rx_n; i++)
		if (rx_post(n, n->rx_pool + (size_t)i * n->rx_size) < 0)
			return -2;
	return 0;
}

int vnet_tx_reap(struct vnet *n)
{
	uint8_t *slot;
	int k = 0;

	while ((slot = virtqueue_get_buf(n->tx, 0))) {
		uint32_t i = (uint32_t)((slot - n->tx_pool) / VNET_BUF_SIZE);

		if (slot < n->tx_pool || i >= n->tx_n || n->tx_nfree >= n->tx_n)
			continue; /* cannot happen: get_buf checked the id */
		n->tx_free[n->tx_nfree++] = (uint16_t)i;
		k++;
	}
	n->tx_reaped += (unsigned long)k;
	return k;
}

uint32_t vnet_tx_room(struct vnet *n)
{
	uint32_t descs;

	vnet_tx_reap(n);
	descs = n->any_layout ? n->tx->num_free : n->tx->num_free / 2u;
	return descs < n->tx_nfree ? descs : n->tx_nfree;
}

uint8_t *vnet_tx_buf(struct vnet *n)
{
	/* Carrier off (virtnet_config_changed_work: netif_carrier_off and
	 * the TX queues stopped): nothing is sent while the link is down. */
	if (!vnet_link_up(n)) {
		n->tx_link_down++;
		return 0;
	}
	/* free_old_xmit: reap when slots or descriptors run short. */
	if (!n->tx_nfree || n->tx->num_free < 2)
		vnet_tx_reap(n);
	if (!n->tx_nfree || n->tx->num_free < (n->any_layout ? 1 : 2)) {
		n->tx_full++;
		return 0;
	}
	return n->tx_pool + (size_t)n->tx_free[n->tx_nfree - 1] * VNET_BUF_SIZE +
	       n->hdr_len;
}

int vnet_tx_commit(struct vnet *n, uint8_t *frame, uint32_t len)
{
	uint8_t *slot = frame - n->hdr_len;
	struct vbuf v[2];
	int k = 0;

	if (len > VNET_MAX_FRAME || !n->tx_nfree ||
	    slot != n->tx_pool + (size_t)n->tx_free[n->tx_nfree - 1] * VNET_BUF_SIZE)
		return -1;
	/* The header stays zero: no offloads requested (flags 0, GSO_NONE;
	 * num_buffers is unused on TX). */
	memset(slot, 0, n->hdr_len);
	if (n->any_layout) {
		v[k++] = (struct vbuf){ slot, n->hdr_len + len };
	} else {
		v[k++] = (struct vbuf){ slot, n->hdr_len };
		v[k++] = (struct vbuf){ frame, len };
	}
	if (virtqueue_add(n->tx, v, k, 0, slot, false) < 0) {
		n->tx_full++;
		return -1;
	}
	n->tx_nfree--;
	n->tx_frames++;
	n->tx_bytes += len;
	n->tx_pending_kick = true;
	return 0;
}

void vnet_tx_flush(struct vnet *n)
{
	if (!n->tx_pending_kick)
		return;
	n->tx_pending_kick = false;
	virtqueue_kick(n->tx);
}

bool vnet_broken(struct vnet *n)
{
	return n->rx->broken || n->tx->broken;
}

bool vnet_ok(struct vnet *n)
{
	return !vnet_broken(n) && !n->rx_bad && !n->rx_missing;
}

bool vnet_mac_valid(const uint8_t *mac)
{
	static const uint8_t zero[6];

	return !(mac[0] & 1) && memcmp(mac, zero, 6) != 0;
}

/* vnet_link_update is virtnet_config_changed_work: with STATUS, re-read
 * the status field after a config interrupt (and at open); only
 * LINK_UP matters (we do not negotiate GUEST_ANNOUNCE). */
void vnet_link_update(struct vnet *n)
{
	uint16_t v;

	n->config_seen = n->vd->config_irqs;
	if (!virtio_has(n->vd->guest_features, VIRTIO_NET_F_STATUS))
		return;
	v = (uint16_t)(virtio_config8(n->vd, NET_CFG_STATUS) |
		       virtio_config8(n->vd, NET_CFG_STATUS + 1) << 8);
	v &= VIRTIO_NET_S_LINK_UP;
	if (v != n->status)
		n->link_changes++;
	n->status = v;
}

bool vnet_link_up(struct vnet *n)
{
	if (n->vd->config_irqs != n->config_seen)
		vnet_link_update(n);
	return n->status & VIRTIO_NET_S_LINK_UP;
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
		rx_post(n, buf);
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
			rx_post(n, buf);
			return 0;
		}
		if (!rx_hdr_ok(n, &h, len - n->hdr_len)) {
			rx_post(n, buf);
			return 0;
		}
		n->rx_frames++;
		n->rx_bytes += len - n->hdr_len;
		fn(ctx, buf + n->hdr_len, len - n->hdr_len, h.flags);
		rx_post(n, buf);
		return 1;
	}
	/* receive_mergeable. num_buffers 0 is nonsense (Linux's --num_buf
	 * loop would run away on it); more buffers than we ever posted
	 * cannot hold one frame. Both stricter than Linux. */
	num = h.num_buffers;
	if (num == 0 || num > n->rx_n) {
		rx_error(n, &n->rx_bad, "num_buffers %u (posted %u)", num,
			 n->rx_n);
		rx_post(n, buf);
		return 0;
	}
	total = len - n->hdr_len;
	if (num == 1) {
		/* The common case: deliver in place, no copy. */
		if (!rx_hdr_ok(n, &h, total)) {
			rx_post(n, buf);
			return 0;
		}
		n->rx_frames++;
		n->rx_bytes += total;
		fn(ctx, buf + n->hdr_len, total, h.flags);
		rx_post(n, buf);
		return 1;
	}
	memcpy(n->reasm, buf + n->hdr_len, total);
	rx_post(n, buf);
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
		if (total + l <= REASM_MAX)
			memcpy(n->reasm + total, b, l);
		total += l;
		rx_post(n, b);
	}
	if (total > REASM_MAX) {
		rx_error(n, &n->rx_bad, "merged frame of %u bytes (max %u)",
			 total, REASM_MAX);
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

void vnet_print_counters(struct vnet *n)
{
	struct virtio_counters c;

	virtio_counters(n->vd, &c);
	printf(" kicks=%lu interrupts=%lu isr_reads=%lu spurious=%lu "
	       "rx_kicks=%lu tx_kicks=%lu kicks_suppressed=%lu napi_irqs=%lu "
	       "hook_busy=%lu napi_missed=%lu napi_repoll=%lu rx_missing=%lu "
	       "rx_merged=%lu "
	       "rx_bad=%lu rx_refill_fail=%lu tx_full=%lu config_irqs=%lu "
	       "link_changes=%lu tx_link_down=%lu",
	       c.kicks, c.interrupts, c.isr_reads, c.spurious, n->rx->kicks,
	       n->tx->kicks, c.kicks_suppressed, n->napi_irqs, n->hook_busy,
	       n->napi_missed, n->napi_repoll, n->rx_missing, n->rx_merged, n->rx_bad,
	       n->rx_refill_fail, n->tx_full, c.config_irqs, n->link_changes,
	       n->tx_link_down);
}

void vnet_print_features(struct vnet *n)
{
	printf(" host_features=0x%x features=0x%x mrg=%d event_idx=%d "
	       "any_layout=%d poll=%d hdr=%u rx_bufs=%u rx_buf=%u qsize=%u/%u "
	       "irq=%u link=%u mac=%02x:%02x:%02x:%02x:%02x:%02x",
	       n->vd->host_features, n->vd->guest_features, n->mrg,
	       n->rx->event, n->any_layout, n->o.poll, n->hdr_len, n->rx_n,
	       n->rx_size, n->rx->num, n->tx->num, n->vd->irq,
	       n->status & VIRTIO_NET_S_LINK_UP, n->mac[0], n->mac[1],
	       n->mac[2], n->mac[3], n->mac[4], n->mac[5]);
}
