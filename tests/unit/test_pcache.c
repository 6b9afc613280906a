/*
 * test_pcache.c: node/requests/pcache.h, the reader's cache of the facts
 * a push decision reads (issue 23), through policy_push and policy_2fa on
 * a real store, read through views as the reader reads them.
 *
 * The cache's one correctness argument is that it is dropped whole when
 * a new view is installed (readers.c take_view); next_view() here does
 * what take_view does.  A check on a new view must see at once a deleted
 * enrollment, a new enrollment, a changed repository mode and both kinds
 * of revocation; every cached answer equals the answer read without a
 * cache from the same view (a user's grants too, by net, session and
 * time, and a user with too many to keep); the cache holds no byte sequence of
 * an enrollment's secret; and with one slot per kind (every name collides) the
 * answers stay right.  Who holds an SSH key (keys.find, the keys socket)
 * likewise, across a view that moves a key and deletes a user.
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
#include <sodium.h>

#include "addr.h"
#include "config.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "ops.h"
#include "pcache.h"
#include "policy.h"
#include "records.h"
#include "store.h"

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
        "test_pcache sealing key 0123456";

#define SECRET_LEN 20
#define NUSERS     4

struct fixture {
	char dir[64];
	char repo_dir[96];
	struct config cfg;
	struct store *store;
	struct ops *ops;
	struct store_batch *b; /* the open batch, as the writer's */
	struct store_batch *view; /* the reader's view */
	struct pcache *cache; /* the reader's cache of it */
	uint64_t enroll_id[NUSERS];
	uint8_t secret[NUSERS][SECRET_LEN];
};

static const char *users[NUSERS] = {"hugo", "ivan", "kim", "max"};

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_pcache", LOG_LVL_WARN);
}

/* A fixture whose cache has slots per kind (0: PCACHE_SLOTS). */
static int open_fixture(void **state, size_t slots)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_pcache", false) < 0)
		return -1;
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	f->cfg.site = "sitea";
	f->cfg.repo_dir = f->repo_dir;
	f->cfg.policy.lockout_failures = 3;
	f->cfg.policy.lockout_window = 900;
	if (fx_store_open(&f->store, &f->ops, f->dir, &f->cfg, seal_key) < 0 ||
	    store_batch_new(&f->b, f->store) < 0 ||
	    store_view_new(&f->view, f->store) < 0)
		return -1;
	pcache_new(&f->cache, slots);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return open_fixture(state, 0);
}

static int setup_one_slot(void **state)
{
	return open_fixture(state, 1);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	pcache_free(&f->cache);
	store_batch_free(&f->view);
	store_batch_free(&f->b);
	fx_store_close(&f->store, &f->ops);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

/* Commit the open batch and install a new view as readers.c's take_view
 * does: the cache dropped with the old view. */
static void next_view(struct fixture *f)
{
	assert_int_equal(ops_commit(f->ops, f->b, false), 0);
	store_batch_free(&f->b);
	assert_int_equal(store_batch_new(&f->b, f->store), 0);
	ops_outbox_clear(f->ops);
	pcache_drop(f->cache);
	store_batch_free(&f->view);
	assert_int_equal(store_view_new(&f->view, f->store), 0);
}

static void emit(struct fixture *f, Grantd__V1__Op *op)
{
	assert_int_equal(ops_local(f->ops, f->b, op), 0);
}

static void user_here(struct fixture *f, const char *name)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__User u = GRANTD__V1__USER__INIT;

	u.name = (char *)name;
	op.body_case = GRANTD__V1__OP__BODY_USER;
	op.user = &u;
	emit(f, &op);
}

/* Repository name in mode, its writers the NULL-ended list w. */
static void repo_here(struct fixture *f,
                      const char *name,
                      Grantd__V1__RepoMode mode,
                      const char *const *w)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Repo r = GRANTD__V1__REPO__INIT;
	size_t n = 0;

	while (w[n])
		n++;
	r.name = (char *)name;
	r.mode = mode, r.has_mode = 1;
	r.writers = (char **)w;
	r.n_writers = n;
	op.body_case = GRANTD__V1__OP__BODY_REPO;
	op.repo = &r;
	emit(f, &op);
}

/* users[i]'s TOTP enrollment, active, with a random secret (kept in f to
 * look for); deleted: its end (unenroll). */
static void enroll_here(struct fixture *f, int i, bool deleted)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Enrollment e = GRANTD__V1__ENROLLMENT__INIT;

	e.user = (char *)users[i];
	if (deleted) {
		e.id = f->enroll_id[i], e.has_id = 1;
		e.deleted = 1, e.has_deleted = 1;
	} else {
		randombytes_buf(f->secret[i], SECRET_LEN);
		f->enroll_id[i] = ops_stamp(f->ops);
		e.kind = GRANTD__V1__OTP_KIND__OTP_TOTP, e.has_kind = 1;
		e.secret.data = f->secret[i], e.secret.len = SECRET_LEN;
		e.has_secret = 1;
		e.digits = 6, e.has_digits = 1;
		e.period = 30, e.has_period = 1;
		e.active = 1, e.has_active = 1;
		e.id = f->enroll_id[i], e.has_id = 1;
	}
	op.body_case = GRANTD__V1__OP__BODY_ENROLL;
	op.enroll = &e;
	emit(f, &op);
}

/* user's grant for net, for session ("": any), until expires. */
static void grant_in(struct fixture *f,
                     const char *user,
                     const char *net,
                     const char *session,
                     int64_t expires)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;

	g.user = (char *)user;
	g.net = (char *)net;
	g.session = (char *)session;
	g.added = expires - 3600, g.has_added = 1;
	g.expires = expires, g.has_expires = 1;
	g.site = "sitea";
	op.body_case = GRANTD__V1__OP__BODY_GRANT;
	op.grant = &g;
	emit(f, &op);
}

static void grant_here(struct fixture *f,
                       const char *user,
                       const char *net,
                       int64_t expires)
{
	grant_in(f, user, net, "", expires);
}

/* user's revocation (revoke all), or of net alone */
static void revoke_here(struct fixture *f, const char *user, const char *net)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Revocation rv = GRANTD__V1__REVOCATION__INIT;
	Grantd__V1__AddrRevocation ar = GRANTD__V1__ADDR_REVOCATION__INIT;

	if (net) {
		ar.user = (char *)user;
		ar.net = (char *)net;
		op.body_case = GRANTD__V1__OP__BODY_ADDR_REVOKE;
		op.addr_revoke = &ar;
	} else {
		rv.user = (char *)user;
		op.body_case = GRANTD__V1__OP__BODY_REVOKE;
		op.revoke = &rv;
	}
	emit(f, &op);
}

/* policy_push of user to repo from addr in session (NULL: none) at now,
 * through the cache, checked against the same decision read without one
 * from the same view (the code, the texts and the factor). */
static int push_from(struct fixture *f,
                     const char *user,
                     const char *repo,
                     const char *addr,
                     const char *session,
                     int64_t now)
{
	struct policy_ctx pc = {&f->cfg, f->store, f->view, "h", f->cache};
	struct buf why[2] = {BUF_INIT, BUF_INIT},
	           hint[2] = {BUF_INIT, BUF_INIT};
	const char *factor[2] = {NULL, NULL};
	struct gd_net ip;
	int rc[2];

	assert_int_equal(addr_parse(&ip, addr, false), 0);
	for (int i = 0; i < 2; i++) {
		pc.cache = i ? NULL : f->cache;
		rc[i] = policy_push(&pc, user, &ip, session, POLICY_KEY_PLAIN,
		                    repo, now, &why[i], &hint[i], &factor[i]);
	}
	assert_int_equal(rc[0], rc[1]);
	assert_string_equal(buf_str(&why[0]), buf_str(&why[1]));
	assert_string_equal(buf_str(&hint[0]), buf_str(&hint[1]));
	assert_true(factor[0] == factor[1]);
	for (int i = 0; i < 2; i++) {
		buf_free(&why[i]);
		buf_free(&hint[i]);
	}
	return rc[0];
}

/* push_from 192.0.2.7, no session */
static int
push(struct fixture *f, const char *user, const char *repo, int64_t now)
{
	return push_from(f, user, repo, "192.0.2.7", NULL, now);
}

/* policy_2fa (gitolite's VREF) of user from 192.0.2.7, required, at now,
 * cached against uncached likewise. */
static int vref(struct fixture *f, const char *user, int64_t now)
{
	struct policy_ctx pc = {&f->cfg, f->store, f->view, "h", f->cache};
	struct buf why[2] = {BUF_INIT, BUF_INIT},
	           hint[2] = {BUF_INIT, BUF_INIT};
	struct gd_net ip;
	int rc[2];

	assert_int_equal(addr_parse(&ip, "192.0.2.7", false), 0);
	for (int i = 0; i < 2; i++) {
		pc.cache = i ? NULL : f->cache;
		rc[i] = policy_2fa(&pc, user, &ip, NULL, true, "demo", now,
		                   &why[i], &hint[i]);
	}
	assert_int_equal(rc[0], rc[1]);
	assert_string_equal(buf_str(&why[0]), buf_str(&why[1]));
	assert_string_equal(buf_str(&hint[0]), buf_str(&hint[1]));
	for (int i = 0; i < 2; i++) {
		buf_free(&why[i]);
		buf_free(&hint[i]);
	}
	return rc[0];
}

/* The first state: demo requires 2 factors of hugo, kim and max (each
 * enrolled, with a grant for 192.0.2.7); opt lets ivan (not enrolled)
 * through; free asks nothing of ivan. */
static void first_state(struct fixture *f, int64_t now)
{
	static const char *demo_w[] = {"hugo", "kim", "max", NULL};
	static const char *ivan_w[] = {"ivan", NULL};

	repo_here(f, "demo", GRANTD__V1__REPO_MODE__MODE_REQUIRED, demo_w);
	repo_here(f, "opt", GRANTD__V1__REPO_MODE__MODE_OPT_IN, ivan_w);
	repo_here(f, "free", GRANTD__V1__REPO_MODE__MODE_OFF, ivan_w);
	for (int i = 0; i < NUSERS; i++)
		user_here(f, users[i]);
	for (int i = 0; i < NUSERS; i++)
		if (strcmp(users[i], "ivan")) {
			enroll_here(f, i, false);
			grant_here(f, users[i], "192.0.2.0/24", now + 3600);
		}
	next_view(f);
}

/* The answers of the first state, asked twice (the second time from
 * the cache). */
static void first_answers(struct fixture *f, int64_t now)
{
	for (int round = 0; round < 2; round++) {
		assert_int_equal(push(f, "hugo", "demo", now), 0);
		assert_int_equal(push(f, "kim", "demo", now), 0);
		assert_int_equal(push(f, "max", "demo", now), 0);
		assert_int_equal(push(f, "ivan", "opt", now), 0);
		assert_int_equal(push(f, "ivan", "free", now), 0);
		assert_int_equal(push(f, "ivan", "demo", now), GD_EDENIED);
		assert_int_equal(push(f, "nobody", "demo", now), GD_EDENIED);
		assert_int_equal(push(f, "hugo", "gone", now), GD_ENOTFOUND);
		assert_int_equal(vref(f, "hugo", now), 0);
		assert_int_equal(vref(f, "ivan", now), GD_EDENIED);
		/* the grants are cached, the clock is not: their end is
		 * seen */
		assert_int_equal(push(f, "hugo", "demo", now + 3600),
		                 GD_EDENIED);
	}
}

/* (1) Everything a cached fact stands for changes in one batch; the
 * next view sees it all at once, and the old view still says what it
 * said. */
static void test_view_change(void **state)
{
	struct fixture *f = *state;
	static const char *ivan_w[] = {"ivan", NULL};
	int64_t now = (int64_t)time(NULL);

	first_state(f, now);
	first_answers(f, now);
	enroll_here(f, 0, true); /* hugo unenrolled */
	enroll_here(f, 1, false); /* ivan enrolled: opt asks a grant */
	revoke_here(f, "kim", NULL); /* kim's grants void */
	revoke_here(f, "max", "192.0.2.7"); /* max's grant for .7 void */
	repo_here(f, "free", GRANTD__V1__REPO_MODE__MODE_REQUIRED, ivan_w);
	/* written, not yet a view: the reader still answers the old one */
	first_answers(f, now);
	next_view(f);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(push(f, "hugo", "demo", now), GD_EDENIED);
		assert_int_equal(push(f, "ivan", "opt", now), GD_EDENIED);
		assert_int_equal(push(f, "kim", "demo", now), GD_EDENIED);
		assert_int_equal(push(f, "max", "demo", now), GD_EDENIED);
		assert_int_equal(push(f, "ivan", "free", now), GD_EDENIED);
		assert_int_equal(vref(f, "hugo", now), GD_EDENIED);
		assert_int_equal(vref(f, "ivan", now), GD_EDENIED);
	}
	/* and new grants after the revocations hold again */
	grant_here(f, "kim", "192.0.2.7", now + 60);
	grant_here(f, "max", "192.0.2.7", now + 60);
	next_view(f);
	assert_int_equal(push(f, "kim", "demo", now), 0);
	assert_int_equal(push(f, "max", "demo", now), 0);
}

/* (1b) A user's grants from the cache: each net, session and expiry
 * answered as read without it, the clock the decision's own (earlier or
 * later than the one that filled it), an address revocation seen on the
 * next view; a user with more than PCACHE_GRANTS_MAX grants keeps none in
 * the cache and is still answered right. */
static void test_grants(void **state)
{
	struct fixture *f = *state;
	static const char *demo_w[] = {"hugo", "max", NULL};
	int64_t now = (int64_t)time(NULL);
	struct pcache_user *e;
	char net[32];

	repo_here(f, "demo", GRANTD__V1__REPO_MODE__MODE_REQUIRED, demo_w);
	user_here(f, "hugo");
	user_here(f, "max");
	enroll_here(f, 0, false);
	enroll_here(f, 3, false);
	grant_in(f, "hugo", "10.0.0.0/8", "", now + 60);
	grant_in(f, "hugo", "192.0.2.7", "22/s1", now + 3600);
	grant_in(f, "hugo", "198.51.100.0/24", "", now - 10);
	for (int i = 1; i <= PCACHE_GRANTS_MAX + 6; i++) {
		snprintf(net, sizeof(net), "203.0.113.%d", i);
		grant_in(f, "max", net, "", now + 60);
	}
	next_view(f);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(
		        push_from(f, "hugo", "demo", "10.1.2.3", NULL, now), 0);
		assert_int_equal(push_from(f, "hugo", "demo", "10.1.2.3",
		                           "22/s9", now + 59),
		                 0);
		assert_int_equal(push_from(f, "hugo", "demo", "10.1.2.3", NULL,
		                           now + 60),
		                 GD_EDENIED);
		assert_int_equal(push(f, "hugo", "demo", now), GD_EDENIED);
		assert_int_equal(
		        push_from(f, "hugo", "demo", "192.0.2.7", "22/s1", now),
		        0);
		assert_int_equal(
		        push_from(f, "hugo", "demo", "192.0.2.7", "22/s2", now),
		        GD_EDENIED);
		assert_int_equal(
		        push_from(f, "hugo", "demo", "198.51.100.5", NULL, now),
		        GD_EDENIED);
		assert_int_equal(push_from(f, "hugo", "demo", "198.51.100.5",
		                           NULL, now - 20),
		                 0);
		assert_int_equal(
		        push_from(f, "max", "demo", "203.0.113.70", NULL, now),
		        0);
		assert_int_equal(
		        push_from(f, "max", "demo", "203.0.113.71", NULL, now),
		        GD_EDENIED);
	}
	e = pcache_user(f->cache, "hugo");
	assert_true(e->grants_known && !e->grants_over);
	assert_int_equal(e->n_grants, 3);
	e = pcache_user(f->cache, "max");
	assert_true(!e->grants_known && e->grants_over);
	assert_int_equal(e->n_grants, 0);
	assert_null(e->grants);
	/* a revocation of one net: gone on the next view, the rest kept */
	revoke_here(f, "hugo", "10.0.0.0/8");
	next_view(f);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(
		        push_from(f, "hugo", "demo", "10.1.2.3", NULL, now),
		        GD_EDENIED);
		assert_int_equal(
		        push_from(f, "hugo", "demo", "192.0.2.7", "22/s1", now),
		        0);
	}
	assert_int_equal(pcache_user(f->cache, "hugo")->n_grants, 2);
}

/* Whether any SCAN_WINDOW bytes of a secret are in a block. */
#define SCAN_WINDOW 6

struct scan {
	const uint8_t (*secret)[SECRET_LEN];
	int n;
	int found;
	size_t bytes;
};

static void scan_block(const void *p, size_t len, void *payload)
{
	struct scan *s = payload;
	const uint8_t *b = p;

	s->bytes += len;
	for (int k = 0; k < s->n; k++)
		for (size_t w = 0; w + SCAN_WINDOW <= SECRET_LEN; w++)
			for (size_t i = 0; i + SCAN_WINDOW <= len; i++)
				if (!memcmp(b + i, s->secret[k] + w,
				            SCAN_WINDOW))
					s->found++;
}

/* (2) A cache filled by decisions that unsealed every enrollment holds
 * no run of any secret's bytes (and the scan finds one planted). */
static void test_no_secret(void **state)
{
	struct fixture *f = *state;
	int64_t now = (int64_t)time(NULL);
	struct scan s = {(const uint8_t(*)[SECRET_LEN])f->secret, NUSERS, 0, 0};
	uint8_t planted[64] = {0};

	first_state(f, now);
	enroll_here(f, 1, false); /* ivan too */
	next_view(f);
	for (int i = 0; i < NUSERS; i++) {
		push(f, users[i], "demo", now);
		push(f, users[i], "opt", now);
		vref(f, users[i], now);
	}
	assert_int_equal(push(f, "ivan", "opt", now), GD_EDENIED);
	pcache_each_block(f->cache, scan_block, &s);
	assert_true(s.bytes > 0);
	assert_int_equal(s.found, 0);
	/* the scan itself works */
	memcpy(planted + 13, f->secret[2] + 7, SCAN_WINDOW);
	scan_block(planted, sizeof(planted), &s);
	assert_int_equal(s.found, 1);
}

/* (3) One slot per kind: every user evicts the last, every repository
 * too, and the answers stay those read without a cache. */
static void test_collisions(void **state)
{
	struct fixture *f = *state;
	int64_t now = (int64_t)time(NULL);
	struct pcache_user *e;

	e = pcache_user(f->cache, "a");
	e->user_known = e->live = true;
	e = pcache_user(f->cache, "b");
	assert_string_equal(e->name, "b");
	assert_false(e->user_known || e->live);
	assert_true(pcache_user(f->cache, "b") == e);
	pcache_drop(f->cache);

	first_state(f, now);
	first_answers(f, now);
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < NUSERS; i++) {
			push(f, users[i], "demo", now);
			push(f, users[i], "opt", now);
			vref(f, users[(i + round) % NUSERS], now);
		}
	revoke_here(f, "kim", NULL);
	next_view(f);
	assert_int_equal(push(f, "hugo", "demo", now), 0);
	assert_int_equal(push(f, "kim", "demo", now), GD_EDENIED);
	assert_int_equal(push(f, "hugo", "demo", now), 0);
}

/* An ssh-ed25519 key line whose 32 key bytes are all n. */
static void key_line(char *out, size_t len, int n)
{
	static const uint8_t head[] = "\0\0\0\x0bssh-ed25519\0\0\0\x20";
	uint8_t blob[sizeof(head) - 1 + 32];
	char b64[128];

	memcpy(blob, head, sizeof(head) - 1);
	memset(blob + sizeof(head) - 1, n, 32);
	sodium_bin2base64(b64, sizeof(b64), blob, sizeof(blob),
	                  sodium_base64_VARIANT_ORIGINAL);
	snprintf(out, len, "ssh-ed25519 %s k%d", b64, n);
}

/* User name with the keys k (n of them), or deleted. */
static void user_keys_here(
        struct fixture *f, const char *name, bool deleted, char **k, size_t n)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__User u = GRANTD__V1__USER__INIT;

	u.name = (char *)name;
	u.deleted = deleted;
	u.has_deleted = deleted;
	u.keys = k;
	u.n_keys = n;
	op.body_case = GRANTD__V1__OP__BODY_USER;
	op.user = &u;
	emit(f, &op);
}

/* policy_key_owners of key line k, twice (the second time from the
 * cache), each time cached against uncached: the same answers; want
 * owners, the first named owner (NULL: not checked).  Asked with no
 * buffers too, as keys.list asks. */
static void
owners_are(struct fixture *f, const char *k, int want, const char *owner)
{
	struct policy_ctx pc = {&f->cfg, f->store, f->view, "h", f->cache};
	char fp[RECORDS_FP_MAX];

	assert_int_equal(records_ssh_fingerprint(fp, k), 0);
	for (int round = 0; round < 2; round++) {
		struct buf o[2] = {BUF_INIT, BUF_INIT},
		           l[2] = {BUF_INIT, BUF_INIT};
		int n[2], m;
		for (int i = 0; i < 2; i++) {
			pc.cache = i ? NULL : f->cache;
			assert_int_equal(
			        policy_key_owners(&pc, fp, &n[i], &o[i], &l[i]),
			        0);
			assert_int_equal(
			        policy_key_owners(&pc, fp, &m, NULL, NULL), 0);
			assert_int_equal(m, n[i]);
		}
		assert_int_equal(n[0], n[1]);
		assert_int_equal(n[0], want);
		assert_string_equal(buf_str(&o[0]), buf_str(&o[1]));
		assert_string_equal(buf_str(&l[0]), buf_str(&l[1]));
		if (owner)
			assert_string_equal(buf_str(&o[0]), owner);
		if (want == 1)
			assert_string_equal(buf_str(&l[0]), k);
		for (int i = 0; i < 2; i++) {
			buf_free(&o[i]);
			buf_free(&l[i]);
		}
	}
}

/* (4) Who holds a key (the keys socket's lookup): cached answers equal
 * the store's, a key two users hold is counted twice, and the next view
 * sees a key taken from one user and given to another, and a user
 * deleted. */
static void test_keys(void **state)
{
	struct fixture *f = *state;
	char k[5][160], *one[1], *two[1];

	for (int i = 1; i <= 4; i++)
		key_line(k[i], sizeof(k[i]), i);
	one[0] = k[1];
	user_keys_here(f, "hugo", false, one, 1);
	one[0] = k[2];
	user_keys_here(f, "ivan", false, one, 1);
	two[0] = k[3];
	user_keys_here(f, "kim", false, two, 1);
	user_keys_here(f, "max", false, two, 1);
	next_view(f);
	owners_are(f, k[1], 1, "hugo");
	owners_are(f, k[2], 1, "ivan");
	owners_are(f, k[3], 2, NULL);
	owners_are(f, k[4], 0, "");

	one[0] = k[4];
	user_keys_here(f, "hugo", false, one, 1);
	user_keys_here(f, "max", true, two, 1);
	next_view(f);
	owners_are(f, k[1], 0, "");
	owners_are(f, k[4], 1, "hugo");
	owners_are(f, k[3], 1, "kim");
	owners_are(f, k[2], 1, "ivan");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_view_change, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_grants, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_no_secret, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_collisions, setup_one_slot,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_keys, setup_one_slot,
	                                        teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
