/*
 * test_repl_hb.c: node/peers/repl_hb.c, heartbeats and who is ahead,
 * through repl_int.h.
 *
 * Two nodes (paloalto, portland) on real RocksDB stores in temp
 * directories with real CURVE links (fixture.h's fx_node):
 *  - our own stream goes in a heartbeat only as far as it is published
 *    (a peer must never ask for what is not durable here);
 *  - a peer's heartbeat makes it ahead of us by what it holds that we
 *    lack, and level once we hold it;
 *  - an oversized heartbeat, or one with bad origins, is cut (counted as
 *    heartbeat_vector), never dropped whole;
 *  - between two live nodes the heartbeat arrives by itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "repl_int.h"
#include "writer.h"

#define WAIT_MS 20000

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_repl_hb", LOG_LVL_ERROR);
}

static int setup(void **state)
{
	struct fx_pair *f;
	int rc = fx_pair_open(&f, "test_repl_hb", CONFIG_ROLE_FRONTEND,
	                      FX_PAIR_LINKED);

	*state = f;
	return rc;
}

/* n's entry for (origin, epoch) in hb; 0 when it lists none. */
static uint64_t
listed(const Grantd__V1__Heartbeat *hb, const char *origin, uint64_t epoch)
{
	for (size_t i = 0; i < hb->n_vv; i++)
		if (hb->vv[i]->epoch == epoch &&
		    !strcmp(hb->vv[i]->origin, origin))
			return hb->vv[i]->seq;
	return 0;
}

static void test_own_stream_as_published(void **state)
{
	struct fx_pair *f = *state;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	uint64_t t;

	assert_int_equal(fx_node_grants(&f->a, 3, WAIT_MS), 0);
	/* two more, committed but not durable nor published yet */
	for (int i = 0; i < 2; i++) {
		Grantd__V1__Op op = GRANTD__V1__OP__INIT;
		Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
		g.user = i ? "bob" : "carol";
		g.net = "192.0.2.8/32";
		g.session = "";
		g.added = 1700000000, g.has_added = 1;
		g.expires = 4102444800, g.has_expires = 1;
		g.site = f->a.site;
		op.body_case = GRANTD__V1__OP__BODY_GRANT;
		op.grant = &g;
		assert_int_equal(ops_local(f->a.o, writer_batch(f->a.w), &op),
		                 0);
	}
	assert_int_equal(writer_commit(f->a.w, &t), 0);
	assert_int_equal(ops_vv_get(f->a.o, NULL, "paloalto", ops_epoch(f->a.o)),
	                 5);
	repl_hb_fill(f->a.repl, &hb);
	assert_int_equal(listed(&hb, "paloalto", ops_epoch(f->a.o)), 3);
	assert_true(hb.has_digest);
	assert_true(hb.syncing);
	repl_hb_free(&hb);
	assert_null(hb.vv);
}

/* A heartbeat from paloalto as portland's SUB would decode it: entries
 * n of (origin[i % norigins], epoch, seq). */
static Grantd__V1__PeerMsg *heartbeat(const char *const *origins,
                                      size_t norigins,
                                      size_t n,
                                      uint64_t epoch,
                                      uint64_t seq)
{
	Grantd__V1__PeerMsg m = GRANTD__V1__PEER_MSG__INIT;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	Grantd__V1__VvEntry *e = calloc(n, sizeof(*e));
	Grantd__V1__VvEntry **pe = calloc(n, sizeof(*pe));
	struct peer_self self = {NULL, "paloalto", NULL, NULL};

	assert_non_null(e);
	assert_non_null(pe);
	for (size_t i = 0; i < n; i++) {
		grantd__v1__vv_entry__init(&e[i]);
		e[i].origin = (char *)origins[i % norigins];
		e[i].epoch = epoch + i, e[i].has_epoch = 1;
		e[i].seq = seq, e[i].has_seq = 1;
		pe[i] = &e[i];
	}
	hb.vv = pe;
	hb.n_vv = n;
	peer_msg_init(&self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_HEARTBEAT;
	m.heartbeat = &hb;
	size_t len = grantd__v1__peer_msg__get_packed_size(&m);
	uint8_t *buf = malloc(len);
	assert_non_null(buf);
	grantd__v1__peer_msg__pack(&m, buf);
	Grantd__V1__PeerMsg *got = grantd__v1__peer_msg__unpack(NULL, len, buf);
	assert_non_null(got);
	free(buf);
	free(pe);
	free(e);
	return got;
}

static void take(struct fx_pair *f, Grantd__V1__PeerMsg *m)
{
	repl_hb_take(f->b.repl, &f->b.repl->peers[0], m);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
}

static void test_ahead_and_level(void **state)
{
	struct fx_pair *f = *state;
	struct repl_peer *p = &f->b.repl->peers[0];
	const char *pa[] = {"paloalto"};
	const Grantd__V1__VvEntry *e;
	uint64_t lag = 99;

	/* nothing heard: not ahead */
	assert_null(repl_hb_ahead(f->b.repl, p, &lag));
	assert_int_equal(lag, 0);
	/* paloalto holds 7 of (paloalto, 42) */
	take(f, heartbeat(pa, 1, 1, 42, 7));
	assert_non_null(p->hb);
	e = repl_hb_ahead(f->b.repl, p, &lag);
	assert_non_null(e);
	assert_string_equal(e->origin, "paloalto");
	assert_int_equal(e->epoch, 42);
	assert_int_equal(lag, 7);
	/* once we hold them: level */
	ops_vv_raise(f->b.o, writer_batch(f->b.w), "paloalto", 42, 7);
	uint64_t t;
	assert_int_equal(writer_commit(f->b.w, &t), 0);
	assert_null(repl_hb_ahead(f->b.repl, p, &lag));
	assert_int_equal(lag, 0);
	assert_int_equal(f->b.repl->drops[DROP_HB_VECTOR], 0);
}

static void test_oversized_cut(void **state)
{
	struct fx_pair *f = *state;
	struct repl_peer *p = &f->b.repl->peers[0];
	const char *mixed[] = {"paloalto", "-bad name-"};

	/* MAX_VV + 10 good entries: MAX_VV kept */
	const char *pa[] = {"paloalto"};
	take(f, heartbeat(pa, 1, MAX_VV + 10, 1, 1));
	assert_non_null(p->hb);
	assert_int_equal(p->hb->n_vv, MAX_VV);
	assert_int_equal(f->b.repl->drops[DROP_HB_VECTOR], 1);
	/* bad origins cut, the good ones kept */
	take(f, heartbeat(mixed, 2, 10, 1, 1));
	assert_non_null(p->hb);
	assert_int_equal(p->hb->n_vv, 5);
	for (size_t i = 0; i < p->hb->n_vv; i++)
		assert_string_equal(p->hb->vv[i]->origin, "paloalto");
	assert_int_equal(f->b.repl->drops[DROP_HB_VECTOR], 2);
	/* a clean one: nothing counted */
	take(f, heartbeat(pa, 1, 3, 1, 1));
	assert_int_equal(p->hb->n_vv, 3);
	assert_int_equal(f->b.repl->drops[DROP_HB_VECTOR], 2);
}

static bool heard(struct fx_pair *f)
{
	return f->b.repl->peers[0].hb && f->a.repl->peers[0].hb;
}

static void test_heard_live(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	uint64_t end = clock_mono_ms() + WAIT_MS;

	assert_int_equal(fx_node_grants(&f->a, 2, WAIT_MS), 0);
	while (!heard(f) && clock_mono_ms() < end)
		fx_nodes_round(both, 2, 5);
	assert_true(heard(f));
	assert_true(f->b.repl->peers[0].hb->has_digest);
	while (listed(f->b.repl->peers[0].hb, "paloalto", ops_epoch(f->a.o)) < 2 &&
	       clock_mono_ms() < end)
		fx_nodes_round(both, 2, 5);
	assert_int_equal(
	        listed(f->b.repl->peers[0].hb, "paloalto", ops_epoch(f->a.o)), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_own_stream_as_published,
	                                        setup, fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_ahead_and_level, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_oversized_cut, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_heard_live, setup,
	                                        fx_pair_teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
