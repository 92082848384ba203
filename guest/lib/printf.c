#include "printf.h"
#include "serial.h"
#include "string.h"

#include <stdint.h>

struct out {
	char *buf;
	size_t size;
	size_t len; /* bytes that would have been written */
};

static void put(struct out *o, char c)
{
	if (o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static void pad(struct out *o, char c, int n)
{
	while (n-- > 0)
		put(o, c);
}

static void number(struct out *o, unsigned long long v, int base, int neg,
		   int width, int zero, int left, int upper)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	char tmp[24];
	int n = 0, len;

	do {
		tmp[n++] = digits[v % base];
		v /= base;
	} while (v);
	len = n + neg;
	if (!left && !zero)
		pad(o, ' ', width - len);
	if (neg)
		put(o, '-');
	if (!left && zero)
		pad(o, '0', width - len);
	while (n)
		put(o, tmp[--n]);
	if (left)
		pad(o, ' ', width - len);
}

int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct out o = { buf, size, 0 };

	for (; *fmt; fmt++) {
		int zero = 0, left = 0, width = 0, lng = 0;
		unsigned long long u;
		long long s;
		const char *str;

		if (*fmt != '%') {
			put(&o, *fmt);
			continue;
		}
		fmt++;
		for (;; fmt++) {
			if (*fmt == '0')
				zero = 1;
			else if (*fmt == '-')
				left = 1;
			else
				break;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l' || *fmt == 'z') {
			lng++;
			fmt++;
		}
		switch (*fmt) {
		case 'd':
		case 'i':
			s = lng >= 2 ? va_arg(ap, long long) :
			    lng == 1 ? va_arg(ap, long) : va_arg(ap, int);
			u = s < 0 ? -(unsigned long long)s : (unsigned long long)s;
			number(&o, u, 10, s < 0, width, zero, left, 0);
			break;
		case 'u':
		case 'x':
		case 'X':
			u = lng >= 2 ? va_arg(ap, unsigned long long) :
			    lng == 1 ? va_arg(ap, unsigned long) :
				       va_arg(ap, unsigned int);
			number(&o, u, *fmt == 'u' ? 10 : 16, 0, width, zero,
			       left, *fmt == 'X');
			break;
		case 'p':
			put(&o, '0');
			put(&o, 'x');
			number(&o, (uintptr_t)va_arg(ap, void *), 16, 0, width,
			       zero, left, 0);
			break;
		case 'c':
			if (!left)
				pad(&o, ' ', width - 1);
			put(&o, (char)va_arg(ap, int));
			if (left)
				pad(&o, ' ', width - 1);
			break;
		case 's':
			str = va_arg(ap, const char *);
			if (!str)
				str = "(null)";
			width -= (int)strlen(str);
			if (!left)
				pad(&o, ' ', width);
			while (*str)
				put(&o, *str++);
			if (left)
				pad(&o, ' ', width);
			break;
		case '%':
			put(&o, '%');
			break;
		case '\0':
			fmt--; /* lone '%' at the end */
			break;
		default:
			put(&o, '%');
			put(&o, *fmt);
			break;
		}
	}
	if (size)
		buf[o.len < size ? o.len : size - 1] = '\0';
	return (int)o.len;
}

int snprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}

int vprintf(const char *fmt, va_list ap)
{
	char buf[512];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);

	serial_write(buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	return n;
}

int printf(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vprintf(fmt, ap);
	va_end(ap);
	return n;
}

void puts(const char *s)
{
	serial_write(s, strlen(s));
}
