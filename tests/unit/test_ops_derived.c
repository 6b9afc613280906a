/*
 * test_ops_derived.c: node/state/ops_derived.c, the local families this
 * node derives from the replicated ones in the same batch.
 *
 * On real stores in a temporary directory (fixture.h's fx_site):
 *  - CF_KEYFP: an entry made with a user's key, removed with the key (the
 *    key replaced, the user deleted), one per user that holds the key;
 *    not in the digest; built at open for a store made before the index;
 *  - the push request ids recorded here: a local push's id is seen (in
 *    its batch already), a peer's is not kept, and past
 *    OPS_PUSH_IDS_KEPT per repository the oldest is forgotten;
 *  - the push log heads: each origin's highest entry and its hash, in the
 *    batch and committed, listed in name order.
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
#include "pushlog.h"
#include "records.h"
#include "store.h"

static int setup(void **state)
{
	struct fx_sites *f;
	int rc = fx_sites_open(&f, "test_ops_derived");

	*state = f;
	return rc < 0 || fx_site_open(&f->n[0], f->dir, "node0") < 0 ? -1 : 0;
}

static void apply(struct fx_site *n, Grantd__V1__Op *const *ops, size_t k)
{
	assert_int_equal(fx_apply(n->o, n->s, ops, k), 0);
}

/* ---- keys by fingerprint ------------------------------------------------ */

/* The users the index holds for key (its fingerprint), as "a,b,": each
 * entry's value must be the key itself. */
static const char *holders(struct fx_site *n, const char *key)
{
	static char out[256];
	char fp[RECORDS_FP_MAX];
	struct store_iter *it;
	struct buf k = BUF_INIT, v = BUF_INIT;
	const char *ik;
	size_t iklen, len = 0;

	out[0] = '\0';
	assert_int_equal(records_ssh_fingerprint(fp, key), 0);
	records_key_keyfp(&k, fp, NULL);
	assert_int_equal(store_iter_new(&it, n->s, NULL, CF_KEYFP, k.p, k.len),
	                 0);
	while (store_iter_next(it, &ik, &iklen, &v) > 0) {
		struct records_span sf, su;
		assert_int_equal(records_keyfp_parse(ik, iklen, &sf, &su), 0);
		assert_true(v.len == strlen(key) && !memcmp(v.p, key, v.len));
		assert_true(len + su.len + 2 < sizeof(out));
		memcpy(out + len, su.p, su.len);
		len += su.len;
		out[len++] = ',';
		out[len] = '\0';
	}
	store_iter_free(&it);
	buf_free(&k);
	buf_free(&v);
	return out;
}

static void test_keyfp_follows_the_key(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct ops_verify v;
	struct fx_op t[4];

	apply(n,
	      (Grantd__V1__Op *[]){fx_op_user(&t[0], "sitea", 1, FX_HLC(100, 0),
	                                      "ann", FX_KEY_A, false)},
	      1);
	assert_string_equal(holders(n, FX_KEY_A), "ann,");
	assert_string_equal(holders(n, FX_KEY_B), "");
	/* ann's key replaced; bea holds the new one too */
	apply(n,
	      (Grantd__V1__Op *[]){
	              fx_op_user(&t[1], "sitea", 2, FX_HLC(101, 0), "ann",
	                         FX_KEY_B, false),
	              fx_op_user(&t[2], "sitea", 3, FX_HLC(102, 0), "bea",
	                         FX_KEY_B, false),
	      },
	      2);
	assert_string_equal(holders(n, FX_KEY_A), "");
	assert_string_equal(holders(n, FX_KEY_B), "ann,bea,");
	/* ann deleted: bea's entry stays */
	apply(n,
	      (Grantd__V1__Op *[]){fx_op_user(&t[3], "sitea", 4, FX_HLC(103, 0),
	                                      "ann", FX_KEY_B, true)},
	      1);
	assert_string_equal(holders(n, FX_KEY_B), "bea,");
	/* local: not in the digest, which still matches the records */
	assert_int_equal(ops_verify(n->o, &v), 0);
	assert_false(v.covered[CF_KEYFP]);
	assert_true(v.equal);
}

static void test_keyfp_built_at_open(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct store_batch *b;
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	struct fx_op t[2];

	apply(n,
	      (Grantd__V1__Op *[]){
	              fx_op_user(&t[0], "sitea", 1, FX_HLC(100, 0), "ann",
	                         FX_KEY_A, false),
	              fx_op_user(&t[1], "sitea", 2, FX_HLC(101, 0), "bea",
	                         FX_KEY_B, false),
	      },
	      2);
	/* a store from before the index: no entries, no mark */
	assert_int_equal(store_batch_new(&b, n->s), 0);
	assert_int_equal(store_iter_new(&it, n->s, NULL, CF_KEYFP, "", 0), 0);
	while (store_iter_next(it, &key, &klen, &v) > 0)
		store_del(b, CF_KEYFP, key, klen);
	store_iter_free(&it);
	store_del(b, CF_META, "keyfp", 5);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	assert_string_equal(holders(n, FX_KEY_A), "");
	fx_site_close(n);
	assert_int_equal(fx_site_open(n, f->dir, "node0"), 0);
	assert_string_equal(holders(n, FX_KEY_A), "ann,");
	assert_string_equal(holders(n, FX_KEY_B), "bea,");
	assert_int_equal(store_get(n->s, NULL, CF_META, "keyfp", 5, &v), 0);
	buf_free(&v);
}

/* ---- push request ids ------------------------------------------------- */

/* Push request id i (its hook's clock first, so key order is age). */
static const char *push_id(int i)
{
	static char id[2][64];
	static int next;
	char *s = id[next++ % 2];

	snprintf(s, sizeof(id[0]), "%032x-%d", 0x1000 + i, i);
	return s;
}

/* A push to repo with request id, made here (ops_local) or by a peer. */
static void push(struct fx_site *n,
                 struct store_batch *b,
                 const char *repo,
                 const char *id,
                 const char *peer,
                 uint64_t seq)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__RefUpdate u = GRANTD__V1__REF_UPDATE__INIT;
	Grantd__V1__RefChange ch = GRANTD__V1__REF_CHANGE__INIT, *chp = &ch;
	bool applied;

	ch.ref = "refs/heads/main";
	ch.old = "0000000000000000000000000000000000000000";
	ch.new_ = "1111111111111111111111111111111111111111";
	u.repo = (char *)repo;
	u.changes = &chp, u.n_changes = 1;
	u.push_id = (char *)id;
	op.body_case = GRANTD__V1__OP__BODY_REFS;
	op.refs = &u;
	if (!peer) {
		assert_int_equal(ops_local(n->o, b, &op), 0);
		return;
	}
	op.origin = (char *)peer;
	op.epoch = FX_EPOCH, op.has_epoch = 1;
	op.seq = seq, op.has_seq = 1;
	op.hlc = FX_HLC(100 + seq, 0), op.has_hlc = 1;
	assert_int_equal(ops_apply(n->o, b, &op, &applied), 0);
	assert_true(applied);
}

static bool
seen(struct fx_site *n, struct store_batch *b, const char *repo, const char *id)
{
	bool s = false;

	assert_int_equal(ops_push_seen(n->o, b, repo, id, &s), 0);
	return s;
}

static void test_push_ids(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct store_batch *b;

	assert_int_equal(store_batch_new(&b, n->s), 0);
	push(n, b, "demo", push_id(0), NULL, 0);
	assert_true(seen(n, b, "demo", push_id(0))); /* in its batch */
	assert_false(seen(n, NULL, "demo", push_id(0)));
	assert_false(seen(n, b, "other", push_id(0)));
	push(n, b, "other", push_id(0), NULL, 0);
	for (int i = 1; i <= OPS_PUSH_IDS_KEPT; i++)
		push(n, b, "demo", push_id(i), NULL, 0);
	/* a peer's push: its hook asked the peer, not us */
	push(n, b, "demo", push_id(9999), "siteb", 1);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	/* one past the kept: the oldest of demo forgotten, other's kept */
	assert_false(seen(n, NULL, "demo", push_id(0)));
	assert_true(seen(n, NULL, "demo", push_id(1)));
	assert_true(seen(n, NULL, "demo", push_id(OPS_PUSH_IDS_KEPT)));
	assert_true(seen(n, NULL, "other", push_id(0)));
	assert_false(seen(n, NULL, "demo", push_id(9999)));
}

/* ---- push log heads ------------------------------------------------------ */

struct plop {
	Grantd__V1__Op op;
	Grantd__V1__PushLogEntry e;
	Grantd__V1__RefChange ch, *chp[1];
	uint8_t prev[PUSHLOG_HASH_LEN], hash[PUSHLOG_HASH_LEN];
};

/* Operation seq of origin carrying its entry n after prev (NULL: the
 * first), stamped hlc. */
static Grantd__V1__Op *op_entry(struct plop *p,
                                const char *origin,
                                uint64_t seq,
                                uint64_t hlc,
                                uint64_t n,
                                const struct plop *prev)
{
	memset(p, 0, sizeof(*p));
	grantd__v1__op__init(&p->op);
	grantd__v1__push_log_entry__init(&p->e);
	grantd__v1__ref_change__init(&p->ch);
	p->op.origin = (char *)origin;
	p->op.epoch = FX_EPOCH, p->op.has_epoch = 1;
	p->op.seq = seq, p->op.has_seq = 1;
	p->op.hlc = hlc, p->op.has_hlc = 1;
	p->ch.ref = "refs/heads/main";
	p->ch.old = "0000000000000000000000000000000000000000";
	p->ch.new_ = "1111111111111111111111111111111111111111";
	p->chp[0] = &p->ch;
	p->e.origin = (char *)origin;
	p->e.n = n, p->e.has_n = 1;
	if (prev)
		memcpy(p->prev, prev->hash, PUSHLOG_HASH_LEN);
	p->e.prev.data = p->prev, p->e.prev.len = PUSHLOG_HASH_LEN;
	p->e.has_prev = 1;
	p->e.user = "ann";
	p->e.repo = "demo";
	p->e.changes = p->chp, p->e.n_changes = 1;
	p->e.hlc = hlc, p->e.has_hlc = 1;
	pushlog_hash(p->hash, &p->e);
	p->e.hash.data = p->hash, p->e.hash.len = PUSHLOG_HASH_LEN;
	p->e.has_hash = 1;
	p->op.body_case = GRANTD__V1__OP__BODY_PUSH_LOG;
	p->op.push_log = &p->e;
	return &p->op;
}

static void head_is(struct fx_site *n,
                    struct store_batch *b,
                    const char *origin,
                    uint64_t want_n,
                    const uint8_t *hash)
{
	static const uint8_t zero[OPS_PUSHLOG_HASH];
	uint8_t h[OPS_PUSHLOG_HASH];
	uint64_t got;

	assert_int_equal(ops_pushlog_head(n->o, b, origin, &got, h), 0);
	assert_int_equal(got, want_n);
	assert_memory_equal(h, hash ? hash : zero, OPS_PUSHLOG_HASH);
}

static void test_pushlog_heads(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	static struct plop a1, a2, b1;
	struct ops_pushlog_head *h;
	struct store_batch *b;
	bool applied;

	apply(n,
	      (Grantd__V1__Op *[]){
	              op_entry(&b1, "siteb", 1, FX_HLC(100, 0), 1, NULL),
	              op_entry(&a1, "sitea", 1, FX_HLC(101, 0), 1, NULL),
	      },
	      2);
	head_is(n, NULL, "sitea", 1, a1.hash);
	/* the next entry moves the head in its batch, then on disk */
	assert_int_equal(store_batch_new(&b, n->s), 0);
	assert_int_equal(
	        ops_apply(n->o, b,
	                  op_entry(&a2, "sitea", 2, FX_HLC(102, 0), 2, &a1),
	                  &applied),
	        0);
	head_is(n, b, "sitea", 2, a2.hash);
	head_is(n, NULL, "sitea", 1, a1.hash);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	head_is(n, NULL, "sitea", 2, a2.hash);
	head_is(n, NULL, "siteb", 1, b1.hash);
	head_is(n, NULL, "sitec", 0, NULL);
	/* every origin's, in name order */
	assert_int_equal(ops_pushlog_heads(&h, n->s), 2);
	assert_string_equal(h[0].origin, "sitea");
	assert_int_equal(h[0].n, 2);
	assert_memory_equal(h[0].hash, a2.hash, OPS_PUSHLOG_HASH);
	assert_string_equal(h[1].origin, "siteb");
	assert_int_equal(h[1].n, 1);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_keyfp_follows_the_key,
	                                        setup, fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_keyfp_built_at_open, setup,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_push_ids, setup,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_pushlog_heads, setup,
	                                        fx_sites_teardown),
	};

	if (fx_group_setup("test_ops_derived", LOG_LVL_WARN) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
