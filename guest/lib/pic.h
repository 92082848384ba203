/* Legacy interrupt path: two 8259A PICs (IRQ n -> vector PIC_VECTOR_BASE
 * + n), the local APIC left in virtual-wire mode so the PIC's INTR reaches
 * the CPU, and the 8254 PIT. */
#ifndef LIB_PIC_H
#define LIB_PIC_H

#include <stdint.h>

#define PIC_VECTOR_BASE 0x20
#define LAPIC_SPURIOUS_VECTOR 0xff

struct intr_frame;
typedef void (*irq_handler_t)(int irq);

/* pic_init runs ICW1-4 (master at 0x20, slave at 0x28, cascade on IRQ2),
 * masks every line, and routes vectors 0x20-0x2f through pic_dispatch.
 * It also puts the local APIC into virtual-wire mode (LVT0 ExtINT): KVM
 * only delivers PIC interrupts to a vCPU whose APIC is disabled or has
 * LINT0 unmasked in ExtINT mode, and not every firmware sets that.
 * CPL0 only. */
void pic_init(void);

/* irq_set_handler installs h for irq; it runs at CPL0 with interrupts
 * off, before the EOI. */
void irq_set_handler(int irq, irq_handler_t h);
void pic_unmask(int irq);
void pic_mask(int irq);

/* Per-IRQ counts, and interrupts on IRQ7/15 that the PIC's in-service
 * register did not confirm (8259A spurious interrupts) plus local APIC
 * spurious-vector interrupts. */
extern volatile unsigned long irq_count[16];
extern volatile unsigned long irq_spurious;

/* PIT channel 0 as a periodic rate generator (mode 2) at hz. */
void pit_start(unsigned hz);
/* pit_stop leaves channel 0 in mode 0 with no count: no more edges. */
void pit_stop(void);

#define PIT_HZ 1193182u

#endif
