/* Test registration. A test file defines its test with DEFINE_TEST; the
 * linker collects them in the .tests section (link.ld), in link order, so
 * adding a test is adding a file to the Makefile. */
#ifndef LIB_TEST_H
#define LIB_TEST_H

#include <stdbool.h>
#include <stdint.h>

/* Raw TSC at kmain entry and after the CPL0 set-up (before the tests'
 * cpl0 hooks): their difference is the emulated set-up cost. The raw
 * values are not "cycles since VM start" on this host (PVM passes the
 * host TSC through). */
extern uint64_t tsc_hello, tsc_user;

struct test {
	const char *name;
	/* run is called at CPL3 when the test is selected. */
	void (*run)(void);
	/* cpl0, when set, is called at CPL0 before the drop to user mode
	 * (interrupts off). Keep it tiny: CPL0 is emulated on our hosts. */
	void (*cpl0)(void);
	/* in_all: run by test=all (or no test= at all). */
	bool in_all;
};

#define DEFINE_TEST(ident, ...)                                          \
	static const struct test test_##ident                            \
		__attribute__((used, section(".tests"), aligned(8))) = {  \
			__VA_ARGS__                                      \
		}

#endif
