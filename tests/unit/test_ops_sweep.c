/*
 * test_ops_sweep.c: node/state/ops_sweep.c, housekeeping through the
 * batch: the grant sweep and the operation log's truncation.
 *
 * On real stores in a temporary directory (fixture.h's fx_site):
 *  - the sweep drops only grants that ended more than OPS_GRANT_GRACE_S
 *    ago (not one that ended within the grace, not a live one), at most
 *    max per call; the digest and the counts follow, so the swept site
 *    holds the digest of a site that never had the grant;
 *  - truncation cuts only log entries stamped before the cutoff, in every
 *    stream, at most max per call, and keeps the rest of each stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "records.h"
#include "store.h"

/* the sweep's now (unix seconds) */
#define NOW 2000000000LL

static int setup(void **state)
{
	struct fx_sites *f;
	int rc = fx_sites_open(&f, "test_ops_sweep");

	*state = f;
	return rc < 0 || fx_site_open(&f->n[0], f->dir, "node0") < 0 ||
	                       fx_site_open(&f->n[1], f->dir, "node1") < 0
	               ? -1
	               : 0;
}

static void apply(struct fx_site *n, Grantd__V1__Op *const *ops, size_t k)
{
	assert_int_equal(fx_apply(n->o, n->s, ops, k), 0);
}

/* One sweep at NOW in a batch of its own, committed: how many went. */
static int sweep(struct fx_site *n, int max)
{
	struct store_batch *b;
	int k;

	assert_int_equal(store_batch_new(&b, n->s), 0);
	k = ops_sweep_grants(n->o, b, NOW, max);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	return k;
}

static bool has_grant(struct fx_site *n, const char *user, const char *net)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	records_key_grant(&k, user, net, "");
	rc = store_get(n->s, NULL, CF_GRANTS, k.p, k.len, &v);
	assert_true(rc == 0 || rc == GD_ENOTFOUND);
	buf_free(&k);
	buf_free(&v);
	return rc == 0;
}

static void test_sweep_only_past_grace(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *a = &f->n[0], *b = &f->n[1];
	struct ops_verify v;
	struct fx_op t[3];
	const int64_t past = NOW - OPS_GRANT_GRACE_S - 1;
	const int64_t within = NOW - OPS_GRANT_GRACE_S + 1;

	apply(a,
	      (Grantd__V1__Op *[]){
	              fx_op_grant(&t[0], "sitea", 1, FX_HLC(100, 0), "ann",
	                          "192.0.2.1", past, false),
	              fx_op_grant(&t[1], "sitea", 2, FX_HLC(101, 0), "ann",
	                          "192.0.2.2", within, false),
	              fx_op_grant(&t[2], "sitea", 3, FX_HLC(102, 0), "ann",
	                          "192.0.2.3", NOW + 100, false),
	      },
	      3);
	assert_int_equal(sweep(a, 1000), 1);
	assert_false(has_grant(a, "ann", "192.0.2.1"));
	assert_true(has_grant(a, "ann", "192.0.2.2"));
	assert_true(has_grant(a, "ann", "192.0.2.3"));
	assert_int_equal(sweep(a, 1000), 0);
	/* node1 got the two kept grants only, with the same stamps: the
	 * same records, so the same digest */
	t[1].op.seq = 1, t[2].op.seq = 2;
	apply(b, (Grantd__V1__Op *[]){&t[1].op, &t[2].op}, 2);
	assert_memory_equal(ops_digest(a->o), ops_digest(b->o), DIGEST_LEN);
	/* and what was kept in memory matches the records: digest, counts */
	assert_int_equal(ops_verify(a->o, &v), 0);
	assert_true(v.equal);
	assert_int_equal(ops_count(a->o, CF_GRANTS, NOW), 1);
}

static void test_sweep_at_most_max(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *a = &f->n[0];
	struct fx_op t[5];
	Grantd__V1__Op *ops[5];
	char nets[5][16];

	for (int i = 0; i < 5; i++) {
		snprintf(nets[i], sizeof(nets[i]), "192.0.2.%d", i + 1);
		ops[i] = fx_op_grant(&t[i], "sitea", (uint64_t)i + 1,
		                     FX_HLC(100 + i, 0), "ann", nets[i], 1000,
		                     false);
	}
	apply(a, ops, 5);
	assert_int_equal(sweep(a, 2), 2);
	assert_int_equal(sweep(a, 2), 2);
	assert_int_equal(sweep(a, 2), 1);
	assert_int_equal(sweep(a, 2), 0);
	for (int i = 0; i < 5; i++)
		assert_false(has_grant(a, "ann", nets[i]));
}

/* How many log entries of (origin, FX_EPOCH) n holds, and whether seq is
 * one of them. */
static int
log_entries(struct fx_site *n, const char *origin, uint64_t seq, bool *has)
{
	struct store_iter *it;
	struct buf k = BUF_INIT, v = BUF_INIT;
	const char *key;
	size_t klen;
	int c = 0;

	records_key_oplog(&k, origin, FX_EPOCH, seq);
	*has = store_get(n->s, NULL, CF_OPLOG, k.p, k.len, &v) == 0;
	/* the stream's prefix: origin \0 epoch */
	assert_int_equal(
	        store_iter_new(&it, n->s, NULL, CF_OPLOG, k.p, k.len - 8), 0);
	while (store_iter_next(it, &key, &klen, &v) > 0)
		c++;
	store_iter_free(&it);
	buf_free(&k);
	buf_free(&v);
	return c;
}

static void test_truncate_only_older(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct fx_op t[8];
	Grantd__V1__Op *ops[8];
	char users[8][8];
	bool has;

	/* sitea: five entries stamped 100..104 ms; siteb: 100, 200 and
	 * 20000 ms */
	for (int i = 0; i < 8; i++) {
		bool b = i >= 5;
		snprintf(users[i], sizeof(users[i]), "u%d", i);
		ops[i] = fx_op_user(&t[i], b ? "siteb" : "sitea",
		                    (uint64_t)(b ? i - 4 : i + 1),
		                    FX_HLC(i == 7 ? 20000
		                           : b    ? 100 * (i - 4)
		                                  : 100 + i,
		                           0),
		                    users[i], NULL, false);
	}
	apply(n, ops, 8);
	assert_int_equal(log_entries(n, "sitea", 1, &has), 5);
	assert_int_equal(log_entries(n, "siteb", 1, &has), 3);
	/* at most three of the seven older than 1000 ms */
	assert_int_equal(ops_truncate_log(n->o, 1000, 3), 3);
	assert_int_equal(log_entries(n, "sitea", 4, &has), 2);
	assert_true(has);
	assert_int_equal(ops_truncate_log(n->o, 1000, 100), 4);
	assert_int_equal(log_entries(n, "sitea", 5, &has), 0);
	assert_int_equal(log_entries(n, "siteb", 3, &has), 1);
	assert_true(has); /* the recent one stays */
	assert_int_equal(ops_truncate_log(n->o, 1000, 100), 0);
	/* the vector is not the log: nothing of it went */
	assert_int_equal(ops_vv_get(n->o, NULL, "sitea", FX_EPOCH), 5);
	assert_int_equal(ops_vv_get(n->o, NULL, "siteb", FX_EPOCH), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_sweep_only_past_grace,
	                                        setup, fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_sweep_at_most_max, setup,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_truncate_only_older, setup,
	                                        fx_sites_teardown),
	};

	if (fx_group_setup("test_ops_sweep", LOG_LVL_WARN) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
