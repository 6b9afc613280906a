/*
 * test_packfetch.c: node/git/packfetch.h, the one fetch in flight, driven
 * as the actor drives it: the node's DEALERs (peer_curve_client) to two
 * peers that are CURVE ROUTERs of the test's, answering with packs that
 * the real `git pack-objects` made from their own copy of the history,
 * into a real bare repository, with a real store for a fork's parent.
 *  - a small pack (libgit2's indexer) and a large one (git index-pack,
 *    in many chunks) bring the wants in, credit asked chunk by chunk;
 *  - a pack that arrives corrupt, truncated or unconnected (a parent,
 *    or, checked in-process, the tip's tree in neither) fails its
 *    peer (told "cancelled"); the next peer is asked, and when none is
 *    left the fetch fails; nothing of it enters the repository and no
 *    quarantine is left;
 *  - a peer's PackErr, a chunk out of order, a silence fail the peer;
 *    frames of another stream are refused and change nothing;
 *  - the peer named first is asked first; a repository not there is not
 *    fetched into; no reachable peer fails at once;
 *  - the haves are the repository's tips and a fork's parent's;
 *  - a quarantine a crash left is swept; one in progress goes with
 *    packfetch_destroy.
 */
#include <dirent.h>
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
#include "repos.h"
#include "store.h"

#define REF       "refs/heads/master"
#define WAIT_MS   GITFX_WAIT_MS
#define BIG_BYTES (96 * 1024) /* a blob past what is held in memory */

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
        "test_packfetch seal key 01234567";

struct fx {
	char dir[64], repo_dir[128], src[160], path[160];
	struct gitfx_node n; /* store, peers, DEALERs, gitio, packfetch */
	/* the history, the same at the peers (src) and here as far as a:
	 * a <- b <- c <- d, d with a large random blob */
	git_oid a, b, c, d;
	char ha[41], hb[41], hc[41], hd[41];
};

/* ---- histories ---------------------------------------------------------- */

/* The peers' history a..d in src, and a alone (master) in r. */
static void histories(struct fx *f)
{
	git_repository *src, *r;
	uint8_t *big = malloc(BIG_BYTES);
	git_oid a2;

	assert_non_null(big);
	gitfx_noise(big, BIG_BYTES, 1);
	assert_int_equal(git_repository_init(&src, f->src, 1), 0);
	gitfx_commit(src, &f->a, "a", "a\n", 2, NULL);
	gitfx_commit(src, &f->b, "b", "b\n", 2, &f->a);
	gitfx_commit(src, &f->c, "c", "c\n", 2, &f->b);
	gitfx_commit(src, &f->d, "d", big, BIG_BYTES, &f->c);
	gitfx_set_ref(src, REF, &f->d);
	git_repository_free(src);
	free(big);
	assert_int_equal(git_repository_open_bare(&r, f->path), 0);
	gitfx_commit(r, &a2, "a", "a\n", 2, NULL);
	assert_true(git_oid_equal(&a2, &f->a));
	gitfx_set_ref(r, REF, &f->a);
	git_repository_free(r);
	git_oid_tostr(f->ha, sizeof(f->ha), &f->a);
	git_oid_tostr(f->hb, sizeof(f->hb), &f->b);
	git_oid_tostr(f->hc, sizeof(f->hc), &f->c);
	git_oid_tostr(f->hd, sizeof(f->hd), &f->d);
}

/* Is the object in r (a fresh look at the disk)? */
static bool in_repo(struct fx *f, const char *hex)
{
	git_repository *r;
	git_odb *odb;
	git_oid id;
	bool yes;

	assert_int_equal(git_oid_fromstr(&id, hex), 0);
	assert_int_equal(git_repository_open_bare(&r, f->path), 0);
	assert_int_equal(git_repository_odb(&odb, r), 0);
	yes = git_odb_exists(odb, &id);
	git_odb_free(odb);
	git_repository_free(r);
	return yes;
}

/* Entries of dir whose names start with prefix. */
static int count_entries(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.' &&
		     !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static int quarantines(struct fx *f)
{
	return count_entries(f->path, "grantd-incoming-");
}

static int packs(struct fx *f)
{
	char dir[192];

	snprintf(dir, sizeof(dir), "%s/objects/pack", f->path);
	return count_entries(dir, "pack-");
}

/* ---- the peers ---------------------------------------------------------- */

/* The PackReq the node sent peer i: its id (the message freed). */
static uint64_t take_req(struct fx *f, int i, const char *want)
{
	Grantd__V1__PeerMsg *m = gitfx_peer_next(
	        &f->n.tp[i], GRANTD__V1__PEER_MSG__BODY_PACK_REQ, "paloalto",
	        WAIT_MS);
	uint64_t id;

	assert_non_null(m);
	assert_true(m->pack_req->has_id);
	assert_string_equal(m->pack_req->repo, "r");
	assert_int_equal(m->pack_req->n_wants, 1);
	assert_string_equal(m->pack_req->wants[0], want);
	assert_true(m->pack_req->has_credit && m->pack_req->credit > 0);
	id = m->pack_req->id;
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	return id;
}

/* The actor's part (gitfx_node_drive). */
static enum packfetch_verdict drive(struct fx *f, int ms)
{
	return gitfx_node_drive(&f->n, ms);
}

/* The PackErr "cancelled" of the stream id at peer i. */
static void expect_cancel(struct fx *f, int i, uint64_t id)
{
	Grantd__V1__PeerMsg *m = gitfx_peer_next(
	        &f->n.tp[i], GRANTD__V1__PEER_MSG__BODY_PACK_ERR, "paloalto",
	        WAIT_MS);

	assert_non_null(m);
	assert_int_equal(m->pack_err->id, id);
	assert_string_equal(m->pack_err->why, "cancelled");
	grantd__v1__peer_msg__free_unpacked(m, NULL);
}

/* ---- setup -------------------------------------------------------------- */

static int
to_router(void *arg, const struct buf *rid, const Grantd__V1__PeerMsg *m)
{
	fail_msg("a fetch never answers on the sync ROUTER");
	return GD_EIO;
}

static void
mark(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
	fail_msg("a fetch never marks a loser");
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char data[160];

	assert_non_null(f);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_packfetch", false), 0);
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	snprintf(f->src, sizeof(f->src), "%s/peer/r.git", f->dir);
	snprintf(data, sizeof(data), "%s/data", f->dir);
	assert_int_equal(repos_create(f->repo_dir, "r", NULL, NULL), 0);
	snprintf(f->path, sizeof(f->path), "%s/r.git", f->repo_dir);
	histories(f);
	gitfx_node_open(&f->n, data, f->repo_dir, seal_key, to_router, mark, f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	gitfx_node_close(&f->n);
	assert_int_equal(fx_rmtree(f->dir), 0);
	free(f);
	return 0;
}

static enum packfetch_verdict start(struct fx *f, const char *want, int first)
{
	char wants[1][OID_HEX + 1];

	snprintf(wants[0], sizeof(wants[0]), "%s", want);
	return packfetch_start(f->n.pf, "r", (const char(*)[OID_HEX + 1]) wants,
	                       1, first);
}

/* ---- fetches that bring the wants in ------------------------------------ */

/* A push of two commits (a small pack, one chunk, libgit2's indexer). */
static void test_small(void **state)
{
	struct fx *f = *state;
	struct buf pack = BUF_INIT, in = BUF_INIT;
	Grantd__V1__PeerMsg *m;
	const char(*w)[OID_HEX + 1];
	size_t n;
	uint64_t id;
	int before = packs(f);

	assert_null(packfetch_repo(f->n.pf));
	assert_int_equal(start(f, f->hc, -1), PACKFETCH_GOING);
	assert_string_equal(packfetch_repo(f->n.pf), "r");
	/* config order: portland; its haves are r's tips */
	m = gitfx_peer_next(&f->n.tp[0], GRANTD__V1__PEER_MSG__BODY_PACK_REQ,
	                    "paloalto", WAIT_MS);
	assert_non_null(m);
	assert_string_equal(m->pack_req->repo, "r");
	assert_int_equal(m->pack_req->n_wants, 1);
	assert_string_equal(m->pack_req->wants[0], f->hc);
	assert_int_equal(m->pack_req->n_haves, 1);
	assert_string_equal(m->pack_req->haves[0], f->ha);
	id = m->pack_req->id;
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	assert_null(gitfx_peer_next(&f->n.tp[1],
	                            GRANTD__V1__PEER_MSG__BODY_PACK_REQ,
	                            "paloalto", 100));
	assert_false(in_repo(f, f->hb));

	buf_printf(&in, "%s\n^%s\n", f->hc, f->ha);
	gitfx_pack(f->dir, f->src, &pack, in.p, true);
	assert_true(pack.len < 32 * 1024);
	gitfx_peer_pack(&f->n.tp[0], id, &pack, GITIO_CHUNK_MAX);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	/* a credit for the chunk that was not the last */
	m = gitfx_peer_next(&f->n.tp[0], GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT,
	                    "paloalto", WAIT_MS);
	assert_non_null(m);
	assert_int_equal(m->pack_credit->id, id);
	assert_int_equal(m->pack_credit->n, 1);
	grantd__v1__peer_msg__free_unpacked(m, NULL);

	assert_true(in_repo(f, f->hb));
	assert_true(in_repo(f, f->hc));
	assert_false(in_repo(f, f->hd));
	assert_null(packfetch_repo(f->n.pf));
	assert_string_equal(packfetch_last_repo(f->n.pf), "r");
	w = packfetch_wants(f->n.pf, &n);
	assert_int_equal(n, 1);
	assert_string_equal(w[0], f->hc);
	assert_int_equal(f->n.st.fetches, 1);
	assert_int_equal(f->n.st.fetch_failures, 0);
	assert_int_equal(f->n.st.bytes_in, pack.len);
	assert_int_equal(f->n.st.last_fetch_bytes, pack.len);
	assert_int_equal(quarantines(f), 0);
	assert_int_equal(packs(f), before + 2); /* .pack and .idx */
	/* no ref moved: that is the reconciler's */
	{
		git_repository *r;
		git_oid tip;
		assert_int_equal(git_repository_open_bare(&r, f->path), 0);
		assert_int_equal(git_reference_name_to_id(&tip, r, REF), 0);
		assert_true(git_oid_equal(&tip, &f->a));
		git_repository_free(r);
	}
	buf_free(&pack);
	buf_free(&in);
}

/* A large pack in many chunks (git index-pack as it comes): a credit
 * after every chunk but the last. */
static void test_large(void **state)
{
	struct fx *f = *state;
	struct buf pack = BUF_INIT, in = BUF_INIT;
	Grantd__V1__PeerMsg *m;
	uint64_t id;
	size_t chunks = 0;

	assert_int_equal(start(f, f->hd, -1), PACKFETCH_GOING);
	id = take_req(f, 0, f->hd);
	buf_printf(&in, "%s\n^%s\n", f->hd, f->ha);
	gitfx_pack(f->dir, f->src, &pack, in.p, true);
	assert_true(pack.len > BIG_BYTES);
	gitfx_peer_pack(&f->n.tp[0], id, &pack, 8192);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	while ((m = gitfx_peer_next(&f->n.tp[0],
	                            GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT,
	                            "paloalto", 200))) {
		assert_int_equal(m->pack_credit->id, id);
		chunks += m->pack_credit->n;
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	}
	assert_int_equal(chunks, (pack.len + 8191) / 8192);
	assert_true(in_repo(f, f->hb));
	assert_true(in_repo(f, f->hc));
	assert_true(in_repo(f, f->hd));
	assert_int_equal(f->n.st.fetches, 1);
	assert_int_equal(f->n.st.bytes_in, pack.len);
	assert_int_equal(quarantines(f), 0);
	buf_free(&pack);
	buf_free(&in);
}

/* ---- packs that must not enter ------------------------------------------ */

enum damage { CORRUPT, TRUNCATED };

static void damage(struct buf *pack, enum damage how)
{
	if (how == CORRUPT)
		pack->p[pack->len / 2] ^= 0x5a;
	else
		pack->len -= 30; /* the checksum and more */
}

/* Both peers send a damaged pack: each is told to stop, the fetch fails,
 * nothing enters; then a whole pack from the first brings it in (the
 * damage was the reason). */
static void bad_packs(struct fx *f, const char *want, enum damage how)
{
	struct buf pack = BUF_INIT, bad = BUF_INIT, in = BUF_INIT;
	uint64_t id0, id1;
	int before = packs(f);

	buf_printf(&in, "%s\n^%s\n", want, f->ha);
	gitfx_pack(f->dir, f->src, &pack, in.p, true);
	buf_add(&bad, pack.p, pack.len);
	damage(&bad, how);
	assert_int_equal(start(f, want, -1), PACKFETCH_GOING);
	id0 = take_req(f, 0, want);
	gitfx_peer_pack(&f->n.tp[0], id0, &bad, 16384);
	assert_int_equal(drive(f, 300), PACKFETCH_GOING);
	expect_cancel(f, 0, id0);
	id1 = take_req(f, 1, want);
	assert_true(id1 != id0);
	assert_int_equal(f->n.st.fetch_failures, 1);
	assert_non_null(strstr(f->n.st.last_error, "fetch from portland of r"));
	assert_int_equal(quarantines(f), 1); /* montreal's, empty */
	gitfx_peer_pack(&f->n.tp[1], id1, &bad, 16384);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_FAILED);
	expect_cancel(f, 1, id1);
	assert_int_equal(f->n.st.fetch_failures, 2);
	assert_int_equal(f->n.st.fetches, 0);
	assert_non_null(strstr(f->n.st.last_error, "fetch from montreal of r"));
	assert_null(packfetch_repo(f->n.pf));
	assert_false(in_repo(f, f->hb));
	assert_false(in_repo(f, want));
	assert_int_equal(packs(f), before);
	assert_int_equal(quarantines(f), 0);

	/* the positive control */
	assert_int_equal(start(f, want, -1), PACKFETCH_GOING);
	id0 = take_req(f, 0, want);
	gitfx_peer_pack(&f->n.tp[0], id0, &pack, 16384);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	assert_true(in_repo(f, want));
	assert_int_equal(quarantines(f), 0);
	buf_free(&pack);
	buf_free(&bad);
	buf_free(&in);
}

static void test_corrupt_small(void **state)
{
	struct fx *f = *state;
	bad_packs(f, f->hc, CORRUPT);
}

static void test_corrupt_large(void **state)
{
	struct fx *f = *state;
	bad_packs(f, f->hd, CORRUPT);
}

static void test_truncated_small(void **state)
{
	struct fx *f = *state;
	bad_packs(f, f->hc, TRUNCATED);
}

static void test_truncated_large(void **state)
{
	struct fx *f = *state;
	bad_packs(f, f->hd, TRUNCATED);
}

/* A whole, valid pack of the want's own objects but not of its parent:
 * it does not connect to what r has; with one peer the fetch fails and
 * nothing of it enters.  Small (libgit2) and large (index-pack). */
static void unconnected(struct fx *f, const char *want, const char *parent)
{
	struct buf pack = BUF_INIT, in = BUF_INIT;
	int before = packs(f);
	uint64_t id;

	f->n.io.npeers = 1;
	buf_printf(&in, "%s\n^%s\n", want, parent);
	gitfx_pack(f->dir, f->src, &pack, in.p, false);
	assert_int_equal(start(f, want, -1), PACKFETCH_GOING);
	id = take_req(f, 0, want);
	gitfx_peer_pack(&f->n.tp[0], id, &pack, 16384);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_FAILED);
	expect_cancel(f, 0, id);
	assert_non_null(strstr(f->n.st.last_error, "does not connect"));
	assert_int_equal(f->n.st.fetch_failures, 1);
	assert_false(in_repo(f, want));
	assert_int_equal(packs(f), before);
	assert_int_equal(quarantines(f), 0);
	buf_free(&pack);
	buf_free(&in);
}

static void test_unconnected_small(void **state)
{
	struct fx *f = *state;
	unconnected(f, f->hc, f->hb);
}

static void test_unconnected_large(void **state)
{
	struct fx *f = *state;
	unconnected(f, f->hd, f->hc);
}

/* A small pack of the tip's commit alone (its parent in r, its tree
 * nowhere): libgit2 indexes it, the in-process check refuses it, nothing
 * of it enters. */
static void test_tip_lacks_tree(void **state)
{
	struct fx *f = *state;
	struct buf pack = BUF_INIT, cmd = BUF_INIT;
	int before = packs(f);
	char b[4096];
	size_t got;
	uint64_t id;
	FILE *p;

	f->n.io.npeers = 1;
	buf_printf(&cmd,
	           "echo %s | git --git-dir='%s' pack-objects -q"
	           " --stdout",
	           f->hb, f->src);
	assert_non_null(p = popen(cmd.p, "r"));
	while ((got = fread(b, 1, sizeof(b), p)) > 0)
		buf_add(&pack, b, got);
	assert_int_equal(pclose(p), 0);
	assert_int_equal(start(f, f->hb, -1), PACKFETCH_GOING);
	id = take_req(f, 0, f->hb);
	gitfx_peer_pack(&f->n.tp[0], id, &pack, 16384);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_FAILED);
	expect_cancel(f, 0, id);
	assert_non_null(strstr(f->n.st.last_error, "does not connect"));
	assert_false(in_repo(f, f->hb));
	assert_int_equal(packs(f), before);
	assert_int_equal(quarantines(f), 0);
	buf_free(&pack);
	buf_free(&cmd);
}

/* The first peer says it cannot; the second is silent until the fetch
 * gives it up: failed, and both streams told. */
static void test_peer_err_then_silence(void **state)
{
	struct fx *f = *state;
	uint64_t id0, id1;

	assert_int_equal(start(f, f->hc, -1), PACKFETCH_GOING);
	id0 = take_req(f, 0, f->hc);
	gitfx_peer_err(&f->n.tp[0], id0, "not here");
	assert_int_equal(drive(f, 300), PACKFETCH_GOING);
	assert_non_null(strstr(f->n.st.last_error, "peer says: not here"));
	id1 = take_req(f, 1, f->hc);
	/* silent, but not for long enough yet */
	assert_int_equal(packfetch_tick(f->n.pf, clock_mono_ms() + 1000),
	                 PACKFETCH_GOING);
	assert_int_equal(packfetch_tick(f->n.pf, clock_mono_ms() + 11000),
	                 PACKFETCH_FAILED);
	expect_cancel(f, 1, id1);
	assert_non_null(strstr(f->n.st.last_error, "timed out"));
	assert_int_equal(f->n.st.fetch_failures, 2);
	assert_null(packfetch_repo(f->n.pf));
	assert_int_equal(quarantines(f), 0);
	/* nothing going: a tick does nothing */
	assert_int_equal(packfetch_tick(f->n.pf, clock_mono_ms() + 60000),
	                 PACKFETCH_GOING);
}

/* A chunk out of order fails its peer. */
static void test_out_of_order(void **state)
{
	struct fx *f = *state;
	uint64_t id;

	f->n.io.npeers = 1;
	assert_int_equal(start(f, f->hc, -1), PACKFETCH_GOING);
	id = take_req(f, 0, f->hc);
	gitfx_peer_chunk(&f->n.tp[0], id, 1, "PACK", 4, false);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_FAILED);
	assert_non_null(strstr(f->n.st.last_error, "chunk out of order"));
	expect_cancel(f, 0, id);
}

/* Frames of another stream, or from a peer not asked, change nothing
 * (the sender is told to stop a stream); the real answer still works. */
static void test_stale_frames(void **state)
{
	struct fx *f = *state;
	struct buf pack = BUF_INIT, in = BUF_INIT;
	uint64_t id;

	assert_int_equal(start(f, f->hc, -1), PACKFETCH_GOING);
	id = take_req(f, 0, f->hc);
	gitfx_peer_chunk(&f->n.tp[0], id + 1, 0, "PACK", 4, false);
	gitfx_peer_chunk(&f->n.tp[1], id, 0, "PACK", 4, false);
	gitfx_peer_chunk(&f->n.tp[1], id, 1, "", 0,
	                 true); /* a last: no answer */
	gitfx_peer_err(&f->n.tp[1], id, "busy");
	assert_int_equal(drive(f, 300), PACKFETCH_GOING);
	expect_cancel(f, 0, id + 1);
	expect_cancel(f, 1, id);
	assert_null(gitfx_peer_next(&f->n.tp[1],
	                            GRANTD__V1__PEER_MSG__BODY_PACK_ERR,
	                            "paloalto", 100));
	assert_int_equal(f->n.st.fetch_failures, 0);
	assert_string_equal(packfetch_repo(f->n.pf), "r");

	buf_printf(&in, "%s\n^%s\n", f->hc, f->ha);
	gitfx_pack(f->dir, f->src, &pack, in.p, true);
	gitfx_peer_pack(&f->n.tp[0], id, &pack, 512);
	assert_int_equal(drive(f, WAIT_MS), PACKFETCH_OK);
	assert_true(in_repo(f, f->hc));
	buf_free(&pack);
	buf_free(&in);
}

/* ---- which peer, which repository --------------------------------------- */

static void test_first(void **state)
{
	struct fx *f = *state;
	uint64_t id;

	assert_int_equal(start(f, f->hc, 1), PACKFETCH_GOING);
	id = take_req(f, 1, f->hc);
	assert_null(gitfx_peer_next(&f->n.tp[0],
	                            GRANTD__V1__PEER_MSG__BODY_PACK_REQ,
	                            "paloalto", 100));
	gitfx_peer_err(&f->n.tp[1], id, "not here");
	assert_int_equal(drive(f, 300), PACKFETCH_GOING);
	take_req(f, 0, f->hc); /* then the others */
}

static void test_unstarted(void **state)
{
	struct fx *f = *state;
	char wants[1][OID_HEX + 1];

	snprintf(wants[0], sizeof(wants[0]), "%s", f->hc);
	assert_int_equal(packfetch_start(f->n.pf, "absent",
	                                 (const char(*)[OID_HEX + 1]) wants, 1,
	                                 -1),
	                 PACKFETCH_UNSTARTED);
	assert_null(packfetch_repo(f->n.pf));
	assert_null(gitfx_peer_next(&f->n.tp[0],
	                            GRANTD__V1__PEER_MSG__BODY_PACK_REQ,
	                            "paloalto", 100));
	/* and then a fetch that can start, starts */
	assert_int_equal(start(f, f->hc, -1), PACKFETCH_GOING);
	take_req(f, 0, f->hc);
}

/* No peer reachable: the fetch fails at once, leaving nothing. */
static void test_nobody(void **state)
{
	struct fx *f = *state;
	void *old = f->n.dealer[0];

	assert_non_null(f->n.dealer[0] = peer_curve_client(
	                        &f->n.self, ZMQ_DEALER, "tcp://127.0.0.1:1",
	                        f->n.tp[0].pub, GITFX_MSG_MAX));
	zmq_close(old);
	f->n.io.npeers = 1;
	assert_int_equal(start(f, f->hc, -1), PACKFETCH_FAILED);
	assert_null(packfetch_repo(f->n.pf));
	assert_int_equal(quarantines(f), 0);
}

/* A fork's haves are its own tips and its parent's. */
static void test_fork_haves(void **state)
{
	struct fx *f = *state;
	Grantd__V1__Repo rec = GRANTD__V1__REPO__INIT;
	Grantd__V1__PeerMsg *m;
	struct store_batch *b;
	git_repository *base;
	struct buf path = BUF_INIT;
	uint8_t v[256];
	char he[41];
	git_oid e;
	bool found_a = false, found_e = false;

	assert_int_equal(repos_create(f->repo_dir, "base", NULL, NULL), 0);
	repos_path(&path, f->repo_dir, "base");
	assert_int_equal(git_repository_open_bare(&base, path.p), 0);
	gitfx_commit(base, &e, "e", "e\n", 2, NULL);
	gitfx_set_ref(base, "refs/heads/main", &e);
	git_repository_free(base);
	git_oid_tostr(he, sizeof(he), &e);
	rec.name = "r";
	rec.fork_of = "base";
	assert_int_equal(store_batch_new(&b, f->n.store), 0);
	store_put(b, CF_REPOS, "r", 1, v, grantd__v1__repo__pack(&rec, v));
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);

	assert_int_equal(start(f, f->hc, -1), PACKFETCH_GOING);
	m = gitfx_peer_next(&f->n.tp[0], GRANTD__V1__PEER_MSG__BODY_PACK_REQ,
	                    "paloalto", WAIT_MS);
	assert_non_null(m);
	assert_int_equal(m->pack_req->n_haves, 2);
	for (size_t i = 0; i < m->pack_req->n_haves; i++) {
		found_a |= !strcmp(m->pack_req->haves[i], f->ha);
		found_e |= !strcmp(m->pack_req->haves[i], he);
	}
	assert_true(found_a && found_e);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	buf_free(&path);
}

/* ---- quarantines -------------------------------------------------------- */

/* One a crash left is swept at the next start; one in progress goes with
 * the fetch when it is dropped. */
static void test_quarantines(void **state)
{
	struct fx *f = *state;
	struct buf pack = BUF_INIT, in = BUF_INIT;
	char left[256], file[300];
	FILE *fp;
	uint64_t id;

	snprintf(left, sizeof(left), "%s/grantd-incoming-crash1", f->path);
	assert_int_equal(mkdir(left, 0755), 0);
	snprintf(file, sizeof(file), "%s/pack", left);
	assert_int_equal(mkdir(file, 0755), 0);
	snprintf(file, sizeof(file), "%s/pack/pack-1.pack", left);
	assert_non_null(fp = fopen(file, "w"));
	fputs("PACK", fp);
	fclose(fp);
	assert_int_equal(quarantines(f), 1);
	assert_int_equal(start(f, f->hd, -1), PACKFETCH_GOING);
	assert_int_equal(quarantines(f), 1); /* the fetch's own */
	struct stat st;
	assert_int_equal(stat(left, &st), -1);

	/* half a large pack (index-pack running), then dropped */
	id = take_req(f, 0, f->hd);
	buf_printf(&in, "%s\n^%s\n", f->hd, f->ha);
	gitfx_pack(f->dir, f->src, &pack, in.p, true);
	pack.len /= 2;
	for (uint32_t seq = 0; seq * 8192 < pack.len; seq++)
		gitfx_peer_chunk(&f->n.tp[0], id, seq, pack.p + seq * 8192,
		                 pack.len - seq * 8192 < 8192
		                         ? pack.len - seq * 8192
		                         : 8192,
		                 false);
	assert_int_equal(drive(f, 300), PACKFETCH_GOING);
	assert_int_equal(quarantines(f), 1);
	packfetch_destroy(&f->n.pf);
	assert_null(f->n.pf);
	assert_int_equal(quarantines(f), 0);
	assert_false(in_repo(f, f->hd));
	buf_free(&pack);
	buf_free(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_small, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_large, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_corrupt_small, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_corrupt_large, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_truncated_small, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_truncated_large, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_unconnected_small, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_unconnected_large, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_tip_lacks_tree, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_peer_err_then_silence,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_out_of_order, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_stale_frames, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_first, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_unstarted, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_nobody, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_fork_haves, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_quarantines, setup,
	                                        teardown),
	};
	if (fx_group_setup("test_packfetch", LOG_LVL_ERROR) < 0 ||
	    repos_git_isolate() < 0)
		return 1;
	/* as the actor's start: objects and refs fsynced */
	git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, 1);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
