/*
 * test_ops_digest.c: node/state/ops_digest.c, the state digest (digest.h)
 * kept per replicated family as records change.
 *
 * On real stores in a temporary directory (fixture.h's fx_site):
 *  - the digest changes with each record that changes, not with a
 *    duplicate, and is always the XOR of the records' hashes, live and
 *    as committed;
 *  - two sites that applied the same operations in another order hold
 *    the same digest; one that lacks an operation does not;
 *  - a record changes its own family's share only, and the public digest
 *    (what a mirror compares) only when its family is one a mirror holds;
 *  - ops_verify finds a stored digest that parted from the records, and
 *    at open the records win.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "digest.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "records.h"
#include "store.h"

static int setup(void **state)
{
	struct fx_sites *f;
	int rc = fx_sites_open(&f, "test_ops_digest");

	*state = f;
	return rc < 0 || fx_site_open(&f->n[0], f->dir, "node0") < 0 ||
	                       fx_site_open(&f->n[1], f->dir, "node1") < 0 ||
	                       fx_site_open(&f->n[2], f->dir, "node2") < 0
	               ? -1
	               : 0;
}

static void apply(struct fx_site *n, Grantd__V1__Op *const *ops, size_t k)
{
	assert_int_equal(fx_apply(n->o, n->s, ops, k), 0);
}

/* The XOR of the hashes of n's committed replicated records. */
static void records_digest(struct fx_site *n, uint8_t d[DIGEST_LEN])
{
	struct buf v = BUF_INIT;

	memset(d, 0, DIGEST_LEN);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		struct store_iter *it;
		const char *key;
		size_t klen;
		if (!records_replicated(cf))
			continue;
		assert_int_equal(store_iter_new(&it, n->s, NULL, cf, "", 0), 0);
		while (store_iter_next(it, &key, &klen, &v) > 0)
			digest_toggle(d, cf, key, klen, v.p, v.len);
		store_iter_free(&it);
	}
	buf_free(&v);
}

/* n's live digest is its records', and so is the one it committed. */
static void digest_is_records(struct fx_site *n)
{
	uint8_t d[DIGEST_LEN];
	struct buf v = BUF_INIT;

	records_digest(n, d);
	assert_memory_equal(ops_digest(n->o), d, DIGEST_LEN);
	assert_int_equal(store_get(n->s, NULL, CF_META, "digest", 6, &v), 0);
	assert_int_equal(v.len, DIGEST_LEN);
	assert_memory_equal(v.p, d, DIGEST_LEN);
	buf_free(&v);
}

static void test_changes_with_a_record(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	static const uint8_t zero[DIGEST_LEN];
	uint8_t one[DIGEST_LEN], two[DIGEST_LEN];
	struct fx_op t[2];

	assert_memory_equal(ops_digest(n->o), zero, DIGEST_LEN);
	apply(n,
	      (Grantd__V1__Op *[]){fx_op_grant(&t[0], "sitea", 1,
	                                       FX_HLC(100, 0), "ann",
	                                       "192.0.2.1", 4000000000, false)},
	      1);
	memcpy(one, ops_digest(n->o), DIGEST_LEN);
	assert_memory_not_equal(one, zero, DIGEST_LEN);
	digest_is_records(n);
	/* the same operation again: a duplicate, nothing changes */
	struct store_batch *b;
	bool applied = true;
	assert_int_equal(store_batch_new(&b, n->s), 0);
	assert_int_equal(ops_apply(n->o, b, &t[0].op, &applied), 0);
	assert_false(applied);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	assert_memory_equal(ops_digest(n->o), one, DIGEST_LEN);
	/* the grant replaced: another digest, still the records' */
	apply(n,
	      (Grantd__V1__Op *[]){fx_op_grant(&t[1], "sitea", 2,
	                                       FX_HLC(101, 0), "ann",
	                                       "192.0.2.1", 4000000001, false)},
	      1);
	memcpy(two, ops_digest(n->o), DIGEST_LEN);
	assert_memory_not_equal(two, one, DIGEST_LEN);
	assert_memory_not_equal(two, zero, DIGEST_LEN);
	digest_is_records(n);
}

static void test_same_records_any_order(void **state)
{
	struct fx_sites *f = *state;
	struct fx_op t[4];
	Grantd__V1__Op *ops[] = {
	        fx_op_user(&t[0], "sitea", 1, FX_HLC(100, 0), "ann", FX_KEY_A,
	                   false),
	        fx_op_grant(&t[1], "sitea", 2, FX_HLC(103, 0), "ann",
	                    "192.0.2.1", 4000000000, false),
	        /* the same grant from siteb, earlier: it loses everywhere */
	        fx_op_grant(&t[2], "siteb", 1, FX_HLC(102, 0), "ann",
	                    "192.0.2.1", 4000000005, false),
	        fx_op_user(&t[3], "siteb", 2, FX_HLC(104, 0), "bea", FX_KEY_B,
	                   false),
	};

	/* node0: sitea's then siteb's; node1: siteb's first, one by one */
	apply(&f->n[0], ops, 4);
	for (int i = 0; i < 4; i++)
		apply(&f->n[1], &ops[(i + 2) % 4], 1);
	assert_memory_equal(ops_digest(f->n[0].o), ops_digest(f->n[1].o),
	                    DIGEST_LEN);
	digest_is_records(&f->n[0]);
	digest_is_records(&f->n[1]);
	/* node2 lacks siteb's last operation */
	apply(&f->n[2], ops, 3);
	assert_memory_not_equal(ops_digest(f->n[2].o), ops_digest(f->n[0].o),
	                        DIGEST_LEN);
}

/* Which families' shares differ between before and after. */
static void shares_moved(const struct ops_verify *before,
                         const struct ops_verify *after,
                         enum store_cf only)
{
	for (int cf = 0; cf < CF__COUNT; cf++) {
		bool moved = memcmp(before->live_fam[cf], after->live_fam[cf],
		                    DIGEST_LEN) != 0;
		if (moved != (cf == (int)only))
			fail_msg("family=%s share %s", store_cf_name(cf),
			         moved ? "moved" : "did not move");
	}
}

/* The XOR of the shares of the families a mirror holds. */
static void public_of(const struct ops_verify *v, uint8_t d[DIGEST_LEN])
{
	memset(d, 0, DIGEST_LEN);
	for (int cf = 0; cf < CF__COUNT; cf++)
		if (records_mirror_visible(cf))
			digest_xor(d, v->live_fam[cf]);
}

static void test_shares_and_public(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct ops_verify v[3];
	uint8_t pub[3][DIGEST_LEN], want[DIGEST_LEN];
	struct fx_op t[2];

	assert_true(records_mirror_visible(CF_USERS));
	assert_false(records_mirror_visible(CF_GRANTS));
	assert_int_equal(ops_verify(n->o, &v[0]), 0);
	ops_digest_public(n->o, pub[0]);
	/* a grant: its family's share, not the public digest */
	apply(n,
	      (Grantd__V1__Op *[]){fx_op_grant(&t[0], "sitea", 1,
	                                       FX_HLC(100, 0), "ann",
	                                       "192.0.2.1", 4000000000, false)},
	      1);
	assert_int_equal(ops_verify(n->o, &v[1]), 0);
	ops_digest_public(n->o, pub[1]);
	shares_moved(&v[0], &v[1], CF_GRANTS);
	assert_memory_equal(pub[1], pub[0], DIGEST_LEN);
	/* a user: its family's share, and the public digest */
	apply(n,
	      (Grantd__V1__Op *[]){fx_op_user(&t[1], "sitea", 2, FX_HLC(101, 0),
	                                      "ann", FX_KEY_A, false)},
	      1);
	assert_int_equal(ops_verify(n->o, &v[2]), 0);
	ops_digest_public(n->o, pub[2]);
	shares_moved(&v[1], &v[2], CF_USERS);
	assert_memory_not_equal(pub[2], pub[1], DIGEST_LEN);
	public_of(&v[2], want);
	assert_memory_equal(pub[2], want, DIGEST_LEN);
	assert_true(v[2].equal);
}

static void test_records_win_at_open(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	static const uint8_t bogus[DIGEST_LEN] = {1, 2, 3};
	uint8_t want[DIGEST_LEN];
	struct store_batch *b;
	struct ops_verify v;
	struct fx_op t[1];

	apply(n,
	      (Grantd__V1__Op *[]){fx_op_user(&t[0], "sitea", 1, FX_HLC(100, 0),
	                                      "ann", FX_KEY_A, false)},
	      1);
	memcpy(want, ops_digest(n->o), DIGEST_LEN);
	/* the stored digest parts from the records */
	assert_int_equal(store_batch_new(&b, n->s), 0);
	store_put(b, CF_META, "digest", 6, bogus, DIGEST_LEN);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	assert_int_equal(ops_verify(n->o, &v), 0);
	assert_false(v.equal);
	assert_memory_equal(v.stored, bogus, DIGEST_LEN);
	assert_memory_equal(v.disk, want, DIGEST_LEN);
	/* reopened: the records' digest, stored again */
	fx_site_close(n);
	assert_int_equal(fx_site_open(n, f->dir, "node0"), 0);
	assert_memory_equal(ops_digest(n->o), want, DIGEST_LEN);
	digest_is_records(n);
	assert_int_equal(ops_verify(n->o, &v), 0);
	assert_true(v.equal);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_changes_with_a_record,
	                                        setup, fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_same_records_any_order,
	                                        setup, fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_shares_and_public, setup,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_records_win_at_open, setup,
	                                        fx_sites_teardown),
	};

	if (fx_group_setup("test_ops_digest", LOG_LVL_WARN) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
