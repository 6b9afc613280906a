/*
 * test_vote_round.c: node/peers/vote_round.c, the origin's one parallel
 * round of the strict token quorum (vote.h, "The origin"), through
 * vote_int.h.
 *
 * Two frontends (paloalto, portland) with token_quorum = majority (both
 * must promise), each on a real RocksDB store in a temp directory, their
 * votes on real CURVE DEALERs to each other's sync ROUTER (fixture.h's
 * fx_pair and fx_node_vote); both qualify from each other first:
 *  - the positive control: paloalto proposes, portland promises (its
 *    promise is on its disk), the proposal ends YES;
 *  - portland holds a mark above the use: it says USED, the proposal
 *    ends NO and says another site used the token;
 *  - portland silent: at the deadline the proposal ends NO on what
 *    answered; and NO at once when this site's own promise is not
 *    durable by then;
 *  - answers counted: one for another proposal is ignored, a second one
 *    from the same peer too, and a YES whose promise counter went
 *    backwards (a copy of an older store) is no vote.
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
#include "records.h"
#include "vote.h"
#include "vote_int.h"
#include "writer.h"

#define WAIT_MS    20000
#define TIMEOUT_MS 2000

#define YES GRANTD__V1__VOTE_VERDICT__VOTE_YES

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_vote_round", LOG_LVL_ERROR);
}

static bool both_vote(struct fx_pair *f)
{
	return vote_voting(f->a.vote) && vote_voting(f->b.vote);
}

/* Both linked, in majority mode, both voting. */
static int setup(void **state)
{
	struct fx_node *both[2];
	struct fx_pair *f;

	if (fx_pair_open(&f, "test_vote_round", CONFIG_ROLE_FRONTEND,
	                 FX_PAIR_LINKED) < 0)
		return -1;
	both[0] = &f->a, both[1] = &f->b;
	for (int i = 0; i < 2; i++) {
		struct config_policy *p = &both[i]->cfg.policy;
		p->token_quorum = CONFIG_QUORUM_MAJORITY;
		p->token_quorum_timeout_ms = TIMEOUT_MS;
		p->totp_window = 1;
		p->hotp_lookahead = 10;
		if (fx_node_vote(both[i]) < 0)
			goto fail;
	}
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     !both_vote(f) && clock_mono_ms() < end;)
		fx_nodes_round(both, 2, 5);
	if (!both_vote(f))
		goto fail;
	*state = f;
	return 0;
fail:
	fx_pair_close(&f);
	return -1;
}

/* A proposal's end, as the caller's item holds it. */
struct ending {
	bool ended;
	enum vote_end end;
	char why[512];
};

static void done(void *item, enum vote_end end, const char *why)
{
	struct ending *e = item;

	assert_false(e->ended); /* once */
	e->ended = true;
	e->end = end;
	snprintf(e->why, sizeof(e->why), "%s", why ? why : "");
}

/* Propose kim's enrollment 1 up to next at paloalto, commit its own
 * promise and start the round; *pid its proposal. */
static void
propose(struct fx_pair *f, uint64_t next, struct ending *e, uint64_t *pid)
{
	struct vote_use u = {.user = "kim", .enroll_id = 1, .next = next};
	Grantd__V1__VoteVerdict verdict;
	uint64_t held, ticket;

	memset(e, 0, sizeof(*e));
	assert_int_equal(vote_propose(f->a.vote, writer_batch(f->a.w), &u, pid,
	                              &verdict, &held),
	                 0);
	assert_int_equal(verdict, YES);
	assert_int_equal(writer_commit(f->a.w, &ticket), 0);
	vote_start(f->a.vote, &u, *pid, ticket, done, e);
}

/* Run the loops of nodes[0..n) until e ended (fail after WAIT_MS). */
static void
run_until_ended(struct fx_node *const *nodes, int n, struct ending *e)
{
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     !e->ended && clock_mono_ms() < end;)
		fx_nodes_round(nodes, n, 5);
	assert_true(e->ended);
}

/* Only paloalto runs until its own promise is durable. */
static void own_promise_durable(struct fx_pair *f)
{
	struct fx_node *one[] = {&f->a};

	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     f->a.vote->props && f->a.vote->props->self_pending &&
	     clock_mono_ms() < end;)
		fx_nodes_round(one, 1, 5);
	assert_non_null(f->a.vote->props);
	assert_false(f->a.vote->props->self_pending);
}

static int waiting(struct vote *v)
{
	cJSON *st = vote_status(v);
	int n = (int)cJSON_GetObjectItem(st, "waiting")->valuedouble;

	cJSON_Delete(st);
	return n;
}

static void test_majority_yes(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	Grantd__V1__Mark m;
	Grantd__V1__Promise p;
	static struct ending e;
	uint64_t pid;

	propose(f, 5, &e, &pid);
	assert_int_equal(waiting(f->a.vote), 1);
	run_until_ended(both, 2, &e);
	assert_int_equal(e.end, VOTE_END_YES);
	assert_int_equal(waiting(f->a.vote), 0);
	/* both promised it, on disk */
	assert_int_equal(vote_held(f->b.s, NULL, "kim", 1, &m, &p), 0);
	assert_true(p.next == 5 && p.pid == pid);
	assert_int_equal(vote_held(f->a.s, NULL, "kim", 1, &m, &p), 0);
	assert_true(p.next == 5 && p.pid == pid);
}

static void test_used_elsewhere(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	Grantd__V1__Mark mk = GRANTD__V1__MARK__INIT;
	struct buf k = BUF_INIT;
	static struct ending e;
	uint8_t v[64];
	uint64_t pid, t;

	/* portland took kim's uses up to 8 (a mark paloalto has not seen) */
	mk.user = "kim";
	mk.enroll_id = 1, mk.has_enroll_id = 1;
	mk.next = 9, mk.has_next = 1;
	records_key_mark(&k, "kim", 1);
	store_put(writer_batch(f->b.w), CF_MARKS, k.p, k.len, v,
	          grantd__v1__mark__pack(&mk, v));
	assert_int_equal(writer_commit(f->b.w, &t), 0);
	buf_free(&k);
	propose(f, 5, &e, &pid);
	run_until_ended(both, 2, &e);
	assert_int_equal(e.end, VOTE_END_NO);
	if (!strstr(e.why, "another site has already used"))
		fail_msg("why: %s", e.why);
}

static void test_deadline(void **state)
{
	struct fx_pair *f = *state;
	static struct ending e, e2;
	uint64_t pid;

	/* portland silent: NO at the deadline, on paloalto's promise */
	propose(f, 5, &e, &pid);
	own_promise_durable(f);
	vote_tick(f->a.vote, clock_mono_ms());
	assert_false(e.ended);
	vote_tick(f->a.vote, clock_mono_ms() + TIMEOUT_MS + 1);
	assert_true(e.ended);
	assert_int_equal(e.end, VOTE_END_NO);
	if (!strstr(e.why, "only 1 of 2 sites answered"))
		fail_msg("why: %s", e.why);
	/* the deadline before our own promise is durable: NO as well */
	propose(f, 7, &e2, &pid);
	assert_true(f->a.vote->props->self_pending);
	vote_tick(f->a.vote, clock_mono_ms() + TIMEOUT_MS + 1);
	assert_true(e2.ended);
	assert_int_equal(e2.end, VOTE_END_NO);
	if (!strstr(e2.why, "could not record the use in time"))
		fail_msg("why: %s", e2.why);
}

/* portland's answer to pid, as vote_handle would hand it over. */
static void answer(struct fx_pair *f,
                   uint64_t pid,
                   Grantd__V1__VoteVerdict verdict,
                   uint64_t votes)
{
	Grantd__V1__VoteRep r = GRANTD__V1__VOTE_REP__INIT;

	r.pid = pid, r.has_pid = 1;
	r.verdict = verdict, r.has_verdict = 1;
	r.votes = votes, r.has_votes = votes != 0;
	vote_round_on_rep(f->a.vote, 0, &r);
}

static void test_answers_counted(void **state)
{
	struct fx_pair *f = *state;
	static struct ending e, e2;
	uint64_t pid, pid2, seen = f->a.vote->peers[0].seen;

	/* portland runs no more: the answers are made here */
	propose(f, 5, &e, &pid);
	own_promise_durable(f);
	answer(f, pid + 1, YES, seen + 10); /* another proposal's */
	assert_false(e.ended);
	answer(f, pid, YES, seen + 10);
	assert_true(e.ended);
	assert_int_equal(e.end, VOTE_END_YES);
	assert_int_equal(f->a.vote->peers[0].seen, seen + 10);
	answer(f, pid, GRANTD__V1__VOTE_VERDICT__VOTE_USED, 0); /* again */
	assert_int_equal(e.end, VOTE_END_YES);
	/* a YES whose counter went backwards is no vote: NO, on the one
	 * promise (ours) of the two needed */
	propose(f, 7, &e2, &pid2);
	own_promise_durable(f);
	answer(f, pid2, YES, seen + 3);
	assert_true(e2.ended);
	assert_int_equal(e2.end, VOTE_END_NO);
	if (!strstr(e2.why, "only 1 of 2 sites answered"))
		fail_msg("why: %s", e2.why);
	assert_int_equal(f->a.vote->peers[0].seen, seen + 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_majority_yes, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_used_elsewhere, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_deadline, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_answers_counted, setup,
	                                        fx_pair_teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
