/*
 * test_gitio.c: node/git/gitio.h, what the gitrepl actor hands its
 * stages, over real bare repositories (libgit2) and real ZeroMQ sockets:
 *  - the path of a repository, and the one open repository cached: the
 *    same object for the same name, another for another name, nothing
 *    (and no stale cache) for a repository not there yet, opened once it
 *    appears;
 *  - peers by site;
 *  - the last error for status, cut to its buffer;
 *  - a frame on a DEALER reaches the peer's CURVE ROUTER, stamped with
 *    this site; on no connection it is refused (GD_EIO), not queued;
 *  - a frame for the sync ROUTER and a conflict mark go through the
 *    callbacks the actor set (here a real ROUTER and a list), with
 *    exactly what was asked;
 *  - a PackErr carries its id and reason either way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <git2.h>
#include <zmq.h>

#include "buf.h"
#include "err.h"
#include "fixture.h"
#include "gitfx.h"
#include "gitio.h"
#include "repos.h"

#define WAIT_MS GITFX_WAIT_MS

struct fx {
	char dir[64], repo_dir[128];
	void *zctx;
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	struct peer_self self;
	struct config_peer peers[2];
	struct gitio_stats st;
	struct gitio io;
	struct gitfx_peer tp; /* portland */
	void *dealer; /* to tp */
	/* the sync ROUTER (to_router's) and an asker on it */
	void *sync, *asker;
	struct buf asker_rid;
	int routed; /* to_router calls */
	/* marks (mark's calls): "key|val" each, val "-" for none */
	struct buf marks;
	int nmarks;
};

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
	struct fx *f = arg;

	f->nmarks++;
	buf_add(&f->marks, key, klen);
	buf_puts(&f->marks, "|");
	if (val)
		buf_add(&f->marks, val, vlen);
	else
		buf_puts(&f->marks, "-");
	buf_puts(&f->marks, "\n");
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	int zero = 0;

	assert_non_null(f);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_gitio", false), 0);
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	assert_int_equal(repos_create(f->repo_dir, "r", NULL, NULL), 0);
	assert_int_equal(repos_create(f->repo_dir, "s", NULL, NULL), 0);
	assert_non_null(f->zctx = zmq_ctx_new());
	assert_int_equal(zmq_curve_keypair(f->pub, f->sec), 0);
	f->self = (struct peer_self){f->zctx, "paloalto", f->pub, f->sec};
	gitfx_peer_open(&f->tp, f->zctx, "portland");
	f->peers[0] =
	        (struct config_peer){.site = "portland", .sync = f->tp.ep};
	snprintf(f->peers[0].public_key, sizeof(f->peers[0].public_key), "%s",
	         f->tp.pub);
	f->peers[1] = (struct config_peer){.site = "montreal",
	                                   .sync = "tcp://127.0.0.1:1"};
	snprintf(f->peers[1].public_key, sizeof(f->peers[1].public_key), "%s",
	         f->tp.pub);
	f->io = (struct gitio){.self = &f->self,
	                       .peers = f->peers,
	                       .npeers = 2,
	                       .repo_dir = f->repo_dir,
	                       .st = &f->st,
	                       .to_router = to_router,
	                       .mark = mark,
	                       .arg = f};
	/* the sync ROUTER and an asker with a routing id of its own */
	assert_non_null(f->sync = zmq_socket(f->zctx, ZMQ_ROUTER));
	assert_non_null(f->asker = zmq_socket(f->zctx, ZMQ_DEALER));
	zmq_setsockopt(f->sync, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(f->asker, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(f->asker, ZMQ_ROUTING_ID, "asker-1", 7);
	assert_int_equal(zmq_bind(f->sync, "inproc://test_gitio-sync"), 0);
	assert_int_equal(zmq_connect(f->asker, "inproc://test_gitio-sync"), 0);
	buf_add(&f->asker_rid, "asker-1", 7);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	gitio_close(&f->io);
	if (f->dealer)
		zmq_close(f->dealer);
	gitfx_peer_close(&f->tp);
	zmq_close(f->sync);
	zmq_close(f->asker);
	zmq_ctx_term(f->zctx);
	buf_free(&f->asker_rid);
	buf_free(&f->marks);
	assert_int_equal(fx_rmtree(f->dir), 0);
	free(f);
	return 0;
}

static void test_path_and_cache(void **state)
{
	struct fx *f = *state;
	struct buf p = BUF_INIT, want = BUF_INIT;
	git_repository *r, *s, *late;

	gitio_path(&f->io, &p, "r");
	buf_printf(&want, "%s/r.git", f->repo_dir);
	assert_string_equal(p.p, want.p);
	gitio_path(&f->io, &p, "a/b");
	buf_reset(&want);
	buf_printf(&want, "%s/a/b.git", f->repo_dir);
	assert_string_equal(p.p, want.p);

	assert_non_null(r = gitio_repo(&f->io, "r"));
	assert_true(git_repository_is_bare(r));
	assert_ptr_equal(gitio_repo(&f->io, "r"), r); /* cached */
	assert_string_equal(f->io.repo_name, "r");
	assert_non_null(s = gitio_repo(&f->io, "s"));
	assert_string_equal(f->io.repo_name, "s");
	gitio_path(&f->io, &p, "s");
	buf_puts(&p, "/");
	assert_string_equal(git_repository_path(s), p.p);

	/* not there (yet): nothing, and the cache of s is gone with it */
	assert_null(gitio_repo(&f->io, "late"));
	assert_null(f->io.repo);
	assert_string_equal(f->io.repo_name, "");
	assert_int_equal(repos_create(f->repo_dir, "late", NULL, NULL), 0);
	assert_non_null(late = gitio_repo(&f->io, "late"));
	gitio_path(&f->io, &p, "late");
	buf_puts(&p, "/");
	assert_string_equal(git_repository_path(late), p.p);

	gitio_close(&f->io);
	assert_null(f->io.repo);
	assert_string_equal(f->io.repo_name, "");
	gitio_close(&f->io); /* twice is fine */
	assert_non_null(gitio_repo(&f->io, "r"));
	buf_free(&p);
	buf_free(&want);
}

static void test_peer_index(void **state)
{
	struct fx *f = *state;

	assert_int_equal(gitio_peer_index(&f->io, "portland"), 0);
	assert_int_equal(gitio_peer_index(&f->io, "montreal"), 1);
	assert_int_equal(gitio_peer_index(&f->io, "paloalto"), -1); /* self */
	assert_int_equal(gitio_peer_index(&f->io, "port"), -1);
	assert_int_equal(gitio_peer_index(&f->io, ""), -1);
	assert_int_equal(gitio_peer_index(&f->io, NULL), -1);
	f->io.npeers = 1; /* only the first is a peer */
	assert_int_equal(gitio_peer_index(&f->io, "montreal"), -1);
}

static void test_error(void **state)
{
	struct fx *f = *state;
	char longer[600];

	gitio_error(&f->io, "fetch from %s of %s: %s", "portland", "r",
	            "timed out");
	assert_string_equal(f->st.last_error, "fetch from portland of r: "
	                                      "timed out");
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	gitio_error(&f->io, "%s", longer);
	assert_int_equal(strlen(f->st.last_error),
	                 sizeof(f->st.last_error) - 1);
	gitio_error(&f->io, "short");
	assert_string_equal(f->st.last_error, "short");
}

/* A frame on a DEALER to a peer's CURVE ROUTER; to a peer not there it is
 * refused at once. */
static void test_send_dealer(void **state)
{
	struct fx *f = *state;
	Grantd__V1__PeerMsg m, *got;
	Grantd__V1__PackCredit c = GRANTD__V1__PACK_CREDIT__INIT;
	void *nowhere;

	assert_non_null(f->dealer = peer_curve_client(&f->self, ZMQ_DEALER,
	                                              f->tp.ep, f->tp.pub,
	                                              1 << 20));
	gitfx_peer_wait(&f->tp, f->dealer);
	peer_msg_init(&f->self, &m);
	c.has_id = c.has_n = true;
	c.id = 77;
	c.n = 3;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT;
	m.pack_credit = &c;
	assert_int_equal(gitio_send(&f->io, f->dealer, &m), 0);
	got = gitfx_peer_next(&f->tp, GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT,
	                      "paloalto", WAIT_MS);
	assert_non_null(got);
	assert_int_equal(got->pack_credit->id, 77);
	assert_int_equal(got->pack_credit->n, 3);
	grantd__v1__peer_msg__free_unpacked(got, NULL);

	/* the PackErr of a fetch given up, on the DEALER */
	gitio_pack_err(&f->io, f->dealer, NULL, 1234567890123ull, "cancelled");
	got = gitfx_peer_next(&f->tp, GRANTD__V1__PEER_MSG__BODY_PACK_ERR,
	                      "paloalto", WAIT_MS);
	assert_non_null(got);
	assert_true(got->pack_err->has_id);
	assert_int_equal(got->pack_err->id, 1234567890123ull);
	assert_string_equal(got->pack_err->why, "cancelled");
	grantd__v1__peer_msg__free_unpacked(got, NULL);
	assert_int_equal(f->routed, 0); /* not through the ROUTER */

	/* nobody listens there: not sent, not queued */
	assert_non_null(nowhere = peer_curve_client(&f->self, ZMQ_DEALER,
	                                            f->peers[1].sync, f->tp.pub,
	                                            1 << 20));
	assert_int_equal(gitio_send(&f->io, nowhere, &m), GD_EIO);
	zmq_close(nowhere);
}

/* The next PeerMsg at the asker (behind the sync ROUTER). */
static Grantd__V1__PeerMsg *asker_recv(struct fx *f)
{
	zmq_msg_t part;
	const char *why;
	Grantd__V1__PeerMsg *m;

	assert_int_equal(gitfx_recv(f->asker, &part, 1, WAIT_MS), 1);
	m = peer_msg_decode(zmq_msg_data(&part), zmq_msg_size(&part),
	                    "paloalto", &why);
	assert_non_null(m);
	zmq_msg_close(&part);
	return m;
}

static void test_send_router(void **state)
{
	struct fx *f = *state;
	Grantd__V1__PeerMsg m, *got;
	Grantd__V1__PackChunk c = GRANTD__V1__PACK_CHUNK__INIT;
	zmq_msg_t parts[2];

	/* the ROUTER learns the asker from its first frame, as a peer's
	 * PackReq comes first */
	assert_int_equal(zmq_send(f->asker, "hello", 5, 0), 5);
	assert_int_equal(gitfx_recv(f->sync, parts, 2, WAIT_MS), 2);
	assert_int_equal(zmq_msg_size(&parts[0]), f->asker_rid.len);
	assert_memory_equal(zmq_msg_data(&parts[0]), f->asker_rid.p,
	                    f->asker_rid.len);
	zmq_msg_close(&parts[0]);
	zmq_msg_close(&parts[1]);

	peer_msg_init(&f->self, &m);
	c.has_id = c.has_seq = c.has_data = c.has_last = true;
	c.id = 9;
	c.seq = 4;
	c.data.data = (uint8_t *)"PACK";
	c.data.len = 4;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK;
	m.pack_chunk = &c;
	assert_int_equal(gitio_send_router(&f->io, &f->asker_rid, &m), 0);
	assert_int_equal(f->routed, 1);
	got = asker_recv(f);
	assert_int_equal(got->body_case, GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK);
	assert_int_equal(got->pack_chunk->id, 9);
	assert_int_equal(got->pack_chunk->seq, 4);
	assert_int_equal(got->pack_chunk->data.len, 4);
	assert_memory_equal(got->pack_chunk->data.data, "PACK", 4);
	assert_false(got->pack_chunk->last);
	grantd__v1__peer_msg__free_unpacked(got, NULL);

	/* a PackErr with no socket goes behind rid */
	gitio_pack_err(&f->io, NULL, &f->asker_rid, 5, "not here");
	assert_int_equal(f->routed, 2);
	got = asker_recv(f);
	assert_int_equal(got->body_case, GRANTD__V1__PEER_MSG__BODY_PACK_ERR);
	assert_int_equal(got->pack_err->id, 5);
	assert_string_equal(got->pack_err->why, "not here");
	grantd__v1__peer_msg__free_unpacked(got, NULL);
}

static void test_mark(void **state)
{
	struct fx *f = *state;

	/* keys hold NULs: passed whole, with their lengths */
	gitio_mark(&f->io, "r\0refs/heads/master\0", 20, "abc kept", 8);
	gitio_mark(&f->io, "r\0x\0", 4, NULL, 0);
	assert_int_equal(f->nmarks, 2);
	assert_int_equal(f->marks.len, 20 + 1 + 8 + 1 + 4 + 1 + 1 + 1);
	assert_memory_equal(f->marks.p,
	                    "r\0refs/heads/master\0|abc kept\nr\0x\0|-\n",
	                    f->marks.len);
	assert_int_equal(f->routed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_path_and_cache, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_peer_index, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_error, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_send_dealer, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_send_router, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_mark, setup, teardown),
	};
	if (fx_group_setup("test_gitio", LOG_LVL_WARN) < 0 ||
	    repos_git_isolate() < 0)
		return 1;
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
