#include "virtio.h"
#include "alloc.h"
#include "cmdline.h"
#include "io.h"
#include "pic.h"
#include "string.h"

static struct virtio_dev devs[VIRTIO_MAX_DEVS];
static int ndevs;

/* Devices sharing each legacy IRQ line (PCI INTx is shareable). */
static struct virtio_dev *irq_devs[16][VIRTIO_MAX_DEVS];
static int irq_ndevs[16];

/* CPL0, interrupts off: read each device's ISR (the read clears it and
 * lowers the device's line), count, and let pic_dispatch EOI. On a shared
 * line another device may raise its ISR while we read ours: with the PIC
 * edge-triggered that produces no new edge, so go round again until one
 * pass finds every ISR clear. */
static void virtio_irq(int irq)
{
	int n = irq_ndevs[irq];

	for (int pass = 0; pass < 4; pass++) {
		bool any = false;

		for (int i = 0; i < n; i++) {
			struct virtio_dev *d = irq_devs[irq][i];
			uint8_t isr = inb((uint16_t)(d->io + VIRTIO_PCI_ISR));

			d->isr_reads++;
			if (!isr)
				continue;
			any = true;
			d->interrupts++;
			d->isr_accum |= isr;
			if (isr & VIRTIO_ISR_QUEUE)
				d->irq_seq++;
			if (isr & VIRTIO_ISR_CONFIG)
				d->config_irqs++;
			if (d->irq_hook)
				d->irq_hook(d, isr);
		}
		if (!any) {
			if (pass == 0)
				for (int i = 0; i < n; i++)
					irq_devs[irq][i]->spurious++;
			break;
		}
		if (n == 1)
			break;
	}
}

struct virtio_dev *virtio_get(int type, int n)
{
	struct pci_dev *p = pci_find_virtio(type, n);
	struct virtio_dev *d;

	if (!p || !p->io_base)
		return NULL;
	for (int i = 0; i < ndevs; i++)
		if (devs[i].pci == p)
			return &devs[i];
	if (ndevs >= VIRTIO_MAX_DEVS)
		return NULL;
	d = &devs[ndevs++];
	d->pci = p;
	d->io = p->io_base;
	d->irq = p->irq_line < 16 ? p->irq_line : 0;
	if (cmdline_get_int("virtio.irq", 0))
		d->irq = (uint8_t)cmdline_get_int("virtio.irq", 0);
	if (d->irq) {
		int k = irq_ndevs[d->irq];

		irq_devs[d->irq][k] = d;
		irq_ndevs[d->irq] = k + 1;
		irq_set_handler(d->irq, virtio_irq);
	}
	return d;
}

uint8_t virtio_status(struct virtio_dev *d)
{
	return inb((uint16_t)(d->io + VIRTIO_PCI_STATUS));
}

void virtio_set_status(struct virtio_dev *d, uint8_t s)
{
	outb((uint16_t)(d->io + VIRTIO_PCI_STATUS), s);
}

/* Status bits only accumulate (virtio.c's virtio_add_status). */
static void add_status(struct virtio_dev *d, uint8_t s)
{
	virtio_set_status(d, (uint8_t)(virtio_status(d) | s));
}

void virtio_counters_zero(struct virtio_dev *d)
{
	d->interrupts = d->isr_reads = d->spurious = d->config_irqs = 0;
	for (int i = 0; i < VIRTIO_MAX_VQS; i++) {
		struct virtqueue *vq = &d->vqs[i];

		vq->kicks = vq->kicks_suppressed = vq->completions = 0;
		vq->bad_used = 0;
	}
}

void virtio_reset(struct virtio_dev *d)
{
	virtio_set_status(d, 0);
	/* vp_legacy_reset: the read flushes the write; after it the device
	 * has dropped its rings and lowered its interrupt. */
	(void)virtio_status(d);
	memset(d->vqs, 0, sizeof(d->vqs));
	d->nvqs = 0;
	d->guest_features = 0;
	d->isr_accum = 0;
	virtio_counters_zero(d);
}

uint32_t virtio_begin(struct virtio_dev *d)
{
	virtio_reset(d);
	add_status(d, VIRTIO_S_ACKNOWLEDGE);
	add_status(d, VIRTIO_S_DRIVER);
	d->host_features = inl((uint16_t)(d->io + VIRTIO_PCI_HOST_FEATURES));
	return d->host_features;
}

void virtio_set_features(struct virtio_dev *d, uint32_t features)
{
	/* Never accept what was not offered (spec 2.2.1). */
	d->guest_features = features & d->host_features;
	outl((uint16_t)(d->io + VIRTIO_PCI_GUEST_FEATURES), d->guest_features);
}

/* Legacy layout (spec 2.6.2): descriptor table, available ring with
 * used_event, padding to the 4096 alignment, used ring with avail_event. */
static uint64_t vring_size(unsigned num)
{
	uint64_t a = 16ull * num + 2 * (3 + num);

	a = (a + VIRTIO_PCI_VRING_ALIGN - 1) & ~(uint64_t)(VIRTIO_PCI_VRING_ALIGN - 1);
	return a + 2 * 3 + 8ull * num;
}

int virtqueue_init(struct virtqueue *vq, struct virtio_dev *d, int index,
		   uint16_t num)
{
	bool indirect = virtio_has(d->guest_features,
				   VIRTIO_RING_F_INDIRECT_DESC);

	memset(vq, 0, sizeof(*vq));
	vq->vdev = d;
	vq->index = (uint16_t)index;
	vq->num = num;
	vq->ring_mem = alloc_zeroed(vring_size(num), VIRTIO_PCI_VRING_ALIGN);
	vq->data = alloc_zeroed(sizeof(void *) * num, 16);
	vq->next_free = alloc_zeroed(sizeof(uint16_t) * num, 16);
	vq->chain_len = alloc_zeroed(sizeof(uint16_t) * num, 16);
	vq->in_len = alloc_zeroed(sizeof(uint32_t) * num, 16);
	if (indirect)
		vq->indir = alloc_zeroed(sizeof(struct vring_desc) * num *
					 VIRTIO_MAX_INDIRECT, 16);
	if (!vq->ring_mem || !vq->data || !vq->next_free || !vq->chain_len ||
	    !vq->in_len || (indirect && !vq->indir))
		return -1;
	vq->desc = vq->ring_mem;
	vq->avail = (void *)((char *)vq->ring_mem + 16ull * num);
	vq->used = (void *)((char *)vq->ring_mem +
			    vring_size(num) - (2 * 3 + 8ull * num));
	vq->event = virtio_has(d->guest_features, VIRTIO_RING_F_EVENT_IDX);
	vq->indirect = indirect;
	vq->num_free = num;
	vq->free_head = 0;
	for (uint16_t i = 0; i + 1 < num; i++)
		vq->next_free[i] = (uint16_t)(i + 1);
	return 0;
}

struct virtqueue *virtio_setup_vq(struct virtio_dev *d, int index)
{
	struct virtqueue *vq;
	uint16_t num;

	if (index >= VIRTIO_MAX_VQS)
		return NULL;
	outw((uint16_t)(d->io + VIRTIO_PCI_QUEUE_SEL), (uint16_t)index);
	num = inw((uint16_t)(d->io + VIRTIO_PCI_QUEUE_NUM));
	/* Size 0: no such queue; a PFN already set: the queue is live
	 * (vp_legacy setup_vq: -ENOENT). A ring size must be a power of two
	 * (vring_create_virtqueue: "Bad virtqueue length") and at most
	 * 32768 (spec 2.6). */
	if (!num || (num & (num - 1)) || num > 32768 ||
	    inl((uint16_t)(d->io + VIRTIO_PCI_QUEUE_PFN)))
		return NULL;
	vq = &d->vqs[index];
	if (virtqueue_init(vq, d, index, num) < 0)
		return NULL;
	outl((uint16_t)(d->io + VIRTIO_PCI_QUEUE_PFN),
	     (uint32_t)(virt_to_phys(vq->ring_mem) >> VIRTIO_PCI_QUEUE_ADDR_SHIFT));
	if (index >= d->nvqs)
		d->nvqs = index + 1;
	return vq;
}

void virtio_driver_ok(struct virtio_dev *d)
{
	add_status(d, VIRTIO_S_DRIVER_OK);
	if (d->irq)
		pic_unmask(d->irq);
}

uint8_t virtio_config8(struct virtio_dev *d, int off)
{
	return inb((uint16_t)(d->io + VIRTIO_PCI_CONFIG + off));
}

uint32_t virtio_config32(struct virtio_dev *d, int off)
{
	return inl((uint16_t)(d->io + VIRTIO_PCI_CONFIG + off));
}

uint64_t virtio_config64(struct virtio_dev *d, int off)
{
	return virtio_config32(d, off) |
	       (uint64_t)virtio_config32(d, off + 4) << 32;
}

void virtio_counters(struct virtio_dev *d, struct virtio_counters *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < d->nvqs; i++) {
		c->kicks += d->vqs[i].kicks;
		c->kicks_suppressed += d->vqs[i].kicks_suppressed;
		c->completions += d->vqs[i].completions;
	}
	c->interrupts = d->interrupts;
	c->isr_reads = d->isr_reads;
	c->spurious = d->spurious;
	c->config_irqs = d->config_irqs;
}
