#include "crc32.h"

static uint32_t table[256];
static int table_ready;

static void make_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		table[i] = c;
	}
	table_ready = 1;
}

uint32_t crc32_ieee(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t c = 0xffffffffu;

	if (!table_ready)
		make_table();
	while (n--)
		c = table[(c ^ *b++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}
