/* pci: bus 0 as the guest sees it (lib/pci.c), one entry per function:
 * slot.func:vendor:device:class[:virtio type, io base, irq, what we had
 * to assign ourselves]. */
#include "../lib/io.h"
#include "../lib/pci.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/test.h"

static void run(void)
{
	int n = pci_scan(), v = 0;

	for (int i = 0; i < n; i++)
		v += pci_is_virtio(pci_get(i));
	report_begin("pci", n > 0);
	printf(" devices=%d virtio=%d list=", n, v);
	for (int i = 0; i < n; i++) {
		struct pci_dev *d = pci_get(i);

		printf("%s%02x.%x:%04x:%04x:%06x", i ? "," : "", d->slot,
		       d->func, d->vendor, d->device, d->class_code);
		if (pci_is_virtio(d))
			printf(":type%u:io%x:irq%u:fwirq%u:pin%u%s%s",
			       d->subsys_id, d->io_base, d->irq_line,
			       d->fw_irq_line, d->irq_pin,
			       d->bar_assigned ? ":bar_assigned" : "",
			       d->irq_routed ? ":irq_routed" : "");
	}
	/* QEMU's i440FX: the PIIX3 PIRQ routing and the ELCR (level bits). */
	if (pci_read32(0, 1, 0, 0) == 0x70008086u)
		printf(" pirq=%02x,%02x,%02x,%02x elcr=%02x%02x",
		       pci_read8(0, 1, 0, 0x60), pci_read8(0, 1, 0, 0x61),
		       pci_read8(0, 1, 0, 0x62), pci_read8(0, 1, 0, 0x63),
		       inb(0x4d1), inb(0x4d0));
	report_end();
}

DEFINE_TEST(pci, .name = "pci", .run = run);
