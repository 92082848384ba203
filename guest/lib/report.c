#include "report.h"
#include "desc.h"
#include "io.h"
#include "printf.h"
#include "serial.h"

#include <stdarg.h>

static unsigned passed, failed, skipped;
static int exit_override = -1;

static void count(bool cond)
{
	if (cond)
		passed++;
	else
		failed++;
}

/* print_kv prints " " and the formatted key=value pairs (nothing when they
 * are empty), then ends the line. */
static void print_kv(const char *fmt, va_list ap)
{
	static char buf[1024];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);

	if (n > 0) {
		serial_putc(' ');
		serial_write(buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	}
	serial_putc('\n');
}

bool report(const char *name, bool cond, const char *fmt, ...)
{
	va_list ap;

	count(cond);
	printf("RESULT %s %s", name, cond ? "pass" : "fail");
	va_start(ap, fmt);
	print_kv(fmt, ap);
	va_end(ap);
	return cond;
}

void report_skip(const char *name, const char *reason, const char *fmt, ...)
{
	va_list ap;

	report_begin_skip(name, reason);
	va_start(ap, fmt);
	print_kv(fmt, ap);
	va_end(ap);
}

void report_begin_skip(const char *name, const char *reason)
{
	skipped++;
	printf("RESULT %s skip reason=%s", name, reason);
}

void report_begin(const char *name, bool cond)
{
	count(cond);
	printf("RESULT %s %s", name, cond ? "pass" : "fail");
}

void report_end(void)
{
	serial_putc('\n');
}

void print_hex(const void *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = p;
	char buf[64];
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		buf[k++] = digits[b[i] >> 4];
		buf[k++] = digits[b[i] & 15];
		if (k == sizeof(buf)) {
			serial_write(buf, k);
			k = 0;
		}
	}
	serial_write(buf, k);
}

void report_set_exit(int code)
{
	exit_override = code;
}

void summary_and_exit(void)
{
	printf("SUMMARY pass=%u fail=%u skip=%u\n", passed, failed, skipped);
	vm_exit(exit_override >= 0 ? exit_override : failed ? 1 : 0);
}

void vm_exit(int code)
{
	outw(DEBUG_EXIT_PORT, (uint16_t)code);
	/* No debug-exit device: pulse the reset line through the i8042. */
	outb(0x64, 0xfe);
	halt_forever();
}
