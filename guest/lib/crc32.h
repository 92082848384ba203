#ifndef LIB_CRC32_H
#define LIB_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* crc32_ieee is CRC-32 with the IEEE 802.3 polynomial (reflected
 * 0xedb88320, init and final xor 0xffffffff): the value Go's
 * hash/crc32.ChecksumIEEE returns. Run it at CPL3: it is a byte loop. */
uint32_t crc32_ieee(const void *p, size_t n);

#endif
