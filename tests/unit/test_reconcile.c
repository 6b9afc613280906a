/*
 * test_reconcile.c: node/git/reconcile.h, the reconciler, driven as the
 * actor drives it (reconcile_changed/_all, reconcile_work, the fetch's
 * verdicts to reconcile_fetched) over a real store (the ref and loser
 * records as ops writes them), a real bare repository, and a real
 * packfetch whose DEALERs reach two peers that are CURVE ROUTERs of the
 * test's, answering with packs the real `git pack-objects` made.
 *  - a record moves its ref (fast-forward or not) or deletes it; a ref
 *    without a record is left alone;
 *  - the tips that lost the LWW race: one the winner builds on is
 *    dropped, the others are kept as refs/grantd/conflicts/SITE/REF,
 *    named after the loser's site, marked "kept" once and counted once;
 *  - a push here newer than this site's own record is not rolled back;
 *  - a repository with a spooled push is left alone and its hook run
 *    (at most once a second); followed once the spool is gone;
 *  - objects not here are fetched from the record's origin (or the peer
 *    a sweep prefers), one fetch per repository with all its wants, and
 *    the ref moves once the pack is in; a failed fetch backs off and is
 *    asked again; a tip that is here but not connected is never pointed
 *    at: it is fetched again;
 *  - a look at every record adds no second copy of a waiting ref; a
 *    record whose repository is not there yet waits for it;
 *  - one repository's fetch starts as soon as another's ends; a fork's
 *    objects are fetched after its parent's; each ref of many
 *    repositories lacking objects is looked at a bounded number of
 *    times, however many fetches end before its own; the next fetch is
 *    asked before the refs of the last one move; several that no peer
 *    can give each back off.
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
#include <git2.h>
#include <zmq.h>

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "fixture.h"
#include "gitfx.h"
#include "gitio.h"
#include "packfetch.h"
#include "reconcile.h"
#include "records.h"
#include "repos.h"
#include "store.h"

#define REF       "refs/heads/master"
#define CONFLICTS "refs/grantd/conflicts/"
#define WAIT_MS   GITFX_WAIT_MS

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
        "test_reconcile seal key 0123456";

struct fx {
	char dir[64], repo_dir[128], src[160], path[160];
	char hook[160], hook_marker[160], conf[160];
	struct gitfx_node n; /* store, peers, DEALERs, gitio, packfetch */
	struct reconcile *rc;
	git_repository *repo; /* r, the test's own handle */
	/* a <- b, a <- c (b and c diverge) here and at the peers; at the
	 * peers only: d <- b, e <- c */
	git_oid a, b, c, d, e;
	char ha[41], hb[41], hc[41], hd[41], he[41];
	int kept, dropped; /* marks, as the writer took them */
};

/* ---- histories ---------------------------------------------------------- */

static void histories(struct fx *f)
{
	git_repository *src;
	git_oid x;

	assert_int_equal(git_repository_init(&src, f->src, 1), 0);
	gitfx_commit_text(src, &f->a, "a", NULL);
	gitfx_commit_text(src, &f->b, "b", &f->a);
	gitfx_commit_text(src, &f->c, "c", &f->a);
	gitfx_commit_text(src, &f->d, "d", &f->b);
	gitfx_commit_text(src, &f->e, "e", &f->c);
	gitfx_set_ref(src, "refs/heads/d", &f->d);
	gitfx_set_ref(src, "refs/heads/e", &f->e);
	git_repository_free(src);
	assert_int_equal(git_repository_open_bare(&f->repo, f->path), 0);
	gitfx_commit_text(f->repo, &x, "a", NULL);
	gitfx_commit_text(f->repo, &x, "b", &f->a);
	assert_true(git_oid_equal(&x, &f->b));
	gitfx_commit_text(f->repo, &x, "c", &f->a);
	assert_true(git_oid_equal(&x, &f->c));
	git_oid_tostr(f->ha, sizeof(f->ha), &f->a);
	git_oid_tostr(f->hb, sizeof(f->hb), &f->b);
	git_oid_tostr(f->hc, sizeof(f->hc), &f->c);
	git_oid_tostr(f->hd, sizeof(f->hd), &f->d);
	git_oid_tostr(f->he, sizeof(f->he), &f->e);
}

/* ref of repository name on disk now, as hex ("" when absent). */
static void disk(struct fx *f, const char *name, const char *ref, char *hex)
{
	git_repository *r = NULL;
	struct buf p = BUF_INIT;
	git_oid id;

	hex[0] = '\0';
	repos_path(&p, f->repo_dir, name);
	if (git_repository_open_bare(&r, p.p) == 0 &&
	    git_reference_name_to_id(&id, r, ref) == 0)
		git_oid_tostr(hex, OID_HEX + 1, &id);
	git_repository_free(r);
	buf_free(&p);
}

static void assert_ref(struct fx *f, const char *ref, const char *want)
{
	char hex[OID_HEX + 1];

	disk(f, "r", ref, hex);
	assert_string_equal(hex, want ? want : "");
}

/* ---- the records, as ops writes them; the writer's marks ---------------- */

/* The record of ref of repository name (target NULL: deleted), and the
 * reconciler told of it. */
static void put_ref(struct fx *f,
                    const char *name,
                    const char *ref,
                    const char *target,
                    uint64_t hlc,
                    const char *origin)
{
	Grantd__V1__Ref rec = GRANTD__V1__REF__INIT;
	struct store_batch *b;
	struct buf k = BUF_INIT, v = BUF_INIT;

	rec.repo = (char *)name;
	rec.ref = (char *)ref;
	rec.target = (char *)(target ? target : "");
	rec.has_hlc = true;
	rec.hlc = hlc;
	rec.origin = (char *)origin;
	buf_extend(&v, grantd__v1__ref__get_packed_size(&rec));
	v.len = grantd__v1__ref__pack(&rec, (uint8_t *)v.p);
	records_key_ref(&k, name, ref);
	assert_int_equal(store_batch_new(&b, f->n.store), 0);
	store_put(b, CF_REFS, k.p, k.len, v.p, v.len);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	buf_add(&k, "", 1); /* "repo \0 ref \0" */
	reconcile_changed(f->rc, k.p, k.len);
	buf_free(&k);
	buf_free(&v);
}

static void
put_loser(struct fx *f, const char *origin, uint64_t hlc, const char *tip)
{
	struct store_batch *b;
	struct buf k = BUF_INIT;

	records_key_loser(&k, "r", REF, origin, hlc);
	assert_int_equal(store_batch_new(&b, f->n.store), 0);
	store_put(b, CF_LOSERS, k.p, k.len, tip, strlen(tip));
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	buf_free(&k);
}

/* The loser's record now: "" when gone. */
static void loser(struct fx *f, const char *origin, uint64_t hlc, struct buf *v)
{
	struct buf k = BUF_INIT;

	records_key_loser(&k, "r", REF, origin, hlc);
	buf_reset(v);
	if (store_get(f->n.store, NULL, CF_LOSERS, k.p, k.len, v) < 0)
		buf_reset(v);
	buf_add(v, "", 1);
	v->len--;
	buf_free(&k);
}

/* gitio's mark: what the writer does with one (gitrepl_pump). */
static void
mark(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
	struct fx *f = arg;
	struct store_batch *b;

	assert_int_equal(store_batch_new(&b, f->n.store), 0);
	if (val) {
		f->kept++;
		store_put(b, CF_LOSERS, key, klen, val, vlen);
	} else {
		f->dropped++;
		store_del(b, CF_LOSERS, key, klen);
	}
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
}

static int
to_router(void *arg, const struct buf *rid, const Grantd__V1__PeerMsg *m)
{
	fail_msg("the reconciler never answers on the sync ROUTER");
	return GD_EIO;
}

/* ---- the peers ---------------------------------------------------------- */

/* The next PackReq at peer i within ms (others skipped), or NULL. */
static Grantd__V1__PeerMsg *next_req(struct fx *f, int i, int ms)
{
	return gitfx_peer_next(&f->n.tp[i], GRANTD__V1__PEER_MSG__BODY_PACK_REQ,
	                       "paloalto", ms);
}

/* The PackReq at peer i for repository r: its id; its wants in *wants
 * ("HEX\n" each, sorted as asked). */
static uint64_t take_req(struct fx *f, int i, struct buf *wants)
{
	Grantd__V1__PeerMsg *m = next_req(f, i, WAIT_MS);
	uint64_t id;

	assert_non_null(m);
	assert_string_equal(m->pack_req->repo, "r");
	buf_reset(wants);
	for (size_t k = 0; k < m->pack_req->n_wants; k++)
		buf_printf(wants, "%s\n", m->pack_req->wants[k]);
	id = m->pack_req->id;
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	return id;
}

/* The actor's part: the DEALERs' frames to the fetch (gitfx_node_drive)
 * until it ends, its verdict handed to the reconciler, or nothing came for
 * ms. */
static enum packfetch_verdict drive(struct fx *f, int ms)
{
	enum packfetch_verdict v = gitfx_node_drive(&f->n, ms);

	if (v != PACKFETCH_GOING)
		reconcile_fetched(f->rc, v, clock_mono_ms());
	return v;
}

/* Work until nothing is due at once. */
static void work(struct fx *f)
{
	for (int i = 0; i < 100 && reconcile_work(f->rc); i++)
		;
}

/* Work (bounded) until ref of r is at want ("" : absent). */
static bool work_until(struct fx *f, const char *ref, const char *want)
{
	char hex[OID_HEX + 1];

	for (uint64_t end = clock_mono_ms() + WAIT_MS; clock_mono_ms() < end;
	     usleep(5000)) {
		work(f);
		disk(f, "r", ref, hex);
		if (!strcmp(hex, want))
			return true;
	}
	return false;
}

/* ---- setup -------------------------------------------------------------- */

static void write_hook(struct fx *f)
{
	FILE *fp;

	/* grant-hook's stand-in: notes where it ran and with what */
	assert_non_null(fp = fopen(f->hook, "w"));
	fprintf(fp, "#!/bin/sh\necho \"ran $(pwd) $*\" >>'%s'\n",
	        f->hook_marker);
	fclose(fp);
	assert_int_equal(chmod(f->hook, 0755), 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char data[160];

	assert_non_null(f);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_reconcile", false), 0);
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	snprintf(f->src, sizeof(f->src), "%s/peer/r.git", f->dir);
	snprintf(f->hook, sizeof(f->hook), "%s/hook.sh", f->dir);
	snprintf(f->hook_marker, sizeof(f->hook_marker), "%s/hook.ran", f->dir);
	snprintf(f->conf, sizeof(f->conf), "%s/grantd.conf", f->dir);
	write_hook(f);
	snprintf(data, sizeof(data), "%s/data", f->dir);
	assert_int_equal(repos_create(f->repo_dir, "r", NULL, NULL), 0);
	snprintf(f->path, sizeof(f->path), "%s/r.git", f->repo_dir);
	histories(f);
	gitfx_node_open(&f->n, data, f->repo_dir, seal_key, to_router, mark, f);
	reconcile_open(&f->rc, &(struct reconcile_opts){.io = &f->n.io,
	                                                .store = f->n.store,
	                                                .fetch = f->n.pf,
	                                                .hook_path = f->hook,
	                                                .conf_path = f->conf});
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	reconcile_destroy(&f->rc);
	assert_null(f->rc);
	git_repository_free(f->repo);
	gitfx_node_close(&f->n);
	assert_int_equal(fx_rmtree(f->dir), 0);
	free(f);
	return 0;
}

/* ---- records followed --------------------------------------------------- */

static void test_moves_and_deletes(void **state)
{
	struct fx *f = *state;

	assert_ref(f, REF, NULL);
	put_ref(f, "r", REF, f->hb, 100, "portland");
	assert_int_equal(f->n.st.pending, 0); /* counted at work */
	assert_false(reconcile_work(f->rc));
	assert_ref(f, REF, f->hb);
	assert_int_equal(f->n.st.refs_moved, 1);
	assert_int_equal(f->n.st.pending, 0);
	/* not a fast-forward: the record is the truth */
	put_ref(f, "r", REF, f->hc, 200, "montreal");
	work(f);
	assert_ref(f, REF, f->hc);
	put_ref(f, "r", REF, NULL, 300, "portland");
	work(f);
	assert_ref(f, REF, NULL);
	assert_int_equal(f->n.st.refs_moved, 3);
	/* nothing due: nothing more */
	work(f);
	assert_int_equal(f->n.st.refs_moved, 3);
	assert_int_equal(f->kept + f->dropped, 0);
	assert_int_equal(f->n.st.fetches + f->n.st.fetch_failures, 0);
}

/* A ref whose record is gone (or never was) is left as it is. */
static void test_no_record(void **state)
{
	struct fx *f = *state;

	gitfx_set_ref(f->repo, REF, &f->b);
	reconcile_changed(f->rc, "r\0" REF "\0", sizeof("r\0" REF));
	work(f);
	assert_ref(f, REF, f->hb);
	assert_int_equal(f->n.st.pending, 0);
	assert_int_equal(f->n.st.refs_moved, 0);
}

/* A push here that went on from this site's own record is not stepped
 * back; another site's record is followed, rewind or not. */
static void test_own_record_behind_disk(void **state)
{
	struct fx *f = *state;

	gitfx_set_ref(f->repo, REF, &f->b);
	put_ref(f, "r", REF, f->ha, 100, "paloalto");
	work(f);
	assert_ref(f, REF, f->hb);
	assert_int_equal(f->n.st.pending, 0); /* done, not waiting */
	put_ref(f, "r", REF, f->ha, 200, "portland");
	work(f);
	assert_ref(f, REF, f->ha);
}

/* ---- the losers of LWW races -------------------------------------------- */

static void test_losers(void **state)
{
	struct fx *f = *state;
	struct buf v = BUF_INIT;
	char want[64];

	/* c won; b (portland) lost and c does not build on it; a (ottawa)
	 * lost but c builds on it; c itself (montreal, an echo) */
	put_loser(f, "portland", 150, f->hb);
	put_loser(f, "ottawa", 120, f->ha);
	put_loser(f, "montreal", 110, f->hc);
	put_ref(f, "r", REF, f->hc, 200, "montreal");
	work(f);
	assert_ref(f, REF, f->hc);
	assert_ref(f, CONFLICTS "portland/" REF, f->hb);
	assert_ref(f, CONFLICTS "ottawa/" REF, NULL);
	assert_ref(f, CONFLICTS "montreal/" REF, NULL);
	assert_int_equal(f->n.st.conflicts, 1);
	assert_int_equal(f->kept, 1);
	assert_int_equal(f->dropped, 2);
	loser(f, "portland", 150, &v);
	snprintf(want, sizeof(want), "%s kept", f->hb);
	assert_string_equal(v.p, want);
	loser(f, "ottawa", 120, &v);
	assert_string_equal(v.p, "");
	loser(f, "montreal", 110, &v);
	assert_string_equal(v.p, "");
	/* looked at again: kept once, counted once */
	reconcile_changed(f->rc, "r\0" REF "\0", sizeof("r\0" REF));
	work(f);
	assert_int_equal(f->n.st.conflicts, 1);
	assert_int_equal(f->kept, 1);
	buf_free(&v);
}

/* A deleted ref: every tip that lost to the deletion is kept. */
static void test_losers_of_delete(void **state)
{
	struct fx *f = *state;

	gitfx_set_ref(f->repo, REF, &f->c);
	put_loser(f, "portland", 150, f->hb);
	put_loser(f, "montreal", 120, f->hc);
	put_ref(f, "r", REF, NULL, 200, "ottawa");
	work(f);
	assert_ref(f, REF, NULL);
	assert_ref(f, CONFLICTS "portland/" REF, f->hb);
	assert_ref(f, CONFLICTS "montreal/" REF, f->hc);
	assert_int_equal(f->n.st.conflicts, 2);
	assert_int_equal(f->kept, 2);
}

/* ---- the spool ---------------------------------------------------------- */

static int hook_runs(struct fx *f, const char *want_pwd)
{
	char line[512], want[256];
	int n = 0;
	FILE *fp = fopen(f->hook_marker, "r");

	if (!fp)
		return 0;
	snprintf(want, sizeof(want), "ran %s --config %s\n", want_pwd, f->conf);
	while (fgets(line, sizeof(line), fp))
		n += !strcmp(line, want);
	fclose(fp);
	return n;
}

static void test_spool(void **state)
{
	struct fx *f = *state;
	char spool[256], file[300];
	FILE *fp;

	gitfx_set_ref(f->repo, REF,
	              &f->b); /* a push the node was not told of */
	snprintf(spool, sizeof(spool), "%s/grantd-spool", f->path);
	assert_int_equal(mkdir(spool, 0700), 0);
	snprintf(file, sizeof(file), "%s/1701000000-1.refs", spool);
	assert_non_null(fp = fopen(file, "w"));
	fprintf(fp, "%s %s %s\n", f->ha, f->hb, REF);
	fclose(fp);
	put_ref(f, "r", REF, f->hc, 100, "portland");
	for (uint64_t end = clock_mono_ms() + 700; clock_mono_ms() < end;
	     usleep(20000))
		work(f);
	assert_ref(f, REF, f->hb); /* left alone */
	assert_int_equal(f->n.st.pending, 1);
	assert_int_equal(hook_runs(f, f->path), 1); /* once a second */
	assert_int_equal(f->n.st.refs_moved, 0);
	/* the hook sent it (the record says c all the same): followed */
	assert_int_equal(unlink(file), 0);
	assert_true(work_until(f, REF, f->hc));
	assert_int_equal(f->n.st.pending, 0);
	assert_int_equal(hook_runs(f, f->path), 1);
}

/* ---- objects fetched ---------------------------------------------------- */

/* d is at no site but the peers: asked of the record's origin, one fetch
 * for every ref of the repository that lacks objects; the refs move once
 * the pack is in. */
static void test_fetch(void **state)
{
	struct fx *f = *state;
	struct buf wants = BUF_INIT, pack = BUF_INIT, in = BUF_INIT;
	char both[128];
	uint64_t id;

	put_ref(f, "r", REF, f->hd, 100, "montreal");
	put_ref(f, "r", "refs/heads/e", f->he, 100, "portland");
	work(f);
	id = take_req(f, 1, &wants);
	snprintf(both, sizeof(both), "%s\n%s\n", f->hd, f->he);
	assert_string_equal(wants.p, both);
	assert_null(next_req(f, 0, 100));
	assert_int_equal(f->n.st.pending, 2);
	/* waiting: no second request */
	work(f);
	assert_null(next_req(f, 1, 100));
	assert_ref(f, REF, NULL);
	buf_printf(&in, "%s\n%s\n^%s\n^%s\n", f->hd, f->he, f->hb, f->hc);
	gitfx_pack(f->dir, f->src, &pack, in.p, true);
	gitfx_peer_pack(&f->n.tp[1], id, &pack, GITIO_CHUNK_MAX);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	work(f);
	assert_ref(f, REF, f->hd);
	assert_ref(f, "refs/heads/e", f->he);
	assert_int_equal(f->n.st.pending, 0);
	assert_int_equal(f->n.st.fetches, 1);
	buf_free(&wants);
	buf_free(&pack);
	buf_free(&in);
}

/* No peer has it: the fetch fails, the ref stays and waits, backs off,
 * and is asked for again. */
static void test_fetch_fails(void **state)
{
	struct fx *f = *state;
	struct buf wants = BUF_INIT;
	char one[64];
	uint64_t id;

	gitfx_set_ref(f->repo, REF, &f->b);
	put_ref(f, "r", REF, f->hd, 100, "portland");
	work(f);
	id = take_req(f, 0, &wants);
	snprintf(one, sizeof(one), "%s\n", f->hd);
	assert_string_equal(wants.p, one);
	gitfx_peer_err(&f->n.tp[0], id, "not here");
	assert_int_equal(drive(f, 300), PACKFETCH_GOING);
	id = take_req(f, 1, &wants); /* the next peer */
	gitfx_peer_err(&f->n.tp[1], id, "not here");
	uint64_t t0 = clock_mono_ms(), t;
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_FAILED);
	work(f);
	assert_ref(f, REF, f->hb);
	assert_int_equal(f->n.st.pending, 1);
	/* asked again, after a back-off (at least RETRY_MIN_MS, 250) */
	Grantd__V1__PeerMsg *m = NULL;
	for (t = clock_mono_ms(); !m && t < t0 + WAIT_MS; t = clock_mono_ms()) {
		work(f);
		m = next_req(f, 0, 10);
	}
	assert_non_null(m);
	assert_true(t >= t0 + 250);
	assert_string_equal(m->pack_req->wants[0], f->hd);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	buf_free(&wants);
}

/* A tip that is here but whose history is not: the ref never points at
 * it; it is fetched again. */
static void test_unconnected_tip(void **state)
{
	struct fx *f = *state;
	struct buf raw = BUF_INIT, wants = BUF_INIT;
	git_commit *ca;
	git_odb *odb;
	git_oid bad;
	char hex[OID_HEX + 1], tree[OID_HEX + 1], one[64];

	assert_int_equal(git_commit_lookup(&ca, f->repo, &f->a), 0);
	git_oid_tostr(tree, sizeof(tree), git_commit_tree_id(ca));
	git_commit_free(ca);
	buf_printf(&raw,
	           "tree %s\nparent 0123456789abcdef0123456789abcdef01234567\n"
	           "author t <t@e> 1700000000 +0000\n"
	           "committer t <t@e> 1700000000 +0000\n\nbroken\n",
	           tree);
	assert_int_equal(git_repository_odb(&odb, f->repo), 0);
	assert_int_equal(
	        git_odb_write(&bad, odb, raw.p, raw.len, GIT_OBJECT_COMMIT), 0);
	git_odb_free(odb);
	git_oid_tostr(hex, sizeof(hex), &bad);
	gitfx_set_ref(f->repo, REF, &f->b);
	put_ref(f, "r", REF, hex, 100, "montreal");
	work(f);
	assert_ref(f, REF, f->hb);
	assert_non_null(strstr(f->n.st.last_error, "is not connected"));
	take_req(f, 1, &wants);
	snprintf(one, sizeof(one), "%s\n", hex);
	assert_string_equal(wants.p, one);
	assert_int_equal(f->n.st.pending, 1);
	buf_free(&raw);
	buf_free(&wants);
}

/* A sweep (reconcile_all) asks the peer it prefers first; a look at all
 * while a ref waits adds no second copy of it. */
static void test_all(void **state)
{
	struct fx *f = *state;
	struct buf wants = BUF_INIT, k = BUF_INIT, v = BUF_INIT;
	struct store_batch *b;
	Grantd__V1__Ref rec = GRANTD__V1__REF__INIT;

	/* records the reconciler was not told of */
	rec.repo = "r";
	rec.ref = "refs/heads/b";
	rec.target = f->hb;
	rec.origin = "portland";
	buf_extend(&v, grantd__v1__ref__get_packed_size(&rec));
	v.len = grantd__v1__ref__pack(&rec, (uint8_t *)v.p);
	records_key_ref(&k, "r", "refs/heads/b");
	assert_int_equal(store_batch_new(&b, f->n.store), 0);
	store_put(b, CF_REFS, k.p, k.len, v.p, v.len);
	rec.ref = REF;
	rec.target = f->hd;
	buf_reset(&v);
	buf_extend(&v, grantd__v1__ref__get_packed_size(&rec));
	v.len = grantd__v1__ref__pack(&rec, (uint8_t *)v.p);
	records_key_ref(&k, "r", REF);
	store_put(b, CF_REFS, k.p, k.len, v.p, v.len);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	work(f);
	assert_ref(f, "refs/heads/b", NULL);

	reconcile_all(f->rc, 1); /* a rebuild from montreal */
	work(f);
	assert_ref(f, "refs/heads/b", f->hb);
	take_req(f, 1, &wants); /* not portland, the origin */
	assert_null(next_req(f, 0, 100));
	assert_int_equal(f->n.st.pending, 1);
	/* looks at all while the fetch goes: the waiting ref once, b again
	 * (left for after the fetch: its repository is being fetched into) */
	reconcile_all(f->rc, 1);
	reconcile_all(f->rc, 1);
	reconcile_all(f->rc, -1);
	work(f);
	assert_int_equal(f->n.st.pending, 2);
	assert_null(next_req(f, 1, 100));
	buf_free(&wants);
	buf_free(&k);
	buf_free(&v);
}

/* A rebuild asked of a site just started (`grantctl rebuild --from`
 * before the state transfer brought any record), then the look after
 * the catch-up: the refs the transfer brings are asked of the peer the
 * rebuild named, not of their origin; once they are done, of the origin
 * again. */
static void test_rebuild_before_records(void **state)
{
	struct fx *f = *state;
	struct buf pack = BUF_INIT, in = BUF_INIT, wants = BUF_INIT;
	uint64_t id;

	reconcile_all(f->rc, 1); /* from montreal: no record yet */
	work(f);
	reconcile_all(f->rc, -1); /* caught up: look again */
	work(f);
	put_ref(f, "r", REF, f->hd, 100, "portland");
	work(f);
	assert_null(next_req(f, 0, 100)); /* not the origin */
	id = take_req(f, 1, &wants);
	buf_printf(&in, "%s\n^%s\n", f->hd, f->hb);
	gitfx_pack(f->dir, f->src, &pack, in.p, true);
	gitfx_peer_pack(&f->n.tp[1], id, &pack, GITIO_CHUNK_MAX);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	work(f);
	assert_ref(f, REF, f->hd);
	/* the sweep is over: a later record goes to its origin */
	put_ref(f, "r", "refs/heads/e", f->he, 200, "portland");
	work(f);
	take_req(f, 0, &wants);
	buf_free(&pack);
	buf_free(&in);
	buf_free(&wants);
}

/* A record before its repository: waits, not failing; followed once the
 * repository appears. */
static void test_repo_appears(void **state)
{
	struct fx *f = *state;
	git_repository *late;
	struct buf p = BUF_INIT;
	char hex[OID_HEX + 1];
	git_oid a;

	put_ref(f, "late", REF, f->ha, 100, "portland");
	work(f);
	assert_int_equal(f->n.st.pending, 1);
	assert_null(next_req(f, 0, 100)); /* nothing to fetch into */
	repos_path(&p, f->repo_dir, "late");
	assert_int_equal(git_repository_init(&late, p.p, 1), 0);
	gitfx_commit_text(late, &a, "a", NULL);
	git_repository_free(late);
	for (uint64_t end = clock_mono_ms() + WAIT_MS; clock_mono_ms() < end;
	     usleep(5000)) {
		work(f);
		disk(f, "late", REF, hex);
		if (!strcmp(hex, f->ha))
			break;
	}
	assert_string_equal(hex, f->ha);
	assert_int_equal(f->n.st.pending, 0);
	buf_free(&p);
}

/* ---- one repository after another (a rebuild) --------------------------- */

/* The next PackReq at peer i: its repository in repo, its id. */
static uint64_t take_any(struct fx *f, int i, char *repo, size_t size)
{
	Grantd__V1__PeerMsg *m = next_req(f, i, WAIT_MS);
	uint64_t id;

	assert_non_null(m);
	snprintf(repo, size, "%s", m->pack_req->repo);
	id = m->pack_req->id;
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	return id;
}

/* Two repositories lack objects: the second's fetch starts as soon as
 * the first's ends, not at the next look 0.1 s later (a rebuilt site's
 * 600 repositories waited a minute in all for those looks). */
static void test_next_fetch_at_once(void **state)
{
	struct fx *f = *state;
	struct buf pr = BUF_INIT, ps = BUF_INIT, in = BUF_INIT;
	char repo[64];
	uint64_t id, t0;

	assert_int_equal(repos_create(f->repo_dir, "s", NULL, NULL), 0);
	buf_printf(&in, "%s\n^%s\n", f->hd, f->hb);
	gitfx_pack(f->dir, f->src, &pr, in.p, true);
	buf_reset(&in);
	buf_printf(&in, "%s\n", f->hd);
	gitfx_pack(f->dir, f->src, &ps, in.p, true);
	put_ref(f, "r", REF, f->hd, 100, "montreal");
	put_ref(f, "s", REF, f->hd, 100, "montreal");
	t0 = clock_mono_ms();
	work(f);
	id = take_any(f, 1, repo, sizeof(repo));
	assert_string_equal(repo, "r");
	gitfx_peer_pack(&f->n.tp[1], id, &pr, GITIO_CHUNK_MAX);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	reconcile_work(f->rc);
	Grantd__V1__PeerMsg *m = next_req(f, 1, 20);
	if (clock_mono_ms() - t0 >= 100 && !m)
		skip(); /* too slow a machine to tell */
	assert_non_null(m);
	assert_string_equal(m->pack_req->repo, "s");
	gitfx_peer_pack(&f->n.tp[1], m->pack_req->id, &ps, GITIO_CHUNK_MAX);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	work(f);
	assert_ref(f, REF, f->hd);
	assert_int_equal(f->n.st.pending, 0);
	buf_free(&pr);
	buf_free(&ps);
	buf_free(&in);
}

/* A fork whose name sorts before its parent's, both empty (a rebuilt
 * site): the parent is fetched first, then the fork, offering the
 * parent's tip as a have, so the fork gets only what is its own. */
static void test_fork_after_parent(void **state)
{
	struct fx *f = *state;
	Grantd__V1__Repo rec = GRANTD__V1__REPO__INIT;
	struct store_batch *b;
	struct buf pp = BUF_INIT, pa = BUF_INIT, in = BUF_INIT;
	uint8_t v[256];
	char repo[64], hex[OID_HEX + 1];
	bool have_b = false;
	uint64_t id;

	assert_int_equal(repos_create(f->repo_dir, "p", NULL, NULL), 0);
	assert_int_equal(repos_create(f->repo_dir, "a", "p", NULL), 0);
	rec.name = "a";
	rec.fork_of = "p";
	assert_int_equal(store_batch_new(&b, f->n.store), 0);
	store_put(b, CF_REPOS, "a", 1, v, grantd__v1__repo__pack(&rec, v));
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	buf_printf(&in, "%s\n", f->hb);
	gitfx_pack(f->dir, f->src, &pp, in.p, true);
	buf_reset(&in);
	buf_printf(&in, "%s\n^%s\n", f->hd, f->hb);
	gitfx_pack(f->dir, f->src, &pa, in.p, true);
	put_ref(f, "a", REF, f->hd, 100, "montreal");
	put_ref(f, "p", REF, f->hb, 100, "montreal");
	work(f);
	id = take_any(f, 1, repo, sizeof(repo));
	assert_string_equal(repo, "p"); /* not the fork, listed first */
	gitfx_peer_pack(&f->n.tp[1], id, &pp, GITIO_CHUNK_MAX);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	work(f);
	Grantd__V1__PeerMsg *m = next_req(f, 1, WAIT_MS);
	assert_non_null(m);
	assert_string_equal(m->pack_req->repo, "a");
	for (size_t i = 0; i < m->pack_req->n_haves; i++)
		have_b |= !strcmp(m->pack_req->haves[i], f->hb);
	assert_true(have_b);
	gitfx_peer_pack(&f->n.tp[1], m->pack_req->id, &pa, GITIO_CHUNK_MAX);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	work(f);
	disk(f, "a", REF, hex);
	assert_string_equal(hex, f->hd);
	disk(f, "p", REF, hex);
	assert_string_equal(hex, f->hb);
	assert_int_equal(f->n.st.pending, 0);
	buf_free(&pp);
	buf_free(&pa);
	buf_free(&in);
}

/* The fetch of the next repository is asked before the refs of the one
 * just fetched move (a ref write and its fsyncs, while the peer makes
 * the next pack); they move in the next turn. */
static void test_next_asked_before_move(void **state)
{
	struct fx *f = *state;
	struct buf pr = BUF_INIT, in = BUF_INIT;
	char repo[64], before[OID_HEX + 1];
	uint64_t id;

	assert_int_equal(repos_create(f->repo_dir, "s", NULL, NULL), 0);
	buf_printf(&in, "%s\n^%s\n", f->hd, f->hb);
	gitfx_pack(f->dir, f->src, &pr, in.p, true);
	disk(f, "r", REF, before);
	put_ref(f, "r", REF, f->hd, 100, "montreal");
	put_ref(f, "s", REF, f->hd, 100, "montreal");
	work(f);
	id = take_any(f, 1, repo, sizeof(repo));
	assert_string_equal(repo, "r");
	gitfx_peer_pack(&f->n.tp[1], id, &pr, GITIO_CHUNK_MAX);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	assert_true(reconcile_work(f->rc)); /* more: r's ref */
	id = take_any(f, 1, repo, sizeof(repo));
	assert_string_equal(repo, "s");
	assert_ref(f, REF, before); /* not yet */
	reconcile_work(f->rc);
	assert_ref(f, REF, f->hd);
	buf_free(&pr);
	buf_free(&in);
}

/* Three repositories whose objects no peer has: each backs off, and
 * none's back-off is wiped when another's fetch ends (a ref left
 * waiting for "the fetch in flight" kept that mark through its failed
 * fetch: the two asked each other's peers in a loop, every few ms). */
static void test_fails_back_off(void **state)
{
	struct fx *f = *state;
	int asked = 0;

	assert_int_equal(repos_create(f->repo_dir, "q", NULL, NULL), 0);
	assert_int_equal(repos_create(f->repo_dir, "s", NULL, NULL), 0);
	/* r and s are looked at while q's fetch goes: both wait for it */
	put_ref(f, "q", REF, f->hd, 100, "montreal");
	work(f);
	put_ref(f, "r", REF, f->hd, 100, "montreal");
	put_ref(f, "s", REF, f->hd, 100, "montreal");
	work(f);
	for (uint64_t end = clock_mono_ms() + 600; clock_mono_ms() < end;) {
		work(f);
		for (int i = 0; i < 2; i++) {
			Grantd__V1__PeerMsg *m = next_req(f, i, 2);
			if (!m)
				continue;
			asked++;
			gitfx_peer_err(&f->n.tp[i], m->pack_req->id,
			               "not here");
			grantd__v1__peer_msg__free_unpacked(m, NULL);
		}
		drive(f, 2);
	}
	/* each asked of both peers at 0 and after 250 ms (and maybe after
	 * 750 ms more) */
	assert_in_range(asked, 6, 18);
	assert_int_equal(f->n.st.pending, 3);
}

/* A rebuild's many repositories, each lacking objects: each ref is
 * looked at a bounded number of times, not once more for every fetch
 * that ends before its own (a look at each ref left before each fetch
 * made 600 repositories wait ~25 ms each between fetches). */
static void test_looks_linear(void **state)
{
	struct fx *f = *state;
	struct buf pk = BUF_INIT, in = BUF_INIT;
	char name[16], repo[64], hex[OID_HEX + 1];
	enum { K = 12 };

	buf_printf(&in, "%s\n", f->hd);
	gitfx_pack(f->dir, f->src, &pk, in.p, true);
	for (int k = 0; k < K; k++) {
		snprintf(name, sizeof(name), "q%02d", k);
		assert_int_equal(repos_create(f->repo_dir, name, NULL, NULL),
		                 0);
		put_ref(f, name, REF, f->hd, 100, "montreal");
	}
	for (int k = 0; k < K; k++) {
		work(f);
		uint64_t id = take_any(f, 1, repo, sizeof(repo));
		gitfx_peer_pack(&f->n.tp[1], id, &pk, GITIO_CHUNK_MAX);
		assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	}
	work(f);
	assert_int_equal(f->n.st.pending, 0);
	for (int k = 0; k < K; k++) {
		snprintf(name, sizeof(name), "q%02d", k);
		disk(f, name, REF, hex);
		assert_string_equal(hex, f->hd);
	}
	/* one look when listed, one to ask its fetch, one to move it */
	assert_in_range(f->n.st.refs_looked, K, 3 * K);
	buf_free(&pk);
	buf_free(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_moves_and_deletes, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_no_record, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_own_record_behind_disk,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_losers, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_losers_of_delete, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_spool, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_fetch, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_fetch_fails, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_unconnected_tip, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_all, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_rebuild_before_records,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_repo_appears, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_next_fetch_at_once, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_fork_after_parent, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_looks_linear, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_fails_back_off, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_next_asked_before_move,
	                                        setup, teardown),
	};
	if (fx_group_setup("test_reconcile", LOG_LVL_ERROR) < 0 ||
	    repos_git_isolate() < 0)
		return 1;
	git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, 1);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
