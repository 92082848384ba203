/* Start-up at CPL0 and the CPL3 test runner.
 *
 * CPL0 (emulated on our hosts, ~1 M instructions/s): serial, hello line,
 * command line, IDT/TSS, PIC, the tests' cpl0 hooks, then IRETQ to CPL3.
 * CPL3 (native): run the selected tests, print SUMMARY, exit. */
#include "../lib/bootparam.h"
#include "../lib/cmdline.h"
#include "../lib/desc.h"
#include "../lib/io.h"
#include "../lib/pic.h"
#include "../lib/printf.h"
#include "../lib/report.h"
#include "../lib/serial.h"
#include "../lib/string.h"
#include "../lib/test.h"

const void *boot_params;
uint64_t tsc_hello, tsc_user;

extern const struct test __tests_start[], __tests_end[];
extern char kstack_top[], ustack_top[];

static char selection[256];
static bool select_all;

static bool selected(const struct test *t)
{
	if (select_all)
		return t->in_all;
	return list_contains(selection, t->name);
}

static void select_tests(void)
{
	if (!cmdline_get("test", selection, sizeof(selection)) ||
	    !selection[0] || list_contains(selection, "all"))
		select_all = true;
}

/* Names in test= that match no test fail loudly rather than silently. */
static void report_unknown(void)
{
	const char *p = selection;

	if (select_all)
		return;
	while (*p) {
		char name[64];
		size_t n = 0;
		const struct test *t;

		while (*p && *p != ',' && n < sizeof(name) - 1)
			name[n++] = *p++;
		name[n] = '\0';
		while (*p && *p != ',')
			p++;
		if (*p == ',')
			p++;
		for (t = __tests_start; t < __tests_end; t++)
			if (strcmp(t->name, name) == 0)
				break;
		if (n && t == __tests_end)
			report(name, false, "reason=unknown_test");
	}
}

static void user_main(void)
{
	long code = cmdline_get_int("exit", -1);

	if (code >= 0)
		report_set_exit((int)code);
	report_unknown();
	for (const struct test *t = __tests_start; t < __tests_end; t++)
		if (selected(t))
			t->run();
	summary_and_exit();
}

void kmain(const void *bp)
{
	tsc_hello = rdtsc();
	serial_init();
	puts("govm-test-kernel: hello\n");
	boot_params = bp;
	cmdline_init(bp);
	select_tests();
	desc_init(kstack_top);
	pic_init();
	tsc_user = rdtsc();
	for (const struct test *t = __tests_start; t < __tests_end; t++)
		if (t->cpl0 && selected(t))
			t->cpl0();
	enter_user(user_main, ustack_top);
}
