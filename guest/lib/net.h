/* A tiny IPv4 stack over lib/vnet (CPL3): ARP (answers requests for our
 * address, resolves the peer), ICMP echo (answers requests, counts
 * replies), UDP echo on port 7 (RFC 862) with checksums verified and
 * computed, "quit" on UDP port 9 ends a serve loop, and senders for
 * guest-to-host floods and benchmarks. No fragments, no options, one
 * interface, one peer.
 *
 * Command line: net.ip=10.0.2.15 net.mask=255.255.255.0 net.peer=10.0.2.1
 * (plus the vnet knobs, lib/vnet.h). */
#ifndef LIB_NET_H
#define LIB_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "vnet.h"

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_ARP 0x0806
#define IP_HLEN 20
#define UDP_HLEN 8
#define ICMP_HLEN 8
#define IPPROTO_ICMP 1
#define IPPROTO_UDP 17
#define UDP_PORT_ECHO 7
#define UDP_PORT_DISCARD 9
#define UDP_MAX_PAYLOAD (VNET_MTU - IP_HLEN - UDP_HLEN) /* 1472 */

struct netif;
/* A hook for UDP datagrams to ports the stack does not serve (benchmark
 * counters); returns true when it consumed the datagram. */
typedef bool (*net_udp_fn)(struct netif *nif, uint32_t src, uint16_t sport,
			   uint16_t dport, const uint8_t *data, uint32_t len);

struct netif {
	struct vnet vn;
	uint32_t ip, mask, peer;   /* host byte order */
	uint8_t peer_mac[6];
	bool peer_mac_ok;
	bool quit;                 /* "quit" arrived on UDP port 9 */
	uint16_t ip_id;
	net_udp_fn udp_hook;
	/* Counters: frames in/out, per protocol, and why frames were dropped. */
	unsigned long rx, tx, arp, arp_replies, icmp, icmp_replies, udp,
		udp_other, drops, tx_drops, bad_ip_csum, bad_udp_csum,
		bad_icmp_csum, udp_nocsum, udp_csum_offload, not_ours,
		truncated, fragments;
	uint8_t rx_flags;          /* vnet header flags of the frame in hand */
};

/* net_get opens net device 0 with the command-line settings on first use
 * and returns the one interface, or NULL (printing a fail RESULT for name
 * with reason=). */
struct netif *net_get(const char *name);

/* net_service runs one NAPI poll (up to budget frames) and flushes any
 * replies queued; returns frames handled or -1 when the device broke. */
int net_service(struct netif *nif, int budget);

/* net_resolve sends ARP requests for the peer (every 100 ms) until it
 * answers or the TSC passes deadline; true when its MAC is known. */
bool net_resolve(struct netif *nif, uint64_t deadline);

/* Senders: build one frame in a free TX slot and queue it (no kick: call
 * vnet_tx_flush). They return 0, or -1 when the TX ring is full or the
 * peer MAC is unknown. */
int net_send_udp(struct netif *nif, uint32_t dst, uint16_t sport,
		 uint16_t dport, const void *data, uint32_t len);
/* net_send_udp_fill sends len bytes of payload, byte i = (seq + i) & 0xff
 * after a 4-byte little-endian seq. */
int net_send_udp_fill(struct netif *nif, uint32_t dst, uint16_t sport,
		      uint16_t dport, uint32_t seq, uint32_t len);
int net_send_ping(struct netif *nif, uint32_t dst, uint16_t id,
		  uint16_t seq, uint32_t payload);

/* A sender's pace: when it last kicked a batch out, and the longest wait
 * between two batches (the TX ring full: the device not taking frames). */
struct tx_pace {
	uint64_t last, max_stall; /* TSC */
};

/* net_tx_paced ends one round of a flood loop that queued n frames: with
 * n > 0 it kicks them out (vnet_tx_flush) and records the wait since the
 * previous batch, with none it only relaxes the CPU. */
void net_tx_paced(struct netif *nif, struct tx_pace *p, int n);

/* parse_ipv4 parses dotted quad s into host order; false if malformed. */
bool parse_ipv4(const char *s, uint32_t *ip);
/* net_print_counters prints " rx= tx= icmp= udp= arp= drops= ..." and the
 * driver's counters. */
void net_print_counters(struct netif *nif);

#endif
