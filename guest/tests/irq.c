/* irq: PIT timer (IRQ 0) and COM1 THRE (IRQ 4) interrupts through the
 * 8259 PIC, taken while the CPU runs at CPL3. The handlers run at CPL0
 * and only count (and read IIR to acknowledge the UART). */
#include "../lib/io.h"
#include "../lib/pic.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/serial.h"
#include "../lib/cmdline.h"
#include "../lib/test.h"

static volatile unsigned long timer_ticks, serial_irqs, serial_iir_empty;
static volatile uint64_t tsc_tick1, tsc_tickn;

static void timer_handler(int irq)
{
	(void)irq;
	if (++timer_ticks == 1)
		tsc_tick1 = rdtsc();
	else
		tsc_tickn = rdtsc();
}

static void serial_handler(int irq)
{
	(void)irq;
	/* Reading IIR acknowledges a THRE interrupt (16550 data sheet). */
	if (inb(COM1_BASE + UART_IIR) & UART_IIR_NO_INT)
		serial_iir_empty++;
	serial_irqs++;
}

static void run(void)
{
	unsigned long want = (unsigned long)cmdline_get_int("irq_ticks", 10);
	/* Generous bound without knowing the TSC rate: ~3 s at 5 GHz. */
	uint64_t limit = 15000000000ull, t0;
	unsigned long spurious0 = irq_spurious;
	uint64_t tsc_khz = 0;

	irq_set_handler(0, timer_handler);
	irq_set_handler(COM1_IRQ, serial_handler);
	pit_start(100);
	pic_unmask(0);
	pic_unmask(COM1_IRQ);

	/* THRE interrupts: enabling ETBEI with an empty THR raises one; each
	 * transmitted byte empties THR again and raises another. */
	for (int i = 0; i < 4; i++) {
		outb(COM1_BASE + UART_IER, 0);
		outb(COM1_BASE + UART_IER, UART_IER_THRI);
	}
	puts("irq: serial tx\n");

	t0 = rdtsc();
	while ((timer_ticks < want || serial_irqs == 0) &&
	       rdtsc() - t0 < limit)
		cpu_relax();

	outb(COM1_BASE + UART_IER, 0);
	pic_mask(COM1_IRQ);
	pic_mask(0);
	pit_stop();
	/* TSC rate from the PIT: ticks 1..n are (n-1)/100 s apart. */
	if (timer_ticks > 1)
		tsc_khz = (tsc_tickn - tsc_tick1) * 100 / (timer_ticks - 1) / 1000;
	report("irq", timer_ticks > 0 && serial_irqs > 0,
	       "timer=%lu serial=%lu spurious=%lu serial_no_int=%lu "
	       "wait_cycles=%llu tsc_khz_est=%llu", timer_ticks, serial_irqs,
	       irq_spurious - spurious0, serial_iir_empty,
	       (unsigned long long)(rdtsc() - t0),
	       (unsigned long long)tsc_khz);
}

DEFINE_TEST(irq, .name = "irq", .run = run, .in_all = true);
