/* rude: a guest that writes garbage everywhere it can reach. It writes to
 * every I/O port 0..0xffff (byte, and word/dword where aligned), reads
 * every port, and reads and writes every configuration offset of every
 * PCI function (byte, word and dword); then it puts its own devices back
 * (the PCI headers it saved, the UART) and proves the rest of the machine
 * still works: disk 0 re-initialises and reads its pattern back. The VMM
 * must neither panic nor hang, and must let the guest end cleanly; the Go
 * test also bounds its log.
 *
 * Skipped, because writing them ends the VM or breaks the guest itself,
 * not the VMM: the debug-exit port (0x501-0x502), the i8042 command port
 * (0x64: 0xfe is a reset), pvpanic (0x505), and the guest's own
 * interrupt controller (PICs 0x20-0x21 and 0xa0-0xa1, ELCR 0x4d0-0x4d1).
 * The PCI pvpanic device's (1b36:0011) register window is skipped too:
 * a write there is the guest reporting a panic, which ends the VM.
 *
 *   rude.value=N   the garbage byte (default 0xa5; a dword is 4 copies) */
#include "blkio.h"
#include "../lib/alloc.h"
#include "../lib/blkpattern.h"
#include "../lib/cmdline.h"
#include "../lib/io.h"
#include "../lib/pci.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/serial.h"
#include "../lib/test.h"
#include "../lib/tsc.h"

#define CHECK_SECTORS 8

/* The PCI pvpanic device's I/O window [pvpanic_lo, pvpanic_hi), if any. */
static uint32_t pvpanic_lo, pvpanic_hi;

static void find_pvpanic(int nfn)
{
	for (int i = 0; i < nfn; i++) {
		struct pci_dev *d = pci_get(i);
		uint32_t bar;

		if (d->vendor != 0x1b36 || d->device != 0x0011)
			continue;
		bar = pci_read32(d->bus, d->slot, d->func, PCI_BAR0);
		d->bar0 = bar; /* pci_scan reads BAR0 of virtio functions only */
		if (bar & 1) {
			pvpanic_lo = bar & 0xfffcu;
			pvpanic_hi = pvpanic_lo + 4;
		}
	}
}

static bool skip_port(uint32_t p)
{
	return (p >= pvpanic_lo && p < pvpanic_hi) ||
	       (p >= 0x501 && p <= 0x502) || p == 0x64 || p == 0x505 ||
	       p == 0x20 || p == 0x21 || p == 0xa0 || p == 0xa1 ||
	       p == 0x4d0 || p == 0x4d1;
}

/* A word or dword access covers ports p..p+n-1: skip it if any is. */
static bool skip_range(uint32_t p, int n)
{
	for (int i = 0; i < n; i++)
		if (skip_port(p + (uint32_t)i))
			return true;
	return false;
}

static bool read_ok(struct vblk *b)
{
	uintptr_t mark = alloc_mark();
	uint8_t *buf = alloc_zeroed(CHECK_SECTORS * SECTOR_SIZE, 4096);
	struct io_job j;
	bool ok;

	ok = buf && io_job_init(&j, b, VIRTIO_BLK_T_IN, 0, CHECK_SECTORS, buf,
				CHECK_SECTORS, 1) &&
	     io_run(&j, 1, 10000) &&
	     pattern_check(PATTERN_READ, 0, CHECK_SECTORS, buf) == CHECK_SECTORS;
	alloc_release(mark);
	return ok;
}

/* Every offset of one function's 256-byte configuration space, at every
 * width, is read and written; the dwords read before are written back
 * afterwards (BAR, command, interrupt line: what a driver re-programs). */
static unsigned long rude_config(const struct pci_dev *d, uint8_t v)
{
	uint32_t saved[64];
	uint32_t v32 = 0x01010101u * v;
	unsigned long n = 0;
	volatile uint32_t sink = 0;

	for (int r = 0; r < 64; r++)
		saved[r] = pci_read32(d->bus, d->slot, d->func, r * 4);
	for (int off = 0; off < 256; off++) {
		sink += pci_read8(d->bus, d->slot, d->func, off);
		pci_write8(d->bus, d->slot, d->func, off, v);
		n += 2;
		if (off % 2 == 0) {
			sink += pci_read16(d->bus, d->slot, d->func, off);
			pci_write16(d->bus, d->slot, d->func, off, (uint16_t)v32);
			n += 2;
		}
		if (off % 4 == 0) {
			sink += pci_read32(d->bus, d->slot, d->func, off);
			pci_write32(d->bus, d->slot, d->func, off, v32);
			n += 2;
		}
	}
	/* Header first-to-last, like a driver setting up: BARs before the
	 * command register that enables decoding them. */
	for (int r = 1; r < 64; r++)
		if (r != 1)
			pci_write32(d->bus, d->slot, d->func, r * 4, saved[r]);
	pci_write32(d->bus, d->slot, d->func, 4, saved[1]);
	(void)sink;
	return n;
}

static void run(void)
{
	uint8_t v = (uint8_t)cmdline_get_int("rude.value", 0xa5);
	uint32_t v32 = 0x01010101u * v;
	unsigned long writes = 0, reads = 0, skipped = 0, cfg = 0;
	volatile uint32_t sink = 0;
	int nfn = pci_scan(), same = 0;
	struct vblk_opts o;
	struct vblk b;
	uint64_t t0;

	/* Calibrate the TSC (PIT channel 2, port 0x61) while those are
	 * sane: the I/O timeouts below need it. */
	tsc_khz();
	t0 = rdtsc();
	find_pvpanic(nfn);

	for (uint32_t p = 0; p <= 0xffff; p++) {
		if (skip_port(p)) {
			skipped++;
		} else {
			outb((uint16_t)p, v);
			writes++;
		}
		if (p % 2 == 0 && p + 1 <= 0xffff && !skip_range(p, 2)) {
			outw((uint16_t)p, (uint16_t)v32);
			writes++;
		}
		if (p % 4 == 0 && p + 3 <= 0xffff && !skip_range(p, 4)) {
			outl((uint16_t)p, v32);
			writes++;
		}
	}
	for (uint32_t p = 0; p <= 0xffff; p++) {
		sink += inb((uint16_t)p);
		reads++;
		if (p % 4 == 0 && p + 3 <= 0xffff) {
			sink += inl((uint16_t)p);
			reads++;
		}
	}
	for (int i = 0; i < nfn; i++)
		cfg += rude_config(pci_get(i), v);

	/* The guest's own console took garbage too (divisor, line control,
	 * bytes on the line): set it up again and start a fresh line. */
	serial_init();
	printf("\nrude: %lu port writes, %lu reads, %lu config accesses\n",
	       writes, reads, cfg);
	for (int i = 0; i < nfn; i++) {
		struct pci_dev *d = pci_get(i);
		same += pci_read16(d->bus, d->slot, d->func, PCI_VENDOR_ID) == d->vendor &&
			pci_read32(d->bus, d->slot, d->func, PCI_BAR0) == d->bar0;
	}
	report("rude-pci", nfn > 0 && same == nfn, "functions=%d restored=%d config_accesses=%lu",
	       nfn, same, cfg);
	vblk_opts_from_cmdline(&o);
	if (!blk_open(&b, 0, &o, "rude-disk"))
		return;
	report("rude-disk", read_ok(&b), "port_writes=%lu port_reads=%lu skipped=%lu ms=%llu",
	       writes, reads, skipped,
	       (unsigned long long)(tsc_to_us(rdtsc() - t0) / 1000));
	(void)sink;
}

DEFINE_TEST(rude, .name = "rude", .run = run);
