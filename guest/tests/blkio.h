/* Shared by the blk tests (tests/blk.c, blkbench.c, hostile.c): a batch
 * of sequential requests over one disk at a queue depth, and the common
 * opening/printing. CPL3. */
#ifndef TESTS_BLKIO_H
#define TESTS_BLKIO_H

#include "../lib/vblk.h"

struct io_job {
	struct vblk *b;
	uint32_t type;
	uint64_t start, nsect;
	uint8_t *buf;
	uint32_t req_sectors;
	int qd;
	/* progress */
	uint64_t next, done, nreq;
	struct vblk_req *reqs; /* qd slots */
	bool *busy;
	int err;               /* first VBLK_ERR_* or bad status (>0) */
};

/* io_job_init allocates the slots; false if out of memory. */
bool io_job_init(struct io_job *j, struct vblk *b, uint32_t type,
		 uint64_t start, uint64_t nsect, void *buf,
		 uint32_t req_sectors, int qd);
/* io_run drives n jobs to completion at the same time; false on the
 * first error (see each job's err). */
bool io_run(struct io_job *jobs, int n, uint64_t timeout_ms);

/* blk_open opens disk index with the command-line options overridden by
 * the caller's; on failure it prints a fail RESULT for name. */
bool blk_open(struct vblk *b, int index, const struct vblk_opts *o,
	      const char *name);

#endif
