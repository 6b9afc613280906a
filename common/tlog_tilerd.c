/*
 * tlog_tilerd.c: stored hashes read out of a log's tiles, each tile
 * checked before any hash of it is used (tlog_tile.h).
 *
 * The tiles that hold the root's subtrees are checked together: the root
 * computed from them must be the trusted one.  Every other tile is a full
 * tile whose own hash (the root of its 256 hashes) sits in its parent
 * tile, one tile level up; parents are fetched and checked first, up to a
 * tile already checked.  This is the method of Go's sumdb/tlog
 * TileHashReader, written for C2SP's fixed height of 8.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "tlog_tile.h"
#include "xalloc.h"
#include "banned.h"

struct tset {
	struct tlog_tile *t;
	uint8_t **data;
	size_t n, cap, dcap;
};

static int tset_find(const struct tset *s, const struct tlog_tile *t)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->t[i].level == t->level && s->t[i].n == t->n &&
		    s->t[i].w == t->w)
			return (int)i;
	return -1;
}

static int tset_add(struct tset *s, const struct tlog_tile *t)
{
	int at = tset_find(s, t);

	if (at >= 0)
		return at;
	GD_GROW(s->t, s->cap, s->n + 1);
	GD_GROW(s->data, s->dcap, s->n + 1);
	s->t[s->n] = *t;
	s->data[s->n] = NULL;
	return (int)s->n++;
}

static void tset_free(struct tset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->data[i]);
	free(s->t);
	free(s->data);
}

/* t moved up k tile levels, with the width the tree of size has there;
 * false when the tree has no such tile. */
static bool tile_parent(struct tlog_tile *out,
                        const struct tlog_tile *t,
                        int k,
                        int64_t size)
{
	struct tlog_tile p = *t;
	int64_t max;

	p.level += k;
	if (p.level > 7)
		return false;
	p.n >>= TLOG_TILE_HEIGHT * k;
	p.w = TLOG_TILE_WIDTH;
	max = size >> (TLOG_TILE_HEIGHT * p.level);
	if ((p.n << TLOG_TILE_HEIGHT) + p.w >= max) {
		if ((p.n << TLOG_TILE_HEIGHT) >= max)
			return false;
		p.w = (int)(max - (p.n << TLOG_TILE_HEIGHT));
	}
	*out = p;
	return true;
}

/* The tile that holds index, and its parents up to a tile in ts. */
static int need_index(struct tset *ts, int64_t index, int64_t size, int *where)
{
	struct tlog_tile t, p;
	int k;

	tlog_tile_for_index(&t, index, NULL, NULL);
	for (k = 0;; k++) {
		if (!tile_parent(&p, &t, k, size))
			return GD_EINVAL;
		if (tset_find(ts, &p) >= 0)
			break;
	}
	for (k--; k >= 0; k--) {
		bool ok = tile_parent(&p, &t, k, size);
		GD_ASSERT(ok);
		if (p.w != TLOG_TILE_WIDTH)
			return GD_EINVAL;
		tset_add(ts, &p);
	}
	if (!tile_parent(&p, &t, 0, size))
		return GD_EINVAL;
	*where = tset_find(ts, &p);
	GD_ASSERT(*where >= 0);
	return 0;
}

/* The root from the tiles of its subtrees stx[0..nstx) (in ts). */
static int root_from_tiles(struct tlog_hash *out,
                           const struct tset *ts,
                           const int64_t *stx,
                           const int *pos,
                           int nstx)
{
	struct tlog_hash h;
	int err;

	for (int i = nstx - 1; i >= 0; i--) {
		const struct tlog_tile *t = &ts->t[pos[i]];
		err = tlog_tile_hash(&h, t, ts->data[pos[i]],
		                     (size_t)t->w * TLOG_HASH_LEN, stx[i]);
		if (err)
			return GD_ECRYPTO;
		if (i == nstx - 1)
			*out = h;
		else
			tlog_node_hash(out, &h, out);
	}
	return 0;
}

/* The root of the perfect run of hashes data[0..n) (n a power of 2). */
static void run_root(struct tlog_hash *out, const uint8_t *data, size_t n)
{
	struct tlog_hash l, r;

	if (n == 1) {
		memcpy(out->b, data, TLOG_HASH_LEN);
		return;
	}
	run_root(&l, data, n / 2);
	run_root(&r, data + n / 2 * TLOG_HASH_LEN, n / 2);
	tlog_node_hash(out, &l, &r);
}

/* Fetches every tile, checks the root's and then each other against its
 * parent (parents come first in ts). */
static int fetch_and_check(struct tset *ts,
                           const struct tlog_tile_reader *r,
                           const int64_t *stx,
                           const int *pos,
                           int nstx,
                           size_t nroot)
{
	struct tlog_hash root, want;
	int err;

	for (size_t i = 0; i < ts->n; i++) {
		ts->data[i] = xmalloc((size_t)ts->t[i].w * TLOG_HASH_LEN);
		err = r->fetch(ts->data[i], &ts->t[i], r->payload);
		if (err)
			return err;
	}
	err = root_from_tiles(&root, ts, stx, pos, nstx);
	if (err || !tlog_hash_eq(&root, &r->root))
		return GD_ECRYPTO;
	for (size_t i = nroot; i < ts->n; i++) {
		struct tlog_tile p;
		struct tlog_hash got;
		bool ok = tile_parent(&p, &ts->t[i], 1, r->size);
		int j = ok ? tset_find(ts, &p) : -1;

		GD_ASSERT(ok && ts->t[i].w == TLOG_TILE_WIDTH);
		GD_ASSERT(j >= 0 && (size_t)j < i);
		if (tlog_tile_hash(&want, &p, ts->data[j],
		                   (size_t)p.w * TLOG_HASH_LEN,
		                   tlog_stored_index(TLOG_TILE_HEIGHT * p.level,
		                                     ts->t[i].n)))
			return GD_ECRYPTO;
		run_root(&got, ts->data[i], TLOG_TILE_WIDTH);
		if (!tlog_hash_eq(&got, &want))
			return GD_ECRYPTO;
	}
	return 0;
}

int tlog_tile_read_hashes(struct tlog_hash *out,
                          const int64_t *indexes,
                          size_t n,
                          void *reader)
{
	const struct tlog_tile_reader *r = reader;
	struct tset ts = {0};
	int64_t stx[64], lo = 0;
	int pos[64], nstx = 0, err = 0;
	int *where = xreallocarray(NULL, n ? n : 1, sizeof(*where));
	size_t nroot;

	if (r->size < 1 || r->size > ((int64_t)1 << 56)) {
		err = GD_EINVAL;
		goto cleanup;
	}
	while (lo < r->size) { /* the root's subtrees, largest first */
		int level = 63 - __builtin_clzll((uint64_t)(r->size - lo));
		struct tlog_tile t;
		stx[nstx] = tlog_stored_index(level, lo >> level);
		bool ok;
		tlog_tile_for_index(&t, stx[nstx], NULL, NULL);
		ok = tile_parent(&t, &t, 0, r->size);
		GD_ASSERT(ok);
		pos[nstx++] = tset_add(&ts, &t);
		lo += (int64_t)1 << level;
	}
	nroot = ts.n;
	for (size_t i = 0; i < n && !err; i++) {
		if (indexes[i] < 0 ||
		    indexes[i] >= tlog_stored_index(0, r->size))
			err = GD_EINVAL;
		else
			err = need_index(&ts, indexes[i], r->size, &where[i]);
	}
	if (!err)
		err = fetch_and_check(&ts, r, stx, pos, nstx, nroot);
	for (size_t i = 0; i < n && !err; i++) {
		const struct tlog_tile *t = &ts.t[where[i]];
		err = tlog_tile_hash(&out[i], t, ts.data[where[i]],
		                     (size_t)t->w * TLOG_HASH_LEN, indexes[i]);
	}
cleanup:
	free(where);
	tset_free(&ts);
	return err;
}
