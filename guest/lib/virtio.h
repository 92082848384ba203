/* Legacy virtio-PCI transport and split virtqueues, modelled on Linux's
 * drivers/virtio/virtio_pci_legacy.c, virtio.c and virtio_ring.c (split
 * ring). Generic: virtio-blk (lib/vblk.c) and virtio-net drivers sit on
 * top. References: virtio 1.x spec 2.6 (split virtqueues), 2.6.7/2.6.10
 * (notification suppression), 4.1.4.8 (legacy PCI interface), 2.6.2
 * (legacy ring layout).
 *
 * Threading model: one CPU. The CPL3 code owns every ring; the CPL0
 * interrupt handler only reads the ISR register (read-to-clear) and bumps
 * counters that the CPL3 waiter polls. */
#ifndef LIB_VIRTIO_H
#define LIB_VIRTIO_H

#include <stdbool.h>
#include <stdint.h>

#include "pci.h"

/* Device types (subsystem device ID), virtio spec 5. */
#define VIRTIO_ID_NET 1
#define VIRTIO_ID_BLOCK 2
#define VIRTIO_ID_CONSOLE 3
#define VIRTIO_ID_RNG 4
#define VIRTIO_ID_9P 9

/* Legacy register block in BAR0 (spec 4.1.4.8), no MSI-X. */
#define VIRTIO_PCI_HOST_FEATURES 0  /* 32, RO */
#define VIRTIO_PCI_GUEST_FEATURES 4 /* 32, RW */
#define VIRTIO_PCI_QUEUE_PFN 8      /* 32, RW */
#define VIRTIO_PCI_QUEUE_NUM 12     /* 16, RO */
#define VIRTIO_PCI_QUEUE_SEL 14     /* 16, RW */
#define VIRTIO_PCI_QUEUE_NOTIFY 16  /* 16, RW */
#define VIRTIO_PCI_STATUS 18        /* 8, RW */
#define VIRTIO_PCI_ISR 19           /* 8, RO, read-to-clear */
#define VIRTIO_PCI_CONFIG 20        /* device-specific config */
#define VIRTIO_PCI_QUEUE_ADDR_SHIFT 12
#define VIRTIO_PCI_VRING_ALIGN 4096

#define VIRTIO_ISR_QUEUE 0x1
#define VIRTIO_ISR_CONFIG 0x2

/* Device status (spec 2.1). */
#define VIRTIO_S_ACKNOWLEDGE 0x01
#define VIRTIO_S_DRIVER 0x02
#define VIRTIO_S_DRIVER_OK 0x04
#define VIRTIO_S_FEATURES_OK 0x08
#define VIRTIO_S_NEEDS_RESET 0x40
#define VIRTIO_S_FAILED 0x80

/* Ring features (spec 6). */
#define VIRTIO_RING_F_INDIRECT_DESC 28
#define VIRTIO_RING_F_EVENT_IDX 29

#define VRING_DESC_F_NEXT 1
#define VRING_DESC_F_WRITE 2
#define VRING_DESC_F_INDIRECT 4
#define VRING_USED_F_NO_NOTIFY 1
#define VRING_AVAIL_F_NO_INTERRUPT 1

#define VIRTIO_MAX_DEVS 8
#define VIRTIO_MAX_VQS 4
/* Indirect tables are preallocated per head with this many entries. */
#define VIRTIO_MAX_INDIRECT 64

struct vring_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct vring_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[]; /* then used_event */
};

struct vring_used_elem {
	uint32_t id;
	uint32_t len;
};

struct vring_used {
	uint16_t flags;
	uint16_t idx;
	struct vring_used_elem ring[]; /* then avail_event */
};

/* One buffer of a request: device-readable (out) or device-writable (in). */
struct vbuf {
	void *addr;
	uint32_t len;
};

struct virtio_dev;

struct virtqueue {
	struct virtio_dev *vdev;
	uint16_t index, num;
	volatile struct vring_desc *desc;
	volatile struct vring_avail *avail;
	volatile struct vring_used *used;
	void *ring_mem;            /* the legacy 4096-aligned ring block */
	/* Driver-private state, as in struct vring_virtqueue (split). */
	uint16_t free_head, num_free, num_added;
	uint16_t last_used_idx;
	uint16_t avail_idx_shadow, avail_flags_shadow;
	bool event;                /* VIRTIO_RING_F_EVENT_IDX negotiated */
	bool indirect;             /* VIRTIO_RING_F_INDIRECT_DESC negotiated */
	bool broken;               /* the device returned a bad used entry */
	void **data;               /* token per head, NULL when free */
	uint16_t *next_free;       /* free list, kept out of device reach */
	uint16_t *chain_len;       /* descriptors per head (direct chains) */
	uint32_t *in_len;          /* device-writable bytes per head */
	struct vring_desc *indir;  /* num * VIRTIO_MAX_INDIRECT entries */
	const char *bad_why;       /* what broke it (BAD_RING's message) */
	/* Counters. */
	unsigned long kicks, kicks_suppressed, completions, bad_used;
};

struct virtio_dev {
	struct pci_dev *pci;
	uint16_t io;
	uint8_t irq;
	uint32_t host_features, guest_features;
	struct virtqueue vqs[VIRTIO_MAX_VQS];
	int nvqs;
	/* Updated by the CPL0 interrupt handler. */
	volatile unsigned long interrupts; /* handler runs with ISR != 0 */
	volatile unsigned long isr_reads;
	volatile unsigned long spurious;   /* handler found ISR == 0 */
	volatile unsigned long config_irqs;
	volatile unsigned long irq_seq;    /* bumped on every queue interrupt */
	volatile uint8_t isr_accum;        /* ISR bits seen since last cleared */
	/* Optional driver hook, called by the CPL0 handler with a non-zero
	 * ISR (what a Linux driver's vq callback does, e.g. virtio_net's
	 * skb_recv_done). Runs emulated on our hosts: a few instructions. */
	void (*irq_hook)(struct virtio_dev *d, uint8_t isr);
	void *priv;                        /* the driver's, for irq_hook */
};

/* virtio_get returns the n-th legacy virtio device of type (PCI scan
 * order), bound to a struct virtio_dev, or NULL. */
struct virtio_dev *virtio_get(int type, int n);

/* Initialisation, in Linux's order (virtio_dev_probe + vp_legacy):
 *   virtio_begin: reset, ACKNOWLEDGE, DRIVER; returns host features
 *   virtio_set_features: write the subset the driver accepts (legacy
 *     has no FEATURES_OK)
 *   virtio_setup_vq: per queue: select, read size, allocate the ring,
 *     write its PFN
 *   virtio_driver_ok: DRIVER_OK, and the interrupt line is unmasked. */
uint32_t virtio_begin(struct virtio_dev *d);
void virtio_set_features(struct virtio_dev *d, uint32_t features);
/* virtio_setup_vq returns NULL when the queue does not exist (size 0) or
 * is already active (PFN != 0), as Linux's setup_vq does. */
struct virtqueue *virtio_setup_vq(struct virtio_dev *d, int index);
void virtio_driver_ok(struct virtio_dev *d);
/* virtqueue_init lays out a fresh ring of num entries in new memory and
 * the driver state for it, without telling any device (virtio_setup_vq
 * then writes the PFN; tests/vring.c drives it as a fake device). */
int virtqueue_init(struct virtqueue *vq, struct virtio_dev *d, int index,
		   uint16_t num);
/* virtio_reset writes status 0 and reads it back (vp_legacy_reset: the
 * read flushes the write), forgets the queues and zeroes the counters. */
void virtio_reset(struct virtio_dev *d);

uint8_t virtio_status(struct virtio_dev *d);
void virtio_set_status(struct virtio_dev *d, uint8_t s);
uint8_t virtio_config8(struct virtio_dev *d, int off);
uint32_t virtio_config32(struct virtio_dev *d, int off);
uint64_t virtio_config64(struct virtio_dev *d, int off);

static inline bool virtio_has(uint32_t features, int bit)
{
	return features & (1u << bit);
}

/* The vring API (virtio_ring.c, split ring).
 *
 * virtqueue_add: out device-readable buffers then in device-writable ones,
 * as one request identified by token. With indirect (and the feature
 * negotiated, more than one buffer), the chain goes into the head's
 * indirect table and takes one ring slot. Returns 0, or -1 when there is
 * no room (the caller reaps completions and retries). */
int virtqueue_add(struct virtqueue *vq, const struct vbuf *bufs, int out,
		  int in, void *token, bool indirect);
/* virtqueue_kick_prepare says whether the device wants a notification
 * for what was added since the last kick; virtqueue_notify sends it. */
bool virtqueue_kick_prepare(struct virtqueue *vq);
void virtqueue_notify(struct virtqueue *vq);
bool virtqueue_kick(struct virtqueue *vq);
/* virtqueue_get_buf returns the next completed token (and the length the
 * device wrote), or NULL. */
void *virtqueue_get_buf(struct virtqueue *vq, uint32_t *len);
bool virtqueue_more_used(struct virtqueue *vq);
/* Interrupt suppression: disable_cb asks for no interrupts (best effort);
 * enable_cb re-enables them and returns false when buffers completed in
 * the meantime (the caller must drain again, or an interrupt is lost). */
void virtqueue_disable_cb(struct virtqueue *vq);
uint16_t virtqueue_enable_cb_prepare(struct virtqueue *vq);
bool virtqueue_poll(struct virtqueue *vq, uint16_t last_used_idx);
bool virtqueue_enable_cb(struct virtqueue *vq);

/* Ring layout helpers (legacy, spec 2.6.2). */
static inline volatile uint16_t *vring_used_event(struct virtqueue *vq)
{
	return &vq->avail->ring[vq->num];
}

static inline volatile uint16_t *vring_avail_event(struct virtqueue *vq)
{
	return (volatile uint16_t *)&vq->used->ring[vq->num];
}

/* vring_need_event (spec 2.6.7.2): did the index move past event since
 * old? Unsigned 16-bit arithmetic handles wrap-around. */
static inline bool vring_need_event(uint16_t event, uint16_t new_idx,
				    uint16_t old)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

/* Barriers as Linux uses them with weak_barriers (virtio_pci sets it):
 * on x86 the CPU keeps stores ordered with stores and loads with loads
 * (TSO), so virtio_wmb/rmb are compiler barriers; a store followed by a
 * load of a different location can be reordered, so virtio_mb is a full
 * barrier (a locked op, as Linux's smp_mb on x86-64). */
static inline void virtio_wmb(void)
{
	asm volatile("" ::: "memory");
}

static inline void virtio_rmb(void)
{
	asm volatile("" ::: "memory");
}

static inline void virtio_mb(void)
{
	asm volatile("lock; addl $0,-4(%%rsp)" ::: "memory", "cc");
}

/* Counter snapshot for RESULT lines. */
struct virtio_counters {
	unsigned long kicks, kicks_suppressed, interrupts, isr_reads, spurious,
		config_irqs, completions;
};
void virtio_counters(struct virtio_dev *d, struct virtio_counters *c);
/* virtio_counters_zero restarts every counter of d and its queues. */
void virtio_counters_zero(struct virtio_dev *d);

#endif
