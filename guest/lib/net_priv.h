/* Internals shared by lib/net.c (interface, receive path, ARP) and
 * lib/net_tx.c (the senders): byte order, RFC 1071 checksums and TX slot
 * helpers. Not for tests: they use lib/net.h. */
#ifndef LIB_NET_PRIV_H
#define LIB_NET_PRIV_H

#include <stdint.h>

#include "net.h"

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* RFC 1071 one's-complement sum, big-endian 16-bit words, odd tail
 * padded with zero. */
static inline uint32_t csum_add(uint32_t sum, const uint8_t *p, uint32_t len)
{
	uint32_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static inline uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* UDP checksum with the IPv4 pseudo-header (RFC 768). */
static inline uint16_t udp_csum(uint32_t src, uint32_t dst, const uint8_t *udp,
			 uint32_t len)
{
	uint32_t sum = (src >> 16) + (src & 0xffff) + (dst >> 16) +
		       (dst & 0xffff) + IPPROTO_UDP + len;

	return csum_fold(csum_add(sum, udp, len));
}

/* net_tx_frame gets a TX slot or counts a drop. */
uint8_t *net_tx_frame(struct netif *nif);
/* net_eth_fill writes an Ethernet header (dst, src, type) at f. */
void net_eth_fill(uint8_t *f, const uint8_t *dst, const uint8_t *src,
		  uint16_t type);

#endif
