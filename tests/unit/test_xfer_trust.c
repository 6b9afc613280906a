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
#include "xferfx.h"
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

static int setup_pair(void **state)
{
	struct fx_xfer *x;
	int rc = fx_xfer_open(&x, "test_xfer_trust", NGRANTS, WAIT_MS);

	*state = x;
	return rc;
}

static int teardown_pair(void **state)
{
	return fx_xfer_close((struct fx_xfer **)state);
}

static bool has_grant(struct fx_xfer *x, const char *user)
{
	int rc = fx_xfer_has_grant(x, user);

	assert_true(rc >= 0);
	return rc == 1;
}

/* Link portland (checking with both keys); trusting: then `grantctl
 * rebuild --from paloalto --trust-unsigned` as soon as paloalto can be
 * reached (its handshake, a few rounds), long before portland could start
 * a transfer of its own (a heartbeat, then a range, away). */
static struct repl *link_b(struct fx_xfer *x, bool trusting)
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
static void run_transfer(struct fx_xfer *x)
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
static void honest_came(struct fx_xfer *x)
{
	assert_true(ops_count(x->f->b.o, CF_GRANTS, (int64_t)time(NULL)) >=
	            NGRANTS);
}

static void test_bare_refused_untrusted(void **state)
{
	struct fx_xfer *x = *state;
	struct repl *r;

	assert_int_equal(fx_xfer_forge(x, "mallory", NULL, NULL), 0);
	r = link_b(x, false);
	run_transfer(x);
	honest_came(x);
	assert_false(has_grant(x, "mallory"));
	assert_int_equal(r->drops[DROP_SIGNATURE], 1);
	assert_int_equal(r->unsigned_trusted, 0);
	assert_int_equal(fx_xfer_held(x), 0); /* the vector not raised */
}

static void test_bare_trusted_then_refused(void **state)
{
	struct fx_xfer *x = *state;
	struct repl *r;

	assert_int_equal(fx_xfer_forge(x, "mallory", NULL, NULL), 0);
	r = link_b(x, true);
	run_transfer(x);
	assert_true(has_grant(x, "mallory"));
	assert_int_equal(ops_count(x->f->b.o, CF_GRANTS, (int64_t)time(NULL)),
	                 NGRANTS + 1);
	assert_int_equal(r->drops[DROP_SIGNATURE], 0);
	assert_int_equal(r->drops[DROP_SNAP_RECORD], 0);
	assert_int_equal(r->unsigned_trusted, 1);
	assert_int_equal(r->unchecked, 1);
	assert_int_equal(fx_xfer_held(x),
	                 NGRANTS); /* nothing refused: raised */
	assert_false(r->xfer.trust);

	/* a transfer not started by that rebuild checks as before */
	assert_int_equal(fx_xfer_forge(x, "trudy", NULL, NULL), 0);
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
	struct fx_xfer *x = *state;
	struct repl *r;

	assert_int_equal(fx_xfer_forge(x, "mallory", &x->ka, NULL),
	                 0); /* portland's, signed by paloalto's key */
	r = link_b(x, true);
	run_transfer(x);
	honest_came(x);
	assert_false(has_grant(x, "mallory"));
	assert_int_equal(r->drops[DROP_SIGNATURE], 1);
	assert_int_equal(r->unsigned_trusted, 0);
	assert_int_equal(fx_xfer_held(x), 0);
}

static void test_cut_restart_refuses(void **state)
{
	struct fx_xfer *x = *state;
	struct repl *r;

	assert_int_equal(fx_xfer_forge(x, "mallory", NULL, NULL), 0);
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
	struct fx_xfer *x = *state;
	struct fx_node *both[] = {&x->f->a, &x->f->b};
	struct repl *r;
	int rc = GD_EUNREACH;

	assert_int_equal(fx_xfer_forge(x, "mallory", NULL, NULL), 0);
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
	assert_int_equal(fx_xfer_held(x), NGRANTS);
}

/* `grantctl rebuild ARGS` as the node runs it (admitted, then its
 * handler) for portland; r's answer in r->out, r->err. */
static void rebuild_cmd(struct fx_xfer *x, struct req *r, char **args, size_t n)
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
	struct fx_xfer *x = *state;
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
