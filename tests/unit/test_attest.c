/*
 * test_attest.c: node/state/attest.c, the records made before signing
 * re-issued as this site's signed operations (issue 21, "Upgraded
 * stores").
 *
 * sitea's store holds records merged without operations (ops_merge_record,
 * as a v0.1.0 store or a transfer from a keyless origin leaves them): a
 * user, an unlock and a ref stamped by sitea, a user stamped by peerb, a
 * mark, failures recorded at sitea and at peerb; and a user made by
 * sitea, signed, that keeps its operation.  The mark and sitea's failures
 * came as unsigned operations (peerb's and sitea's, of a release that did
 * not sign, taken by an upgraded site), kept with them: the signed
 * re-issue takes their place (recops.h).  The job, in chunks of two,
 * stopped after the first chunk and started again on the store reopened
 * (it goes on from where it stopped: each record attested once): every
 * record of sitea's (and the mark) then keeps one operation, signed by
 * sitea (it verifies), whose merge into an empty store makes the record
 * byte for byte, while the record itself did not change (nor the
 * digest); peerb's records keep none; the marker is there, so the job
 * does not run again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attest.h"
#include "buf.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "opsig.h"
#include "recops.h"
#include "records.h"
#include "store.h"

#define OID1 "1111111111111111111111111111111111111111"

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_attest", LOG_LVL_ERROR);
}

static int setup_sites(void **state)
{
	struct fx_sites *f;

	if (fx_sites_open(&f, "test_attest") < 0 ||
	    fx_site_open(&f->n[0], f->dir, "sitea") < 0 ||
	    fx_site_open(&f->n[1], f->dir, "siteb") < 0)
		return -1;
	*state = f;
	return 0;
}

/* One record: its family, key and packed value. */
struct rec {
	enum store_cf cf;
	struct buf key, val;
	bool own; /* sitea attests it */
};

#define NREC 8

static void pack(struct buf *out, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	buf_reset(out);
	protobuf_c_message_pack(m, buf_extend(out, n));
}

static void
user(struct rec *r, const char *name, uint64_t hlc, const char *origin)
{
	Grantd__V1__User u = GRANTD__V1__USER__INIT;

	u.name = (char *)name;
	u.hlc = hlc, u.has_hlc = 1;
	u.origin = (char *)origin;
	r->cf = CF_USERS;
	buf_puts(&r->key, name);
	pack(&r->val, &u.base);
}

/* The records of the test, merged into sitea's store without
 * operations. */
static void make_records(struct fx_site *n, struct rec r[NREC])
{
	Grantd__V1__Unlock ul = GRANTD__V1__UNLOCK__INIT;
	Grantd__V1__Ref ref = GRANTD__V1__REF__INIT;
	Grantd__V1__Mark mk = GRANTD__V1__MARK__INIT;
	Grantd__V1__Failures fl = GRANTD__V1__FAILURES__INIT;
	uint64_t at[2] = {FX_HLC(90, 0), FX_HLC(95, 1)};
	struct store_batch *b;
	struct buf why = BUF_INIT;

	memset(r, 0, NREC * sizeof(*r));
	user(&r[0], "alice", FX_HLC(100, 0), "sitea");
	r[0].own = true;
	user(&r[1], "bob", FX_HLC(101, 0), "peerb");
	ul.user = "alice", ul.hlc = FX_HLC(102, 0), ul.has_hlc = 1;
	ul.origin = "sitea";
	r[2].cf = CF_UNLOCK, r[2].own = true;
	buf_puts(&r[2].key, "alice");
	pack(&r[2].val, &ul.base);
	ref.repo = "demo", ref.ref = "refs/heads/main", ref.target = OID1;
	ref.hlc = FX_HLC(103, 0), ref.has_hlc = 1, ref.origin = "sitea";
	r[3].cf = CF_REFS, r[3].own = true;
	records_key_ref(&r[3].key, "demo", "refs/heads/main");
	pack(&r[3].val, &ref.base);
	mk.user = "alice", mk.enroll_id = 7, mk.has_enroll_id = 1;
	mk.next = 5, mk.has_next = 1, mk.scratch_used = 6;
	mk.has_scratch_used = 1;
	r[4].cf = CF_MARKS, r[4].own = true;
	records_key_mark(&r[4].key, "alice", 7);
	pack(&r[4].val, &mk.base);
	fl.user = "alice", fl.site = "sitea", fl.hlc = at, fl.n_hlc = 2;
	r[5].cf = CF_FAILS, r[5].own = true;
	records_key_fail(&r[5].key, "alice", "sitea");
	pack(&r[5].val, &fl.base);
	fl.site = "peerb";
	r[6].cf = CF_FAILS;
	records_key_fail(&r[6].key, "alice", "peerb");
	pack(&r[6].val, &fl.base);

	store_batch_new(&b, n->s);
	for (int i = 0; i < NREC - 1; i++)
		if (i != 4 && i != 5)
			assert_int_equal(
			        ops_merge_record(n->o, b, r[i].cf, r[i].val.p,
			                         r[i].val.len, NULL, &why),
			        0);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
	/* the mark and sitea's failures came as operations of a release
	 * that did not sign (peerb's, and sitea's of an earlier epoch): kept
	 * unsigned with the record */
	Grantd__V1__Op uop[2] = {GRANTD__V1__OP__INIT, GRANTD__V1__OP__INIT};
	Grantd__V1__Op *up[2] = {&uop[0], &uop[1]};
	uop[0].origin = "peerb", uop[1].origin = "sitea";
	for (int i = 0; i < 2; i++) {
		uop[i].epoch = FX_EPOCH, uop[i].has_epoch = 1;
		uop[i].seq = 1, uop[i].has_seq = 1;
		uop[i].hlc = FX_HLC(96, i), uop[i].has_hlc = 1;
	}
	uop[0].body_case = GRANTD__V1__OP__BODY_MARK, uop[0].mark = &mk;
	uop[1].body_case = GRANTD__V1__OP__BODY_FAILURE;
	fl.site = "sitea";
	uop[1].failure = &fl;
	assert_int_equal(fx_apply(n->o, n->s, up, 2), 0);
	fl.site = "peerb";
	store_batch_new(&b, n->s);
	/* and one made here, signed, that keeps its operation: attested
	 * too (a peer of an older release may keep none) */
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__User u = GRANTD__V1__USER__INIT;
	u.name = "carol";
	op.body_case = GRANTD__V1__OP__BODY_USER, op.user = &u;
	assert_int_equal(ops_local(n->o, b, &op), 0);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	ops_outbox_clear(n->o);
	r[7].cf = CF_USERS, r[7].own = true;
	buf_puts(&r[7].key, "carol");
	assert_int_equal(store_get(n->s, NULL, CF_USERS, r[7].key.p,
	                           r[7].key.len, &r[7].val),
	                 0);
	store_batch_free(&b);
	buf_free(&why);
}

/* Chunks of max until done or stop chunks made; each committed. */
static int run(struct fx_site *n, struct attest_job *j, int stop)
{
	struct store_batch *b;
	int made = 0;

	for (int i = 0; i < stop && !j->done; i++) {
		store_batch_new(&b, n->s);
		int k = attest_step(j, n->o, b, 2);
		assert_true(k >= 0 && k <= 2);
		made += k;
		assert_int_equal(ops_commit(n->o, b, false), 0);
		store_batch_free(&b);
	}
	return made;
}

/* r's kept operations: none for another site's record; else one, signed
 * by sitea, of that record, which merged into siteb's empty store makes
 * the record's bytes. */
static void check_kept(struct fx_site *a,
                       struct fx_site *to,
                       struct opsig_verifier *v,
                       const struct rec *r)
{
	struct buf ops = BUF_INIT, got = BUF_INIT, why = BUF_INIT;
	struct store_batch *b;

	assert_int_equal(
	        recops_get(a->s, NULL, r->cf, r->key.p, r->key.len, &ops), 0);
	if (!r->own) {
		assert_int_equal(ops.len, 0);
		buf_free(&ops);
		return;
	}
	Grantd__V1__RecordOps *ro = grantd__v1__record_ops__unpack(
	        NULL, ops.len, (const uint8_t *)ops.p);
	assert_non_null(ro);
	assert_int_equal(ro->n_ops, 1);
	Grantd__V1__Op *op =
	        grantd__v1__op__unpack(NULL, ro->ops[0].len, ro->ops[0].data);
	assert_non_null(op);
	assert_string_equal(op->origin, "sitea");
	assert_int_equal(opsig_verify(v, op, NULL), OPSIG_OK);
	assert_true(recops_makes(op, r->cf, r->key.p, r->key.len));
	/* the record at sitea is as it was */
	assert_int_equal(
	        store_get(a->s, NULL, r->cf, r->key.p, r->key.len, &got), 0);
	assert_int_equal(got.len, r->val.len);
	assert_memory_equal(got.p, r->val.p, got.len);
	/* and the operation alone makes it at a site that has none */
	store_batch_new(&b, to->s);
	assert_int_equal(
	        ops_merge_signed(to->o, b, &op, &ro->ops[0], 1, NULL, &why), 0);
	assert_int_equal(ops_commit(to->o, b, false), 0);
	store_batch_free(&b);
	assert_int_equal(
	        store_get(to->s, NULL, r->cf, r->key.p, r->key.len, &got), 0);
	assert_int_equal(got.len, r->val.len);
	assert_memory_equal(got.p, r->val.p, got.len);
	grantd__v1__op__free_unpacked(op, NULL);
	grantd__v1__record_ops__free_unpacked(ro, NULL);
	buf_free(&ops);
	buf_free(&got);
	buf_free(&why);
}

static void test_attest(void **state)
{
	struct fx_sites *f = *state;
	struct fx_site *n = &f->n[0];
	struct opsig_signer key;
	struct opsig_verifier v;
	uint8_t curve[32] = {9};
	uint8_t before[DIGEST_LEN];
	struct attest_job j;
	struct rec r[NREC];
	bool need;
	int own = 0;

	assert_int_equal(opsig_signer_init(&key, curve, "h/grantd/sitea"), 0);
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "sitea", key.key.pub), 0);
	ops_set_signer(n->o, &key);
	make_records(n, r);
	for (int i = 0; i < NREC; i++)
		own += r[i].own;
	memcpy(before, ops_digest(n->o), DIGEST_LEN);
	assert_int_equal(attest_needed(n->s, &need), 0);
	assert_true(need);

	/* one chunk of two, then a restart */
	assert_int_equal(attest_init(&j, n->s), 0);
	assert_int_equal(run(n, &j, 1), 2);
	assert_false(j.done);
	attest_free(&j);
	fx_site_close(n);
	assert_int_equal(fx_site_open(n, f->dir, "sitea"), 0);
	ops_set_signer(n->o, &key);
	assert_int_equal(attest_needed(n->s, &need), 0);
	assert_true(need);
	/* the rest, from where the first run stopped: each record once */
	assert_int_equal(attest_init(&j, n->s), 0);
	assert_int_equal(run(n, &j, 100), own - 2);
	assert_true(j.done);
	attest_free(&j);
	assert_memory_equal(ops_digest(n->o), before, DIGEST_LEN);
	for (int i = 0; i < NREC; i++)
		check_kept(n, &f->n[1], &v, &r[i]);

	/* the ref's re-issue (an equal stamp) noted no losing tip */
	for (int i = 0; i < 2; i++) {
		struct store_iter *it;
		const char *lk;
		size_t ll;
		struct buf lv = BUF_INIT;
		store_iter_new(&it, f->n[i].s, NULL, CF_LOSERS, "", 0);
		assert_int_equal(store_iter_next(it, &lk, &ll, &lv), 0);
		store_iter_free(&it);
		buf_free(&lv);
	}
	/* the marker: the job does not run again */
	assert_int_equal(attest_needed(n->s, &need), 0);
	assert_false(need);
	struct ops_verify ver;
	assert_int_equal(ops_verify(n->o, &ver), 0);
	assert_true(ver.equal);
	ops_set_signer(n->o, NULL);
	for (int i = 0; i < NREC; i++) {
		buf_free(&r[i].key);
		buf_free(&r[i].val);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_attest, setup_sites,
	                                        fx_sites_teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
