/* virtio-net driver (virtio spec 5.1, legacy interface) over lib/virtio,
 * shaped like Linux's drivers/net/virtio_net.c: queue 0 receives, queue 1
 * transmits; receive buffers are posted up front and re-posted as they are
 * consumed; received frames are handled NAPI-style.
 *
 * NAPI at CPL3 with a CPL0 interrupt: the INTx handler (lib/virtio.c, CPL0,
 * emulated on our hosts) reads the ISR and EOIs, and this driver's hook
 * (vnet_irq_hook) does what skb_recv_done does: when the poller is idle it
 * disables RX callbacks and marks a poll scheduled. The CPL3 loop
 * (vnet_poll) drains the used ring, refills, re-enables callbacks and
 * re-checks (virtqueue_napi_complete): if buffers arrived in between it
 * polls again instead of waiting for an interrupt that will not come.
 *
 * TX completions are reaped when the driver needs a slot (free_old_xmit),
 * with TX callbacks disabled: transmit never waits for an interrupt. */
#ifndef LIB_VNET_H
#define LIB_VNET_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio.h"

/* Feature bits (spec 5.1.3) and legacy ring features (spec 6.3). */
#define VIRTIO_NET_F_CSUM 0
#define VIRTIO_NET_F_GUEST_CSUM 1
#define VIRTIO_NET_F_MAC 5
#define VIRTIO_NET_F_MRG_RXBUF 15
#define VIRTIO_NET_F_STATUS 16
#define VIRTIO_F_ANY_LAYOUT 27

#define VIRTIO_NET_S_LINK_UP 1
#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1
#define VIRTIO_NET_HDR_F_DATA_VALID 2

/* struct virtio_net_hdr (legacy, 10 bytes); num_buffers follows with
 * MRG_RXBUF (struct virtio_net_hdr_mrg_rxbuf, 12 bytes). */
struct virtio_net_hdr {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
} __attribute__((packed));

#define VNET_HDR_LEN 10
#define VNET_HDR_MRG_LEN 12
#define VNET_MTU 1500
#define VNET_MAX_FRAME 1514 /* Ethernet header + MTU, no FCS */
#define VNET_BUF_SIZE 2048  /* one TX slot or default RX buffer */

#define VNET_REASM_MAX 65536 /* largest merged frame reassembled */

#define VNET_NAPI_SCHED 1u  /* a poll is scheduled: CPL3 owns the RX ring */
#define VNET_NAPI_MISSED 2u /* an interrupt came while it was */

struct vnet_opts {
	bool poll;      /* net.poll=1: no RX interrupts, poll the used ring */
	bool mrg;       /* net.mrg=0 refuses VIRTIO_NET_F_MRG_RXBUF */
	bool event_idx; /* net.event_idx=0 refuses VIRTIO_RING_F_EVENT_IDX */
	bool any_layout;/* net.any_layout=0: header in its own descriptor */
	bool csum;      /* net.csum=1 negotiates CSUM + GUEST_CSUM */
	uint32_t rx_bufs;   /* net.rx_bufs= (256, capped at the queue size) */
	uint32_t rx_buf;    /* net.rx_buf= bytes per mergeable buffer (2048) */
	/* net.napi_hold_us= (test knob, 0): hold the NAPI completion window
	 * (callbacks re-enabled, poll not yet marked idle) open this long,
	 * so interrupts land in it (the race napi_complete_done closes). */
	uint32_t napi_hold_us;
	/* net.mac_only=1: negotiate VIRTIO_NET_F_MAC and nothing else (no
	 * EVENT_IDX, MRG_RXBUF, STATUS, ANY_LAYOUT: a minimal legacy
	 * driver), and kick_each: tell the device about each re-posted RX
	 * buffer at once instead of once per poll. */
	bool mac_only;
	bool kick_each;
};

/* rx_fn gets each received frame (Ethernet header first) with the header
 * flags; it must not keep the pointer. */
typedef void (*vnet_rx_fn)(void *ctx, uint8_t *frame, uint32_t len,
			   uint8_t hdr_flags);

struct vnet {
	struct virtio_dev *vd;
	struct virtqueue *rx, *tx;
	struct vnet_opts o;
	uint8_t mac[6];
	uint16_t status;
	uint32_t hdr_len;      /* 10, or 12 with MRG_RXBUF */
	bool mrg, any_layout, csum, guest_csum;
	/* RX buffers: rx_n of rx_size bytes each. */
	uint8_t *rx_pool;
	uint32_t rx_n, rx_size;
	/* Mergeable reassembly (a frame spanning several buffers). */
	uint8_t *reasm;
	/* TX slots: header + frame each, free stack of indexes. */
	uint8_t *tx_pool;
	uint16_t *tx_free;
	uint32_t tx_n, tx_nfree;
	bool tx_pending_kick;
	/* NAPI state shared with the CPL0 hook: VNET_NAPI_SCHED and
	 * VNET_NAPI_MISSED bits (napi->state's NAPI_STATE_SCHED/MISSED). The
	 * hook changes it with interrupts off; CPL3 only with one locked
	 * cmpxchg, so neither side can lose the other's update. */
	volatile uint32_t napi_state;
	/* Counters (CPL3 unless noted). */
	volatile unsigned long napi_irqs;  /* CPL0: polls scheduled */
	volatile unsigned long hook_busy;  /* CPL0: irq while polling */
	/* rx_bad: length/num_buffers errors (Linux: rx_length_errors);
	 * rx_missing: merged frames whose later buffers were not used yet
	 * ("rx error: M buffers out of N missing"). Either fails a test. */
	unsigned long rx_frames, rx_bytes, rx_bufs_used, rx_bad, rx_missing,
		rx_refill_fail, rx_merged, polls, napi_repoll;
	unsigned rx_err_lines;     /* error lines printed (first 8 only) */
	/* Link state (VIRTIO_NET_F_STATUS), re-read after a config
	 * interrupt as virtnet_config_changed_work does. */
	unsigned long config_seen, link_changes, tx_link_down;
	unsigned long napi_missed; /* completions that found MISSED: re-polled */
	unsigned long tx_frames, tx_bytes, tx_full, tx_reaped;
};

/* vnet_opts_from_cmdline reads net.poll, net.mrg, net.event_idx,
 * net.any_layout, net.csum, net.rx_bufs, net.rx_buf. */
void vnet_opts_from_cmdline(struct vnet_opts *o);

/* vnet_open initialises net device index (PCI order): features, MAC and
 * status from config space, queues, receive buffers posted, DRIVER_OK.
 * Returns 0, -1 (no device), -2 (no queue / no memory), -3 (the device's
 * MAC is not a valid unicast address). */
int vnet_open(struct vnet *n, int index, const struct vnet_opts *o);

/* vnet_fake_open binds n to rings that no device serves (tests/vring.c
 * plays the device): d's guest_features say what was "negotiated",
 * rx_n buffers of rx_size are posted, polling mode, link up. Returns 0 or
 * -2 (no memory). */
int vnet_fake_open(struct vnet *n, struct virtio_dev *d,
		   struct virtqueue *rx, struct virtqueue *tx, uint32_t rx_n,
		   uint32_t rx_size);

/* vnet_tx_buf returns room for a frame of up to VNET_MAX_FRAME bytes in a
 * free TX slot (reaping completions first when needed), or NULL when the
 * ring is full. vnet_tx_commit queues it (len bytes) without kicking:
 * vnet_tx_flush kicks once for everything queued, if the device wants. */
uint8_t *vnet_tx_buf(struct vnet *n);
int vnet_tx_commit(struct vnet *n, uint8_t *frame, uint32_t len);
void vnet_tx_flush(struct vnet *n);
/* vnet_tx_reap frees completed TX slots; returns how many. */
int vnet_tx_reap(struct vnet *n);
/* vnet_tx_room reaps and returns how many frames fit right now. */
uint32_t vnet_tx_room(struct vnet *n);

/* vnet_poll is one NAPI poll: take up to budget frames, handing each to
 * fn, re-post their buffers, kick if the device wants, then (interrupt
 * mode, fewer than budget) re-enable callbacks and re-check. Returns the
 * number of frames, or -1 when a queue broke (bad used entry). */
int vnet_poll(struct vnet *n, int budget, vnet_rx_fn fn, void *ctx);
/* vnet_rx_ready: work for vnet_poll (poll scheduled by the interrupt, or
 * in poll mode the used ring has entries). Cheap, no exits. */
bool vnet_rx_ready(struct vnet *n);
bool vnet_broken(struct vnet *n);
/* vnet_ok: not broken and no receive error seen (what a test requires). */
bool vnet_ok(struct vnet *n);
/* vnet_mac_valid is is_valid_ether_addr: not multicast, not all zero. */
bool vnet_mac_valid(const uint8_t *mac);
/* vnet_link_update re-reads the link status (config interrupt). */
void vnet_link_update(struct vnet *n);
/* vnet_link_up: carrier on (always without VIRTIO_NET_F_STATUS). */
bool vnet_link_up(struct vnet *n);

/* vnet_print_counters prints the counters as " key=value" pairs:
 * kicks= interrupts= isr_reads= spurious= (VMM-neutral, from the rings and
 * the CPL0 handler) and the driver's own. */
void vnet_print_counters(struct vnet *n);
void vnet_print_features(struct vnet *n);

/* Between vnet.c and vnet_rx.c: vnet_rx_post posts one receive buffer
 * (0, or -1 when the ring is full); vnet_irq_hook is the CPL0 hook. */
int vnet_rx_post(struct vnet *n, uint8_t *buf);
void vnet_irq_hook(struct virtio_dev *d, uint8_t isr);

#endif
