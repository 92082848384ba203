/* virtio-blk driver (virtio spec 5.2, legacy interface) over lib/virtio:
 * one request queue, requests of header + data + status byte, completed
 * by interrupt (default) or by polling the used ring. Runs at CPL3. */
#ifndef LIB_VBLK_H
#define LIB_VBLK_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio.h"

/* Feature bits (spec 5.2.3). */
#define VIRTIO_BLK_F_SIZE_MAX 1
#define VIRTIO_BLK_F_SEG_MAX 2
#define VIRTIO_BLK_F_GEOMETRY 4
#define VIRTIO_BLK_F_RO 5
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH 9
#define VIRTIO_BLK_F_TOPOLOGY 10

/* Request types and status values (spec 5.2.6). */
#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_S_OK 0
#define VIRTIO_BLK_S_IOERR 1
#define VIRTIO_BLK_S_UNSUPP 2
#define VIRTIO_BLK_ID_BYTES 20
#define SECTOR_SIZE 512

/* Status written before submission so an untouched byte is visible. */
#define VBLK_STATUS_UNSET 0xff

/* Waiting results. */
#define VBLK_ERR_TIMEOUT (-2)
#define VBLK_ERR_BROKEN (-3)
#define VBLK_ERR_FULL (-4)
/* More data segments than seg_max, one longer than size_max, or more than
 * an indirect table holds: never submitted (Linux's block layer never
 * builds such a request: blk_queue_max_segments / max_segment_size). */
#define VBLK_ERR_SEGS (-5)

struct vblk_opts {
	bool poll;      /* VRING_AVAIL_F_NO_INTERRUPT, poll the used ring */
	bool indirect;  /* negotiate and use indirect descriptors */
	bool event_idx; /* negotiate VIRTIO_RING_F_EVENT_IDX when offered */
	uint32_t seg_bytes; /* split data into segments of this size (0: one) */
};

/* One request. Lives in identity-mapped memory: hdr and status are what
 * the device reads and writes. */
struct vblk_req {
	struct {
		uint32_t type;
		uint32_t ioprio;
		uint64_t sector;
	} hdr;                 /* struct virtio_blk_outhdr */
	volatile uint8_t status;
	bool done;
	uint32_t used_len;
	void *buf;
	uint32_t len;
	uintptr_t user;
};

struct vblk {
	struct virtio_dev *vd;
	struct virtqueue *vq;
	int index;
	uint64_t capacity;     /* in 512-byte sectors */
	uint32_t seg_max;      /* 0: not negotiated */
	uint32_t size_max;     /* 0: not negotiated */
	uint32_t blk_size;     /* 512 unless VIRTIO_BLK_F_BLK_SIZE */
	struct vblk_opts o;
	int inflight;
	unsigned long timeouts;
};

/* vblk_open initialises disk index (PCI order) with o; returns 0 or a
 * negative value: -1 no such disk, -2 no queue / no memory, -3 the device
 * offered an invalid blk_size. */
int vblk_open(struct vblk *b, int index, const struct vblk_opts *o);
/* vblk_opts_from_cmdline reads blk.poll, blk.indirect, blk.event_idx,
 * blk.seg_bytes. */
void vblk_opts_from_cmdline(struct vblk_opts *o);
/* vblk_blk_size_valid is blk_validate_block_size: a power of two from 512
 * to the page size (4096). */
bool vblk_blk_size_valid(uint32_t bsize);

/* vblk_prep fills r for type/sector/buf/len. vblk_submit puts it on the
 * ring without kicking; vblk_kick notifies if the device wants it. */
void vblk_prep(struct vblk_req *r, uint32_t type, uint64_t sector, void *buf,
	       uint32_t len);
int vblk_submit(struct vblk *b, struct vblk_req *r);
void vblk_kick(struct vblk *b);
/* vblk_reap waits (until the TSC passes deadline) for completions, marks
 * them done and returns how many, or VBLK_ERR_*. */
int vblk_reap(struct vblk *b, uint64_t deadline);
/* vblk_do runs one request synchronously: the status byte, or VBLK_ERR_*. */
int vblk_do(struct vblk *b, struct vblk_req *r, uint64_t timeout_ms);

/* vblk_counters prints " kicks=.. interrupts=.. isr_reads=.. spurious=..
 * completions=.. kicks_suppressed=.. config_irqs=.." for b. */
void vblk_print_counters(struct vblk *b, const char *prefix);
/* vblk_print_features prints " features=0x.. event_idx=0|1 indirect=0|1
 * poll=0|1 qsize=N capacity=N". */
void vblk_print_features(struct vblk *b);

#endif
