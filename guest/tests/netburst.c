/* net-burst: the missed-notification test, both directions. A lost kick
 * or interrupt does not lose data under continuous traffic: the next
 * frame's notification carries the stuck ones along. It shows when traffic
 * stops: a burst whose tail sits in the ring until the next burst starts.
 * So the sender blasts net.burst_bytes (1 MiB) of UDP, notes when it is
 * done, sleeps net.burst_gap_ms (1000), and repeats net.bursts (6) times;
 * the receiver notes when each burst has fully arrived. The Go test
 * (cmd/govm TestNetBursts) compares the two per burst: a tail arriving
 * about a gap late is a lost notification.
 *
 * net-burst-tx: guest -> host UDP port net.burst_port (5010), payload 1472
 *   bytes, first 4 bytes = burst << 24 | index (little-endian). Reports
 *   send_us= (first frame queued to last frame queued and kicked, per
 *   burst) and stall_us= (longest wait for TX ring space, per burst).
 * net-burst-rx: then asks the host ("go" to port + 2) for the same bursts
 *   to its port + 1 and reports recv_us= (first to last datagram of each
 *   burst) and got= (datagrams per burst). */
#include "../lib/cmdline.h"
#include "../lib/io.h"
#include "../lib/net.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"
#include "../lib/tsc.h"

#define MAX_BURSTS 16
#define BUDGET 64
#define TX_RESERVE 32
/* A burst that waits this long for ring space has stalled: the device
 * stopped taking frames (a lost kick), whatever the host's load. */
#define STALL_MS 500

static struct {
	uint32_t bursts, per_burst, port;
	uint64_t gap_ms;
	/* RX side. */
	uint32_t got[MAX_BURSTS];
	uint64_t first[MAX_BURSTS], done[MAX_BURSTS];
	uint32_t complete, stray;
} bs;

static void print_list(const char *key, const uint64_t *v, uint32_t n)
{
	printf(" %s=", key);
	for (uint32_t i = 0; i < n; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)v[i]);
}

/* serve_until answers the host (ARP, pings, the RX bursts) until t. */
static bool serve_until(struct netif *nif, uint64_t t)
{
	while (rdtsc() < t) {
		if (vnet_rx_ready(&nif->vn)) {
			if (net_service(nif, BUDGET) < 0)
				return false;
		} else {
			cpu_relax();
		}
	}
	return true;
}

static void burst_tx(struct netif *nif)
{
	uint64_t send_us[MAX_BURSTS] = { 0 }, stall_us[MAX_BURSTS] = { 0 };
	uint32_t short_bursts = 0;
	bool ok = true;

	for (uint32_t k = 0; k < bs.bursts && ok; k++) {
		uint64_t t0 = rdtsc(), last = t0, stall = 0;
		uint64_t give_up = tsc_after(bs.gap_ms + 5000);
		uint32_t sent = 0;

		while (sent < bs.per_burst && rdtsc() < give_up) {
			int n = 0;

			if (vnet_rx_ready(&nif->vn) &&
			    net_service(nif, BUDGET) < 0) {
				ok = false;
				break;
			}
			while (n < 32 && sent < bs.per_burst &&
			       vnet_tx_room(&nif->vn) > TX_RESERVE &&
			       net_send_udp_fill(nif, nif->peer, 0x6f76,
						 (uint16_t)bs.port,
						 k << 24 | sent,
						 UDP_MAX_PAYLOAD) == 0) {
				sent++;
				n++;
			}
			if (n) {
				uint64_t now = rdtsc();

				vnet_tx_flush(&nif->vn);
				if (now - last > stall)
					stall = now - last;
				last = now;
			} else {
				cpu_relax();
			}
		}
		send_us[k] = tsc_to_us(rdtsc() - t0);
		stall_us[k] = tsc_to_us(stall);
		if (sent < bs.per_burst)
			short_bursts++;
		if (stall_us[k] >= STALL_MS * 1000ull)
			ok = false;
		ok = serve_until(nif, tsc_after(bs.gap_ms)) && ok;
	}
	report_begin("net-burst-tx", ok && !short_bursts && vnet_ok(&nif->vn));
	printf(" bursts=%u per_burst=%u gap_ms=%llu short_bursts=%u", bs.bursts,
	       bs.per_burst, (unsigned long long)bs.gap_ms, short_bursts);
	print_list("send_us", send_us, bs.bursts);
	print_list("stall_us", stall_us, bs.bursts);
	net_print_counters(nif);
	vnet_print_features(&nif->vn);
	report_end();
}

static bool burst_udp(struct netif *nif, uint32_t src, uint16_t sport,
		      uint16_t dport, const uint8_t *d, uint32_t len)
{
	uint32_t seq, k;

	(void)nif;
	(void)src;
	(void)sport;
	if (dport != bs.port + 1)
		return false;
	if (len < 4) {
		bs.stray++;
		return true;
	}
	seq = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 |
	      (uint32_t)d[3] << 24;
	k = seq >> 24;
	if (k >= bs.bursts || (seq & 0xffffff) >= bs.per_burst) {
		bs.stray++;
		return true;
	}
	if (!bs.got[k])
		bs.first[k] = rdtsc();
	if (++bs.got[k] == bs.per_burst) {
		bs.done[k] = rdtsc();
		bs.complete++;
	}
	return true;
}

static void burst_rx(struct netif *nif)
{
	uint64_t recv_us[MAX_BURSTS] = { 0 }, got[MAX_BURSTS];
	uint64_t end = tsc_after(bs.bursts * (bs.gap_ms + 2000) + 5000);
	uint64_t next_go = 0;
	bool ok = true;

	memset(bs.got, 0, sizeof(bs.got));
	bs.complete = bs.stray = 0;
	nif->udp_hook = burst_udp;
	while (ok && bs.complete < bs.bursts && rdtsc() < end) {
		/* Ask until the first datagram shows up ("go" may be lost
		 * while the host is not listening yet). */
		if (!bs.got[0] && rdtsc() >= next_go) {
			net_send_udp(nif, nif->peer, (uint16_t)(bs.port + 1),
				     (uint16_t)(bs.port + 2), "go", 2);
			vnet_tx_flush(&nif->vn);
			next_go = tsc_after(500);
		}
		if (vnet_rx_ready(&nif->vn)) {
			if (net_service(nif, BUDGET) < 0)
				ok = false;
		} else {
			cpu_relax();
		}
	}
	nif->udp_hook = 0;
	for (uint32_t k = 0; k < bs.bursts; k++) {
		got[k] = bs.got[k];
		if (bs.got[k] == bs.per_burst)
			recv_us[k] = tsc_to_us(bs.done[k] - bs.first[k]);
	}
	report_begin("net-burst-rx", ok && bs.complete == bs.bursts &&
				     vnet_ok(&nif->vn));
	printf(" bursts=%u per_burst=%u complete=%u stray=%u", bs.bursts,
	       bs.per_burst, bs.complete, bs.stray);
	print_list("recv_us", recv_us, bs.bursts);
	print_list("got", got, bs.bursts);
	net_print_counters(nif);
	report_end();
}

static void run(void)
{
	struct netif *nif = net_get("net-burst");
	uint64_t bytes;

	if (!nif)
		return;
	bs.bursts = (uint32_t)cmdline_get_int("net.bursts", 6);
	if (bs.bursts > MAX_BURSTS)
		bs.bursts = MAX_BURSTS;
	bytes = (uint64_t)cmdline_get_int("net.burst_bytes", 1 << 20);
	bs.per_burst = (uint32_t)((bytes + UDP_MAX_PAYLOAD - 1) / UDP_MAX_PAYLOAD);
	bs.gap_ms = (uint64_t)cmdline_get_int("net.burst_gap_ms", 1000);
	bs.port = (uint32_t)cmdline_get_int("net.burst_port", 5010);
	if (!net_resolve(nif, tsc_after(5000))) {
		report("net-burst", false, "reason=arp_timeout");
		return;
	}
	burst_tx(nif);
	burst_rx(nif);
}

DEFINE_TEST(net_burst, .name = "net-burst", .run = run, .in_all = false);
