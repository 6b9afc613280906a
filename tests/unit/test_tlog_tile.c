/*
 * test_tlog_tile.c: common/tlog_tile.h, C2SP tlog-tiles: tile paths, the
 * tiles of a tree, tile contents and entry bundles.
 *
 * Independent answers: the tile paths of Go's golang.org/x/mod/sumdb/tlog
 * tlog_test.go (respelled for C2SP, whose paths have no height element)
 * and the examples of C2SP tlog-tiles.md; tile contents are checked
 * against the table of stored hashes they are cut from and against the
 * tree hash (test_tlog.c checks that against RFC 6962).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "err.h"
#include "tlog.h"
#include "tlog_tile.h"

/* ---- a table of stored hashes, as a node keeps it ----------------------- */

struct store {
	struct tlog_hash *h;
	int64_t n, cap; /* hashes */
	int64_t leaves; /* entries */
	struct tlog_hash leaf[1100]; /* of the first 1100 */
	int reads;
};

static int
store_read(struct tlog_hash *out, const int64_t *idx, size_t n, void *payload)
{
	struct store *s = payload;

	s->reads++;
	for (size_t i = 0; i < n; i++) {
		assert_true(idx[i] >= 0 && idx[i] < s->n);
		if (i)
			assert_true(idx[i] > idx[i - 1]); /* increasing */
		out[i] = s->h[idx[i]];
	}
	return 0;
}

static void store_append(struct store *s, const void *entry, size_t len)
{
	struct tlog_hash leaf, add[TLOG_MAX_STORED];
	size_t nadd;

	tlog_leaf_hash(&leaf, entry, len);
	assert_int_equal(tlog_stored_index(0, s->leaves), s->n);
	assert_int_equal(
	        tlog_stored_hashes(add, &nadd, s->leaves, &leaf, store_read, s),
	        0);
	if (s->n + (int64_t)nadd > s->cap) {
		s->cap = 2 * s->cap + 64;
		s->h = realloc(s->h, (size_t)s->cap * sizeof(*s->h));
	}
	memcpy(s->h + s->n, add, nadd * sizeof(*add));
	s->n += (int64_t)nadd;
	if (s->leaves < 1100)
		s->leaf[s->leaves] = leaf;
	s->leaves++;
	assert_int_equal(tlog_stored_count(s->leaves), s->n);
}

/* entry i of the test logs: "leaf i" */
static void store_fill(struct store *s, int64_t n)
{
	memset(s, 0, sizeof(*s));
	for (int64_t i = 0; i < n; i++) {
		char e[32];
		int len = snprintf(e, sizeof(e), "leaf %lld", (long long)i);
		store_append(s, e, (size_t)len);
	}
}

/* ---- tiles -------------------------------------------------------------- */

/* Go's tlog_test.go tilePaths, respelled for C2SP (no height element:
 * it is 8), plus C2SP tlog-tiles' own example (1234067) and the edges. */
static void test_tile_paths(void **state)
{
	static const struct {
		const char *path;
		struct tlog_tile t;
	} good[] = {
	        {"tile/0/001", {0, 1, 256}},
	        {"tile/0/001.p/5", {0, 1, 5}},
	        {"tile/5/x123/x456/078", {5, 123456078, 256}},
	        {"tile/5/x123/x456/078.p/2", {5, 123456078, 2}},
	        {"tile/entries/x003/x057/500",
	         {TLOG_TILE_ENTRIES, 3057500, 256}},
	        {"tile/entries/x001/x234/067.p/255",
	         {TLOG_TILE_ENTRIES, 1234067, 255}},
	        {"tile/0/x001/x234/067", {0, 1234067, 256}},
	        {"tile/63/000.p/1", {63, 0, 1}},
	        {"tile/1/x009/x223/x372/x036/x854/x775/807",
	         {1, INT64_MAX, 256}},
	};
	static const char *bad[] = {
	        "tile/5/123/456/078",
	        "tile/-1/123",
	        "tile/0/x000/001",
	        "tile/00/001",
	        "tile/64/000",
	        "tile/0/001.p/256",
	        "tile/0/001.p/0",
	        "tile/0/001.p/05",
	        "tile/0/1",
	        "tile/0/0001",
	        "tile/0/001/",
	        "tile/0/001.p/",
	        "tile/data/001",
	        "tile/8/0/001",
	        "tile/entries/001.p/1x",
	        "",
	        "tile/",
	        "tile/0/",
	        "tile/0/x001",
	        "tile/0/x001/",
	        "tile/0/001.p/1/",
	        "tile/entries",
	        "tile/1/01",
	        "tile/0/x999/x999/x999/x999/x999/x999/999",
	        "tile/0/x009/x223/x372/x036/x854/x775/808",
	        "tile/0/x1/x2/x3/x4/x5/x6/x7/x8/001",
	        "Tile/0/001",
	        "tile/0/001.P/5",
	        "tile/0/-01",
	};
	char buf[TLOG_TILE_PATH_MAX];
	struct tlog_tile t;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int n = tlog_tile_path(buf, &good[i].t);
		assert_int_equal(n, (int)strlen(good[i].path));
		assert_string_equal(buf, good[i].path);
		assert_int_equal(tlog_tile_parse_path(&t, good[i].path,
		                                      strlen(good[i].path)),
		                 0);
		assert_int_equal(t.level, good[i].t.level);
		assert_true(t.n == good[i].t.n);
		assert_int_equal(t.w, good[i].t.w);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tlog_tile_parse_path(&t, bad[i], strlen(bad[i])) !=
		    GD_EINVAL)
			fail_msg("parsed %s", bad[i]);
	t = (struct tlog_tile){0, 0, 0};
	assert_int_equal(tlog_tile_path(buf, &t), GD_EINVAL);
	t = (struct tlog_tile){64, 0, 1};
	assert_int_equal(tlog_tile_path(buf, &t), GD_EINVAL);
}

struct tally {
	int full[8], partial[8], wpartial[8];
};

static int tally_tile(const struct tlog_tile *t, void *payload)
{
	struct tally *ta = payload;

	assert_true(t->level >= 0 && t->level < 8);
	if (t->w == TLOG_TILE_WIDTH) {
		ta->full[t->level]++;
	} else {
		ta->partial[t->level]++;
		ta->wpartial[t->level] = t->w;
	}
	return 0;
}

/* C2SP tlog-tiles' examples: the tiles of trees of 70,000 and 256. */
static void test_tiles_of_tree(void **state)
{
	struct tally a = {0}, b = {0};

	(void)state;
	assert_int_equal(tlog_tiles_new(0, 70000, tally_tile, &a), 0);
	assert_int_equal(a.full[0], 273);
	assert_int_equal(a.partial[0], 1);
	assert_int_equal(a.wpartial[0], 112);
	assert_int_equal(a.full[1], 1);
	assert_int_equal(a.partial[1], 1);
	assert_int_equal(a.wpartial[1], 17);
	assert_int_equal(a.full[2], 0);
	assert_int_equal(a.partial[2], 1);
	assert_int_equal(a.wpartial[2], 1);
	assert_int_equal(a.partial[3], 0);
	assert_int_equal(tlog_tiles_new(0, 256, tally_tile, &b), 0);
	assert_int_equal(b.full[0], 1);
	assert_int_equal(b.partial[0], 0);
	assert_int_equal(b.full[1], 0);
	assert_int_equal(b.partial[1], 1);
	assert_int_equal(b.wpartial[1], 1);
	assert_int_equal(tlog_tiles_new(5, 4, tally_tile, &b), GD_EINVAL);
}

#define NTILE 8
struct tiles {
	struct store *s;
	int w[2][NTILE];
	uint8_t data[2][NTILE][TLOG_TILE_WIDTH * TLOG_HASH_LEN];
};

/* A new tile of the tree: its data extends what the tile held before. */
static int save_tile(const struct tlog_tile *t, void *payload)
{
	struct tiles *ts = payload;
	uint8_t data[TLOG_TILE_WIDTH * TLOG_HASH_LEN];
	int old;

	assert_true(t->level < 2 && t->n < NTILE);
	assert_int_equal(tlog_tile_read(data, t, store_read, ts->s), 0);
	old = ts->w[t->level][t->n];
	assert_true(old < t->w);
	assert_memory_equal(data, ts->data[t->level][t->n],
	                    (size_t)old * TLOG_HASH_LEN);
	memcpy(ts->data[t->level][t->n], data, (size_t)t->w * TLOG_HASH_LEN);
	ts->w[t->level][t->n] = t->w;
	return 0;
}

/* The stored hash at index, read out of the tiles the tree has. */
static void
hash_from_tiles(struct tlog_hash *out, struct tiles *ts, int64_t index)
{
	struct tlog_tile t;

	tlog_tile_for_index(&t, index, NULL, NULL);
	assert_true(t.level < 2 && t.n < NTILE);
	assert_true(ts->w[t.level][t.n] >= t.w);
	t.w = ts->w[t.level][t.n];
	assert_int_equal(tlog_tile_hash(out, &t, ts->data[t.level][t.n],
	                                (size_t)t.w * TLOG_HASH_LEN, index),
	                 0);
}

/* Go's TestTree with height 8: grow a log to 1100 entries; after each, the
 * new tiles extend the old, every new stored hash reads back out of its
 * tile, and the tree hash recomputed from tiles alone is the tree's. */
static void test_tile_data(void **state)
{
	struct tiles *ts = calloc(1, sizeof(*ts));
	struct tlog_hash h, root;

	(void)state;
	ts->s = calloc(1, sizeof(*ts->s));
	for (int64_t i = 0; i < 1100; i++) {
		int64_t was = ts->s->n, lo = 0, hi = i + 1;
		char e[32];
		int len = snprintf(e, sizeof(e), "leaf %lld", (long long)i);
		struct tlog_hash parts[64];
		int np = 0;

		store_append(ts->s, e, (size_t)len);
		assert_int_equal(tlog_tiles_new(i, i + 1, save_tile, ts), 0);
		for (int64_t j = was; j < ts->s->n; j++) {
			hash_from_tiles(&h, ts, j);
			assert_memory_equal(h.b, ts->s->h[j].b, TLOG_HASH_LEN);
		}
		while (lo < hi) { /* RFC 6962: largest perfect subtree first */
			int level = 63 - __builtin_clzll((uint64_t)(hi - lo));
			hash_from_tiles(&parts[np++], ts,
			                tlog_stored_index(level, lo >> level));
			lo += (int64_t)1 << level;
		}
		for (int k = np - 2; k >= 0; k--)
			tlog_node_hash(&parts[np - 1], &parts[k],
			               &parts[np - 1]);
		assert_int_equal(
		        tlog_tree_hash(&root, i + 1, store_read, ts->s), 0);
		assert_memory_equal(parts[np - 1].b, root.b, TLOG_HASH_LEN);
	}
	/* a tile that does not hold the index, or is too short */
	{
		struct tlog_tile t = {0, 1, 256};
		uint8_t *d = ts->data[0][0];
		assert_int_equal(tlog_tile_hash(&h, &t, d, 8192, 0), GD_EINVAL);
		t.n = 0;
		assert_int_equal(tlog_tile_hash(&h, &t, d, 8191, 0), GD_EINVAL);
		t.level = 7;
		assert_int_equal(tlog_tile_read(d, &t, store_read, ts->s),
		                 GD_EINVAL);
	}
	free(ts->s->h);
	free(ts->s);
	free(ts);
}

/* C2SP tlog-tiles entry bundles: uint16 lengths, then the entries, each
 * hashing to its level 0 tile's hash. */
static void test_bundles(void **state)
{
	struct store *s = malloc(sizeof(*s));
	struct buf b = BUF_INIT;
	uint8_t tile[TLOG_TILE_WIDTH * TLOG_HASH_LEN];
	struct tlog_tile t = {0, 1, 44};
	struct tlog_bundle_iter it;
	const uint8_t *e;
	size_t elen;
	static uint8_t big[TLOG_ENTRY_MAX + 1];

	(void)state;
	store_fill(s, 300);
	for (int i = 256; i < 300; i++) {
		char x[32];
		int len = snprintf(x, sizeof(x), "leaf %d", i);
		assert_int_equal(tlog_bundle_add(&b, x, (size_t)len), 0);
	}
	assert_int_equal(tlog_tile_read(tile, &t, store_read, s), 0);
	assert_int_equal(tlog_bundle_check(b.p, b.len, tile, 44 * 32), 0);
	/* one entry changed, one short, one too many, cut short */
	b.p[3] ^= 1;
	assert_int_equal(tlog_bundle_check(b.p, b.len, tile, 44 * 32),
	                 GD_ECRYPTO);
	b.p[3] ^= 1;
	assert_int_equal(tlog_bundle_check(b.p, b.len, tile, 45 * 32),
	                 GD_ECRYPTO);
	assert_int_equal(tlog_bundle_check(b.p, b.len, tile, 43 * 32),
	                 GD_ECRYPTO);
	assert_int_equal(tlog_bundle_check(b.p, b.len - 1, tile, 44 * 32),
	                 GD_EINVAL);
	assert_int_equal(tlog_bundle_check(b.p, 1, tile, 44 * 32), GD_EINVAL);
	assert_int_equal(tlog_bundle_check(b.p, b.len, tile, 44 * 32 + 1),
	                 GD_EINVAL);
	/* the longest entry fits, one byte more does not */
	buf_reset(&b);
	assert_int_equal(tlog_bundle_add(&b, big, sizeof(big)), GD_ETOOBIG);
	assert_int_equal(tlog_bundle_add(&b, big, TLOG_ENTRY_MAX), 0);
	assert_int_equal(tlog_bundle_add(&b, "", 0), 0);
	assert_int_equal((unsigned char)b.p[0], 0xff);
	assert_int_equal((unsigned char)b.p[1], 0xff);
	tlog_bundle_iter_init(&it, b.p, b.len);
	assert_int_equal(tlog_bundle_next(&it, &e, &elen), 1);
	assert_int_equal(elen, TLOG_ENTRY_MAX);
	assert_int_equal(tlog_bundle_next(&it, &e, &elen), 1);
	assert_int_equal(elen, 0);
	assert_int_equal(tlog_bundle_next(&it, &e, &elen), 0);
	buf_free(&b);
	free(s->h);
	free(s);
}

/* ---- hashes read out of tiles, checked ---------------------------------- */

struct server {
	struct store *s;
	int bad_level; /* flip a bit of this tile (bad_level -2: none) */
	int64_t bad_n;
	int fetches;
};

static int serve(uint8_t *out, const struct tlog_tile *t, void *payload)
{
	struct server *sv = payload;
	int err = tlog_tile_read(out, t, store_read, sv->s);

	sv->fetches++;
	if (!err && t->level == sv->bad_level && t->n == sv->bad_n)
		out[(size_t)t->w * TLOG_HASH_LEN - 1] ^= 1;
	return err;
}

/* In a tree of size, leaf j and its proofs, and the proof from the tree
 * of n, read out of tiles alone: what the table gives; a bad tile, root or
 * index refused. */
static void check_reader(struct server *sv, int64_t size, int64_t j, int64_t n)
{
	struct tlog_tile_reader rd = {size, {{0}}, serve, sv};
	struct tlog_hash h, p[TLOG_MAX_PROOF], q[TLOG_MAX_PROOF];
	int64_t idx = tlog_stored_index(0, j);
	size_t np, nq;

	sv->bad_level = -2;
	assert_int_equal(tlog_tree_hash(&rd.root, size, store_read, sv->s), 0);
	assert_int_equal(tlog_tile_read_hashes(&h, &idx, 1, &rd), 0);
	if (j < 1100)
		assert_memory_equal(h.b, sv->s->leaf[j].b, TLOG_HASH_LEN);
	assert_memory_equal(h.b, sv->s->h[idx].b, TLOG_HASH_LEN);
	assert_int_equal(
	        tlog_prove_record(p, &np, size, j, tlog_tile_read_hashes, &rd),
	        0);
	assert_int_equal(tlog_prove_record(q, &nq, size, j, store_read, sv->s),
	                 0);
	assert_int_equal(np, nq);
	assert_memory_equal(p, q, np * sizeof(*p));
	assert_int_equal(tlog_check_record(p, np, size, &rd.root, j, &h), 0);
	assert_int_equal(tlog_tree_hash(&h, n, tlog_tile_read_hashes, &rd), 0);
	assert_int_equal(tlog_tree_hash(&q[0], n, store_read, sv->s), 0);
	assert_memory_equal(h.b, q[0].b, TLOG_HASH_LEN);
	assert_int_equal(
	        tlog_prove_tree(p, &np, size, n, tlog_tile_read_hashes, &rd),
	        0);
	assert_int_equal(tlog_check_tree(p, np, size, &rd.root, n, &h), 0);
	/* the tile of leaf j changed, or its parent tile */
	sv->bad_level = 0;
	sv->bad_n = j >> 8;
	assert_int_equal(tlog_tile_read_hashes(&h, &idx, 1, &rd), GD_ECRYPTO);
	sv->bad_level = 1;
	sv->bad_n = j >> 16;
	if (size >= 65536 && j < (size & ~(int64_t)0xffff))
		assert_int_equal(tlog_tile_read_hashes(&h, &idx, 1, &rd),
		                 GD_ECRYPTO);
	sv->bad_level = -2;
	rd.root.b[0] ^= 1;
	assert_int_equal(tlog_tile_read_hashes(&h, &idx, 1, &rd), GD_ECRYPTO);
	rd.root.b[0] ^= 1;
	idx = tlog_stored_index(0, size);
	assert_int_equal(tlog_tile_read_hashes(&h, &idx, 1, &rd), GD_EINVAL);
}

static void test_tile_reader(void **state)
{
	static const int64_t sizes[] = {1,   2,    3,     255,   256,  257,
	                                511, 1000, 65535, 65536, 70000};
	struct store *s = malloc(sizeof(*s));
	struct server sv = {s, -2, 0, 0};

	(void)state;
	store_fill(s, 70000);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int64_t size = sizes[i];
		int64_t js[] = {0, size / 2, size - 1, (size * 7) / 9};
		for (size_t k = 0; k < sizeof(js) / sizeof(js[0]); k++)
			check_reader(&sv, size, js[k], 1 + js[k]);
	}
	/* every leaf and tree of a small log */
	for (int64_t j = 0; j < 300; j += 7)
		check_reader(&sv, 300, j, 300 - j);
	assert_true(sv.fetches > 500);
	free(s->h);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_tile_paths),
	        cmocka_unit_test(test_tiles_of_tree),
	        cmocka_unit_test(test_tile_data),
	        cmocka_unit_test(test_bundles),
	        cmocka_unit_test(test_tile_reader),
	};
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
