/*
 * test_repl_xfer.c: node/peers/repl_xfer.c, state transfer, through
 * repl_int.h.
 *
 * Two nodes (paloalto, portland) on real RocksDB stores in temp
 * directories, linked by real CURVE sockets over ipc (fixture.h's
 * fx_node).  paloalto's log is truncated by retention, so portland can
 * catch up only by a state transfer:
 *  - the positive control: the transfer brings portland level (vector
 *    and digest), and every family was asked for once;
 *  - a transfer cut in the middle (paloalto stops answering after the
 *    grants family): nothing is half-applied (portland's vector claims
 *    nothing of paloalto's stream, so it still asks), the transfer times
 *    out and starts over, and the second run makes portland level with
 *    each record once;
 *  - a reply that is not the one asked (another family, or from a peer
 *    no transfer runs with) is dropped, and the transfer goes on;
 *  - a record failing its check: the transfer finishes but raises no
 *    vector (counted as snapshot_record).
 *  - issue 21: paloalto's transparency log leaves reach portland, a
 *    frontend or a mirror, by the transfer alone: the same tree (size and
 *    root) and digest there.
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
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "pushleaf.h"
#include "repl_int.h"
#include "tlogstore.h"
#include "writer.h"

#define WAIT_MS 20000
#define NGRANTS 6

/* the families a transfer copies, in its order (repl_xfer.c's) */
static const enum store_cf cfs[] = {GD_RECORD_KINDS(RECORDS_SNAP_CF)};
#define NCFS ((int)GD_ARRAY_SIZE(cfs))

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_repl_xfer", LOG_LVL_ERROR);
}

/* paloalto linked, with NGRANTS grants and no log left; portland open,
 * not linked. */
static int setup(void **state)
{
	struct fx_pair *f;

	if (fx_pair_open(&f, "test_repl_xfer", CONFIG_ROLE_FRONTEND,
	                 FX_PAIR_LINK_A) < 0)
		return -1;
	if (fx_node_grants(&f->a, NGRANTS, WAIT_MS) < 0 ||
	    ops_truncate_log(f->a.o, clock_wall_ms() + 60000, TRUNCATE_MAX) !=
	            NGRANTS) {
		fx_pair_close(&f);
		return -1;
	}
	*state = f;
	return 0;
}

/* How much of paloalto's stream node n holds. */
static uint64_t held(struct fx_node *n, struct fx_pair *f)
{
	return ops_vv_get(n->o, NULL, "paloalto", ops_epoch(f->a.o));
}

static int64_t grants(struct fx_node *n)
{
	return ops_count(n->o, CF_GRANTS, (int64_t)time(NULL));
}

typedef bool (*cond_fn)(struct fx_pair *f);

/* Run the loops of nodes[0..n) until cond holds (fail after WAIT_MS). */
static void run_until(struct fx_pair *f,
                      struct fx_node *const *nodes,
                      int n,
                      cond_fn cond,
                      const char *what)
{
	for (uint64_t end = clock_mono_ms() + WAIT_MS; clock_mono_ms() < end;
	     fx_nodes_round(nodes, n, 5))
		if (cond(f))
			return;
	fail_msg("never: %s", what);
}

static bool b_level(struct fx_pair *f)
{
	return held(&f->b, f) == NGRANTS && !f->b.repl->xfer.p;
}

/* The grants family merged, the transfer not done. */
static bool b_grants_in(struct fx_pair *f)
{
	return f->b.repl->xfer.p && f->b.repl->xfer.records >= NGRANTS;
}

static bool b_transferring(struct fx_pair *f)
{
	return f->b.repl->xfer.p != NULL;
}

static void test_transfer(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};

	assert_int_equal(fx_node_link(&f->b), 0);
	run_until(f, both, 2, b_transferring, "a state transfer starts");
	run_until(f, both, 2, b_level, "portland level with paloalto");
	assert_int_equal(grants(&f->b), NGRANTS);
	assert_memory_equal(ops_digest(f->b.o), ops_digest(f->a.o), DIGEST_LEN);
	assert_int_equal(f->b.repl->drops[DROP_SNAP_RECORD], 0);
	assert_int_equal(f->b.repl->drops[DROP_SNAP_VECTOR], 0);
}

static void test_cut_in_the_middle(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	struct repl *r;
	uint64_t t;

	assert_int_equal(fx_node_link(&f->b), 0);
	r = f->b.repl;
	run_until(f, both, 2, b_grants_in, "the grants family transferred");
	/* paloalto goes silent: what it answered already is taken */
	repl_handle(r);
	assert_non_null(r->xfer.p);
	assert_true(cfs[r->xfer.cf] != CF_GRANTS); /* past the grants */
	assert_true(r->xfer.cf < NCFS - 1); /* families are left */
	/* nothing half-applied: the records merged so far are there, but
	 * the vector claims none of paloalto's stream, so portland is
	 * still behind it and will ask again */
	assert_int_equal(writer_commit(f->b.w, &t), 0);
	assert_int_equal(grants(&f->b), NGRANTS);
	assert_int_equal(held(&f->b, f), 0);
	uint64_t lag;
	assert_non_null(repl_hb_ahead(r, &r->peers[0], &lag));
	assert_int_equal(lag, NGRANTS);
	/* no answer within RANGE_TIMEOUT_MS: dropped, to start over */
	repl_tick(r, clock_mono_ms() + RANGE_TIMEOUT_MS + 1);
	assert_null(r->xfer.p);
	assert_int_equal(r->xfer.cf, 0);
	assert_int_equal(r->xfer.after.len, 0);
	assert_int_equal(held(&f->b, f), 0);
	/* paloalto is back: the transfer runs again, whole */
	run_until(f, both, 2, b_transferring, "the transfer starts over");
	run_until(f, both, 2, b_level, "portland level with paloalto");
	assert_int_equal(grants(&f->b), NGRANTS);
	assert_memory_equal(ops_digest(f->b.o), ops_digest(f->a.o), DIGEST_LEN);
}

static void test_reply_not_asked(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	Grantd__V1__SnapRep rep = GRANTD__V1__SNAP_REP__INIT;
	struct repl *r;
	uint64_t dropped;

	assert_int_equal(fx_node_link(&f->b), 0);
	r = f->b.repl;
	/* no transfer running: a reply is dropped */
	dropped = repl_dropped_total(f->b.repl);
	rep.cf = CF_GRANTS, rep.has_cf = 1;
	rep.cf_done = rep.has_cf_done = 1;
	repl_xfer_apply(r, &r->peers[0], &rep, clock_mono_ms());
	assert_int_equal(repl_dropped_total(f->b.repl), dropped + 1);
	assert_null(r->xfer.p);
	/* one running, a reply of another family than asked: dropped, the
	 * transfer stays where it is */
	run_until(f, both, 2, b_transferring, "a state transfer starts");
	int cf = r->xfer.cf;
	rep.cf = (uint32_t)cfs[(r->xfer.cf + 1) % NCFS];
	dropped = repl_dropped_total(f->b.repl);
	repl_xfer_apply(r, &r->peers[0], &rep, clock_mono_ms());
	assert_int_equal(repl_dropped_total(f->b.repl), dropped + 1);
	assert_int_equal(r->xfer.cf, cf);
	run_until(f, both, 2, b_level, "portland level with paloalto");
	assert_int_equal(grants(&f->b), NGRANTS);
}

static void test_record_refused(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	Grantd__V1__SnapRep rep = GRANTD__V1__SNAP_REP__INIT;
	ProtobufCBinaryData key = {3, (uint8_t *)"bad"};
	ProtobufCBinaryData val = {7, (uint8_t *)"garbage"};
	struct repl *r;

	assert_int_equal(fx_node_link(&f->b), 0);
	r = f->b.repl;
	run_until(f, both, 2, b_transferring, "a state transfer starts");
	/* a record that does not decode, in the family asked */
	rep.cf = (uint32_t)CF_USERS, rep.has_cf = 1;
	rep.keys = &key, rep.n_keys = 1;
	rep.values = &val, rep.n_values = 1;
	if (cfs[r->xfer.cf] == CF_USERS) {
		repl_xfer_apply(r, r->xfer.p, &rep, clock_mono_ms());
		assert_int_equal(r->drops[DROP_SNAP_RECORD], 1);
		assert_int_equal(r->xfer.refused, 1);
	} else {
		fail_msg("the transfer went past the users family already");
	}
	/* the rest comes; the transfer ends without raising the vector */
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     r->xfer.p && clock_mono_ms() < end;)
		fx_nodes_round(both, 2, 5);
	assert_null(r->xfer.p);
	assert_int_equal(held(&f->b, f), 0);
}

/* ---- transparency log leaves (issue 21) ---- */

#define NLEAVES 5

/* NLEAVES leaves of paloalto's, committed and published, then its log
 * truncated: only a state transfer can bring them. */
static int leaves_made(struct fx_pair *f)
{
	struct fx_node *one[] = {&f->a};
	struct pushleaf_ref r = {"refs/heads/main",
	                         "0000000000000000000000000000000000000000",
	                         "1111111111111111111111111111111111111111"};
	struct buf text = BUF_INIT;
	uint64_t t;

	for (uint64_t i = 0; i < NLEAVES; i++) {
		Grantd__V1__Op op = GRANTD__V1__OP__INIT;
		Grantd__V1__PushLeaf l = GRANTD__V1__PUSH_LEAF__INIT;
		struct pushleaf pl = {.index = i, .nrefs = 1, .refs = &r};
		snprintf(pl.origin, sizeof(pl.origin), "paloalto");
		snprintf(pl.repo, sizeof(pl.repo), "demo");
		if (pushleaf_format(&text, &pl) < 0)
			return -1;
		l.origin = "paloalto";
		l.index = i, l.has_index = 1;
		l.text.data = (uint8_t *)text.p, l.text.len = text.len;
		l.has_text = 1;
		op.body_case = GRANTD__V1__OP__BODY_PUSH_LEAF;
		op.push_leaf = &l;
		if (ops_local(f->a.o, writer_batch(f->a.w), &op) < 0)
			return -1;
	}
	buf_free(&text);
	if (writer_commit(f->a.w, &t) < 0)
		return -1;
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     f->a.npublished < NLEAVES && clock_mono_ms() < end;)
		fx_nodes_round(one, 1, 10);
	return ops_truncate_log(f->a.o, clock_wall_ms() + 60000,
	                        TRUNCATE_MAX) == NLEAVES
	               ? 0
	               : -1;
}

static bool b_leaves_level(struct fx_pair *f)
{
	return held(&f->b, f) == NLEAVES && !f->b.repl->xfer.p;
}

static void transfer_leaves(enum config_role role)
{
	struct fx_pair *f;
	struct tlog_hash ra, rb;
	uint64_t na, nb;

	assert_int_equal(
	        fx_pair_open(&f, "test_repl_xfer", role, FX_PAIR_LINK_A), 0);
	assert_int_equal(leaves_made(f), 0);
	struct fx_node *both[] = {&f->a, &f->b};
	assert_int_equal(fx_node_link(&f->b), 0);
	run_until(f, both, 2, b_leaves_level, "portland has paloalto's leaves");
	assert_int_equal(tlogstore_size(f->a.s, NULL, "paloalto", &na), 0);
	assert_int_equal(tlogstore_size(f->b.s, NULL, "paloalto", &nb), 0);
	assert_int_equal(na, NLEAVES);
	assert_int_equal(nb, NLEAVES);
	assert_int_equal(tlogstore_root(&ra, f->a.s, NULL, "paloalto", na), 0);
	assert_int_equal(tlogstore_root(&rb, f->b.s, NULL, "paloalto", nb), 0);
	assert_true(tlog_hash_eq(&ra, &rb));
	assert_int_equal(ops_count(f->b.o, CF_TLEAVES, 0), NLEAVES);
	if (role == CONFIG_ROLE_FRONTEND)
		assert_memory_equal(ops_digest(f->b.o), ops_digest(f->a.o),
		                    DIGEST_LEN);
	assert_int_equal(f->b.repl->drops[DROP_SNAP_RECORD], 0);
	assert_int_equal(fx_pair_close(&f), 0);
}

static void test_transfer_leaves(void **state)
{
	(void)state;
	transfer_leaves(CONFIG_ROLE_FRONTEND);
}

static void test_transfer_leaves_mirror(void **state)
{
	(void)state;
	transfer_leaves(CONFIG_ROLE_MIRROR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_transfer_leaves),
	        cmocka_unit_test(test_transfer_leaves_mirror),
	        cmocka_unit_test_setup_teardown(test_transfer, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_cut_in_the_middle, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_reply_not_asked, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_record_refused, setup,
	                                        fx_pair_teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
