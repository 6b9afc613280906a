/*
 * test_ops.c: node/state/ops.h, THE apply function and its merge rules.
 *
 * Every site applies every operation through ops_apply(), in whatever
 * order the network delivers them (only each origin's own sequence is
 * kept), so the rules must not care about that order: LWW by (hlc,
 * origin) for users, enrollments, grants, unlocks, address revocations,
 * repositories and refs, max and OR for token-use marks, union for
 * failures, a set for the push log (ops_merge.c).  The tests open real
 * stores (RocksDB in a fresh directory each), build operations by hand as
 * a peer would send them, apply them in different orders on different
 * stores and compare what is left: the records themselves and the state
 * digest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <rocksdb/c.h>
#include <git2.h>
#include <sodium.h>

#include "buf.h"
#include "clock.h"
#include "config.h"
#include "digest.h"
#include "err.h"
#include "log.h"
#include "oplog.h"
#include "ops.h"
#include "opsig.h"
#include "plheads.h"
#include "pushlog.h"
#include "records.h"
#include "repos.h"
#include "store.h"

#define MAX_NODES 8
/* the epoch of every hand-made operation; any non-zero value will do */
#define EPOCH UINT64_C(0x00e90c0000000001)
/* HLC stamps: milliseconds << 16 | logical */
#define HLC(ms, l) (((uint64_t)(ms) << 16) | (uint64_t)(l))

/* one site: a store, its ops and the config it reads */
struct node {
	char store_dir[128];
	char repo_dir[128];
	char site[16];
	struct config cfg;
	struct store *s;
	struct ops *o;
	bool open;
};

struct fixture {
	char dir[64];
	struct node n[MAX_NODES];
};

/* An operation with room for every kind of body. */
struct top {
	Grantd__V1__Op op;
	Grantd__V1__User user;
	Grantd__V1__Enrollment enroll;
	Grantd__V1__Grant grant;
	Grantd__V1__Mark mark;
	Grantd__V1__Failures fail;
	Grantd__V1__Unlock unlock;
	Grantd__V1__Repo repo;
	uint64_t at[OPS_MAX_FAILURES_KEPT];
	char *keys[2];
};

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] = "test_ops sealing key 0123456789";

static int setup_group(void **state)
{
	if (sodium_init() < 0)
		return -1;
	git_libgit2_init();
	log_init("test_ops", false, LOG_LVL_WARN);
	return 0;
}

static int teardown_group(void **state)
{
	git_libgit2_shutdown();
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/test_ops.XXXXXX",
		 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	*state = f;
	return 0;
}

static void node_close(struct node *n)
{
	if (!n->open)
		return;
	ops_destroy(&n->o);
	store_destroy(&n->s);
	n->open = false;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	for (int i = 0; i < MAX_NODES; i++)
		node_close(&f->n[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

/* Open (or reopen) node i of the fixture. */
static struct node *node_open(struct fixture *f, int i)
{
	struct node *n = &f->n[i];
	bool created = false;

	char dir[sizeof(f->dir)];

	assert_in_range(i, 0, MAX_NODES - 1);
	/* a copy: gcc -O2 -Wrestrict sees n's buffers inside *f */
	memcpy(dir, f->dir, sizeof(dir));
	snprintf(n->store_dir, sizeof(n->store_dir), "%s/store%d", dir, i);
	snprintf(n->repo_dir, sizeof(n->repo_dir), "%s/repos%d", dir, i);
	snprintf(n->site, sizeof(n->site), "node%d", i);
	memset(&n->cfg, 0, sizeof(n->cfg));
	n->cfg.site = n->site;
	n->cfg.repo_dir = n->repo_dir;
	assert_int_equal(store_open(&n->s, &created, n->store_dir, seal_key),
			 0);
	assert_int_equal(ops_open(&n->o, n->s, &n->cfg, created), 0);
	n->open = true;
	return n;
}

/* ---- operations by hand --------------------------------------------------- */

static void stamp(struct top *t, const char *origin, uint64_t seq,
		  uint64_t hlc)
{
	memset(t, 0, sizeof(*t));
	grantd__v1__op__init(&t->op);
	t->op.origin = (char *)origin;
	t->op.epoch = EPOCH, t->op.has_epoch = 1;
	t->op.seq = seq, t->op.has_seq = 1;
	t->op.hlc = hlc, t->op.has_hlc = 1;
}

/* A well-formed public key line whose comment is label, so tests can name
 * keys briefly and still pass ops_check. */
#define TEST_KEY_PREFIX                                                        \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHLAx+6EsJuGELLoK4oqtzjiFQlr/4K" \
	"ExvUYKBZ/LSGg "

static const char *key_of(const char *label)
{
	static char bufs[8][256];
	static int next;
	char *b = bufs[next++ % 8];
	snprintf(b, sizeof(bufs[0]), "%s%s", TEST_KEY_PREFIX, label);
	return b;
}

static Grantd__V1__Op *op_user(struct top *t, const char *origin,
			       uint64_t seq, uint64_t hlc, const char *name,
			       const char *key)
{
	stamp(t, origin, seq, hlc);
	grantd__v1__user__init(&t->user);
	t->user.name = (char *)name;
	t->keys[0] = key ? (char *)key_of(key) : NULL;
	t->user.keys = t->keys;
	t->user.n_keys = key ? 1 : 0;
	t->op.body_case = GRANTD__V1__OP__BODY_USER;
	t->op.user = &t->user;
	return &t->op;
}

static Grantd__V1__Op *op_enroll(struct top *t, const char *origin,
				 uint64_t seq, uint64_t hlc, const char *user,
				 const char *secret, uint64_t id)
{
	stamp(t, origin, seq, hlc);
	grantd__v1__enrollment__init(&t->enroll);
	t->enroll.user = (char *)user;
	t->enroll.kind = GRANTD__V1__OTP_KIND__OTP_TOTP, t->enroll.has_kind = 1;
	t->enroll.secret.data = (uint8_t *)secret;
	t->enroll.secret.len = strlen(secret), t->enroll.has_secret = 1;
	t->enroll.digits = 6, t->enroll.has_digits = 1;
	t->enroll.period = 30, t->enroll.has_period = 1;
	t->enroll.id = id, t->enroll.has_id = 1;
	t->op.body_case = GRANTD__V1__OP__BODY_ENROLL;
	t->op.enroll = &t->enroll;
	return &t->op;
}

static Grantd__V1__Op *op_grant(struct top *t, const char *origin,
				uint64_t seq, uint64_t hlc, const char *user,
				const char *net, int64_t expires, bool revoked)
{
	stamp(t, origin, seq, hlc);
	grantd__v1__grant__init(&t->grant);
	t->grant.user = (char *)user;
	t->grant.net = (char *)net;
	t->grant.session = "";
	t->grant.added = 1700000000, t->grant.has_added = 1;
	t->grant.expires = expires, t->grant.has_expires = 1;
	t->grant.site = (char *)origin;
	t->grant.revoked = revoked, t->grant.has_revoked = 1;
	t->op.body_case = GRANTD__V1__OP__BODY_GRANT;
	t->op.grant = &t->grant;
	return &t->op;
}

static Grantd__V1__Op *op_mark(struct top *t, const char *origin,
			       uint64_t seq, uint64_t hlc, const char *user,
			       uint64_t id, uint64_t next, uint32_t used)
{
	stamp(t, origin, seq, hlc);
	grantd__v1__mark__init(&t->mark);
	t->mark.user = (char *)user;
	t->mark.enroll_id = id, t->mark.has_enroll_id = 1;
	t->mark.next = next, t->mark.has_next = 1;
	t->mark.scratch_used = used, t->mark.has_scratch_used = 1;
	t->op.body_case = GRANTD__V1__OP__BODY_MARK;
	t->op.mark = &t->mark;
	return &t->op;
}

static Grantd__V1__Op *op_fail(struct top *t, const char *origin,
			       uint64_t seq, uint64_t hlc, const char *user,
			       const char *site, const uint64_t *at, size_t n)
{
	stamp(t, origin, seq, hlc);
	grantd__v1__failures__init(&t->fail);
	assert_true(n <= OPS_MAX_FAILURES_KEPT);
	memcpy(t->at, at, n * sizeof(at[0]));
	t->fail.user = (char *)user;
	t->fail.site = (char *)site;
	t->fail.hlc = t->at;
	t->fail.n_hlc = n;
	t->op.body_case = GRANTD__V1__OP__BODY_FAILURE;
	t->op.failure = &t->fail;
	return &t->op;
}

static Grantd__V1__Op *op_unlock(struct top *t, const char *origin,
				 uint64_t seq, uint64_t hlc, const char *user)
{
	stamp(t, origin, seq, hlc);
	grantd__v1__unlock__init(&t->unlock);
	t->unlock.user = (char *)user;
	t->op.body_case = GRANTD__V1__OP__BODY_UNLOCK;
	t->op.unlock = &t->unlock;
	return &t->op;
}

static Grantd__V1__Op *op_repo(struct top *t, const char *origin,
			       uint64_t seq, uint64_t hlc, const char *name,
			       Grantd__V1__RepoMode mode, bool deleted)
{
	stamp(t, origin, seq, hlc);
	grantd__v1__repo__init(&t->repo);
	t->repo.name = (char *)name;
	t->repo.mode = mode, t->repo.has_mode = 1;
	t->repo.deleted = deleted, t->repo.has_deleted = 1;
	t->op.body_case = GRANTD__V1__OP__BODY_REPO;
	t->op.repo = &t->repo;
	return &t->op;
}

/* ---- applying and reading back --------------------------------------------- */

static const char *body_name(const Grantd__V1__Op *op)
{
	switch (op->body_case) {
	case GRANTD__V1__OP__BODY_USER: return "user";
	case GRANTD__V1__OP__BODY_ENROLL: return "enroll";
	case GRANTD__V1__OP__BODY_GRANT: return "grant";
	case GRANTD__V1__OP__BODY_MARK: return "mark";
	case GRANTD__V1__OP__BODY_FAILURE: return "failure";
	case GRANTD__V1__OP__BODY_UNLOCK: return "unlock";
	case GRANTD__V1__OP__BODY_REPO: return "repo";
	default: return "none";
	}
}

/* Apply ops in one batch and commit it; each must be applied. */
static void apply_all(struct node *n, Grantd__V1__Op *const *ops, size_t nops)
{
	struct store_batch *b;
	bool applied;

	store_batch_new(&b, n->s);
	for (size_t i = 0; i < nops; i++) {
		int rc = ops_apply(n->o, b, ops[i], &applied);
		if (rc != 0 || !applied)
			fail_msg("%s: %s op origin=%s seq=%llu: rc %d applied %d",
				 n->site, body_name(ops[i]), ops[i]->origin,
				 (unsigned long long)ops[i]->seq, rc, applied);
	}
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
}

static void apply1(struct node *n, Grantd__V1__Op *op)
{
	apply_all(n, &op, 1);
}

static void *get_rec(struct node *n, enum store_cf cf, const void *key,
		     size_t klen, const ProtobufCMessageDescriptor *d)
{
	struct buf v = BUF_INIT;
	void *m = NULL;

	if (store_get(n->s, NULL, cf, key, klen, &v) == 0) {
		m = protobuf_c_message_unpack(d, NULL, v.len,
					      (const uint8_t *)v.p);
		assert_non_null(m);
	}
	buf_free(&v);
	return m;
}

static Grantd__V1__Grant *get_grant(struct node *n, const char *user,
				    const char *net)
{
	struct buf k = BUF_INIT;
	records_key_grant(&k, user, net, "");
	void *m = get_rec(n, CF_GRANTS, k.p, k.len,
			  &grantd__v1__grant__descriptor);
	buf_free(&k);
	return m;
}

static Grantd__V1__Mark *get_mark(struct node *n, const char *user,
				  uint64_t id)
{
	struct buf k = BUF_INIT;
	records_key_mark(&k, user, id);
	void *m = get_rec(n, CF_MARKS, k.p, k.len,
			  &grantd__v1__mark__descriptor);
	buf_free(&k);
	return m;
}

static Grantd__V1__Failures *get_fail(struct node *n, const char *user,
				      const char *site)
{
	struct buf k = BUF_INIT;
	records_key_fail(&k, user, site);
	void *m = get_rec(n, CF_FAILS, k.p, k.len,
			  &grantd__v1__failures__descriptor);
	buf_free(&k);
	return m;
}

#define free_rec(m) protobuf_c_message_free_unpacked(&(m)->base, NULL)

/* The replicated state families these tests compare record by record;
 * not all the digest covers: CF_REFS and CF_REVOKES are in it too (see
 * snap_cfs in node/peers/repl.c). */
static const enum store_cf state_cfs[] = { CF_USERS,  CF_ENROLL, CF_GRANTS,
					   CF_MARKS,  CF_FAILS,  CF_UNLOCK,
					   CF_REPOS,  CF_REFS,   CF_REVOKES,
					   CF_PUSHLOG };

/* Every state record as cf, key, value, for comparing two sites; and the
 * digest recomputed from them. */
static void dump_state(struct node *n, struct buf *out,
		       uint8_t digest[DIGEST_LEN])
{
	struct buf v = BUF_INIT;

	buf_reset(out);
	memset(digest, 0, DIGEST_LEN);
	for (size_t c = 0; c < GD_ARRAY_SIZE(state_cfs); c++) {
		struct store_iter *it;
		const char *key;
		size_t klen;
		int rc;

		assert_int_equal(store_iter_new(&it, n->s, NULL, state_cfs[c],
						"", 0), 0);
		while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
			buf_printf(out, "%d %zu %zu|", (int)state_cfs[c], klen,
				   v.len);
			buf_add(out, key, klen);
			buf_add(out, v.p, v.len);
			digest_toggle(digest, state_cfs[c], key, klen, v.p,
				      v.len);
		}
		assert_int_equal(rc, 0);
		store_iter_free(&it);
	}
	buf_free(&v);
}

/* The share of family cf in o's live digest (ops_verify's live_fam). */
static const uint8_t *fam_digest(struct ops *o, enum store_cf cf)
{
	static struct ops_verify v[4];
	static int next;
	struct ops_verify *w = &v[next++ % 4];

	assert_int_equal(ops_verify(o, w), 0);
	return w->live_fam[cf];
}

/* How many bytes of repository names the applies in b noted so far (a
 * save point records it), without taking them. */
static size_t repos_noted(struct ops *o, struct store_batch *b)
{
	struct ops_save probe;

	ops_savepoint(o, b, &probe);
	ops_release(o, b);
	return probe.repos_len;
}

/* The in-memory digest, the committed one and the one recomputed from the
 * records must all agree. */
static void check_digest(struct node *n)
{
	struct buf st = BUF_INIT, v = BUF_INIT;
	uint8_t d[DIGEST_LEN];

	dump_state(n, &st, d);
	assert_memory_equal(d, ops_digest(n->o), DIGEST_LEN);
	if (st.len) {
		assert_int_equal(store_get(n->s, NULL, CF_META, "digest", 6,
					   &v), 0);
		assert_int_equal(v.len, DIGEST_LEN);
		assert_memory_equal(v.p, ops_digest(n->o), DIGEST_LEN);
	}
	buf_free(&st);
	buf_free(&v);
}

/* Same records and the same digest at both sites. */
static void assert_same_state(struct node *a, struct node *b)
{
	struct buf sa = BUF_INIT, sb = BUF_INIT;
	uint8_t da[DIGEST_LEN], db[DIGEST_LEN];

	check_digest(a);
	check_digest(b);
	dump_state(a, &sa, da);
	dump_state(b, &sb, db);
	if (sa.len != sb.len || memcmp(sa.p, sb.p, sa.len))
		fail_msg("%s and %s hold different records", a->site,
			 b->site);
	if (memcmp(ops_digest(a->o), ops_digest(b->o), DIGEST_LEN)) {
		char ha[2 * DIGEST_LEN + 1], hb[2 * DIGEST_LEN + 1];
		digest_hex(ha, ops_digest(a->o));
		digest_hex(hb, ops_digest(b->o));
		fail_msg("digest %s=%s %s=%s", a->site, ha, b->site, hb);
	}
	buf_free(&sa);
	buf_free(&sb);
}

static bool digest_zero(const uint8_t d[DIGEST_LEN])
{
	static const uint8_t z[DIGEST_LEN];
	return !memcmp(d, z, DIGEST_LEN);
}

/* ---- opening ------------------------------------------------------------- */

static void test_open(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct top t;

	assert_string_equal(ops_site(n->o), "node0");
	assert_int_not_equal(ops_epoch(n->o), 0);
	assert_int_equal(ops_seq(n->o), 0);
	assert_true(digest_zero(ops_digest(n->o)));

	apply1(n, op_user(&t, "portland", 1, HLC(1000, 0), "alice", "k1"));
	assert_false(digest_zero(ops_digest(n->o)));
	uint8_t d[DIGEST_LEN];
	memcpy(d, ops_digest(n->o), DIGEST_LEN);
	uint64_t epoch = ops_epoch(n->o);

	/* reopened: the digest and the vector are kept, the epoch is new */
	node_close(n);
	n = node_open(f, 0);
	assert_memory_equal(ops_digest(n->o), d, DIGEST_LEN);
	assert_int_not_equal(ops_epoch(n->o), epoch);
	assert_int_equal(ops_vv_get(n->o, NULL, "portland", EPOCH), 1);
	check_digest(n);
}

/* ---- LWW ----------------------------------------------------------------- */

static void test_lww_grant_later_hlc_wins(void **state)
{
	struct fixture *f = *state;
	struct node *n0 = node_open(f, 0), *n1 = node_open(f, 1),
		    *n2 = node_open(f, 2);
	struct top a, b;
	/* the later stamp comes from the smaller origin name: hlc decides */
	Grantd__V1__Op *newer = op_grant(&a, "aaa", 1, HLC(2000, 0), "alice",
					 "192.0.2.7", 1700086400, false);
	Grantd__V1__Op *older = op_grant(&b, "zzz", 1, HLC(1000, 5), "alice",
					 "192.0.2.7", 1700003600, true);

	apply1(n0, newer);
	apply1(n0, older);
	apply1(n1, older);
	apply1(n1, newer);
	Grantd__V1__Op *both[] = { older, newer };
	apply_all(n2, both, 2); /* one batch: reads see its own writes */

	for (int i = 0; i < 3; i++) {
		Grantd__V1__Grant *g = get_grant(&f->n[i], "alice",
						 "192.0.2.7");
		assert_non_null(g);
		if (g->expires != 1700086400 || g->revoked)
			fail_msg("%s: expires %lld revoked %d, want the later "
				 "stamp's grant", f->n[i].site,
				 (long long)g->expires, g->revoked);
		assert_int_equal(g->hlc, HLC(2000, 0));
		assert_string_equal(g->origin, "aaa");
		assert_string_equal(g->site, "aaa");
		free_rec(g);
	}
	assert_same_state(n0, n1);
	assert_same_state(n0, n2);

	/* a revoke with a still later stamp wins everywhere */
	struct top c;
	Grantd__V1__Op *revoke = op_grant(&c, "zzz", 2, HLC(3000, 0), "alice",
					  "192.0.2.7", 1700086400, true);
	apply1(n0, revoke);
	apply1(n1, revoke);
	Grantd__V1__Grant *g = get_grant(n1, "alice", "192.0.2.7");
	assert_true(g->revoked);
	assert_string_equal(g->origin, "zzz");
	free_rec(g);
	assert_same_state(n0, n1);
}

static void test_lww_equal_hlc_greater_origin_wins(void **state)
{
	struct fixture *f = *state;
	struct node *n0 = node_open(f, 0), *n1 = node_open(f, 1);
	struct top a, b, c, d;
	const uint64_t h = HLC(5000, 3);

	Grantd__V1__Op *pa = op_user(&a, "paloalto", 1, h, "alice", "key-pa");
	Grantd__V1__Op *po = op_user(&b, "portland", 1, h, "alice", "key-po");
	Grantd__V1__Op *ga = op_grant(&c, "paloalto", 2, h, "bob", "10.0.0.0/8",
				      111, false);
	Grantd__V1__Op *go = op_grant(&d, "portland", 2, h, "bob", "10.0.0.0/8",
				      222, false);

	Grantd__V1__Op *first[] = { pa, po, ga, go };
	Grantd__V1__Op *second[] = { po, pa, go, ga };
	for (int i = 0; i < 4; i++) {
		apply1(n0, first[i]);
		apply1(n1, second[i]);
	}
	for (int i = 0; i < 2; i++) {
		Grantd__V1__User *u = get_rec(&f->n[i], CF_USERS, "alice", 5,
					      &grantd__v1__user__descriptor);
		assert_non_null(u);
		assert_string_equal(u->origin, "portland");
		assert_int_equal(u->hlc, h);
		assert_int_equal(u->n_keys, 1);
		assert_string_equal(u->keys[0], key_of("key-po"));
		free_rec(u);
		Grantd__V1__Grant *g = get_grant(&f->n[i], "bob", "10.0.0.0/8");
		assert_int_equal(g->expires, 222);
		assert_string_equal(g->origin, "portland");
		free_rec(g);
	}
	assert_same_state(n0, n1);
}

static void test_lww_users_enroll_unlock(void **state)
{
	struct fixture *f = *state;
	struct node *n0 = node_open(f, 0), *n1 = node_open(f, 1);
	struct top t[6];
	Grantd__V1__Op *a[] = {
		op_user(&t[0], "siteb", 1, HLC(100, 0), "carol", "old-key"),
		op_enroll(&t[1], "siteb", 2, HLC(300, 0), "carol",
			  "secret-new-1234567890", 300),
		op_unlock(&t[2], "siteb", 3, HLC(120, 0), "carol"),
	};
	Grantd__V1__Op *b[] = {
		op_user(&t[3], "sitea", 1, HLC(200, 0), "carol", "new-key"),
		op_enroll(&t[4], "sitea", 2, HLC(250, 0), "carol",
			  "secret-old-1234567890", 250),
		op_unlock(&t[5], "sitea", 3, HLC(150, 0), "carol"),
	};

	/* n0 gets siteb's stream first, n1 sitea's */
	apply_all(n0, a, 3);
	apply_all(n0, b, 3);
	apply_all(n1, b, 3);
	apply_all(n1, a, 3);

	for (int i = 0; i < 2; i++) {
		struct node *n = &f->n[i];
		Grantd__V1__User *u = get_rec(n, CF_USERS, "carol", 5,
					      &grantd__v1__user__descriptor);
		assert_string_equal(u->keys[0], key_of("new-key"));
		assert_string_equal(u->origin, "sitea");
		free_rec(u);
		/* read through store_get, which opens the sealed value: this
		 * checks the enrollment arrived, not how it is kept at rest
		 * (test_enroll.sh and test_backup.sh look at the files) */
		Grantd__V1__Enrollment *e = get_rec(
			n, CF_ENROLL, "carol", 5,
			&grantd__v1__enrollment__descriptor);
		assert_int_equal(e->id, 300);
		assert_int_equal(e->secret.len, strlen("secret-new-1234567890"));
		assert_memory_equal(e->secret.data, "secret-new-1234567890",
				    e->secret.len);
		assert_string_equal(e->origin, "siteb");
		free_rec(e);
		Grantd__V1__Unlock *ul = get_rec(n, CF_UNLOCK, "carol", 5,
						 &grantd__v1__unlock__descriptor);
		assert_int_equal(ul->hlc, HLC(150, 0));
		assert_string_equal(ul->origin, "sitea");
		free_rec(ul);
	}
	assert_same_state(n0, n1);
}

static void test_lww_repo(void **state)
{
	struct fixture *f = *state;
	struct node *n0 = node_open(f, 0), *n1 = node_open(f, 1);
	struct top t[3];
	struct stat st;
	char path[256];

	Grantd__V1__Op *add = op_repo(&t[0], "sitea", 1, HLC(100, 0),
				      "pub/linux", GRANTD__V1__REPO_MODE__MODE_OPT_IN,
				      false);
	Grantd__V1__Op *req = op_repo(&t[1], "siteb", 1, HLC(200, 0),
				      "pub/linux",
				      GRANTD__V1__REPO_MODE__MODE_REQUIRED,
				      false);
	Grantd__V1__Op *del = op_repo(&t[2], "sitea", 2, HLC(150, 0),
				      "pub/linux", GRANTD__V1__REPO_MODE__MODE_OFF,
				      true);

	Grantd__V1__Op *o0[] = { add, del, req };
	Grantd__V1__Op *o1[] = { req, add, del };
	for (int i = 0; i < 3; i++) {
		apply1(n0, o0[i]);
		apply1(n1, o1[i]);
	}
	for (int i = 0; i < 2; i++) {
		Grantd__V1__Repo *r = get_rec(&f->n[i], CF_REPOS, "pub/linux",
					      9, &grantd__v1__repo__descriptor);
		assert_non_null(r);
		assert_int_equal(r->mode, GRANTD__V1__REPO_MODE__MODE_REQUIRED);
		assert_false(r->deleted);
		assert_int_equal(r->hlc, HLC(200, 0));
		free_rec(r);
		/* the winner's repository is made after the commit, from
		 * what the applies noted */
		struct buf failed = BUF_INIT, names = BUF_INIT;
		ops_take_repos(f->n[i].o, &names);
		assert_true(names.len > 0);
		assert_int_equal(repos_follow(f->n[i].s, f->n[i].repo_dir,
					      NULL, true, &names, &failed), 0);
		assert_int_equal(names.len, 0);
		buf_free(&names);
		assert_int_equal(failed.len, 0);
		snprintf(path, sizeof(path), "%s/pub/linux.git/HEAD",
			 f->n[i].repo_dir);
		if (stat(path, &st) != 0)
			fail_msg("%s: no %s", f->n[i].site, path);
	}
	assert_same_state(n0, n1);
}

/* A repository whose directory cannot be made (here: repo_dir is a file)
 * must not leave its record and digest change half-applied in a peer
 * batch that is then never committed, while another batch commits the
 * digest (review-fa65238-security 2, path 1). */
static void test_apply_failure_keeps_digest(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct store_batch *peer;
	struct buf failed = BUF_INIT;
	struct top t[2];
	struct stat st;
	char path[256];
	bool applied = false;
	FILE *fp;

	fp = fopen(n->repo_dir, "w"); /* mkdir under it: ENOTDIR */
	assert_non_null(fp);
	fclose(fp);

	/* the peer batch, as repl_handle builds it: committed when an
	 * operation was applied */
	store_batch_new(&peer, n->s);
	int rc = ops_apply(n->o, peer,
			   op_repo(&t[0], "sitea", 1, HLC(100, 0), "pub/a",
				   GRANTD__V1__REPO_MODE__MODE_REQUIRED, false),
			   &applied);
	if (applied)
		assert_int_equal(ops_commit(n->o, peer, false), 0);
	/* a control batch commits the digest... */
	apply1(n, op_user(&t[1], "siteb", 1, HLC(101, 0), "kim", "k"));
	/* ...and the node dies before anything else */
	store_batch_free(&peer);
	check_digest(n);
	assert_int_equal(rc, 0);
	assert_true(applied);

	/* the record is in; its directory is made after the commit, and
	 * tried again while it cannot be */
	Grantd__V1__Repo *r = get_rec(n, CF_REPOS, "pub/a", 5,
				      &grantd__v1__repo__descriptor);
	assert_non_null(r);
	free_rec(r);
	struct buf names = BUF_INIT;
	ops_take_repos(n->o, &names);
	assert_int_equal(repos_follow(n->s, n->repo_dir, "exec true", true,
				      &names, &failed),
			 GD_EIO);
	assert_int_equal(names.len, 0);
	buf_free(&names);
	assert_string_equal(failed.p, "pub/a");
	assert_int_equal(unlink(n->repo_dir), 0);
	struct buf again = failed;
	failed = (struct buf)BUF_INIT;
	assert_int_equal(repos_follow(n->s, n->repo_dir, "exec true", true,
				      &again, &failed), 0);
	assert_int_equal(failed.len, 0);
	snprintf(path, sizeof(path), "%s/pub/a.git/hooks/post-receive",
		 n->repo_dir);
	if (stat(path, &st) != 0)
		fail_msg("no %s", path);
	buf_free(&again);
	buf_free(&failed);
}

/* Save points nest; a rollback takes back records, digest, vector and
 * the touched lists together. */
static void test_savepoint(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0), *m = node_open(f, 1);
	struct store_batch *b;
	struct ops_save outer, inner;
	uint8_t d0[DIGEST_LEN];
	struct top t[4];
	bool applied;

	apply1(n, op_user(&t[0], "sitea", 1, HLC(100, 0), "lee", "k"));
	memcpy(d0, ops_digest(n->o), DIGEST_LEN);

	store_batch_new(&b, n->s);
	ops_savepoint(n->o, b, &outer);
	assert_int_equal(ops_apply(n->o, b,
				   op_grant(&t[1], "sitea", 2, HLC(101, 0),
					    "lee", "192.0.2.9", 1800000000,
					    false), &applied), 0);
	assert_true(applied);
	ops_savepoint(n->o, b, &inner);
	assert_int_equal(ops_apply(n->o, b,
				   op_repo(&t[2], "sitea", 3, HLC(102, 0),
					   "lee-repo",
					   GRANTD__V1__REPO_MODE__MODE_OFF,
					   false), &applied), 0);
	assert_int_equal(ops_vv_get(n->o, b, "sitea", EPOCH), 3);
	assert_true(repos_noted(n->o, b) > 0);

	/* the inner point: the repository goes, the grant stays */
	assert_int_equal(ops_rollback(n->o, b, &inner), 0);
	assert_int_equal(ops_vv_get(n->o, b, "sitea", EPOCH), 2);
	assert_int_equal(repos_noted(n->o, b), 0);
	struct buf v = BUF_INIT;
	assert_int_equal(store_get(n->s, b, CF_REPOS, "lee-repo", 8, &v),
			 GD_ENOTFOUND);
	struct buf k = BUF_INIT;
	records_key_grant(&k, "lee", "192.0.2.9", "");
	assert_int_equal(store_get(n->s, b, CF_GRANTS, k.p, k.len, &v), 0);

	/* the outer one: the grant goes too, the digest is as before */
	assert_int_equal(ops_rollback(n->o, b, &outer), 0);
	assert_int_equal(store_get(n->s, b, CF_GRANTS, k.p, k.len, &v),
			 GD_ENOTFOUND);
	assert_int_equal(ops_vv_get(n->o, b, "sitea", EPOCH), 1);
	assert_memory_equal(ops_digest(n->o), d0, DIGEST_LEN);
	assert_int_equal(store_batch_rollback(b), GD_EINVAL); /* none left */

	/* released points keep their writes: all three in, one commit */
	ops_savepoint(n->o, b, &outer);
	for (int i = 1; i <= 2; i++) {
		assert_int_equal(ops_apply(n->o, b, &t[i].op, &applied), 0);
		assert_true(applied);
	}
	ops_release(n->o, b);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);
	apply_all(m, (Grantd__V1__Op *[]){ &t[0].op, &t[1].op, &t[2].op }, 3);
	assert_same_state(n, m);
	buf_free(&k);
	buf_free(&v);
}

/* The vector's changes reach the batch once, at ops_commit: a rollback
 * inside a batch keeps what earlier operations of the batch changed, and
 * the commit stores the vector as memory holds it. */
static void test_vv_deferred(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct store_batch *b;
	struct ops_save sp;
	struct buf k = BUF_INIT, v = BUF_INIT;
	struct top t[3];
	bool applied;

	store_batch_new(&b, n->s);
	assert_int_equal(ops_apply(n->o, b,
				   op_user(&t[0], "sitea", 1, HLC(100, 0),
					   "lee", "k"), &applied), 0);
	assert_true(applied);
	ops_savepoint(n->o, b, &sp);
	assert_int_equal(ops_apply(n->o, b,
				   op_user(&t[1], "sitea", 2, HLC(101, 0),
					   "max", "k"), &applied), 0);
	assert_int_equal(ops_apply(n->o, b,
				   op_user(&t[2], "siteb", 1, HLC(102, 0),
					   "ned", "k"), &applied), 0);
	assert_int_equal(ops_vv_get(n->o, b, "sitea", EPOCH), 2);
	assert_int_equal(ops_rollback(n->o, b, &sp), 0);
	assert_int_equal(ops_vv_get(n->o, b, "sitea", EPOCH), 1);
	assert_int_equal(ops_vv_get(n->o, b, "siteb", EPOCH), 0);
	assert_int_equal(ops_commit(n->o, b, false), 0);
	store_batch_free(&b);

	records_key_vv(&k, "sitea", EPOCH);
	assert_int_equal(store_get(n->s, NULL, CF_VV, k.p, k.len, &v), 0);
	assert_int_equal(v.len, 8);
	assert_int_equal(store_get_be64(v.p), 1);
	records_key_vv(&k, "siteb", EPOCH);
	assert_int_equal(store_get(n->s, NULL, CF_VV, k.p, k.len, &v),
			 GD_ENOTFOUND);
	assert_int_equal(ops_reload(n->o), 0);
	assert_int_equal(ops_vv_get(n->o, NULL, "sitea", EPOCH), 1);
	/* the operation rolled back comes again and goes in */
	apply1(n, &t[1].op);
	assert_int_equal(ops_vv_get(n->o, NULL, "sitea", EPOCH), 2);
	buf_free(&k);
	buf_free(&v);
}

/* ops_verify recomputes the digest from the records; a record written
 * behind the digest's back is found, with its family, and a reopened
 * store takes the records' digest. */
static void test_verify(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct ops_verify v;
	struct store_batch *b;
	struct top t[3];

	apply1(n, op_user(&t[0], "sitea", 1, HLC(100, 0), "mia", "k"));
	apply1(n, op_grant(&t[1], "sitea", 2, HLC(101, 0), "mia",
			   "192.0.2.7", 1800000000, false));
	assert_int_equal(ops_verify(n->o, &v), 0);
	assert_true(v.equal);
	assert_memory_equal(v.live, v.disk, DIGEST_LEN);
	assert_memory_equal(v.stored, v.disk, DIGEST_LEN);
	assert_int_equal(v.records[CF_USERS], 1);
	assert_int_equal(v.records[CF_GRANTS], 1);
	assert_true(v.covered[CF_REFS] && v.covered[CF_REVOKES]);
	assert_false(v.covered[CF_OPLOG] || v.covered[CF_META]);

	/* a record the digest never saw */
	store_batch_new(&b, n->s);
	store_put(b, CF_GRANTS, "mia\0192.0.2.8\0", 14, "x", 1);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	assert_int_equal(ops_verify(n->o, &v), 0);
	assert_false(v.equal);
	assert_int_equal(v.records[CF_GRANTS], 2);
	for (int cf = 0; cf < CF__COUNT; cf++)
		if ((memcmp(v.live_fam[cf], v.disk_fam[cf], DIGEST_LEN) != 0) !=
		    (cf == CF_GRANTS))
			fail_msg("family %s: differs %d", store_cf_name(cf),
				 memcmp(v.live_fam[cf], v.disk_fam[cf],
					DIGEST_LEN) != 0);

	/* reopened: the records win */
	node_close(n);
	n = node_open(f, 0);
	assert_int_equal(ops_verify(n->o, &v), 0);
	assert_true(v.equal);
	check_digest(n);
}

/* ---- marks and failures ------------------------------------------------- */

static void test_mark_merge(void **state)
{
	struct fixture *f = *state;
	struct top t[4];
	/* one mark from each of three sites: any order is allowed */
	Grantd__V1__Op *m[] = {
		op_mark(&t[0], "sitea", 1, HLC(300, 0), "alice", 7, 10, 0x1),
		op_mark(&t[1], "siteb", 1, HLC(900, 0), "alice", 7, 5, 0x4),
		op_mark(&t[2], "sitec", 1, HLC(100, 0), "alice", 7, 12, 0x0),
	};
	static const int perm[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
					{ 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };

	for (int p = 0; p < 6; p++) {
		struct node *n = node_open(f, p);
		for (int i = 0; i < 3; i++)
			apply1(n, m[perm[p][i]]);
		Grantd__V1__Mark *r = get_mark(n, "alice", 7);
		assert_non_null(r);
		if (r->next != 12 || r->scratch_used != 0x5)
			fail_msg("order %d%d%d: next %llu used %#x, want 12 0x5",
				 perm[p][0], perm[p][1], perm[p][2],
				 (unsigned long long)r->next, r->scratch_used);
		assert_string_equal(r->user, "alice");
		assert_int_equal(r->enroll_id, 7);
		free_rec(r);
		if (p)
			assert_same_state(&f->n[0], n);
	}

	/* a mark that is behind in both changes nothing, not even the digest */
	struct node *n = &f->n[0];
	uint8_t d[DIGEST_LEN];
	memcpy(d, ops_digest(n->o), DIGEST_LEN);
	apply1(n, op_mark(&t[3], "sitea", 2, HLC(5000, 0), "alice", 7, 11,
			  0x1));
	assert_memory_equal(ops_digest(n->o), d, DIGEST_LEN);
	Grantd__V1__Mark *r = get_mark(n, "alice", 7);
	assert_int_equal(r->next, 12);
	assert_int_equal(r->scratch_used, 0x5);
	free_rec(r);
	/* another enrollment of the same user is another mark */
	assert_null(get_mark(n, "alice", 8));
	check_digest(n);
}

/* Attempts are named by their stamps: the same attempt arriving twice
 * (in two records) is one, attempts of one millisecond are all kept. */
static void test_failure_merge(void **state)
{
	struct fixture *f = *state;
	struct top t[3];
	static const uint64_t a1[] = { HLC(3000, 0), HLC(1000, 0) };
	static const uint64_t a2[] = { HLC(2000, 0), HLC(3000, 0) };
	static const uint64_t a3[] = { HLC(3000, 2), HLC(3000, 1) };
	static const uint64_t want[] = { HLC(1000, 0), HLC(2000, 0),
					 HLC(3000, 0), HLC(3000, 1),
					 HLC(3000, 2) };
	Grantd__V1__Op *m[] = {
		op_fail(&t[0], "sitea", 1, HLC(1, 0), "alice", "sitea", a1, 2),
		op_fail(&t[1], "siteb", 1, HLC(2, 0), "alice", "sitea", a2, 2),
		op_fail(&t[2], "sitec", 1, HLC(3, 0), "alice", "sitea", a3, 2),
	};
	static const int perm[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
					{ 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };

	for (int p = 0; p < 6; p++) {
		struct node *n = node_open(f, p);
		for (int i = 0; i < 3; i++)
			apply1(n, m[perm[p][i]]);
		Grantd__V1__Failures *r = get_fail(n, "alice", "sitea");
		assert_non_null(r);
		assert_string_equal(r->user, "alice");
		assert_string_equal(r->site, "sitea");
		assert_int_equal(r->n_hlc, GD_ARRAY_SIZE(want));
		for (size_t i = 0; i < GD_ARRAY_SIZE(want); i++)
			if (r->hlc[i] != want[i])
				fail_msg("order %d%d%d: hlc[%zu] = %llx, "
					 "want %llx", perm[p][0], perm[p][1],
					 perm[p][2], i,
					 (unsigned long long)r->hlc[i],
					 (unsigned long long)want[i]);
		free_rec(r);
		/* other (user, site) pairs are untouched */
		assert_null(get_fail(n, "alice", "siteb"));
		if (p)
			assert_same_state(&f->n[0], n);
	}
}

/* Many attempts in one millisecond, each its own operation as control.c
 * makes them, each delivered twice: every one counts, none twice. */
static void test_failure_same_ms(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0), *m = node_open(f, 1);
	static struct top t[40];
	uint64_t at[40];

	for (int i = 0; i < 40; i++) {
		at[i] = HLC(7000, i);
		op_fail(&t[i], "sitea", (uint64_t)i + 1, at[i], "gus", "sitea",
			&at[i], 1);
	}
	/* each site gets every attempt twice: alone, and in one record of
	 * them all (as a state transfer or a second path would bring it),
	 * the two sites in opposite orders */
	static struct top all;
	op_fail(&all, "siteb", 1, HLC(9000, 0), "gus", "sitea", at, 40);
	for (int i = 0; i < 40; i++)
		apply1(n, &t[i].op);
	apply1(n, &all.op);
	apply1(m, &all.op);
	for (int i = 0; i < 40; i++)
		apply1(m, &t[i].op);
	Grantd__V1__Failures *r = get_fail(n, "gus", "sitea");
	assert_int_equal(r->n_hlc, 40);
	for (int i = 0; i < 40; i++)
		assert_int_equal(r->hlc[i], HLC(7000, i));
	free_rec(r);
	assert_same_state(n, m);
}

static void test_failure_bound(void **state)
{
	struct fixture *f = *state;
	struct node *n0 = node_open(f, 0), *n1 = node_open(f, 1);
	uint64_t lo[OPS_MAX_FAILURES_KEPT], hi[OPS_MAX_FAILURES_KEPT];
	static struct top t[2];

	/* two full sets: the newest OPS_MAX_FAILURES_KEPT are kept, in
	 * either order */
	for (int i = 0; i < OPS_MAX_FAILURES_KEPT; i++) {
		lo[i] = HLC(1000, 2 * i);     /* 1000.0, 1000.2, ... */
		hi[i] = HLC(1000, 2 * i + 1); /* interleaved with lo */
	}
	Grantd__V1__Op *x = op_fail(&t[0], "sitea", 1, HLC(1, 0), "dave",
				    "sitea", lo, OPS_MAX_FAILURES_KEPT);
	Grantd__V1__Op *y = op_fail(&t[1], "siteb", 1, HLC(2, 0), "dave",
				    "sitea", hi, OPS_MAX_FAILURES_KEPT);
	apply1(n0, x);
	apply1(n0, y);
	apply1(n1, y);
	apply1(n1, x);
	Grantd__V1__Failures *r = get_fail(n0, "dave", "sitea");
	assert_int_equal(r->n_hlc, OPS_MAX_FAILURES_KEPT);
	for (int i = 0; i < OPS_MAX_FAILURES_KEPT; i++)
		assert_int_equal(r->hlc[i],
				 HLC(1000, OPS_MAX_FAILURES_KEPT + i));
	free_rec(r);
	assert_same_state(n0, n1);
}

/* ---- idempotence and gaps -------------------------------------------------- */

static void test_idempotent(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0), *m = node_open(f, 1);
	struct store_batch *b;
	struct buf before = BUF_INIT, after = BUF_INIT;
	uint8_t d[DIGEST_LEN], dd[DIGEST_LEN];
	struct top t[8];
	bool applied = true;
	static const uint64_t at[] = { 42 };
	Grantd__V1__Op *ops[] = {
		op_user(&t[0], "sitea", 1, HLC(10, 0), "erin", "k"),
		op_grant(&t[1], "sitea", 2, HLC(11, 0), "erin", "192.0.2.1",
			 1800000000, false),
		op_mark(&t[2], "sitea", 3, HLC(12, 0), "erin", 1, 9, 0x2),
		op_fail(&t[3], "sitea", 4, HLC(13, 0), "erin", "sitea", at, 1),
		op_unlock(&t[4], "sitea", 5, HLC(14, 0), "erin"),
		op_repo(&t[5], "sitea", 6, HLC(15, 0), "erin-repo",
			GRANTD__V1__REPO_MODE__MODE_OPT_IN, false),
		op_enroll(&t[6], "sitea", 7, HLC(16, 0), "erin",
			  "0123456789abcdefghij", 16),
	};
	const size_t nops = GD_ARRAY_SIZE(ops);

	apply_all(n, ops, nops);
	apply_all(m, ops, nops);
	assert_int_equal(ops_vv_get(n->o, NULL, "sitea", EPOCH), nops);
	dump_state(n, &before, d);
	memcpy(dd, ops_digest(n->o), DIGEST_LEN);

	/* each one again, in its own batch: skipped, nothing written */
	for (size_t i = 0; i < nops; i++) {
		store_batch_new(&b, n->s);
		assert_int_equal(ops_apply(n->o, b, ops[i], &applied), 0);
		if (applied)
			fail_msg("%s op seq %zu applied twice",
				 body_name(ops[i]), i + 1);
		assert_int_equal(store_batch_count(b), 0);
		assert_int_equal(ops_commit(n->o, b, false), 0);
		store_batch_free(&b);
	}
	/* and all of them again in one batch */
	store_batch_new(&b, n->s);
	for (size_t i = 0; i < nops; i++) {
		assert_int_equal(ops_apply(n->o, b, ops[nops - 1 - i],
					   &applied), 0);
		assert_false(applied);
	}
	assert_int_equal(store_batch_count(b), 0);
	store_batch_free(&b);

	dump_state(n, &after, d);
	assert_int_equal(before.len, after.len);
	assert_memory_equal(before.p, after.p, before.len);
	assert_memory_equal(ops_digest(n->o), dd, DIGEST_LEN);
	assert_int_equal(ops_vv_get(n->o, NULL, "sitea", EPOCH), nops);
	assert_same_state(n, m);

	/* twice within one batch: the second sees the first's vector */
	struct node *p = node_open(f, 2);
	store_batch_new(&b, p->s);
	for (size_t i = 0; i < nops; i++) {
		assert_int_equal(ops_apply(p->o, b, ops[i], &applied), 0);
		assert_true(applied);
		assert_int_equal(ops_apply(p->o, b, ops[i], &applied), 0);
		assert_false(applied);
	}
	assert_int_equal(ops_vv_get(p->o, b, "sitea", EPOCH), nops);
	assert_int_equal(ops_commit(p->o, b, true), 0);
	store_batch_free(&b);
	assert_same_state(n, p);

	buf_free(&before);
	buf_free(&after);
}

static void test_oplog(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct top t[2];
	struct buf k = BUF_INIT, v = BUF_INIT;
	uint8_t be[8];

	apply1(n, op_user(&t[0], "sitea", 1, HLC(200, 0), "frank", "k2"));
	/* an operation that loses its LWW merge is still applied and
	 * logged: the vector moves on, the record does not */
	apply1(n, op_user(&t[1], "siteb", 1, HLC(100, 0), "frank", "k1"));
	assert_int_equal(ops_vv_get(n->o, NULL, "siteb", EPOCH), 1);
	Grantd__V1__User *u = get_rec(n, CF_USERS, "frank", 5,
				      &grantd__v1__user__descriptor);
	assert_string_equal(u->keys[0], key_of("k2"));
	free_rec(u);

	buf_add(&k, "siteb", 6);
	store_be64(be, EPOCH);
	buf_add(&k, be, 8);
	store_be64(be, 1);
	buf_add(&k, be, 8);
	assert_int_equal(store_get(n->s, NULL, CF_OPLOG, k.p, k.len, &v), 0);
	Grantd__V1__Op *op = grantd__v1__op__unpack(NULL, v.len,
						    (const uint8_t *)v.p);
	assert_non_null(op);
	assert_string_equal(op->origin, "siteb");
	assert_int_equal(op->seq, 1);
	assert_int_equal(op->hlc, HLC(100, 0));
	assert_int_equal(op->body_case, GRANTD__V1__OP__BODY_USER);
	assert_string_equal(op->user->keys[0], key_of("k1"));
	grantd__v1__op__free_unpacked(op, NULL);
	buf_free(&k);
	buf_free(&v);
}

/* Truncating the operation log leaves nothing for later scans to step
 * over: 3,000 entries cut, then the next truncation (and a range served
 * from the log) reads the live entries only.  Key-by-key deletes left a
 * tombstone each, which every later scan skipped one by one (seconds on
 * the writer thread for a store that had cut millions). */
#define TRUNC_N 3000
static void test_truncate_log(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct top *t = calloc(TRUNC_N + 1, sizeof(*t));
	Grantd__V1__Op **ops = calloc(TRUNC_N, sizeof(*ops));
	struct buf k = BUF_INIT, v = BUF_INIT;
	rocksdb_perfcontext_t *pc;
	uint8_t be[8];
	char name[16];

	assert_non_null(t);
	assert_non_null(ops);
	for (int i = 0; i < TRUNC_N; i++) {
		snprintf(name, sizeof(name), "u%d", i);
		ops[i] = op_user(&t[i], "sitea", (uint64_t)i + 1,
				 HLC(100 + i, 0), strdup(name), "k1");
	}
	apply_all(n, ops, TRUNC_N);
	assert_int_equal(ops_truncate_log(n->o, 10000, 100000), TRUNC_N);
	apply1(n, op_user(&t[TRUNC_N], "sitea", TRUNC_N + 1, HLC(20000, 0),
			  "late", "k1"));
	rocksdb_set_perf_level(rocksdb_enable_count);
	pc = rocksdb_perfcontext_create();
	rocksdb_perfcontext_reset(pc);
	assert_int_equal(ops_truncate_log(n->o, 10000, 100000), 0);
	uint64_t skipped =
		rocksdb_perfcontext_metric(pc, rocksdb_internal_delete_skipped_count) +
		rocksdb_perfcontext_metric(pc, rocksdb_internal_key_skipped_count);
	rocksdb_perfcontext_destroy(pc);
	rocksdb_set_perf_level(rocksdb_disable);
	if (skipped > 100)
		fail_msg("the truncation after the cut stepped over %llu "
			 "deleted entries", (unsigned long long)skipped);
	/* the old entries are gone, the recent one stays */
	buf_add(&k, "sitea", 6);
	store_be64(be, EPOCH);
	buf_add(&k, be, 8);
	store_be64(be, 1);
	buf_add(&k, be, 8);
	assert_int_equal(store_get(n->s, NULL, CF_OPLOG, k.p, k.len, &v),
			 GD_ENOTFOUND);
	store_be64((uint8_t *)k.p + k.len - 8, TRUNC_N);
	assert_int_equal(store_get(n->s, NULL, CF_OPLOG, k.p, k.len, &v),
			 GD_ENOTFOUND);
	store_be64((uint8_t *)k.p + k.len - 8, TRUNC_N + 1);
	assert_int_equal(store_get(n->s, NULL, CF_OPLOG, k.p, k.len, &v), 0);
	for (int i = 0; i < TRUNC_N; i++)
		free(t[i].user.name);
	free(t);
	free(ops);
	buf_free(&k);
	buf_free(&v);
}

static void test_gap(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct store_batch *b;
	struct top t[4];
	bool applied = true;
	uint8_t d[DIGEST_LEN];

	Grantd__V1__Op *o1 = op_user(&t[0], "sitea", 1, HLC(10, 0), "gina",
				     "k1");
	Grantd__V1__Op *o2 = op_grant(&t[1], "sitea", 2, HLC(11, 0), "gina",
				      "192.0.2.9", 1800000000, false);
	Grantd__V1__Op *o3 = op_user(&t[2], "sitea", 3, HLC(12, 0), "gina",
				     "k3");

	/* seq 2 before seq 1: a gap, nothing written */
	memcpy(d, ops_digest(n->o), DIGEST_LEN);
	store_batch_new(&b, n->s);
	assert_int_equal(ops_apply(n->o, b, o2, &applied), GD_EINVAL);
	assert_false(applied);
	assert_int_equal(store_batch_count(b), 0);
	assert_memory_equal(ops_digest(n->o), d, DIGEST_LEN);
	assert_int_equal(ops_vv_get(n->o, b, "sitea", EPOCH), 0);

	/* in the same batch after a good one: still only the good one */
	applied = false;
	assert_int_equal(ops_apply(n->o, b, o1, &applied), 0);
	assert_true(applied);
	int count = store_batch_count(b);
	memcpy(d, ops_digest(n->o), DIGEST_LEN);
	applied = true;
	assert_int_equal(ops_apply(n->o, b, o3, &applied), GD_EINVAL);
	assert_false(applied);
	assert_int_equal(store_batch_count(b), count);
	assert_memory_equal(ops_digest(n->o), d, DIGEST_LEN);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	assert_null(get_grant(n, "gina", "192.0.2.9"));
	Grantd__V1__User *u = get_rec(n, CF_USERS, "gina", 4,
				      &grantd__v1__user__descriptor);
	assert_string_equal(u->keys[0], key_of("k1"));
	free_rec(u);
	assert_int_equal(ops_vv_get(n->o, NULL, "sitea", EPOCH), 1);

	/* another epoch of the same origin is another stream */
	struct top e;
	Grantd__V1__Op *oe = op_user(&e, "sitea", 2, HLC(20, 0), "gina", "ke");
	oe->epoch = EPOCH + 1;
	store_batch_new(&b, n->s);
	assert_int_equal(ops_apply(n->o, b, oe, &applied), GD_EINVAL);
	assert_int_equal(store_batch_count(b), 0);
	store_batch_free(&b);

	/* once the gap is filled both go in */
	apply1(n, o2);
	apply1(n, o3);
	assert_int_equal(ops_vv_get(n->o, NULL, "sitea", EPOCH), 3);
	Grantd__V1__Grant *g = get_grant(n, "gina", "192.0.2.9");
	assert_non_null(g);
	free_rec(g);
	check_digest(n);

	/* ops_vv_raise (after a snapshot) moves the vector up, never down */
	struct top r5, r6;
	store_batch_new(&b, n->s);
	ops_vv_raise(n->o, b, "siteq", EPOCH, 5);
	ops_vv_raise(n->o, b, "siteq", EPOCH, 2);
	ops_vv_raise(n->o, b, "sitea", EPOCH, 1);
	assert_int_equal(ops_vv_get(n->o, b, "siteq", EPOCH), 5);
	assert_int_equal(ops_vv_get(n->o, b, "sitea", EPOCH), 3);
	assert_int_equal(ops_apply(n->o, b, op_user(&r5, "siteq", 5,
						     HLC(30, 0), "gina", "kq"),
				   &applied), 0);
	assert_false(applied);
	assert_int_equal(ops_apply(n->o, b, op_user(&r6, "siteq", 6,
						     HLC(31, 0), "gina", "kq"),
				   &applied), 0);
	assert_true(applied);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	assert_int_equal(ops_vv_get(n->o, NULL, "siteq", EPOCH), 6);
}

/* ---- convergence ------------------------------------------------------------- */

#define NORIGIN 3
#define PER_ORIGIN 12

static const char *const origins[NORIGIN] = { "paloalto", "portland",
					      "sydney" };

/* Conflicting streams from three sites: every key is written by more
 * than one, some with equal stamps. */
static void make_streams(struct top t[NORIGIN][PER_ORIGIN],
			 Grantd__V1__Op *ops[NORIGIN][PER_ORIGIN])
{
	static const uint64_t at[NORIGIN][2] = { { 100, 300 }, { 200, 300 },
						 { 50, 400 } };
	static const char *const users[] = { "alice", "bob" };
	static const char *const nets[] = { "192.0.2.7", "2001:db8::/64" };

	for (int o = 0; o < NORIGIN; o++) {
		const char *org = origins[o];
		uint64_t s = 0;
		/* o-dependent stamps that sometimes tie across sites */
		uint64_t base = HLC(1000, 0) + (uint64_t)(o % 2) * 7;
		for (int r = 0; r < 2; r++) {
			const char *u = users[r];
			ops[o][s] = op_user(&t[o][s], org, s + 1,
					    base + 10 * (uint64_t)r, u, org);
			s++;
			ops[o][s] = op_grant(&t[o][s], org, s + 1,
					     base + 20 + (uint64_t)(o * 3 + r),
					     u, nets[(o + r) % 2],
					     1800000000 + o * 100, o == 2);
			s++;
			ops[o][s] = op_mark(&t[o][s], org, s + 1, base + 30, u,
					    1, 10 + (uint64_t)((o * 7 + r) % 5),
					    1u << o);
			s++;
			ops[o][s] = op_fail(&t[o][s], org, s + 1, base + 40, u,
					    r ? "sydney" : "paloalto", at[o], 2);
			s++;
		}
		ops[o][s] = op_repo(&t[o][s], org, s + 1,
				    HLC(2000, 0) - (uint64_t)o,
				    "kernel/git", (Grantd__V1__RepoMode)(o % 3),
				    o == 1);
		s++;
		ops[o][s] = op_unlock(&t[o][s], org, s + 1, HLC(3000, 0),
				      "alice");
		s++;
		ops[o][s] = op_enroll(&t[o][s], org, s + 1,
				      HLC(4000, 0) + (uint64_t)o,
				      o == 1 ? "bob" : "alice",
				      o == 0 ? "secret-from-paloalto" :
					       "secret-from-elsewhere",
				      4000 + (uint64_t)o);
		s++;
		/* a later write over an earlier one of this very stream */
		ops[o][s] = op_grant(&t[o][s], org, s + 1,
				     HLC(5000, 0), "alice", "192.0.2.7",
				     1900000000, false);
		s++;
		assert_int_equal(s, PER_ORIGIN);
	}
}

static uint32_t xorshift(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static void test_convergence(void **state)
{
	struct fixture *f = *state;
	static struct top t[NORIGIN][PER_ORIGIN];
	Grantd__V1__Op *ops[NORIGIN][PER_ORIGIN];
	struct store_batch *b;
	bool applied;

	make_streams(t, ops);

	/* n0: round robin, one batch per operation */
	struct node *n0 = node_open(f, 0);
	for (int s = 0; s < PER_ORIGIN; s++)
		for (int o = 0; o < NORIGIN; o++)
			apply1(n0, ops[o][s]);

	/* n1: one site's stream after another, backwards, in one batch */
	struct node *n1 = node_open(f, 1);
	store_batch_new(&b, n1->s);
	for (int o = NORIGIN - 1; o >= 0; o--)
		for (int s = 0; s < PER_ORIGIN; s++) {
			assert_int_equal(ops_apply(n1->o, b, ops[o][s],
						   &applied), 0);
			assert_true(applied);
		}
	assert_int_equal(ops_commit(n1->o, b, true), 0);
	store_batch_free(&b);
	assert_same_state(n0, n1);

	/* n2..n7: random interleavings, random batch sizes, and some
	 * operations delivered twice (or early, as a gap) */
	for (int k = 2; k < MAX_NODES; k++) {
		struct node *n = node_open(f, k);
		uint32_t x = 0x9e3779b9u * (uint32_t)k;
		int next[NORIGIN] = { 0 }, left = NORIGIN * PER_ORIGIN;

		store_batch_new(&b, n->s);
		while (left) {
			int o = (int)(xorshift(&x) % NORIGIN);
			if (next[o] == PER_ORIGIN)
				continue;
			int rc = ops_apply(n->o, b, ops[o][next[o]], &applied);
			assert_int_equal(rc, 0);
			assert_true(applied);
			next[o]++, left--;
			uint32_t r = xorshift(&x) % 8;
			if (r == 0 && next[o] > 1) {
				/* a duplicate of something already applied */
				rc = ops_apply(n->o, b,
					       ops[o][xorshift(&x) % next[o]],
					       &applied);
				assert_int_equal(rc, 0);
				assert_false(applied);
			} else if (r == 1 && next[o] + 1 < PER_ORIGIN) {
				/* one from the future: a gap, refused */
				rc = ops_apply(n->o, b, ops[o][next[o] + 1],
					       &applied);
				assert_int_equal(rc, GD_EINVAL);
			}
			if (xorshift(&x) % 4 == 0)
				assert_int_equal(ops_commit(n->o, b, false),
						 0);
		}
		assert_int_equal(ops_commit(n->o, b, false), 0);
		store_batch_free(&b);
		assert_same_state(n0, n);
	}

	/* what the streams were built to show */
	Grantd__V1__Grant *g = get_grant(n0, "alice", "192.0.2.7");
	assert_int_equal(g->hlc, HLC(5000, 0));
	assert_string_equal(g->origin, "sydney"); /* tie at 5000: greatest */
	free_rec(g);
	Grantd__V1__Mark *m = get_mark(n0, "alice", 1);
	assert_int_equal(m->scratch_used, 0x7);
	free_rec(m);
	Grantd__V1__Repo *r = get_rec(n0, CF_REPOS, "kernel/git", 10,
				      &grantd__v1__repo__descriptor);
	assert_string_equal(r->origin, "paloalto"); /* hlc 2000 - 0 */
	free_rec(r);
	for (int o = 0; o < NORIGIN; o++)
		assert_int_equal(ops_vv_get(n0->o, NULL, origins[o], EPOCH),
				 PER_ORIGIN);
}

/* ---- ops_check ---------------------------------------------------------------- */

static void check_refused(const Grantd__V1__Op *op, const char *why)
{
	struct buf err = BUF_INIT;
	int rc = ops_check(op, &err);
	if (rc != GD_EPROTO)
		fail_msg("ops_check passed a bad %s op origin=%s (want '%s')",
			 body_name(op), op->origin ? op->origin : "(null)",
			 why);
	if (strcmp(buf_str(&err), why))
		fail_msg("ops_check said '%s', want '%s'", buf_str(&err), why);
	buf_free(&err);
}

static void check_passed(const Grantd__V1__Op *op)
{
	struct buf err = BUF_INIT;
	int rc = ops_check(op, &err);
	if (rc != 0)
		fail_msg("ops_check refused a good %s op: %d '%s'",
			 body_name(op), rc, buf_str(&err));
	buf_free(&err);
}

/* An address revocation (issue 19, N6): a user name and a canonical
 * address or CIDR, one key per (user, net). */
static void test_check_addr_revoke(void **state)
{
	static const char *const good[] = { "192.0.2.7", "192.0.2.0/24",
					    "2001:db8::1", "2001:db8::/48" };
	static const char *const bad[] = { "", "192.0.2.300", "not-an-ip",
					   "192.0.2.7/33", "2001:DB8::1",
					   "192.0.2.7/24", " 192.0.2.7" };
	Grantd__V1__AddrRevocation ar = GRANTD__V1__ADDR_REVOCATION__INIT;
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;

	(void)state;
	op.origin = "paloalto";
	op.epoch = 1, op.has_epoch = 1;
	op.seq = 1, op.has_seq = 1;
	op.hlc = 1, op.has_hlc = 1;
	op.body_case = GRANTD__V1__OP__BODY_ADDR_REVOKE;
	op.addr_revoke = &ar;
	ar.user = "alice";
	for (size_t i = 0; i < GD_ARRAY_SIZE(good); i++) {
		ar.net = (char *)good[i];
		check_passed(&op);
	}
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++) {
		ar.net = (char *)bad[i];
		check_refused(&op, "bad revoked address");
	}
	ar.net = NULL;
	check_refused(&op, "bad revoked address");
	ar.net = "192.0.2.7";
	ar.user = "Alice";
	check_refused(&op, "bad user name");
	ar.user = NULL;
	check_refused(&op, "bad user name");
}

static void test_check(void **state)
{
	struct top t;
	static const uint64_t at[] = { 1 };
	static const char *const bad_sites[] = {
		"", "Paloalto", "palo alto", "palo_alto", "palo.alto",
		"paloalto\n", "sit\xc3\xa9", "paloalto/x", "palo:alto",
	};
	static const char *const bad_users[] = {
		"", "Alice", "1alice", "-alice", ".alice", "al ice", "al/ice",
		"alice\n", "al\xc3\xa9", "~alice", "alice:x",
	};
	char name64[65], name65[66];

	memset(name64, 'a', 64), name64[64] = 0;
	memset(name65, 'a', 65), name65[65] = 0;

	/* every kind of body, good */
	check_passed(op_user(&t, "paloalto", 1, 1, "alice", "ssh-ed25519 AAAA"));
	check_passed(op_enroll(&t, "paloalto", 1, 1, "alice", "12345", 1));
	check_passed(op_grant(&t, "paloalto", 1, 1, "alice", "::1", 1, false));
	check_passed(op_mark(&t, "paloalto", 1, 1, "alice", 1, 2, 3));
	check_passed(op_fail(&t, "paloalto", 1, 1, "alice", "paloalto", at, 1));
	check_passed(op_unlock(&t, "paloalto", 1, 1, "alice"));
	check_passed(op_repo(&t, "paloalto", 1, 1, "pub/scm/git",
			     GRANTD__V1__REPO_MODE__MODE_OFF, false));
	check_passed(op_user(&t, "a", 1, 1, "_", NULL));
	check_passed(op_user(&t, "0-9", UINT64_MAX, UINT64_MAX, "a.b-c_9",
			     NULL));
	/* 64 characters is the longest site and user name */
	check_passed(op_user(&t, name64, 1, 1, name64, NULL));
	check_refused(op_user(&t, name65, 1, 1, "alice", NULL), "bad origin");
	check_refused(op_user(&t, "paloalto", 1, 1, name65, NULL),
		      "bad user name");

	/* bad origins */
	check_refused(op_user(&t, NULL, 1, 1, "alice", NULL), "bad origin");
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad_sites); i++) {
		op_user(&t, bad_sites[i], 1, 1, "alice", NULL);
		check_refused(&t.op, "bad origin");
	}

	/* missing stamps */
	op_user(&t, "paloalto", 1, 1, "alice", NULL);
	t.op.has_epoch = 0;
	check_refused(&t.op, "missing stamp");
	op_user(&t, "paloalto", 1, 1, "alice", NULL);
	t.op.epoch = 0;
	check_refused(&t.op, "missing stamp");
	op_user(&t, "paloalto", 1, 1, "alice", NULL);
	t.op.has_seq = 0;
	check_refused(&t.op, "missing stamp");
	check_refused(op_user(&t, "paloalto", 0, 1, "alice", NULL),
		      "missing stamp");
	op_user(&t, "paloalto", 1, 1, "alice", NULL);
	t.op.has_hlc = 0;
	check_refused(&t.op, "missing stamp");
	check_refused(op_user(&t, "paloalto", 1, 0, "alice", NULL),
		      "missing stamp");

	/* bad user names, in every body that names a user */
	check_refused(op_user(&t, "paloalto", 1, 1, NULL, NULL),
		      "bad user name");
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad_users); i++) {
		const char *u = bad_users[i];
		check_refused(op_user(&t, "paloalto", 1, 1, u, NULL),
			      "bad user name");
		check_refused(op_enroll(&t, "paloalto", 1, 1, u, "12345", 1),
			      "bad user name");
		check_refused(op_grant(&t, "paloalto", 1, 1, u, "::1", 1,
				       false), "bad user name");
		check_refused(op_mark(&t, "paloalto", 1, 1, u, 1, 2, 3),
			      "bad user name");
		check_refused(op_unlock(&t, "paloalto", 1, 1, u),
			      "bad user name");
		check_refused(op_fail(&t, "paloalto", 1, 1, u, "paloalto", at,
				      1), "bad failure record");
	}
	check_refused(op_grant(&t, "paloalto", 1, 1, NULL, "::1", 1, false),
		      "bad user name");
	check_refused(op_mark(&t, "paloalto", 1, 1, NULL, 1, 2, 3),
		      "bad user name");
	check_refused(op_unlock(&t, "paloalto", 1, 1, NULL), "bad user name");
	check_refused(op_enroll(&t, "paloalto", 1, 1, NULL, "1", 1),
		      "bad user name");

	/* no body at all */
	stamp(&t, "paloalto", 1, 1);
	check_refused(&t.op, "no body");
}

/* Bounds of failures, grants, repositories, keys and secrets. */
static void test_check_bounds(void **state)
{
	struct top t;
	static const uint64_t at[] = { 1 };

	(void)state;
	check_refused(op_fail(&t, "paloalto", 1, 1, "alice", "Bad Site", at,
			      1), "bad failure record");
	check_refused(op_fail(&t, "paloalto", 1, 1, "alice", NULL, at, 1),
		      "bad failure record");
	op_fail(&t, "paloalto", 1, 1, "alice", "paloalto", at, 1);
	t.fail.n_hlc = OPS_MAX_FAILURES_KEPT + 1;
	check_refused(&t.op, "bad failure record");
	static const uint64_t unstamped[] = { 5, 0 };
	check_refused(op_fail(&t, "paloalto", 1, 1, "alice", "paloalto",
			      unstamped, 2), "bad failure record");
	check_refused(op_grant(&t, "paloalto", 1, 1, "alice", NULL, 1, false),
		      "bad grant address");
	check_refused(op_grant(&t, "paloalto", 1, 1, "alice", "10.0.0.1/33", 1,
			       false),
		      "bad grant address");
	check_refused(op_repo(&t, "paloalto", 1, 1, "../etc",
			      GRANTD__V1__REPO_MODE__MODE_OFF, false),
		      "bad repository name");
	check_refused(op_repo(&t, "paloalto", 1, 1, "linux.git",
			      GRANTD__V1__REPO_MODE__MODE_OFF, false),
		      "bad repository name");
	check_refused(op_repo(&t, "paloalto", 1, 1, NULL,
			      GRANTD__V1__REPO_MODE__MODE_OFF, false),
		      "bad repository name");
	op_user(&t, "paloalto", 1, 1, "alice", NULL);
	t.user.n_keys = OPS_MAX_KEYS + 1;
	check_refused(&t.op, "too many keys");
	{
		static uint8_t big[129];
		op_enroll(&t, "paloalto", 1, 1, "alice", "x", 1);
		t.enroll.secret.data = big, t.enroll.secret.len = sizeof(big);
		check_refused(&t.op, "enrollment out of bounds");
	}
}

/* ---- ops_merge_record --------------------------------------------------------- */

static void test_merge_record(void **state)
{
	struct fixture *f = *state;
	static struct top t[NORIGIN][PER_ORIGIN];
	Grantd__V1__Op *ops[NORIGIN][PER_ORIGIN];
	struct store_batch *b;
	struct buf v = BUF_INIT;

	make_streams(t, ops);
	struct node *src = node_open(f, 0), *dst = node_open(f, 1);
	for (int o = 0; o < NORIGIN; o++)
		apply_all(src, ops[o], PER_ORIGIN);

	/* every record of src merged into an empty dst: the same state,
	 * without any operation in dst's log or vector */
	store_batch_new(&b, dst->s);
	for (size_t c = 0; c < GD_ARRAY_SIZE(state_cfs); c++) {
		struct store_iter *it;
		const char *key;
		size_t klen;
		int rc;

		store_iter_new(&it, src->s, NULL, state_cfs[c], "", 0);
		while ((rc = store_iter_next(it, &key, &klen, &v)) > 0)
			assert_int_equal(ops_merge_record(dst->o, b,
							  state_cfs[c], v.p,
							  v.len, NULL, NULL), 0);
		assert_int_equal(rc, 0);
		store_iter_free(&it);
	}
	assert_int_equal(ops_commit(dst->o, b, true), 0);
	store_batch_free(&b);
	assert_same_state(src, dst);
	for (int o = 0; o < NORIGIN; o++)
		assert_int_equal(ops_vv_get(dst->o, NULL, origins[o], EPOCH),
				 0);

	/* merged again into either: nothing changes */
	for (int i = 0; i < 2; i++) {
		struct node *n = &f->n[i];
		uint8_t d[DIGEST_LEN];
		memcpy(d, ops_digest(n->o), DIGEST_LEN);
		store_batch_new(&b, n->s);
		for (size_t c = 0; c < GD_ARRAY_SIZE(state_cfs); c++) {
			struct store_iter *it;
			const char *key;
			size_t klen;
			store_iter_new(&it, src->s, NULL, state_cfs[c], "", 0);
			while (store_iter_next(it, &key, &klen, &v) > 0)
				assert_int_equal(ops_merge_record(n->o, b,
								  state_cfs[c],
								  v.p, v.len,
								  NULL, NULL),
						 0);
			store_iter_free(&it);
		}
		assert_int_equal(store_batch_count(b), 0);
		store_batch_free(&b);
		assert_memory_equal(ops_digest(n->o), d, DIGEST_LEN);
	}
	sodium_memzero(v.p, v.len);
	buf_free(&v);
}

/* One operation applied at one site and its record merged at another give
 * the same digest, for every kind of record, also over older state. */
static void test_merge_record_one(void **state)
{
	struct fixture *f = *state;
	struct top t[8], old[8];
	static const uint64_t at[] = { 7, 9 }, at_old[] = { 8 };
	static const struct {
		enum store_cf cf;
		const char *key;
		size_t klen;
	} where[] = {
		{ CF_USERS, "hank", 4 },
		{ CF_ENROLL, "hank", 4 },
		{ CF_GRANTS, NULL, 0 },
		{ CF_MARKS, NULL, 0 },
		{ CF_FAILS, NULL, 0 },
		{ CF_UNLOCK, "hank", 4 },
		{ CF_REPOS, "hank/tools", 10 },
	};
	Grantd__V1__Op *ops[] = {
		op_user(&t[0], "sitea", 1, HLC(50, 0), "hank", "k"),
		op_enroll(&t[1], "sitea", 1, HLC(51, 0), "hank",
			  "abcdefghij0123456789", 51),
		op_grant(&t[2], "sitea", 1, HLC(52, 0), "hank", "198.51.100.0/24",
			 1800000000, false),
		op_mark(&t[3], "sitea", 1, HLC(53, 0), "hank", 51, 77, 0x10),
		op_fail(&t[4], "sitea", 1, HLC(54, 0), "hank", "sitea", at, 2),
		op_unlock(&t[5], "sitea", 1, HLC(55, 0), "hank"),
		op_repo(&t[6], "sitea", 1, HLC(56, 0), "hank/tools",
			GRANTD__V1__REPO_MODE__MODE_REQUIRED, false),
	};
	/* what both sites held before: older, from another site */
	Grantd__V1__Op *before[] = {
		op_user(&old[0], "siteb", 1, HLC(40, 0), "hank", "k0"),
		op_enroll(&old[1], "siteb", 1, HLC(41, 0), "hank",
			  "old-secret-123456789", 41),
		op_grant(&old[2], "siteb", 1, HLC(42, 0), "hank",
			 "198.51.100.0/24", 1700000000, true),
		op_mark(&old[3], "siteb", 1, HLC(43, 0), "hank", 51, 80, 0x1),
		op_fail(&old[4], "siteb", 1, HLC(44, 0), "hank", "sitea",
			at_old, 1),
		op_unlock(&old[5], "siteb", 1, HLC(45, 0), "hank"),
		op_repo(&old[6], "siteb", 1, HLC(46, 0), "hank/tools",
			GRANTD__V1__REPO_MODE__MODE_OPT_IN, false),
	};
	struct buf k = BUF_INIT, v = BUF_INIT;

	for (size_t i = 0; i < GD_ARRAY_SIZE(ops); i++) {
		for (int over = 0; over < 2; over++) {
			struct node *a = node_open(f, 0), *m = node_open(f, 1);
			if (over) {
				apply1(a, before[i]);
				apply1(m, before[i]);
			}
			apply1(a, ops[i]);

			switch (where[i].cf) {
			case CF_GRANTS:
				records_key_grant(&k, "hank", "198.51.100.0/24", "");
				break;
			case CF_MARKS:
				records_key_mark(&k, "hank", 51);
				break;
			case CF_FAILS:
				records_key_fail(&k, "hank", "sitea");
				break;
			default:
				buf_reset(&k);
				buf_add(&k, where[i].key, where[i].klen);
			}
			/* its record, as the op alone would write it, from a
			 * third site that had nothing before */
			struct node *c = node_open(f, 2);
			apply1(c, ops[i]);
			assert_int_equal(store_get(c->s, NULL, where[i].cf, k.p,
						   k.len, &v), 0);
			struct store_batch *b;
			store_batch_new(&b, m->s);
			int rc = ops_merge_record(m->o, b, where[i].cf, v.p,
						  v.len, NULL, NULL);
			if (rc != 0)
				fail_msg("%s record: ops_merge_record = %d",
					 body_name(ops[i]), rc);
			assert_int_equal(ops_commit(m->o, b, true), 0);
			store_batch_free(&b);
			if (memcmp(ops_digest(a->o), ops_digest(m->o),
				   DIGEST_LEN))
				fail_msg("%s record%s: merged digest differs "
					 "from applied", body_name(ops[i]),
					 over ? " over older state" : "");
			assert_same_state(a, m);
			/* the vector is untouched by a merge */
			assert_int_equal(ops_vv_get(m->o, NULL, "sitea", EPOCH),
					 0);
			for (int j = 0; j < 3; j++) {
				node_close(&f->n[j]);
				char cmd[320];
				snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'",
					 f->n[j].store_dir, f->n[j].repo_dir);
				assert_int_equal(system(cmd), 0);
			}
		}
	}
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	buf_free(&k);
}

static void test_merge_record_bad(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct store_batch *b;
	static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0x0f };
	Grantd__V1__User u = GRANTD__V1__USER__INIT;
	struct buf v = BUF_INIT;

	store_batch_new(&b, n->s);
	/* does not decode */
	assert_int_equal(ops_merge_record(n->o, b, CF_USERS, junk,
					  sizeof(junk), NULL, NULL), GD_EPROTO);
	/* not a state family */
	assert_int_equal(ops_merge_record(n->o, b, CF_OPLOG, "", 0, NULL, NULL),
			 GD_EPROTO);
	assert_int_equal(ops_merge_record(n->o, b, CF_META, "", 0, NULL, NULL),
			 GD_EPROTO);
	assert_int_equal(ops_merge_record(n->o, b, CF_VV, "", 0, NULL, NULL),
			 GD_EPROTO);
	/* an LWW record without its stamp */
	u.name = "ivan";
	size_t len = grantd__v1__user__get_packed_size(&u);
	grantd__v1__user__pack(&u, buf_extend(&v, len));
	assert_int_equal(
		ops_merge_record(n->o, b, CF_USERS, v.p, v.len, NULL, NULL),
		GD_EPROTO);
	/* with a stamp but a bad name */
	u.hlc = 5, u.has_hlc = 1, u.origin = "sitea", u.name = "Ivan";
	buf_reset(&v);
	len = grantd__v1__user__get_packed_size(&u);
	grantd__v1__user__pack(&u, buf_extend(&v, len));
	assert_int_equal(
		ops_merge_record(n->o, b, CF_USERS, v.p, v.len, NULL, NULL),
		GD_EPROTO);
	assert_int_equal(store_batch_count(b), 0);
	assert_true(digest_zero(ops_digest(n->o)));
	/* and good */
	u.name = "ivan";
	buf_reset(&v);
	len = grantd__v1__user__get_packed_size(&u);
	grantd__v1__user__pack(&u, buf_extend(&v, len));
	assert_int_equal(
		ops_merge_record(n->o, b, CF_USERS, v.p, v.len, NULL, NULL), 0);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	check_digest(n);
	assert_false(digest_zero(ops_digest(n->o)));
	buf_free(&v);
}

static bool known_ab(const char *origin, void *payload)
{
	(void)payload;
	return !strcmp(origin, "sitea") || !strcmp(origin, "siteb");
}

/* A peer's record gets the checks a live operation gets (issue 8): a stamp
 * beyond the receiver's clock plus the skew, or from an origin that is not
 * configured, is refused with its reason and changes nothing; a record
 * that passes moves the clock up to its stamp. */
static void test_merge_record_trust(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct ops_trust t = { HLC(1000, 0xffff), known_ab, NULL };
	struct store_batch *b;
	struct buf v = BUF_INIT, why = BUF_INIT;
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;

	g.user = "kim", g.net = "10.66.6.7", g.session = "", g.site = "sitea";
	g.expires = 1900000000, g.has_expires = 1;
	g.origin = "sitea";
	store_batch_new(&b, n->s);
	/* stamped near 2^64: would beat every later revocation */
	g.hlc = UINT64_MAX - 0xffff, g.has_hlc = 1;
	grantd__v1__grant__pack(&g, buf_extend(&v, grantd__v1__grant__get_packed_size(&g)));
	assert_int_equal(ops_merge_record(n->o, b, CF_GRANTS, v.p, v.len, &t,
					  &why), GD_EPROTO);
	assert_non_null(strstr(why.p, "ahead of the allowed skew"));
	/* just past the bound */
	g.hlc = HLC(1001, 0);
	buf_reset(&v), buf_reset(&why);
	grantd__v1__grant__pack(&g, buf_extend(&v, grantd__v1__grant__get_packed_size(&g)));
	assert_int_equal(ops_merge_record(n->o, b, CF_GRANTS, v.p, v.len, &t,
					  &why), GD_EPROTO);
	/* from a site that is not configured */
	g.hlc = HLC(900, 0), g.origin = "nosuchsite";
	buf_reset(&v), buf_reset(&why);
	grantd__v1__grant__pack(&g, buf_extend(&v, grantd__v1__grant__get_packed_size(&g)));
	assert_int_equal(ops_merge_record(n->o, b, CF_GRANTS, v.p, v.len, &t,
					  &why), GD_EPROTO);
	assert_non_null(strstr(why.p, "unknown origin site nosuchsite"));
	assert_int_equal(store_batch_count(b), 0);
	assert_true(digest_zero(ops_digest(n->o)));
	/* a good one is merged, and the clock observes it */
	g.hlc = HLC(1000, 7), g.origin = "siteb";
	buf_reset(&v), buf_reset(&why);
	grantd__v1__grant__pack(&g, buf_extend(&v, grantd__v1__grant__get_packed_size(&g)));
	ops_hlc(n->o)->last = HLC(10, 0);
	assert_int_equal(ops_merge_record(n->o, b, CF_GRANTS, v.p, v.len, &t,
					  &why), 0);
	assert_true(ops_hlc_last(n->o) >= HLC(1000, 7));
	/* failed attempts carry their own stamps: a far-future one would
	 * keep kim locked for good, one of an unknown site is refused too */
	Grantd__V1__Failures fl = GRANTD__V1__FAILURES__INIT;
	uint64_t at[2] = { HLC(900, 0), UINT64_MAX - 0xffff };
	fl.user = "kim", fl.site = "sitea", fl.hlc = at, fl.n_hlc = 2;
	buf_reset(&v), buf_reset(&why);
	grantd__v1__failures__pack(&fl, buf_extend(&v, grantd__v1__failures__get_packed_size(&fl)));
	assert_int_equal(ops_merge_record(n->o, b, CF_FAILS, v.p, v.len, &t,
					  &why), GD_EPROTO);
	assert_non_null(strstr(why.p, "ahead of the allowed skew"));
	fl.n_hlc = 1, fl.site = "nosuchsite";
	buf_reset(&v), buf_reset(&why);
	grantd__v1__failures__pack(&fl, buf_extend(&v, grantd__v1__failures__get_packed_size(&fl)));
	assert_int_equal(ops_merge_record(n->o, b, CF_FAILS, v.p, v.len, &t,
					  &why), GD_EPROTO);
	assert_non_null(strstr(why.p, "unknown origin site nosuchsite"));
	fl.site = "sitea"; /* the positive control */
	buf_reset(&v), buf_reset(&why);
	grantd__v1__failures__pack(&fl, buf_extend(&v, grantd__v1__failures__get_packed_size(&fl)));
	assert_int_equal(ops_merge_record(n->o, b, CF_FAILS, v.p, v.len, &t,
					  &why), 0);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	check_digest(n);
	buf_free(&v);
	buf_free(&why);
}

/* A grant long expired leaves the disk at the next sweep (the grants
 * compaction filter).  A site that catches up by snapshot after that never
 * sees the record, so the state the two sites hold is the same, and by
 * SPEC 3.6 their digests must be equal too. */
static void test_sweep_keeps_digest(void **state)
{
	struct fixture *f = *state;
	struct node *a = node_open(f, 0), *c = node_open(f, 1);
	struct store_batch *b;
	struct buf k = BUF_INIT, v = BUF_INIT, sa = BUF_INIT, sc = BUF_INIT;
	uint8_t da[DIGEST_LEN], dc[DIGEST_LEN];
	struct top t[3];
	Grantd__V1__Op *ops[] = {
		op_user(&t[0], "sitea", 1, HLC(100, 0), "kim", "k"),
		/* expired in 1970: far past any grace period */
		op_grant(&t[1], "sitea", 2, HLC(101, 0), "kim", "192.0.2.50",
			 1000, false),
		op_grant(&t[2], "sitea", 3, HLC(102, 0), "kim", "192.0.2.51",
			 4000000000, false),
	};

	apply_all(a, ops, 3);
	store_batch_new(&b, a->s);
	assert_int_equal(ops_sweep_grants(a->o, b, 2000000000, 1000), 1);
	assert_int_equal(ops_commit(a->o, b, true), 0);
	store_batch_free(&b);
	records_key_grant(&k, "kim", "192.0.2.50", "");
	assert_int_equal(store_get(a->s, NULL, CF_GRANTS, k.p, k.len, &v),
			 GD_ENOTFOUND);

	/* c takes a's state by snapshot: every record a still holds */
	store_batch_new(&b, c->s);
	for (size_t i = 0; i < GD_ARRAY_SIZE(state_cfs); i++) {
		struct store_iter *it;
		const char *key;
		size_t klen;
		store_iter_new(&it, a->s, NULL, state_cfs[i], "", 0);
		while (store_iter_next(it, &key, &klen, &v) > 0)
			assert_int_equal(ops_merge_record(c->o, b,
							  state_cfs[i], v.p,
							  v.len, NULL, NULL), 0);
		store_iter_free(&it);
	}
	assert_int_equal(ops_commit(c->o, b, true), 0);
	store_batch_free(&b);

	dump_state(a, &sa, da);
	dump_state(c, &sc, dc);
	bool same_records = sa.len == sc.len && !memcmp(sa.p, sc.p, sa.len);
	char ha[2 * DIGEST_LEN + 1], hc[2 * DIGEST_LEN + 1];
	char hr[2 * DIGEST_LEN + 1];
	digest_hex(ha, ops_digest(a->o));
	digest_hex(hc, ops_digest(c->o));
	digest_hex(hr, da);
	buf_free(&k);
	buf_free(&v);
	buf_free(&sa);
	buf_free(&sc);

	assert_true(same_records);
	if (strcmp(ha, hc))
		fail_msg("same records, different digests: %s (swept) "
			 "%s, %s (snapshot) %s; %s's records hash to %s",
			 a->site, ha, c->site, hc, a->site, hr);
	check_digest(a);
}

/* ---- local operations ---------------------------------------------------------- */

static void test_local(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0), *peer = node_open(f, 1);
	struct store_batch *b;
	struct top t[2];
	struct opsig_signer key;
	struct opsig_verifier v;
	uint8_t curve[32] = { 42 };

	/* signed with node0's key (opsig.h), as a peer checks them */
	assert_int_equal(opsig_signer_init(&key, curve, "h/grantd/node0"), 0);
	ops_set_signer(n->o, &key);
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "node0", key.key.pub), 0);
	store_batch_new(&b, n->s);
	op_user(&t[0], "ignored", 99, 0, "judy", "k");
	assert_int_equal(ops_local(n->o, b, &t[0].op), 0);
	op_grant(&t[1], "ignored", 99, 0, "judy", "192.0.2.44", 1800000000,
		 false);
	assert_int_equal(ops_local(n->o, b, &t[1].op), 0);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);

	/* stamped as this site's: origin, epoch, consecutive seq, hlc */
	for (int i = 0; i < 2; i++) {
		assert_string_equal(t[i].op.origin, "node0");
		assert_int_equal(t[i].op.epoch, ops_epoch(n->o));
		assert_int_equal(t[i].op.seq, (uint64_t)i + 1);
		assert_int_not_equal(t[i].op.hlc, 0);
	}
	assert_true(t[1].op.hlc > t[0].op.hlc);
	assert_int_equal(ops_seq(n->o), 2);
	assert_int_equal(ops_vv_get(n->o, NULL, "node0", ops_epoch(n->o)), 2);
	struct buf box = BUF_INIT;
	ops_take_outbox(n->o, &box);
	assert_true(box.len > 8);

	/* the outbox holds them as a peer receives them: applied there, the
	 * same state */
	size_t off = 0;
	int count = 0;
	while (off + 4 <= box.len) {
		const uint8_t *p = (const uint8_t *)box.p + off;
		size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 |
			     (size_t)p[2] << 8 | p[3];
		assert_true(off + 4 + len <= box.len);
		Grantd__V1__Op *op = grantd__v1__op__unpack(NULL, len, p + 4);
		assert_non_null(op);
		struct buf err = BUF_INIT;
		assert_int_equal(ops_check(op, &err), 0);
		buf_free(&err);
		assert_int_equal(opsig_verify(&v, op, NULL), OPSIG_OK);
		assert_int_equal(op->sig->count, 2);
		/* the log holds it compact (oplog.h), and gives back the
		 * very bytes published */
		struct buf k = BUF_INIT, logged = BUF_INIT;
		records_key_oplog(&k, "node0", ops_epoch(n->o), op->seq);
		assert_int_equal(store_get(n->s, NULL, CF_OPLOG, k.p, k.len, &logged),
				 0);
		assert_true(logged.len < len);
		assert_int_equal(oplog_get(n->s, NULL, k.p, k.len, &logged), 0);
		assert_int_equal(logged.len, len);
		assert_memory_equal(logged.p, p + 4, len);
		buf_free(&k);
		buf_free(&logged);
		apply1(peer, op);
		grantd__v1__op__free_unpacked(op, NULL);
		off += 4 + len;
		count++;
	}
	assert_int_equal(count, 2);
	assert_int_equal(off, box.len);
	assert_same_state(n, peer);
	buf_free(&box);
	ops_take_outbox(n->o, &box);
	assert_int_equal(box.len, 0);
	buf_free(&box);

	/* a peer's stamp from the future: the next local stamp is after it,
	 * so a revoke made here after seeing a grant wins over it */
	struct top fut, loc;
	uint64_t ahead = HLC(clock_wall_ms() + 3600 * 1000, 9);
	apply1(n, op_grant(&fut, "portland", 1, ahead, "judy", "192.0.2.44",
			   1800000000, false));
	store_batch_new(&b, n->s);
	op_grant(&loc, "ignored", 1, 0, "judy", "192.0.2.44", 1800000000,
		 true);
	assert_int_equal(ops_local(n->o, b, &loc.op), 0);
	assert_int_equal(ops_commit(n->o, b, true), 0);
	store_batch_free(&b);
	assert_true(loc.op.hlc > ahead);
	Grantd__V1__Grant *g = get_grant(n, "judy", "192.0.2.44");
	assert_true(g->revoked);
	assert_string_equal(g->origin, "node0");
	free_rec(g);
	ops_outbox_clear(n->o);

	/* a reopened store starts a new epoch at seq 1 */
	uint64_t epoch = ops_epoch(n->o);
	node_close(n);
	n = node_open(f, 0);
	assert_int_not_equal(ops_epoch(n->o), epoch);
	assert_int_equal(ops_seq(n->o), 0);
}

/* ---- live counts (status) and the keys index ------------------------------ */

/* What count_family scanned for before the counts were kept. */
static int64_t recount(struct node *n, struct store_batch *b, enum store_cf cf,
		       int64_t now)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int64_t c = 0;

	store_iter_new(&it, n->s, b, cf, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0)
		c += records_live_at(cf, v.p, v.len, now);
	store_iter_free(&it);
	buf_free(&v);
	return c;
}

static void check_counts(struct node *n, struct store_batch *b, int64_t now)
{
	for (int cf = 0; cf < CF__COUNT; cf++) {
		int64_t kept = ops_count(n->o, cf, now), disk =
			recount(n, b, cf, now);
		if (kept != disk)
			fail_msg("%s family=%s now=%lld: kept %lld, records "
				 "say %lld", n->site, store_cf_name(cf),
				 (long long)now, (long long)kept,
				 (long long)disk);
	}
}

/* The counts follow every apply (a grant replaced, revoked, expiring; a
 * user and a repository deleted), survive a restart, and match a recount
 * at every moment, before and after each grant's expiry. */
static void test_counts(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct ops_verify v;
	struct top t[12];
	const int64_t T = 2000000000;

	apply_all(n, (Grantd__V1__Op *[]){
		op_user(&t[0], "sitea", 1, HLC(100, 0), "ann", "k1"),
		op_user(&t[1], "sitea", 2, HLC(101, 0), "ben", "k2"),
		op_grant(&t[2], "sitea", 3, HLC(102, 0), "ann", "192.0.2.1",
			 T + 10, false),
		op_grant(&t[3], "sitea", 4, HLC(103, 0), "ann", "192.0.2.2",
			 T + 20, false),
		op_grant(&t[4], "sitea", 5, HLC(104, 0), "ben", "192.0.2.3",
			 T - 5, false),
		op_repo(&t[5], "sitea", 6, HLC(105, 0), "r1",
			GRANTD__V1__REPO_MODE__MODE_OFF, false),
	}, 6);
	/* (verify counts at the wall clock's time, before T moves them) */
	assert_int_equal(ops_verify(n->o, &v), 0);
	assert_true(v.equal);
	assert_int_equal(v.count_kept[CF_GRANTS], 3);
	assert_int_equal(v.count_disk[CF_GRANTS], 3);
	assert_int_equal(ops_count(n->o, CF_USERS, T), 2);
	assert_int_equal(ops_count(n->o, CF_GRANTS, T), 2);
	assert_int_equal(ops_count(n->o, CF_REPOS, T), 1);
	assert_int_equal(ops_count(n->o, CF_MARKS, T), 0); /* not counted */
	check_counts(n, NULL, T);
	/* the first grant extended past the second's end, then the second
	 * revoked; ben deleted, the repository deleted */
	apply_all(n, (Grantd__V1__Op *[]){
		op_grant(&t[6], "sitea", 7, HLC(106, 0), "ann", "192.0.2.1",
			 T + 30, false),
		op_grant(&t[7], "sitea", 8, HLC(107, 0), "ann", "192.0.2.2",
			 T + 20, true),
		op_user(&t[8], "sitea", 9, HLC(108, 0), "ben", NULL),
		op_repo(&t[9], "sitea", 10, HLC(109, 0), "r1",
			GRANTD__V1__REPO_MODE__MODE_OFF, true),
	}, 4);
	check_counts(n, NULL, T);
	assert_int_equal(ops_count(n->o, CF_USERS, T), 2);
	assert_int_equal(ops_count(n->o, CF_REPOS, T), 0);
	op_user(&t[10], "sitea", 11, HLC(110, 0), "ben", NULL);
	t[10].user.deleted = 1, t[10].user.has_deleted = 1;
	apply1(n, &t[10].op);
	assert_int_equal(ops_count(n->o, CF_USERS, T + 1), 1);
	check_counts(n, NULL, T + 1);
	check_counts(n, NULL, T + 10);
	assert_int_equal(ops_count(n->o, CF_GRANTS, T + 10), 1);
	check_counts(n, NULL, T + 29);
	check_counts(n, NULL, T + 30);
	assert_int_equal(ops_count(n->o, CF_GRANTS, T + 30), 0);
	/* an expired grant revoked: no count below zero */
	apply1(n, op_grant(&t[11], "sitea", 12, HLC(111, 0), "ann",
			   "192.0.2.1", T + 30, true));
	assert_int_equal(ops_count(n->o, CF_GRANTS, T + 31), 0);
	check_counts(n, NULL, T + 31);
	/* loaded again at open */
	node_close(n);
	n = node_open(f, 0);
	check_counts(n, NULL, T);
	check_counts(n, NULL, T + 40);
}

/* A rolled back save point, and a batch dropped after a failed commit
 * (ops_reload), take their count changes back with them; a count that
 * parted from the records fails ops_verify. */
static void test_counts_rollback(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct store_batch *b;
	struct ops_save sp;
	struct ops_verify v;
	struct top t[4];
	bool applied;
	const int64_t T = 2000000000;

	apply1(n, op_grant(&t[0], "sitea", 1, HLC(100, 0), "ann",
			   "192.0.2.1", T + 10, false));
	store_batch_new(&b, n->s);
	ops_savepoint(n->o, b, &sp);
	assert_int_equal(ops_apply(n->o, b,
				   op_grant(&t[1], "sitea", 2, HLC(101, 0),
					    "ann", "192.0.2.1", T + 10, true),
				   &applied), 0);
	assert_int_equal(ops_apply(n->o, b,
				   op_user(&t[2], "sitea", 3, HLC(102, 0),
					   "ann", "k"), &applied), 0);
	assert_int_equal(ops_count(n->o, CF_GRANTS, T), 0);
	assert_int_equal(ops_count(n->o, CF_USERS, T), 1);
	check_counts(n, b, T);
	assert_int_equal(ops_rollback(n->o, b, &sp), 0);
	assert_int_equal(ops_count(n->o, CF_GRANTS, T), 1);
	assert_int_equal(ops_count(n->o, CF_USERS, T), 0);
	check_counts(n, b, T);
	/* applied, then the batch dropped as after a failed commit */
	assert_int_equal(ops_apply(n->o, b, &t[1].op, &applied), 0);
	assert_int_equal(ops_count(n->o, CF_GRANTS, T + 1), 0);
	store_batch_free(&b);
	assert_int_equal(ops_reload(n->o), 0);
	assert_int_equal(ops_count(n->o, CF_GRANTS, T + 1), 1);
	check_counts(n, NULL, T + 1);
	/* a live grant written behind ops' back: verify names the count */
	{
		uint8_t rec[128];
		size_t len;
		op_grant(&t[3], "sitea", 9, HLC(109, 0), "zed", "192.0.2.9",
			 4000000000, false);
		len = grantd__v1__grant__pack(&t[3].grant, rec);
		store_batch_new(&b, n->s);
		store_put(b, CF_GRANTS, "zed\0" "192.0.2.9\0", 14, rec, len);
		assert_int_equal(store_commit(b, true), 0);
		store_batch_free(&b);
	}
	assert_int_equal(ops_verify(n->o, &v), 0);
	assert_false(v.equal);
	assert_int_equal(v.count_disk[CF_GRANTS], v.count_kept[CF_GRANTS] + 1);
}

/* How many keys the index holds for fp (any user), and the user and key
 * of the first. */
static int keyfp_find(struct node *n, const char *fp, struct buf *user,
		      struct buf *key)
{
	struct store_iter *it;
	struct buf k = BUF_INIT, v = BUF_INIT;
	const char *ik;
	size_t iklen;
	int c = 0;

	records_key_keyfp(&k, fp, NULL);
	store_iter_new(&it, n->s, NULL, CF_KEYFP, k.p, k.len);
	while (store_iter_next(it, &ik, &iklen, &v) > 0) {
		struct records_span sf, su;
		assert_int_equal(records_keyfp_parse(ik, iklen, &sf, &su), 0);
		if (c++ == 0) {
			buf_reset(user);
			buf_add(user, su.p, su.len);
			buf_add(user, "", 1);
			user->len--;
			buf_reset(key);
			buf_add(key, v.p, v.len);
			buf_add(key, "", 1);
			key->len--;
		}
	}
	store_iter_free(&it);
	buf_free(&k);
	buf_free(&v);
	return c;
}

static const char *fp_of(const char *label)
{
	static char fp[RECORDS_FP_MAX];
	assert_int_equal(records_ssh_fingerprint(fp, key_of(label)), 0);
	return fp;
}

#define OTHER_KEY                                                              \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPz0OdImpZkZRFWa0DIvXMsC+wwuYm7" \
	"TcnlPutvwRV5v"

/* CF_KEYFP follows the user records in their batch: a key indexed, a key
 * replaced, a user deleted; and a store made before the index gets it at
 * open. */
static void test_keyfp(void **state)
{
	struct fixture *f = *state;
	struct node *n = node_open(f, 0);
	struct buf user = BUF_INIT, key = BUF_INIT, k = BUF_INIT;
	struct store_batch *b;
	struct top t[4];
	char fp[RECORDS_FP_MAX], other[RECORDS_FP_MAX];

	snprintf(fp, sizeof(fp), "%s", fp_of("a"));
	assert_int_equal(records_ssh_fingerprint(other, OTHER_KEY), 0);
	apply1(n, op_user(&t[0], "sitea", 1, HLC(100, 0), "ann", "a"));
	assert_int_equal(keyfp_find(n, fp, &user, &key), 1);
	assert_string_equal(user.p, "ann");
	assert_string_equal(key.p, key_of("a"));
	/* not replicated, not in the digest */
	check_digest(n);

	/* ann's key replaced by another: the old one stops matching */
	op_user(&t[1], "sitea", 2, HLC(101, 0), "ann", NULL);
	t[1].keys[0] = OTHER_KEY;
	t[1].user.n_keys = 1;
	apply1(n, &t[1].op);
	assert_int_equal(keyfp_find(n, fp, &user, &key), 0);
	assert_int_equal(keyfp_find(n, other, &user, &key), 1);
	assert_string_equal(user.p, "ann");

	/* deleted: nothing */
	op_user(&t[2], "sitea", 3, HLC(102, 0), "ann", NULL);
	t[2].keys[0] = OTHER_KEY;
	t[2].user.n_keys = 1;
	t[2].user.deleted = 1, t[2].user.has_deleted = 1;
	apply1(n, &t[2].op);
	assert_int_equal(keyfp_find(n, other, &user, &key), 0);

	/* a store from before the index: its keys and its mark gone */
	apply1(n, op_user(&t[3], "sitea", 4, HLC(103, 0), "bea", "a"));
	store_batch_new(&b, n->s);
	records_key_keyfp(&k, fp, "bea");
	store_del(b, CF_KEYFP, k.p, k.len);
	store_del(b, CF_META, "keyfp", 5);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	assert_int_equal(keyfp_find(n, fp, &user, &key), 0);
	node_close(n);
	n = node_open(f, 0);
	assert_int_equal(keyfp_find(n, fp, &user, &key), 1);
	assert_string_equal(user.p, "bea");
	assert_int_equal(keyfp_find(n, other, &user, &key), 0);
	buf_free(&user);
	buf_free(&key);
	buf_free(&k);
}

/* ---- the push log ------------------------------------------------------- */

struct plop {
	Grantd__V1__Op op;
	Grantd__V1__PushLogEntry e;
	Grantd__V1__RefChange ch, *chp[1];
	uint8_t prev[PUSHLOG_HASH_LEN], hash[PUSHLOG_HASH_LEN];
};

/* Operation seq of origin (in epoch) carrying entry n after prev (NULL:
 * the first), by user, stamped hlc. */
static Grantd__V1__Op *op_pushlog(struct plop *p, const char *origin,
				  uint64_t epoch, uint64_t seq, uint64_t hlc,
				  uint64_t n, const struct plop *prev,
				  const char *user)
{
	memset(p, 0, sizeof(*p));
	grantd__v1__op__init(&p->op);
	grantd__v1__push_log_entry__init(&p->e);
	grantd__v1__ref_change__init(&p->ch);
	p->op.origin = (char *)origin;
	p->op.epoch = epoch, p->op.has_epoch = 1;
	p->op.seq = seq, p->op.has_seq = 1;
	p->op.hlc = hlc, p->op.has_hlc = 1;
	p->ch.ref = "refs/heads/main";
	p->ch.old = "0000000000000000000000000000000000000000";
	p->ch.new_ = "1111111111111111111111111111111111111111";
	p->chp[0] = &p->ch;
	p->e.origin = (char *)origin;
	p->e.n = n, p->e.has_n = 1;
	if (prev)
		memcpy(p->prev, prev->hash, PUSHLOG_HASH_LEN);
	p->e.prev.data = p->prev, p->e.prev.len = PUSHLOG_HASH_LEN;
	p->e.has_prev = 1;
	p->e.user = (char *)user;
	p->e.repo = "demo";
	p->e.changes = p->chp, p->e.n_changes = 1;
	p->e.hlc = hlc, p->e.has_hlc = 1;
	pushlog_hash(p->hash, &p->e);
	p->e.hash.data = p->hash, p->e.hash.len = PUSHLOG_HASH_LEN;
	p->e.has_hash = 1;
	p->op.body_case = GRANTD__V1__OP__BODY_PUSH_LOG;
	p->op.push_log = &p->e;
	return &p->op;
}

static Grantd__V1__PushLogEntry *get_entry(struct node *n, const char *origin,
					   uint64_t num)
{
	struct buf k = BUF_INIT;
	void *m;

	records_key_pushlog(&k, origin, num);
	m = get_rec(n, CF_PUSHLOG, k.p, k.len,
		    &grantd__v1__push_log_entry__descriptor);
	buf_free(&k);
	return m;
}

/* RECORDS_SET: entries are kept as written, the chain head moves with
 * them; a forked entry (the same origin and number twice, as a wiped site
 * would make) merges to the earlier at every site whatever the order; a
 * snapshot's entries merge the same; ops_check refuses an entry of
 * another origin than its operation's. */
static void test_pushlog_merge(void **state)
{
	struct fixture *f = *state;
	static struct plop a1, a2, b1, fork1;
	struct node *x = node_open(f, 0), *y = node_open(f, 1);
	struct node *z = node_open(f, 2);
	Grantd__V1__PushLogEntry *e;
	uint8_t head[PUSHLOG_HASH_LEN];
	struct store_batch *b;
	struct buf why = BUF_INIT, v = BUF_INIT;
	uint64_t n;

	op_pushlog(&a1, "sitea", EPOCH, 1, HLC(1000, 0), 1, NULL, "alice");
	op_pushlog(&a2, "sitea", EPOCH, 2, HLC(1010, 0), 2, &a1, "bob");
	op_pushlog(&b1, "siteb", EPOCH, 1, HLC(1005, 0), 1, NULL, "carol");
	/* a wiped sitea (a new epoch) writes its entry 1 again, later */
	op_pushlog(&fork1, "sitea", EPOCH + 1, 1, HLC(2000, 0), 1, NULL,
		   "dave");

	apply1(x, &a1.op);
	apply1(x, &b1.op);
	apply1(x, &a2.op);
	apply1(x, &fork1.op);
	apply1(y, &fork1.op);
	apply1(y, &b1.op);
	apply1(y, &a1.op);
	apply1(y, &a2.op);
	assert_same_state(x, y);
	e = get_entry(y, "sitea", 1);
	assert_non_null(e);
	assert_string_equal(e->user, "alice"); /* the earlier kept */
	grantd__v1__push_log_entry__free_unpacked(e, NULL);
	for (int i = 0; i < 2; i++) {
		struct node *m = i ? y : x;
		assert_int_equal(ops_pushlog_head(m->o, NULL, "sitea", &n,
						  head), 0);
		assert_int_equal(n, 2);
		assert_memory_equal(head, a2.hash, PUSHLOG_HASH_LEN);
		assert_int_equal(ops_pushlog_head(m->o, NULL, "siteb", &n,
						  head), 0);
		assert_int_equal(n, 1);
	}
	assert_int_equal(ops_pushlog_head(x->o, NULL, "sitec", &n, head), 0);
	assert_int_equal(n, 0);

	/* a snapshot: x's entries merged into z make the same records and
	 * head; merged again, nothing is written */
	for (int round = 0; round < 2; round++) {
		struct store_iter *it;
		const char *key;
		size_t klen;
		store_batch_new(&b, z->s);
		store_iter_new(&it, x->s, NULL, CF_PUSHLOG, "", 0);
		while (store_iter_next(it, &key, &klen, &v) > 0)
			assert_int_equal(ops_merge_record(z->o, b, CF_PUSHLOG,
							  v.p, v.len, NULL,
							  &why), 0);
		store_iter_free(&it);
		if (round)
			assert_int_equal(store_batch_count(b), 0);
		assert_int_equal(ops_commit(z->o, b, false), 0);
		store_batch_free(&b);
	}
	assert_int_equal(ops_pushlog_head(z->o, NULL, "sitea", &n, head), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(head, a2.hash, PUSHLOG_HASH_LEN);
	e = get_entry(z, "siteb", 1);
	assert_non_null(e);
	assert_true(pushlog_hash_ok(e));
	grantd__v1__push_log_entry__free_unpacked(e, NULL);

	/* an entry must be its operation's origin's, and stamped alike */
	a1.e.origin = "siteb";
	assert_int_equal(ops_check(&a1.op, &why), GD_EPROTO);
	a1.e.origin = "sitea";
	a1.e.hlc++;
	assert_int_equal(ops_check(&a1.op, &why), GD_EPROTO);
	a1.e.hlc--;
	a1.e.prev.len = 31;
	assert_int_equal(ops_check(&a1.op, &why), GD_EPROTO);
	a1.e.prev.len = 32;
	a1.e.client_ip = "10.0.0.0/8";
	assert_int_equal(ops_check(&a1.op, &why), GD_EPROTO);
	a1.e.client_ip = "192.0.2.7";
	buf_reset(&why);
	assert_int_equal(ops_check(&a1.op, &why), 0);
	/* a bad hash is no reason to refuse: verify names it */
	a1.hash[0] ^= 1;
	assert_int_equal(ops_check(&a1.op, &why), 0);
	buf_free(&why);
	buf_free(&v);
}

/* A fork is kept whole (N2): the same (origin, n) twice, with different
 * contents, leaves both entries, the earlier (hlc, bytes) at origin \0 n
 * and the other under its hash, at every site whatever the order, and
 * counts one fork; an entry stamped no later than its predecessor is
 * refused and counted, live and in a state transfer alike, while its
 * operation still counts as applied. */
static void test_pushlog_fork(void **state)
{
	struct fixture *f = *state;
	static struct plop a1, a2, a2b, a3, a3late;
	struct node *x = node_open(f, 0), *y = node_open(f, 1);
	struct node *z = node_open(f, 2);
	Grantd__V1__PushLogEntry *e;
	struct store_batch *b;
	struct store_iter *it;
	struct buf k = BUF_INIT, v = BUF_INIT, why = BUF_INIT;
	uint8_t head[PUSHLOG_HASH_LEN];
	const char *key;
	size_t klen;
	uint64_t n;

	op_pushlog(&a1, "sitea", EPOCH, 1, HLC(1000, 0), 1, NULL, "alice");
	op_pushlog(&a2, "sitea", EPOCH, 2, HLC(1020, 0), 2, &a1, "bob");
	/* entry 2 again, stamped before the first 2 but after entry 1 */
	op_pushlog(&a2b, "sitea", EPOCH, 3, HLC(1010, 0), 2, &a1, "mallory");
	/* entry 3 stamped before its predecessor (either entry 2) */
	op_pushlog(&a3, "sitea", EPOCH, 4, HLC(1005, 0), 3, &a2b, "carol");
	op_pushlog(&a3late, "sitea", EPOCH + 1, 1, HLC(1030, 0), 3, &a2b,
		   "carol");

	apply1(x, &a1.op);
	apply1(x, &a2.op);
	apply1(x, &a2b.op);
	apply1(x, &a3.op);
	assert_int_equal(ops_vv_get(x->o, NULL, "sitea", EPOCH), 4);
	assert_int_equal(ops_pushlog_refused(x->o), 1);
	assert_null(get_entry(x, "sitea", 3));
	/* the other order: the fork first */
	apply1(y, &a1.op);
	a2b.op.seq = 2;
	apply1(y, &a2b.op);
	a2.op.seq = 3;
	apply1(y, &a2.op);
	apply1(y, &a3.op);
	assert_int_equal(ops_pushlog_refused(y->o), 1);
	a2.op.seq = 2, a2b.op.seq = 3;
	/* the records alike (the vectors' order aside) */
	assert_memory_equal(fam_digest(x->o, CF_PUSHLOG),
			    fam_digest(y->o, CF_PUSHLOG), DIGEST_LEN);
	for (int i = 0; i < 2; i++) {
		struct node *m = i ? y : x;
		e = get_entry(m, "sitea", 2);
		assert_non_null(e);
		assert_string_equal(e->user, "mallory"); /* the earlier */
		grantd__v1__push_log_entry__free_unpacked(e, NULL);
		records_key_pushlog_fork(&k, "sitea", 2, a2.hash);
		e = get_rec(m, CF_PUSHLOG, k.p, k.len,
			    &grantd__v1__push_log_entry__descriptor);
		assert_non_null(e);
		assert_string_equal(e->user, "bob"); /* kept too */
		grantd__v1__push_log_entry__free_unpacked(e, NULL);
		assert_int_equal(ops_pushlog_forks(m->o, NULL, &n), 0);
		assert_int_equal(n, 1);
		assert_int_equal(ops_pushlog_head(m->o, NULL, "sitea", &n,
						  head), 0);
		assert_int_equal(n, 2);
		assert_memory_equal(head, a2b.hash, PUSHLOG_HASH_LEN);
	}
	/* the same fork again changes nothing */
	a2.op.seq = 5;
	apply1(x, &a2.op);
	assert_int_equal(ops_pushlog_forks(x->o, NULL, &n), 0);
	assert_int_equal(n, 1);
	a2.op.seq = 2;

	/* a state transfer from x: both entries, one fork; an entry
	 * stamped before its predecessor refused there too */
	store_batch_new(&b, z->s);
	store_iter_new(&it, x->s, NULL, CF_PUSHLOG, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0)
		assert_int_equal(ops_merge_record(z->o, b, CF_PUSHLOG, v.p,
						  v.len, NULL, &why), 0);
	store_iter_free(&it);
	buf_reset(&v);
	buf_extend(&v, grantd__v1__push_log_entry__get_packed_size(&a3.e));
	grantd__v1__push_log_entry__pack(&a3.e, (uint8_t *)v.p);
	assert_int_equal(ops_merge_record(z->o, b, CF_PUSHLOG, v.p, v.len,
					  NULL, &why), 0);
	assert_int_equal(ops_commit(z->o, b, false), 0);
	store_batch_free(&b);
	assert_int_equal(ops_pushlog_refused(z->o), 1);
	assert_null(get_entry(z, "sitea", 3));
	assert_memory_equal(fam_digest(x->o, CF_PUSHLOG),
			    fam_digest(z->o, CF_PUSHLOG), DIGEST_LEN);
	assert_int_equal(ops_pushlog_forks(z->o, NULL, &n), 0);
	assert_int_equal(n, 1);
	/* an entry 3 stamped after both entries 2 is taken */
	apply1(z, &a3late.op);
	e = get_entry(z, "sitea", 3);
	assert_non_null(e);
	grantd__v1__push_log_entry__free_unpacked(e, NULL);
	assert_int_equal(ops_pushlog_refused(z->o), 1);
	buf_free(&k);
	buf_free(&v);
	buf_free(&why);
}

/* The heads a site publishes (plheads_build) are what a peer keeps
 * (plheads_take) and lists for log verify (plheads_list); a head that does
 * not check is refused and counted, one already kept is not written
 * again. */
static void test_pushlog_peer_heads(void **state)
{
	struct fixture *f = *state;
	static struct plop a1, a2;
	struct node *x = node_open(f, 0), *y = node_open(f, 1);
	Grantd__V1__PushLogHeads h;
	Grantd__V1__PushLogHead bad = GRANTD__V1__PUSH_LOG_HEAD__INIT;
	Grantd__V1__PushLogHead **all;
	struct plheads_peer *got = NULL;
	struct store_batch *b;
	struct buf why = BUF_INIT;

	op_pushlog(&a1, "sitea", EPOCH, 1, HLC(1000, 0), 1, NULL, "alice");
	op_pushlog(&a2, "sitea", EPOCH, 2, HLC(1010, 0), 2, &a1, "bob");
	apply1(x, &a1.op);
	apply1(x, &a2.op);
	assert_int_equal(plheads_build(x->s, &h), 0);
	assert_int_equal(h.n_heads, 1);
	assert_string_equal(h.heads[0]->origin, "sitea");
	assert_int_equal(h.heads[0]->n, 2);
	assert_memory_equal(h.heads[0]->hash.data, a2.hash, PUSHLOG_HASH_LEN);

	/* with one head that does not check: a 31-byte hash */
	bad.origin = "siteb";
	bad.n = 1, bad.has_n = 1;
	bad.hash.data = a1.hash, bad.hash.len = 31, bad.has_hash = 1;
	all = calloc(2, sizeof(*all));
	assert_non_null(all);
	all[0] = h.heads[0];
	all[1] = &bad;
	Grantd__V1__PushLogHeads two = GRANTD__V1__PUSH_LOG_HEADS__INIT;
	two.heads = all, two.n_heads = 2;
	store_batch_new(&b, y->s);
	assert_int_equal(plheads_take(y->s, b, "node0", &two, &why), 1);
	assert_true(why.len > 0);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	assert_int_equal(plheads_list(y->s, &got), 1);
	assert_string_equal(got[0].peer, "node0");
	assert_string_equal(got[0].origin, "sitea");
	assert_int_equal(got[0].n, 2);
	assert_memory_equal(got[0].hash, a2.hash, PUSHLOG_HASH_LEN);
	free(got);
	/* the same again: nothing to write */
	store_batch_new(&b, y->s);
	assert_int_equal(plheads_take(y->s, b, "node0", &h, &why), 0);
	assert_int_equal(store_batch_count(b), 0);
	store_batch_free(&b);
	free(all);
	plheads_free(&h);
	buf_free(&why);
}

/* ---- read-only mirrors ---------------------------------------------------- */

/* Which operations a mirror may hold (ops_mirror_visible), and a mirror
 * fed as a frontend feeds it: visible operations applied, hidden ones
 * taken as their stamp alone (ops_skip).  It ends with the same vector
 * and public digest as the frontend, and with no record (nor log entry)
 * of a hidden family. */
static void test_mirror_filter(void **state)
{
	struct fixture *f = *state;
	struct node *fe = node_open(f, 0), *mi = node_open(f, 1);
	struct top t[7], x;
	struct store_batch *b;
	struct buf k = BUF_INIT, v = BUF_INIT;
	uint8_t pf[DIGEST_LEN], pm[DIGEST_LEN];
	bool applied;

	Grantd__V1__Op *ops[7] = {
		op_user(&t[0], "sitea", 1, HLC(10, 0), "mia", "k1"),
		op_enroll(&t[1], "sitea", 2, HLC(11, 0), "mia",
			  "12345678901234567890", HLC(11, 0)),
		op_grant(&t[2], "sitea", 3, HLC(12, 0), "mia", "192.0.2.4",
			 1800000000, false),
		op_repo(&t[3], "sitea", 4, HLC(13, 0), "proj",
			GRANTD__V1__REPO_MODE__MODE_REQUIRED, false),
		op_mark(&t[4], "sitea", 5, HLC(14, 0), "mia", HLC(11, 0), 7, 0),
		op_unlock(&t[5], "sitea", 6, HLC(15, 0), "mia"),
		op_user(&t[6], "sitea", 7, HLC(16, 0), "mia", "k2"),
	};
	const bool visible[7] = { true, false, false, true, false, false,
				  true };

	/* the rule, body by body */
	for (int i = 0; i < 7; i++)
		assert_int_equal(ops_mirror_visible(ops[i]), visible[i]);
	assert_false(ops_mirror_visible(NULL));
	stamp(&x, "sitea", 1, HLC(1, 0));
	assert_false(ops_mirror_visible(&x.op)); /* no body */
	x.op.body_case = GRANTD__V1__OP__BODY_REFS;
	assert_true(ops_mirror_visible(&x.op));
	x.op.body_case = GRANTD__V1__OP__BODY_REVOKE;
	assert_false(ops_mirror_visible(&x.op));
	x.op.body_case = GRANTD__V1__OP__BODY_FAILURE;
	assert_false(ops_mirror_visible(&x.op));

	apply_all(fe, ops, 7);

	/* a hidden op out of order is a gap, nothing written */
	store_batch_new(&b, mi->s);
	applied = true;
	assert_int_equal(ops_skip(mi->o, b, "sitea", EPOCH, 2, HLC(11, 0),
				  &applied), GD_EINVAL);
	assert_false(applied);
	assert_false(ops_pending(mi->o, b));
	for (int i = 0; i < 7; i++) {
		applied = false;
		if (visible[i])
			assert_int_equal(ops_apply(mi->o, b, ops[i], &applied),
					 0);
		else
			assert_int_equal(ops_skip(mi->o, b, "sitea", EPOCH,
						  ops[i]->seq, ops[i]->hlc,
						  &applied), 0);
		assert_true(applied);
	}
	/* again: duplicates, taken as nothing */
	assert_int_equal(ops_skip(mi->o, b, "sitea", EPOCH, 2, HLC(11, 0),
				  &applied), 0);
	assert_false(applied);
	assert_int_equal(ops_commit(mi->o, b, false), 0);
	store_batch_free(&b);

	/* level with the frontend, and the clock saw the hidden stamps */
	assert_int_equal(ops_vv_get(mi->o, NULL, "sitea", EPOCH), 7);
	assert_true(ops_hlc_last(mi->o) >= HLC(16, 0));
	/* the public records and digest are the frontend's, the full digest
	 * is not (the secret families are missing) */
	ops_digest_public(fe->o, pf);
	ops_digest_public(mi->o, pm);
	assert_memory_equal(pf, pm, DIGEST_LEN);
	assert_memory_not_equal(ops_digest(fe->o), ops_digest(mi->o),
				DIGEST_LEN);
	check_digest(mi);
	Grantd__V1__User *u = get_rec(mi, CF_USERS, "mia", 3,
				      &grantd__v1__user__descriptor);
	assert_non_null(u);
	assert_string_equal(u->keys[0], key_of("k2"));
	free_rec(u);
	/* nothing of a hidden family, at the mirror; all of it at the
	 * frontend (so these checks can fail) */
	for (int cf = 0; cf < CF__COUNT; cf++) {
		if (!records_replicated((enum store_cf)cf) ||
		    records_mirror_visible((enum store_cf)cf))
			continue;
		struct store_iter *it;
		const char *key;
		size_t klen;
		store_iter_new(&it, mi->s, NULL, (enum store_cf)cf, "", 0);
		assert_int_equal(store_iter_next(it, &key, &klen, &v), 0);
		store_iter_free(&it);
	}
	assert_null(get_grant(mi, "mia", "192.0.2.4"));
	Grantd__V1__Grant *g = get_grant(fe, "mia", "192.0.2.4");
	assert_non_null(g);
	free_rec(g);
	/* the log holds the visible operations only */
	for (int i = 0; i < 7; i++) {
		buf_reset(&k);
		records_key_oplog(&k, "sitea", EPOCH, ops[i]->seq);
		assert_int_equal(store_get(mi->s, NULL, CF_OPLOG, k.p, k.len,
					   &v) == 0, visible[i]);
		assert_int_equal(store_get(fe->s, NULL, CF_OPLOG, k.p, k.len,
					   &v), 0);
	}
	buf_free(&k);
	buf_free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lww_grant_later_hlc_wins,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lww_equal_hlc_greater_origin_wins, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_lww_users_enroll_unlock,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lww_repo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_apply_failure_keeps_digest,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_vv_deferred, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_savepoint, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_verify, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mark_merge, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failure_merge, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failure_same_ms, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failure_bound, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_idempotent, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_oplog, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncate_log, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_gap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_convergence, setup,
						teardown),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_check_bounds),
		cmocka_unit_test(test_check_addr_revoke),
		cmocka_unit_test_setup_teardown(test_merge_record, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_merge_record_one, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_merge_record_bad, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sweep_keeps_digest,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_local, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counts_rollback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_keyfp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pushlog_peer_heads, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pushlog_fork, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pushlog_merge, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_mirror_filter, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_merge_record_trust, setup,
						teardown),

	};
	return cmocka_run_group_tests(tests, setup_group, teardown_group);
}
