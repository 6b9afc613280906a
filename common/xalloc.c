/* xalloc.c: the one out-of-memory path (xalloc.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "xalloc.h"
#include "banned.h"

_Noreturn void xalloc_die(size_t size)
{
	log_error("out of memory: %zu bytes; stopping", size);
	abort();
}

_Noreturn void gd_assert_fail(const char *file, int line, const char *cond)
{
	log_error("assertion failed (a bug): %s:%d: %s", file, line, cond);
	abort();
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (!p)
		xalloc_die(size);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		xalloc_die(n * size);
	return p;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
	void *q;

	if (size && n > SIZE_MAX / size)
		xalloc_die(SIZE_MAX);
	q = realloc(p, n && size ? n * size : 1);
	if (!q)
		xalloc_die(n * size);
	return q;
}

char *xstrdup(const char *s)
{
	return xmemdup(s, strlen(s) + 1);
}

char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = xmalloc(len + 1);

	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

void *xmemdup(const void *p, size_t n)
{
	void *d = xmalloc(n);

	if (n)
		memcpy(d, p, n);
	return d;
}

void *xgrow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap;

	if (need <= c)
		return p;
	if (c < 16)
		c = 16;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			xalloc_die(SIZE_MAX);
		c *= 2;
	}
	p = xreallocarray(p, c, size);
	*cap = c;
	return p;
}
