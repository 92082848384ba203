#include "vnet.h"
#include "alloc.h"
#include "cmdline.h"
#include "io.h"
#include "printf.h"
#include "string.h"

#define NET_CFG_MAC 0
#define NET_CFG_STATUS 6

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
	n->reasm = alloc_zeroed(VNET_REASM_MAX, 64);
	if (!n->rx_pool || !n->tx_pool || !n->tx_free || !n->reasm)
		goto fail;
	for (uint32_t i = 0; i < n->tx_n; i++)
		n->tx_free[i] = (uint16_t)i;
	n->tx_nfree = n->tx_n;
	/* TX completions are reaped on demand: no TX interrupts. */
	virtqueue_disable_cb(n->tx);
	for (uint32_t i = 0; i < n->rx_n; i++)
		if (vnet_rx_post(n, n->rx_pool + (size_t)i * n->rx_size) < 0)
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
	n->reasm = alloc_zeroed(VNET_REASM_MAX, 64);
	if (!n->rx_pool || !n->tx_pool || !n->tx_free || !n->reasm)
		return -2;
	for (uint32_t i = 0; i < n->tx_n; i++)
		n->tx_free[i] = (uint16_t)i;
	n->tx_nfree = n->tx_n;
	virtqueue_disable_cb(rx);
	virtqueue_disable_cb(tx);
	for (uint32_t i = 0; i < n->rx_n; i++)
		if (vnet_rx_post(n, n->rx_pool + (size_t)i * n->rx_size) < 0)
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
