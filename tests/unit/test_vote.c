/*
 * test_vote.c: node/peers/vote.h's rule, vote_promise, on a real store in a
 * temporary directory: a site promises a use only when it is above its
 * mark and its promise (or repeats a promise to the same proposal), keeps
 * the highest promise, never lowers it, and refuses bad input without
 * writing.  What it promised survives a reopen (committed with sync).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "fixture.h"
#include "records.h"
#include "store.h"
#include "vote.h"

#define YES GRANTD__V1__VOTE_VERDICT__VOTE_YES
#define USED GRANTD__V1__VOTE_VERDICT__VOTE_USED
#define PROMISED GRANTD__V1__VOTE_VERDICT__VOTE_PROMISED
#define BAD GRANTD__V1__VOTE_VERDICT__VOTE_BAD

static const uint8_t seal[STORE_SEAL_KEY_LEN] = { 7 };

struct fx {
	char dir[256];
	struct store *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_vote", false) < 0 ||
	    fx_store_open(&f->s, NULL, f->dir, NULL, seal) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	fx_store_close(&f->s, NULL);
	fx_rmtree(f->dir);
	free(f);
	return 0;
}

/* A mark, as a replicated MARK operation would leave it. */
static void put_mark(struct store *s, const char *user, uint64_t id,
		     uint64_t next, uint32_t scratch)
{
	Grantd__V1__Mark m = GRANTD__V1__MARK__INIT;
	struct store_batch *b;
	struct buf k = BUF_INIT;
	uint8_t v[64];

	m.user = (char *)user;
	m.enroll_id = id;
	m.has_enroll_id = 1;
	m.next = next;
	m.has_next = 1;
	m.scratch_used = scratch;
	m.has_scratch_used = 1;
	assert_true(grantd__v1__mark__get_packed_size(&m) <= sizeof(v));
	size_t len = grantd__v1__mark__pack(&m, v);
	records_key_mark(&k, user, id);
	assert_int_equal(store_batch_new(&b, s), 0);
	store_put(b, CF_MARKS, k.p, k.len, v, len);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	buf_free(&k);
}

/* Judge one use in a batch of its own, committed with sync. */
static Grantd__V1__VoteVerdict judge(struct store *s, const char *user,
				     uint64_t id, uint64_t next,
				     uint32_t scratch, uint64_t pid,
				     uint64_t *held)
{
	struct vote_use u = { .enroll_id = id, .next = next,
			      .scratch = scratch };
	Grantd__V1__VoteVerdict verdict;
	struct store_batch *b;
	uint64_t h;

	snprintf(u.user, sizeof(u.user), "%s", user);
	assert_int_equal(store_batch_new(&b, s), 0);
	assert_int_equal(vote_promise(s, b, &u, pid, "sitea", 1, &verdict,
				      held ? held : &h),
			 0);
	if (verdict != YES)
		assert_int_equal(store_batch_count(b), 0);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	return verdict;
}

static void test_counter_above_everything(void **state)
{
	struct fx *f = *state;
	uint64_t held;

	put_mark(f->s, "kim", 9, 5, 0); /* counters 0..4 used */
	assert_int_equal(judge(f->s, "kim", 9, 5, 0, 100, &held), USED);
	assert_true(held == 5);
	assert_int_equal(judge(f->s, "kim", 9, 3, 0, 100, NULL), USED);
	/* counter 5 (next 6): above the mark, nothing promised */
	assert_int_equal(judge(f->s, "kim", 9, 6, 0, 100, NULL), YES);
	/* the same proposal asking again: the same answer */
	assert_int_equal(judge(f->s, "kim", 9, 6, 0, 100, NULL), YES);
	/* another proposal of the same counter, or a lower one: promised */
	assert_int_equal(judge(f->s, "kim", 9, 6, 0, 101, &held), PROMISED);
	assert_true(held == 6);
	assert_int_equal(judge(f->s, "kim", 9, 6, 0, 101, NULL), PROMISED);
	/* a later counter is above the promise */
	assert_int_equal(judge(f->s, "kim", 9, 9, 0, 102, NULL), YES);
	/* ... and the first proposal, repeated now, is below it */
	assert_int_equal(judge(f->s, "kim", 9, 6, 0, 100, NULL), PROMISED);
	assert_int_equal(judge(f->s, "kim", 9, 8, 0, 103, NULL), PROMISED);
	/* a mark that overtakes the promise rules */
	put_mark(f->s, "kim", 9, 12, 0);
	assert_int_equal(judge(f->s, "kim", 9, 11, 0, 104, NULL), USED);
	assert_int_equal(judge(f->s, "kim", 9, 13, 0, 104, NULL), YES);
}

static void test_enrollments_and_users_apart(void **state)
{
	struct fx *f = *state;

	assert_int_equal(judge(f->s, "kim", 1, 4, 0, 1, NULL), YES);
	assert_int_equal(judge(f->s, "kim", 2, 4, 0, 2, NULL), YES);
	assert_int_equal(judge(f->s, "lena", 1, 4, 0, 3, NULL), YES);
	assert_int_equal(judge(f->s, "kim", 1, 4, 0, 4, NULL), PROMISED);
}

static void test_scratch_bits(void **state)
{
	struct fx *f = *state;

	put_mark(f->s, "kim", 3, 10, 1u << 0);
	assert_int_equal(judge(f->s, "kim", 3, 0, 1u << 0, 7, NULL), USED);
	assert_int_equal(judge(f->s, "kim", 3, 0, 1u << 2, 7, NULL), YES);
	assert_int_equal(judge(f->s, "kim", 3, 0, 1u << 2, 7, NULL), YES);
	assert_int_equal(judge(f->s, "kim", 3, 0, 1u << 2, 8, NULL), PROMISED);
	/* a scratch promise leaves counters alone, and the other way */
	assert_int_equal(judge(f->s, "kim", 3, 11, 0, 9, NULL), YES);
	assert_int_equal(judge(f->s, "kim", 3, 0, 1u << 1, 10, NULL), YES);
	assert_int_equal(judge(f->s, "kim", 3, 0, 1u << 2, 11, NULL),
			 PROMISED);
}

static void test_bad_input_writes_nothing(void **state)
{
	struct fx *f = *state;

	assert_int_equal(judge(f->s, "kim", 1, 0, 0, 1, NULL), BAD);
	/* two scratch bits, a bit past the codes, a counter and a bit */
	assert_int_equal(judge(f->s, "kim", 1, 0, 3, 1, NULL), BAD);
	assert_int_equal(judge(f->s, "kim", 1, 0, 1u << 5, 1, NULL), BAD);
	assert_int_equal(judge(f->s, "kim", 1, 4, 1, 1, NULL), BAD);
	/* no proposal id, a bad user name */
	assert_int_equal(judge(f->s, "kim", 1, 4, 0, 0, NULL), BAD);
	assert_int_equal(judge(f->s, "k im", 1, 4, 0, 1, NULL), BAD);
	assert_int_equal(judge(f->s, "", 1, 4, 0, 1, NULL), BAD);
	/* nothing was promised: a real proposal still gets it */
	assert_int_equal(judge(f->s, "kim", 1, 4, 0, 2, NULL), YES);
}

static void test_promise_survives_reopen(void **state)
{
	struct fx *f = *state;
	Grantd__V1__Mark m;
	Grantd__V1__Promise p;

	assert_int_equal(judge(f->s, "kim", 5, 21, 0, 77, NULL), YES);
	fx_store_close(&f->s, NULL);
	assert_int_equal(fx_store_open(&f->s, NULL, f->dir, NULL, seal), 0);
	assert_int_equal(vote_held(f->s, NULL, "kim", 5, &m, &p), 0);
	assert_true(p.next == 21 && p.pid == 77 && m.next == 0);
	assert_int_equal(judge(f->s, "kim", 5, 21, 0, 78, NULL), PROMISED);
	/* a promise is local: not a replicated family */
	assert_false(records_replicated(CF_PROMISES));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_counter_above_everything,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_enrollments_and_users_apart,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_scratch_bits, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_writes_nothing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_promise_survives_reopen,
						setup, teardown),
	};
	if (fx_group_setup("test_vote", LOG_LVL_WARN) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
