/* CI smoke-test helpers (not in `all`): the console lines and exit paths
 * govm's boot smoke-test support must recognise (e2e smoke tests).
 *
 *   splat    prints, for each kind in splat.kinds= (comma list), the first
 *            line of that Linux splat with a printk timestamp, alternating
 *            "\r\n" and "\n" line ends, then the SUMMARY.
 *   panic    prints a Linux panic ("Kernel panic - not syncing: ...", a
 *            trace, the end marker), then panic.after=reset (default:
 *            what panic=1 reboot=k does), spin (a hung panicked kernel),
 *            or exit (debug-exit value 0, as if nothing happened).
 *   pvpanic  finds QEMU's pvpanic PCI device (1b36:0011), reports its
 *            capability register, writes PVPANIC_PANICKED like Linux's
 *            drivers/misc/pvpanic (pvpanic_send_event), then spins: only
 *            the VMM can end the run. pvpanic.line=1 prints a panic line
 *            first, as Linux does.
 *   marker   prints a fake "Linux version" banner, waits marker.ms, prints
 *            "Run /init as init process", waits marker.ms, prints
 *            marker.text= (default GOVM-READY), then the SUMMARY.
 *   spew     prints numbered lines of 64 bytes without end (spew.kb=N:
 *            N KiB, then the SUMMARY): a guest whose console outruns
 *            whoever reads govm's stdout.
 *   halt     prints Linux's "reboot: System halted" and stops the CPU with
 *            interrupts off (cli; hlt at CPL0), as Linux without ACPI does
 *            for poweroff and halt (machine_halt): nothing can wake it,
 *            and KVM makes no exit for it; only the VMM can notice.
 *   exec     the host half of `govm run --exec`: decodes govm.exec=HEX as
 *            guest/linux/init does, runs it with a tiny shell
 *            (echo WORDS, true, false, exit N; ';' separates), writes the
 *            status byte to the debug-exit port as init does through
 *            /dev/port, then resets through the i8042. */
#include "../lib/cmdline.h"
#include "../lib/desc.h"
#include "../lib/io.h"
#include "../lib/pci.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/string.h"
#include "../lib/test.h"
#include "../lib/tsc.h"

static const struct {
	const char *kind, *line;
} splat_lines[] = {
	{ "panic", "Kernel panic - not syncing: govm smoke test" },
	{ "bug", "BUG: kernel NULL pointer dereference, address: 0000000000000008" },
	{ "oops", "Oops: 0002 [#1] PREEMPT SMP NOPTI" },
	{ "warn", "WARNING: CPU: 0 PID: 1 at kernel/smoke.c:42 smoke_init+0x10/0x20" },
	{ "kasan", "BUG: KASAN: slab-out-of-bounds in smoke_oob+0x1b/0x30" },
	{ "ubsan", "UBSAN: array-index-out-of-bounds in kernel/smoke.c:7:9" },
	{ "lockdep", "WARNING: possible circular locking dependency detected" },
	{ "hung", "INFO: task smoke:1 blocked for more than 120 seconds." },
	{ "softlockup", "watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [smoke:1]" },
	{ "rcu", "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:" },
};

static unsigned stamp;

/* kprint prints one line the way printk does with CONFIG_PRINTK_TIME. */
static void kprint(const char *msg, bool crlf)
{
	stamp++;
	printf("[%5u.%06u] %s%s", stamp / 4, (stamp % 4) * 250000, msg,
	       crlf ? "\r\n" : "\n");
}

static void spin(void)
{
	for (;;)
		cpu_relax();
}

static void run_splat(void)
{
	char kinds[256] = "";
	unsigned printed = 0;

	cmdline_get("splat.kinds", kinds, sizeof(kinds));
	kprint("smoke: printing splats", false);
	for (size_t i = 0; i < sizeof(splat_lines) / sizeof(splat_lines[0]); i++) {
		if (!list_contains(kinds, splat_lines[i].kind))
			continue;
		kprint(splat_lines[i].line, printed % 2 == 0);
		kprint("Call Trace:", false);
		printed++;
	}
	report("splat", printed > 0, "printed=%u", printed);
	summary_and_exit();
}

static void run_panic(void)
{
	char after[16] = "reset";

	cmdline_get("panic.after", after, sizeof(after));
	kprint("smoke: about to panic", false);
	kprint("Kernel panic - not syncing: govm smoke test", true);
	kprint("CPU: 0 PID: 1 Comm: smoke Not tainted 6.1.0-govm #1", true);
	kprint("Call Trace:", true);
	kprint(" <TASK>", true);
	kprint("---[ end Kernel panic - not syncing: govm smoke test ]---", true);
	if (strcmp(after, "spin") == 0)
		spin();
	if (strcmp(after, "exit") == 0)
		vm_exit(0);
	outb(0x64, 0xfe); /* reboot=k */
	spin();
}

/* include/uapi/misc/pvpanic.h */
#define PVPANIC_PANICKED (1 << 0)
#define PVPANIC_CRASH_LOADED (1 << 1)

static void run_pvpanic(void)
{
	struct pci_dev *d = NULL;
	int n = pci_scan();

	for (int i = 0; i < n; i++) {
		struct pci_dev *p = pci_get(i);

		if (p->vendor == 0x1b36 && p->device == 0x0011)
			d = p;
	}
	if (!d) {
		report("pvpanic", false, "found=0");
		summary_and_exit();
	}
	pci_setup_io_bar(d);
	/* pvpanic-pci.c reads the register for the events it may send. */
	uint8_t caps = inb(d->io_base);
	bool ok = d->io_base && (caps & PVPANIC_PANICKED);

	report("pvpanic", ok, "found=1 slot=%u io_base=0x%x caps=0x%x class=0x%06x",
	       d->slot, d->io_base, caps, d->class_code);
	if (!ok)
		summary_and_exit();
	/* Linux prints its panic line before the notifiers run; only with
	 * pvpanic.line=1 here, so that by default nothing but the device can
	 * tell the VMM about this panic. */
	if (cmdline_get_int("pvpanic.line", 0))
		kprint("Kernel panic - not syncing: govm smoke test (pvpanic)", false);
	outb(d->io_base, PVPANIC_PANICKED);
	spin();
}

static void wait_ms(long ms)
{
	uint64_t end = tsc_after((uint64_t)ms);

	while (rdtsc() < end)
		cpu_relax();
}

static void run_marker(void)
{
	char text[64] = "GOVM-READY";
	long ms = cmdline_get_int("marker.ms", 300);

	cmdline_get("marker.text", text, sizeof(text));
	kprint("Linux version 0.0.0-govm-smoke (fake banner for phase timing)", false);
	wait_ms(ms);
	kprint("Run /init as init process", false);
	wait_ms(ms);
	printf("%s\n", text);
	report("marker", true, "ms=%ld", ms);
	summary_and_exit();
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* sh runs one command of the tiny shell and returns its status. */
static int sh(char *cmd)
{
	while (*cmd == ' ')
		cmd++;
	size_t n = strlen(cmd);
	while (n && cmd[n - 1] == ' ')
		cmd[--n] = '\0';
	if (n == 0 || strcmp(cmd, "true") == 0)
		return 0;
	if (strcmp(cmd, "false") == 0)
		return 1;
	if (strncmp(cmd, "echo ", 5) == 0 || strcmp(cmd, "echo") == 0) {
		printf("%s\n", cmd[4] ? cmd + 5 : "");
		return 0;
	}
	if (strncmp(cmd, "exit ", 5) == 0) {
		long v = 0;
		for (char *p = cmd + 5; *p >= '0' && *p <= '9'; p++)
			v = v * 10 + (*p - '0');
		return (int)(v & 0xff);
	}
	printf("sh: %s: not found\n", cmd);
	return 127;
}

static void run_exec(void)
{
	char hex[512], cmd[256];
	size_t n = 0;
	int status = 0;

	if (!cmdline_get("govm.exec", hex, sizeof(hex))) {
		report("exec", false, "govm.exec=missing");
		summary_and_exit();
	}
	for (size_t i = 0; hex[i] && hex[i + 1] && n + 1 < sizeof(cmd); i += 2) {
		int hi = hexval(hex[i]), lo = hexval(hex[i + 1]);
		if (hi < 0 || lo < 0)
			break;
		cmd[n++] = (char)(hi << 4 | lo);
	}
	cmd[n] = '\0';
	printf("govm exec: %s\n", cmd);
	for (char *p = cmd, *semi;; p = semi + 1) {
		semi = strchr(p, ';');
		if (semi)
			*semi = '\0';
		if (strncmp(p, " exit ", 6) == 0 || strncmp(p, "exit ", 5) == 0) {
			status = sh(p);
			break;
		}
		status = sh(p);
		if (!semi)
			break;
	}
	/* What init does: one byte to port 0x501 through /dev/port. */
	outb(DEBUG_EXIT_PORT, (uint8_t)status);
	outb(0x64, 0xfe);
	spin();
}

static void run_spew(void)
{
	long kb = cmdline_get_int("spew.kb", -1);

	for (long i = 0; kb < 0 || i < kb * 16; i++)
		printf("spew %08lx ...................................................\n", i);
	report("spew", true, "kb=%ld", kb);
	summary_and_exit();
}

static void run_halt(void)
{
	printf("reboot: System halted\n");
	halt_forever();
}

DEFINE_TEST(splat, .name = "splat", .run = run_splat);
DEFINE_TEST(panic, .name = "panic", .run = run_panic);
DEFINE_TEST(pvpanic, .name = "pvpanic", .run = run_pvpanic);
DEFINE_TEST(marker, .name = "marker", .run = run_marker);
DEFINE_TEST(exec, .name = "exec", .run = run_exec);
DEFINE_TEST(halt, .name = "halt", .run = run_halt);
DEFINE_TEST(spew, .name = "spew", .run = run_spew);
