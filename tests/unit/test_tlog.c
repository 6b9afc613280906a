/*
 * test_tlog.c: common/tlog.h and tlog_tile.h, the transparency log's
 * Merkle tree, proofs, tiles and entry bundles.
 *
 * Independent answers: the certificate-transparency reference tree and its
 * proof vectors from github.com/transparency-dev/merkle (data/tlog/
 * merkle_vectors.inc, testonly/constants.go below), the tile paths of Go's
 * golang.org/x/mod/sumdb/tlog tlog_test.go and the examples of C2SP
 * tlog-tiles; and, for every tree of 1..64 leaves and every index, the
 * proofs of a direct recursive computation of RFC 6962 2.1.1 and 2.1.2
 * from the leaf hashes alone (no stored-hash table).
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

struct merkle_vec {
	const char *file;
	uint64_t a, b;      /* index and size, or size1 and size2 */
	const char *h1, *h2; /* root and leaf, or root1 and root2 */
	const char *proof;
	bool want_err;
};
#include "data/tlog/merkle_vectors.inc"

/* ---- a table of stored hashes, as a node keeps it ----------------------- */

struct store {
	struct tlog_hash *h;
	int64_t n;      /* hashes */
	int64_t leaves; /* entries */
	struct tlog_hash leaf[1100];
	int reads;
};

static int store_read(struct tlog_hash *out, const int64_t *idx, size_t n,
		      void *payload)
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
	assert_int_equal(tlog_stored_hashes(add, &nadd, s->leaves, &leaf,
					    store_read, s),
			 0);
	s->h = realloc(s->h, (size_t)(s->n + (int64_t)nadd) * sizeof(*s->h));
	memcpy(s->h + s->n, add, nadd * sizeof(*add));
	s->n += (int64_t)nadd;
	s->leaf[s->leaves++] = leaf;
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

/* ---- RFC 6962 straight from its text, over leaf hashes ------------------ */

static int64_t k_of(int64_t n)
{
	int64_t k = 1;
	while (k * 2 < n)
		k *= 2;
	return k;
}

static void mth(struct tlog_hash *out, const struct tlog_hash *d, int64_t n)
{
	struct tlog_hash l, r;
	int64_t k;

	if (n == 0) {
		tlog_empty_hash(out);
		return;
	}
	if (n == 1) {
		*out = d[0];
		return;
	}
	k = k_of(n);
	mth(&l, d, k);
	mth(&r, d + k, n - k);
	tlog_node_hash(out, &l, &r);
}

static void path(struct tlog_hash *out, size_t *np, int64_t m,
		 const struct tlog_hash *d, int64_t n)
{
	int64_t k;

	if (n <= 1)
		return;
	k = k_of(n);
	if (m < k) {
		path(out, np, m, d, k);
		mth(&out[(*np)++], d + k, n - k);
	} else {
		path(out, np, m - k, d + k, n - k);
		mth(&out[(*np)++], d, k);
	}
}

static void subproof(struct tlog_hash *out, size_t *np, int64_t m,
		     const struct tlog_hash *d, int64_t n, bool b)
{
	int64_t k;

	if (m == n) {
		if (!b)
			mth(&out[(*np)++], d, n);
		return;
	}
	k = k_of(n);
	if (m <= k) {
		subproof(out, np, m, d, k, b);
		mth(&out[(*np)++], d + k, n - k);
	} else {
		subproof(out, np, m - k, d + k, n - k, false);
		mth(&out[(*np)++], d, k);
	}
}

static size_t hex_hash(uint8_t *out, size_t cap, const char *hex, size_t len)
{
	size_t n = 0;
	assert_int_equal(sodium_hex2bin(out, cap, hex, len, NULL, &n, NULL), 0);
	return n;
}

/* ---- tests -------------------------------------------------------------- */

/* testonly/constants.go of transparency-dev/merkle: the reference tree's
 * leaves (hex) and the root hashes of its sizes 0..8. */
static void test_reference_tree(void **state)
{
	static const char *leaves[] = {
		"", "00", "10", "2021", "3031", "40414243", "5051525354555657",
		"606162636465666768696a6b6c6d6e6f"};
	static const char *roots[] = {
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
		"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
		"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
		"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};
	struct store *s = calloc(1, sizeof(*s));
	struct tlog_hash got, want;

	(void)state;
	for (int i = 0; i <= 8; i++) {
		assert_int_equal(tlog_tree_hash(&got, i, store_read, s), 0);
		hex_hash(want.b, sizeof(want.b), roots[i], strlen(roots[i]));
		assert_memory_equal(got.b, want.b, TLOG_HASH_LEN);
		if (i < 8) {
			uint8_t e[16];
			size_t n = hex_hash(e, sizeof(e), leaves[i],
					    strlen(leaves[i]));
			store_append(s, e, n);
		}
	}
	free(s->h);
	free(s);
}

/* A vector's proof (hex, space-separated); false if a hash is not 32
 * bytes (which our types cannot carry: the vector must expect an error). */
static bool vec_proof(struct tlog_hash *p, size_t *np, const char *hex)
{
	*np = 0;
	while (*hex) {
		const char *sp = strchr(hex, ' ');
		size_t len = sp ? (size_t)(sp - hex) : strlen(hex);
		if (len != 2 * TLOG_HASH_LEN || *np >= TLOG_MAX_PROOF)
			return false;
		hex_hash(p[(*np)++].b, TLOG_HASH_LEN, hex, len);
		hex += len + (sp != NULL);
	}
	return true;
}

static bool vec_hash(struct tlog_hash *h, const char *hex)
{
	if (strlen(hex) != 2 * TLOG_HASH_LEN)
		return false;
	hex_hash(h->b, TLOG_HASH_LEN, hex, strlen(hex));
	return true;
}

static void test_merkle_vectors(void **state)
{
	struct tlog_hash p[TLOG_MAX_PROOF], h1, h2;
	size_t np;
	int happy = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(inclusion_vectors) /
				       sizeof(inclusion_vectors[0]); i++) {
		const struct merkle_vec *v = &inclusion_vectors[i];
		int err = GD_EINVAL;
		if (vec_proof(p, &np, v->proof) && vec_hash(&h1, v->h1) &&
		    vec_hash(&h2, v->h2))
			err = tlog_check_record(p, np, (int64_t)v->b, &h1,
						(int64_t)v->a, &h2);
		if ((err != 0) != v->want_err)
			fail_msg("%s: %d", v->file, err);
		happy += !v->want_err;
	}
	for (size_t i = 0; i < sizeof(consistency_vectors) /
				       sizeof(consistency_vectors[0]); i++) {
		const struct merkle_vec *v = &consistency_vectors[i];
		int err = GD_EINVAL;
		if (!vec_proof(p, &np, v->proof) || !vec_hash(&h1, v->h1) ||
		    !vec_hash(&h2, v->h2)) {
			/* hashes not 32 bytes long, which a tlog_hash
			 * cannot carry: only one such vector expects
			 * success (12-byte "roots" of equal sizes) */
			if (!v->want_err)
				assert_non_null(strstr(
					v->file, "sizes-are-equal-one-and-"
						 "proof-is-empty"));
			continue;
		}
		{
			err = tlog_check_tree(p, np, (int64_t)v->b, &h2,
					      (int64_t)v->a, &h1);
		}
		if ((err != 0) != v->want_err)
			fail_msg("%s: %d", v->file, err);
		happy += !v->want_err;
	}
	assert_true(happy >= 10);
}

static void test_stored_index(void **state)
{
	(void)state;
	for (int l = 0; l < 10; l++)
		for (int64_t n = 0; n < 100; n++) {
			int l2;
			int64_t n2;
			tlog_split_stored_index(tlog_stored_index(l, n), &l2,
						&n2);
			assert_int_equal(l2, l);
			assert_int_equal(n2, n);
		}
	/* the first hashes: leaf 0, leaf 1, node (1,0), leaf 2, leaf 3,
	 * (1,1), (2,0), leaf 4 */
	assert_int_equal(tlog_stored_index(1, 0), 2);
	assert_int_equal(tlog_stored_index(2, 0), 6);
	assert_int_equal(tlog_stored_index(0, 4), 7);
	assert_int_equal(tlog_stored_count(0), 0);
	assert_int_equal(tlog_stored_count(4), 7);
	assert_int_equal(tlog_stored_count(1000000), 1999993);
}

/* Every tree of 1..64 leaves: its hash, every inclusion proof and every
 * consistency proof as RFC 6962 defines them; each flipped bit, wrong
 * root, index or size refused. */
static void test_proofs_all_small(void **state)
{
	struct store *s = malloc(sizeof(*s));
	struct tlog_hash root[65], p[TLOG_MAX_PROOF], q[TLOG_MAX_PROOF];
	size_t np, nq;

	(void)state;
	store_fill(s, 64);
	for (int64_t t = 1; t <= 64; t++) {
		struct tlog_hash want;
		assert_int_equal(tlog_tree_hash(&root[t], t, store_read, s), 0);
		mth(&want, s->leaf, t);
		assert_memory_equal(root[t].b, want.b, TLOG_HASH_LEN);
	}
	for (int64_t t = 1; t <= 64; t++) {
		for (int64_t i = 0; i < t; i++) {
			assert_int_equal(tlog_prove_record(p, &np, t, i,
							   store_read, s),
					 0);
			nq = 0;
			path(q, &nq, i, s->leaf, t);
			assert_int_equal(np, nq);
			assert_memory_equal(p, q, np * sizeof(*p));
			assert_int_equal(tlog_check_record(p, np, t, &root[t],
							   i, &s->leaf[i]),
					 0);
			for (size_t k = 0; k < np; k++) {
				p[k].b[k % 32] ^= 1;
				assert_int_equal(tlog_check_record(p, np, t,
								   &root[t], i,
								   &s->leaf[i]),
						 GD_ECRYPTO);
				p[k].b[k % 32] ^= 1;
			}
			root[t].b[31] ^= 0x80;
			assert_int_not_equal(tlog_check_record(p, np, t,
							       &root[t], i,
							       &s->leaf[i]),
					     0);
			root[t].b[31] ^= 0x80;
			if (t > 1)
				assert_int_not_equal(
					tlog_check_record(p, np, t, &root[t],
							  (i + 1) % t,
							  &s->leaf[i]),
					0);
			/* (Another size: RFC 6962's proofs do not bind it:
			 * leaf 0's proof in 3 leaves has the shape of one
			 * in 4.  The signed checkpoint binds size to root;
			 * test_note refuses a checkpoint with a flipped
			 * size.) */
			if (np)
				assert_int_not_equal(
					tlog_check_record(p, np - 1, t,
							  &root[t], i,
							  &s->leaf[i]),
					0);
		}
		for (int64_t n = 1; n <= t; n++) {
			struct tlog_hash bad;
			assert_int_equal(tlog_prove_tree(p, &np, t, n,
							 store_read, s),
					 0);
			nq = 0;
			subproof(q, &nq, n, s->leaf, t, true);
			assert_int_equal(np, nq);
			assert_memory_equal(p, q, np * sizeof(*p));
			assert_int_equal(tlog_check_tree(p, np, t, &root[t], n,
							 &root[n]),
					 0);
			for (size_t k = 0; k < np; k++) {
				p[k].b[0] ^= 1;
				assert_int_equal(tlog_check_tree(p, np, t,
								 &root[t], n,
								 &root[n]),
						 GD_ECRYPTO);
				p[k].b[0] ^= 1;
			}
			bad = root[n];
			bad.b[5] ^= 4;
			assert_int_not_equal(
				tlog_check_tree(p, np, t, &root[t], n, &bad),
				0);
			if (n < t)
				assert_int_not_equal(
					tlog_check_tree(p, np, t, &root[t],
							n + 1, &root[n]),
					0);
		}
	}
	/* arguments out of range */
	assert_int_equal(tlog_prove_record(p, &np, 4, 4, store_read, s),
			 GD_EINVAL);
	assert_int_equal(tlog_prove_record(p, &np, 4, -1, store_read, s),
			 GD_EINVAL);
	assert_int_equal(tlog_prove_tree(p, &np, 4, 0, store_read, s),
			 GD_EINVAL);
	assert_int_equal(tlog_prove_tree(p, &np, 4, 5, store_read, s),
			 GD_EINVAL);
	assert_int_equal(tlog_check_tree(p, 0, 4, &root[4], 0, &root[4]),
			 GD_EINVAL);
	assert_int_equal(
		tlog_check_record(p, TLOG_MAX_PROOF + 1, 4, &root[4], 1, p),
		GD_ECRYPTO);
	free(s->h);
	free(s);
}

static int fail_read(struct tlog_hash *out, const int64_t *idx, size_t n,
		     void *payload)
{
	(void)out, (void)idx, (void)n, (void)payload;
	return GD_EIO;
}

static void test_read_error_passed_up(void **state)
{
	struct tlog_hash h, p[TLOG_MAX_PROOF];
	size_t np;

	(void)state;
	assert_int_equal(tlog_tree_hash(&h, 5, fail_read, NULL), GD_EIO);
	assert_int_equal(tlog_prove_record(p, &np, 5, 1, fail_read, NULL),
			 GD_EIO);
	assert_int_equal(tlog_prove_tree(p, &np, 5, 3, fail_read, NULL),
			 GD_EIO);
	assert_int_equal(tlog_stored_hashes(p, &np, 3, &h, fail_read, NULL),
			 GD_EIO);
	/* no read needed: no call */
	assert_int_equal(tlog_tree_hash(&h, 0, fail_read, NULL), 0);
	assert_int_equal(tlog_prove_record(p, &np, 1, 0, fail_read, NULL), 0);
	assert_int_equal(np, 0);
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
		{"tile/entries/x003/x057/500", {TLOG_TILE_ENTRIES, 3057500, 256}},
		{"tile/entries/x001/x234/067.p/255",
		 {TLOG_TILE_ENTRIES, 1234067, 255}},
		{"tile/0/x001/x234/067", {0, 1234067, 256}},
		{"tile/63/000.p/1", {63, 0, 1}},
		{"tile/1/x009/x223/x372/x036/x854/x775/807",
		 {1, INT64_MAX, 256}},
	};
	static const char *bad[] = {
		"tile/5/123/456/078", "tile/-1/123", "tile/0/x000/001",
		"tile/00/001", "tile/64/000", "tile/0/001.p/256",
		"tile/0/001.p/0", "tile/0/001.p/05", "tile/0/1", "tile/0/0001",
		"tile/0/001/", "tile/0/001.p/", "tile/data/001", "tile/8/0/001",
		"tile/entries/001.p/1x", "", "tile/", "tile/0/", "tile/0/x001",
		"tile/0/x001/", "tile/0/001.p/1/", "tile/entries", "tile/1/01",
		"tile/0/x999/x999/x999/x999/x999/x999/999",
		"tile/0/x009/x223/x372/x036/x854/x775/808",
		"tile/0/x1/x2/x3/x4/x5/x6/x7/x8/001", "Tile/0/001",
		"tile/0/001.P/5", "tile/0/-01",
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
	memcpy(ts->data[t->level][t->n], data,
	       (size_t)t->w * TLOG_HASH_LEN);
	ts->w[t->level][t->n] = t->w;
	return 0;
}

/* The stored hash at index, read out of the tiles the tree has. */
static void hash_from_tiles(struct tlog_hash *out, struct tiles *ts,
			    int64_t index)
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
		assert_int_equal(tlog_tree_hash(&root, i + 1, store_read,
						ts->s),
				 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference_tree),
		cmocka_unit_test(test_merkle_vectors),
		cmocka_unit_test(test_stored_index),
		cmocka_unit_test(test_proofs_all_small),
		cmocka_unit_test(test_read_error_passed_up),
		cmocka_unit_test(test_tile_paths),
		cmocka_unit_test(test_tiles_of_tree),
		cmocka_unit_test(test_tile_data),
		cmocka_unit_test(test_bundles),
	};
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
