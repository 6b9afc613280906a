/*
 * test_planes.c: node/peers/planes.h, who may say what on which socket.
 *
 *  - every body case of PeerMsg's oneof, read from protobuf-c's
 *    descriptor, has exactly one row, under its own name: a new message
 *    kind without a row fails here;
 *  - an unknown key's answer is PLANE_ZAP on every socket (peer.c's ZAP
 *    handler refuses it: tests/unit/test_peer.c and
 *    tests/integration/test_planes.sh show it);
 *  - the policy of review N1: the vote plane (vote_req, use_sync_req) is
 *    taken from a frontend only and answered NOT_VOTER to a mirror;
 *    nothing is taken from a mirror but on the sync ROUTER; no request
 *    comes on a SUB or as an answer; NOT_VOTER only on the ROUTER;
 *  - planes_refusal answers a vote_req with its pid alone and a
 *    use_sync_req with voter = false and no record.
 *
 * Walking the table over real sockets is tests/unit/test_peer.c's
 * test_planes_walk.
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "planes.h"

static void test_every_kind_has_one_row(void **state)
{
	const ProtobufCMessageDescriptor *d = &grantd__v1__peer_msg__descriptor;
	int n, kinds = 0;
	const struct plane_row *rows = planes_rows(&n);

	(void)state;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
			continue;
		kinds++;
		const struct plane_row *r = planes_row((int)f->id);
		if (!r)
			fail_msg("PeerMsg body %s (%u) has no row in "
			         "GD_PLANE_KINDS (node/peers/planes.h)",
			         f->name, f->id);
		assert_int_equal(strcasecmp(r->name, f->name), 0);
		int seen = 0;
		for (int k = 0; k < n; k++)
			seen += rows[k].kind == (int)f->id;
		assert_int_equal(seen, 1);
	}
	/* ... and no row for a kind the oneof does not have */
	assert_int_equal(n, kinds);
	assert_true(kinds >= 17);
	assert_null(planes_row(GRANTD__V1__PEER_MSG__BODY__NOT_SET));
	assert_int_equal(planes_answer(GRANTD__V1__PEER_MSG__BODY__NOT_SET,
	                               PLANE_SYNC, PLANE_FRONTEND),
	                 PLANE_DROP);
	assert_int_equal(planes_answer(1000, PLANE_SYNC, PLANE_FRONTEND),
	                 PLANE_DROP);
}

static void test_unknown_key_is_zap(void **state)
{
	int n;
	const struct plane_row *rows = planes_rows(&n);

	(void)state;
	for (int k = 0; k < n; k++)
		for (int s = 0; s < PLANE__SOCKS; s++)
			assert_int_equal(
			        planes_answer(rows[k].kind, s, PLANE_UNKNOWN),
			        PLANE_ZAP);
	assert_int_equal(planes_role(CONFIG_ROLE_FRONTEND), PLANE_FRONTEND);
	assert_int_equal(planes_role(CONFIG_ROLE_MIRROR), PLANE_MIRROR);
	assert_int_equal(planes_role((enum config_role)7), PLANE_UNKNOWN);
}

static bool is_request(const char *name)
{
	size_t l = strlen(name);
	return (l > 4 && !strcmp(name + l - 4, "_REQ")) ||
	       !strcmp(name, "PACK_CREDIT") || !strcmp(name, "MIRROR_SUB");
}

/* pack_err goes both ways: a server's error, or a fetcher giving up */
static bool both_ways(const char *name)
{
	return !strcmp(name, "PACK_ERR");
}

static void test_planes_by_role(void **state)
{
	int n;
	const struct plane_row *rows = planes_rows(&n);

	(void)state;
	/* N1: the vote plane is the frontends' */
	assert_int_equal(planes_answer(GRANTD__V1__PEER_MSG__BODY_VOTE_REQ,
	                               PLANE_SYNC, PLANE_FRONTEND),
	                 PLANE_TAKE);
	assert_int_equal(planes_answer(GRANTD__V1__PEER_MSG__BODY_VOTE_REQ,
	                               PLANE_SYNC, PLANE_MIRROR),
	                 PLANE_NOT_VOTER);
	assert_int_equal(planes_answer(GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REQ,
	                               PLANE_SYNC, PLANE_FRONTEND),
	                 PLANE_TAKE);
	assert_int_equal(planes_answer(GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REQ,
	                               PLANE_SYNC, PLANE_MIRROR),
	                 PLANE_NOT_VOTER);
	/* a mirror subscribes; a frontend does not */
	assert_int_equal(planes_answer(GRANTD__V1__PEER_MSG__BODY_MIRROR_SUB,
	                               PLANE_SYNC, PLANE_MIRROR),
	                 PLANE_TAKE);
	assert_int_equal(planes_answer(GRANTD__V1__PEER_MSG__BODY_MIRROR_SUB,
	                               PLANE_SYNC, PLANE_FRONTEND),
	                 PLANE_DROP);
	assert_int_equal(planes_answer(GRANTD__V1__PEER_MSG__BODY_OP, PLANE_SUB,
	                               PLANE_FRONTEND),
	                 PLANE_TAKE);
	for (int k = 0; k < n; k++) {
		const struct plane_row *r = &rows[k];
		bool req = is_request(r->name);
		for (int s = 0; s < PLANE__SOCKS; s++)
			for (int role = 0; role < 2; role++) {
				enum plane_answer a =
				        planes_answer(r->kind, s, role);
				/* a mirror answers nothing and publishes
				 * nothing to anyone */
				if (role == PLANE_MIRROR && s != PLANE_SYNC)
					assert_int_equal(a, PLANE_DROP);
				/* requests come on the ROUTER alone, and
				 * only requests do */
				if (both_ways(r->name))
					continue;
				if (a == PLANE_TAKE && s == PLANE_SYNC && !req)
					fail_msg("%s taken on sync", r->name);
				if (a == PLANE_TAKE && s != PLANE_SYNC && req)
					fail_msg("%s taken on %s", r->name,
					         planes_sock_name(s));
				if (a == PLANE_NOT_VOTER)
					assert_true(s == PLANE_SYNC &&
					            role == PLANE_MIRROR);
				/* every request is someone's */
				if (req && s == PLANE_SYNC)
					assert_true(
					        r->answer[s][0] != PLANE_DROP ||
					        r->answer[s][1] != PLANE_DROP);
			}
	}
}

static void test_refusal(void **state)
{
	Grantd__V1__PeerMsg in = GRANTD__V1__PEER_MSG__INIT;
	Grantd__V1__PeerMsg out = GRANTD__V1__PEER_MSG__INIT;
	Grantd__V1__VoteReq q = GRANTD__V1__VOTE_REQ__INIT;
	Grantd__V1__UseSyncReq us = GRANTD__V1__USE_SYNC_REQ__INIT;
	struct plane_refusal st;

	(void)state;
	q.pid = 77, q.has_pid = 1;
	q.user = "alice";
	q.enroll_id = 5, q.has_enroll_id = 1;
	q.next = 9, q.has_next = 1;
	in.body_case = GRANTD__V1__PEER_MSG__BODY_VOTE_REQ;
	in.vote_req = &q;
	assert_true(planes_refusal(&in, &out, &st));
	assert_int_equal(out.body_case, GRANTD__V1__PEER_MSG__BODY_VOTE_REP);
	assert_int_equal(out.vote_rep->pid, 77);
	assert_int_equal(out.vote_rep->verdict,
	                 GRANTD__V1__VOTE_VERDICT__VOTE_NOT_VOTER);
	assert_false(out.vote_rep->has_next);
	assert_false(out.vote_rep->has_votes);

	in.body_case = GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REQ;
	in.use_sync_req = &us;
	us.max = 256, us.has_max = 1;
	assert_true(planes_refusal(&in, &out, &st));
	assert_int_equal(out.body_case,
	                 GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REP);
	assert_true(out.use_sync_rep->has_voter);
	assert_false(out.use_sync_rep->voter);
	assert_int_equal(out.use_sync_rep->n_keys, 0);
	assert_int_equal(out.use_sync_rep->n_values, 0);
	assert_false(out.use_sync_rep->has_votes);

	in.body_case = GRANTD__V1__PEER_MSG__BODY_RANGE_REQ;
	assert_false(planes_refusal(&in, &out, &st));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_every_kind_has_one_row),
	        cmocka_unit_test(test_unknown_key_is_zap),
	        cmocka_unit_test(test_planes_by_role),
	        cmocka_unit_test(test_refusal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
