/*
 * tlog_tile.c: C2SP tlog-tiles paths, tile contents and entry bundles.
 *
 * A tile is a window on tlog.c's table: tile (L, N) holds the hashes of
 * tree level 8 * L numbered N * 256 .. N * 256 + W - 1, and a hash of a
 * level between two tile levels is computed from the run of the lower
 * tile's hashes under it (as Go's sumdb/tlog does with height 8).  Paths
 * are parsed strictly: one spelling per tile, so a cache keyed by path
 * cannot hold two copies, and nothing but digits, "x", "/" and ".p" is
 * ever looked at.
 */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "tlog_tile.h"
#include "xalloc.h"
#include "banned.h"

static bool tile_ok(const struct tlog_tile *t)
{
	return (t->level == TLOG_TILE_ENTRIES ||
	        (t->level >= 0 && t->level <= TLOG_TILE_MAX_LEVEL)) &&
	       t->n >= 0 && t->w >= 1 && t->w <= TLOG_TILE_WIDTH;
}

int tlog_tile_path(char out[TLOG_TILE_PATH_MAX], const struct tlog_tile *t)
{
	char groups[8][8];
	int ng = 0, len;
	int64_t n;

	if (!tile_ok(t))
		return GD_EINVAL;
	n = t->n;
	do {
		snprintf(groups[ng], sizeof(groups[ng]), "%s%03d",
		         ng ? "x" : "", (int)(n % 1000));
		ng++;
		n /= 1000;
	} while (n > 0);
	if (t->level == TLOG_TILE_ENTRIES)
		len = snprintf(out, TLOG_TILE_PATH_MAX, "tile/entries/");
	else
		len = snprintf(out, TLOG_TILE_PATH_MAX, "tile/%d/", t->level);
	for (int i = ng - 1; i >= 0; i--)
		len += snprintf(out + len, (size_t)(TLOG_TILE_PATH_MAX - len),
		                "%s%s", groups[i], i ? "/" : "");
	if (t->w != TLOG_TILE_WIDTH)
		len += snprintf(out + len, (size_t)(TLOG_TILE_PATH_MAX - len),
		                ".p/%d", t->w);
	GD_ASSERT(len < TLOG_TILE_PATH_MAX);
	return len;
}

/* A decimal of 1..3 digits, no leading zero, at *p: its value or -1. */
static int small_dec(const char **p, const char *end)
{
	int v = 0, nd = 0;

	while (*p < end && **p >= '0' && **p <= '9' && nd < 3) {
		v = v * 10 + (**p - '0');
		(*p)++;
		nd++;
	}
	return nd == 0 || (nd > 1 && v < 10 * (nd == 3 ? 10 : 1)) ? -1 : v;
}

/* Three digits exactly, at *p: their value or -1. */
static int three_digits(const char **p, const char *end)
{
	int v = 0;

	if (end - *p < 3)
		return -1;
	for (int i = 0; i < 3; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return -1;
		v = v * 10 + (c - '0');
	}
	*p += 3;
	return v;
}

static int parse_n(int64_t *out, const char **p, const char *end)
{
	int64_t n = 0;

	for (int g = 0;; g++) {
		bool x = *p < end && **p == 'x';
		int v;
		if (g >= 7)
			return GD_EINVAL; /* past 2^63 */
		*p += x;
		v = three_digits(p, end);
		if (v < 0 || (n > (INT64_MAX - v) / 1000))
			return GD_EINVAL;
		n = n * 1000 + v;
		if (!x)
			break;
		if (*p >= end || **p != '/')
			return GD_EINVAL;
		(*p)++;
	}
	*out = n;
	return 0;
}

int tlog_tile_parse_path(struct tlog_tile *out, const char *path, size_t len)
{
	const char *p = path, *end = path + len;
	char again[TLOG_TILE_PATH_MAX];
	struct tlog_tile t = {.w = TLOG_TILE_WIDTH};

	if (len >= TLOG_TILE_PATH_MAX || len < 5 || memcmp(p, "tile/", 5))
		return GD_EINVAL;
	p += 5;
	if (end - p >= 8 && !memcmp(p, "entries/", 8)) {
		t.level = TLOG_TILE_ENTRIES;
		p += 8;
	} else {
		t.level = small_dec(&p, end);
		if (t.level < 0 || t.level > TLOG_TILE_MAX_LEVEL || p >= end ||
		    *p++ != '/')
			return GD_EINVAL;
	}
	if (parse_n(&t.n, &p, end))
		return GD_EINVAL;
	if (end - p >= 3 && !memcmp(p, ".p/", 3)) {
		p += 3;
		t.w = small_dec(&p, end);
		if (t.w < 1 || t.w >= TLOG_TILE_WIDTH)
			return GD_EINVAL;
	}
	/* One spelling per tile: what we would write, byte for byte. */
	if (p != end || tlog_tile_path(again, &t) != (int)len ||
	    memcmp(again, path, len))
		return GD_EINVAL;
	*out = t;
	return 0;
}

void tlog_tile_for_index(struct tlog_tile *out,
                         int64_t index,
                         size_t *start,
                         size_t *end)
{
	int level, sub;
	int64_t n;

	tlog_split_stored_index(index, &level, &n);
	out->level = level / TLOG_TILE_HEIGHT;
	sub = level - out->level * TLOG_TILE_HEIGHT; /* level inside the tile */
	out->n = (n << sub) >> TLOG_TILE_HEIGHT;
	n -= (out->n << TLOG_TILE_HEIGHT) >> sub; /* n inside the tile */
	out->w = (int)((n + 1) << sub);
	if (start)
		*start = (size_t)(n << sub) * TLOG_HASH_LEN;
	if (end)
		*end = (size_t)((n + 1) << sub) * TLOG_HASH_LEN;
}

/* The root of the perfect run of hashes data[0..len) (len = 2^k hashes). */
static void run_hash(struct tlog_hash *out, const uint8_t *data, size_t len)
{
	struct tlog_hash l, r;

	GD_ASSERT(len >= TLOG_HASH_LEN);
	if (len == TLOG_HASH_LEN) {
		memcpy(out->b, data, TLOG_HASH_LEN);
		return;
	}
	run_hash(&l, data, len / 2);
	run_hash(&r, data + len / 2, len / 2);
	tlog_node_hash(out, &l, &r);
}

int tlog_tile_hash(struct tlog_hash *out,
                   const struct tlog_tile *t,
                   const uint8_t *data,
                   size_t len,
                   int64_t index)
{
	struct tlog_tile want;
	size_t start, end;

	if (!tile_ok(t) || t->level < 0 || index < 0 || index > INT64_MAX / 4 ||
	    len < (size_t)t->w * TLOG_HASH_LEN)
		return GD_EINVAL;
	tlog_tile_for_index(&want, index, &start, &end);
	if (want.level != t->level || want.n != t->n || want.w > t->w)
		return GD_EINVAL;
	run_hash(out, data + start, end - start);
	return 0;
}

int tlog_tile_read(uint8_t *out,
                   const struct tlog_tile *t,
                   tlog_read_fn *read,
                   void *payload)
{
	int64_t idx[TLOG_TILE_WIDTH];
	struct tlog_hash h[TLOG_TILE_WIDTH];
	int err;

	/* Tiles above level 6 would hold hashes of trees of 2^56 entries and
	 * more: not a table this module indexes (tlog_stored_index). */
	if (!tile_ok(t) || t->level < 0 || t->level > 6 ||
	    t->n > ((INT64_MAX >> 2) >> (TLOG_TILE_HEIGHT * t->level)) /
	                            TLOG_TILE_WIDTH -
	                    1)
		return GD_EINVAL;
	for (int i = 0; i < t->w; i++)
		idx[i] = tlog_stored_index(TLOG_TILE_HEIGHT * t->level,
		                           t->n * TLOG_TILE_WIDTH + i);
	err = read(h, idx, (size_t)t->w, payload);
	if (err)
		return err;
	for (int i = 0; i < t->w; i++)
		memcpy(out + (size_t)i * TLOG_HASH_LEN, h[i].b, TLOG_HASH_LEN);
	return 0;
}

int tlog_tiles_new(int64_t old_size,
                   int64_t new_size,
                   tlog_tile_fn *fn,
                   void *payload)
{
	if (old_size < 0 || new_size < old_size)
		return GD_EINVAL;
	for (int level = 0; level < 64 / TLOG_TILE_HEIGHT &&
	                    (new_size >> (TLOG_TILE_HEIGHT * level)) > 0;
	     level++) {
		int64_t old_n = old_size >> (TLOG_TILE_HEIGHT * level);
		int64_t new_n = new_size >> (TLOG_TILE_HEIGHT * level);
		struct tlog_tile t = {.level = level, .w = TLOG_TILE_WIDTH};
		int64_t last = new_n >> TLOG_TILE_HEIGHT;
		int err;

		if (old_n == new_n)
			continue;
		for (t.n = old_n >> TLOG_TILE_HEIGHT; t.n < last; t.n++)
			if ((err = fn(&t, payload)))
				return err;
		t.n = last;
		t.w = (int)(new_n - (last << TLOG_TILE_HEIGHT));
		if (t.w > 0 && (err = fn(&t, payload)))
			return err;
	}
	return 0;
}

/* ---- entry bundles ---------------------------------------------------- */

int tlog_bundle_add(struct buf *b, const void *entry, size_t len)
{
	uint8_t be[2];

	if (len > TLOG_ENTRY_MAX)
		return GD_ETOOBIG;
	be[0] = (uint8_t)(len >> 8);
	be[1] = (uint8_t)len;
	buf_add(b, be, 2);
	buf_add(b, entry, len);
	return 0;
}

void tlog_bundle_iter_init(struct tlog_bundle_iter *it,
                           const void *bundle,
                           size_t len)
{
	it->p = bundle;
	it->left = len;
}

int tlog_bundle_next(struct tlog_bundle_iter *it,
                     const uint8_t **entry,
                     size_t *len)
{
	size_t n;

	if (it->left == 0)
		return 0;
	if (it->left < 2)
		return GD_EINVAL;
	n = (size_t)it->p[0] << 8 | it->p[1];
	if (it->left - 2 < n)
		return GD_EINVAL;
	*entry = it->p + 2;
	*len = n;
	it->p += 2 + n;
	it->left -= 2 + n;
	return 1;
}

int tlog_bundle_check(const void *bundle,
                      size_t blen,
                      const uint8_t *data,
                      size_t dlen)
{
	struct tlog_bundle_iter it;
	const uint8_t *e;
	size_t elen, i = 0;
	int r;

	if (dlen % TLOG_HASH_LEN || dlen > TLOG_TILE_WIDTH * TLOG_HASH_LEN)
		return GD_EINVAL;
	tlog_bundle_iter_init(&it, bundle, blen);
	while ((r = tlog_bundle_next(&it, &e, &elen)) == 1) {
		struct tlog_hash h;
		if (i >= dlen / TLOG_HASH_LEN)
			return GD_ECRYPTO; /* more entries than hashes */
		tlog_leaf_hash(&h, e, elen);
		if (sodium_memcmp(h.b, data + i * TLOG_HASH_LEN, TLOG_HASH_LEN))
			return GD_ECRYPTO;
		i++;
	}
	if (r < 0)
		return r;
	return i == dlen / TLOG_HASH_LEN ? 0 : GD_ECRYPTO;
}
