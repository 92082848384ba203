#include "pci.h"
#include "io.h"
#include "printf.h"

#define PCI_CONF_ADDR 0xcf8
#define PCI_CONF_DATA 0xcfc

/* QEMU's PIIX3 PCI-to-ISA bridge at 00:01.0: PIRQRC[A-D] at 0x60-0x63
 * (82371SB data sheet, 2.3.8): bits 0-3 the ISA IRQ, bit 7 = disabled. */
#define PIIX3_VENDOR 0x8086
#define PIIX3_DEVICE 0x7000
#define PIIX_PIRQRC 0x60
#define ELCR_PORT 0x4d0

/* Free I/O window for BARs the firmware left unassigned, like SeaBIOS's
 * choice of 0xc000 upwards (above the legacy ISA ports). */
#define IO_ASSIGN_BASE 0xc000
#define IO_ASSIGN_STEP 0x100

static struct pci_dev devs[PCI_MAX_DEVS];
static int ndevs = -1;
static uint16_t next_io = IO_ASSIGN_BASE;

static uint32_t conf_addr(int bus, int slot, int func, int reg)
{
	return 0x80000000u | (uint32_t)bus << 16 | (uint32_t)slot << 11 |
	       (uint32_t)func << 8 | (uint32_t)(reg & 0xfc);
}

/* Sub-dword accesses use the byte lanes of 0xCFC + (reg & 3), as Linux's
 * pci_conf1_read does. */
uint32_t pci_read32(int bus, int slot, int func, int reg)
{
	outl(PCI_CONF_ADDR, conf_addr(bus, slot, func, reg));
	return inl(PCI_CONF_DATA);
}

uint16_t pci_read16(int bus, int slot, int func, int reg)
{
	outl(PCI_CONF_ADDR, conf_addr(bus, slot, func, reg));
	return inw((uint16_t)(PCI_CONF_DATA + (reg & 2)));
}

uint8_t pci_read8(int bus, int slot, int func, int reg)
{
	outl(PCI_CONF_ADDR, conf_addr(bus, slot, func, reg));
	return inb((uint16_t)(PCI_CONF_DATA + (reg & 3)));
}

void pci_write32(int bus, int slot, int func, int reg, uint32_t v)
{
	outl(PCI_CONF_ADDR, conf_addr(bus, slot, func, reg));
	outl(PCI_CONF_DATA, v);
}

void pci_write16(int bus, int slot, int func, int reg, uint16_t v)
{
	outl(PCI_CONF_ADDR, conf_addr(bus, slot, func, reg));
	outw((uint16_t)(PCI_CONF_DATA + (reg & 2)), v);
}

void pci_write8(int bus, int slot, int func, int reg, uint8_t v)
{
	outl(PCI_CONF_ADDR, conf_addr(bus, slot, func, reg));
	outb((uint16_t)(PCI_CONF_DATA + (reg & 3)), v);
}

bool pci_is_virtio(const struct pci_dev *d)
{
	return d->vendor == 0x1af4 && d->device >= 0x1000 &&
	       d->device <= 0x103f && d->revision == 0;
}

/* Size BAR0 the way Linux's __pci_read_base does: decode off, write all
 * ones, read the mask back, restore. Then, if it was unassigned, give it
 * the next free I/O window. */
static void setup_bar0(struct pci_dev *d)
{
	int b = d->bus, s = d->slot, f = d->func;
	uint16_t cmd = pci_read16(b, s, f, PCI_COMMAND);
	uint32_t orig = pci_read32(b, s, f, PCI_BAR0), mask;

	pci_write16(b, s, f, PCI_COMMAND,
		    cmd & ~(PCI_COMMAND_IO | PCI_COMMAND_MEMORY));
	pci_write32(b, s, f, PCI_BAR0, 0xffffffffu);
	mask = pci_read32(b, s, f, PCI_BAR0);
	pci_write32(b, s, f, PCI_BAR0, orig);
	if (!(orig & 1) && !(mask & 1)) {
		/* A memory BAR: legacy virtio has an I/O BAR0; leave it. */
		pci_write16(b, s, f, PCI_COMMAND, cmd);
		d->bar0 = orig;
		return;
	}
	d->io_size = (uint16_t)(~(mask & 0xfffcu) + 1);
	if (d->io_size == 0)
		d->io_size = 4;
	if ((orig & 0xfffcu) == 0) {
		uint16_t size = d->io_size < IO_ASSIGN_STEP ? IO_ASSIGN_STEP :
							       d->io_size;
		uint16_t base = (uint16_t)((next_io + size - 1) & ~(size - 1));

		next_io = (uint16_t)(base + size);
		pci_write32(b, s, f, PCI_BAR0, base | 1u);
		d->bar_assigned = true;
	}
	d->bar0 = pci_read32(b, s, f, PCI_BAR0);
	d->io_base = (uint16_t)(d->bar0 & 0xfffcu);
	pci_write16(b, s, f, PCI_COMMAND,
		    cmd | PCI_COMMAND_IO | PCI_COMMAND_MASTER);
}

void pci_setup_io_bar(struct pci_dev *d)
{
	if (!d->io_base)
		setup_bar0(d);
}

/* On QEMU's i440FX the PIIX3 routes INTA-D of slot s to PIRQ[(s - 1 +
 * pin - 1) & 3] (QEMU's pci_slot_get_pirq, SeaBIOS's
 * piix_pci_slot_get_irq), and PIRQRC[n] says which ISA IRQ that is. This
 * is what the hardware does, so it wins over the interrupt line register:
 * qboot fills that register with a different swizzle (slot 2 reads 11
 * while QEMU raises 10). When the firmware left the PIRQ disabled, route
 * it to IRQ 10/11 like SeaBIOS and mark the line level-triggered in the
 * ELCR, as PCI INTx is. Without a PIIX3 (govm) the line register is the
 * truth: the VMM programs it. */
static void route_irq(struct pci_dev *d)
{
	static const uint8_t pirq_irq[4] = { 10, 10, 11, 11 };
	int pirq = (d->slot - 1 + d->irq_pin - 1) & 3;
	uint8_t r;

	if (pci_read16(0, 1, 0, PCI_VENDOR_ID) != PIIX3_VENDOR ||
	    pci_read16(0, 1, 0, PCI_DEVICE_ID) != PIIX3_DEVICE)
		return;
	r = pci_read8(0, 1, 0, PIIX_PIRQRC + pirq);
	if (r & 0x80) {
		uint8_t irq = pirq_irq[pirq];
		uint16_t port = (uint16_t)(ELCR_PORT + (irq >> 3));

		pci_write8(0, 1, 0, PIIX_PIRQRC + pirq, irq);
		outb(port, (uint8_t)(inb(port) | 1u << (irq & 7)));
		r = irq;
	}
	if ((r & 0x0f) == d->irq_line)
		return;
	d->irq_line = r & 0x0f;
	pci_write8(d->bus, d->slot, d->func, PCI_INTERRUPT_LINE, d->irq_line);
	d->irq_routed = true;
}

static void add(int bus, int slot, int func)
{
	struct pci_dev *d;
	uint32_t id = pci_read32(bus, slot, func, PCI_VENDOR_ID);
	uint32_t cls = pci_read32(bus, slot, func, PCI_REVISION);

	if (ndevs >= PCI_MAX_DEVS)
		return;
	d = &devs[ndevs++];
	d->bus = (uint8_t)bus;
	d->slot = (uint8_t)slot;
	d->func = (uint8_t)func;
	d->vendor = (uint16_t)id;
	d->device = (uint16_t)(id >> 16);
	d->revision = (uint8_t)cls;
	d->class_code = cls >> 8;
	d->header_type = pci_read8(bus, slot, func, PCI_HEADER_TYPE) & 0x7f;
	if (d->header_type != 0)
		return;
	d->subsys_vendor = pci_read16(bus, slot, func, PCI_SUBSYS_VENDOR);
	d->subsys_id = pci_read16(bus, slot, func, PCI_SUBSYS_ID);
	d->irq_line = pci_read8(bus, slot, func, PCI_INTERRUPT_LINE);
	d->irq_pin = pci_read8(bus, slot, func, PCI_INTERRUPT_PIN);
	if (!pci_is_virtio(d))
		return;
	setup_bar0(d);
	d->fw_irq_line = d->irq_line;
	if (d->irq_pin)
		route_irq(d);
}

/* Linux's pci_bus_generic_read_dev_vendor_id: these IDs mean "nothing
 * here" (an empty slot, or a bridge answering for a missing device). */
static bool present(uint32_t id)
{
	return id != 0xffffffffu && id != 0 && id != 0x0000ffffu &&
	       id != 0xffff0000u;
}

int pci_scan(void)
{
	if (ndevs >= 0)
		return ndevs;
	ndevs = 0;
	for (int slot = 0; slot < 32; slot++) {
		int nfunc = 1;

		if (!present(pci_read32(0, slot, 0, PCI_VENDOR_ID)))
			continue;
		if (pci_read8(0, slot, 0, PCI_HEADER_TYPE) & 0x80)
			nfunc = 8;
		for (int f = 0; f < nfunc; f++)
			if (present(pci_read32(0, slot, f, PCI_VENDOR_ID)))
				add(0, slot, f);
	}
	return ndevs;
}

struct pci_dev *pci_get(int i)
{
	if (i < 0 || i >= pci_scan())
		return NULL;
	return &devs[i];
}

struct pci_dev *pci_find_virtio(int type, int n)
{
	for (int i = 0; i < pci_scan(); i++) {
		if (pci_is_virtio(&devs[i]) && devs[i].subsys_id == type &&
		    n-- == 0)
			return &devs[i];
	}
	return NULL;
}
