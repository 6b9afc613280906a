/*
 * test_policy.c: node/requests/policy.h, the lockout (SPEC 2.7).
 *
 * Failed attempts are made here the way cmd_grant.c makes them (one
 * operation each through ops_local, stamped with a fresh HLC, read back
 * through the open batch as the next request of a control batch reads
 * them), and peers' failures and unlocks arrive through ops_apply as repl
 * delivers them.  policy_lock_state() must count every attempt once,
 * however many share a millisecond, sum the sites, and let an unlock
 * forgive the attempts stamped before it and never a later one, even an
 * unlock stamped far ahead of the local clock.
 *
 * The 2-factor decision (policy_2fa, gitolite's VREF/2fa and
 * VREF/2fa/optin): required needs an active enrollment and a live grant
 * for the address; opt-in lets a user who is not enrolled (no user record,
 * no enrollment, or one not yet activated) through; policy_push keeps its
 * texts with it.
 *
 * SSH security keys (issue 11): policy_push lets a push over a key that
 * counts as two factors (sk-touch under security_keys = touch, sk-pin under
 * touch or pin) through required and opt-in repositories without any grant
 * or enrollment, never past the writers; anything else is decided as
 * before, and the refusal says which factors were seen.
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

#include "addr.h"
#include "clock.h"
#include "config.h"
#include "crashpoint.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "ops.h"
#include "policy.h"
#include "store.h"

#define FAILURES 3
#define WINDOW_S 900
/* the epoch of the peer's hand-made operations; any non-zero value */
#define EPOCH      UINT64_C(0x00e90c0000000002)
#define HLC(ms, l) (((uint64_t)(ms) << 16) | (uint64_t)(l))

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
        "test_policy sealing key 0123456";

struct fixture {
	char dir[64];
	char repo_dir[96];
	struct config cfg;
	struct store *store;
	struct ops *ops;
	struct store_batch *b; /* the open batch, as control's c->batch */
	uint64_t peer_seq; /* last seq of the peer "siteb" */
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
	assert_int_equal(ops_commit(f->ops, f->b, false), 0);
	store_batch_free(&f->b);
	assert_int_equal(store_batch_new(&f->b, f->store), 0);
	ops_outbox_clear(f->ops);
}

/* A failed attempt of user here, made as cmd_validate_token makes it. */
static void fail_here(struct fixture *f, const char *user)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Failures fl = GRANTD__V1__FAILURES__INIT;
	uint64_t at = ops_stamp(f->ops);

	fl.user = (char *)user;
	fl.site = (char *)ops_site(f->ops);
	fl.hlc = &at;
	fl.n_hlc = 1;
	op.body_case = GRANTD__V1__OP__BODY_FAILURE;
	op.failure = &fl;
	op.hlc = at, op.has_hlc = 1;
	assert_int_equal(ops_local(f->ops, f->b, &op), 0);
}

/* grantctl unlock here. */
static void unlock_here(struct fixture *f, const char *user)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Unlock u = GRANTD__V1__UNLOCK__INIT;

	u.user = (char *)user;
	op.body_case = GRANTD__V1__OP__BODY_UNLOCK;
	op.unlock = &u;
	assert_int_equal(ops_local(f->ops, f->b, &op), 0);
}

/* The peer siteb's next operation, body already set in op. */
static void from_peer(struct fixture *f, Grantd__V1__Op *op, uint64_t hlc)
{
	bool applied;

	op->origin = "siteb";
	op->epoch = EPOCH, op->has_epoch = 1;
	op->seq = ++f->peer_seq, op->has_seq = 1;
	op->hlc = hlc, op->has_hlc = 1;
	assert_int_equal(ops_apply(f->ops, f->b, op, &applied), 0);
	assert_true(applied);
}

/* An attempt at site, as siteb sends it (its own, or relayed). */
static void peer_fails_at(struct fixture *f,
                          const char *user,
                          const char *site,
                          uint64_t hlc)
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
static int
counted(struct fixture *f, const char *user, uint64_t now_ms, uint64_t *until)
{
	struct policy_ctx pc = {&f->cfg, f->store, f->b, "host", NULL};
	int fails = -1;
	uint64_t u;

	assert_int_equal(policy_lock_state(&pc, user, now_ms, &fails, &u), 0);
	if (until)
		*until = u;
	return fails;
}

/* ---- tests --------------------------------------------------------------- */

/* Many attempts within one millisecond and one batch, each seen by the
 * next "request" before any commit: each counts once, and the lock comes
 * at lockout_failures exactly. */
static void test_every_attempt_counts(void **state)
{
	struct fixture *f = *state;
	uint64_t now = clock_wall_ms(), until;

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
	uint64_t now = clock_wall_ms(), until;
	uint64_t at = HLC(now - 1000, 0);

	fail_here(f, "carol");
	peer_fails(f, "carol", at);
	assert_int_equal(counted(f, "carol", now, &until), 2);
	assert_int_equal(until, 0);
	peer_fails(f, "carol", at); /* the same attempt again */
	assert_int_equal(counted(f, "carol", now, &until), 2);
	peer_fails(f, "carol", at + 1); /* another, same millisecond */
	assert_int_equal(counted(f, "carol", now, &until), 3);
	/* locked until the oldest of the 3 leaves the window */
	assert_int_equal(until, now - 1000 + WINDOW_S * 1000ull);
	/* attempts older than the window do not count */
	assert_int_equal(
	        counted(f, "carol", now + WINDOW_S * 1000ull - 1, &until), 1);
	assert_int_equal(until, 0);
}

/* An unlock forgives the attempts before it; later ones count again. */
static void test_unlock_forgives_earlier(void **state)
{
	struct fixture *f = *state;
	uint64_t now = clock_wall_ms(), until;

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
	uint64_t now = clock_wall_ms(), until;
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
	uint64_t now = clock_wall_ms(), until;
	uint64_t h = HLC(now - 3000, 5);

	peer_unlocks(f, "finn", h); /* origin siteb */
	peer_fails_at(f, "finn", "sitea", h); /* "sitea" < "siteb" */
	assert_int_equal(counted(f, "finn", now, &until), 0);
	peer_fails_at(f, "finn", "sitec", h); /* "sitec" > "siteb" */
	assert_int_equal(counted(f, "finn", now, &until), 1);
	peer_fails_at(f, "finn", "sitea", h + 1);
	assert_int_equal(counted(f, "finn", now, &until), 2);
}

/* ---- 2-factor decisions ------------------------------------------------- */

static void user_here(struct fixture *f, const char *name, bool deleted)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__User u = GRANTD__V1__USER__INIT;

	u.name = (char *)name;
	if (deleted)
		u.deleted = 1, u.has_deleted = 1;
	op.body_case = GRANTD__V1__OP__BODY_USER;
	op.user = &u;
	assert_int_equal(ops_local(f->ops, f->b, &op), 0);
}

/* Repository name in mode, whose one writer is writer. */
static void repo_here(struct fixture *f,
                      const char *name,
                      Grantd__V1__RepoMode mode,
                      const char *writer)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Repo r = GRANTD__V1__REPO__INIT;
	char *writers[] = {(char *)writer};

	r.name = (char *)name;
	r.mode = mode, r.has_mode = 1;
	r.writers = writers;
	r.n_writers = 1;
	op.body_case = GRANTD__V1__OP__BODY_REPO;
	op.repo = &r;
	assert_int_equal(ops_local(f->ops, f->b, &op), 0);
}

/* A TOTP enrollment of user, active (after the first val) or pending. */
static void enroll_here(struct fixture *f, const char *user, bool active)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Enrollment e = GRANTD__V1__ENROLLMENT__INIT;
	uint8_t secret[20] = "0123456789abcdefghij";

	e.user = (char *)user;
	e.kind = GRANTD__V1__OTP_KIND__OTP_TOTP, e.has_kind = 1;
	e.secret.data = secret, e.secret.len = sizeof(secret);
	e.has_secret = 1;
	e.digits = 6, e.has_digits = 1;
	e.period = 30, e.has_period = 1;
	e.active = active, e.has_active = 1;
	e.id = ops_stamp(f->ops), e.has_id = 1;
	op.body_case = GRANTD__V1__OP__BODY_ENROLL;
	op.enroll = &e;
	assert_int_equal(ops_local(f->ops, f->b, &op), 0);
}

static void grant_here(struct fixture *f,
                       const char *user,
                       const char *net,
                       int64_t expires)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;

	g.user = (char *)user;
	g.net = (char *)net;
	g.session = "";
	g.added = expires - 3600, g.has_added = 1;
	g.expires = expires, g.has_expires = 1;
	g.site = "sitea";
	op.body_case = GRANTD__V1__OP__BODY_GRANT;
	op.grant = &g;
	assert_int_equal(ops_local(f->ops, f->b, &op), 0);
}

/* policy_2fa for user from ip at now, committed state (as the reader
 * answers vref.check); why and hint into the caller's buffers (reset
 * here). */
static int decide(struct fixture *f,
                  const char *user,
                  const char *ip,
                  bool required,
                  int64_t now,
                  struct buf *why,
                  struct buf *hint)
{
	struct policy_ctx pc = {&f->cfg, f->store, NULL, "git.example.org",
	                        NULL};
	struct gd_net addr;

	buf_reset(why);
	buf_reset(hint);
	assert_int_equal(addr_parse(&addr, ip, false), 0);
	return policy_2fa(&pc, user, &addr, NULL, required, "demo", now, why,
	                  hint);
}

/* Required against opt-in, for each way of being (not) enrolled, and a
 * live grant for the address or none; the texts are policy_push's. */
static void test_2fa(void **state)
{
	struct fixture *f = *state;
	struct buf why = BUF_INIT, hint = BUF_INIT;
	int64_t now = (int64_t)time(NULL);

	/* no user record at all (a gitolite user who never enrolled) */
	assert_int_equal(
	        decide(f, "gina", "192.0.2.7", false, now, &why, &hint), 0);
	assert_int_equal(decide(f, "gina", "192.0.2.7", true, now, &why, &hint),
	                 GD_EDENIED);
	assert_string_equal(why.p, "user 'gina' is not enrolled with 2-factor "
	                           "authentication, which 'demo' requires");
	assert_non_null(strstr(hint.p, "enroll first: ssh git.example.org "
	                               "2fa enroll totp"));
	/* a user record, no enrollment: the same */
	user_here(f, "gina", false);
	commit(f);
	assert_int_equal(
	        decide(f, "gina", "192.0.2.7", false, now, &why, &hint), 0);
	assert_int_equal(decide(f, "gina", "192.0.2.7", true, now, &why, &hint),
	                 GD_EDENIED);
	assert_non_null(strstr(hint.p, "enroll first"));
	/* enrolled, not yet activated by a val: still not enrolled */
	enroll_here(f, "gina", false);
	commit(f);
	assert_int_equal(
	        decide(f, "gina", "192.0.2.7", false, now, &why, &hint), 0);
	assert_int_equal(decide(f, "gina", "192.0.2.7", true, now, &why, &hint),
	                 GD_EDENIED);
	assert_string_equal(hint.p, "finish enrolling: ssh git.example.org "
	                            "2fa val <token>");
	/* enrolled: both need a grant for the address */
	enroll_here(f, "gina", true);
	commit(f);
	for (int req = 0; req < 2; req++) {
		assert_int_equal(
		        decide(f, "gina", "192.0.2.7", req, now, &why, &hint),
		        GD_EDENIED);
		assert_string_equal(why.p, "IP address 192.0.2.7 has not been "
		                           "validated for user 'gina'");
		assert_string_equal(hint.p,
		                    "get your 2-factor token and run: "
		                    "ssh git.example.org 2fa val <token>");
	}
	grant_here(f, "gina", "192.0.2.7", now + 3600);
	grant_here(f, "gina", "192.0.2.9", now - 1); /* expired */
	commit(f);
	for (int req = 0; req < 2; req++) {
		assert_int_equal(
		        decide(f, "gina", "192.0.2.7", req, now, &why, &hint),
		        0);
		assert_int_equal(
		        decide(f, "gina", "192.0.2.8", req, now, &why, &hint),
		        GD_EDENIED);
		assert_int_equal(
		        decide(f, "gina", "192.0.2.9", req, now, &why, &hint),
		        GD_EDENIED);
		/* the grant's end */
		assert_int_equal(decide(f, "gina", "192.0.2.7", req, now + 3600,
		                        &why, &hint),
		                 GD_EDENIED);
	}
	/* an enrollment without a live user record counts as none */
	user_here(f, "gina", true);
	commit(f);
	assert_int_equal(
	        decide(f, "gina", "192.0.2.8", false, now, &why, &hint), 0);
	assert_int_equal(decide(f, "gina", "192.0.2.7", true, now, &why, &hint),
	                 GD_EDENIED);
	assert_non_null(strstr(why.p, "is not enrolled"));
	buf_free(&why);
	buf_free(&hint);
}

/* policy_push after the split: writers first, then the same decision. */
static void test_push_2fa(void **state)
{
	struct fixture *f = *state;
	struct policy_ctx pc = {&f->cfg, f->store, NULL, "git.example.org",
	                        NULL};
	struct buf why = BUF_INIT, hint = BUF_INIT;
	int64_t now = (int64_t)time(NULL);
	struct gd_net ip;

	repo_here(f, "demo", GRANTD__V1__REPO_MODE__MODE_REQUIRED, "hugo");
	repo_here(f, "open", GRANTD__V1__REPO_MODE__MODE_OFF, "hugo");
	user_here(f, "hugo", false);
	user_here(f, "ivan", false);
	commit(f);
	assert_int_equal(addr_parse(&ip, "192.0.2.7", false), 0);
	/* what allowed a push (the push log's factor) */
	const char *mode_factor = NULL;
	assert_int_equal(policy_push(&pc, "hugo", &ip, NULL, POLICY_KEY_UNKNOWN,
	                             "open", now, &why, &hint, &mode_factor),
	                 0);
	assert_string_equal(mode_factor, "mode-off");
	assert_int_equal(policy_push(&pc, "nobody", &ip, NULL,
	                             POLICY_KEY_UNKNOWN, "demo", now, &why,
	                             &hint, NULL),
	                 GD_EDENIED);
	assert_string_equal(why.p, "unknown user 'nobody'");
	buf_reset(&why);
	assert_int_equal(policy_push(&pc, "ivan", &ip, NULL, POLICY_KEY_UNKNOWN,
	                             "demo", now, &why, &hint, NULL),
	                 GD_EDENIED);
	assert_string_equal(why.p, "user 'ivan' may not write to 'demo'");
	buf_reset(&why);
	buf_reset(&hint);
	assert_int_equal(policy_push(&pc, "hugo", &ip, NULL, POLICY_KEY_UNKNOWN,
	                             "demo", now, &why, &hint, NULL),
	                 GD_EDENIED);
	assert_string_equal(why.p, "user 'hugo' is not enrolled with 2-factor "
	                           "authentication, which 'demo' requires");
	enroll_here(f, "hugo", true);
	grant_here(f, "hugo", "192.0.2.0/24", now + 60);
	commit(f);
	assert_int_equal(policy_push(&pc, "hugo", &ip, NULL, POLICY_KEY_UNKNOWN,
	                             "demo", now, &why, &hint, NULL),
	                 0);
	const char *factor = NULL;
	assert_int_equal(policy_push(&pc, "hugo", &ip, NULL, POLICY_KEY_UNKNOWN,
	                             "demo", now, &why, &hint, &factor),
	                 0);
	assert_string_equal(factor, "grant");
	buf_free(&why);
	buf_free(&hint);
}

/* The key kinds: parsed as grant-shell sends them, counted per
 * security_keys, and said in the texts. */
static void test_key_kinds(void **state)
{
	struct fixture *f = *state;
	struct buf t = BUF_INIT;
	enum policy_key k;

	assert_int_equal(policy_key_parse(&k, NULL), 0);
	assert_int_equal(k, POLICY_KEY_UNKNOWN);
	assert_int_equal(policy_key_parse(&k, ""), 0);
	assert_int_equal(k, POLICY_KEY_UNKNOWN);
	assert_int_equal(policy_key_parse(&k, "plain"), 0);
	assert_int_equal(k, POLICY_KEY_PLAIN);
	assert_int_equal(policy_key_parse(&k, "sk-touch"), 0);
	assert_int_equal(k, POLICY_KEY_SK_TOUCH);
	assert_int_equal(policy_key_parse(&k, "sk-pin"), 0);
	assert_int_equal(k, POLICY_KEY_SK_PIN);
	assert_int_equal(policy_key_parse(&k, "sk"), GD_EINVAL);
	assert_int_equal(policy_key_parse(&k, "SK-PIN"), GD_EINVAL);

	f->cfg.policy.security_keys = CONFIG_SK_OFF;
	for (k = POLICY_KEY_UNKNOWN; k <= POLICY_KEY_SK_PIN; k++)
		assert_false(policy_key_2fa(&f->cfg, k));
	f->cfg.policy.security_keys = CONFIG_SK_TOUCH;
	assert_false(policy_key_2fa(&f->cfg, POLICY_KEY_UNKNOWN));
	assert_false(policy_key_2fa(&f->cfg, POLICY_KEY_PLAIN));
	assert_true(policy_key_2fa(&f->cfg, POLICY_KEY_SK_TOUCH));
	assert_true(policy_key_2fa(&f->cfg, POLICY_KEY_SK_PIN));
	f->cfg.policy.security_keys = CONFIG_SK_PIN;
	assert_false(policy_key_2fa(&f->cfg, POLICY_KEY_PLAIN));
	assert_false(policy_key_2fa(&f->cfg, POLICY_KEY_SK_TOUCH));
	assert_true(policy_key_2fa(&f->cfg, POLICY_KEY_SK_PIN));

	policy_key_text(&t, &f->cfg, POLICY_KEY_UNKNOWN);
	assert_int_equal(t.len, 0);
	policy_key_text(&t, &f->cfg, POLICY_KEY_SK_TOUCH);
	assert_string_equal(t.p, "a security key with touch but no PIN, not "
	                         "two factors here (security_keys = pin)");
	buf_reset(&t);
	policy_key_text(&t, &f->cfg, POLICY_KEY_SK_PIN);
	assert_string_equal(t.p, "a security key with touch and PIN (two "
	                         "factors)");
	f->cfg.policy.security_keys = CONFIG_SK_OFF;
	buf_reset(&t);
	policy_key_text(&t, &f->cfg, POLICY_KEY_SK_TOUCH);
	assert_string_equal(t.p, "a security key with touch, counted as an "
	                         "ordinary SSH key here (security_keys = off)");
	buf_reset(&t);
	policy_key_text(&t, &f->cfg, POLICY_KEY_PLAIN);
	assert_string_equal(t.p, "an ordinary SSH key (one factor)");
	buf_free(&t);
}

/* A push over a security key: two factors without a grant, for required
 * and opt-in repositories, as security_keys says; the writers still
 * decide first; refusals say which factors were seen. */
static void test_push_security_keys(void **state)
{
	struct fixture *f = *state;
	struct policy_ctx pc = {&f->cfg, f->store, NULL, "git.example.org",
	                        NULL};
	struct buf why = BUF_INIT, hint = BUF_INIT;
	int64_t now = (int64_t)time(NULL);
	const char *factor;
	struct gd_net ip;

#define PUSH(user, key, repo)                                                 \
	(buf_reset(&why), buf_reset(&hint),                                   \
	 policy_push(&pc, user, &ip, NULL, POLICY_KEY_##key, repo, now, &why, \
	             &hint, &factor))
	repo_here(f, "req", GRANTD__V1__REPO_MODE__MODE_REQUIRED, "hugo");
	repo_here(f, "optin", GRANTD__V1__REPO_MODE__MODE_OPT_IN, "hugo");
	user_here(f, "hugo", false);
	user_here(f, "ivan", false);
	commit(f);
	assert_int_equal(addr_parse(&ip, "192.0.2.7", false), 0);

	f->cfg.policy.security_keys = CONFIG_SK_TOUCH;
	/* not enrolled, no grant: the security key is both factors */
	assert_int_equal(PUSH("hugo", SK_TOUCH, "req"), 0);
	assert_string_equal(factor, "security-key");
	assert_int_equal(PUSH("hugo", SK_PIN, "req"), 0);
	assert_int_equal(PUSH("hugo", SK_TOUCH, "optin"), 0);
	assert_string_equal(factor, "security-key");
	/* opt-in, not enrolled, an ordinary key: no second factor asked */
	assert_int_equal(PUSH("hugo", PLAIN, "optin"), 0);
	assert_string_equal(factor, "not-required");
	/* never past the writers */
	assert_int_equal(PUSH("ivan", SK_PIN, "req"), GD_EDENIED);
	assert_null(factor);
	assert_string_equal(why.p, "user 'ivan' may not write to 'req'");
	/* an ordinary key from the same address: as before, with the
	 * factors seen on a line of their own */
	assert_int_equal(PUSH("hugo", PLAIN, "req"), GD_EDENIED);
	assert_string_equal(why.p,
	                    "user 'hugo' is not enrolled with 2-factor "
	                    "authentication, which 'req' requires\nfactors "
	                    "seen: an ordinary SSH key (one factor; a security "
	                    "key, ed25519-sk, would count as two); no 2-factor "
	                    "token enrolled");
	/* no key kind (gitolite, grantctl check): the texts as before */
	assert_int_equal(PUSH("hugo", UNKNOWN, "req"), GD_EDENIED);
	assert_string_equal(why.p, "user 'hugo' is not enrolled with 2-factor "
	                           "authentication, which 'req' requires");
	enroll_here(f, "hugo", true);
	commit(f);
	assert_int_equal(PUSH("hugo", SK_TOUCH, "req"), 0);
	assert_int_equal(PUSH("hugo", SK_TOUCH, "optin"), 0);
	assert_int_equal(PUSH("hugo", PLAIN, "optin"), GD_EDENIED);
	assert_string_equal(why.p,
	                    "IP address 192.0.2.7 has not been "
	                    "validated for user 'hugo'\nfactors seen: an "
	                    "ordinary SSH key (one factor; a security key, "
	                    "ed25519-sk, would count as two); no 2-factor "
	                    "grant covers this address");
	assert_string_equal(hint.p, "get your 2-factor token and run: ssh "
	                            "git.example.org 2fa val <token>");

	/* pin: only a key whose PIN sshd checked */
	f->cfg.policy.security_keys = CONFIG_SK_PIN;
	assert_int_equal(PUSH("hugo", SK_PIN, "req"), 0);
	assert_int_equal(PUSH("hugo", SK_TOUCH, "req"), GD_EDENIED);
	assert_non_null(strstr(why.p, "\nfactors seen: a security key with "
	                              "touch but no PIN, not two factors "
	                              "here (security_keys = pin); no "
	                              "2-factor grant covers this address"));

	/* off: an ordinary key, which a grant lets through */
	f->cfg.policy.security_keys = CONFIG_SK_OFF;
	assert_int_equal(PUSH("hugo", SK_PIN, "req"), GD_EDENIED);
	assert_non_null(strstr(why.p, "counted as an ordinary SSH key here "
	                              "(security_keys = off)"));
	grant_here(f, "hugo", "192.0.2.7", now + 60);
	commit(f);
	assert_int_equal(PUSH("hugo", SK_PIN, "req"), 0);
	assert_int_equal(PUSH("hugo", PLAIN, "req"), 0);
#undef PUSH
	buf_free(&why);
	buf_free(&hint);
}

/* An address revocation (issue 19, N6) voids, by stamp, every grant of
 * the user whose net contains the address, whatever its session; a
 * subnet's voids the grants for exactly that subnet; later grants hold. */
static void test_addr_revocation_voids(void **state)
{
	Grantd__V1__AddrRevocation ar = GRANTD__V1__ADDR_REVOCATION__INIT;
	Grantd__V1__AddrRevocation *list[] = {&ar};
	struct policy_revokes rv = {.addr = list, .n_addr = 1};
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;

	(void)state;
	ar.user = "kim";
	ar.net = "10.7.7.7";
	ar.hlc = 1000, ar.has_hlc = 1;
	ar.origin = "fa";
	g.user = "kim";
	g.hlc = 999, g.has_hlc = 1;
	g.origin = "fb";
	g.net = "10.7.7.0/24";
	assert_true(policy_grant_void(&g, &rv));
	g.net = "10.7.7.7";
	g.session = "10.7.7.7 6666 127.0.0.52 22";
	assert_true(policy_grant_void(&g, &rv));
	g.session = "";
	assert_true(policy_grant_void(&g, &rv));
	g.net = "10.7.7.8";
	assert_false(policy_grant_void(&g, &rv));
	g.net = "10.7.8.0/24";
	assert_false(policy_grant_void(&g, &rv));
	/* stamped after: a grant made once the revocation was known */
	g.net = "10.7.7.0/24";
	g.hlc = 1001;
	assert_false(policy_grant_void(&g, &rv));
	/* the same stamp: the origin name breaks the tie, as for LWW */
	g.hlc = 1000;
	assert_int_equal(policy_grant_void(&g, &rv),
	                 !ops_stamp_after(1000, "fb", 1000, "fa"));
	/* a subnet revoked: that subnet only, not a wider one around it */
	ar.net = "10.7.7.0/24";
	g.hlc = 999;
	assert_true(policy_grant_void(&g, &rv));
	g.net = "10.7.0.0/16";
	assert_false(policy_grant_void(&g, &rv));
	g.net = "10.7.7.7";
	assert_false(policy_grant_void(&g, &rv));
	assert_false(policy_grant_void(&g, NULL));
}

/* A decision's records are unpacked into a bump allocator (policy.c's
 * arena): a repository whose writers fill more than its first room (some
 * 40 KiB of names: several chunks) is decided as any other. */
static void test_push_many_writers(void **state)
{
	struct fixture *f = *state;
	struct policy_ctx pc = {&f->cfg, f->store, NULL, "git.example.org",
	                        NULL};
	struct buf why = BUF_INIT, hint = BUF_INIT;
	int64_t now = (int64_t)time(NULL);
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Repo r = GRANTD__V1__REPO__INIT;
	enum { N = 1000 };
	char *writers[N], names[N][40];
	const char *factor = NULL;
	struct gd_net ip;

	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]),
		         "writer-%04d-with-a-long-name", i);
		writers[i] = names[i];
	}
	snprintf(names[N - 1], sizeof(names[N - 1]), "hugo");
	r.name = "big";
	r.mode = GRANTD__V1__REPO_MODE__MODE_REQUIRED, r.has_mode = 1;
	r.writers = writers;
	r.n_writers = N;
	op.body_case = GRANTD__V1__OP__BODY_REPO;
	op.repo = &r;
	assert_int_equal(ops_local(f->ops, f->b, &op), 0);
	user_here(f, "hugo", false);
	user_here(f, "ivan", false);
	enroll_here(f, "hugo", true);
	grant_here(f, "hugo", "192.0.2.0/24", now + 60);
	commit(f);
	assert_int_equal(addr_parse(&ip, "192.0.2.7", false), 0);
	for (int round = 0; round < 3; round++) {
		assert_int_equal(policy_push(&pc, "hugo", &ip, NULL,
		                             POLICY_KEY_PLAIN, "big", now, &why,
		                             &hint, &factor),
		                 0);
		assert_string_equal(factor, "grant");
		buf_reset(&why);
		assert_int_equal(policy_push(&pc, "ivan", &ip, NULL,
		                             POLICY_KEY_PLAIN, "big", now, &why,
		                             &hint, &factor),
		                 GD_EDENIED);
		assert_string_equal(why.p,
		                    "user 'ivan' may not write to 'big'");
		buf_reset(&why);
		buf_reset(&hint);
	}
	buf_free(&why);
	buf_free(&hint);
}

/* The enrollment, a sealed record opened on every read, is read only when
 * the answer needs it (issue 23): with every enrollment read failing (the
 * read-enroll fault), a push to a repository in mode off and one over a
 * key that counts as two factors are still decided; one that needs the
 * enrollment fails to decide (GD_EIO), never a refusal.  The fault stays
 * armed for the rest of the process: keep this test last. */
static void test_push_reads_enrollment_when_needed(void **state)
{
	struct fixture *f = *state;
	struct policy_ctx pc = {&f->cfg, f->store, NULL, "git.example.org",
	                        NULL};
	struct buf why = BUF_INIT, hint = BUF_INIT;
	int64_t now = (int64_t)time(NULL);
	const char *factor = NULL;
	struct gd_net ip;

	repo_here(f, "req", GRANTD__V1__REPO_MODE__MODE_REQUIRED, "hugo");
	repo_here(f, "open", GRANTD__V1__REPO_MODE__MODE_OFF, "hugo");
	user_here(f, "hugo", false);
	enroll_here(f, "hugo", true);
	grant_here(f, "hugo", "192.0.2.0/24", now + 60);
	commit(f);
	assert_int_equal(addr_parse(&ip, "192.0.2.7", false), 0);
	assert_int_equal(policy_push(&pc, "hugo", &ip, NULL, POLICY_KEY_PLAIN,
	                             "req", now, &why, &hint, &factor),
	                 0);
	assert_string_equal(factor, "grant");

	setenv("GRANTD_TEST_FAULT_AT", "read-enroll", 1);
	crashpoint_init();
	assert_int_equal(policy_push(&pc, "hugo", &ip, NULL, POLICY_KEY_PLAIN,
	                             "open", now, &why, &hint, &factor),
	                 0);
	assert_string_equal(factor, "mode-off");
	f->cfg.policy.security_keys = CONFIG_SK_TOUCH;
	assert_int_equal(policy_push(&pc, "hugo", &ip, NULL,
	                             POLICY_KEY_SK_TOUCH, "req", now, &why,
	                             &hint, &factor),
	                 0);
	assert_string_equal(factor, "security-key");
	assert_int_equal(policy_push(&pc, "hugo", &ip, NULL, POLICY_KEY_PLAIN,
	                             "req", now, &why, &hint, &factor),
	                 GD_EIO);
	assert_int_equal(policy_2fa(&pc, "hugo", &ip, NULL, true, "req", now,
	                            &why, &hint),
	                 GD_EIO);
	buf_free(&why);
	buf_free(&hint);
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
	        cmocka_unit_test_setup_teardown(test_2fa, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_push_2fa, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_key_kinds, setup,
	                                        teardown),
	        cmocka_unit_test(test_addr_revocation_voids),
	        cmocka_unit_test_setup_teardown(test_push_security_keys, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_push_many_writers, setup,
	                                        teardown),
	        /* last: it arms a fault for the rest of the process */
	        cmocka_unit_test_setup_teardown(
	                test_push_reads_enrollment_when_needed, setup,
	                teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
