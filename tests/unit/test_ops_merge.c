/*
 * test_ops_merge.c: node/state/ops_merge.c, the merge rules of an
 * operation and of a snapshot record side by side.
 *
 * A peer's change reaches a node either as its operation (ops_apply) or,
 * through a state transfer, as the record it left (ops_merge_record).  The
 * two paths must agree: for each rule (LWW users, max/union marks, union
 * failures, LWW refs, the push log set), one operation is applied at three
 * nodes and a second change reaches them as an operation (node C) or as
 * the records a source node holds after applying it, merged after the
 * first (node A) or before it (node B).  All three must end with the same
 * records, and so the same digest, which also matches their records.
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
#include "pushlog.h"
#include "records.h"
#include "store.h"

#define EPOCH      UINT64_C(0x00e90c0000000002)
#define HLC(ms, l) (((uint64_t)(ms) << 16) | (uint64_t)(l))
#define OID0       "0000000000000000000000000000000000000000"
#define KEY                                                                   \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHLAx+6EsJuGELLoK4oqtzjiFQlr/4K" \
	"ExvUYKBZ/LSGg "

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
        "test_ops_merge seal key 01234567";

/* S: the source of the records; A, B, C as above */
enum { S, A, B, C, NODES };

struct node {
	char dir[64], site[16];
	struct config cfg;
	struct store *s;
	struct ops *o;
};

struct fixture {
	struct node n[NODES];
};

/* Any operation these tests make, with room for its body. */
struct top {
	Grantd__V1__Op op;
	Grantd__V1__User user;
	Grantd__V1__Mark mark;
	Grantd__V1__Failures fail;
	Grantd__V1__RefUpdate refs;
	Grantd__V1__RefChange ch, *chp[1];
	Grantd__V1__PushLogEntry pl;
	char key[160], *keys[1];
	uint64_t at[4];
	uint8_t prev[PUSHLOG_HASH_LEN], hash[PUSHLOG_HASH_LEN];
};

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_ops_merge", LOG_LVL_WARN);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	for (int i = 0; i < NODES; i++) {
		struct node *n = &f->n[i];
		snprintf(n->site, sizeof(n->site), "node%c", "sabc"[i]);
		n->cfg.site = n->site;
		if (fx_mkdtemp(n->dir, sizeof(n->dir), "test_ops_merge", true) <
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

static Grantd__V1__Op *stamp(struct top *t,
                             const char *origin,
                             uint64_t hlc,
                             Grantd__V1__Op__BodyCase body)
{
	memset(t, 0, sizeof(*t));
	grantd__v1__op__init(&t->op);
	t->op.origin = (char *)origin;
	t->op.epoch = EPOCH, t->op.has_epoch = 1;
	t->op.seq = 1, t->op.has_seq = 1;
	t->op.hlc = hlc, t->op.has_hlc = 1;
	t->op.body_case = body;
	return &t->op;
}

static Grantd__V1__Op *
op_user(struct top *t, const char *origin, uint64_t hlc, const char *label)
{
	stamp(t, origin, hlc, GRANTD__V1__OP__BODY_USER);
	grantd__v1__user__init(&t->user);
	snprintf(t->key, sizeof(t->key), "%s%s", KEY, label);
	t->keys[0] = t->key;
	t->user.name = "alice";
	t->user.keys = t->keys, t->user.n_keys = 1;
	t->op.user = &t->user;
	return &t->op;
}

static Grantd__V1__Op *op_mark(struct top *t,
                               const char *origin,
                               uint64_t hlc,
                               uint64_t next,
                               uint32_t used)
{
	stamp(t, origin, hlc, GRANTD__V1__OP__BODY_MARK);
	grantd__v1__mark__init(&t->mark);
	t->mark.user = "alice";
	t->mark.enroll_id = 1, t->mark.has_enroll_id = 1;
	t->mark.next = next, t->mark.has_next = 1;
	t->mark.scratch_used = used, t->mark.has_scratch_used = 1;
	t->op.mark = &t->mark;
	return &t->op;
}

static Grantd__V1__Op *op_fail(struct top *t,
                               const char *origin,
                               uint64_t hlc,
                               uint64_t a0,
                               uint64_t a1)
{
	stamp(t, origin, hlc, GRANTD__V1__OP__BODY_FAILURE);
	grantd__v1__failures__init(&t->fail);
	t->fail.user = "alice", t->fail.site = "sitea";
	t->at[0] = a0, t->at[1] = a1;
	t->fail.hlc = t->at, t->fail.n_hlc = 2;
	t->op.failure = &t->fail;
	return &t->op;
}

static Grantd__V1__Op *
op_ref(struct top *t, const char *origin, uint64_t hlc, const char *to)
{
	stamp(t, origin, hlc, GRANTD__V1__OP__BODY_REFS);
	grantd__v1__ref_change__init(&t->ch);
	t->ch.ref = "refs/heads/main", t->ch.old = OID0,
	t->ch.new_ = (char *)to;
	t->chp[0] = &t->ch;
	grantd__v1__ref_update__init(&t->refs);
	t->refs.repo = "demo";
	t->refs.changes = t->chp, t->refs.n_changes = 1;
	t->op.refs = &t->refs;
	return &t->op;
}

static Grantd__V1__Op *
op_pushlog(struct top *t, const char *origin, uint64_t hlc, const char *to)
{
	op_ref(t, origin, hlc, to);
	t->op.body_case = GRANTD__V1__OP__BODY_PUSH_LOG;
	grantd__v1__push_log_entry__init(&t->pl);
	t->pl.origin = (char *)origin, t->pl.n = 1, t->pl.has_n = 1;
	t->pl.prev.data = t->prev, t->pl.prev.len = PUSHLOG_HASH_LEN;
	t->pl.has_prev = 1;
	t->pl.user = "alice", t->pl.repo = "demo";
	t->pl.changes = t->chp, t->pl.n_changes = 1;
	t->pl.hlc = hlc, t->pl.has_hlc = 1;
	pushlog_hash(t->hash, &t->pl);
	t->pl.hash.data = t->hash, t->pl.hash.len = PUSHLOG_HASH_LEN;
	t->pl.has_hash = 1;
	t->op.push_log = &t->pl;
	return &t->op;
}

static void apply(struct node *n, const Grantd__V1__Op *op)
{
	struct store_batch *b;
	bool applied = false;

	store_batch_new(&b, n->s);
	assert_int_equal(ops_apply(n->o, b, op, &applied), 0);
	assert_true(applied);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
}

/* Merge every replicated record src holds into n, as a state transfer
 * would (its own trust checks aside). */
static void merge_all(struct node *n, struct node *src)
{
	struct store_batch *b;
	struct buf v = BUF_INIT, why = BUF_INIT;
	const char *key;
	size_t klen;

	store_batch_new(&b, n->s);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		struct store_iter *it;
		if (!records_replicated(cf))
			continue;
		store_iter_new(&it, src->s, NULL, cf, "", 0);
		while (store_iter_next(it, &key, &klen, &v) > 0)
			if (ops_merge_record(n->o, b, cf, v.p, v.len, NULL,
			                     &why) < 0)
				fail_msg("record of %s refused: %s",
				         store_cf_name(cf), buf_str(&why));
		store_iter_free(&it);
	}
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
	buf_free(&v);
	buf_free(&why);
}

static void assert_verified(struct node *n)
{
	struct ops_verify *v = calloc(1, sizeof(*v));

	assert_non_null(v);
	assert_int_equal(ops_verify(n->o, v), 0);
	assert_true(v->equal);
	free(v);
}

/* first at every node; second as an operation at C and as S's records at
 * A (after first) and B (before first): the same state everywhere. */
static void same_either_way(struct fixture *f,
                            const Grantd__V1__Op *first,
                            const Grantd__V1__Op *second)
{
	struct node *n = f->n;

	apply(&n[S], second);
	apply(&n[C], first);
	apply(&n[C], second);
	apply(&n[A], first);
	merge_all(&n[A], &n[S]);
	merge_all(&n[B], &n[S]);
	apply(&n[B], first);
	/* merging again changes nothing: the rules are idempotent */
	merge_all(&n[A], &n[S]);
	for (int i = A; i <= C; i++) {
		assert_verified(&n[i]);
		if (i != C)
			assert_memory_equal(ops_digest(n[i].o),
			                    ops_digest(n[C].o), DIGEST_LEN);
	}
}

static void test_lww_user(void **state)
{
	struct top t1, t2;

	same_either_way(*state, op_user(&t1, "sitea", HLC(100, 0), "a"),
	                op_user(&t2, "siteb", HLC(200, 0), "b"));
}

/* the later one first: the record from the snapshot loses */
static void test_lww_user_loses(void **state)
{
	struct top t1, t2;

	same_either_way(*state, op_user(&t1, "siteb", HLC(300, 0), "a"),
	                op_user(&t2, "sitea", HLC(200, 0), "b"));
}

static void test_mark_max(void **state)
{
	struct top t1, t2;

	same_either_way(*state, op_mark(&t1, "sitea", HLC(100, 0), 5, 1),
	                op_mark(&t2, "siteb", HLC(90, 0), 3, 2));
}

static void test_failure_union(void **state)
{
	struct top t1, t2;

	same_either_way(
	        *state,
	        op_fail(&t1, "sitea", HLC(100, 0), HLC(1, 0), HLC(2, 0)),
	        op_fail(&t2, "siteb", HLC(100, 1), HLC(2, 0), HLC(3, 0)));
}

static void test_ref_lww(void **state)
{
	struct top t1, t2;

	same_either_way(*state,
	                op_ref(&t1, "sitea", HLC(100, 0),
	                       "1111111111111111111111111111111111111111"),
	                op_ref(&t2, "siteb", HLC(200, 0),
	                       "2222222222222222222222222222222222222222"));
}

static void test_pushlog_set(void **state)
{
	struct top t1, t2;

	same_either_way(*state,
	                op_pushlog(&t1, "sitea", HLC(100, 0),
	                           "1111111111111111111111111111111111111111"),
	                op_pushlog(&t2, "siteb", HLC(200, 0),
	                           "2222222222222222222222222222222222222222"));
}

/* A record that is not one is refused with a reason, and nothing moves. */
static void test_bad_record(void **state)
{
	struct fixture *f = *state;
	struct node *n = &f->n[A];
	struct store_batch *b;
	struct buf why = BUF_INIT;
	uint8_t d[DIGEST_LEN];

	memcpy(d, ops_digest(n->o), DIGEST_LEN);
	store_batch_new(&b, n->s);
	assert_int_equal(
	        ops_merge_record(n->o, b, CF_USERS, "\xff\xff", 2, NULL, &why),
	        GD_EPROTO);
	assert_true(why.len > 0);
	buf_reset(&why);
	assert_int_equal(ops_merge_record(n->o, b, CF_META, "", 0, NULL, &why),
	                 GD_EPROTO);
	assert_string_equal(buf_str(&why), "not a state family");
	assert_int_equal(store_batch_count(b), 0);
	assert_memory_equal(ops_digest(n->o), d, DIGEST_LEN);
	store_batch_free(&b);
	buf_free(&why);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_lww_user),   T(test_lww_user_loses),
	        T(test_mark_max),   T(test_failure_union),
	        T(test_ref_lww),    T(test_pushlog_set),
	        T(test_bad_record),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
