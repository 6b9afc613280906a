/*
 * buf.h: a growable NUL-terminated byte buffer (Git's strbuf, smaller).
 * A zeroed struct buf is an empty buffer.  Allocation failure aborts: a
 * node that cannot allocate a few bytes cannot do anything useful either.
 */
#ifndef GD_BUF_H
#define GD_BUF_H

#include <stddef.h>

struct buf {
	char *p;        /* always NUL-terminated once anything was added */
	size_t len;
	size_t cap;
};

#define BUF_INIT { NULL, 0, 0 }

void buf_add(struct buf *b, const void *data, size_t len);
/* Append n bytes (zeroed) and return where they start, to be filled. */
void *buf_extend(struct buf *b, size_t n);
void buf_puts(struct buf *b, const char *s);
void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void buf_reset(struct buf *b);
/* "" when nothing was added; borrowed. */
const char *buf_str(const struct buf *b);
/* Hand the heap string to the caller (free() it); b is left empty. */
char *buf_detach(struct buf *b);
void buf_free(struct buf *b);

#endif
