/*
 * test_peerfeatures.c: node/peers/peerfeatures.h, the release and the
 * features each heartbeat announces, as repl_hb.c sends and keeps them.
 *
 * Two nodes (paloalto, portland) with real stores and CURVE links
 * (fixture.h's fx_node):
 *  - our heartbeat carries GRANTD_VERSION and every feature of the table;
 *  - a peer not heard yet has no release and no feature: nothing is
 *    everywhere; one whose heartbeat names a feature has it, and then it
 *    is everywhere; one whose heartbeat names none (grantd 0.1.0) is
 *    "0.1.0 or older" and turns every feature off again;
 *  - a mirror is not asked;
 *  - a release or name that is too long or not printable, and names past
 *    FEATURES_MAX, are cut and counted, the rest of the heartbeat kept;
 *  - between two live nodes it all arrives by itself.
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
#include "peerfeatures.h"
#include "repl_int.h"
#include "version.h"

#define WAIT_MS 20000

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_peerfeatures", LOG_LVL_ERROR);
}

static int setup(void **state)
{
	struct fx_pair *f;
	int rc = fx_pair_open(&f, "test_peerfeatures", CONFIG_ROLE_FRONTEND,
	                      FX_PAIR_LINKED);

	*state = f;
	return rc;
}

/* paloalto's heartbeat as portland would decode it: release (NULL: none)
 * and n feature names. */
static void take(struct fx_pair *f, const char *release, char **names, size_t n)
{
	Grantd__V1__PeerMsg m = GRANTD__V1__PEER_MSG__INIT, *got;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	struct peer_self self = {NULL, "paloalto", NULL, NULL};

	hb.release = (char *)release;
	hb.features = names;
	hb.n_features = n;
	peer_msg_init(&self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_HEARTBEAT;
	m.heartbeat = &hb;
	size_t len = grantd__v1__peer_msg__get_packed_size(&m);
	uint8_t *buf = malloc(len);
	assert_non_null(buf);
	grantd__v1__peer_msg__pack(&m, buf);
	got = grantd__v1__peer_msg__unpack(NULL, len, buf);
	assert_non_null(got);
	free(buf);
	repl_hb_take(f->b.repl, &f->b.repl->peers[0], got);
	grantd__v1__peer_msg__free_unpacked(got, NULL);
}

static void test_ours_announced(void **state)
{
	struct fx_pair *f = *state;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;

	repl_hb_fill(f->a.repl, &hb);
	assert_string_equal(hb.release, GRANTD_VERSION);
	assert_int_equal(hb.n_features, FEATURE__COUNT);
	for (int i = 0; i < FEATURE__COUNT; i++)
		assert_string_equal(hb.features[i],
		                    peerfeatures_name((enum feature)i));
	assert_string_equal(peerfeatures_name(FEATURE_RELEASE_IN_HEARTBEAT),
	                    "release-in-heartbeat");
	assert_string_equal(peerfeatures_name(FEATURE__COUNT), "?");
	repl_hb_free(&hb);
}

static void test_everywhere(void **state)
{
	struct fx_pair *f = *state;
	struct repl_peer *p = &f->b.repl->peers[0];
	char *ours[] = {"release-in-heartbeat"}, *other[] = {"signed-ops"};
	enum feature rih = FEATURE_RELEASE_IN_HEARTBEAT;

	/* not heard yet */
	assert_null(repl_peer_release(p));
	assert_false(repl_feature_everywhere(f->b.repl, rih));
	/* a release with the feature */
	take(f, "0.2.0", ours, 1);
	assert_string_equal(repl_peer_release(p), "0.2.0");
	assert_true(repl_peer_has(p, rih));
	assert_true(repl_feature_everywhere(f->b.repl, rih));
	/* one without it (another feature only) */
	take(f, "0.2.1", other, 1);
	assert_false(repl_feature_everywhere(f->b.repl, rih));
	/* started again on 0.1.0: nothing announced */
	take(f, NULL, NULL, 0);
	assert_string_equal(repl_peer_release(p), "0.1.0 or older");
	assert_false(repl_peer_has(p, rih));
	assert_false(repl_feature_everywhere(f->b.repl, rih));
	/* a mirror is not asked */
	struct config_peer *pc = (struct config_peer *)p->cfg;
	pc->role = CONFIG_ROLE_MIRROR;
	assert_true(repl_feature_everywhere(f->b.repl, rih));
	pc->role = CONFIG_ROLE_FRONTEND;
	assert_int_equal(f->b.repl->drops[DROP_HB_VECTOR], 0);
}

/* issue 21: pushes get transparency log leaves (cmd_repo.c tlog_on) only
 * once every frontend announces "push-tlog": a peer on a release without
 * it keeps them off, and turns them off again when it comes back on one. */
static void test_push_tlog_gate(void **state)
{
	struct fx_pair *f = *state;
	char *old[] = {"release-in-heartbeat"};
	char *both[] = {"release-in-heartbeat", "push-tlog"};
	enum feature pt = FEATURE_PUSH_TLOG;

	assert_string_equal(peerfeatures_name(pt), "push-tlog");
	assert_false(repl_feature_everywhere(f->b.repl, pt));
	take(f, "0.2.0", old, 1);
	assert_false(repl_feature_everywhere(f->b.repl, pt));
	take(f, "0.3.0", both, 2);
	assert_true(repl_feature_everywhere(f->b.repl, pt));
	take(f, "0.2.0", old, 1);
	assert_false(repl_feature_everywhere(f->b.repl, pt));
}

static void test_bad_names_cut(void **state)
{
	struct fx_pair *f = *state;
	struct repl_peer *p = &f->b.repl->peers[0];
	char longname[FEATURES_NAME_MAX + 2];
	char *names[FEATURES_MAX + 10];
	size_t n = 0;

	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	names[n++] = "release-in-heartbeat";
	names[n++] = "two\nlines";
	names[n++] = longname;
	names[n++] = "";
	while (n < GD_ARRAY_SIZE(names))
		names[n++] = "more";
	take(f, "0.2.0\r\nforged: line", names, n);
	assert_non_null(p->hb);
	assert_string_equal(repl_peer_release(p), "0.1.0 or older");
	assert_int_equal(p->hb->n_features, FEATURES_MAX);
	assert_string_equal(p->hb->features[0], "release-in-heartbeat");
	for (size_t i = 1; i < p->hb->n_features; i++)
		assert_string_equal(p->hb->features[i], "more");
	assert_true(repl_feature_everywhere(f->b.repl,
	                                    FEATURE_RELEASE_IN_HEARTBEAT));
	assert_int_equal(f->b.repl->drops[DROP_HB_VECTOR], 1);
	/* the longest name taken whole */
	longname[FEATURES_NAME_MAX] = '\0';
	take(f, longname, NULL, 0);
	assert_string_equal(repl_peer_release(p), longname);
	assert_int_equal(f->b.repl->drops[DROP_HB_VECTOR], 1);
}

static bool heard(struct fx_pair *f)
{
	return f->b.repl->peers[0].hb && f->a.repl->peers[0].hb;
}

static void test_live(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	uint64_t end = clock_mono_ms() + WAIT_MS;

	while (!heard(f) && clock_mono_ms() < end)
		fx_nodes_round(both, 2, 5);
	assert_true(heard(f));
	assert_string_equal(repl_peer_release(&f->b.repl->peers[0]),
	                    GRANTD_VERSION);
	assert_true(repl_feature_everywhere(f->a.repl,
	                                    FEATURE_RELEASE_IN_HEARTBEAT));
	assert_true(repl_feature_everywhere(f->b.repl,
	                                    FEATURE_RELEASE_IN_HEARTBEAT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_ours_announced, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_everywhere, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_push_tlog_gate, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_bad_names_cut, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_live, setup,
	                                        fx_pair_teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
