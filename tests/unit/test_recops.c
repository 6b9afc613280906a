/*
 * test_recops.c: node/state/recops.c, the signed operations kept per
 * replicated record, and state transfer sending and checking them
 * (node/peers/repl_xfer.c; issue 21 point 1).
 *
 * The rule per family, for a peer's operations (ops_apply):
 *  - LWW: the winner only (a later stamp replaces, an earlier one loses);
 *  - a push (RefUpdate) of two refs: each ref keeps it until another push
 *    wins that ref;
 *  - MAX (marks): a dominated mark is not kept, a dominating one drops
 *    those it dominates, two incomparable ones are both kept;
 *  - UNION (failures): an operation whose every stamp the record dropped
 *    (beyond OPS_MAX_FAILURES_KEPT) goes;
 *  - LEAF (tlog leaves): the leaf's own operation;
 *  - a grant swept: its operations go with it.
 * A local operation is kept at its apply, by its log key; what a state
 * transfer sends is the log's copy, signed at commit (it verifies).
 * An operation is stored once: records name it (test_stored_once).
 * State transfer between two nodes (fixture.h's fx_pair), paloalto
 * serving, portland (with paloalto's and its own key) receiving:
 *  - honest: level, equal digests, nothing dropped;
 *  - a grant stamped by portland written straight into paloalto's store,
 *    without operations, or with one signed by paloalto's key: refused,
 *    counted as signature drops, never held, the vector not raised; with
 *    an operation portland did sign, but of another record: refused too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "fixture.h"
#include "xferfx.h"
#include "ops.h"
#include "opsig.h"
#include "pushleaf.h"
#include "oplog.h"
#include "recops.h"
#include "records.h"
#include "repl_int.h"
#include "store.h"
#include "writer.h"

#define OID0    "0000000000000000000000000000000000000000"
#define OID1    "1111111111111111111111111111111111111111"
#define WAIT_MS 20000
#define NGRANTS 4

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_recops", LOG_LVL_ERROR);
}

static int setup_sites(void **state)
{
	struct fx_sites *f;

	if (fx_sites_open(&f, "test_recops") < 0 ||
	    fx_site_open(&f->n[0], f->dir, "sitea") < 0)
		return -1;
	*state = f;
	return 0;
}

/* Any operation of these tests, with room for its body. */
struct top {
	Grantd__V1__Op op;
	Grantd__V1__User user;
	Grantd__V1__Mark mark;
	Grantd__V1__Failures fail;
	Grantd__V1__RefUpdate refs;
	Grantd__V1__RefChange ch[2], *chp[2];
	Grantd__V1__PushLeaf leaf;
	uint64_t at[1];
	struct buf text;
};

static uint64_t next_seq[4];

/* origin "peer<i>" (i < 4), its next sequence number */
static Grantd__V1__Op *
stamp(struct top *t, int origin, uint64_t hlc, Grantd__V1__Op__BodyCase body)
{
	static const char *const names[] = {"peera", "peerb", "peerc", "peerd"};

	memset(t, 0, sizeof(*t));
	grantd__v1__op__init(&t->op);
	t->op.origin = (char *)names[origin];
	t->op.epoch = FX_EPOCH, t->op.has_epoch = 1;
	t->op.seq = ++next_seq[origin], t->op.has_seq = 1;
	t->op.hlc = hlc, t->op.has_hlc = 1;
	t->op.body_case = body;
	return &t->op;
}

static Grantd__V1__Op *op_user(struct top *t, int origin, uint64_t hlc)
{
	stamp(t, origin, hlc, GRANTD__V1__OP__BODY_USER);
	grantd__v1__user__init(&t->user);
	t->user.name = "alice";
	t->op.user = &t->user;
	return &t->op;
}

static Grantd__V1__Op *
op_mark(struct top *t, int origin, uint64_t hlc, uint64_t next, uint32_t used)
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

static Grantd__V1__Op *op_fail(struct top *t, int origin, uint64_t hlc)
{
	stamp(t, origin, hlc, GRANTD__V1__OP__BODY_FAILURE);
	grantd__v1__failures__init(&t->fail);
	t->fail.user = "alice", t->fail.site = "peera";
	t->at[0] = hlc;
	t->fail.hlc = t->at, t->fail.n_hlc = 1;
	t->op.failure = &t->fail;
	return &t->op;
}

/* a push of refs/heads/r0 .. r<n-1> (n <= 2) of demo */
static Grantd__V1__Op *op_refs(struct top *t, int origin, uint64_t hlc, int n)
{
	static const char *const refs[] = {"refs/heads/r0", "refs/heads/r1"};

	stamp(t, origin, hlc, GRANTD__V1__OP__BODY_REFS);
	for (int i = 0; i < n; i++) {
		grantd__v1__ref_change__init(&t->ch[i]);
		t->ch[i].ref = (char *)refs[i];
		t->ch[i].old = OID0, t->ch[i].new_ = OID1;
		t->chp[i] = &t->ch[i];
	}
	grantd__v1__ref_update__init(&t->refs);
	t->refs.repo = "demo";
	t->refs.changes = t->chp, t->refs.n_changes = (size_t)n;
	t->op.refs = &t->refs;
	return &t->op;
}

static Grantd__V1__Op *op_leaf(struct top *t, int origin, uint64_t index)
{
	struct pushleaf_ref r = {"refs/heads/main", OID0, OID1};
	struct pushleaf pl = {.index = index, .nrefs = 1, .refs = &r};

	stamp(t, origin, FX_HLC(1000 + index, 0),
	      GRANTD__V1__OP__BODY_PUSH_LEAF);
	snprintf(pl.origin, sizeof(pl.origin), "%s", t->op.origin);
	snprintf(pl.repo, sizeof(pl.repo), "demo");
	assert_int_equal(pushleaf_format(&t->text, &pl), 0);
	grantd__v1__push_leaf__init(&t->leaf);
	t->leaf.origin = t->op.origin;
	t->leaf.index = index, t->leaf.has_index = 1;
	t->leaf.text.data = (uint8_t *)t->text.p;
	t->leaf.text.len = t->text.len, t->leaf.has_text = 1;
	t->op.push_leaf = &t->leaf;
	return &t->op;
}

static void apply1(struct fx_site *n, Grantd__V1__Op *op)
{
	assert_int_equal(fx_apply(n->o, n->s, &op, 1), 0);
}

/* The seqs (of origin's) kept for the record key of cf, in order, in
 * out; their count. */
static size_t kept(struct fx_site *n,
                   enum store_cf cf,
                   const struct buf *key,
                   uint64_t out[80])
{
	struct buf v = BUF_INIT;
	size_t k = 0;

	assert_int_equal(recops_get(n->s, NULL, cf, key->p, key->len, &v), 0);
	if (v.len) {
		Grantd__V1__RecordOps *ro = grantd__v1__record_ops__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		assert_non_null(ro);
		for (size_t i = 0; i < ro->n_ops && k < 80; i++) {
			Grantd__V1__Op *op = grantd__v1__op__unpack(
			        NULL, ro->ops[i].len, ro->ops[i].data);
			assert_non_null(op);
			assert_true(recops_makes(op, cf, key->p, key->len));
			out[k++] = op->seq;
			grantd__v1__op__free_unpacked(op, NULL);
		}
		grantd__v1__record_ops__free_unpacked(ro, NULL);
	}
	buf_free(&v);
	return k;
}

/* The stamp of the one operation kept for the record key of cf. */
static uint64_t
kept_hlc(struct fx_site *n, enum store_cf cf, const struct buf *key)
{
	struct buf v = BUF_INIT;
	Grantd__V1__RecordOps *ro;
	Grantd__V1__Op *op;
	uint64_t hlc;

	assert_int_equal(recops_get(n->s, NULL, cf, key->p, key->len, &v), 0);
	ro = grantd__v1__record_ops__unpack(NULL, v.len, (const uint8_t *)v.p);
	assert_non_null(ro);
	assert_int_equal(ro->n_ops, 1);
	op = grantd__v1__op__unpack(NULL, ro->ops[0].len, ro->ops[0].data);
	assert_non_null(op);
	hlc = op->hlc;
	grantd__v1__op__free_unpacked(op, NULL);
	grantd__v1__record_ops__free_unpacked(ro, NULL);
	buf_free(&v);
	return hlc;
}

static void test_lww_winner_only(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct top t;
	struct buf k = BUF_INIT;
	uint64_t s[80];

	memset(next_seq, 0, sizeof(next_seq));
	records_key_lww(&k, op_user(&t, 0, FX_HLC(100, 0)));
	apply1(n, &t.op);
	assert_int_equal(kept(n, CF_USERS, &k, s), 1);
	assert_int_equal(s[0], 1);
	/* an earlier stamp loses: the record and its operation stay */
	apply1(n, op_user(&t, 1, FX_HLC(50, 0)));
	assert_int_equal(kept(n, CF_USERS, &k, s), 1);
	assert_int_equal(s[0], 1);
	/* a later one wins: its operation replaces */
	apply1(n, op_user(&t, 1, FX_HLC(200, 0)));
	assert_int_equal(kept(n, CF_USERS, &k, s), 1);
	assert_int_equal(s[0], 2);
	buf_free(&k);
}

static void test_refs_per_ref(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct top t;
	struct buf k0 = BUF_INIT, k1 = BUF_INIT;
	uint64_t s[80];

	memset(next_seq, 0, sizeof(next_seq));
	records_key_ref(&k0, "demo", "refs/heads/r0");
	records_key_ref(&k1, "demo", "refs/heads/r1");
	apply1(n, op_refs(&t, 0, FX_HLC(100, 0), 2));
	assert_int_equal(kept(n, CF_REFS, &k0, s), 1);
	assert_int_equal(s[0], 1);
	assert_int_equal(kept(n, CF_REFS, &k1, s), 1);
	assert_int_equal(s[0], 1);
	/* a later push of r0 only: r0 keeps it, r1 the first */
	apply1(n, op_refs(&t, 0, FX_HLC(200, 0), 1));
	assert_int_equal(kept(n, CF_REFS, &k0, s), 1);
	assert_int_equal(s[0], 2);
	assert_int_equal(kept(n, CF_REFS, &k1, s), 1);
	assert_int_equal(s[0], 1);
	buf_free(&k0);
	buf_free(&k1);
}

/* How many refs (and how many op bytes) the stored RecordOps of the
 * record key of cf holds. */
static size_t stored_refs(struct fx_site *n,
                          enum store_cf cf,
                          const struct buf *key,
                          size_t *n_ops)
{
	struct buf rk = BUF_INIT, v = BUF_INIT;
	size_t refs;

	records_key_recops(&rk, cf, key->p, key->len);
	assert_int_equal(store_get(n->s, NULL, CF_RECOPS, rk.p, rk.len, &v), 0);
	Grantd__V1__RecordOps *ro = grantd__v1__record_ops__unpack(
	        NULL, v.len, (const uint8_t *)v.p);
	assert_non_null(ro);
	refs = ro->n_refs;
	*n_ops = ro->n_ops;
	grantd__v1__record_ops__free_unpacked(ro, NULL);
	buf_free(&rk);
	buf_free(&v);
	return refs;
}

/* Does cf hold the log key of peera's operation seq? */
static bool holds_op(struct fx_site *n, enum store_cf cf, uint64_t seq)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	records_key_oplog(&k, "peera", FX_EPOCH, seq);
	rc = store_get(n->s, NULL, cf, k.p, k.len, &v);
	buf_free(&k);
	buf_free(&v);
	return rc == 0;
}

/* An operation is stored once, however many records it made: each ref of
 * a push names it by its log key (before, each ref's list held the whole
 * RefUpdate: a push of 4,096 refs wrote it 4,096 times).  The log's
 * retention copies a named operation to CF_KEPTOPS before it cuts it, and
 * CF_KEPTOPS drops it once no record names it. */
static void test_stored_once(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct top t;
	struct buf k0 = BUF_INIT, k1 = BUF_INIT;
	uint64_t s[80];
	size_t nops;

	memset(next_seq, 0, sizeof(next_seq));
	records_key_ref(&k0, "demo", "refs/heads/r0");
	records_key_ref(&k1, "demo", "refs/heads/r1");
	apply1(n, op_refs(&t, 0, FX_HLC(100, 0), 2));
	assert_int_equal(stored_refs(n, CF_REFS, &k0, &nops), 1);
	assert_int_equal(nops, 0);
	assert_int_equal(stored_refs(n, CF_REFS, &k1, &nops), 1);
	assert_int_equal(nops, 0);
	assert_true(holds_op(n, CF_OPLOG, 1));
	assert_false(holds_op(n, CF_KEPTOPS, 1));
	/* the log cut (everything is older than now + 1 h): kept, and still
	 * sent whole */
	assert_int_equal(
	        ops_truncate_log(n->o, clock_wall_ms() + 3600 * 1000, 1000), 1);
	assert_false(holds_op(n, CF_OPLOG, 1));
	assert_true(holds_op(n, CF_KEPTOPS, 1));
	assert_int_equal(kept(n, CF_REFS, &k0, s), 1);
	assert_int_equal(s[0], 1);
	assert_int_equal(kept(n, CF_REFS, &k1, s), 1);
	/* named still: it stays */
	assert_int_equal(ops_sweep_kept(n->o, 100), 0);
	assert_true(holds_op(n, CF_KEPTOPS, 1));
	/* a later push of r0: r1 still names the first */
	apply1(n, op_refs(&t, 0, FX_HLC(200, 0), 1));
	assert_int_equal(ops_sweep_kept(n->o, 100), 0);
	assert_true(holds_op(n, CF_KEPTOPS, 1));
	/* and of both: none does, it goes */
	apply1(n, op_refs(&t, 0, FX_HLC(300, 0), 2));
	assert_int_equal(ops_sweep_kept(n->o, 100), 1);
	assert_false(holds_op(n, CF_KEPTOPS, 1));
	assert_int_equal(kept(n, CF_REFS, &k1, s), 1);
	assert_int_equal(s[0], 3);
	/* a cut of what no record names copies nothing */
	assert_int_equal(
	        ops_truncate_log(n->o, clock_wall_ms() + 3600 * 1000, 1000), 2);
	assert_false(holds_op(n, CF_KEPTOPS, 2));
	assert_true(holds_op(n, CF_KEPTOPS, 3));
	buf_free(&k0);
	buf_free(&k1);
}

static void test_mark_domination(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct top t;
	struct buf k = BUF_INIT;
	uint64_t s[80];

	memset(next_seq, 0, sizeof(next_seq));
	records_key_mark(&k, "alice", 1);
	apply1(n, op_mark(&t, 0, FX_HLC(100, 0), 5, 1)); /* peera 1 */
	/* incomparable: next lower, another scratch code: both kept */
	apply1(n, op_mark(&t, 1, FX_HLC(101, 0), 3, 2)); /* peerb 1 */
	assert_int_equal(kept(n, CF_MARKS, &k, s), 2);
	/* dominated by the first: not kept */
	apply1(n, op_mark(&t, 2, FX_HLC(102, 0), 4, 1)); /* peerc 1 */
	assert_int_equal(kept(n, CF_MARKS, &k, s), 2);
	/* dominates both: alone */
	apply1(n, op_mark(&t, 0, FX_HLC(103, 0), 6, 3)); /* peera 2 */
	assert_int_equal(kept(n, CF_MARKS, &k, s), 1);
	assert_int_equal(s[0], 2);
	/* below the record, the same as a kept one (another origin): not
	 * kept, it adds nothing */
	apply1(n, op_mark(&t, 2, FX_HLC(104, 0), 4, 1)); /* peerc 2 */
	apply1(n, op_mark(&t, 1, FX_HLC(105, 0), 5, 1)); /* peerb 2 */
	assert_int_equal(kept(n, CF_MARKS, &k, s), 1);
	assert_int_equal(kept_hlc(n, CF_MARKS, &k), FX_HLC(103, 0));
	/* the record's values again (another origin): it alone makes the
	 * record, and takes the kept one's place */
	apply1(n, op_mark(&t, 1, FX_HLC(106, 0), 6, 3)); /* peerb 3 */
	assert_int_equal(kept(n, CF_MARKS, &k, s), 1);
	assert_int_equal(kept_hlc(n, CF_MARKS, &k), FX_HLC(106, 0));
	buf_free(&k);
}

static void test_failures_pruned(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct top t;
	struct buf k = BUF_INIT;
	uint64_t s[80];

	memset(next_seq, 0, sizeof(next_seq));
	records_key_fail(&k, "alice", "peera");
	for (int i = 0; i < OPS_MAX_FAILURES_KEPT; i++)
		apply1(n, op_fail(&t, 0, FX_HLC(100 + i, 0)));
	assert_int_equal(kept(n, CF_FAILS, &k, s), OPS_MAX_FAILURES_KEPT);
	/* one more: the oldest attempt leaves the record, its op the list */
	apply1(n, op_fail(&t, 0, FX_HLC(1000, 0)));
	assert_int_equal(kept(n, CF_FAILS, &k, s), OPS_MAX_FAILURES_KEPT);
	for (int i = 0; i < OPS_MAX_FAILURES_KEPT; i++)
		assert_int_not_equal(s[i], 1);
	/* one kept already, noted again (a transfer brings it): once */
	struct buf again = BUF_INIT;
	assert_int_equal(recops_get(n->s, NULL, CF_FAILS, k.p, k.len, &again),
	                 0);
	Grantd__V1__RecordOps *ro = grantd__v1__record_ops__unpack(
	        NULL, again.len, (const uint8_t *)again.p);
	assert_non_null(ro);
	Grantd__V1__Op *first =
	        grantd__v1__op__unpack(NULL, ro->ops[0].len, ro->ops[0].data);
	struct store_batch *b;
	store_batch_new(&b, n->s);
	assert_int_equal(
	        recops_note(n->s, b, first, ro->ops[0].data, ro->ops[0].len, 0),
	        0);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	assert_int_equal(kept(n, CF_FAILS, &k, s), OPS_MAX_FAILURES_KEPT);
	grantd__v1__op__free_unpacked(first, NULL);
	grantd__v1__record_ops__free_unpacked(ro, NULL);
	buf_free(&again);
	/* an attempt older than every one kept: not kept either */
	apply1(n, op_fail(&t, 0, FX_HLC(50, 0)));
	assert_int_equal(kept(n, CF_FAILS, &k, s), OPS_MAX_FAILURES_KEPT);
	for (int i = 0; i < OPS_MAX_FAILURES_KEPT; i++)
		assert_true(s[i] >= 2 && s[i] <= OPS_MAX_FAILURES_KEPT + 1);
	buf_free(&k);
}

static void test_leaf(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct top t = {0};
	struct buf k = BUF_INIT;
	uint64_t s[80];

	memset(next_seq, 0, sizeof(next_seq));
	for (uint64_t i = 0; i < 3; i++) {
		apply1(n, op_leaf(&t, 0, i));
		buf_free(&t.text);
	}
	for (uint64_t i = 0; i < 3; i++) {
		records_key_tleaf(&k, "peera", i);
		assert_int_equal(kept(n, CF_TLEAVES, &k, s), 1);
		assert_int_equal(s[0], i + 1);
	}
	buf_free(&k);
}

/* A grant swept (expired past its grace): its operations go too. */
static void test_swept_grant(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct fx_op t;
	struct buf k = BUF_INIT;
	struct store_batch *b;
	uint64_t s[80];
	Grantd__V1__Op *op = fx_op_grant(&t, "peera", 1, FX_HLC(100, 0),
	                                 "alice", "192.0.2.1/32", 1000, false);

	assert_int_equal(fx_apply(n->o, n->s, &op, 1), 0);
	records_key_grant(&k, "alice", "192.0.2.1/32", "");
	assert_int_equal(kept(n, CF_GRANTS, &k, s), 1);
	store_batch_new(&b, n->s);
	assert_int_equal(ops_sweep_grants(n->o, b, (int64_t)time(NULL), 100),
	                 1);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
	assert_int_equal(kept(n, CF_GRANTS, &k, s), 0);
	buf_free(&k);
}

/* A local operation is kept once signed, at commit: the bytes of the
 * log, which verify. */
static void test_local_signed(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct opsig_signer key;
	struct opsig_verifier v;
	uint8_t curve[32] = {7};
	struct store_batch *b;
	struct top t;
	struct buf k = BUF_INIT, val = BUF_INIT, logged = BUF_INIT;

	assert_int_equal(opsig_signer_init(&key, curve, "h/grantd/sitea"), 0);
	ops_set_signer(n->o, &key);
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "sitea", key.key.pub), 0);
	store_batch_new(&b, n->s);
	op_user(&t, 0, 0);
	assert_int_equal(ops_local(n->o, b, &t.op), 0);
	/* not kept before it is signed */
	records_key_lww(&k, &t.op);
	assert_int_equal(recops_get(n->s, b, CF_USERS, k.p, k.len, &val), 0);
	assert_int_equal(val.len, 0);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
	assert_int_equal(recops_get(n->s, NULL, CF_USERS, k.p, k.len, &val), 0);
	Grantd__V1__RecordOps *ro = grantd__v1__record_ops__unpack(
	        NULL, val.len, (const uint8_t *)val.p);
	assert_non_null(ro);
	assert_int_equal(ro->n_ops, 1);
	Grantd__V1__Op *op =
	        grantd__v1__op__unpack(NULL, ro->ops[0].len, ro->ops[0].data);
	assert_non_null(op);
	assert_non_null(op->sig);
	assert_int_equal(opsig_verify(&v, op, NULL), OPSIG_OK);
	struct buf ok = BUF_INIT;
	records_key_oplog(&ok, "sitea", ops_epoch(n->o), op->seq);
	assert_int_equal(store_get(n->s, NULL, CF_OPLOG, ok.p, ok.len, &logged),
	                 0);
	assert_true(logged.len < ro->ops[0].len); /* compact: oplog.h */
	assert_int_equal(oplog_get(n->s, NULL, ok.p, ok.len, &logged), 0);
	assert_int_equal(logged.len, ro->ops[0].len);
	assert_memory_equal(logged.p, ro->ops[0].data, logged.len);
	grantd__v1__op__free_unpacked(op, NULL);
	grantd__v1__record_ops__free_unpacked(ro, NULL);
	ops_set_signer(n->o, NULL);
	buf_free(&k);
	buf_free(&ok);
	buf_free(&val);
	buf_free(&logged);
}

/* Sign op (origin peera) alone as a batch of one, as peera would send it;
 * *out is the decoded signed op (the caller frees it). */
static Grantd__V1__Op *signed_copy(const struct opsig_signer *k,
                                   uint8_t chain[OPSIG_HASH_LEN],
                                   Grantd__V1__Op *op)
{
	struct buf b = BUF_INIT, *p = &b;
	Grantd__V1__Op *out;

	records_pack(&b, &op->base);
	assert_int_equal(opsig_sign_batch(k, chain, &p, 1), 0);
	out = grantd__v1__op__unpack(NULL, b.len, (const uint8_t *)b.p);
	assert_non_null(out);
	buf_free(&b);
	return out;
}

/* The log's retention with compact entries (oplog.h): a signed operation
 * a record names is copied to CF_KEPTOPS whole, its signature back in it;
 * one whose batch record was lost is cut without a copy (it has no proof
 * to keep), and the retention goes on past it. */
static void test_cut_compact(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct opsig_signer key;
	uint8_t curve[32] = {7}, chain[OPSIG_HASH_LEN] = {0};
	struct top t;
	struct buf k = BUF_INIT, v = BUF_INIT;
	struct store_batch *b;
	Grantd__V1__Op *op;

	memset(next_seq, 0, sizeof(next_seq));
	assert_int_equal(opsig_signer_init(&key, curve, "h/grantd/peera"), 0);
	/* seq 1 pushes r0 and r1, seq 2 r0 again (r1 still names seq 1),
	 * each signed as a batch of its own */
	op = signed_copy(&key, chain, op_refs(&t, 0, FX_HLC(100, 0), 2));
	apply1(n, op);
	grantd__v1__op__free_unpacked(op, NULL);
	op = signed_copy(&key, chain, op_refs(&t, 0, FX_HLC(110, 0), 1));
	apply1(n, op);
	grantd__v1__op__free_unpacked(op, NULL);
	/* logged compact: no signature in the entry */
	records_key_oplog(&k, "peera", FX_EPOCH, 1);
	assert_int_equal(store_get(n->s, NULL, CF_OPLOG, k.p, k.len, &v), 0);
	op = grantd__v1__op__unpack(NULL, v.len, (const uint8_t *)v.p);
	assert_non_null(op);
	assert_non_null(op->sig);
	assert_false(op->sig->has_sig);
	grantd__v1__op__free_unpacked(op, NULL);
	/* seq 2's batch record lost */
	records_key_oplog(&k, "peera", FX_EPOCH, 2);
	assert_int_equal(store_batch_new(&b, n->s), 0);
	store_del(b, CF_OPBATCH, k.p, k.len);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	assert_int_equal(
	        ops_truncate_log(n->o, clock_wall_ms() + 3600 * 1000, 1000), 2);
	assert_false(holds_op(n, CF_OPLOG, 1));
	assert_false(holds_op(n, CF_OPLOG, 2));
	/* seq 1 kept whole, signed */
	records_key_oplog(&k, "peera", FX_EPOCH, 1);
	assert_int_equal(store_get(n->s, NULL, CF_KEPTOPS, k.p, k.len, &v), 0);
	op = grantd__v1__op__unpack(NULL, v.len, (const uint8_t *)v.p);
	assert_non_null(op);
	assert_true(op->sig && op->sig->has_sig);
	grantd__v1__op__free_unpacked(op, NULL);
	/* seq 2 had no proof left to keep */
	assert_false(holds_op(n, CF_KEPTOPS, 2));
	opsig_signer_wipe(&key);
	buf_free(&k);
	buf_free(&v);
}

/* ---- state transfer ---- */

static int setup_pair(void **state)
{
	struct fx_xfer *x;
	int rc = fx_xfer_open(&x, "test_recops", NGRANTS, WAIT_MS);

	*state = x;
	return rc;
}

static int teardown_pair(void **state)
{
	return fx_xfer_close((struct fx_xfer **)state);
}

/* Link portland (checking with both keys) and run until its transfer
 * from paloalto is over. */
static void transfer(struct fx_xfer *x)
{
	struct fx_node *both[] = {&x->f->a, &x->f->b};
	struct repl *r;
	bool started = false;

	assert_int_equal(fx_node_link(&x->f->b), 0);
	r = x->f->b.repl;
	repl_set_verifier(r, &x->v);
	for (uint64_t end = clock_mono_ms() + WAIT_MS; clock_mono_ms() < end;
	     fx_nodes_round(both, 2, 5)) {
		started |= r->xfer.p != NULL;
		if (started && !r->xfer.p)
			return;
	}
	fail_msg("no state transfer done");
}

static void test_transfer_honest(void **state)
{
	struct fx_xfer *x = *state;
	struct repl *r;

	transfer(x);
	r = x->f->b.repl;
	assert_int_equal(fx_xfer_held(x), NGRANTS);
	assert_int_equal(ops_count(x->f->b.o, CF_GRANTS, (int64_t)time(NULL)),
	                 NGRANTS);
	assert_memory_equal(ops_digest(x->f->b.o), ops_digest(x->f->a.o),
	                    DIGEST_LEN);
	assert_int_equal(r->drops[DROP_SIGNATURE], 0);
	assert_int_equal(r->drops[DROP_SNAP_RECORD], 0);
	/* checked, not taken unchecked */
	assert_int_equal(r->unchecked, 0);
}

/* A push of many refs: its operation (over 1 KiB) is kept by each ref,
 * and a state transfer sends it once for the reply (SnapRep.shared), each
 * ref's RecordOps naming it; the receiver checks it for each ref, as
 * before, and holds every ref. */
static void test_transfer_push_shared(void **state)
{
	struct fx_xfer *x = *state;
	struct fx_node *a = &x->f->a;
	enum { NREFS = 30 };
	static char names[NREFS][48];
	Grantd__V1__RefChange ch[NREFS], *chp[NREFS];
	Grantd__V1__RefUpdate ru = GRANTD__V1__REF_UPDATE__INIT;
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	struct repl *r;
	uint64_t t;

	for (int i = 0; i < NREFS; i++) {
		grantd__v1__ref_change__init(&ch[i]);
		snprintf(names[i], sizeof(names[i]), "refs/tags/v%02d", i);
		ch[i].ref = names[i], ch[i].old = OID0, ch[i].new_ = OID1;
		chp[i] = &ch[i];
	}
	ru.repo = "demo", ru.changes = chp, ru.n_changes = NREFS;
	op.body_case = GRANTD__V1__OP__BODY_REFS, op.refs = &ru;
	assert_true(grantd__v1__op__get_packed_size(&op) > 2048);
	assert_int_equal(ops_local(a->o, writer_batch(a->w), &op), 0);
	assert_int_equal(writer_commit(a->w, &t), 0);
	assert_true(ops_truncate_log(a->o, clock_wall_ms() + 60000,
	                             TRUNCATE_MAX) > 0);
	transfer(x);
	r = x->f->b.repl;
	assert_int_equal(r->drops[DROP_SIGNATURE], 0);
	assert_int_equal(r->drops[DROP_SNAP_RECORD], 0);
	assert_memory_equal(ops_digest(x->f->b.o), ops_digest(a->o),
	                    DIGEST_LEN);
	for (int i = 0; i < NREFS; i++) {
		struct buf k = BUF_INIT, v = BUF_INIT;
		records_key_ref(&k, "demo", names[i]);
		assert_int_equal(
		        store_get(x->f->b.s, NULL, CF_REFS, k.p, k.len, &v), 0);
		buf_free(&k);
		buf_free(&v);
	}
	assert_int_equal(r->unchecked, 0);
}

static void refused(struct fx_xfer *x, enum repl_drop why)
{
	struct repl *r;

	transfer(x);
	r = x->f->b.repl;
	assert_int_equal(fx_xfer_has_grant(x, "mallory"), 0);
	assert_int_equal(r->drops[why], 1);
	/* the honest records came; the vector was not raised */
	assert_int_equal(ops_count(x->f->b.o, CF_GRANTS, (int64_t)time(NULL)),
	                 NGRANTS);
	assert_int_equal(fx_xfer_held(x), 0);
}

static void test_transfer_forged_bare(void **state)
{
	struct fx_xfer *x = *state;

	assert_int_equal(fx_xfer_forge(x, "mallory", NULL, NULL), 0);
	refused(x, DROP_SIGNATURE);
}

static void test_transfer_forged_op(void **state)
{
	struct fx_xfer *x = *state;

	/* portland's, signed by paloalto's key */
	assert_int_equal(fx_xfer_forge(x, "mallory", &x->ka, NULL), 0);
	refused(x, DROP_SIGNATURE);
}

static void test_transfer_op_of_another_record(void **state)
{
	struct fx_xfer *x = *state;

	/* portland's own signature, on a grant of another user: it cannot
	 * vouch for mallory's */
	assert_int_equal(fx_xfer_forge(x, "mallory", &x->kb, "trudy"), 0);
	refused(x, DROP_SNAP_RECORD);
	assert_int_equal(x->f->b.repl->drops[DROP_SIGNATURE], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_lww_winner_only,
	                                        setup_sites, fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_refs_per_ref, setup_sites,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_cut_compact, setup_sites,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_stored_once, setup_sites,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_mark_domination,
	                                        setup_sites, fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_failures_pruned,
	                                        setup_sites, fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_leaf, setup_sites,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_swept_grant, setup_sites,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_local_signed, setup_sites,
	                                        fx_sites_teardown),
	        cmocka_unit_test_setup_teardown(test_transfer_honest,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(test_transfer_push_shared,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(test_transfer_forged_bare,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(test_transfer_forged_op,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(
	                test_transfer_op_of_another_record, setup_pair,
	                teardown_pair),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
