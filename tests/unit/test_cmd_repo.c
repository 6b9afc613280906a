/*
 * test_cmd_repo.c: node/requests/cmd_repo.c, the pushes grant-hook hands over
 * (hook.refs), beside gitolite and not.
 *
 * A real store and operations module, the handler run as control.c runs
 * a CMD_BATCH row: in a batch, its operations in ops.outbox.
 *  - Beside gitolite, the first push to a repository that has no record
 *    but a directory (gitolite made it) registers it: Repo{name, mode off}
 *    and then the RefUpdate, in that order, in one batch; the next push
 *    makes no second record.  gitolite-admin registers itself the same
 *    way.
 *  - Beside gitolite, a repository with neither record nor directory is
 *    still not hosted here; a name grantd refuses is refused as bad input.
 *  - Without gitolite nothing changed: a directory is not a record.
 *  - repo add of a bare repository already in repo_dir adopts it: its refs
 *    are recorded (a RefUpdate after the Repo, same batch); anything else
 *    there is refused with what to do.
 *  - repo del and repo rename: refused for a repository with forks,
 *    beside gitolite, and (rename) onto a name that exists; otherwise the
 *    records they make, and the directories repos_follow then moves
 *    (aside, or renamed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glob.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "buf.h"
#include "cmd.h"
#include "config.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "ops.h"
#include "policy.h"
#include "pushleaf.h"
#include "pushlog.h"
#include "records.h"
#include "repos.h"
#include "store.h"

#define OLD  "0000000000000000000000000000000000000000"
#define NEW1 "1111111111111111111111111111111111111111"
#define NEW2 "2222222222222222222222222222222222222222"

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
        "test_cmd_repo seal key 012345678";

struct fixture {
	char dir[64];
	char repo_dir[128];
	struct config cfg;
	struct store *store;
	struct ops *o;
	struct store_batch *b;
	struct cmd_table *t;
	Grantd__V1__Request rq;
	char *args[8];
	struct req r;
	/* the node-wide facts a handler gets (NULL: none, as before) */
	const struct cmd_node *node;
};

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_cmd_repo", LOG_LVL_ERROR);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char cmd[512];

	if (!f ||
	    fx_mkdtemp(f->dir, sizeof(f->dir), "test_cmd_repo", false) < 0)
		return -1;
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repositories", f->dir);
	/* what gitolite made: two repositories, one of them its admin */
	snprintf(cmd, sizeof(cmd),
	         "git init -q --bare '%s/demo.git' && "
	         "git init -q --bare '%s/gitolite-admin.git'",
	         f->repo_dir, f->repo_dir);
	if (system(cmd) != 0)
		return -1;
	f->cfg.site = "sitea";
	f->cfg.repo_dir = f->repo_dir;
	f->cfg.gitolite_home = f->dir;
	f->cfg.gitolite_program = "gitolite";
	if (fx_store_open(&f->store, &f->o, f->dir, &f->cfg, seal_key) < 0 ||
	    store_batch_new(&f->b, f->store) < 0 || cmd_table_new(&f->t) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	buf_free(&f->r.out);
	buf_free(&f->r.err);
	buf_free(&f->r.uri);
	buf_free(&f->r.path);
	cmd_table_free(&f->t);
	store_batch_free(&f->b);
	fx_store_close(&f->store, &f->o);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

/* Request name with args, fresh in f (the previous answer freed). */
static struct req *
request(struct fixture *f, const char *name, char **args, size_t n)
{
	struct req *r = &f->r;

	buf_free(&r->out);
	buf_free(&r->err);
	memset(r, 0, sizeof(*r));
	grantd__v1__request__init(&f->rq);
	f->rq.cmd = (char *)name;
	f->rq.args = args;
	f->rq.n_args = n;
	r->rq = &f->rq;
	r->now = 1700000000;
	r->now_ms = 1700000000000ull;
	return r;
}

/* Admit and run r's command, in f's batch (in_batch) or on committed
 * state as a reader thread runs it.  Returns r, answered. */
static struct req *run(struct fixture *f, struct req *r, bool in_batch)
{
	const struct cmd *c = cmd_table_find(f->t, f->rq.cmd);
	struct cmd_ctx x = {0};

	assert_non_null(c);
	assert_int_equal(cmd_admit(c, r, &f->cfg, NULL, false), 0);
	x.p.cfg = &f->cfg;
	x.p.store = f->store;
	x.p.host = "git.example.org";
	x.node = f->node;
	if (in_batch) {
		x.p.batch = f->b;
		x.ops = f->o;
	}
	assert_int_equal(c->fn(&x, r), 0);
	return r;
}

/* hook.refs REPO LINE as grant-hook sends it, with a request id and who
 * pushed (NULL: not sent), handled in the batch.  Returns the request,
 * answered. */
static struct req *hook_refs_by(struct fixture *f,
                                const char *repo,
                                const char *line,
                                const char *id,
                                const char *user,
                                const char *ip,
                                const char *fp,
                                const char *kind,
                                const char *factor)
{
	struct req *r;

	f->args[0] = (char *)repo;
	f->args[1] = (char *)line;
	r = request(f, "hook.refs", f->args, 2);
	f->rq.push_id = (char *)id;
	f->rq.user = (char *)user;
	f->rq.client_ip = (char *)ip;
	f->rq.key_fp = (char *)fp;
	f->rq.key_kind = (char *)kind;
	f->rq.factor = (char *)factor;
	return run(f, r, true);
}

/* The same without an id or who pushed. */
static struct req *
hook_refs(struct fixture *f, const char *repo, const char *line)
{
	return hook_refs_by(f, repo, line, NULL, NULL, NULL, NULL, NULL, NULL);
}

/* A reader command (log.page, log.verify) with args, from the admin
 * socket.  Returns the request, answered. */
static struct req *
reader(struct fixture *f, const char *name, const char **args, size_t n)
{
	struct req *r = request(f, name, (char **)args, n);

	r->admin = true;
	return run(f, r, false);
}

/* The operations made since the last call, their kinds in order into
 * kinds (at most max); returns how many.  The outbox is emptied. */
static size_t
outbox(struct fixture *f, Grantd__V1__Op__BodyCase *kinds, size_t max)
{
	struct buf box = BUF_INIT;
	size_t off = 0, n = 0;

	ops_take_outbox(f->o, &box);
	const uint8_t *p = (const uint8_t *)box.p;
	while (off + 4 <= box.len) {
		size_t len = (size_t)p[off] << 24 | (size_t)p[off + 1] << 16 |
		             (size_t)p[off + 2] << 8 | p[off + 3];
		assert_true(off + 4 + len <= box.len);
		Grantd__V1__Op *op =
		        grantd__v1__op__unpack(NULL, len, p + off + 4);
		assert_non_null(op);
		if (n < max)
			kinds[n] = op->body_case;
		n++;
		grantd__v1__op__free_unpacked(op, NULL);
		off += 4 + len;
	}
	assert_int_equal(off, box.len);
	buf_free(&box);
	return n;
}

/* The record of repo through the batch (NULL: none). */
static Grantd__V1__Repo *record(struct fixture *f, const char *repo)
{
	struct policy_ctx pc = {&f->cfg, f->store, f->b, "h", NULL};
	Grantd__V1__Repo *rp = NULL;
	int rc = policy_repo_load(&rp, &pc, repo);

	assert_true(rc == 0 || rc == GD_ENOTFOUND);
	return rp;
}

static bool ref_recorded(struct fixture *f, const char *repo, const char *ref)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	records_key_ref(&k, repo, ref);
	rc = store_get(f->store, f->b, CF_REFS, k.p, k.len, &v);
	buf_free(&k);
	buf_free(&v);
	return rc == 0;
}

static void test_first_push_registers(void **state)
{
	struct fixture *f = *state;
	Grantd__V1__Op__BodyCase k[4];
	struct req *r;

	r = hook_refs(f, "demo", OLD " " NEW1 " refs/heads/master");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_non_null(strstr(buf_str(&r->out), "replicating 1 ref update "
	                                         "of demo"));
	Grantd__V1__Repo *rp = record(f, "demo");
	assert_non_null(rp);
	assert_string_equal(rp->name, "demo");
	assert_int_equal(rp->mode, GRANTD__V1__REPO_MODE__MODE_OFF);
	assert_int_equal(rp->n_writers, 0);
	assert_true(rp->fork_of == NULL || !*rp->fork_of);
	grantd__v1__repo__free_unpacked(rp, NULL);
	assert_true(ref_recorded(f, "demo", "refs/heads/master"));
	/* the record first, then the push and its push log entry: every
	 * site applies them so */
	assert_int_equal(outbox(f, k, 4), 3);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REPO);
	assert_int_equal(k[1], GRANTD__V1__OP__BODY_REFS);
	assert_int_equal(k[2], GRANTD__V1__OP__BODY_PUSH_LOG);

	/* the next push finds the record: no second one */
	r = hook_refs(f, "demo.git", NEW1 " " NEW2 " refs/heads/master");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_int_equal(outbox(f, k, 4), 2);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REFS);
	assert_int_equal(k[1], GRANTD__V1__OP__BODY_PUSH_LOG);

	/* gitolite's own admin repository registers the same way */
	r = hook_refs(f, "gitolite-admin", OLD " " NEW1 " refs/heads/master");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_int_equal(outbox(f, k, 4), 3);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REPO);
	assert_int_equal(k[1], GRANTD__V1__OP__BODY_REFS);
	rp = record(f, "gitolite-admin");
	assert_non_null(rp);
	grantd__v1__repo__free_unpacked(rp, NULL);
}

/* The entry of this site's n-th push, through the batch (NULL: none). */
static Grantd__V1__PushLogEntry *entry(struct fixture *f, uint64_t n)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	Grantd__V1__PushLogEntry *e = NULL;

	records_key_pushlog(&k, "sitea", n);
	if (store_get(f->store, f->b, CF_PUSHLOG, k.p, k.len, &v) == 0)
		e = grantd__v1__push_log_entry__unpack(NULL, v.len,
		                                       (const uint8_t *)v.p);
	buf_free(&k);
	buf_free(&v);
	return e;
}

/* Each push recorded here is logged: who grant-hook says pushed (what
 * does not check is left out, the push still recorded), numbered and
 * chained after this site's head, in the push's batch; a resent push
 * (same request id) is logged once. */
static void test_push_logged(void **state)
{
	struct fixture *f = *state;
	static const char id[] = "0000018f2a3b4c5d9e8f7a6b5c4d3e2f-0";
	Grantd__V1__Op__BodyCase k[4];
	Grantd__V1__PushLogEntry *e1, *e2;
	uint8_t zero[PUSHLOG_HASH_LEN] = {0}, head[PUSHLOG_HASH_LEN];
	uint64_t n;
	struct req *r;

	f->rq.user = NULL;
	r = hook_refs_by(f, "demo", OLD " " NEW1 " refs/heads/master", id,
	                 "alice", "192.0.2.7",
	                 "SHA256:ieGENRwGkZ2ZJH/wEtzcd6Ql", "plain", "grant");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_int_equal(outbox(f, k, 4), 3);
	e1 = entry(f, 1);
	assert_non_null(e1);
	assert_string_equal(e1->origin, "sitea");
	assert_int_equal(e1->n, 1);
	assert_memory_equal(e1->prev.data, zero, PUSHLOG_HASH_LEN);
	assert_true(pushlog_hash_ok(e1));
	assert_string_equal(e1->user, "alice");
	assert_string_equal(e1->client_ip, "192.0.2.7");
	assert_string_equal(e1->key_fp, "SHA256:ieGENRwGkZ2ZJH/wEtzcd6Ql");
	assert_string_equal(e1->key_kind, "plain");
	assert_string_equal(e1->factor, "grant");
	assert_string_equal(e1->repo, "demo");
	assert_string_equal(e1->push_id, id);
	/* the push's own time: its id's clock */
	assert_int_equal(e1->pushed_ms, 0x18f2a3b4c5dLL);
	assert_int_equal(e1->n_changes, 1);
	assert_string_equal(e1->changes[0]->ref, "refs/heads/master");
	assert_string_equal(e1->changes[0]->old, OLD);
	assert_string_equal(e1->changes[0]->new_, NEW1);
	assert_int_equal(ops_pushlog_head(f->o, f->b, "sitea", &n, head), 0);
	assert_int_equal(n, 1);
	assert_memory_equal(head, e1->hash.data, PUSHLOG_HASH_LEN);

	/* the same request again (its answer timed out): no second entry */
	r = hook_refs_by(f, "demo", OLD " " NEW1 " refs/heads/master", id,
	                 "alice", "192.0.2.7", NULL, "plain", "grant");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_int_equal(outbox(f, k, 4), 0);
	assert_null(entry(f, 2));

	/* then the next push: entry 2 after entry 1; bad words left out,
	 * the push recorded all the same */
	r = hook_refs_by(f, "demo", NEW1 " " NEW2 " refs/heads/master", NULL,
	                 "Bad User", "300.1.1.1", "MD5:00", NULL, "magic");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_int_equal(outbox(f, k, 4), 2);
	e2 = entry(f, 2);
	assert_non_null(e2);
	assert_int_equal(e2->n, 2);
	assert_memory_equal(e2->prev.data, e1->hash.data, PUSHLOG_HASH_LEN);
	assert_true(pushlog_hash_ok(e2));
	assert_null(e2->user);
	assert_null(e2->client_ip);
	assert_null(e2->key_fp);
	assert_null(e2->key_kind);
	assert_null(e2->factor);
	assert_int_equal(e2->pushed_ms, 1700000000000LL);
	assert_true(e2->hlc > e1->hlc);
	/* the chain walks clean */
	struct pushlog_verify v;
	pushlog_verify_init(&v);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 1, e1), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 2, e2), PUSHLOG_OK);
	grantd__v1__push_log_entry__free_unpacked(e1, NULL);
	grantd__v1__push_log_entry__free_unpacked(e2, NULL);

	/* committed, the reader commands see them: a page of one, newest
	 * first, with the cursor of the next; the chain intact */
	assert_int_equal(ops_commit(f->o, f->b, false), 0);
	static const char *page[] = {"--max", "1"};
	r = reader(f, "log.page", page, 2);
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_non_null(strstr(buf_str(&r->out),
	                       "site=sitea n=2 repo=demo "
	                       "user=- ip=- key=- kind=- factor=-\n"));
	assert_null(strstr(buf_str(&r->out), "n=1"));
	assert_true(r->next[0]);
	char cursor[sizeof(r->next)];
	memcpy(cursor, r->next, sizeof(cursor));
	const char *next[] = {"--max", "1", "--before", cursor};
	r = reader(f, "log.page", next, 4);
	assert_non_null(strstr(buf_str(&r->out),
	                       "site=sitea n=1 repo=demo "
	                       "user=alice ip=192.0.2.7 key=SHA256:"));
	assert_string_equal(r->next, "");
	r = reader(f, "log.verify", NULL, 0);
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_string_equal(buf_str(&r->out), "push log: 2 entries from 1 "
	                                      "site, all chains intact\n");

	/* the newest entry removed from the disk (no operation): no gap,
	 * but the head this site recorded shows it */
	struct store_batch *b;
	struct buf key = BUF_INIT;
	assert_int_equal(store_batch_new(&b, f->store), 0);
	records_key_pushlog(&key, "sitea", 2);
	store_del(b, CF_PUSHLOG, key.p, key.len);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	buf_free(&key);
	r = reader(f, "log.verify", NULL, 0);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err),
	                       "push log: chain of site "
	                       "sitea broken at entry 2: it and the entries "
	                       "after it are missing"));
}

/* The operations made since the last call, unpacked, into ops (at most
 * max, each the caller's); returns how many.  The outbox is emptied. */
static size_t outbox_ops(struct fixture *f, Grantd__V1__Op **ops, size_t max)
{
	struct buf box = BUF_INIT;
	size_t off = 0, n = 0;

	ops_take_outbox(f->o, &box);
	const uint8_t *p = (const uint8_t *)box.p;
	while (off + 4 <= box.len && n < max) {
		size_t len = (size_t)p[off] << 24 | (size_t)p[off + 1] << 16 |
		             (size_t)p[off + 2] << 8 | p[off + 3];
		ops[n] = grantd__v1__op__unpack(NULL, len, p + off + 4);
		assert_non_null(ops[n]);
		n++;
		off += 4 + len;
	}
	buf_free(&box);
	return n;
}

/* issue 21: with every frontend on "push-tlog" (here: a node without
 * peers), a push gets a transparency log leaf in its batch, numbered at
 * the site's tree size; its entry keeps the salt and the leaf's index, the
 * leaf the address only as the salt's commitment; the answer says where
 * it was logged.  Without the node's facts (no feature known) none. */
static void test_push_leaf(void **state)
{
	struct fixture *f = *state;
	struct cmd_node nd = {.ops = f->o}; /* no repl: no peers */
	Grantd__V1__Op *ops[4];
	struct pushleaf l;
	uint8_t commit[PUSHLEAF_COMMIT_LEN];
	struct req *r;
	size_t n;

	/* no node: no leaf (and no "logged as") */
	r = hook_refs(f, "demo", OLD " " NEW1 " refs/heads/master");
	assert_null(strstr(buf_str(&r->out), "logged as"));
	n = outbox_ops(f, ops, 4);
	for (size_t i = 0; i < n; i++) {
		assert_int_not_equal(ops[i]->body_case,
		                     GRANTD__V1__OP__BODY_PUSH_LEAF);
		grantd__v1__op__free_unpacked(ops[i], NULL);
	}

	f->node = &nd;
	for (uint64_t want = 0; want < 2; want++) {
		r = hook_refs_by(f, "demo",
		                 want ? NEW1 " " NEW2 " refs/heads/master"
		                      : OLD " " NEW1 " refs/heads/dev",
		                 NULL, "alice", "192.0.2.7", NULL, "plain",
		                 "grant");
		assert_int_equal(r->status, GD_EXIT_OK);
		char logged[64];
		snprintf(logged, sizeof(logged), "logged as sitea#%llu\n",
		         (unsigned long long)want);
		assert_non_null(strstr(buf_str(&r->out), logged));
		assert_int_equal(outbox_ops(f, ops, 4), 3);
		assert_int_equal(ops[0]->body_case, GRANTD__V1__OP__BODY_REFS);
		assert_int_equal(ops[1]->body_case,
		                 GRANTD__V1__OP__BODY_PUSH_LOG);
		assert_int_equal(ops[2]->body_case,
		                 GRANTD__V1__OP__BODY_PUSH_LEAF);
		const Grantd__V1__PushLogEntry *e = ops[1]->push_log;
		const Grantd__V1__PushLeaf *pl = ops[2]->push_leaf;
		assert_true(e->has_leaf_index);
		assert_int_equal(e->leaf_index, want);
		assert_int_equal(e->addr_salt.len, PUSHLEAF_SALT_LEN);
		assert_string_equal(pl->origin, "sitea");
		assert_int_equal(pl->index, want);
		assert_int_equal(pushleaf_parse(&l, pl->text.data, pl->text.len),
		                 0);
		assert_int_equal(l.index, want);
		assert_string_equal(l.origin, "sitea");
		assert_string_equal(l.repo, "demo");
		assert_string_equal(l.user, "alice");
		assert_string_equal(l.kind, "plain");
		assert_string_equal(l.factor, "grant");
		assert_int_equal(l.nrefs, 1);
		/* the address only as its commitment under the entry's salt */
		assert_true(l.has_addr);
		pushleaf_addr_commit(commit, e->addr_salt.data, "192.0.2.7");
		assert_memory_equal(l.addr, commit, sizeof(commit));
		char *txt = strndup((const char *)pl->text.data, pl->text.len);
		assert_null(strstr(txt, "192.0.2.7"));
		free(txt);
		pushleaf_free(&l);
		for (int i = 0; i < 3; i++)
			grantd__v1__op__free_unpacked(ops[i], NULL);
	}
	/* log verify: the chain and the tree */
	assert_int_equal(ops_commit(f->o, f->b, false), 0);
	f->node = NULL;
	r = reader(f, "log.verify", NULL, 0);
	assert_int_equal(r->status, GD_EXIT_OK);
	f->rq.json = true;
	r = run(f, r, false);
	assert_non_null(strstr(buf_str(&r->out), "\"tlog\":{\"trees\":[{"
	                                          "\"site\":\"sitea\","
	                                          "\"size\":2,"));
	assert_non_null(strstr(buf_str(&r->out), "\"intact\":true"));
	f->rq.json = false;
	static const char *page[] = {"--max", "1"};
	r = reader(f, "log.page", page, 2);
	assert_non_null(strstr(buf_str(&r->out), " leaf=1\n"));
}

/* Only a ref grantd does not replicate: nothing to record, and no record
 * for the repository either (an empty one needs none). */
static void test_nothing_to_replicate(void **state)
{
	struct fixture *f = *state;
	Grantd__V1__Op__BodyCase k[4];
	struct req *r;

	r = hook_refs(f, "demo", OLD " " NEW1 " refs/grantd/conflicts/x/y");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_int_equal(outbox(f, k, 4), 0);
	assert_null(record(f, "demo"));
}

static void test_refused(void **state)
{
	struct fixture *f = *state;
	Grantd__V1__Op__BodyCase k[4];
	struct req *r;

	/* no directory: gitolite does not host it either */
	r = hook_refs(f, "nosuch", OLD " " NEW1 " refs/heads/master");
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err), "repository 'nosuch' is not "
	                                         "hosted here"));
	assert_null(record(f, "nosuch"));
	/* a name gitolite allows and grantd does not: one clear line */
	r = hook_refs(f, "a@b", OLD " " NEW1 " refs/heads/master");
	assert_int_equal(r->status, GD_EXIT_USAGE);
	assert_non_null(strstr(buf_str(&r->err), "bad repository name 'a@b'"));
	assert_null(strchr(buf_str(&r->err), '\n'));
	/* a bad line registers nothing */
	r = hook_refs(f, "demo", "not a ref update");
	assert_int_equal(r->status, GD_EXIT_USAGE);
	assert_int_equal(outbox(f, k, 4), 0);
	assert_null(record(f, "demo"));
}

/* Outside gitolite mode nothing changed: a directory is not a record. */
static void test_not_gitolite(void **state)
{
	struct fixture *f = *state;
	Grantd__V1__Op__BodyCase k[4];
	struct req *r;

	f->cfg.gitolite_home = NULL;
	f->cfg.gitolite_program = NULL;
	r = hook_refs(f, "demo", OLD " " NEW1 " refs/heads/master");
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err), "repository 'demo' is not "
	                                         "hosted here"));
	assert_int_equal(outbox(f, k, 4), 0);
	assert_null(record(f, "demo"));
	assert_false(ref_recorded(f, "demo", "refs/heads/master"));
}

/* ---- repo add of an existing repository, repo del, repo rename ---------- */

/* An admin command with args (NULL-terminated), in the batch. */
static struct req *admin_cmd(struct fixture *f, const char *name, ...)
{
	struct req *r;
	va_list ap;
	size_t n = 0;
	char *a;

	va_start(ap, name);
	while ((a = va_arg(ap, char *)) && n < GD_ARRAY_SIZE(f->args))
		f->args[n++] = a;
	va_end(ap);
	r = request(f, name, f->args, n);
	r->admin = true;
	return run(f, r, true);
}

/* A shell command (git), which must succeed. */
static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("failed: %s", cmd);
}

/* repo_dir/NAME.git: a bare repository with one commit on head's branch,
 * and (more) a branch dev and a tag v1 at it; HEAD names head. */
static void
bare_repo(struct fixture *f, const char *name, const char *head, bool more)
{
	sh("set -e; w='%s/w'; rm -rf \"$w\"; git init -q \"$w\"; "
	   "git -C \"$w\" -c user.name=t -c user.email=t@example.org commit "
	   "-q --allow-empty -m one; git -C \"$w\" branch -M %s; %s"
	   "git init -q --bare '%s/%s.git'; "
	   "git -C \"$w\" push -q '%s/%s.git' --all 2>/dev/null; "
	   "git -C \"$w\" push -q '%s/%s.git' --tags 2>/dev/null; "
	   "git --git-dir='%s/%s.git' symbolic-ref HEAD refs/heads/%s",
	   f->dir, head,
	   more ? "git -C \"$w\" branch dev; git -C \"$w\" tag v1; " : "",
	   f->repo_dir, name, f->repo_dir, name, f->repo_dir, name, f->repo_dir,
	   name, head);
}

/* ref's target in repo_dir/REPO.git, by git */
static void
git_tip(struct fixture *f, const char *repo, const char *ref, char *out)
{
	char cmd[512];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "git --git-dir='%s/%s.git' rev-parse %s",
	         f->repo_dir, repo, ref);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, 41, p));
	pclose(p);
}

/* The Ref record's target ("" deleted; NULL: no record). */
static char *ref_target(struct fixture *f, const char *repo, const char *ref)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	char *t = NULL;

	records_key_ref(&k, repo, ref);
	if (store_get(f->store, f->b, CF_REFS, k.p, k.len, &v) == 0) {
		Grantd__V1__Ref *rec = grantd__v1__ref__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		assert_non_null(rec);
		t = strdup(rec->target ? rec->target : "");
		grantd__v1__ref__free_unpacked(rec, NULL);
	}
	buf_free(&k);
	buf_free(&v);
	return t;
}

static void assert_target(struct fixture *f,
                          const char *repo,
                          const char *ref,
                          const char *want)
{
	char *t = ref_target(f, repo, ref);

	if (!t || strcmp(t, want))
		fail_msg("%s %s: target '%s', want '%s'", repo, ref,
		         t ? t : "(no record)", want);
	free(t);
}

/* Commit the batch, then make the disk follow, as the writer does. */
static void commit_follow(struct fixture *f)
{
	struct buf names = BUF_INIT, failed = BUF_INIT, box = BUF_INIT;

	ops_take_outbox(f->o, &box);
	buf_free(&box);
	assert_int_equal(ops_commit(f->o, f->b, false), 0);
	ops_take_repos(f->o, &names);
	assert_int_equal(repos_follow(f->store, f->repo_dir, "exec true", true,
	                              &names, &failed),
	                 0);
	assert_int_equal(failed.len, 0);
	buf_free(&names);
	buf_free(&failed);
}

static bool dir_there(struct fixture *f, const char *repo)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s.git", f->repo_dir, repo);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* How many repo_dir/REPO.git.grantd-deleted-* there are. */
static size_t set_aside(struct fixture *f, const char *repo)
{
	char pat[256];
	glob_t g;
	size_t n;

	snprintf(pat, sizeof(pat), "%s/%s.git.grantd-deleted-*", f->repo_dir,
	         repo);
	if (glob(pat, 0, NULL, &g) != 0)
		return 0;
	n = g.gl_pathc;
	globfree(&g);
	return n;
}

/* A bare repository there is adopted: its refs recorded after its record,
 * in one batch; a HEAD other than main is noted; an empty one has no
 * refs to record. */
static void test_add_adopts(void **state)
{
	struct fixture *f = *state;
	Grantd__V1__Op__BodyCase k[4];
	char tip[41];
	struct req *r;

	f->cfg.gitolite_home = NULL;
	bare_repo(f, "old", "master", true);
	r = admin_cmd(f, "repo.add", "old", "--mode", "off", NULL);
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_non_null(strstr(buf_str(&r->out), "adopted repository old (3 "
	                                         "refs replicate)\n"));
	assert_non_null(strstr(buf_str(&r->out), "note: its HEAD is "
	                                         "refs/heads/master here"));
	assert_int_equal(outbox(f, k, 4), 2);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REPO);
	assert_int_equal(k[1], GRANTD__V1__OP__BODY_REFS);
	git_tip(f, "old", "refs/heads/master", tip);
	assert_target(f, "old", "refs/heads/master", tip);
	assert_target(f, "old", "refs/heads/dev", tip);
	git_tip(f, "old", "refs/tags/v1", tip);
	assert_target(f, "old", "refs/tags/v1", tip);
	Grantd__V1__Repo *rp = record(f, "old");
	assert_non_null(rp);
	assert_int_equal(rp->mode, GRANTD__V1__REPO_MODE__MODE_OFF);
	grantd__v1__repo__free_unpacked(rp, NULL);
	/* a second add is refused as before */
	r = admin_cmd(f, "repo.add", "old", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err), "already exists"));

	bare_repo(f, "plain", "main", false);
	r = admin_cmd(f, "repo.add", "plain.git", NULL);
	assert_string_equal(buf_str(&r->out), "adopted repository plain (1 ref "
	                                      "replicates)\n");
	assert_int_equal(outbox(f, k, 4), 2);

	sh("git init -q --bare '%s/empty.git'", f->repo_dir);
	r = admin_cmd(f, "repo.add", "empty", NULL);
	assert_non_null(strstr(buf_str(&r->out), "adopted repository empty (0 "
	                                         "refs replicate)\n"));
	assert_int_equal(outbox(f, k, 4), 1);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REPO);

	/* made whole for grantd after the commit: the hook, nothing lost */
	commit_follow(f);
	char hook[256];
	struct stat st;
	snprintf(hook, sizeof(hook), "%s/old.git/hooks/post-receive",
	         f->repo_dir);
	assert_int_equal(stat(hook, &st), 0);
	git_tip(f, "old", "refs/heads/dev", tip);
	assert_target(f, "old", "refs/heads/dev", tip);
}

/* Something there that is not a bare repository: refused, nothing made;
 * nothing there: a new repository, as before. */
static void test_add_refuses(void **state)
{
	struct fixture *f = *state;
	Grantd__V1__Op__BodyCase k[4];
	struct req *r;

	f->cfg.gitolite_home = NULL;
	sh("mkdir -p '%s/junk.git' && echo x >'%s/file.git'", f->repo_dir,
	   f->repo_dir);
	r = admin_cmd(f, "repo.add", "junk", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err), "/junk.git exists and is not "
	                                         "a bare git repository"));
	assert_non_null(strstr(buf_str(&r->err), "move it away or choose "
	                                         "another name"));
	assert_null(strchr(buf_str(&r->err), '\n'));
	assert_null(record(f, "junk"));
	r = admin_cmd(f, "repo.add", "file", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err), "not a directory"));
	assert_int_equal(outbox(f, k, 4), 0);

	r = admin_cmd(f, "repo.add", "fresh", NULL);
	assert_string_equal(buf_str(&r->out), "added repository fresh (mode "
	                                      "required)\n");
	assert_int_equal(outbox(f, k, 4), 1);
}

/* repo del: refused for a parent with forks (named), beside gitolite, and
 * for what does not exist; otherwise the record and every ref deleted in
 * one batch, the directory moved aside after the commit, and a new add of
 * the name starting empty. */
static void test_del(void **state)
{
	struct fixture *f = *state;
	Grantd__V1__Op__BodyCase k[4];
	struct req *r;

	f->cfg.gitolite_home = NULL;
	admin_cmd(f, "repo.add", "p", "--mode", "off", NULL);
	admin_cmd(f, "repo.add", "f1", "--fork-of", "p", NULL);
	admin_cmd(f, "repo.add", "f2", "--fork-of", "p", NULL);
	hook_refs(f, "p", OLD " " NEW1 " refs/heads/master");
	commit_follow(f);
	assert_true(dir_there(f, "p"));

	r = admin_cmd(f, "repo.del", "p", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err),
	                       "cannot delete 'p': it has "
	                       "forks, whose objects live in it through "
	                       "alternates: f1, f2"));
	r = admin_cmd(f, "repo.del", "f1", NULL);
	assert_int_equal(r->status, GD_EXIT_OK);
	r = admin_cmd(f, "repo.del", "f2", NULL);
	assert_int_equal(r->status, GD_EXIT_OK);
	outbox(f, k, 4);

	r = admin_cmd(f, "repo.del", "p.git", NULL);
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_non_null(strstr(buf_str(&r->out),
	                       "deleted repository p (1 ref "
	                       "dropped); at every site its directory is "
	                       "moved aside to p.git.grantd-deleted-"));
	assert_int_equal(outbox(f, k, 4), 2);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REPO);
	assert_int_equal(k[1], GRANTD__V1__OP__BODY_REFS);
	assert_null(record(f, "p"));
	assert_target(f, "p", "refs/heads/master", "");
	commit_follow(f);
	assert_false(dir_there(f, "p"));
	assert_int_equal(set_aside(f, "p"), 1);
	assert_int_equal(set_aside(f, "f1"), 1);

	r = admin_cmd(f, "repo.del", "p", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err), "no such repository 'p'"));
	/* added again: a new, empty repository, not the one set aside */
	r = admin_cmd(f, "repo.add", "p", NULL);
	assert_string_equal(buf_str(&r->out), "added repository p (mode "
	                                      "required)\n");
	commit_follow(f);
	assert_true(dir_there(f, "p"));
	assert_target(f, "p", "refs/heads/master", "");
	/* deleted a second time within the same second: a second place */
	admin_cmd(f, "repo.del", "p", NULL);
	commit_follow(f);
	assert_int_equal(set_aside(f, "p"), 2);

	f->cfg.gitolite_home = f->dir;
	r = admin_cmd(f, "repo.del", "demo", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err),
	                       "beside gitolite: "
	                       "gitolite.conf owns the list of "
	                       "repositories"));
	assert_int_equal(outbox(f, k, 4), 0);
}

/* repo rename: refused onto a repository or a directory that exists, for
 * a parent with forks, beside gitolite; otherwise NEW with OLD's settings
 * and refs and OLD deleted, in one batch, and the directory renamed after
 * the commit (nothing set aside, the objects kept). */
static void test_rename(void **state)
{
	struct fixture *f = *state;
	Grantd__V1__Op__BodyCase k[8];
	struct req *r;

	f->cfg.gitolite_home = NULL;
	admin_cmd(f, "repo.add", "a", "--mode", "opt-in", "--writer", "alice",
	          NULL);
	admin_cmd(f, "repo.add", "b", NULL);
	hook_refs(f, "a", OLD " " NEW1 " refs/heads/master");
	hook_refs(f, "a", OLD " " NEW2 " refs/heads/dev");
	commit_follow(f);
	sh("echo hello | git --git-dir='%s/a.git' hash-object -w --stdin "
	   ">/dev/null",
	   f->repo_dir); /* an object to keep */

	r = admin_cmd(f, "repo.rename", "a", "b", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err), "repository 'b' already "
	                                         "exists"));
	sh("mkdir -p '%s/c.git'", f->repo_dir);
	r = admin_cmd(f, "repo.rename", "a", "c", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err),
	                       "/c.git exists (not a "
	                       "repository of grantd's): move it away"));
	r = admin_cmd(f, "repo.rename", "a", "a.git", NULL);
	assert_int_equal(r->status, GD_EXIT_USAGE);
	admin_cmd(f, "repo.add", "af", "--fork-of", "a", NULL);
	r = admin_cmd(f, "repo.rename", "a", "z", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err),
	                       "cannot rename 'a': it has "
	                       "forks, whose objects live in it through "
	                       "alternates: af"));
	admin_cmd(f, "repo.del", "af", NULL);
	outbox(f, k, 8);

	r = admin_cmd(f, "repo.rename", "a", "z/y", NULL);
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_string_equal(buf_str(&r->out), "renamed repository a to z/y (2 "
	                                      "refs)\n");
	assert_int_equal(outbox(f, k, 8), 4);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REPO);
	assert_int_equal(k[1], GRANTD__V1__OP__BODY_REFS);
	assert_int_equal(k[2], GRANTD__V1__OP__BODY_REPO);
	assert_int_equal(k[3], GRANTD__V1__OP__BODY_REFS);
	Grantd__V1__Repo *rp = record(f, "z/y");
	assert_non_null(rp);
	assert_int_equal(rp->mode, GRANTD__V1__REPO_MODE__MODE_OPT_IN);
	assert_int_equal(rp->n_writers, 1);
	assert_string_equal(rp->writers[0], "alice");
	assert_string_equal(rp->renamed_from, "a");
	grantd__v1__repo__free_unpacked(rp, NULL);
	assert_null(record(f, "a"));
	assert_target(f, "z/y", "refs/heads/master", NEW1);
	assert_target(f, "z/y", "refs/heads/dev", NEW2);
	assert_target(f, "a", "refs/heads/master", "");
	assert_target(f, "a", "refs/heads/dev", "");
	commit_follow(f);
	assert_false(dir_there(f, "a"));
	assert_true(dir_there(f, "z/y"));
	assert_int_equal(set_aside(f, "a"), 0);
	sh("git --git-dir='%s/z/y.git' cat-file -e "
	   "ce013625030ba8dba906f756967f9e9ca394464a",
	   f->repo_dir);

	/* a change of the renamed repository drops the rename's mark */
	r = admin_cmd(f, "repo.mode", "z/y", "off", NULL);
	assert_int_equal(r->status, GD_EXIT_OK);
	rp = record(f, "z/y");
	assert_true(!rp->renamed_from || !*rp->renamed_from);
	grantd__v1__repo__free_unpacked(rp, NULL);

	f->cfg.gitolite_home = f->dir;
	r = admin_cmd(f, "repo.rename", "z/y", "w", NULL);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(buf_str(&r->err), "cannot rename a repository "
	                                         "beside gitolite"));
}

/* Put a Repo record straight into the store (a peer's, applied in an
 * earlier batch): name, stamp, deleted, renamed_from. */
static void put_repo(struct fixture *f,
                     const char *name,
                     uint64_t hlc,
                     bool deleted,
                     const char *from)
{
	Grantd__V1__Repo rp = GRANTD__V1__REPO__INIT;
	struct store_batch *b;
	uint8_t buf[512];
	size_t n;

	rp.name = (char *)name;
	SET(rp, mode, GRANTD__V1__REPO_MODE__MODE_OFF);
	SET(rp, deleted, deleted);
	rp.renamed_from = (char *)from;
	SET(rp, hlc, hlc);
	rp.origin = "siteb";
	n = grantd__v1__repo__pack(&rp, buf);
	assert_int_equal(store_batch_new(&b, f->store), 0);
	store_put(b, CF_REPOS, name, strlen(name), buf, n);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
}

/* repos_follow of names ("a\0b\0"); returns how many it left for later. */
static size_t follow(struct fixture *f, const char *names, size_t len)
{
	struct buf nb = BUF_INIT, failed = BUF_INIT;
	size_t n = 0;

	buf_add(&nb, names, len);
	assert_int_equal(repos_follow(f->store, f->repo_dir, "exec true", true,
	                              &nb, &failed),
	                 0);
	for (size_t off = 0; off < failed.len;
	     off += strlen(failed.p + off) + 1)
		n++;
	buf_free(&nb);
	buf_free(&failed);
	return n;
}

/* A site that applies a rename in two batches: NEW's record first (OLD
 * still live and older): NEW waits, nothing made; then OLD's deletion:
 * OLD.git becomes NEW.git.  When OLD's live record is newer than the
 * rename (added again since), NEW is made empty instead. */
static void test_follow_rename_split(void **state)
{
	struct fixture *f = *state;

	put_repo(f, "old", 100, false, NULL);
	assert_int_equal(follow(f, "old", 4), 0);
	assert_true(dir_there(f, "old"));
	sh("echo hello | git --git-dir='%s/old.git' hash-object -w --stdin "
	   ">/dev/null",
	   f->repo_dir);
	put_repo(f, "new", 200, false, "old");
	assert_int_equal(follow(f, "new", 4), 1); /* later */
	assert_false(dir_there(f, "new"));
	assert_true(dir_there(f, "old"));
	put_repo(f, "old", 300, true, NULL);
	assert_int_equal(follow(f, "old", 4), 0);
	assert_false(dir_there(f, "old"));
	assert_true(dir_there(f, "new"));
	assert_int_equal(set_aside(f, "old"), 0);
	sh("git --git-dir='%s/new.git' cat-file -e "
	   "ce013625030ba8dba906f756967f9e9ca394464a",
	   f->repo_dir);
	/* the retry finds it there: settled, nothing left */
	assert_int_equal(follow(f, "new", 4), 0);

	/* x renamed to y, but x added again since (a newer live record) */
	put_repo(f, "x", 100, false, NULL);
	assert_int_equal(follow(f, "x", 2), 0);
	put_repo(f, "x", 400, false, NULL);
	put_repo(f, "y", 200, false, "x");
	assert_int_equal(follow(f, "y", 2), 0);
	assert_true(dir_there(f, "y"));
	assert_true(dir_there(f, "x"));
	/* a deleted record's directory left by a stop: moved aside at start */
	put_repo(f, "x", 500, true, NULL);
	assert_int_equal(repos_follow_deleted(f->store, f->repo_dir, NULL), 0);
	assert_false(dir_there(f, "x"));
	assert_int_equal(set_aside(f, "x"), 1);
}

/* A site of an older release keeps renamed_from as an unknown field, which
 * protobuf-c packs after the fields it knows: the record's bytes (and so
 * the digest) are the same only when renamed_from comes last here too. */
static void test_renamed_from_last(void **state)
{
	Grantd__V1__Repo rp = GRANTD__V1__REPO__INIT;
	uint8_t with[256], without[256];
	size_t n1, n2;

	(void)state;
	rp.name = "new";
	SET(rp, mode, GRANTD__V1__REPO_MODE__MODE_OPT_IN);
	rp.fork_of = "p";
	SET(rp, hlc, 12345);
	rp.origin = "sitea";
	n2 = grantd__v1__repo__pack(&rp, without);
	rp.renamed_from = "old";
	n1 = grantd__v1__repo__pack(&rp, with);
	assert_true(n1 > n2);
	assert_memory_equal(with, without, n2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_first_push_registers,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_push_logged, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_push_leaf, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_nothing_to_replicate,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_not_gitolite, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_add_adopts, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_add_refuses, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_del, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_follow_rename_split, setup,
	                                        teardown),
	        cmocka_unit_test(test_renamed_from_last),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
