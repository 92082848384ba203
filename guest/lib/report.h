/* The output protocol the Go tests parse (docs: guest/README.md):
 *
 *   RESULT <name> pass|fail key=value key=value ...
 *   RESULT <name> skip reason=<word> key=value ...
 *   SUMMARY pass=N fail=M skip=K
 *
 * A check that cannot run here (the device lacks a feature it needs) says
 * skip with the reason, rather than pass with a key that hides it: the Go
 * side fails a skip that guest/tests.cfg does not declare (may_skip). Skips
 * do not fail the run (exit code 0 when nothing failed).
 *
 * then the exit code goes to the debug-exit port 0x501 (QEMU
 * isa-debug-exit, govm --debug-exit): the VMM exits with (code << 1) | 1. */
#ifndef LIB_REPORT_H
#define LIB_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#define DEBUG_EXIT_PORT 0x501

/* report prints one RESULT line; fmt (may be "") gives the key=value
 * pairs, without a leading space. Returns cond. */
bool report(const char *name, bool cond, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* For lines too long for one buffer: report_begin prints "RESULT name
 * pass|fail", the caller prints " key=value" pieces (printf, print_hex),
 * report_end ends the line. */
void report_begin(const char *name, bool cond);
void report_end(void);

/* report_skip prints "RESULT name skip reason=<reason>" and the key=value
 * pairs of fmt (may be ""). reason is one word: no spaces, no '='. */
void report_skip(const char *name, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* report_begin_skip is report_begin for a skip line: it prints "RESULT name
 * skip reason=<reason>"; the caller adds " key=value" pieces, then
 * report_end. */
void report_begin_skip(const char *name, const char *reason);

/* print_hex prints n bytes as lowercase hex, two digits each. */
void print_hex(const void *p, size_t n);

/* report_set_exit overrides the exit code summary_and_exit uses
 * (command line exit=<n>). */
void report_set_exit(int code);

/* summary_and_exit prints SUMMARY and ends the VM: debug-exit port with
 * 0 (nothing failed; skips allowed) or 1 (failures), then i8042 reset,
 * then halt. */
void __attribute__((noreturn)) summary_and_exit(void);

/* vm_exit writes code to the debug-exit port and, should the VMM have no
 * such device, resets through the i8042 and halts. Works at CPL0/CPL3. */
void __attribute__((noreturn)) vm_exit(int code);

#endif
