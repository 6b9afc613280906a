/*
 * test_gitrepl.c: node/gitrepl.h, the disk following the ref records.
 *
 * A real store (RocksDB) and a real bare repository (libgit2), the actor
 * thread running, no peers: records are written the way apply_refs()
 * writes them, the actor is told which refs changed, and the test waits
 * (bounded) for the disk to show the effect:
 *  - a record whose tip is here moves the ref (fast-forward or not);
 *  - a deleted record deletes the ref;
 *  - a loser the winner descends from is dropped, one it does not is kept
 *    as refs/grantd/conflicts/SITE/REF and marked "kept" (the marks come
 *    back over the pair and the test, as the writer, stores them);
 *  - a record whose objects no peer can give leaves the ref where it is
 *    and stays pending.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <git2.h>
#include <sodium.h>
#include <zmq.h>

#include "buf.h"
#include "config.h"
#include "err.h"
#include "gitrepl.h"
#include "log.h"
#include "peer.h"
#include "repos.h"
#include "store.h"

#define REF "refs/heads/master"
#define WAIT_MS 10000

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] = "test_gitrepl seal key 0123456789";

struct fx {
	char dir[64];
	char repo_dir[128], data_dir[128], conf[128];
	struct store *store;
	void *zctx;
	struct peer_self self;
	struct gitrepl *g;
	char hook_path[256], conf_path[256];
	git_repository *repo;
	git_oid a, b, c;        /* a <- b, a <- c: b and c diverge */
};

static void commit(git_repository *repo, git_oid *out, const char *text,
		   const git_oid *parent_id)
{
	git_treebuilder *tb;
	git_oid blob, tree;
	git_tree *t;
	git_signature *sig;
	git_commit *parent = NULL;

	assert_int_equal(git_blob_create_from_buffer(&blob, repo, text,
						     strlen(text)), 0);
	assert_int_equal(git_treebuilder_new(&tb, repo, NULL), 0);
	assert_int_equal(git_treebuilder_insert(NULL, tb, "f", &blob,
						GIT_FILEMODE_BLOB), 0);
	assert_int_equal(git_treebuilder_write(&tree, tb), 0);
	git_treebuilder_free(tb);
	assert_int_equal(git_tree_lookup(&t, repo, &tree), 0);
	assert_int_equal(git_signature_new(&sig, "t", "t@e", 1700000000, 0), 0);
	if (parent_id)
		assert_int_equal(git_commit_lookup(&parent, repo, parent_id), 0);
	assert_int_equal(git_commit_create_v(out, repo, NULL, sig, sig, NULL,
					     text, t, parent ? 1 : 0, parent),
			 0);
	git_commit_free(parent);
	git_signature_free(sig);
	git_tree_free(t);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	bool created;
	FILE *fp;

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_gitrepl.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	snprintf(f->data_dir, sizeof(f->data_dir), "%s/data", f->dir);
	snprintf(f->conf, sizeof(f->conf), "%s/grantd.conf", f->dir);
	assert_non_null(fp = fopen(f->conf, "w"));
	fclose(fp);
	assert_int_equal(mkdir(f->repo_dir, 0755), 0);
	/* a hook that does nothing, until a test rewrites the file: the
	 * actor reads hook_path, so the path never changes while it runs */
	snprintf(f->hook_path, sizeof(f->hook_path), "%s/hook.sh", f->dir);
	assert_non_null(fp = fopen(f->hook_path, "w"));
	fprintf(fp, "#!/bin/sh\nexit 0\n");
	fclose(fp);
	assert_int_equal(chmod(f->hook_path, 0755), 0);
	snprintf(f->conf_path, sizeof(f->conf_path), "%s", f->conf);
	assert_int_equal(store_open(&f->store, &created, f->data_dir,
				    seal_key), 0);
	assert_non_null(f->zctx = zmq_ctx_new());
	assert_int_equal(repos_create(f->repo_dir, "r", NULL, NULL), 0);
	{
		struct buf p = BUF_INIT;
		repos_path(&p, f->repo_dir, "r");
		assert_int_equal(git_repository_open_bare(&f->repo, p.p), 0);
		buf_free(&p);
	}
	commit(f->repo, &f->a, "a", NULL);
	commit(f->repo, &f->b, "b", &f->a);
	commit(f->repo, &f->c, "c", &f->a);
	f->self = (struct peer_self){ f->zctx, "paloalto", NULL, NULL };
	assert_int_equal(gitrepl_start(&f->g, &(struct gitrepl_opts){
					       .self = &f->self,
					       .repo_dir = f->repo_dir,
					       .store = f->store,
					       .hook_path = f->hook_path,
					       .conf_path = f->conf_path }),
			 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	gitrepl_stop(&f->g);
	git_repository_free(f->repo);
	store_destroy(&f->store);
	zmq_ctx_term(f->zctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* The record apply_refs() would leave for ref of repository r: target
 * NULL means deleted. */
static void put_ref_record(struct fx *f, const char *ref,
			   const git_oid *target, uint64_t hlc,
			   const char *origin)
{
	Grantd__V1__Ref rec = GRANTD__V1__REF__INIT;
	struct store_batch *b;
	char hex[GIT_OID_HEXSZ + 1] = "";
	char key[128];
	size_t klen = (size_t)snprintf(key, sizeof(key), "r%c%s", 0, ref);
	uint8_t buf[256];
	struct buf touched = BUF_INIT;

	if (target)
		git_oid_tostr(hex, sizeof(hex), target);
	rec.repo = "r";
	rec.ref = (char *)ref;
	rec.target = hex;
	rec.has_hlc = true;
	rec.hlc = hlc;
	rec.origin = (char *)origin;
	size_t len = grantd__v1__ref__pack(&rec, buf);
	assert_int_equal(store_batch_new(&b, f->store), 0);
	store_put(b, CF_REFS, key, klen, buf, len);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	buf_add(&touched, key, klen + 1);
	gitrepl_changed(f->g, &touched);
	assert_int_equal(touched.len, 0);
	buf_free(&touched);
}

static void put_record(struct fx *f, const git_oid *target, uint64_t hlc,
		       const char *origin)
{
	put_ref_record(f, REF, target, hlc, origin);
}

static void loser_key(struct buf *k, const char *origin, uint64_t hlc)
{
	uint8_t be[8];
	store_be64(be, hlc);
	buf_reset(k);
	buf_add(k, "r\0" REF, sizeof("r\0" REF));
	buf_add(k, origin, strlen(origin) + 1);
	buf_add(k, be, sizeof(be));
}

static void put_loser(struct fx *f, const char *origin, uint64_t hlc,
		      const git_oid *tip)
{
	struct store_batch *b;
	struct buf k = BUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];

	git_oid_tostr(hex, sizeof(hex), tip);
	loser_key(&k, origin, hlc);
	assert_int_equal(store_batch_new(&b, f->store), 0);
	store_put(b, CF_LOSERS, k.p, k.len, hex, strlen(hex));
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	buf_free(&k);
}

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The ref's target on disk now (zero oid when absent). */
static git_oid disk(struct fx *f, const char *name)
{
	git_oid id;
	if (git_reference_name_to_id(&id, f->repo, name) < 0)
		memset(&id, 0, sizeof(id));
	return id;
}

/* Wait (bounded) until ref name points at want (NULL: absent). */
static bool wait_ref(struct fx *f, const char *name, const git_oid *want)
{
	git_oid zero;
	memset(&zero, 0, sizeof(zero));
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end;
	     usleep(2000)) {
		git_oid got = disk(f, name);
		if (git_oid_equal(&got, want ? want : &zero))
			return true;
	}
	return false;
}

/* The writer's part: take what the actor sent, store its conflict marks. */
static void pump(struct fx *f)
{
	struct store_batch *b;

	assert_int_equal(store_batch_new(&b, f->store), 0);
	if (gitrepl_pump(f->g, NULL, b) > 0)
		assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
}

static double status_num(struct fx *f, const char *field)
{
	cJSON *o = cJSON_CreateObject();
	pump(f);
	gitrepl_status(f->g, o);
	double v = cJSON_GetObjectItem(o, field)->valuedouble;
	cJSON_Delete(o);
	return v;
}

static void test_record_moves_ref(void **state)
{
	struct fx *f = *state;

	put_record(f, &f->b, 100, "portland");
	assert_true(wait_ref(f, REF, &f->b));
	/* not a fast-forward: moves all the same, the record is the truth */
	put_record(f, &f->c, 200, "montreal");
	assert_true(wait_ref(f, REF, &f->c));
	/* counted just after the move: wait for it too */
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (status_num(f, "refs_moved") >= 2)
			break;
	assert_true(status_num(f, "refs_moved") >= 2);
	/* deleted */
	put_record(f, NULL, 300, "portland");
	assert_true(wait_ref(f, REF, NULL));
}

/* Two pushes here in quick succession: the disk already holds the second
 * when the first one's record is applied; the ref must not step back.  A
 * record from another site that is an ancestor is a rewind: it moves. */
static void test_own_record_behind_disk(void **state)
{
	struct fx *f = *state;
	git_oid d;
	git_reference *r;

	/* disk at b (a later local push), record a (this site's, earlier) */
	assert_int_equal(git_reference_create(&r, f->repo, REF, &f->b, 1,
					      NULL), 0);
	git_reference_free(r);
	put_record(f, &f->a, 100, "paloalto");
	/* A barrier instead of a pause: the gitrepl thread takes changed
	 * records in order, so once a later record of another ref has moved
	 * that ref, the first record has been dealt with: b must hold. */
	put_ref_record(f, "refs/heads/barrier", &f->c, 150, "portland");
	assert_true(wait_ref(f, "refs/heads/barrier", &f->c));
	d = disk(f, REF);
	assert_true(git_oid_equal(&d, &f->b));
	/* the positive control: another site's record a moves the ref back */
	put_record(f, &f->a, 200, "portland");
	assert_true(wait_ref(f, REF, &f->a));
}

/* A push here that the hook could not hand to the node (spooled) is
 * not rolled back: the repository is left alone, and the hook is run to
 * send the spool; once it is gone the record is followed. */
static void test_spool_left_alone(void **state)
{
	struct fx *f = *state;
	char path[256], seen[256] = "";
	FILE *fp;

	/* the stand-in hook notes what the ref was when it ran, then
	 * empties the spool as grant-hook does once it has sent it */
	snprintf(path, sizeof(path), "%s/hook.sh.new", f->dir);
	assert_non_null(fp = fopen(path, "w"));
	fprintf(fp, "#!/bin/sh\ngit --git-dir=. rev-parse -q --verify " REF
		" >../../hook-saw; rm -f grantd-spool/*.refs\n");
	fclose(fp);
	assert_int_equal(chmod(path, 0755), 0);
	assert_int_equal(rename(path, f->hook_path), 0);
	snprintf(path, sizeof(path), "%s/r.git/grantd-spool", f->repo_dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/r.git/grantd-spool/1.refs",
		 f->repo_dir);
	assert_non_null(fp = fopen(path, "w"));
	fclose(fp);

	put_record(f, &f->b, 100, "portland");
	assert_true(wait_ref(f, REF, &f->b));
	/* the hook ran before the ref moved, and saw it absent */
	snprintf(path, sizeof(path), "%s/hook-saw", f->dir);
	assert_non_null(fp = fopen(path, "r"));
	assert_null(fgets(seen, sizeof(seen), fp));
	fclose(fp);
}

static void test_losers(void **state)
{
	struct fx *f = *state;
	struct buf k = BUF_INIT, v = BUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];
	const char *kept = "refs/grantd/conflicts/montreal/" REF;

	/* a lost to b, but b builds on a: no conflict; c did not */
	put_loser(f, "portland", 90, &f->a);
	put_loser(f, "montreal", 95, &f->c);
	put_record(f, &f->b, 100, "paloalto");
	assert_true(wait_ref(f, REF, &f->b));
	assert_true(wait_ref(f, kept, &f->c));
	loser_key(&k, "montreal", 95);
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (pump(f), store_get(f->store, NULL, CF_LOSERS, k.p, k.len,
				       &v) == 0 && v.len > GIT_OID_HEXSZ)
			break;
	git_oid_tostr(hex, sizeof(hex), &f->c);
	assert_int_equal(v.len, GIT_OID_HEXSZ + strlen(" kept"));
	assert_memory_equal(v.p, hex, GIT_OID_HEXSZ);
	assert_memory_equal(v.p + GIT_OID_HEXSZ, " kept", 5);
	/* the ancestor's entry went (checked before the conflict was kept,
	 * in key order: montreal < portland, so wait for it) */
	loser_key(&k, "portland", 90);
	int rc = 0;
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (pump(f), (rc = store_get(f->store, NULL, CF_LOSERS, k.p,
					     k.len, &v)) == GD_ENOTFOUND)
			break;
	assert_int_equal(rc, GD_ENOTFOUND);
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (status_num(f, "conflicts_kept") >= 1)
			break;
	assert_int_equal((int)status_num(f, "conflicts_kept"), 1);
	buf_free(&k);
	buf_free(&v);
}

/* The actor never writes the store: a conflict it keeps on disk is only
 * marked "kept" in CF_LOSERS once the writer has taken the mark from the
 * pair (gitrepl_pump) and committed it. */
static void test_marks_written_by_writer(void **state)
{
	struct fx *f = *state;
	struct buf k = BUF_INIT, v = BUF_INIT;
	const char *kept = "refs/grantd/conflicts/montreal/" REF;

	put_loser(f, "montreal", 95, &f->c);
	put_record(f, &f->b, 100, "paloalto");
	assert_true(wait_ref(f, kept, &f->c));
	usleep(200 * 1000); /* time enough for a write, had the actor made it */
	loser_key(&k, "montreal", 95);
	assert_int_equal(store_get(f->store, NULL, CF_LOSERS, k.p, k.len, &v),
			 0);
	assert_int_equal(v.len, GIT_OID_HEXSZ); /* the bare tip, not kept */
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (pump(f), store_get(f->store, NULL, CF_LOSERS, k.p, k.len,
				       &v) == 0 && v.len > GIT_OID_HEXSZ)
			break;
	assert_int_equal(v.len, GIT_OID_HEXSZ + strlen(" kept"));
	assert_memory_equal(v.p + GIT_OID_HEXSZ, " kept", 5);
	buf_free(&k);
	buf_free(&v);
}

static void test_missing_objects_wait(void **state)
{
	struct fx *f = *state;
	git_oid absent;

	put_record(f, &f->b, 100, "paloalto");
	assert_true(wait_ref(f, REF, &f->b));
	/* an object nobody here has, and no peer to ask */
	assert_int_equal(git_oid_fromstr(&absent,
			 "0123456789abcdef0123456789abcdef01234567"), 0);
	put_record(f, &absent, 200, "portland");
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (status_num(f, "pending_refs") >= 1)
			break;
	assert_true(status_num(f, "pending_refs") >= 1);
	git_oid now = disk(f, REF);
	assert_true(git_oid_equal(&now, &f->b));
	/* the record moves on to a tip that is here: the ref follows */
	put_record(f, &f->c, 300, "portland");
	assert_true(wait_ref(f, REF, &f->c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_record_moves_ref, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_record_behind_disk,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_spool_left_alone, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_losers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_marks_written_by_writer,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_objects_wait,
						setup, teardown),
	};
	if (sodium_init() < 0)
		return 1;
	git_libgit2_init();
	log_init("test_gitrepl", false, LOG_LVL_WARN);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
