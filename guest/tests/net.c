/* virtio-net tests over lib/net (CPL3): net-echo serves ARP/ICMP/UDP echo
 * for the host, net-flood floods the host while still answering it (both
 * directions at once: the kvmtool ping -f hang), net-bench measures TX and
 * RX packet rates against a host-side UDP sink/source. None is in "all":
 * they need a VMM with a tap and a host that talks to the guest.
 *
 * Knobs: net.serve_ms= (30000) net.flood=udp|icmp net.flood_count=
 * (100000) net.flood_ms= (30000) (a UDP "quit" also ends the flood)
 * net.flood_dst= (net.peer) net.flood_port= (9) net.flood_size= (UDP payload / ICMP data, 18)
 * bench.ms= (2000) bench.sink_port= (5001) bench.ctl_port= (5002), plus
 * lib/net.h and lib/vnet.h ones. */
#include "../lib/cmdline.h"
#include "../lib/io.h"
#include "../lib/net.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"
#include "../lib/tsc.h"

#define BUDGET 64
/* TX slots the flood leaves free for replies, so answering pings never
 * loses to our own flood. */
#define TX_RESERVE 32
#define FLOOD_BATCH 32

/* serve answers the host until quit or deadline. Returns false if the
 * device broke. */
static bool serve(struct netif *nif, uint64_t deadline)
{
	while (!nif->quit && rdtsc() < deadline) {
		if (vnet_rx_ready(&nif->vn)) {
			if (net_service(nif, BUDGET) < 0)
				return false;
		} else {
			cpu_relax();
		}
	}
	return true;
}

static void echo_run(void)
{
	struct netif *nif = net_get("net-echo");
	uint64_t ms, t0, stall;
	bool ok;

	if (!nif)
		return;
	ms = (uint64_t)cmdline_get_int("net.serve_ms", 30000);
	nif->quit = false;
	/* net.stall_ms: a driver-side stall for govm's watchdog test. The
	 * driver posted its RX buffers at init and now neither polls nor
	 * refills for this long: frames from the host fill the buffers and
	 * then wait in the tap (RX starvation), lost nothing. */
	stall = (uint64_t)cmdline_get_int("net.stall_ms", 0);
	if (stall) {
		uint64_t end = tsc_after(stall);

		while (rdtsc() < end)
			cpu_relax();
	}
	t0 = rdtsc();
	ok = serve(nif, tsc_after(ms));
	report_begin("net-echo", ok && vnet_ok(&nif->vn));
	printf(" end=%s serve_us=%llu", !ok ? "broken" : nif->quit ? "quit" :
	       "timeout", (unsigned long long)tsc_to_us(rdtsc() - t0));
	net_print_counters(nif);
	vnet_print_features(&nif->vn);
	report_end();
}


static uint32_t opt_ip(const char *key, uint32_t def)
{
	char v[32];
	uint32_t ip;

	if (cmdline_get(key, v, sizeof(v)) && parse_ipv4(v, &ip))
		return ip;
	return def;
}

static void flood_run(void)
{
	struct netif *nif = net_get("net-flood");
	char kind[8] = "udp";
	uint64_t count, deadline, t0, us;
	uint32_t dst, size, seq = 0;
	uint16_t port;
	unsigned long sent = 0, full_waits = 0, rx0, icmp0;
	struct tx_pace pace = { 0 };
	uint64_t drain0, drain_us;
	unsigned long reaped0;
	uint32_t undrained;
	bool icmp, ok = true;

	if (!nif)
		return;
	cmdline_get("net.flood", kind, sizeof(kind));
	icmp = strcmp(kind, "icmp") == 0;
	count = (uint64_t)cmdline_get_int("net.flood_count", 100000);
	deadline = tsc_after((uint64_t)cmdline_get_int("net.flood_ms", 30000));
	dst = opt_ip("net.flood_dst", nif->peer);
	port = (uint16_t)cmdline_get_int("net.flood_port", UDP_PORT_DISCARD);
	size = (uint32_t)cmdline_get_int("net.flood_size", 18);
	if (size > UDP_MAX_PAYLOAD)
		size = UDP_MAX_PAYLOAD;
	if (!net_resolve(nif, tsc_after(5000))) {
		report("net-flood", false, "reason=arp_timeout");
		return;
	}
	rx0 = nif->rx;
	icmp0 = nif->icmp;
	t0 = pace.last = rdtsc();
	/* "quit" from the host ends the flood early (then net-echo serves
	 * until the next one): a soak floods for exactly as long as its
	 * ping runs, whatever the rates. */
	nif->quit = false;
	while (sent < count && rdtsc() < deadline && !nif->quit) {
		int k = 0;

		/* Both directions in one loop: answer what arrived, then
		 * fill the TX ring, leaving room for the answers. */
		if (vnet_rx_ready(&nif->vn) && net_service(nif, BUDGET) < 0) {
			ok = false;
			break;
		}
		while (k < FLOOD_BATCH && sent < count &&
		       vnet_tx_room(&nif->vn) > TX_RESERVE) {
			int e = icmp ? net_send_ping(nif, dst, 0x6f76,
						     (uint16_t)seq, size) :
				       net_send_udp_fill(nif, dst, 0x6f76, port,
							 seq, size);
			if (e < 0)
				break;
			seq++;
			sent++;
			k++;
		}
		if (!k)
			full_waits++;
		net_tx_paced(nif, &pace, k);
	}
	us = tsc_to_us(rdtsc() - t0);
	/* Let the device finish what is queued (bounded), still answering
	 * the host meanwhile: ping -f must not see the guest go quiet. */
	drain0 = rdtsc();
	vnet_tx_reap(&nif->vn);
	undrained = (uint32_t)(nif->vn.tx->num - nif->vn.tx->num_free);
	reaped0 = nif->vn.tx_reaped;
	for (uint64_t end = tsc_after(2000);
	     nif->vn.tx_reaped - reaped0 < undrained && rdtsc() < end;) {
		vnet_tx_reap(&nif->vn);
		if (vnet_rx_ready(&nif->vn) && net_service(nif, BUDGET) < 0)
			break;
	}
	drain_us = tsc_to_us(rdtsc() - drain0);
	/* What was queued when the flood ended and is still not sent. */
	undrained = nif->vn.tx_reaped - reaped0 >= undrained ? 0 :
		    undrained - (uint32_t)(nif->vn.tx_reaped - reaped0);
	/* Bounded by count and time: reaching the deadline first is not a
	 * failure (the host may be slow); a stall shows in max_stall_us and
	 * a broken ring fails. */
	ok = ok && sent > 0 && vnet_ok(&nif->vn);
	report_begin("net-flood", ok);
	printf(" kind=%s sent=%lu want=%llu us=%llu pps=%llu full_waits=%lu "
	       "rx_during=%lu icmp_during=%lu size=%u max_stall_us=%llu end=%s "
	       "drain_us=%llu undrained=%u",
	       kind, sent,
	       (unsigned long long)count, (unsigned long long)us,
	       (unsigned long long)(us ? sent * 1000000ull / us : 0),
	       full_waits, nif->rx - rx0, nif->icmp - icmp0, size,
	       (unsigned long long)tsc_to_us(pace.max_stall),
	       vnet_broken(&nif->vn) ? "broken" : sent == count ? "count" :
	       nif->quit ? "quit" : "deadline", (unsigned long long)drain_us,
	       undrained);
	net_print_counters(nif);
	vnet_print_features(&nif->vn);
	report_end();
}

DEFINE_TEST(net_flood, .name = "net-flood", .run = flood_run, .in_all = false);

/* net-bench ---------------------------------------------------------- */

static struct {
	uint16_t port;
	uint32_t size;   /* only datagrams of this size count */
	char end[16];    /* "end SIZE": the source is done with this phase */
	unsigned long pkts, bytes;
	uint64_t first, last;
	bool ended;
} rxb;

static bool bench_udp(struct netif *nif, uint32_t src, uint16_t sport,
		      uint16_t dport, const uint8_t *data, uint32_t len)
{
	(void)nif;
	(void)src;
	(void)sport;
	if (dport == rxb.port + 2) { /* end marker from the source */
		if (len == strlen(rxb.end) && memcmp(data, rxb.end, len) == 0)
			rxb.ended = true;
		return true;
	}
	if (dport != rxb.port || len != rxb.size)
		return false; /* a late datagram of an earlier phase */
	rxb.last = rdtsc();
	if (!rxb.pkts)
		rxb.first = rxb.last;
	rxb.pkts++;
	rxb.bytes += len;
	return true;
}

static void counters(struct netif *nif, unsigned long *kicks,
		     unsigned long *irqs)
{
	struct virtio_counters c;

	virtio_counters(nif->vn.vd, &c);
	*kicks = c.kicks;
	*irqs = c.interrupts;
}

static void bench_tx(struct netif *nif, const char *name, uint32_t size,
		     uint64_t ms, uint16_t port)
{
	unsigned long k0, i0, k1, i1, sent = 0, full0 = nif->vn.tx_full;
	uint64_t t0, end, us;
	bool ok = true;

	for (uint64_t lim = tsc_after(2000);
	     nif->vn.tx->num_free < nif->vn.tx->num && rdtsc() < lim;)
		vnet_tx_reap(&nif->vn);
	counters(nif, &k0, &i0);
	t0 = rdtsc();
	end = tsc_after(ms);
	while (rdtsc() < end) {
		int k = 0;

		if (vnet_rx_ready(&nif->vn) && net_service(nif, BUDGET) < 0) {
			ok = false;
			break;
		}
		while (k < FLOOD_BATCH && vnet_tx_room(&nif->vn) > TX_RESERVE &&
		       net_send_udp_fill(nif, nif->peer, 0x6f76, port,
					 (uint32_t)sent, size) == 0) {
			sent++;
			k++;
		}
		if (k)
			vnet_tx_flush(&nif->vn);
		else
			cpu_relax();
	}
	/* Count to the last completion: the device has sent them all. */
	for (uint64_t lim = tsc_after(2000);
	     nif->vn.tx->num_free < nif->vn.tx->num && rdtsc() < lim;)
		vnet_tx_reap(&nif->vn);
	us = tsc_to_us(rdtsc() - t0);
	counters(nif, &k1, &i1);
	report_begin(name, ok && sent > 0 && vnet_ok(&nif->vn));
	printf(" dir=tx size=%u pkts=%lu us=%llu pps=%llu kicks_per_1k=%lu "
	       "irqs_per_1k=%lu tx_full=%lu", size, sent,
	       (unsigned long long)us,
	       (unsigned long long)(us ? sent * 1000000ull / us : 0),
	       sent ? (k1 - k0) * 1000 / sent : 0,
	       sent ? (i1 - i0) * 1000 / sent : 0, nif->vn.tx_full - full0);
	report_end();
}

static void bench_rx(struct netif *nif, const char *name, uint32_t size,
		     uint64_t ms, uint16_t port, uint16_t ctl)
{
	char req[48];
	unsigned long k0, i0, k1, i1;
	uint64_t us, stop, quiet;
	bool ok = true;
	int len;

	memset(&rxb, 0, sizeof(rxb));
	rxb.port = port;
	rxb.size = size;
	snprintf(rxb.end, sizeof(rxb.end), "end %u", size);
	nif->udp_hook = bench_udp;
	counters(nif, &k0, &i0);
	len = snprintf(req, sizeof(req), "rx %u %llu %u", size,
		       (unsigned long long)ms, port);
	if (net_send_udp(nif, nif->peer, port, ctl, req, (uint32_t)len) < 0)
		ok = false;
	vnet_tx_flush(&nif->vn);
	/* Until the source says it is done, or 3 s with nothing, or 1 s of
	 * silence after traffic, or ms + 5 s in all. */
	stop = tsc_after(ms + 5000);
	quiet = tsc_after(3000);
	while (ok && !rxb.ended && rdtsc() < stop && rdtsc() < quiet) {
		unsigned long before = rxb.pkts;

		if (vnet_rx_ready(&nif->vn)) {
			if (net_service(nif, BUDGET) < 0)
				ok = false;
		} else {
			cpu_relax();
		}
		if (rxb.pkts != before)
			quiet = tsc_after(1000);
	}
	nif->udp_hook = 0;
	counters(nif, &k1, &i1);
	us = rxb.pkts > 1 ? tsc_to_us(rxb.last - rxb.first) : 0;
	report_begin(name, ok && rxb.pkts > 0 && vnet_ok(&nif->vn));
	printf(" dir=rx size=%u pkts=%lu us=%llu pps=%llu kicks_per_1k=%lu "
	       "irqs_per_1k=%lu end=%d", size, rxb.pkts,
	       (unsigned long long)us,
	       (unsigned long long)(us ? (rxb.pkts - 1) * 1000000ull / us : 0),
	       rxb.pkts ? (k1 - k0) * 1000 / rxb.pkts : 0,
	       rxb.pkts ? (i1 - i0) * 1000 / rxb.pkts : 0, rxb.ended);
	report_end();
}

static void bench_run(void)
{
	struct netif *nif = net_get("net-bench");
	uint64_t ms;
	uint16_t sink, ctl;

	if (!nif)
		return;
	ms = (uint64_t)cmdline_get_int("bench.ms", 2000);
	sink = (uint16_t)cmdline_get_int("bench.sink_port", 5001);
	ctl = (uint16_t)cmdline_get_int("bench.ctl_port", 5002);
	if (!net_resolve(nif, tsc_after(5000))) {
		report("net-bench", false, "reason=arp_timeout");
		return;
	}
	/* 64-byte frames (60 without FCS: 18 bytes of UDP payload) and
	 * 1500-byte IP packets (1472 bytes of payload). */
	bench_tx(nif, "net-bench-tx-64", 18, ms, sink);
	bench_tx(nif, "net-bench-tx-1500", UDP_MAX_PAYLOAD, ms, sink);
	bench_rx(nif, "net-bench-rx-64", 18, ms, sink, ctl);
	bench_rx(nif, "net-bench-rx-1500", UDP_MAX_PAYLOAD, ms, sink, ctl);
	report_begin("net-bench", vnet_ok(&nif->vn));
	net_print_counters(nif);
	vnet_print_features(&nif->vn);
	report_end();
}

DEFINE_TEST(net_bench, .name = "net-bench", .run = bench_run, .in_all = false);

/* Last (link order is run order): test=net-flood,net-echo or
 * test=net-bench,net-echo measure first, then serve until "quit". */
DEFINE_TEST(net_echo, .name = "net-echo", .run = echo_run, .in_all = false);
