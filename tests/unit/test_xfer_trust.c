/*
 * test_xfer_trust.c: `grantctl rebuild --from SITE --trust-unsigned`
 * (repl_rebuild's trust_unsigned, repl_xfer_rebuild; issue 21, the
 * upgrade window): the state transfer that rebuild starts takes records
 * without signed operations even when their origin has a key, and that
 * transfer only.
 *
 * Two nodes (fixture.h's fx_pair, as test_recops.c's state transfer):
 * paloalto serving, portland (with paloalto's and its own key) receiving;
 * a grant stamped by portland written straight into paloalto's store
 * without operations (a record of a store written before they were kept,
 * or a forged one):
 *  - a transfer portland starts itself refuses it (DROP_SIGNATURE);
 *  - the trusting rebuild's transfer takes it, counted (trusted and
 *    unchecked), and raises the vector; a later transfer (not started by
 *    that rebuild) refuses the next such record again;
 *  - with an operation signed by the wrong key, refused even trusting;
 *  - the trusting transfer cut (no reply in time): its restart refuses;
 *  - asked while portland's own transfer runs: that one refuses, the
 *    trusting one starts when it is over and takes the record;
 *  - the command (cmd_node.c's rebuild row): fewer than two words, or a
 *    third other than --trust-unsigned, is a usage error naming both
 *    forms; with it, the trusting transfer starts.
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
#include "cmd.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "opsig.h"
#include "records.h"
#include "repl_int.h"
#include "store.h"
#include "writer.h"

#define WAIT_MS 20000
#define NGRANTS 4

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_xfer_trust", LOG_LVL_ERROR);
}

struct xf {
	struct fx_pair *f;
	struct opsig_signer ka, kb;
	struct opsig_verifier v;
};

/* paloalto with NGRANTS grants and its log truncated (a transfer is the
 * only way to them); portland not linked yet. */
static int setup_pair(void **state)
{
	struct xf *x = calloc(1, sizeof(*x));
	uint8_t ca[32] = {1}, cb[32] = {2};

	if (!x || fx_pair_open(&x->f, "test_xfer_trust", CONFIG_ROLE_FRONTEND,
	                       FX_PAIR_LINK_A) < 0)
		return -1;
	if (opsig_signer_init(&x->ka, ca, "h/grantd/paloalto") < 0 ||
	    opsig_signer_init(&x->kb, cb, "h/grantd/portland") < 0)
		return -1;
	ops_set_signer(x->f->a.o, &x->ka);
	ops_set_signer(x->f->b.o, &x->kb);
	opsig_verifier_init(&x->v);
	if (opsig_verifier_add(&x->v, "paloalto", x->ka.key.pub) < 0 ||
	    opsig_verifier_add(&x->v, "portland", x->kb.key.pub) < 0)
		return -1;
	if (fx_node_grants(&x->f->a, NGRANTS, WAIT_MS) < 0 ||
	    ops_truncate_log(x->f->a.o, clock_wall_ms() + 60000,
	                     TRUNCATE_MAX) != NGRANTS)
		return -1;
	*state = x;
	return 0;
}

static int teardown_pair(void **state)
{
	struct xf *x = *state;
	int rc = fx_pair_close(&x->f);

	free(x);
	return rc;
}

static uint64_t held(struct fx_pair *f)
{
	return ops_vv_get(f->b.o, NULL, "paloalto", ops_epoch(f->a.o));
}

/* Is user's grant (forge's) at portland? */
static bool has_grant(struct xf *x, const char *user)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	records_key_grant(&k, user, "192.0.2.66/32", "");
	rc = store_get(x->f->b.s, NULL, CF_GRANTS, k.p, k.len, &v);
	assert_true(rc == 0 || rc == GD_ENOTFOUND);
	buf_free(&k);
	buf_free(&v);
	return rc == 0;
}

/* A grant of user stamped by portland, written into paloalto's store as
 * an old store holds it (or a dishonest paloalto would write it): with
 * signer, beside it a RecordOps of one operation making it, signed by
 * signer. */
static void
forge(struct xf *x, const char *user, const struct opsig_signer *signer)
{
	struct fx_node *a = &x->f->a;
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	struct buf k = BUF_INIT, v = BUF_INIT, rk = BUF_INIT, one = BUF_INIT;
	struct store_batch *b = writer_batch(a->w);
	uint64_t t;

	g.user = (char *)user, g.net = "192.0.2.66/32", g.session = "";
	g.added = 1700000000, g.has_added = 1;
	g.expires = 4102444800, g.has_expires = 1;
	g.site = "portland";
	g.hlc = FX_HLC(clock_wall_ms() - 1000, 0), g.has_hlc = 1;
	g.origin = "portland";
	records_key_grant(&k, g.user, g.net, g.session);
	grantd__v1__grant__pack(
	        &g, buf_extend(&v, grantd__v1__grant__get_packed_size(&g)));
	store_put(b, CF_GRANTS, k.p, k.len, v.p, v.len);
	if (signer) {
		struct buf *ptr = &one;
		Grantd__V1__RecordOps ro = GRANTD__V1__RECORD_OPS__INIT;
		ProtobufCBinaryData d;
		uint8_t chain[OPSIG_HASH_LEN] = {0};
		op.origin = "portland";
		op.epoch = FX_EPOCH, op.has_epoch = 1;
		op.seq = 1, op.has_seq = 1;
		op.hlc = g.hlc, op.has_hlc = 1;
		op.body_case = GRANTD__V1__OP__BODY_GRANT;
		g.hlc = 0, g.has_hlc = 0, g.origin = NULL;
		op.grant = &g;
		grantd__v1__op__pack(
		        &op,
		        buf_extend(&one, grantd__v1__op__get_packed_size(&op)));
		assert_int_equal(opsig_sign_batch(signer, chain, &ptr, 1), 0);
		d.data = (uint8_t *)one.p, d.len = one.len;
		ro.ops = &d, ro.n_ops = 1;
		buf_reset(&v);
		grantd__v1__record_ops__pack(
		        &ro,
		        buf_extend(&v, grantd__v1__record_ops__get_packed_size(
		                               &ro)));
		records_key_recops(&rk, CF_GRANTS, k.p, k.len);
		store_put(b, CF_RECOPS, rk.p, rk.len, v.p, v.len);
	}
	assert_int_equal(writer_commit(a->w, &t), 0);
	buf_free(&k);
	buf_free(&v);
	buf_free(&rk);
	buf_free(&one);
}

/* Link portland (checking with both keys); trusting: then `grantctl
 * rebuild --from paloalto --trust-unsigned` as soon as paloalto can be
 * reached (its handshake, a few rounds), long before portland could start
 * a transfer of its own (a heartbeat, then a range, away). */
static struct repl *link_b(struct xf *x, bool trusting)
{
	struct fx_node *both[] = {&x->f->a, &x->f->b};
	struct repl *r;
	int rc = GD_EUNREACH;

	assert_int_equal(fx_node_link(&x->f->b), 0);
	r = x->f->b.repl;
	repl_set_verifier(r, &x->v);
	assert_int_equal(repl_rebuild(r, "nosuchsite", trusting), GD_ENOTFOUND);
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     trusting && rc == GD_EUNREACH && clock_mono_ms() < end;) {
		fx_nodes_round(both, 2, 5);
		rc = repl_rebuild(r, "paloalto", true);
	}
	if (trusting) {
		assert_int_equal(rc, 0);
		assert_non_null(r->xfer.p);
		assert_true(r->xfer.trust);
		assert_int_equal(r->xfer.records + r->xfer.refused, 0);
	}
	return r;
}

/* Run both nodes until a transfer portland runs (running now or started
 * later) is over. */
static void run_transfer(struct xf *x)
{
	struct fx_node *both[] = {&x->f->a, &x->f->b};
	struct repl *r = x->f->b.repl;
	bool started = false;

	for (uint64_t end = clock_mono_ms() + WAIT_MS; clock_mono_ms() < end;
	     fx_nodes_round(both, 2, 5)) {
		started |= r->xfer.p != NULL;
		if (started && !r->xfer.p)
			return;
	}
	fail_msg("no state transfer done");
}

/* The honest records came whatever happened to the forged ones. */
static void honest_came(struct xf *x)
{
	assert_true(ops_count(x->f->b.o, CF_GRANTS, (int64_t)time(NULL)) >=
	            NGRANTS);
}

static void test_bare_refused_untrusted(void **state)
{
	struct xf *x = *state;
	struct repl *r;

	forge(x, "mallory", NULL);
	r = link_b(x, false);
	run_transfer(x);
	honest_came(x);
	assert_false(has_grant(x, "mallory"));
	assert_int_equal(r->drops[DROP_SIGNATURE], 1);
	assert_int_equal(r->unsigned_trusted, 0);
	assert_int_equal(held(x->f), 0); /* the vector not raised */
}

static void test_bare_trusted_then_refused(void **state)
{
	struct xf *x = *state;
	struct repl *r;

	forge(x, "mallory", NULL);
	r = link_b(x, true);
	run_transfer(x);
	assert_true(has_grant(x, "mallory"));
	assert_int_equal(ops_count(x->f->b.o, CF_GRANTS, (int64_t)time(NULL)),
	                 NGRANTS + 1);
	assert_int_equal(r->drops[DROP_SIGNATURE], 0);
	assert_int_equal(r->drops[DROP_SNAP_RECORD], 0);
	assert_int_equal(r->unsigned_trusted, 1);
	assert_int_equal(r->unchecked, 1);
	assert_int_equal(held(x->f), NGRANTS); /* nothing refused: raised */
	assert_false(r->xfer.trust);

	/* a transfer not started by that rebuild checks as before */
	forge(x, "trudy", NULL);
	repl_xfer_start(r, repl_peer_by_site(r, "paloalto"), clock_mono_ms());
	assert_false(r->xfer.trust);
	run_transfer(x);
	assert_false(has_grant(x, "trudy"));
	/* mallory, sent bare again, refused too (and still held: the
	 * refused merge is taken back, not the earlier one) */
	assert_int_equal(r->drops[DROP_SIGNATURE], 2);
	assert_true(has_grant(x, "mallory"));
	assert_int_equal(r->unsigned_trusted, 1);
}

static void test_bad_op_refused_trusted(void **state)
{
	struct xf *x = *state;
	struct repl *r;

	forge(x, "mallory", &x->ka); /* portland's, signed by paloalto's key */
	r = link_b(x, true);
	run_transfer(x);
	honest_came(x);
	assert_false(has_grant(x, "mallory"));
	assert_int_equal(r->drops[DROP_SIGNATURE], 1);
	assert_int_equal(r->unsigned_trusted, 0);
	assert_int_equal(held(x->f), 0);
}

static void test_cut_restart_refuses(void **state)
{
	struct xf *x = *state;
	struct repl *r;

	forge(x, "mallory", NULL);
	r = link_b(x, true);
	/* no reply in time: dropped, and with it the trust */
	repl_xfer_tick(r, r->xfer.sent_ms + RANGE_TIMEOUT_MS + 1);
	assert_null(r->xfer.p);
	assert_false(r->xfer.trust);
	run_transfer(x); /* portland's own, started over */
	honest_came(x);
	assert_false(has_grant(x, "mallory"));
	assert_int_equal(r->drops[DROP_SIGNATURE], 1);
	assert_int_equal(r->unsigned_trusted, 0);
}

static void test_waits_for_running(void **state)
{
	struct xf *x = *state;
	struct fx_node *both[] = {&x->f->a, &x->f->b};
	struct repl *r;
	int rc = GD_EUNREACH;

	forge(x, "mallory", NULL);
	r = link_b(x, false);
	/* paloalto reachable (its handshake; an untrusting rebuild only asks
	 * for its vector), a transfer of portland's own running, then the
	 * trusting rebuild */
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     rc == GD_EUNREACH && clock_mono_ms() < end;) {
		fx_nodes_round(both, 2, 5);
		rc = repl_rebuild(r, "paloalto", false);
	}
	assert_int_equal(rc, 0);
	if (!r->xfer.p)
		repl_xfer_start(r, repl_peer_by_site(r, "paloalto"),
		                clock_mono_ms());
	assert_int_equal(repl_rebuild(r, "paloalto", true), 0);
	assert_false(r->xfer.trust);
	assert_non_null(r->trust_next);
	run_transfer(x); /* both: the second starts as the first ends */
	assert_null(r->trust_next);
	assert_true(has_grant(x, "mallory"));
	assert_int_equal(r->drops[DROP_SIGNATURE], 1); /* the first's */
	assert_int_equal(r->unsigned_trusted, 1);
	assert_int_equal(held(x->f), NGRANTS);
}

/* `grantctl rebuild ARGS` as the node runs it (admitted, then its
 * handler) for portland; r's answer in r->out, r->err. */
static void rebuild_cmd(struct xf *x, struct req *r, char **args, size_t n)
{
	static Grantd__V1__Request rq;
	struct cmd_node node = {.ops = x->f->b.o, .repl = x->f->b.repl};
	struct cmd_ctx c = {.node = &node};
	const struct cmd *row = NULL;

	for (size_t i = 0; i < cmd_node_nrows; i++)
		if (!strcmp(cmd_node_rows[i].name, "rebuild"))
			row = &cmd_node_rows[i];
	assert_non_null(row);
	buf_free(&r->out);
	buf_free(&r->err);
	memset(r, 0, sizeof(*r));
	grantd__v1__request__init(&rq);
	rq.cmd = "rebuild", rq.args = args, rq.n_args = n;
	r->rq = &rq;
	r->admin = true;
	if (cmd_admit(row, r, NULL, NULL, false) == 0)
		assert_int_equal(row->fn(&c, r), 0);
}

static void test_cmd(void **state)
{
	struct xf *x = *state;
	struct fx_node *both[] = {&x->f->a, &x->f->b};
	char *bad[] = {"--from", "paloalto", "--trust"};
	char *good[] = {"--from", "paloalto", "--trust-unsigned"};
	struct req r = {0};
	struct repl *rp;

	assert_int_equal(fx_node_link(&x->f->b), 0);
	rp = x->f->b.repl;
	for (size_t n = 0; n <= 3; n++) {
		rebuild_cmd(x, &r, bad, n);
		if (n == 2)
			continue;
		assert_int_equal(r.status, GD_EXIT_USAGE);
		assert_non_null(strstr(r.err.p,
		                       "grantctl rebuild --from SITE, or "
		                       "grantctl rebuild --from SITE "
		                       "--trust-unsigned"));
	}
	assert_null(rp->xfer.p);
	/* paloalto reachable after its handshake */
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     rebuild_cmd(x, &r, good, 3), r.status && clock_mono_ms() < end;)
		fx_nodes_round(both, 2, 5);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out.p, "without signed operations"));
	assert_non_null(rp->xfer.p);
	assert_true(rp->xfer.trust);
	buf_free(&r.out);
	buf_free(&r.err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_bare_refused_untrusted,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(test_bare_trusted_then_refused,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(test_bad_op_refused_trusted,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(test_cut_restart_refuses,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(test_waits_for_running,
	                                        setup_pair, teardown_pair),
	        cmocka_unit_test_setup_teardown(test_cmd, setup_pair,
	                                        teardown_pair),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
