/*
 * test_policy.c: node/policy.h, the lockout (SPEC 2.7).
 *
 * Failed attempts are made here the way cmd_grant.c makes them (one
 * operation each through ops_local, stamped with a fresh HLC, read back
 * through the open batch as the next request of a control batch reads
 * them), and peers' failures and unlocks arrive through ops_apply as repl
 * delivers them.  policy_lock_state() must count every attempt once,
 * however many share a millisecond, sum the sites, and let an unlock
 * forgive the attempts stamped before it and never a later one, even an
 * unlock stamped far ahead of the local clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "ops.h"
#include "policy.h"
#include "store.h"

#define FAILURES 3
#define WINDOW_S 900
/* the epoch of the peer's hand-made operations; any non-zero value */
#define EPOCH UINT64_C(0x00e90c0000000002)
#define HLC(ms, l) (((uint64_t)(ms) << 16) | (uint64_t)(l))

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
	"test_policy sealing key 0123456";

struct fixture {
	char dir[64];
	char repo_dir[96];
	struct config cfg;
	struct store *store;
	struct ops ops;
	struct store_batch *b;  /* the open batch, as control's c->batch */
	uint64_t peer_seq;      /* last seq of the peer "siteb" */
};

static int setup_group(void **state)
{
	return fx_group_setup("test_policy", LOG_LVL_WARN);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_policy", false) < 0)
		return -1;
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	f->cfg.site = "sitea";
	f->cfg.repo_dir = f->repo_dir;
	f->cfg.policy.lockout_failures = FAILURES;
	f->cfg.policy.lockout_window = WINDOW_S;
	if (fx_store_open(&f->store, &f->ops, f->dir, &f->cfg, seal_key) < 0 ||
	    store_batch_new(&f->b, f->store) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	store_batch_free(&f->b);
	fx_store_close(&f->store, &f->ops);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

/* Commit the open batch and open the next, as control does per batch. */
static void commit(struct fixture *f)
{
	assert_int_equal(ops_commit(&f->ops, f->b, false), 0);
	store_batch_free(&f->b);
	assert_int_equal(store_batch_new(&f->b, f->store), 0);
	ops_outbox_clear(&f->ops);
}

/* A failed attempt of user here, made as cmd_validate_token makes it. */
static void fail_here(struct fixture *f, const char *user)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Failures fl = GRANTD__V1__FAILURES__INIT;
	uint64_t at = ops_stamp(&f->ops);

	fl.user = (char *)user;
	fl.site = f->ops.site;
	fl.hlc = &at;
	fl.n_hlc = 1;
	op.body_case = GRANTD__V1__OP__BODY_FAILURE;
	op.failure = &fl;
	op.hlc = at, op.has_hlc = 1;
	assert_int_equal(ops_local(&f->ops, f->b, &op), 0);
}

/* grantctl unlock here. */
static void unlock_here(struct fixture *f, const char *user)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Unlock u = GRANTD__V1__UNLOCK__INIT;

	u.user = (char *)user;
	op.body_case = GRANTD__V1__OP__BODY_UNLOCK;
	op.unlock = &u;
	assert_int_equal(ops_local(&f->ops, f->b, &op), 0);
}

/* The peer siteb's next operation, body already set in op. */
static void from_peer(struct fixture *f, Grantd__V1__Op *op, uint64_t hlc)
{
	bool applied;

	op->origin = "siteb";
	op->epoch = EPOCH, op->has_epoch = 1;
	op->seq = ++f->peer_seq, op->has_seq = 1;
	op->hlc = hlc, op->has_hlc = 1;
	assert_int_equal(ops_apply(&f->ops, f->b, op, &applied), 0);
	assert_true(applied);
}

/* An attempt at site, as siteb sends it (its own, or relayed). */
static void peer_fails_at(struct fixture *f, const char *user,
			  const char *site, uint64_t hlc)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Failures fl = GRANTD__V1__FAILURES__INIT;

	fl.user = (char *)user;
	fl.site = (char *)site;
	fl.hlc = &hlc;
	fl.n_hlc = 1;
	op.body_case = GRANTD__V1__OP__BODY_FAILURE;
	op.failure = &fl;
	from_peer(f, &op, hlc);
}

static void peer_fails(struct fixture *f, const char *user, uint64_t hlc)
{
	peer_fails_at(f, user, "siteb", hlc);
}

static void peer_unlocks(struct fixture *f, const char *user, uint64_t hlc)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Unlock u = GRANTD__V1__UNLOCK__INIT;

	u.user = (char *)user;
	op.body_case = GRANTD__V1__OP__BODY_UNLOCK;
	op.unlock = &u;
	from_peer(f, &op, hlc);
}

/* The failures counted for user at now_ms; *until the lock's end. */
static int counted(struct fixture *f, const char *user, uint64_t now_ms,
		   uint64_t *until)
{
	struct policy_ctx pc = { &f->cfg, f->store, f->b, "host" };
	int fails = -1;
	uint64_t u;

	assert_int_equal(policy_lock_state(&pc, user, now_ms, &fails, &u), 0);
	if (until)
		*until = u;
	return fails;
}

/* ---- tests ----------------------------------------------------------------- */

/* Many attempts within one millisecond and one batch, each seen by the
 * next "request" before any commit: each counts once, and the lock comes
 * at lockout_failures exactly. */
static void test_every_attempt_counts(void **state)
{
	struct fixture *f = *state;
	uint64_t now = hlc_wall_ms(), until;

	for (int i = 0; i < 2 * FAILURES; i++) {
		assert_int_equal(counted(f, "alice", now, &until), i);
		assert_int_equal(until != 0, i >= FAILURES);
		fail_here(f, "alice");
	}
	commit(f);
	assert_int_equal(counted(f, "alice", now, &until), 2 * FAILURES);
	assert_true(until > now + (WINDOW_S - 60) * 1000ull);
	/* another user is not touched */
	assert_int_equal(counted(f, "bob", now, &until), 0);
	assert_int_equal(until, 0);
}

/* Failures at two sites are summed; a peer's copy of an attempt it already
 * sent (a resend, a state transfer) is not counted again. */
static void test_sites_summed(void **state)
{
	struct fixture *f = *state;
	uint64_t now = hlc_wall_ms(), until;
	uint64_t at = HLC(now - 1000, 0);

	fail_here(f, "carol");
	peer_fails(f, "carol", at);
	assert_int_equal(counted(f, "carol", now, &until), 2);
	assert_int_equal(until, 0);
	peer_fails(f, "carol", at);   /* the same attempt again */
	assert_int_equal(counted(f, "carol", now, &until), 2);
	peer_fails(f, "carol", at + 1);   /* another, same millisecond */
	assert_int_equal(counted(f, "carol", now, &until), 3);
	/* locked until the oldest of the 3 leaves the window */
	assert_int_equal(until, now - 1000 + WINDOW_S * 1000ull);
	/* attempts older than the window do not count */
	assert_int_equal(counted(f, "carol", now + WINDOW_S * 1000ull - 1,
				 &until), 1);
	assert_int_equal(until, 0);
}

/* An unlock forgives the attempts before it; later ones count again. */
static void test_unlock_forgives_earlier(void **state)
{
	struct fixture *f = *state;
	uint64_t now = hlc_wall_ms(), until;

	for (int i = 0; i < FAILURES; i++)
		fail_here(f, "dave");
	peer_fails(f, "dave", HLC(now - 5000, 0));
	commit(f);
	assert_int_equal(counted(f, "dave", now, &until), FAILURES + 1);
	assert_true(until != 0);
	unlock_here(f, "dave");
	assert_int_equal(counted(f, "dave", now, &until), 0);
	assert_int_equal(until, 0);
	/* a peer's attempt stamped before the unlock, arriving after it, is
	 * forgiven too: the unlock is later in (hlc, site) order */
	peer_fails(f, "dave", HLC(now - 4000, 0));
	assert_int_equal(counted(f, "dave", now, &until), 0);
	for (int i = 1; i <= FAILURES; i++) {
		fail_here(f, "dave");
		assert_int_equal(counted(f, "dave", now, &until), i);
	}
	assert_true(until != 0);
}

/* An unlock stamped 100 s ahead of the local clock (a peer whose clock runs
 * ahead, within the skew peers accept): the attempts after it still count,
 * here and from a peer that knows the unlock; the lock comes at
 * lockout_failures as always. */
static void test_unlock_from_the_future(void **state)
{
	struct fixture *f = *state;
	uint64_t now = hlc_wall_ms(), until;
	uint64_t ahead = HLC(now + 100 * 1000, 0);

	for (int i = 0; i < FAILURES; i++)
		fail_here(f, "erin");
	commit(f);
	assert_true(counted(f, "erin", now, &until) == FAILURES && until);
	peer_unlocks(f, "erin", ahead);
	commit(f);
	assert_int_equal(counted(f, "erin", now, &until), 0);
	assert_int_equal(until, 0);
	for (int i = 1; i < FAILURES; i++) {
		fail_here(f, "erin");
		assert_int_equal(counted(f, "erin", now, &until), i);
		assert_int_equal(until, 0);
	}
	/* the peer that unlocked fails one more, after its unlock */
	peer_fails(f, "erin", ahead + 1);
	commit(f);
	assert_int_equal(counted(f, "erin", now, &until), FAILURES);
	assert_true(until != 0);
	/* and the lock lasts a whole window after those attempts */
	assert_true(until >= now + 100 * 1000 + WINDOW_S * 1000ull);
}

/* An attempt stamped exactly as the unlock (at another site): ties go by
 * site name, as in every last-writer-wins comparison. */
static void test_unlock_tie(void **state)
{
	struct fixture *f = *state;
	uint64_t now = hlc_wall_ms(), until;
	uint64_t h = HLC(now - 3000, 5);

	peer_unlocks(f, "finn", h);             /* origin siteb */
	peer_fails_at(f, "finn", "sitea", h);   /* "sitea" < "siteb" */
	assert_int_equal(counted(f, "finn", now, &until), 0);
	peer_fails_at(f, "finn", "sitec", h);   /* "sitec" > "siteb" */
	assert_int_equal(counted(f, "finn", now, &until), 1);
	peer_fails_at(f, "finn", "sitea", h + 1);
	assert_int_equal(counted(f, "finn", now, &until), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_attempt_counts,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_sites_summed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unlock_forgives_earlier,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlock_from_the_future,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlock_tie, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
