/*
 * test_ops_count.c: node/state/ops_count.c, the live records of each
 * counted family as `status` reads them (ops_count), kept as operations
 * apply and never scanned.
 *
 * On a real store in a temporary directory (fixture.h's fx_site), each
 * count is held against a recount of the records (records_live_at) at
 * several times:
 *  - grants count until they expire, one extended past another's end
 *    counts until its new end, a revoked one not at all; users and
 *    repositories until deleted; a family records.h does not count is 0;
 *  - a rolled back save point, and a batch dropped after a failed commit
 *    (ops_reload), take their changes back;
 *  - one grant extended a thousand times over (its old ends piling up,
 *    then compacted away) still counts once, until its last end;
 *  - the counts are loaded again at open.
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

/* a time after every stamp the tests make, before every grant's end */
#define T 2000000000LL

static int setup(void **state)
{
	struct fx_sites *f;
	int rc = fx_sites_open(&f, "test_ops_count");

	*state = f;
	return rc < 0 || fx_site_open(&f->n[0], f->dir, "node0") < 0 ? -1 : 0;
}

/* The live records of cf at now, counted from the records themselves (b
 * included, NULL: committed). */
static int64_t
recount(struct fx_site *n, struct store_batch *b, enum store_cf cf, int64_t now)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int64_t c = 0;

	assert_int_equal(store_iter_new(&it, n->s, b, cf, "", 0), 0);
	while (store_iter_next(it, &key, &klen, &v) > 0)
		c += records_live_at(cf, v.p, v.len, now);
	store_iter_free(&it);
	buf_free(&v);
	return c;
}

/* Every family's kept count at now is its recount, and cf's is want. */
static void counts_at(struct fx_site *n,
                      struct store_batch *b,
                      int64_t now,
                      enum store_cf cf,
                      int64_t want)
{
	for (int c = 0; c < CF__COUNT; c++) {
		int64_t kept = ops_count(n->o, c, now),
		        disk = recount(n, b, c, now);
		if (kept != disk)
			fail_msg("family=%s at T%+lld: kept %lld, records say "
			         "%lld",
			         store_cf_name(c), (long long)(now - T),
			         (long long)kept, (long long)disk);
	}
	if (ops_count(n->o, cf, now) != want)
		fail_msg("family=%s at T%+lld: %lld live, not %lld",
		         store_cf_name(cf), (long long)(now - T),
		         (long long)ops_count(n->o, cf, now), (long long)want);
}

static void apply(struct fx_site *n, Grantd__V1__Op *const *ops, size_t k)
{
	assert_int_equal(fx_apply(n->o, n->s, ops, k), 0);
}

static void test_grants_until_they_end(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct fx_op t[6];

	apply(n,
	      (Grantd__V1__Op *[]){
	              fx_op_grant(&t[0], "sitea", 1, FX_HLC(100, 0), "ann",
	                          "192.0.2.1", T + 10, false),
	              fx_op_grant(&t[1], "sitea", 2, FX_HLC(101, 0), "ann",
	                          "192.0.2.2", T + 20, false),
	              fx_op_grant(&t[2], "sitea", 3, FX_HLC(102, 0), "ben",
	                          "192.0.2.3", T - 5, false),
	      },
	      3);
	counts_at(n, NULL, T, CF_GRANTS, 2);
	/* the first extended past the second's end, the second revoked */
	apply(n,
	      (Grantd__V1__Op *[]){
	              fx_op_grant(&t[3], "sitea", 4, FX_HLC(103, 0), "ann",
	                          "192.0.2.1", T + 30, false),
	              fx_op_grant(&t[4], "sitea", 5, FX_HLC(104, 0), "ann",
	                          "192.0.2.2", T + 20, true),
	      },
	      2);
	counts_at(n, NULL, T + 1, CF_GRANTS, 1);
	counts_at(n, NULL, T + 10, CF_GRANTS, 1); /* its old end passed */
	counts_at(n, NULL, T + 29, CF_GRANTS, 1);
	counts_at(n, NULL, T + 30, CF_GRANTS, 0);
	/* an ended grant revoked: no count below zero */
	apply(n,
	      (Grantd__V1__Op *[]){fx_op_grant(&t[5], "sitea", 6,
	                                       FX_HLC(105, 0), "ann",
	                                       "192.0.2.1", T + 30, true)},
	      1);
	counts_at(n, NULL, T + 31, CF_GRANTS, 0);
	/* marks are not counted */
	assert_int_equal(ops_count(n->o, CF_MARKS, T), 0);
}

static void test_users_until_deleted(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct fx_op t[4];

	apply(n,
	      (Grantd__V1__Op *[]){
	              fx_op_user(&t[0], "sitea", 1, FX_HLC(100, 0), "ann",
	                         FX_KEY_A, false),
	              fx_op_user(&t[1], "sitea", 2, FX_HLC(101, 0), "ben", NULL,
	                         false),
	              fx_op_user(&t[2], "sitea", 3, FX_HLC(102, 0), "cat",
	                         FX_KEY_B, false),
	      },
	      3);
	counts_at(n, NULL, T, CF_USERS, 3);
	apply(n,
	      (Grantd__V1__Op *[]){fx_op_user(&t[3], "sitea", 4, FX_HLC(103, 0),
	                                      "ben", NULL, true)},
	      1);
	counts_at(n, NULL, T, CF_USERS, 2);
	/* loaded again at open */
	fx_site_close(n);
	assert_int_equal(fx_site_open(n, f->dir, "node0"), 0);
	counts_at(n, NULL, T, CF_USERS, 2);
}

static void test_rollback_and_reload(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct store_batch *b;
	struct ops_save sp;
	struct fx_op t[3];
	bool applied;

	apply(n,
	      (Grantd__V1__Op *[]){fx_op_grant(&t[0], "sitea", 1,
	                                       FX_HLC(100, 0), "ann",
	                                       "192.0.2.1", T + 10, false)},
	      1);
	assert_int_equal(store_batch_new(&b, n->s), 0);
	ops_savepoint(n->o, b, &sp);
	assert_int_equal(
	        ops_apply(n->o, b,
	                  fx_op_grant(&t[1], "sitea", 2, FX_HLC(101, 0), "ann",
	                              "192.0.2.1", T + 10, true),
	                  &applied),
	        0);
	assert_int_equal(ops_apply(n->o, b,
	                           fx_op_user(&t[2], "sitea", 3, FX_HLC(102, 0),
	                                      "ann", NULL, false),
	                           &applied),
	                 0);
	counts_at(n, b, T, CF_GRANTS, 0);
	counts_at(n, b, T, CF_USERS, 1);
	assert_int_equal(ops_rollback(n->o, b, &sp), 0);
	counts_at(n, b, T, CF_GRANTS, 1);
	counts_at(n, b, T, CF_USERS, 0);
	/* applied again, then the batch dropped as after a failed commit */
	assert_int_equal(ops_apply(n->o, b, &t[1].op, &applied), 0);
	counts_at(n, b, T, CF_GRANTS, 0);
	store_batch_free(&b);
	assert_int_equal(ops_reload(n->o), 0);
	counts_at(n, NULL, T, CF_GRANTS, 1);
}

/* More old ends than the count keeps before it compacts them (1,024 and
 * half the live ones): every moment still counts the one grant, until
 * its last end. */
#define EXTENSIONS 1100
static void test_many_extensions(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct fx_op *t = calloc(EXTENSIONS, sizeof(*t));
	Grantd__V1__Op **ops = calloc(EXTENSIONS, sizeof(*ops));

	assert_non_null(t);
	assert_non_null(ops);
	for (int i = 0; i < EXTENSIONS; i++)
		ops[i] = fx_op_grant(&t[i], "sitea", (uint64_t)i + 1,
		                     FX_HLC(100 + i, 0), "ann", "192.0.2.1",
		                     T + 10 + i, false);
	apply(n, ops, EXTENSIONS);
	counts_at(n, NULL, T, CF_GRANTS, 1);
	counts_at(n, NULL, T + 10, CF_GRANTS, 1);
	counts_at(n, NULL, T + 10 + EXTENSIONS / 2, CF_GRANTS, 1);
	counts_at(n, NULL, T + 10 + EXTENSIONS - 2, CF_GRANTS, 1);
	counts_at(n, NULL, T + 10 + EXTENSIONS - 1, CF_GRANTS, 0);
	free(t);
	free(ops);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_grants_until_they_end,
	                                        setup, fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_users_until_deleted, setup,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_rollback_and_reload, setup,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_many_extensions, setup,
	                                        fx_sites_teardown),
	};

	if (fx_group_setup("test_ops_count", LOG_LVL_WARN) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
