/* printf subset: %s %d %i %u %x %X %c %p %%, flags '0' and '-', a field
 * width, and the l / ll / z length modifiers. Output goes to COM1. */
#ifndef LIB_PRINTF_H
#define LIB_PRINTF_H

#include <stdarg.h>
#include <stddef.h>

int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int snprintf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int vprintf(const char *fmt, va_list ap);
int printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void puts(const char *s); /* no newline added */

#endif
