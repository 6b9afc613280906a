/*
 * xalloc.h: allocation that cannot fail, and assertions that stay.
 *
 * Out of memory is not an error the node can answer: a half-built batch
 * or view would be worse than a stop, and systemd restarts the node,
 * which replays its WAL.  So every allocation goes through these, and
 * there is one out-of-memory path (xalloc_die: a log line naming the
 * size, then abort()), OpenSSH's xmalloc.c's way, instead of a branch at
 * each call.  A caller never checks the result.
 *
 * GD_ASSERT(cond) is for invariants of our own code ("a bug"): unlike
 * assert(3) it stays in release and sanitizer builds (-DNDEBUG does not
 * remove it), logs the file, line and condition, and aborts.
 */
#ifndef GD_XALLOC_H
#define GD_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
/* realloc of p to n * size bytes (n * size checked for overflow) */
void *xreallocarray(void *p, size_t n, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void *xmemdup(const void *p, size_t n);

/* p with room for at least `need` elements of `size` bytes, its capacity
 * *cap elements: doubles (at least 16), never shrinks; p itself when it
 * has room.  GD_GROW(p, cap, need) is the usual call: p = ... */
void *xgrow(void *p, size_t *cap, size_t need, size_t size);
#define GD_GROW(p, cap, need) ((p) = xgrow((p), &(cap), (need), sizeof(*(p))))

_Noreturn void xalloc_die(size_t size);
_Noreturn void gd_assert_fail(const char *file, int line, const char *cond);

#define GD_ASSERT(cond)                                                  \
	((cond) ? (void)0 : gd_assert_fail(__FILE__, __LINE__, #cond))

#endif
