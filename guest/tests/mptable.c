/* mptable: find and validate the MP floating pointer and configuration
 * table (Intel MultiProcessor Specification 1.4, chapter 4), count what
 * Linux's arch/x86/kernel/mpparse.c would count. */
#include "../lib/io.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"

#include <stdint.h>

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

/* MP spec 4.1: the floating pointer is 16 bytes ("_MP_", length in
 * 16-byte units at byte 8, checksum over the whole structure), on a
 * 16-byte boundary in the first KiB of the EBDA, the last KiB of base
 * memory, or the BIOS ROM area 0xF0000-0xFFFFF. */
static const uint8_t *scan(uintptr_t base, size_t len)
{
	for (uintptr_t p = base & ~15ul; p + 16 <= base + len; p += 16) {
		const uint8_t *m = (const uint8_t *)p;

		if (memcmp(m, "_MP_", 4) == 0 && m[8] == 1 &&
		    sum(m, 16) == 0)
			return m;
	}
	return NULL;
}

static const uint8_t *find_mpf(const char **where)
{
	uint16_t ebda_seg = *(volatile uint16_t *)phys(0x40e);   /* BDA */
	uint16_t base_kb = *(volatile uint16_t *)phys(0x413);
	const uint8_t *m;

	if (ebda_seg && (m = scan((uintptr_t)ebda_seg << 4, 1024))) {
		*where = "ebda";
		return m;
	}
	if (base_kb >= 1 && base_kb <= 640 &&
	    (m = scan(((uintptr_t)base_kb - 1) * 1024, 1024))) {
		*where = "basemem";
		return m;
	}
	if ((m = scan(0x9fc00, 1024))) {
		*where = "basemem";
		return m;
	}
	if ((m = scan(0xf0000, 0x10000))) {
		*where = "bios";
		return m;
	}
	return NULL;
}

static void run(void)
{
	const char *where = "none";
	const uint8_t *mpf = find_mpf(&where);
	const uint8_t *cfg;
	uint32_t cfg_addr;
	uint16_t base_len, count, ext_len;
	unsigned cpus = 0, ioapics = 0, irqs = 0, lints = 0, buses = 0;
	unsigned entries = 0;
	size_t off;

	if (!mpf) {
		report("mptable", false, "reason=no_floating_pointer");
		return;
	}
	cfg_addr = (uint32_t)mpf[4] | (uint32_t)mpf[5] << 8 |
		   (uint32_t)mpf[6] << 16 | (uint32_t)mpf[7] << 24;
	if (cfg_addr == 0 || cfg_addr >= 0xfffff000u) {
		report("mptable", false, "where=%s reason=no_config_table "
		       "feature1=%u", where, mpf[11]);
		return;
	}
	/* MP spec 4.2: "PCMP", base length at 4, checksum at 7, entry
	 * count at 0x22, extended length at 0x28, extended checksum at
	 * 0x2a, entries from 0x2c. */
	cfg = (const uint8_t *)(uintptr_t)cfg_addr;
	base_len = (uint16_t)(cfg[4] | cfg[5] << 8);
	count = (uint16_t)(cfg[0x22] | cfg[0x23] << 8);
	ext_len = (uint16_t)(cfg[0x28] | cfg[0x29] << 8);
	if (memcmp(cfg, "PCMP", 4) != 0 || base_len < 0x2c) {
		report("mptable", false, "where=%s reason=bad_signature", where);
		return;
	}
	if (sum(cfg, base_len) != 0) {
		report("mptable", false, "where=%s reason=bad_checksum", where);
		return;
	}
	if (ext_len && (uint8_t)(sum(cfg + base_len, ext_len) + cfg[0x2a])) {
		report("mptable", false, "where=%s reason=bad_ext_checksum",
		       where);
		return;
	}
	/* Walk the entries by the table length, as Linux's smp_read_mpc()
	 * does: qboot leaves the entry count field 0. */
	off = 0x2c;
	while (off < base_len) {
		uint8_t type = cfg[off];
		size_t len = type == 0 ? 20 : 8;

		if (type > 4) {
			report("mptable", false, "where=%s reason=bad_entry "
			       "type=%u offset=0x%zx", where, type, off);
			return;
		}
		if (off + len > base_len) {
			report("mptable", false, "where=%s reason=truncated "
			       "offset=0x%zx", where, off);
			return;
		}
		switch (type) {
		case 0: /* processor; flags bit 0: enabled */
			cpus += cfg[off + 3] & 1;
			break;
		case 1:
			buses++;
			break;
		case 2: /* I/O APIC; flags bit 0: usable */
			ioapics += cfg[off + 3] & 1;
			break;
		case 3:
			irqs++;
			break;
		case 4:
			lints++;
			break;
		}
		entries++;
		off += len;
	}
	report("mptable", true, "cpus=%u ioapics=%u irqs=%u buses=%u lints=%u "
	       "entries=%u count_field=%u where=%s addr=%p config=0x%x "
	       "spec=1.%u", cpus, ioapics, irqs, buses, lints, entries, count,
	       where, mpf, cfg_addr, mpf[9]);
}

DEFINE_TEST(mptable, .name = "mptable", .run = run, .in_all = true);
