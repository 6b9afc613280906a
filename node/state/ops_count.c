/*
 * ops_count.c: the live records of each counted family (records.h's live
 * column), kept as operations apply so that `status` (ops_count) needs no
 * scan; a heap of expiry times per family for records live until a time
 * (grants).  Changes since the last commit are logged so that a rollback
 * or a reload takes them back (ops_count_undo).
 */
#include <stdlib.h>
#include <string.h>

#include "ops_int.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

static void heap_push(struct ops_heap *h, int64_t v)
{
	size_t i;

	GD_GROW(h->v, h->cap, h->n + 1);
	for (i = h->n++; i > 0 && h->v[(i - 1) / 2] > v; i = (i - 1) / 2)
		h->v[i] = h->v[(i - 1) / 2];
	h->v[i] = v;
}

static void heap_pop(struct ops_heap *h)
{
	int64_t last = h->v[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1] < h->v[c])
			c++;
		if (h->v[c] >= last)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Take the gone limits out of until (a sorted array is a heap), so that
 * limits replaced long before they pass do not pile up. */
static void count_compact(struct ops_count *c)
{
	size_t i = 0, j = 0, w = 0;

	qsort(c->until.v, c->until.n, sizeof(int64_t), cmp_i64);
	qsort(c->gone.v, c->gone.n, sizeof(int64_t), cmp_i64);
	for (; i < c->until.n; i++) {
		while (j < c->gone.n && c->gone.v[j] < c->until.v[i])
			j++; /* cannot happen: gone is part of until */
		if (j < c->gone.n && c->gone.v[j] == c->until.v[i])
			j++;
		else
			c->until.v[w++] = c->until.v[i];
	}
	c->until.n = w;
	c->gone.n = 0;
}

/* One live record more (sign 1) or less (-1), live until `until`. */
static void count_move(struct ops_count *c, int sign, int64_t until)
{
	c->live += sign;
	if (until == INT64_MAX)
		return;
	if (until <= c->horizon) {
		c->expired += sign;
		return;
	}
	heap_push(sign > 0 ? &c->until : &c->gone, until);
	if (c->gone.n > 1024 && c->gone.n > c->until.n / 2)
		count_compact(c);
}

static int64_t count_at(struct ops_count *c, int64_t now)
{
	if (now > c->horizon) {
		c->horizon = now;
		while (c->until.n && c->until.v[0] <= now) {
			if (c->gone.n && c->gone.v[0] == c->until.v[0])
				heap_pop(&c->gone);
			else
				c->expired++;
			heap_pop(&c->until);
		}
	}
	return c->live - c->expired;
}

void ops_count_free(struct ops_count *c)
{
	free(c->until.v);
	free(c->gone.v);
	memset(c, 0, sizeof(*c));
}

/* ops_int.h */
void ops_count_record(struct ops *o, struct ops_count *counts, enum store_cf cf,
		      const void *val, size_t vlen, int sign, bool undo)
{
	const struct records_kind *k = records_kind(cf);
	int64_t until;

	if (!k->live || !vlen || !k->live(val, vlen, &until))
		return;
	count_move(&counts[cf], sign, until);
	if (!undo)
		return;
	GD_GROW(o->undo, o->capundo, o->nundo + 1);
	o->undo[o->nundo++] =
		(struct ops_count_undo){ .cf = cf, .sign = sign, .until = until };
}

void ops_count_undo(struct ops *o, size_t len)
{
	while (o->nundo > len) {
		const struct ops_count_undo *u = &o->undo[--o->nundo];
		count_move(&o->counts[u->cf], -u->sign, u->until);
	}
}

int64_t ops_count_of(struct ops_count *c, enum store_cf cf, int64_t now)
{
	const struct records_kind *k = records_kind(cf);
	return k && k->live ? count_at(c, now) : 0;
}

int64_t ops_count(struct ops *o, enum store_cf cf, int64_t now)
{
	return ops_count_of(&o->counts[cf], cf, now);
}
