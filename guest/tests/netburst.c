/* net-burst: the missed-notification test, both directions. A lost kick
 * or interrupt does not lose data under continuous traffic: the next
 * frame's notification carries the stuck ones along. It shows when traffic
 * stops: a burst whose tail sits in the ring until something else moves.
 * So the sender blasts net.burst_bytes (1 MiB) of UDP, notes when it is
 * done, sleeps net.burst_gap_ms (1000), and repeats net.bursts (6) times.
 *
 * The verdict must not be a speed: on a loaded host (we saw load 24 on 2
 * cores) a device goroutine can stall for over a second and then go on by
 * itself. What no slow host produces is a burst that never completes while
 * nothing else happens. So after each burst the sender waits, sending
 * nothing, until the receiver has it all (up to net.burst_wait_ms, 10 s):
 * a lost notification has nothing to rescue it and shows as a burst that
 * does not complete; a slow device only as a long wait.
 *
 * net-burst-tx: guest -> host UDP port net.burst_port (5010), payload 1472
 *   bytes, first 4 bytes = burst << 24 | index (little-endian). Per burst:
 *   send_us= (first frame queued to the last queued and kicked), done_us=
 *   (to the device having used every frame: the TX ring empty again),
 *   stall_us= (longest wait for ring space); lost= bursts not done in
 *   time. The Go test checks the host saw each burst arrive within its
 *   done_us (+ half a gap: clocks differ).
 * net-burst-rx: then asks the host ("go" to port + 2) for the same bursts
 *   to its port + 1, answers "ack K" (to port + 2) when burst K is
 *   complete; the host sends the next burst only after the ack and the
 *   gap. recv_us= (first to last datagram of each burst), got=;
 *   tx_unsent= TX frames (the acks) the device had not used wait_ms after
 *   the last burst: the guest reports only once its last ack is sent. */
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

static struct {
	uint32_t bursts, per_burst, port;
	uint64_t gap_ms, wait_ms;
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

/* tx_idle: every queued TX frame was used by the device. */
static bool tx_idle(struct netif *nif)
{
	vnet_tx_reap(&nif->vn);
	return nif->vn.tx->num_free == nif->vn.tx->num;
}

static void burst_tx(struct netif *nif)
{
	uint64_t send_us[MAX_BURSTS] = { 0 }, done_us[MAX_BURSTS] = { 0 };
	uint64_t stall_us[MAX_BURSTS] = { 0 };
	uint32_t short_bursts = 0, lost = 0;
	bool ok = true;

	for (uint32_t k = 0; k < bs.bursts && ok; k++) {
		uint64_t t0 = rdtsc();
		struct tx_pace pace = { .last = t0 };
		uint64_t give_up = tsc_after(bs.wait_ms);
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
			net_tx_paced(nif, &pace, n);
		}
		send_us[k] = tsc_to_us(rdtsc() - t0);
		stall_us[k] = tsc_to_us(pace.max_stall);
		if (sent < bs.per_burst) {
			/* The ring stayed full: the device stopped taking
			 * frames and no kick of ours woke it. */
			short_bursts++;
			ok = false;
			break;
		}
		/* No kick from here on: the device must finish the burst on
		 * what it was told. RX is still served (as a driver would),
		 * which is silent unless the host talks to us. */
		give_up = tsc_after(bs.wait_ms);
		while (!tx_idle(nif) && rdtsc() < give_up) {
			if (vnet_rx_ready(&nif->vn) &&
			    net_service(nif, BUDGET) < 0) {
				ok = false;
				break;
			}
			cpu_relax();
		}
		done_us[k] = tsc_to_us(rdtsc() - t0);
		if (!tx_idle(nif)) {
			lost++;
			ok = false;
			break;
		}
		ok = serve_until(nif, tsc_after(bs.gap_ms)) && ok;
	}
	report_begin("net-burst-tx", ok && vnet_ok(&nif->vn));
	printf(" bursts=%u per_burst=%u gap_ms=%llu wait_ms=%llu "
	       "short_bursts=%u lost=%u", bs.bursts, bs.per_burst,
	       (unsigned long long)bs.gap_ms, (unsigned long long)bs.wait_ms,
	       short_bursts, lost);
	print_list("send_us", send_us, bs.bursts);
	print_list("done_us", done_us, bs.bursts);
	print_list("stall_us", stall_us, bs.bursts);
	net_print_counters(nif);
	vnet_print_features(&nif->vn);
	report_end();
}

static bool burst_udp(struct netif *nif, uint32_t src, uint16_t sport,
		      uint16_t dport, const uint8_t *d, uint32_t len)
{
	uint32_t seq, k;

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
		char ack[16];
		int n = snprintf(ack, sizeof(ack), "ack %u", k);

		bs.done[k] = rdtsc();
		bs.complete++;
		/* Queued here, kicked by net_service's flush. */
		net_send_udp(nif, nif->peer, (uint16_t)(bs.port + 1),
			     (uint16_t)(bs.port + 2), ack, (uint32_t)n);
	}
	return true;
}

static void burst_rx(struct netif *nif)
{
	uint64_t recv_us[MAX_BURSTS] = { 0 }, got[MAX_BURSTS];
	uint64_t end = tsc_after(bs.bursts * (bs.gap_ms + bs.wait_ms) + 5000);
	uint64_t wait_cyc = tsc_after(bs.wait_ms) - rdtsc();
	uint32_t lost = 0, tx_unsent;
	uint64_t next_go = 0, wait_end;
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
		/* A burst begun and not complete after wait_ms: the host
		 * sends nothing more until we ack, so nothing will rescue
		 * it (a lost interrupt or RX kick). */
		for (uint32_t k = 0; k < bs.bursts; k++)
			if (bs.got[k] && bs.got[k] < bs.per_burst &&
			    rdtsc() - bs.first[k] > wait_cyc) {
				lost++;
				ok = false;
			}
	}
	nif->udp_hook = 0;
	/* The last ack was queued and kicked, not sent: the device sends it
	 * when its TX goroutine runs, and a loaded host runs it late. A
	 * guest that reports and powers off first takes the ack with it (the
	 * host then waited 10 s for "ack 5" from a guest that had passed and
	 * exited). So, as after each TX burst, wait without kicking until
	 * the device has used every TX frame; one it never uses is a lost
	 * kick, and fails. */
	wait_end = tsc_after(bs.wait_ms);
	while (ok && !tx_idle(nif) && rdtsc() < wait_end) {
		if (vnet_rx_ready(&nif->vn) && net_service(nif, BUDGET) < 0)
			ok = false;
		cpu_relax();
	}
	tx_unsent = (uint32_t)(nif->vn.tx->num - nif->vn.tx->num_free);
	for (uint32_t k = 0; k < bs.bursts; k++) {
		got[k] = bs.got[k];
		if (bs.got[k] == bs.per_burst)
			recv_us[k] = tsc_to_us(bs.done[k] - bs.first[k]);
	}
	report_begin("net-burst-rx", ok && bs.complete == bs.bursts &&
				     !tx_unsent && vnet_ok(&nif->vn));
	printf(" bursts=%u per_burst=%u complete=%u stray=%u lost=%u "
	       "tx_unsent=%u", bs.bursts, bs.per_burst, bs.complete, bs.stray,
	       lost, tx_unsent);
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
	bs.wait_ms = (uint64_t)cmdline_get_int("net.burst_wait_ms", 10000);
	if (!net_resolve(nif, tsc_after(5000))) {
		report("net-burst", false, "reason=arp_timeout");
		return;
	}
	burst_tx(nif);
	burst_rx(nif);
}

DEFINE_TEST(net_burst, .name = "net-burst", .run = run, .in_all = false);
