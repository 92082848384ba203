/* The disk contents the Go tests and guest/tools/mkpattern.py agree on.
 * Sector s, 8-byte little-endian word w (0..63):
 *   read pattern  ((s << 16) | w) ^ 0x9e3779b97f4a7c15  (written by the host)
 *   write pattern ((s << 16) | w) ^ 0xdeadbeefcafef00d  (written by the guest) */
#ifndef LIB_BLKPATTERN_H
#define LIB_BLKPATTERN_H

#include <stdbool.h>
#include <stdint.h>

#define PATTERN_READ 0x9e3779b97f4a7c15ull
#define PATTERN_WRITE 0xdeadbeefcafef00dull
#define WORDS_PER_SECTOR 64

static inline uint64_t pattern_word(uint64_t key, uint64_t s, uint64_t w)
{
	return ((s << 16) | w) ^ key;
}

static inline void pattern_fill(uint64_t key, uint64_t s0, uint64_t n,
				void *buf)
{
	uint64_t *p = buf;

	for (uint64_t s = 0; s < n; s++)
		for (uint64_t w = 0; w < WORDS_PER_SECTOR; w++)
			*p++ = pattern_word(key, s0 + s, w);
}

/* pattern_check returns the index of the first bad sector, or n. */
static inline uint64_t pattern_check(uint64_t key, uint64_t s0, uint64_t n,
				     const void *buf)
{
	const uint64_t *p = buf;

	for (uint64_t s = 0; s < n; s++)
		for (uint64_t w = 0; w < WORDS_PER_SECTOR; w++)
			if (*p++ != pattern_word(key, s0 + s, w))
				return s;
	return n;
}

#endif
