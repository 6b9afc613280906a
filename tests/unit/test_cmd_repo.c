/*
 * test_cmd_repo.c: node/cmd_repo.c, the pushes grant-hook hands over
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
#include "cmd.h"
#include "config.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "ops.h"
#include "policy.h"
#include "records.h"
#include "store.h"

#define OLD "0000000000000000000000000000000000000000"
#define NEW1 "1111111111111111111111111111111111111111"
#define NEW2 "2222222222222222222222222222222222222222"

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
	"test_cmd_repo seal key 012345678";

struct fixture {
	char dir[64];
	char repo_dir[128];
	struct config cfg;
	struct store *store;
	struct ops o;
	struct store_batch *b;
	struct cmd_table *t;
	Grantd__V1__Request rq;
	char *args[4];
	struct req r;
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

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_cmd_repo",
			     false) < 0)
		return -1;
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repositories", f->dir);
	/* what gitolite made: two repositories, one of them its admin */
	snprintf(cmd, sizeof(cmd), "git init -q --bare '%s/demo.git' && "
		 "git init -q --bare '%s/gitolite-admin.git'", f->repo_dir,
		 f->repo_dir);
	if (system(cmd) != 0)
		return -1;
	f->cfg.site = "sitea";
	f->cfg.repo_dir = f->repo_dir;
	f->cfg.gitolite_home = f->dir;
	f->cfg.gitolite_program = "gitolite";
	if (fx_store_open(&f->store, &f->o, f->dir, &f->cfg, seal_key) < 0 ||
	    store_batch_new(&f->b, f->store) < 0 ||
	    cmd_table_new(&f->t) < 0)
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

/* hook.refs REPO LINE as grant-hook sends it, handled in the batch.
 * Returns the request, answered. */
static struct req *hook_refs(struct fixture *f, const char *repo,
			     const char *line)
{
	const struct cmd *c = cmd_table_find(f->t, "hook.refs");
	struct cmd_ctx x = { 0 };
	struct req *r = &f->r;

	buf_free(&r->out);
	buf_free(&r->err);
	memset(r, 0, sizeof(*r));
	grantd__v1__request__init(&f->rq);
	f->rq.cmd = "hook.refs";
	f->args[0] = (char *)repo;
	f->args[1] = (char *)line;
	f->rq.args = f->args;
	f->rq.n_args = 2;
	r->rq = &f->rq;
	r->now = 1700000000;
	r->now_ms = 1700000000000ull;
	assert_non_null(c);
	assert_int_equal(cmd_admit(c, r, NULL, NULL, false), 0);
	x.p.cfg = &f->cfg;
	x.p.store = f->store;
	x.p.batch = f->b;
	x.p.host = "git.example.org";
	x.ops = &f->o;
	assert_int_equal(c->fn(&x, r), 0);
	return r;
}

/* The operations made since the last call, their kinds in order into
 * kinds (at most max); returns how many.  The outbox is emptied. */
static size_t outbox(struct fixture *f, Grantd__V1__Op__BodyCase *kinds,
		     size_t max)
{
	const uint8_t *p = (const uint8_t *)f->o.outbox.p;
	size_t off = 0, n = 0;

	while (off + 4 <= f->o.outbox.len) {
		size_t len = (size_t)p[off] << 24 | (size_t)p[off + 1] << 16 |
			     (size_t)p[off + 2] << 8 | p[off + 3];
		assert_true(off + 4 + len <= f->o.outbox.len);
		Grantd__V1__Op *op = grantd__v1__op__unpack(NULL, len,
							     p + off + 4);
		assert_non_null(op);
		if (n < max)
			kinds[n] = op->body_case;
		n++;
		grantd__v1__op__free_unpacked(op, NULL);
		off += 4 + len;
	}
	assert_int_equal(off, f->o.outbox.len);
	ops_outbox_clear(&f->o);
	return n;
}

/* The record of repo through the batch (NULL: none). */
static Grantd__V1__Repo *record(struct fixture *f, const char *repo)
{
	struct policy_ctx pc = { &f->cfg, f->store, f->b, "h" };
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
	/* the record first, then the push: every site applies them so */
	assert_int_equal(outbox(f, k, 4), 2);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REPO);
	assert_int_equal(k[1], GRANTD__V1__OP__BODY_REFS);

	/* the next push finds the record: no second one */
	r = hook_refs(f, "demo.git", NEW1 " " NEW2 " refs/heads/master");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_int_equal(outbox(f, k, 4), 1);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REFS);

	/* gitolite's own admin repository registers the same way */
	r = hook_refs(f, "gitolite-admin", OLD " " NEW1 " refs/heads/master");
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_int_equal(outbox(f, k, 4), 2);
	assert_int_equal(k[0], GRANTD__V1__OP__BODY_REPO);
	assert_int_equal(k[1], GRANTD__V1__OP__BODY_REFS);
	rp = record(f, "gitolite-admin");
	assert_non_null(rp);
	grantd__v1__repo__free_unpacked(rp, NULL);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_first_push_registers,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing_to_replicate,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_gitolite, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
