/*
 * test_ops_tlog.c: node/state/ops_tlog.c and tlogstore.c, the
 * transparency log's leaves as a site holds them (issue 21).
 *
 *  - Leaves applied in order: each origin's tree grows by one, and its
 *    root from the stored hashes equals tlog_tree_hash over a table made
 *    here, in memory, from the texts' leaf hashes alone; the digest covers
 *    the leaves (ops_verify agrees).
 *  - A leaf beyond the tree size is refused (counted, not kept), its
 *    operation still applied so the stream goes on.
 *  - A second text at an index held is kept as a fork, beside the first,
 *    which stays in the tree.
 *  - State transfer: the records of a site merged into a new site and
 *    into one that holds a prefix give the same leaves, forks, tree and
 *    digest; merging again changes nothing.
 *  - ops_check refuses a leaf of another origin, index or bad text.
 *  - tlogstore_verify (log verify) finds a stored hash changed, a leaf
 *    removed and a size that lies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "config.h"
#include "digest.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "ops_tlog.h"
#include "pushleaf.h"
#include "records.h"
#include "store.h"
#include "tlog.h"
#include "tlogstore.h"

#define EPOCH UINT64_C(0x00e90c0000000003)
#define OID0  "0000000000000000000000000000000000000000"
#define OID1  "1111111111111111111111111111111111111111"

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
        "test_ops_tlog seal key 012345678";

enum { S, A, B, NODES };

struct node {
	char dir[64], site[16];
	struct config cfg;
	struct store *s;
	struct ops *o;
	uint64_t seq; /* of origin "origa" applied here */
};

struct fixture {
	struct node n[NODES];
};

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_ops_tlog", LOG_LVL_ERROR);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	for (int i = 0; i < NODES; i++) {
		struct node *n = &f->n[i];
		snprintf(n->site, sizeof(n->site), "node%c", "sab"[i]);
		n->cfg.site = n->site;
		if (fx_mkdtemp(n->dir, sizeof(n->dir), "test_ops_tlog", true) <
		    0)
			return -1;
		n->cfg.repo_dir = n->dir;
		if (fx_store_open(&n->s, &n->o, n->dir, &n->cfg, seal_key) < 0)
			return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < NODES; i++) {
		fx_store_close(&f->n[i].s, &f->n[i].o);
		if (fx_rmtree(f->n[i].dir) < 0)
			return -1;
	}
	free(f);
	return 0;
}

/* The text of leaf index of origin; variant changes the pushed tip. */
static void
leaf_text(struct buf *out, const char *origin, uint64_t index, int variant)
{
	struct pushleaf_ref r = {"refs/heads/main", OID0, OID1};
	struct pushleaf l = {.index = index,
	                     .time_ms = 1764892800000 + (int64_t)index,
	                     .nrefs = 1,
	                     .refs = &r};

	snprintf(l.origin, sizeof(l.origin), "%s", origin);
	snprintf(l.repo, sizeof(l.repo), "demo");
	snprintf(l.user, sizeof(l.user), "alice");
	if (variant)
		r.new_[0] = (char)('1' + variant);
	assert_int_equal(pushleaf_format(out, &l), 0);
}

/* Apply PushLeaf(origin, index, text) at n as origin's next operation. */
static void apply_leaf(struct node *n,
                       const char *origin,
                       uint64_t index,
                       const struct buf *text)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__PushLeaf l = GRANTD__V1__PUSH_LEAF__INIT;
	struct store_batch *b;
	bool applied = false;

	l.origin = (char *)origin;
	l.index = index, l.has_index = 1;
	l.text.data = (uint8_t *)text->p, l.text.len = text->len;
	l.has_text = 1;
	op.origin = (char *)origin;
	op.epoch = EPOCH, op.has_epoch = 1;
	op.seq = ++n->seq, op.has_seq = 1;
	op.hlc = (uint64_t)1764892800000 << 16 | n->seq, op.has_hlc = 1;
	op.body_case = GRANTD__V1__OP__BODY_PUSH_LEAF;
	op.push_leaf = &l;
	assert_int_equal(store_batch_new(&b, n->s), 0);
	assert_int_equal(ops_apply(n->o, b, &op, &applied), 0);
	assert_true(applied);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
}

static void apply_leaves(struct node *n, uint64_t from, uint64_t to)
{
	struct buf t = BUF_INIT;

	for (uint64_t i = from; i < to; i++) {
		leaf_text(&t, "origa", i, 0);
		apply_leaf(n, "origa", i, &t);
	}
	buf_free(&t);
}

/* ---- the tree computed here, apart from the store ---- */

struct memtab {
	struct tlog_hash *h;
	size_t n, cap;
};

static int
mem_read(struct tlog_hash *out, const int64_t *idx, size_t n, void *payload)
{
	const struct memtab *m = payload;

	for (size_t i = 0; i < n; i++) {
		if (idx[i] < 0 || (size_t)idx[i] >= m->n)
			return GD_EINVAL;
		out[i] = m->h[idx[i]];
	}
	return 0;
}

/* The root of origin's first n leaves as leaf_text makes them. */
static void root_of_texts(struct tlog_hash *out, uint64_t n)
{
	struct memtab m = {0};
	struct buf t = BUF_INIT;

	for (uint64_t i = 0; i < n; i++) {
		struct tlog_hash leaf, add[TLOG_MAX_STORED];
		size_t na;
		leaf_text(&t, "origa", i, 0);
		tlog_leaf_hash(&leaf, t.p, t.len);
		assert_int_equal(tlog_stored_hashes(add, &na, (int64_t)i, &leaf,
		                                    mem_read, &m),
		                 0);
		m.h = realloc(m.h, (m.n + na) * sizeof(*m.h));
		assert_non_null(m.h);
		memcpy(m.h + m.n, add, na * sizeof(*add));
		m.n += na;
	}
	assert_int_equal(tlog_tree_hash(out, (int64_t)n, mem_read, &m), 0);
	free(m.h);
	buf_free(&t);
}

static void assert_tree(struct node *n, uint64_t want)
{
	struct tlog_hash stored, direct;
	uint64_t size;

	assert_int_equal(tlogstore_size(n->s, NULL, "origa", &size), 0);
	assert_int_equal(size, want);
	assert_int_equal(tlogstore_root(&stored, n->s, NULL, "origa", size), 0);
	root_of_texts(&direct, want);
	assert_true(tlog_hash_eq(&stored, &direct));
}

static void assert_verified(struct node *n, uint64_t leaves, uint64_t forks)
{
	struct ops_verify *ov = calloc(1, sizeof(*ov));
	struct tlogstore_verify v;
	struct tlog_hash direct;

	assert_non_null(ov);
	assert_int_equal(ops_verify(n->o, ov), 0);
	assert_true(ov->equal);
	free(ov);
	assert_int_equal(tlogstore_verify(&v, n->s), 0);
	assert_int_equal(v.brk, TLOGSTORE_OK);
	assert_int_equal(v.leaves, leaves);
	assert_int_equal(v.forks, forks);
	assert_int_equal(v.ntrees, leaves ? 1 : 0);
	if (leaves) {
		root_of_texts(&direct, leaves);
		assert_true(tlog_hash_eq(&v.trees[0].root, &direct));
	}
	tlogstore_verify_free(&v);
}

/* ---- the tests ---- */

static void test_in_order(void **state)
{
	struct fixture *f = *state;
	struct node *n = &f->n[A];

	assert_tree(n, 0);
	for (uint64_t i = 0; i < 13; i++) {
		apply_leaves(n, i, i + 1);
		assert_tree(n, i + 1);
	}
	assert_verified(n, 13, 0);
	assert_int_equal(ops_count(n->o, CF_TLEAVES, 0), 13);
	assert_int_equal(ops_tlog_refused(n->o), 0);
}

/* A leaf that arrives before the ones under it (a state transfer under
 * way, a live operation first: integration/git_sites under TSan lost one
 * for good when it was refused) is kept and joins the tree once the gap is
 * filled. */
static void test_out_of_order_waits(void **state)
{
	struct fixture *f = *state;
	struct node *n = &f->n[A], *m = &f->n[B];
	struct buf t = BUF_INIT, k = BUF_INIT, v = BUF_INIT;

	apply_leaves(n, 0, 2);
	/* index 3 before 2 */
	leaf_text(&t, "origa", 3, 0);
	apply_leaf(n, "origa", 3, &t);
	assert_int_equal(ops_tlog_refused(n->o), 0);
	records_key_tleaf(&k, "origa", 3);
	assert_int_equal(store_get(n->s, NULL, CF_TLEAVES, k.p, k.len, &v), 0);
	assert_tree(n, 2);
	/* 2 comes: the tree takes 2 and 3 */
	apply_leaves(n, 2, 4);
	assert_tree(n, 4);
	assert_verified(n, 4, 0);
	/* another node given them newest first ends with the same tree */
	for (int i = 3; i >= 0; i--) {
		buf_reset(&t);
		leaf_text(&t, "origa", (uint64_t)i, 0);
		apply_leaf(m, "origa", (uint64_t)i, &t);
	}
	assert_tree(m, 4);
	assert_verified(m, 4, 0);
	buf_free(&t);
	buf_free(&k);
	buf_free(&v);
}

static void test_fork_kept(void **state)
{
	struct fixture *f = *state;
	struct node *n = &f->n[A];
	struct buf t = BUF_INIT, k = BUF_INIT, v = BUF_INIT;
	struct tlog_hash h;
	Grantd__V1__PushLeaf *l;

	apply_leaves(n, 0, 3);
	leaf_text(&t, "origa", 1, 5);
	apply_leaf(n, "origa", 1, &t);
	/* the same fork again: kept once */
	apply_leaf(n, "origa", 1, &t);
	/* the first text stays in the tree */
	assert_tree(n, 3);
	tlog_leaf_hash(&h, t.p, t.len);
	records_key_tleaf_fork(&k, "origa", 1, h.b);
	assert_int_equal(store_get(n->s, NULL, CF_TLEAVES, k.p, k.len, &v), 0);
	l = grantd__v1__push_leaf__unpack(NULL, v.len, (const uint8_t *)v.p);
	assert_non_null(l);
	assert_int_equal(l->text.len, t.len);
	assert_memory_equal(l->text.data, t.p, t.len);
	grantd__v1__push_leaf__free_unpacked(l, NULL);
	assert_verified(n, 3, 1);
	assert_int_equal(ops_tlog_refused(n->o), 0);
	buf_free(&t);
	buf_free(&k);
	buf_free(&v);
}

/* Merge src's leaves into n, as a state transfer does. */
static void merge_leaves(struct node *n, struct node *src)
{
	struct store_batch *b;
	struct store_iter *it;
	struct buf v = BUF_INIT, why = BUF_INIT;
	const char *key;
	size_t klen;

	assert_int_equal(store_batch_new(&b, n->s), 0);
	store_iter_new(&it, src->s, NULL, CF_TLEAVES, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0)
		if (ops_merge_record(n->o, b, CF_TLEAVES, v.p, v.len, NULL,
		                     &why) < 0)
			fail_msg("leaf refused: %s", buf_str(&why));
	store_iter_free(&it);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
	buf_free(&v);
	buf_free(&why);
}

static void test_state_transfer(void **state)
{
	struct fixture *f = *state;
	struct node *n = f->n;
	struct buf t = BUF_INIT;

	apply_leaves(&n[S], 0, 9);
	leaf_text(&t, "origa", 4, 2);
	apply_leaf(&n[S], "origa", 4, &t);
	/* B holds a prefix already */
	apply_leaves(&n[B], 0, 3);
	merge_leaves(&n[A], &n[S]);
	merge_leaves(&n[B], &n[S]);
	merge_leaves(&n[A], &n[S]); /* again: nothing changes */
	for (int i = S; i <= B; i++) {
		assert_tree(&n[i], 9);
		assert_verified(&n[i], 9, 1);
		assert_memory_equal(ops_digest(n[i].o), ops_digest(n[S].o),
		                    DIGEST_LEN);
	}
	/* and B's stream goes on after the snapshot, at its new size */
	apply_leaves(&n[B], 9, 10);
	assert_tree(&n[B], 10);
	buf_free(&t);
}

static void test_check(void **state)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__PushLeaf l = GRANTD__V1__PUSH_LEAF__INIT;
	struct buf t = BUF_INIT, why = BUF_INIT;

	(void)state;
	leaf_text(&t, "origa", 7, 0);
	l.origin = "origa";
	l.index = 7, l.has_index = 1;
	l.text.data = (uint8_t *)t.p, l.text.len = t.len, l.has_text = 1;
	op.origin = "origa";
	op.epoch = EPOCH, op.has_epoch = 1;
	op.seq = 1, op.has_seq = 1;
	op.hlc = 1, op.has_hlc = 1;
	op.body_case = GRANTD__V1__OP__BODY_PUSH_LEAF;
	op.push_leaf = &l;
	assert_int_equal(ops_check(&op, &why), 0);
	l.index = 8;
	assert_int_equal(ops_check(&op, &why), GD_EPROTO);
	l.index = 7;
	op.origin = "origb";
	assert_int_equal(ops_check(&op, &why), GD_EPROTO);
	op.origin = "origa";
	l.text.len--; /* the last line without its "\n" */
	assert_int_equal(ops_check(&op, &why), GD_EPROTO);
	l.has_text = 0, l.text.len = 0;
	assert_int_equal(ops_check(&op, &why), GD_EPROTO);
	buf_free(&t);
	buf_free(&why);
}

/* Change n's store under it (no operation), then verify names it. */
static void assert_break(struct node *n, enum tlogstore_break want, uint64_t at)
{
	struct tlogstore_verify v;

	assert_int_equal(tlogstore_verify(&v, n->s), 0);
	if (v.brk != want)
		fail_msg("break %d (%s), want %d", v.brk,
		         tlogstore_break_text(v.brk), want);
	assert_string_equal(v.brk_site, "origa");
	assert_int_equal(v.brk_at, at);
	tlogstore_verify_free(&v);
}

static void test_verify_breaks(void **state)
{
	struct fixture *f = *state;
	struct node *n = &f->n[A];
	struct store_batch *b;
	struct buf k = BUF_INIT, v = BUF_INIT;
	uint8_t bad[TLOG_HASH_LEN] = {1};

	apply_leaves(n, 0, 6);
	/* leaf 4's stored hash changed */
	records_key_thash(&k, "origa", tlog_stored_index(0, 4));
	assert_int_equal(store_get(n->s, NULL, CF_THASHES, k.p, k.len, &v), 0);
	assert_int_equal(store_batch_new(&b, n->s), 0);
	store_put(b, CF_THASHES, k.p, k.len, bad, sizeof(bad));
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	assert_break(n, TLOGSTORE_WRONG_LEAF, 4);
	/* put back; a higher hash changed: only the root shows it */
	assert_int_equal(store_batch_new(&b, n->s), 0);
	store_put(b, CF_THASHES, k.p, k.len, v.p, v.len);
	records_key_thash(&k, "origa", tlog_stored_index(2, 0));
	store_put(b, CF_THASHES, k.p, k.len, bad, sizeof(bad));
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	assert_break(n, TLOGSTORE_WRONG_ROOT, 6);
	/* leaf 2 removed */
	assert_int_equal(store_batch_new(&b, n->s), 0);
	records_key_tleaf(&k, "origa", 2);
	store_del(b, CF_TLEAVES, k.p, k.len);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	assert_break(n, TLOGSTORE_GAP, 2);
	buf_free(&k);
	buf_free(&v);
}

static void test_verify_size(void **state)
{
	struct fixture *f = *state;
	struct node *n = &f->n[A];
	struct store_batch *b;
	struct buf k = BUF_INIT;

	apply_leaves(n, 0, 3);
	/* the last leaf removed from the end: the size says 3 */
	assert_int_equal(store_batch_new(&b, n->s), 0);
	records_key_tleaf(&k, "origa", 2);
	store_del(b, CF_TLEAVES, k.p, k.len);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	assert_break(n, TLOGSTORE_WRONG_SIZE, 3);
	buf_free(&k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_in_order, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_out_of_order_waits,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_fork_kept, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_state_transfer, setup,
	                                        teardown),
	        cmocka_unit_test(test_check),
	        cmocka_unit_test_setup_teardown(test_verify_breaks, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_verify_size, setup,
	                                        teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
