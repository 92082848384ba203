#include "net.h"
#include "net_priv.h"
#include "cmdline.h"
#include "io.h"
#include "printf.h"
#include "report.h"
#include "string.h"
#include "tsc.h"

static struct netif the_if;
static int if_state; /* 0 unopened, 1 open, -1 failed */

static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

bool parse_ipv4(const char *s, uint32_t *ip)
{
	uint32_t v = 0;

	for (int part = 0; part < 4; part++) {
		uint32_t x = 0;
		int digits = 0;

		while (*s >= '0' && *s <= '9' && digits < 4) {
			x = x * 10 + (uint32_t)(*s++ - '0');
			digits++;
		}
		if (!digits || x > 255 || (part < 3 && *s++ != '.'))
			return false;
		v = v << 8 | x;
	}
	if (*s)
		return false;
	*ip = v;
	return true;
}

static bool ip_opt(const char *key, const char *def, uint32_t *ip)
{
	char v[32];

	if (!cmdline_get(key, v, sizeof(v)))
		return parse_ipv4(def, ip);
	return parse_ipv4(v, ip);
}

struct netif *net_get(const char *name)
{
	struct netif *nif = &the_if;
	struct vnet_opts o;
	int e;

	if (if_state == 1)
		return nif;
	if (if_state < 0) {
		report(name, false, "reason=no_net");
		return 0;
	}
	if (!ip_opt("net.ip", "10.0.2.15", &nif->ip) ||
	    !ip_opt("net.mask", "255.255.255.0", &nif->mask) ||
	    !ip_opt("net.peer", "10.0.2.1", &nif->peer)) {
		if_state = -1;
		report(name, false, "reason=bad_address");
		return 0;
	}
	vnet_opts_from_cmdline(&o);
	e = vnet_open(&nif->vn, 0, &o);
	if (e < 0) {
		if_state = -1;
		report(name, false, "reason=%s", e == -1 ? "no_device" :
		       e == -3 ? "bad_mac" : "no_queue");
		return 0;
	}
	if_state = 1;
	return nif;
}

uint8_t *net_tx_frame(struct netif *nif)
{
	uint8_t *f = vnet_tx_buf(&nif->vn);

	if (!f)
		nif->tx_drops++;
	return f;
}

static void tx_commit(struct netif *nif, uint8_t *f, uint32_t len)
{
	if (vnet_tx_commit(&nif->vn, f, len) < 0)
		nif->tx_drops++;
	else
		nif->tx++;
}

void net_eth_fill(uint8_t *f, const uint8_t *dst, const uint8_t *src,
		  uint16_t type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	put16(f + 12, type);
}

/* ARP (RFC 826) for Ethernet/IPv4 only. */
static void arp_send(struct netif *nif, uint16_t op, const uint8_t *tha,
		     uint32_t tpa, const uint8_t *dst)
{
	uint8_t *f = net_tx_frame(nif), *a;

	if (!f)
		return;
	net_eth_fill(f, dst, nif->vn.mac, ETH_P_ARP);
	a = f + ETH_HLEN;
	put16(a, 1);
	put16(a + 2, ETH_P_IP);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, op);
	memcpy(a + 8, nif->vn.mac, 6);
	put32(a + 14, nif->ip);
	memcpy(a + 18, tha, 6);
	put32(a + 24, tpa);
	memset(a + 28, 0, 60 - ETH_HLEN - 28); /* pad to the 60-byte minimum */
	tx_commit(nif, f, 60);
}

static void arp_input(struct netif *nif, const uint8_t *f, uint32_t len)
{
	const uint8_t *a = f + ETH_HLEN;
	uint32_t spa, tpa;
	uint16_t op;

	if (len < ETH_HLEN + 28 || get16(a) != 1 || get16(a + 2) != ETH_P_IP ||
	    a[4] != 6 || a[5] != 4) {
		nif->drops++;
		return;
	}
	nif->arp++;
	op = get16(a + 6);
	spa = get32(a + 14);
	tpa = get32(a + 24);
	if (spa == nif->peer && tpa == nif->ip) {
		memcpy(nif->peer_mac, a + 8, 6);
		nif->peer_mac_ok = true;
	}
	if (op == 1 && tpa == nif->ip)
		arp_send(nif, 2, a + 8, spa, a + 8);
	else if (op == 2)
		nif->arp_replies++;
}

/* ip_reply turns the received IPv4 frame f (len bytes, IP total ip_len)
 * into a reply in a TX slot: addresses swapped, fresh header checksum. The
 * caller fixes the payload. Returns the slot or NULL. */
static uint8_t *ip_reply(struct netif *nif, const uint8_t *f, uint32_t ip_len)
{
	uint8_t *r = net_tx_frame(nif), *ip;

	if (!r)
		return 0;
	memcpy(r, f + 6, 6);
	memcpy(r + 6, nif->vn.mac, 6);
	put16(r + 12, ETH_P_IP);
	memcpy(r + ETH_HLEN, f + ETH_HLEN, ip_len);
	ip = r + ETH_HLEN;
	ip[0] = 0x45; /* options, if any, are not echoed: see ip_input */
	put16(ip + 4, nif->ip_id++);
	put16(ip + 6, 0);
	ip[8] = 64;
	memcpy(ip + 16, f + ETH_HLEN + 12, 4);
	put32(ip + 12, nif->ip);
	put16(ip + 10, 0);
	put16(ip + 10, csum_fold(csum_add(0, ip, IP_HLEN)));
	return r;
}

static void icmp_input(struct netif *nif, const uint8_t *f, const uint8_t *ip,
		       uint32_t ip_len)
{
	const uint8_t *ic = ip + IP_HLEN;
	uint32_t n = ip_len - IP_HLEN;
	uint8_t *r;

	if (n < ICMP_HLEN || csum_fold(csum_add(0, ic, n)) != 0) {
		nif->bad_icmp_csum++;
		nif->drops++;
		return;
	}
	nif->icmp++;
	if (ic[0] == 0) {
		nif->icmp_replies++;
		return;
	}
	if (ic[0] != 8)
		return;
	r = ip_reply(nif, f, ip_len);
	if (!r)
		return;
	r[ETH_HLEN + IP_HLEN] = 0; /* echo reply, same id/seq/data */
	put16(r + ETH_HLEN + IP_HLEN + 2, 0);
	put16(r + ETH_HLEN + IP_HLEN + 2,
	      csum_fold(csum_add(0, r + ETH_HLEN + IP_HLEN, n)));
	tx_commit(nif, r, ETH_HLEN + ip_len);
}

static void udp_input(struct netif *nif, const uint8_t *f, const uint8_t *ip,
		      uint32_t ip_len)
{
	const uint8_t *u = ip + IP_HLEN;
	uint32_t n = ip_len - IP_HLEN, src = get32(ip + 12);
	uint16_t sport, dport, ulen;
	uint8_t *r;

	if (n < UDP_HLEN || (ulen = get16(u + 4)) < UDP_HLEN || ulen > n) {
		nif->truncated++;
		nif->drops++;
		return;
	}
	if (get16(u + 6) == 0)
		nif->udp_nocsum++; /* allowed over IPv4 (RFC 768) */
	else if (nif->rx_flags & (VIRTIO_NET_HDR_F_NEEDS_CSUM |
				  VIRTIO_NET_HDR_F_DATA_VALID))
		/* GUEST_CSUM: the field holds only the pseudo-header sum
		 * (NEEDS_CSUM), or the host checked it (DATA_VALID). */
		nif->udp_csum_offload++;
	else if (udp_csum(src, get32(ip + 16), u, ulen) != 0) {
		nif->bad_udp_csum++;
		nif->drops++;
		return;
	}
	nif->udp++;
	sport = get16(u);
	dport = get16(u + 2);
	if (dport == UDP_PORT_DISCARD) {
		if (ulen - UDP_HLEN >= 4 && memcmp(u + UDP_HLEN, "quit", 4) == 0)
			nif->quit = true;
		return;
	}
	if (dport != UDP_PORT_ECHO) {
		if (!nif->udp_hook ||
		    !nif->udp_hook(nif, src, sport, dport, u + UDP_HLEN,
				   ulen - UDP_HLEN))
			nif->udp_other++;
		return;
	}
	r = ip_reply(nif, f, IP_HLEN + ulen);
	if (!r)
		return;
	put16(r + ETH_HLEN + 2, (uint16_t)(IP_HLEN + ulen));
	put16(r + ETH_HLEN + 10, 0);
	put16(r + ETH_HLEN + 10, csum_fold(csum_add(0, r + ETH_HLEN, IP_HLEN)));
	u = r + ETH_HLEN + IP_HLEN;
	put16(r + ETH_HLEN + IP_HLEN, dport);
	put16(r + ETH_HLEN + IP_HLEN + 2, sport);
	put16(r + ETH_HLEN + IP_HLEN + 6, 0);
	{
		uint16_t c = udp_csum(nif->ip, src, u, ulen);

		put16(r + ETH_HLEN + IP_HLEN + 6, c ? c : 0xffff);
	}
	tx_commit(nif, r, ETH_HLEN + IP_HLEN + ulen);
}

static void ip_input(struct netif *nif, const uint8_t *f, uint32_t len)
{
	const uint8_t *ip = f + ETH_HLEN;
	uint32_t tot;

	if (len < ETH_HLEN + IP_HLEN || (ip[0] >> 4) != 4) {
		nif->drops++;
		return;
	}
	/* Options would shift the payload; we never send them and the
	 * peer (a Linux host) does not either. */
	if ((ip[0] & 0xf) != 5 || csum_fold(csum_add(0, ip, IP_HLEN)) != 0) {
		nif->bad_ip_csum++;
		nif->drops++;
		return;
	}
	tot = get16(ip + 2);
	if (tot < IP_HLEN || tot > len - ETH_HLEN) {
		nif->truncated++;
		nif->drops++;
		return;
	}
	if (get16(ip + 6) & 0x3fff) { /* MF or an offset: a fragment */
		nif->fragments++;
		nif->drops++;
		return;
	}
	if (get32(ip + 16) != nif->ip) {
		nif->not_ours++;
		nif->drops++;
		return;
	}
	if (ip[9] == IPPROTO_ICMP)
		icmp_input(nif, f, ip, tot);
	else if (ip[9] == IPPROTO_UDP)
		udp_input(nif, f, ip, tot);
	else
		nif->drops++;
}

static void eth_input(void *ctx, uint8_t *f, uint32_t len, uint8_t flags)
{
	struct netif *nif = ctx;

	nif->rx_flags = flags;
	nif->rx++;
	if (len < ETH_HLEN) {
		nif->drops++;
		return;
	}
	if (memcmp(f, nif->vn.mac, 6) != 0 && memcmp(f, bcast, 6) != 0) {
		nif->not_ours++;
		nif->drops++;
		return;
	}
	switch (get16(f + 12)) {
	case ETH_P_ARP:
		arp_input(nif, f, len);
		break;
	case ETH_P_IP:
		ip_input(nif, f, len);
		break;
	default:
		nif->drops++; /* IPv6 router solicitations and the like */
	}
}

int net_service(struct netif *nif, int budget)
{
	int n = vnet_poll(&nif->vn, budget, eth_input, nif);

	vnet_tx_flush(&nif->vn);
	return n;
}

bool net_resolve(struct netif *nif, uint64_t deadline)
{
	static const uint8_t zero[6];
	uint64_t next = 0;

	while (!nif->peer_mac_ok) {
		uint64_t now = rdtsc();

		if (now > deadline)
			return false;
		if (now >= next) {
			arp_send(nif, 1, zero, nif->peer, bcast);
			vnet_tx_flush(&nif->vn);
			next = tsc_after(100);
		}
		if (net_service(nif, 64) < 0)
			return false;
		cpu_relax();
	}
	return true;
}

void net_print_counters(struct netif *nif)
{
	printf(" rx=%lu tx=%lu icmp=%lu udp=%lu arp=%lu drops=%lu "
	       "icmp_replies=%lu arp_replies=%lu udp_other=%lu tx_drops=%lu "
	       "bad_ip_csum=%lu bad_udp_csum=%lu bad_icmp_csum=%lu "
	       "udp_nocsum=%lu udp_csum_offload=%lu not_ours=%lu "
	       "truncated=%lu fragments=%lu",
	       nif->rx, nif->tx, nif->icmp, nif->udp, nif->arp, nif->drops,
	       nif->icmp_replies, nif->arp_replies, nif->udp_other,
	       nif->tx_drops, nif->bad_ip_csum, nif->bad_udp_csum,
	       nif->bad_icmp_csum, nif->udp_nocsum, nif->udp_csum_offload,
	       nif->not_ours,
	       nif->truncated, nif->fragments);
	vnet_print_counters(&nif->vn);
}
