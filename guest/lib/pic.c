#include "pic.h"
#include "desc.h"
#include "io.h"

#define PIC1_CMD 0x20
#define PIC1_DATA 0x21
#define PIC2_CMD 0xa0
#define PIC2_DATA 0xa1
#define PIC_EOI 0x20
#define PIC_READ_ISR 0x0b

#define LAPIC_BASE_MSR 0x1b
#define LAPIC_SVR 0xf0
#define LAPIC_LVT0 0x350
#define LAPIC_LVT1 0x360

volatile unsigned long irq_count[16];
volatile unsigned long irq_spurious;
static irq_handler_t irq_handlers[16];
static uint8_t mask1 = 0xff, mask2 = 0xff;

/* An IRQ7/IRQ15 that the in-service register does not show was never
 * really raised (8259A data sheet, "spurious interrupt"): no EOI to the
 * PIC that produced it. */
static int spurious(int irq)
{
	uint16_t cmd = irq < 8 ? PIC1_CMD : PIC2_CMD;

	if ((irq & 7) != 7)
		return 0;
	outb(cmd, PIC_READ_ISR);
	return !(inb(cmd) & 0x80);
}

static void pic_dispatch(struct intr_frame *f)
{
	int irq = (int)(f->vector - PIC_VECTOR_BASE);

	if (spurious(irq)) {
		irq_spurious++;
		if (irq == 15)
			outb(PIC1_CMD, PIC_EOI); /* the master did see IRQ2 */
		return;
	}
	irq_count[irq]++;
	if (irq_handlers[irq])
		irq_handlers[irq](irq);
	if (irq >= 8)
		outb(PIC2_CMD, PIC_EOI);
	outb(PIC1_CMD, PIC_EOI);
}

static void lapic_spurious(struct intr_frame *f)
{
	(void)f;
	irq_spurious++; /* no EOI for the APIC spurious vector */
}

static void lapic_virtual_wire(void)
{
	uint64_t base = rdmsr(LAPIC_BASE_MSR);
	uintptr_t mmio = base & 0xfffff000u;

	if (!(base & (1u << 11)))
		return; /* APIC globally off: the PIC drives INTR directly */
	/* Software-enable first: while SVR bit 8 is clear the LVT mask bits
	 * cannot be cleared (SDM vol. 3, 11.4.7.2). */
	mmio_write32(mmio + LAPIC_SVR, 0x100 | LAPIC_SPURIOUS_VECTOR);
	mmio_write32(mmio + LAPIC_LVT0, 0x700); /* ExtINT, unmasked */
	mmio_write32(mmio + LAPIC_LVT1, 0x400); /* NMI */
}

void pic_init(void)
{
	outb(PIC1_CMD, 0x11);              /* ICW1: edge, cascade, ICW4 */
	outb(PIC2_CMD, 0x11);
	outb(PIC1_DATA, PIC_VECTOR_BASE);  /* ICW2: vector base */
	outb(PIC2_DATA, PIC_VECTOR_BASE + 8);
	outb(PIC1_DATA, 0x04);             /* ICW3: slave on IRQ2 */
	outb(PIC2_DATA, 0x02);             /* ICW3: slave identity */
	outb(PIC1_DATA, 0x01);             /* ICW4: 8086 mode, normal EOI */
	outb(PIC2_DATA, 0x01);
	mask1 = 0xff;
	mask2 = 0xff;
	outb(PIC1_DATA, mask1);
	outb(PIC2_DATA, mask2);
	for (int i = 0; i < 16; i++)
		intr_set_handler(PIC_VECTOR_BASE + i, pic_dispatch);
	intr_set_handler(LAPIC_SPURIOUS_VECTOR, lapic_spurious);
	lapic_virtual_wire();
}

void irq_set_handler(int irq, irq_handler_t h)
{
	irq_handlers[irq & 15] = h;
}

void pic_unmask(int irq)
{
	if (irq < 8) {
		mask1 &= (uint8_t)~(1u << irq);
		outb(PIC1_DATA, mask1);
	} else {
		mask2 &= (uint8_t)~(1u << (irq - 8));
		mask1 &= (uint8_t)~(1u << 2);
		outb(PIC2_DATA, mask2);
		outb(PIC1_DATA, mask1);
	}
}

void pic_mask(int irq)
{
	if (irq < 8) {
		mask1 |= (uint8_t)(1u << irq);
		outb(PIC1_DATA, mask1);
	} else {
		mask2 |= (uint8_t)(1u << (irq - 8));
		outb(PIC2_DATA, mask2);
	}
}

void pit_start(unsigned hz)
{
	unsigned div = (PIT_HZ + hz / 2) / hz;

	if (div > 0xffff)
		div = 0xffff;
	outb(0x43, 0x34);                  /* channel 0, lo/hi, mode 2 */
	outb(0x40, div & 0xff);
	outb(0x40, div >> 8);
}

void pit_stop(void)
{
	outb(0x43, 0x30);                  /* channel 0, lo/hi, mode 0 */
}
