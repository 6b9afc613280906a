/*
 * test_packsrv.c: node/git/packsrv.h, packs served to peers, driven as
 * the actor drives it: PackReqs come over a real ROUTER (the sync
 * socket's part) from DEALERs of the test's, the frames go back through
 * gitio's to_router on that ROUTER, and the streams' pipes are polled
 * with zmq_poll; the packs are made by the real `git pack-objects` and
 * read back with the real `git index-pack` and `git show-index`.
 *  - a small pack is built in-process, sent whole with the request;
 *  - a pack served holds exactly the objects asked for: what the wants
 *    reach and the haves do not (thin: bases only from the haves), never
 *    those of a branch not asked;
 *  - chunks in order, none over GITIO_CHUNK_MAX, one per credit: none
 *    while the asker owes; the empty last one ends it;
 *  - a bad request, a repository or a want not here, too many streams
 *    (per peer, in all, the same id twice) get a PackErr and no stream;
 *  - a cancel closes the stream; a keep-alive when git is slow; a
 *    stream without credit for too long is dropped; every child is
 *    reaped at destroy.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
#include "packsrv.h"
#include "repos.h"

#define REF       "refs/heads/master"
#define WAIT_MS   GITFX_WAIT_MS
#define BIG_BYTES (700 * 1024) /* a pack of three chunks at least */
#define ASKERS    3

struct fx {
	char dir[64], repo_dir[128], src[160], dst[160];
	void *zctx;
	struct peer_self self; /* this node, which serves */
	struct gitio_stats st;
	struct gitio io;
	struct packsrv *ps;
	void *sync; /* the sync ROUTER */
	void *asker[ASKERS]; /* DEALERs of portland, montreal, ottawa */
	struct peer_self asker_self[ASKERS];
	struct buf rid[ASKERS];
	int routed;
	/* src: a <- b <- c (master), x (side, a root), d <- c (big) */
	git_oid a, b, c, d, x;
	char ha[41], hb[41], hc[41], hd[41], hx[41];
};

static const char *const sites[ASKERS] = {"portland", "montreal", "ottawa"};

/* ---- histories ---------------------------------------------------------- */

/* A text of n lines that differs a little from each commit to the next:
 * material for deltas. */
static void text(struct buf *out, const char *tag)
{
	buf_reset(out);
	for (int i = 0; i < 200; i++)
		buf_printf(out, "line %d of the file, the same in each\n", i);
	buf_printf(out, "%s\n", tag);
}

static void histories(struct fx *f)
{
	git_repository *src, *dst;
	struct buf t = BUF_INIT;
	uint8_t *big = malloc(BIG_BYTES);
	git_oid a2;

	assert_non_null(big);
	gitfx_noise(big, BIG_BYTES, 88172645u);
	assert_int_equal(git_repository_open_bare(&src, f->src), 0);
	text(&t, "a");
	gitfx_commit(src, &f->a, "f", t.p, t.len, NULL);
	text(&t, "b");
	gitfx_commit(src, &f->b, "f", t.p, t.len, &f->a);
	text(&t, "c");
	gitfx_commit(src, &f->c, "f", t.p, t.len, &f->b);
	gitfx_commit(src, &f->d, "big", big, BIG_BYTES, &f->c);
	gitfx_commit(src, &f->x, "side", "side only\n", 10, NULL);
	gitfx_set_ref(src, REF, &f->c);
	gitfx_set_ref(src, "refs/heads/big", &f->d);
	gitfx_set_ref(src, "refs/heads/side", &f->x);
	git_repository_free(src);
	/* the asker's copy: a alone */
	assert_int_equal(git_repository_open_bare(&dst, f->dst), 0);
	text(&t, "a");
	gitfx_commit(dst, &a2, "f", t.p, t.len, NULL);
	assert_true(git_oid_equal(&a2, &f->a));
	gitfx_set_ref(dst, REF, &a2);
	git_repository_free(dst);
	free(big);
	buf_free(&t);
	git_oid_tostr(f->ha, sizeof(f->ha), &f->a);
	git_oid_tostr(f->hb, sizeof(f->hb), &f->b);
	git_oid_tostr(f->hc, sizeof(f->hc), &f->c);
	git_oid_tostr(f->hd, sizeof(f->hd), &f->d);
	git_oid_tostr(f->hx, sizeof(f->hx), &f->x);
}

/* The first column of each line cmd prints, as "\nHEX\nHEX\n..." (so
 * that "\nHEX\n" finds one); returns how many. */
static int object_set(const char *cmd, struct buf *out, int column)
{
	char line[512];
	int n = 0;
	FILE *p = popen(cmd, "r");

	assert_non_null(p);
	buf_reset(out);
	buf_puts(out, "\n");
	while (fgets(line, sizeof(line), p)) {
		char *w = line;
		for (int c = 0; c < column; c++) {
			w += strcspn(w, " \t");
			w += strspn(w, " \t");
		}
		w[strcspn(w, " \t\n")] = '\0';
		assert_int_equal(strlen(w), 40);
		buf_printf(out, "%s\n", w);
		n++;
	}
	assert_int_equal(pclose(p), 0);
	return n;
}

static bool set_has(const struct buf *set, const char *hex)
{
	char k[44];

	snprintf(k, sizeof(k), "\n%s\n", hex);
	return strstr(set->p, k) != NULL;
}

/* What git rev-list --objects lists in src for revs. */
static int expected(struct fx *f, const char *revs, struct buf *out)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "git --git-dir='%s' rev-list --objects %s",
	         f->src, revs);
	return object_set(cmd, out, 0);
}

/* The objects in pack, as the asker's git indexes it (completing a thin
 * pack from its own objects). */
static int pack_objects(struct fx *f, const struct buf *pack, struct buf *out)
{
	char file[192], cmd[1024], name[128] = "";
	FILE *fp;

	snprintf(file, sizeof(file), "%s/got.pack", f->dir);
	assert_non_null(fp = fopen(file, "w"));
	assert_int_equal(fwrite(pack->p, 1, pack->len, fp), pack->len);
	fclose(fp);
	snprintf(
	        cmd, sizeof(cmd),
	        "git --git-dir='%s' index-pack --stdin --fix-thin --keep <'%s'",
	        f->dst, file);
	assert_non_null(fp = popen(cmd, "r"));
	assert_non_null(fgets(name, sizeof(name), fp));
	assert_int_equal(pclose(fp), 0);
	assert_memory_equal(name, "keep\t", 5);
	name[strcspn(name, "\n")] = '\0';
	snprintf(cmd, sizeof(cmd),
	         "git show-index <'%s/objects/pack/pack-%s.idx'", f->dst,
	         name + 5);
	return object_set(cmd, out, 1);
}

/* How many objects the pack says it holds (its header: "PACK", version,
 * count, big-endian), before any base is added to complete it. */
static uint32_t pack_count(const struct buf *pack)
{
	const uint8_t *p = (const uint8_t *)pack->p;

	assert_true(pack->len >= 12);
	assert_memory_equal(p, "PACK", 4);
	return (uint32_t)p[8] << 24 | (uint32_t)p[9] << 16 |
	       (uint32_t)p[10] << 8 | p[11];
}

/* ---- the sockets -------------------------------------------------------- */

static int
to_router(void *arg, const struct buf *rid, const Grantd__V1__PeerMsg *m)
{
	struct fx *f = arg;

	f->routed++;
	return peer_send(f->sync, m, rid->p, rid->len);
}

static void
mark(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
	fail_msg("a pack server never marks a loser");
}

/* The actor's part of asker k's frame on the ROUTER (pair_serve): taken
 * apart, decoded as from its site, handed to the server. */
static void route(struct fx *f, int k)
{
	zmq_msg_t parts[2];
	const char *why;
	Grantd__V1__PeerMsg *m;
	struct buf rid = BUF_INIT;

	assert_int_equal(gitfx_recv(f->sync, parts, 2, WAIT_MS), 2);
	buf_add(&rid, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]));
	assert_int_equal(rid.len, f->rid[k].len);
	assert_memory_equal(rid.p, f->rid[k].p, rid.len);
	m = peer_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]),
	                    sites[k], &why);
	assert_non_null(m);
	if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_REQ)
		packsrv_request(f->ps, &rid, sites[k], m->pack_req);
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT)
		packsrv_credit(f->ps, sites[k], m->pack_credit);
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_ERR)
		packsrv_cancel(f->ps, sites[k], m->pack_err->id);
	else
		fail_msg("unexpected kind %d", (int)m->body_case);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	zmq_msg_close(&parts[0]);
	zmq_msg_close(&parts[1]);
	buf_free(&rid);
}

static void ask_send(struct fx *f, int k, Grantd__V1__PeerMsg *m)
{
	assert_int_equal(peer_send(f->asker[k], m, NULL, 0), 0);
	route(f, k);
}

/* Asker k asks for wants (NULL-ended) with haves (NULL-ended). */
static void ask(struct fx *f,
                int k,
                uint64_t id,
                const char *repo,
                const char *const *wants,
                const char *const *haves,
                uint32_t cr)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__PackReq q = GRANTD__V1__PACK_REQ__INIT;

	peer_msg_init(&f->asker_self[k], &m);
	q.has_id = true;
	q.id = id;
	q.repo = (char *)repo;
	for (q.n_wants = 0; wants && wants[q.n_wants]; q.n_wants++)
		;
	for (q.n_haves = 0; haves && haves[q.n_haves]; q.n_haves++)
		;
	q.wants = (char **)wants;
	q.haves = (char **)haves;
	q.has_credit = cr > 0;
	q.credit = cr;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_REQ;
	m.pack_req = &q;
	ask_send(f, k, &m);
}

static void credit(struct fx *f, int k, uint64_t id, uint32_t n)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__PackCredit c = GRANTD__V1__PACK_CREDIT__INIT;

	peer_msg_init(&f->asker_self[k], &m);
	c.has_id = c.has_n = true;
	c.id = id;
	c.n = n;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT;
	m.pack_credit = &c;
	ask_send(f, k, &m);
}

static void cancel(struct fx *f, int k, uint64_t id)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__PackErr e = GRANTD__V1__PACK_ERR__INIT;

	peer_msg_init(&f->asker_self[k], &m);
	e.has_id = true;
	e.id = id;
	e.why = "cancelled";
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_ERR;
	m.pack_err = &e;
	ask_send(f, k, &m);
}

/* The actor's turn for the streams: poll their pipes up to ms, read.
 * Returns how many streams had credit (were polled). */
static int serve(struct fx *f, int ms)
{
	zmq_pollitem_t items[PACKSRV_STREAMS_MAX];
	int n = packsrv_poll(f->ps, items);

	if (n && zmq_poll(items, n, ms) < 0)
		fail_msg("zmq_poll: %s", zmq_strerror(errno));
	packsrv_ready(f->ps, items);
	return n;
}

/* The next frame for asker k, serving meanwhile; NULL when none came
 * within ms. */
static Grantd__V1__PeerMsg *next(struct fx *f, int k, int ms)
{
	zmq_pollitem_t in = {f->asker[k], 0, ZMQ_POLLIN, 0};
	uint64_t end = clock_mono_ms() + ms;
	zmq_msg_t msg;
	const char *why;
	Grantd__V1__PeerMsg *m;

	while (zmq_poll(&in, 1, 0) == 0) {
		if (clock_mono_ms() >= end)
			return NULL;
		if (!serve(f, 10))
			usleep(5000);
	}
	zmq_msg_init(&msg);
	assert_true(zmq_msg_recv(&msg, f->asker[k], 0) >= 0);
	m = peer_msg_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), "paloalto",
	                    &why);
	assert_non_null(m);
	zmq_msg_close(&msg);
	return m;
}

/* The PackErr for asker k: its id and reason. */
static void expect_err(struct fx *f, int k, uint64_t id, const char *why)
{
	Grantd__V1__PeerMsg *m = next(f, k, WAIT_MS);

	assert_non_null(m);
	assert_int_equal(m->body_case, GRANTD__V1__PEER_MSG__BODY_PACK_ERR);
	assert_int_equal(m->pack_err->id, id);
	assert_string_equal(m->pack_err->why, why);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
}

/* The whole stream id for asker k into pack: chunks in order, each at
 * most GITIO_CHUNK_MAX, a credit of one after each (as packfetch gives);
 * with per_chunk (the request gave one credit) the server has none left
 * before it.  Returns the number of chunks with data. */
static int
collect(struct fx *f, int k, uint64_t id, struct buf *pack, bool per_chunk)
{
	uint32_t seq = 0;
	int data = 0, given = 1; /* the request's credit */

	buf_reset(pack);
	for (;;) {
		Grantd__V1__PeerMsg *m = next(f, k, WAIT_MS);
		assert_non_null(m);
		assert_int_equal(m->body_case,
		                 GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK);
		Grantd__V1__PackChunk *c = m->pack_chunk;
		assert_int_equal(c->id, id);
		assert_int_equal(c->seq, seq++);
		assert_true(c->data.len <= GITIO_CHUNK_MAX);
		if (c->data.len) /* an empty one may have no data at all */
			buf_add(pack, c->data.data, c->data.len);
		bool last = c->last;
		if (!last && c->data.len)
			data++;
		grantd__v1__peer_msg__free_unpacked(m, NULL);
		if (last)
			break;
		if (per_chunk) {
			/* no credit left: its pipe is not even polled */
			assert_int_equal(serve(f, 0), 0);
			assert_true(data <= given);
		}
		credit(f, k, id, 1); /* as packfetch does */
		given++;
	}
	return data;
}

/* ---- setup -------------------------------------------------------------- */

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	int zero = 0;

	assert_non_null(f);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_packsrv", false), 0);
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	assert_int_equal(repos_create(f->repo_dir, "src", NULL, NULL), 0);
	snprintf(f->src, sizeof(f->src), "%s/src.git", f->repo_dir);
	snprintf(f->dst, sizeof(f->dst), "%s/asker/dst.git", f->dir);
	assert_int_equal(repos_create(f->dir, "asker/dst", NULL, NULL), 0);
	histories(f);
	assert_non_null(f->zctx = zmq_ctx_new());
	f->self = (struct peer_self){f->zctx, "paloalto", NULL, NULL};
	f->io = (struct gitio){.self = &f->self,
	                       .repo_dir = f->repo_dir,
	                       .st = &f->st,
	                       .to_router = to_router,
	                       .mark = mark,
	                       .arg = f};
	assert_non_null(f->sync = zmq_socket(f->zctx, ZMQ_ROUTER));
	zmq_setsockopt(f->sync, ZMQ_LINGER, &zero, sizeof(zero));
	assert_int_equal(zmq_bind(f->sync, "inproc://test_packsrv"), 0);
	for (int k = 0; k < ASKERS; k++) {
		char id[32];
		int n = snprintf(id, sizeof(id), "%s-git", sites[k]);
		assert_non_null(f->asker[k] = zmq_socket(f->zctx, ZMQ_DEALER));
		zmq_setsockopt(f->asker[k], ZMQ_LINGER, &zero, sizeof(zero));
		zmq_setsockopt(f->asker[k], ZMQ_ROUTING_ID, id, (size_t)n);
		assert_int_equal(
		        zmq_connect(f->asker[k], "inproc://test_packsrv"), 0);
		buf_add(&f->rid[k], id, (size_t)n);
		f->asker_self[k] =
		        (struct peer_self){f->zctx, sites[k], NULL, NULL};
	}
	packsrv_open(&f->ps, &f->io);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	packsrv_destroy(&f->ps);
	for (int k = 0; k < ASKERS; k++) {
		zmq_close(f->asker[k]);
		buf_free(&f->rid[k]);
	}
	zmq_close(f->sync);
	zmq_ctx_term(f->zctx);
	assert_int_equal(fx_rmtree(f->dir), 0);
	free(f);
	return 0;
}

/* ---- what a pack holds -------------------------------------------------- */

/* wants c, haves a: exactly the objects of b and c that a lacks (and, the
 * pack being thin, bases the asker has); nothing of the side branch. */
static void test_exact_objects(void **state)
{
	struct fx *f = *state;
	const char *wants[] = {f->hc, NULL}, *haves[] = {f->ha, NULL};
	struct buf pack = BUF_INIT, want = BUF_INIT, got = BUF_INIT;
	struct buf of_a = BUF_INIT, side = BUF_INIT;
	char revs[128];
	int nw, ng;

	ask(f, 0, 42, "src", wants, haves, 8);
	collect(f, 0, 42, &pack, false);
	assert_memory_equal(pack.p, "PACK", 4);
	snprintf(revs, sizeof(revs), "%s ^%s", f->hc, f->ha);
	nw = expected(f, revs, &want);
	assert_int_equal(nw, 6); /* b and c: a commit, a tree, a blob each */
	ng = pack_objects(f, &pack, &got);
	expected(f, f->ha, &of_a);
	expected(f, f->hx, &side);
	/* every object asked for, and the others only bases from a */
	for (char *p = want.p + 1; *p; p += 41) {
		p[40] = '\0';
		assert_true(set_has(&got, p));
		p[40] = '\n';
	}
	for (char *p = got.p + 1; *p; p += 41) {
		p[40] = '\0';
		assert_true(set_has(&want, p) || set_has(&of_a, p));
		assert_false(set_has(&side, p) && !set_has(&of_a, p));
		p[40] = '\n';
	}
	assert_true(ng >= nw);
	/* as sent: exactly those, none of a's (the bases stay out) */
	assert_int_equal(pack_count(&pack), nw);
	assert_int_equal(f->st.served, 1);
	assert_int_equal(f->st.bytes_out, pack.len);
	assert_int_equal(serve(f, 0), 0); /* the stream is gone */
	buf_free(&pack);
	buf_free(&want);
	buf_free(&got);
	buf_free(&of_a);
	buf_free(&side);
}

/* A small pack is built in-process (packbuild.h): sent whole with the
 * request, no child left to poll; exactly the objects asked for, which
 * connect the asker's copy.  A large one still has its pack-objects. */
static void test_in_process(void **state)
{
	struct fx *f = *state;
	const char *wants[] = {f->hc, NULL}, *haves[] = {f->ha, NULL};
	const char *d[] = {f->hd, NULL};
	struct buf pack = BUF_INIT, want = BUF_INIT, got = BUF_INIT;
	char revs[128];

	ask(f, 0, 3, "src", wants, haves, 8);
	assert_int_equal(serve(f, 0), 0); /* no child, no stream */
	assert_int_equal(f->st.served, 1);
	collect(f, 0, 3, &pack, false);
	snprintf(revs, sizeof(revs), "%s ^%s", f->hc, f->ha);
	assert_int_equal(expected(f, revs, &want), 6);
	assert_int_equal(pack_count(&pack), 6);
	assert_int_equal(pack_objects(f, &pack, &got), 6);
	for (char *p = want.p + 1; *p; p += 41) {
		p[40] = '\0';
		assert_true(set_has(&got, p));
		p[40] = '\n';
	}
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
	         "git --git-dir='%s' rev-list --objects %s >/dev/null", f->dst,
	         f->hc);
	assert_int_equal(system(cmd), 0);
	ask(f, 1, 4, "src", d, NULL, 1);
	assert_int_equal(serve(f, WAIT_MS), 1); /* pack-objects' pipe */
	buf_free(&pack);
	buf_free(&want);
	buf_free(&got);
}

/* No haves: the whole history of the want, and only it.  A have the
 * server lacks is ignored. */
static void test_whole_history(void **state)
{
	struct fx *f = *state;
	const char *wants[] = {f->hc, NULL};
	const char *haves[] = {"0123456789abcdef0123456789abcdef01234567",
	                       NULL};
	struct buf pack = BUF_INIT, want = BUF_INIT, got = BUF_INIT;

	ask(f, 1, 7, "src", wants, haves, 8);
	collect(f, 1, 7, &pack, false);
	assert_int_equal(expected(f, f->hc, &want), 9);
	assert_int_equal(pack_objects(f, &pack, &got), 9);
	assert_int_equal(pack_count(&pack), 9);
	for (char *p = want.p + 1; *p; p += 41) {
		p[40] = '\0';
		assert_true(set_has(&got, p));
		p[40] = '\n';
	}
	buf_free(&pack);
	buf_free(&want);
	buf_free(&got);
}

/* One chunk per credit, none while the asker owes; the pack whole. */
static void test_credit(void **state)
{
	struct fx *f = *state;
	const char *wants[] = {f->hd, NULL}, *haves[] = {f->hc, NULL};
	struct buf pack = BUF_INIT, got = BUF_INIT;

	ask(f, 0, 5, "src", wants, haves, 1);
	assert_true(collect(f, 0, 5, &pack, true) >= 3);
	assert_true(pack.len > BIG_BYTES);
	assert_true(pack_objects(f, &pack, &got) >= 3);
	assert_true(set_has(&got, f->hd));
	assert_int_equal(f->st.served, 1);
	assert_int_equal(f->st.bytes_out, pack.len);
	buf_free(&pack);
	buf_free(&got);
}

/* ---- refusals ----------------------------------------------------------- */

static void test_refused(void **state)
{
	struct fx *f = *state;
	const char *c[] = {f->hc, NULL};
	const char *absent[] = {"0123456789abcdef0123456789abcdef01234567",
	                        NULL};
	const char *notoid[] = {"HEAD", NULL};
	const char *many[GITIO_WANTS_MAX + 2];
	Grantd__V1__PeerMsg m;
	Grantd__V1__PackReq q = GRANTD__V1__PACK_REQ__INIT;

	for (int i = 0; i <= GITIO_WANTS_MAX; i++)
		many[i] = f->hc;
	many[GITIO_WANTS_MAX + 1] = NULL;
	ask(f, 0, 1, "src.git", c, NULL, 8); /* not the name as normalised */
	expect_err(f, 0, 1, "bad request");
	ask(f, 0, 2, "../repos/src", c, NULL, 8);
	expect_err(f, 0, 2, "bad request");
	ask(f, 0, 3, "src", NULL, NULL, 8);
	expect_err(f, 0, 3, "bad request");
	ask(f, 0, 4, "src", notoid, NULL, 8);
	expect_err(f, 0, 4, "bad request");
	ask(f, 0, 5, "src", many, NULL, 8);
	expect_err(f, 0, 5, "bad request");
	ask(f, 0, 6, "src", absent, NULL, 8);
	expect_err(f, 0, 6, "not here");
	ask(f, 0, 7, "nope", c, NULL, 8);
	expect_err(f, 0, 7, "no such repository here");
	/* no id, no repository */
	peer_msg_init(&f->asker_self[0], &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_REQ;
	m.pack_req = &q;
	ask_send(f, 0, &m);
	expect_err(f, 0, 0, "bad request");
	assert_int_equal(serve(f, 0), 0); /* no stream */
	assert_int_equal(f->st.served, 0);
	assert_int_equal(f->routed, 8);
}

/* Three streams per peer, eight in all, an id once per peer.  Each
 * stream has one credit and a large pack: it stays open, owing. */
static void test_busy(void **state)
{
	struct fx *f = *state;
	const char *d[] = {f->hd, NULL};
	bool seen[4] = {false};

	for (uint64_t id = 1; id <= 3; id++)
		ask(f, 0, id, "src", d, NULL, 1);
	ask(f, 0, 4, "src", d, NULL, 1);
	expect_err(f, 0, 4, "busy");
	ask(f, 1, 1, "src", d, NULL, 1); /* another peer's id 1 */
	ask(f, 1, 1, "src", d, NULL, 1); /* the same stream again */
	expect_err(f, 1, 1, "busy");
	ask(f, 1, 2, "src", d, NULL, 1);
	ask(f, 1, 3, "src", d, NULL, 1);
	ask(f, 2, 1, "src", d, NULL, 1);
	ask(f, 2, 2, "src", d, NULL, 1);
	ask(f, 2, 3, "src", d, NULL, 1); /* the ninth */
	expect_err(f, 2, 3, "busy");
	/* a cancel frees a place */
	cancel(f, 0, 2);
	ask(f, 2, 3, "src", d, NULL, 1);
	/* ottawa's three streams each send their one chunk */
	for (int n = 0; n < 3; n++) {
		Grantd__V1__PeerMsg *m = next(f, 2, WAIT_MS);
		assert_non_null(m);
		assert_int_equal(m->body_case,
		                 GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK);
		uint64_t id = m->pack_chunk->id;
		assert_true(id >= 1 && id <= 3 && !seen[id]);
		seen[id] = true;
		assert_int_equal(m->pack_chunk->seq, 0);
		assert_false(m->pack_chunk->last);
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	}
	assert_null(next(f, 2, 200)); /* then they owe */
	assert_int_equal(f->st.served, 0);
}

/* A cancelled stream sends nothing more; its id may be used again. */
static void test_cancel(void **state)
{
	struct fx *f = *state;
	const char *d[] = {f->hd, NULL};
	struct buf pack = BUF_INIT;
	Grantd__V1__PeerMsg *m;

	ask(f, 0, 9, "src", d, NULL, 1);
	m = next(f, 0, WAIT_MS); /* one chunk, then it owes */
	assert_non_null(m);
	assert_int_equal(m->pack_chunk->seq, 0);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	cancel(f, 0, 9);
	cancel(f, 0, 99); /* unknown: nothing */
	credit(f, 0, 9, 8);
	assert_null(next(f, 0, 300));
	assert_int_equal(f->st.served, 0);
	ask(f, 0, 9, "src", d, NULL, 64);
	collect(f, 0, 9, &pack, false);
	assert_int_equal(f->st.served, 1);
	buf_free(&pack);
}

/* Keep-alives while the asker has credit and git says nothing; a stream
 * that has had no credit for 30 s is dropped. */
static void test_keepalive_and_idle(void **state)
{
	struct fx *f = *state;
	const char *d[] = {f->hd, NULL};
	Grantd__V1__PeerMsg *m;
	zmq_pollitem_t in = {f->asker[0], 0, ZMQ_POLLIN, 0};
	uint64_t t;

	ask(f, 0, 11, "src", d, NULL, 1);
	t = clock_mono_ms();
	packsrv_tick(f->ps, t + 1000); /* not yet */
	assert_int_equal(zmq_poll(&in, 1, 50), 0);
	packsrv_tick(f->ps, t + 4000);
	assert_int_equal(zmq_poll(&in, 1, WAIT_MS), 1);
	m = next(f, 0, 0);
	assert_non_null(m);
	assert_int_equal(m->pack_chunk->seq, 0);
	assert_int_equal(m->pack_chunk->data.len, 0);
	assert_false(m->pack_chunk->last);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	m = next(f, 0, WAIT_MS); /* the data, with the one credit */
	assert_non_null(m);
	assert_int_equal(m->pack_chunk->seq, 1);
	assert_true(m->pack_chunk->data.len > 0);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	/* no credit: no keep-alive; 20 s is not too long */
	t = clock_mono_ms();
	packsrv_tick(f->ps, t + 20000);
	assert_int_equal(zmq_poll(&in, 1, 100), 0);
	credit(f, 0, 11, 1);
	m = next(f, 0, WAIT_MS);
	assert_non_null(m);
	assert_int_equal(m->pack_chunk->seq, 2);
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	/* 31 s: dropped, and credit no longer brings anything */
	t = clock_mono_ms();
	packsrv_tick(f->ps, t + 31000);
	credit(f, 0, 11, 8);
	assert_int_equal(serve(f, 0), 0);
	assert_null(next(f, 0, 300));
	assert_int_equal(f->st.served, 0);
}

/* Every child reaped when the server goes (none left to wait for). */
static void test_destroy(void **state)
{
	struct fx *f = *state;
	const char *d[] = {f->hd, NULL}, *c[] = {f->hc, NULL};

	ask(f, 0, 1, "src", d, NULL, 1);
	ask(f, 1, 1, "src", c, NULL, 0);
	ask(f, 2, 1, "src", d, NULL, 0);
	packsrv_destroy(&f->ps);
	assert_null(f->ps);
	errno = 0;
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	packsrv_destroy(&f->ps); /* NULL is fine */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_exact_objects, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_in_process, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_whole_history, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_credit, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_busy, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_keepalive_and_idle, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_destroy, setup, teardown),
	};
	if (fx_group_setup("test_packsrv", LOG_LVL_ERROR) < 0 ||
	    repos_git_isolate() < 0)
		return 1;
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
