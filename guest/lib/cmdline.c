#include "cmdline.h"
#include "bootparam.h"
#include "string.h"

static char buf[CMDLINE_MAX];
static size_t len;

void cmdline_init(const void *bp)
{
	uint64_t ptr = bp_u32(bp, HDR_CMD_LINE_PTR) |
		       (uint64_t)bp_u32(bp, BP_EXT_CMD_LINE_PTR) << 32;
	const volatile char *src = (const volatile char *)(uintptr_t)ptr;

	len = 0;
	/* Only the identity-mapped first 4 GiB is reachable. */
	if (ptr == 0 || ptr >= (1ull << 32) - CMDLINE_MAX)
		return;
	while (len < CMDLINE_MAX - 1 && src[len])
		len++;
	for (size_t i = 0; i < len; i++)
		buf[i] = src[i];
	buf[len] = '\0';
}

const char *cmdline(void)
{
	return buf;
}

size_t cmdline_len(void)
{
	return len;
}

static const char *find_word(const char *key, size_t *vlen, bool *has_val)
{
	size_t klen = strlen(key);
	const char *p = buf;

	while (*p) {
		const char *w;
		size_t wlen;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		w = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n')
			p++;
		wlen = (size_t)(p - w);
		if (wlen >= klen && strncmp(w, key, klen) == 0) {
			if (wlen == klen) {
				*vlen = 0;
				*has_val = false;
				return w + klen;
			}
			if (w[klen] == '=') {
				*vlen = wlen - klen - 1;
				*has_val = true;
				return w + klen + 1;
			}
		}
	}
	return NULL;
}

bool cmdline_get(const char *key, char *val, size_t n)
{
	size_t vlen;
	bool has_val;
	const char *v = find_word(key, &vlen, &has_val);

	if (!v)
		return false;
	if (n) {
		if (vlen > n - 1)
			vlen = n - 1;
		memcpy(val, v, vlen);
		val[vlen] = '\0';
	}
	return true;
}

long cmdline_get_int(const char *key, long def)
{
	char v[32];
	const char *p = v;
	long r = 0;
	int base = 10, neg = 0;

	if (!cmdline_get(key, v, sizeof(v)) || !v[0])
		return def;
	if (*p == '-') {
		neg = 1;
		p++;
	}
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	if (!*p)
		return def;
	for (; *p; p++) {
		int d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			return def;
		r = r * base + d;
	}
	return neg ? -r : r;
}

bool list_contains(const char *list, const char *item)
{
	size_t ilen = strlen(item);

	while (*list) {
		const char *e = strchr(list, ',');
		size_t n = e ? (size_t)(e - list) : strlen(list);

		if (n == ilen && strncmp(list, item, n) == 0)
			return true;
		if (!e)
			break;
		list = e + 1;
	}
	return false;
}
