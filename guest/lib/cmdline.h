/* Kernel command line: space-separated words, "key=value" or "flag". */
#ifndef LIB_CMDLINE_H
#define LIB_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>

#define CMDLINE_MAX 4096

/* cmdline_init copies the command line the zero page points at
 * (cmd_line_ptr | ext_cmd_line_ptr << 32), at most CMDLINE_MAX-1 bytes. */
void cmdline_init(const void *boot_params);
const char *cmdline(void);
size_t cmdline_len(void);

/* cmdline_get finds the first word "key=value" and copies value (NUL
 * terminated, truncated to n-1 bytes) into val. A bare "key" yields "". */
bool cmdline_get(const char *key, char *val, size_t n);
/* cmdline_get_int parses a decimal or 0x-prefixed value. */
long cmdline_get_int(const char *key, long def);
/* list_contains says whether comma-separated list holds item. */
bool list_contains(const char *list, const char *item);

#endif
