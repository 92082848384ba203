#include "blkio.h"
#include "../lib/alloc.h"
#include "../lib/report.h"
#include "../lib/tsc.h"

bool io_job_init(struct io_job *j, struct vblk *b, uint32_t type,
		 uint64_t start, uint64_t nsect, void *buf,
		 uint32_t req_sectors, int qd)
{
	if (qd < 1)
		qd = 1;
	if (req_sectors < 1)
		req_sectors = 1;
	j->b = b;
	j->type = type;
	j->start = start;
	j->nsect = nsect;
	j->buf = buf;
	j->req_sectors = req_sectors;
	j->qd = qd;
	j->next = j->done = 0;
	j->nreq = (nsect + req_sectors - 1) / req_sectors;
	j->err = 0;
	j->reqs = alloc_zeroed(sizeof(struct vblk_req) * (size_t)qd, 64);
	j->busy = alloc_zeroed(sizeof(bool) * (size_t)qd, 16);
	return j->reqs && j->busy;
}

/* Fill free slots, one kick per batch (as blk-mq's commit_rqs). */
static void fill(struct io_job *j)
{
	bool added = false;

	for (int k = 0; k < j->qd && j->next < j->nreq; k++) {
		uint64_t s;
		uint32_t n;

		if (j->busy[k])
			continue;
		s = j->next * j->req_sectors;
		n = (uint32_t)(j->nsect - s < j->req_sectors ? j->nsect - s :
							       j->req_sectors);
		vblk_prep(&j->reqs[k], j->type, j->start + s,
			  j->buf + s * SECTOR_SIZE, n * SECTOR_SIZE);
		if (vblk_submit(j->b, &j->reqs[k]) < 0)
			break;
		j->busy[k] = true;
		j->next++;
		added = true;
	}
	if (added)
		vblk_kick(j->b);
}

static void collect(struct io_job *j)
{
	for (int k = 0; k < j->qd; k++) {
		if (!j->busy[k] || !j->reqs[k].done)
			continue;
		j->busy[k] = false;
		j->done++;
		if (j->reqs[k].status != VIRTIO_BLK_S_OK && !j->err)
			j->err = j->reqs[k].status;
	}
}

bool io_run(struct io_job *jobs, int n, uint64_t timeout_ms)
{
	uint64_t deadline = tsc_after(timeout_ms);
	bool left = true;

	while (left) {
		left = false;
		for (int i = 0; i < n; i++) {
			struct io_job *j = &jobs[i];
			int r;

			if (j->err || j->done == j->nreq)
				continue;
			left = true;
			fill(j);
			r = vblk_reap(j->b, deadline);
			if (r < 0) {
				j->err = r;
				return false;
			}
			collect(j);
			if (j->err)
				return false;
		}
	}
	return true;
}

bool blk_open(struct vblk *b, int index, const struct vblk_opts *o,
	      const char *name)
{
	int e = vblk_open(b, index, o);

	if (e == 0)
		return true;
	report(name, false, "reason=%s disk=%d",
	       e == -1 ? "no_disk" : e == -3 ? "bad_blk_size" : "no_queue",
	       index);
	return false;
}
