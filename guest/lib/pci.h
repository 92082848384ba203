/* PCI bus 0 over configuration mechanism #1 (ports 0xCF8/0xCFC, PCI Local
 * Bus spec 3.0, 3.2.2.3.2), scanned the way Linux's pci_scan_slot does:
 * function 0 of every slot, functions 1-7 only when function 0 says it is
 * multi-function. */
#ifndef LIB_PCI_H
#define LIB_PCI_H

#include <stdbool.h>
#include <stdint.h>

#define PCI_MAX_DEVS 32

#define PCI_VENDOR_ID 0x00
#define PCI_DEVICE_ID 0x02
#define PCI_COMMAND 0x04
#define PCI_REVISION 0x08
#define PCI_CLASS_PROG 0x09
#define PCI_HEADER_TYPE 0x0e
#define PCI_BAR0 0x10
#define PCI_SUBSYS_VENDOR 0x2c
#define PCI_SUBSYS_ID 0x2e
#define PCI_INTERRUPT_LINE 0x3c
#define PCI_INTERRUPT_PIN 0x3d

#define PCI_COMMAND_IO 0x1
#define PCI_COMMAND_MEMORY 0x2
#define PCI_COMMAND_MASTER 0x4

struct pci_dev {
	uint8_t bus, slot, func;
	uint16_t vendor, device, subsys_vendor, subsys_id;
	uint8_t revision, header_type;
	uint32_t class_code;     /* class << 16 | subclass << 8 | prog-if */
	uint32_t bar0;           /* as read (after assignment, if any) */
	uint16_t io_base, io_size; /* BAR0 when it is an I/O BAR */
	uint8_t irq_line, irq_pin;
	uint8_t fw_irq_line;     /* the line register as the firmware left it */
	bool bar_assigned;       /* we programmed BAR0 (firmware left it 0) */
	bool irq_routed;         /* we rewrote the line from the PIIX3 PIRQs */
};

uint32_t pci_read32(int bus, int slot, int func, int reg);
uint16_t pci_read16(int bus, int slot, int func, int reg);
uint8_t pci_read8(int bus, int slot, int func, int reg);
void pci_write32(int bus, int slot, int func, int reg, uint32_t v);
void pci_write16(int bus, int slot, int func, int reg, uint16_t v);
void pci_write8(int bus, int slot, int func, int reg, uint8_t v);

/* pci_scan enumerates bus 0 once (later calls return the cached count).
 * Virtio devices (pci_is_virtio) also get BAR0 assigned when the firmware
 * left it at 0 (qboot does), I/O decode and bus mastering enabled, and an
 * interrupt line routed through the PIIX3 PIRQ registers when none is set. */
int pci_scan(void);
struct pci_dev *pci_get(int i);

/* pci_setup_io_bar sizes BAR0 of a non-virtio function (pci_scan does
 * it for virtio ones), assigns it when the firmware left it at 0, and
 * enables I/O decoding, as pci_enable_device does for a Linux driver. */
void pci_setup_io_bar(struct pci_dev *d);

/* Linux's legacy virtio-pci match (virtio_pci_legacy_probe): vendor
 * 0x1af4, device 0x1000-0x103f, revision 0. */
bool pci_is_virtio(const struct pci_dev *d);

/* pci_find_virtio returns the n-th (0-based) legacy virtio device whose
 * subsystem device ID (the virtio device type) is type, or NULL. */
struct pci_dev *pci_find_virtio(int type, int n);

#endif
