/* The senders of lib/net.h: IPv4 UDP and ICMP echo frames built in a free
 * TX slot and queued without a kick (vnet_tx_flush kicks), and the pacing of
 * the flood loops. */
#include "net.h"
#include "io.h"
#include "net_priv.h"
#include "string.h"

/* ip_frame starts an IPv4 frame to dst in a TX slot: Ethernet + IP header
 * for payload bytes of proto. */
static uint8_t *ip_frame(struct netif *nif, uint32_t dst, uint8_t proto,
			 uint32_t payload)
{
	uint8_t *f, *ip;

	if (!nif->peer_mac_ok || payload > VNET_MTU - IP_HLEN)
		return 0;
	f = net_tx_frame(nif);
	if (!f)
		return 0;
	net_eth_fill(f, nif->peer_mac, nif->vn.mac, ETH_P_IP);
	ip = f + ETH_HLEN;
	ip[0] = 0x45;
	ip[1] = 0;
	put16(ip + 2, (uint16_t)(IP_HLEN + payload));
	put16(ip + 4, nif->ip_id++);
	put16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = proto;
	put16(ip + 10, 0);
	put32(ip + 12, nif->ip);
	put32(ip + 16, dst);
	put16(ip + 10, csum_fold(csum_add(0, ip, IP_HLEN)));
	return f;
}

/* tx_finish queues a built frame of total bytes, padded with zeroes to
 * Ethernet's 60-byte minimum. */
static int tx_finish(struct netif *nif, uint8_t *f, uint32_t total)
{
	if (total < 60) {
		memset(f + total, 0, 60 - total);
		total = 60;
	}
	if (vnet_tx_commit(&nif->vn, f, total) < 0)
		return -1;
	nif->tx++;
	return 0;
}

static int udp_finish(struct netif *nif, uint8_t *f, uint32_t dst,
		      uint16_t sport, uint16_t dport, uint32_t len)
{
	uint8_t *u = f + ETH_HLEN + IP_HLEN;
	uint32_t total = ETH_HLEN + IP_HLEN + UDP_HLEN + len;
	uint16_t c;

	put16(u, sport);
	put16(u + 2, dport);
	put16(u + 4, (uint16_t)(UDP_HLEN + len));
	put16(u + 6, 0);
	c = udp_csum(nif->ip, dst, u, UDP_HLEN + len);
	put16(u + 6, c ? c : 0xffff);
	return tx_finish(nif, f, total);
}

int net_send_udp(struct netif *nif, uint32_t dst, uint16_t sport,
		 uint16_t dport, const void *data, uint32_t len)
{
	uint8_t *f = ip_frame(nif, dst, IPPROTO_UDP, UDP_HLEN + len);

	if (!f || len > UDP_MAX_PAYLOAD)
		return -1;
	memcpy(f + ETH_HLEN + IP_HLEN + UDP_HLEN, data, len);
	return udp_finish(nif, f, dst, sport, dport, len);
}

int net_send_udp_fill(struct netif *nif, uint32_t dst, uint16_t sport,
		      uint16_t dport, uint32_t seq, uint32_t len)
{
	uint8_t *f = ip_frame(nif, dst, IPPROTO_UDP, UDP_HLEN + len), *d;

	if (!f || len > UDP_MAX_PAYLOAD)
		return -1;
	d = f + ETH_HLEN + IP_HLEN + UDP_HLEN;
	for (uint32_t i = 0; i < len; i++)
		d[i] = (uint8_t)(seq + i);
	if (len >= 4) {
		d[0] = (uint8_t)seq;
		d[1] = (uint8_t)(seq >> 8);
		d[2] = (uint8_t)(seq >> 16);
		d[3] = (uint8_t)(seq >> 24);
	}
	return udp_finish(nif, f, dst, sport, dport, len);
}

int net_send_ping(struct netif *nif, uint32_t dst, uint16_t id,
		  uint16_t seq, uint32_t payload)
{
	uint8_t *f = ip_frame(nif, dst, IPPROTO_ICMP, ICMP_HLEN + payload), *ic;
	uint32_t total = ETH_HLEN + IP_HLEN + ICMP_HLEN + payload;

	if (!f)
		return -1;
	ic = f + ETH_HLEN + IP_HLEN;
	ic[0] = 8;
	ic[1] = 0;
	put16(ic + 2, 0);
	put16(ic + 4, id);
	put16(ic + 6, seq);
	for (uint32_t i = 0; i < payload; i++)
		ic[ICMP_HLEN + i] = (uint8_t)i;
	put16(ic + 2, csum_fold(csum_add(0, ic, ICMP_HLEN + payload)));
	return tx_finish(nif, f, total);
}

void net_tx_paced(struct netif *nif, struct tx_pace *p, int n)
{
	uint64_t now;

	if (!n) {
		cpu_relax();
		return;
	}
	now = rdtsc();
	vnet_tx_flush(&nif->vn);
	if (now - p->last > p->max_stall)
		p->max_stall = now - p->last;
	p->last = now;
}
