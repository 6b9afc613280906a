/*
 * test_gitrepl.c: node/git/gitrepl.h, the disk following the ref records.
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
 *    and stays pending;
 *  - a record whose repository is not there yet waits for it, and is
 *    followed once it appears (beside gitolite, which makes them);
 *  - beside gitolite, a move of gitolite-admin's master (HEAD's branch)
 *    runs `PROGRAM grantd-admin-sync` (a stand-in script here) once at a
 *    time, with an environment of its own, and again for a move made
 *    while it ran; once at start too.
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
#define GITOLITE_ADMIN_NAME "gitolite-admin"
#define WAIT_MS 10000

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] = "test_gitrepl seal key 0123456789";

struct fx {
	char dir[64];
	char repo_dir[128], data_dir[128], conf[128];
	char home[128], prog[128], marker[128];  /* gitolite mode */
	struct store *store;
	void *zctx;
	struct peer_self self;
	struct gitrepl *g;
	char hook_path[256], conf_path[256];
	git_repository *repo;
	git_oid a, b, c;        /* a <- b, a <- c: b and c diverge */
	char curve_pub[Z85_KEY_LEN + 1], curve_sec[Z85_KEY_LEN + 1];
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

/* The stand-in for gitolite (gitolite mode): notes each run, its
 * arguments, its environment and the admin repository's master in the
 * marker file; says something on stdout and stderr; fails when a file
 * "fail" is in its home, sleeps a second when "slow" is. */
static void write_program(struct fx *f)
{
	FILE *fp;

	assert_non_null(fp = fopen(f->prog, "w"));
	fprintf(fp, "#!/bin/sh\n"
		"{ echo \"run $# $*\"; echo \"pwd $(pwd)\"; env | sort | "
		"sed 's/^/env /'; echo \"master $(git --git-dir='%s/"
		"gitolite-admin.git' rev-parse -q --verify refs/heads/master)\"; "
		"} >>'%s'\n"
		"echo 'Initialized empty Git repository in /x/demo.git/'\n"
		"echo 'WARNING: something said on stderr' >&2\n"
		"[ -e fail ] && { echo 'FATAL: the test says no' >&2; "
		"exit 3; }\n"
		"[ -e slow ] && sleep 1\n"
		"echo 'done' >>'%s'\n"
		"exit 0\n", f->repo_dir, f->marker, f->marker);
	fclose(fp);
	assert_int_equal(chmod(f->prog, 0755), 0);
}

/* A peer that takes a fetch's request and never answers (a CURVE ROUTER
 * of the test's: the handshake succeeds): the fetch runs until
 * FETCH_IDLE_MS. */
static struct config_peer silent_peer = {.site = "portland"};
static char silent_sync[64];
static void *silent_ctx, *silent_router;
static int npeers;

/* gitolite mode: NULL: no; "" the stand-in program; else that program. */
static int setup_mode(void **state, const char *gitolite)
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
	if (npeers) { /* CURVE client sockets need this site's key pair */
		assert_int_equal(zmq_curve_keypair(f->curve_pub, f->curve_sec),
		                 0);
		f->self.curve_pub = f->curve_pub;
		f->self.curve_sec = f->curve_sec;
	}
	if (gitolite) {
		/* gitolite's admin repository, HEAD at master as 3.6 makes
		 * it; the same commits as r (same contents and dates) */
		git_repository *adm = NULL;
		git_repository_init_options io;
		struct buf p = BUF_INIT;
		git_oid x;
		git_repository_init_options_init(
			&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
		io.flags = GIT_REPOSITORY_INIT_BARE |
			   GIT_REPOSITORY_INIT_MKPATH;
		io.initial_head = "master";
		repos_path(&p, f->repo_dir, "gitolite-admin");
		assert_int_equal(git_repository_init_ext(&adm, p.p, &io), 0);
		commit(adm, &x, "a", NULL);
		commit(adm, &x, "b", &f->a);
		commit(adm, &x, "c", &f->a);
		git_repository_free(adm);
		buf_free(&p);
		snprintf(f->home, sizeof(f->home), "%s/home", f->dir);
		snprintf(f->marker, sizeof(f->marker), "%s/runs", f->dir);
		snprintf(f->prog, sizeof(f->prog), "%s/gitolite.sh", f->dir);
		assert_int_equal(mkdir(f->home, 0755), 0);
		write_program(f);
		if (*gitolite)
			snprintf(f->prog, sizeof(f->prog), "%s", gitolite);
	}
	assert_int_equal(
	        gitrepl_start(
	                &f->g,
	                &(struct gitrepl_opts){
	                        .self = &f->self,
	                        .repo_dir = f->repo_dir,
	                        .peers = &silent_peer,
	                        .npeers = npeers,
	                        .store = f->store,
	                        .hook_path = f->hook_path,
	                        .conf_path = f->conf_path,
	                        .gitolite_home = gitolite ? f->home : NULL,
	                        .gitolite_program = gitolite ? f->prog : NULL}),
	        0);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	npeers = 0;
	return setup_mode(state, NULL);
}

static int setup_silent_peer(void **state)
{
	char secret[Z85_KEY_LEN + 1];
	int one = 1, zero = 0;
	size_t len = sizeof(silent_sync);

	assert_int_equal(zmq_curve_keypair(silent_peer.public_key, secret), 0);
	assert_non_null(silent_ctx = zmq_ctx_new());
	assert_non_null(silent_router = zmq_socket(silent_ctx, ZMQ_ROUTER));
	zmq_setsockopt(silent_router, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(silent_router, ZMQ_CURVE_SERVER, &one, sizeof(one));
	zmq_setsockopt(silent_router, ZMQ_CURVE_SECRETKEY, secret, Z85_KEY_LEN);
	assert_int_equal(zmq_bind(silent_router, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(zmq_getsockopt(silent_router, ZMQ_LAST_ENDPOINT,
	                                silent_sync, &len),
	                 0);
	silent_peer.sync = silent_sync;
	npeers = 1;
	return setup_mode(state, NULL);
}

static int setup_gitolite(void **state)
{
	return setup_mode(state, "");
}

static int setup_gitolite_missing(void **state)
{
	return setup_mode(state, "grantd-test-no-such-gitolite");
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	npeers = 0;
	if (silent_router) {
		zmq_close(silent_router);
		zmq_ctx_term(silent_ctx);
		silent_router = silent_ctx = NULL;
	}
	gitrepl_stop(&f->g);
	git_repository_free(f->repo);
	store_destroy(&f->store);
	zmq_ctx_term(f->zctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* The record apply_refs() would leave for ref of repository repo: target
 * NULL means deleted. */
static void put_repo_record(struct fx *f, const char *repo, const char *ref,
			    const git_oid *target, uint64_t hlc,
			    const char *origin)
{
	Grantd__V1__Ref rec = GRANTD__V1__REF__INIT;
	struct store_batch *b;
	char hex[GIT_OID_HEXSZ + 1] = "";
	char key[128];
	size_t klen = (size_t)snprintf(key, sizeof(key), "%s%c%s", repo, 0,
				       ref);
	uint8_t buf[256];
	struct buf touched = BUF_INIT;

	if (target)
		git_oid_tostr(hex, sizeof(hex), target);
	rec.repo = (char *)repo;
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

/* ... of repository r */
static void put_ref_record(struct fx *f, const char *ref,
			   const git_oid *target, uint64_t hlc,
			   const char *origin)
{
	put_repo_record(f, "r", ref, target, hlc, origin);
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

static bool wait_ref_of(struct fx *f,
                        const char *name,
                        const char *ref,
                        const git_oid *want);

/* A look at every record (gitrepl_all: a sync's end, a rebuild) while a
 * ref waits for a fetch adds no second copy of it: the pending count
 * stays the number of refs (it was one more for ever, for a ref whose
 * objects never come). */
static void test_all_while_fetching(void **state)
{
	struct fx *f = *state;
	git_oid absent;

	assert_int_equal(
	        git_oid_fromstr(&absent,
	                        "0123456789abcdef0123456789abcdef01234567"),
	        0);
	put_record(f, &absent, 200, "portland"); /* asked of the silent peer */
	/* the fetch's request reaches the silent peer: the ref waits */
	zmq_pollitem_t in = {silent_router, 0, ZMQ_POLLIN, 0};
	assert_int_equal(zmq_poll(&in, 1, WAIT_MS), 1);
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (status_num(f, "pending_refs") == 1)
			break;
	assert_int_equal(status_num(f, "pending_refs"), 1);
	gitrepl_all(f->g, NULL);
	gitrepl_all(f->g, NULL);
	/* a ref that can move, of another repository (r is being fetched
	 * into), after them on the pair: once it moved, the actor has taken
	 * both looks and worked the list since */
	git_repository *r2;
	git_repository_init_options io;
	struct buf p = BUF_INIT;
	git_oid tip;
	git_repository_init_options_init(&io,
	                                 GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
	repos_path(&p, f->repo_dir, "r2");
	assert_int_equal(git_repository_init_ext(&r2, p.p, &io), 0);
	commit(r2, &tip, "r2", NULL);
	git_repository_free(r2);
	buf_free(&p);
	put_repo_record(f, "r2", REF, &tip, 300, "paloalto");
	assert_true(wait_ref_of(f, "r2", REF, &tip));
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (status_num(f, "pending_refs") == 1)
			break;
	assert_int_equal(status_num(f, "pending_refs"), 1);
}

/* ref of the repository at repo_dir/name.git now (zero when absent or no
 * repository). */
static git_oid disk_of(struct fx *f, const char *name, const char *ref)
{
	git_repository *repo = NULL;
	struct buf p = BUF_INIT;
	git_oid id;

	memset(&id, 0, sizeof(id));
	repos_path(&p, f->repo_dir, name);
	if (git_repository_open_bare(&repo, p.p) == 0 &&
	    git_reference_name_to_id(&id, repo, ref) < 0)
		memset(&id, 0, sizeof(id));
	git_repository_free(repo);
	buf_free(&p);
	return id;
}

static bool wait_ref_of(struct fx *f, const char *name, const char *ref,
			const git_oid *want)
{
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end;
	     usleep(5000)) {
		git_oid got = disk_of(f, name, ref);
		if (git_oid_equal(&got, want))
			return true;
	}
	return false;
}

/* A record may come before its repository (beside gitolite, which makes
 * it when it compiles its admin repository): the ref waits, not failing,
 * and follows its record once the directory appears. */
static void test_repo_appears(void **state)
{
	struct fx *f = *state;
	git_repository *late = NULL;
	struct buf p = BUF_INIT;
	git_oid a;

	put_repo_record(f, "late", REF, &f->a, 100, "portland");
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (status_num(f, "pending_refs") >= 1)
			break;
	assert_true(status_num(f, "pending_refs") >= 1);
	usleep(600 * 1000); /* a few retries: backed off, still waiting */
	repos_path(&p, f->repo_dir, "late");
	struct stat st;
	assert_int_equal(stat(p.p, &st), -1);
	/* gitolite makes it; the commit is here (same contents, same id) */
	assert_int_equal(git_repository_init(&late, p.p, 1), 0);
	commit(late, &a, "a", NULL);
	assert_true(git_oid_equal(&a, &f->a));
	git_repository_free(late);
	assert_true(wait_ref_of(f, "late", REF, &f->a));
	buf_free(&p);
}

/* ---- gitolite mode: the admin repository compiled again ---------------- */

/* The stand-in's runs so far, and the last "master" line it wrote. */
static int runs(struct fx *f, int *done, char *master, size_t mlen)
{
	char line[1024];
	int n = 0, d = 0;
	FILE *fp = fopen(f->marker, "r");

	if (master && mlen)
		*master = '\0';
	if (!fp)
		return 0;
	while (fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = '\0';
		n += !strncmp(line, "run ", 4);
		d += !strcmp(line, "done");
		if (master && !strncmp(line, "master ", 7))
			snprintf(master, mlen, "%.*s", (int)(mlen - 1),
				 line + 7);
	}
	fclose(fp);
	if (done)
		*done = d;
	return n;
}

static bool marker_has(struct fx *f, const char *want)
{
	char line[1024];
	bool found = false;
	FILE *fp = fopen(f->marker, "r");

	assert_non_null(fp);
	while (!found && fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = '\0';
		found = !strcmp(line, want);
	}
	fclose(fp);
	return found;
}

static bool marker_has_prefix(struct fx *f, const char *want)
{
	char line[1024];
	bool found = false;
	FILE *fp = fopen(f->marker, "r");

	assert_non_null(fp);
	while (!found && fgets(line, sizeof(line), fp))
		found = !strncmp(line, want, strlen(want));
	fclose(fp);
	return found;
}

/* Wait until the node counted n syncs (ended). */
static bool wait_syncs(struct fx *f, double n)
{
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(5000))
		if (status_num(f, "gitolite_syncs") >= n)
			return true;
	return false;
}

/* Once at start; again after each move of master (HEAD's branch) of
 * gitolite-admin, not after other refs or other repositories; with the
 * environment built for gitolite, not the node's. */
static void test_admin_sync(void **state)
{
	struct fx *f = *state;
	char want[512], master[64], hex[GIT_OID_HEXSZ + 1];
	int done = 0;

	assert_true(wait_syncs(f, 1));
	assert_int_equal(runs(f, &done, NULL, 0), 1);
	assert_int_equal(done, 1);
	assert_true(marker_has(f, "run 1 grantd-admin-sync"));
	snprintf(want, sizeof(want), "pwd %s", f->home);
	assert_true(marker_has(f, want));
	snprintf(want, sizeof(want), "env HOME=%s", f->home);
	assert_true(marker_has(f, want));
	assert_true(marker_has(f, "env PATH=/usr/local/bin:/usr/bin:/bin"));
	snprintf(want, sizeof(want), "env GRANTD_CONFIG=%s", f->conf_path);
	assert_true(marker_has(f, want));
	assert_true(marker_has_prefix(f, "env USER="));
	assert_true(marker_has_prefix(f, "env LOGNAME="));
	/* nothing of the node's own environment */
	assert_false(marker_has_prefix(f, "env GIT_CONFIG_GLOBAL="));
	assert_false(marker_has_prefix(f, "env GD_TEST_NODE_ONLY="));
	assert_int_equal((int)status_num(f, "gitolite_sync_failures"), 0);

	/* other refs, other repositories: no compile */
	put_repo_record(f, GITOLITE_ADMIN_NAME, "refs/heads/other", &f->b,
			100, "portland");
	put_record(f, &f->b, 110, "portland");
	assert_true(wait_ref_of(f, GITOLITE_ADMIN_NAME, "refs/heads/other",
				&f->b));
	assert_true(wait_ref(f, REF, &f->b));
	usleep(300 * 1000); /* time enough for a run, had one started */
	assert_int_equal(runs(f, NULL, NULL, 0), 1);

	/* master moves (not a fast-forward: b to c): compiled again, at c */
	put_repo_record(f, GITOLITE_ADMIN_NAME, REF, &f->b, 120, "portland");
	assert_true(wait_syncs(f, 2));
	put_repo_record(f, GITOLITE_ADMIN_NAME, REF, &f->c, 130, "montreal");
	assert_true(wait_syncs(f, 3));
	assert_int_equal(runs(f, NULL, master, sizeof(master)), 3);
	git_oid_tostr(hex, sizeof(hex), &f->c);
	assert_string_equal(master, hex);
	/* deleted: compiled too (gitolite then says what it thinks) */
	put_repo_record(f, GITOLITE_ADMIN_NAME, REF, NULL, 140, "montreal");
	assert_true(wait_syncs(f, 4));
	assert_int_equal((int)status_num(f, "gitolite_sync_failures"), 0);
}

/* A move while a sync runs: another sync once it ended, of the newest
 * commit; never two at once. */
static void test_admin_sync_coalesced(void **state)
{
	struct fx *f = *state;
	char path[256], master[64], hex[GIT_OID_HEXSZ + 1];
	int done = 0;
	FILE *fp;

	assert_true(wait_syncs(f, 1));
	snprintf(path, sizeof(path), "%s/slow", f->home);
	assert_non_null(fp = fopen(path, "w"));
	fclose(fp);
	put_repo_record(f, GITOLITE_ADMIN_NAME, REF, &f->b, 100, "portland");
	for (uint64_t end = ms_now() + WAIT_MS; ms_now() < end; usleep(2000))
		if (runs(f, NULL, NULL, 0) == 2)
			break;
	assert_int_equal(runs(f, &done, NULL, 0), 2);
	assert_int_equal(done, 1); /* the second is sleeping */
	put_repo_record(f, GITOLITE_ADMIN_NAME, REF, &f->c, 110, "portland");
	assert_true(wait_ref_of(f, GITOLITE_ADMIN_NAME, REF, &f->c));
	/* still one at a time */
	assert_int_equal(runs(f, &done, NULL, 0), 2);
	assert_true(wait_syncs(f, 3));
	assert_int_equal(runs(f, &done, master, sizeof(master)), 3);
	assert_int_equal(done, 3);
	git_oid_tostr(hex, sizeof(hex), &f->c);
	assert_string_equal(master, hex);
}

static const char *status_str(struct fx *f, const char *field, char *out,
			      size_t n)
{
	cJSON *o = cJSON_CreateObject();
	pump(f);
	gitrepl_status(f->g, o);
	cJSON *s = cJSON_GetObjectItem(o, field);
	snprintf(out, n, "%s", s && cJSON_IsString(s) ? s->valuestring : "");
	cJSON_Delete(o);
	return out;
}

/* A sync that fails: counted, its first error line and status in
 * status; the next move is compiled all the same. */
static void test_admin_sync_fails(void **state)
{
	struct fx *f = *state;
	char path[256], err[300];
	FILE *fp;

	assert_true(wait_syncs(f, 1));
	snprintf(path, sizeof(path), "%s/fail", f->home);
	assert_non_null(fp = fopen(path, "w"));
	fclose(fp);
	put_repo_record(f, GITOLITE_ADMIN_NAME, REF, &f->b, 100, "portland");
	assert_true(wait_syncs(f, 2));
	assert_int_equal((int)status_num(f, "gitolite_sync_failures"), 1);
	status_str(f, "gitolite_last_error", err, sizeof(err));
	assert_non_null(strstr(err, "rc=3"));
	assert_non_null(strstr(err, "FATAL: the test says no"));
	assert_int_equal(unlink(path), 0);
	put_repo_record(f, GITOLITE_ADMIN_NAME, REF, &f->c, 110, "portland");
	assert_true(wait_syncs(f, 3));
	assert_int_equal((int)status_num(f, "gitolite_sync_failures"), 1);
}

/* No such program: a failure with its reason, not a stuck node. */
static void test_admin_sync_no_program(void **state)
{
	struct fx *f = *state;
	char err[300];

	assert_true(wait_syncs(f, 1));
	assert_int_equal((int)status_num(f, "gitolite_sync_failures"), 1);
	status_str(f, "gitolite_last_error", err, sizeof(err));
	assert_non_null(strstr(err, "cannot run grantd-test-no-such-gitolite"));
	/* the refs are followed all the same */
	put_record(f, &f->b, 100, "portland");
	assert_true(wait_ref(f, REF, &f->b));
}

/* Outside gitolite mode: no sync, and status says nothing of it. */
static void test_no_gitolite_no_sync(void **state)
{
	struct fx *f = *state;
	cJSON *o = cJSON_CreateObject();

	put_record(f, &f->b, 100, "portland");
	assert_true(wait_ref(f, REF, &f->b));
	pump(f);
	gitrepl_status(f->g, o);
	assert_null(cJSON_GetObjectItem(o, "gitolite_syncs"));
	assert_null(cJSON_GetObjectItem(o, "gitolite_last_error"));
	assert_non_null(cJSON_GetObjectItem(o, "refs_moved"));
	cJSON_Delete(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_all_while_fetching,
	                                        setup_silent_peer, teardown),
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
	        cmocka_unit_test_setup_teardown(test_repo_appears, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_no_gitolite_no_sync, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_admin_sync, setup_gitolite,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_admin_sync_coalesced,
	                                        setup_gitolite, teardown),
	        cmocka_unit_test_setup_teardown(test_admin_sync_fails,
	                                        setup_gitolite, teardown),
	        cmocka_unit_test_setup_teardown(test_admin_sync_no_program,
	                                        setup_gitolite_missing,
	                                        teardown),
	};
	if (sodium_init() < 0)
		return 1;
	/* what the node sets (repos_git_isolate) and the sync must not
	 * pass on to gitolite; and one of the node's own */
	setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
	setenv("GD_TEST_NODE_ONLY", "1", 1);
	git_libgit2_init();
	log_init("test_gitrepl", false, LOG_LVL_WARN);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
