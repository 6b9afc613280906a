/*
 * gitfx.h: what the unit tests of node/git's stages share (test_gitio.c,
 * test_glsync.c, test_packfetch.c, test_packsrv.c, test_reconcile.c):
 * commits made alike in any repository (same contents, same ids, so a
 * peer's copy and ours hold the same history), packs made by the real
 * `git pack-objects`, and a peer that is a CURVE ROUTER of the test's on
 * 127.0.0.1 (no ZAP handler: it takes any client key), stamping its
 * frames with its own site; and the fetching side the tests of packfetch
 * and reconcile share (struct gitfx_node: a store, two such peers, the
 * actor's DEALERs to them, a gitio and a packfetch).
 *
 * Static inline functions, a copy in each test that includes it: a
 * header, not a test (tests/CMakeLists.txt builds test_*.c only), and not
 * fixture.c (the tests of every node module link that).  They assert
 * with cmocka, so include <cmocka.h> (and what it needs) first.
 */
#ifndef GD_TEST_GITFX_H
#define GD_TEST_GITFX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <git2.h>
#include <zmq.h>

#include "buf.h"
#include "config.h"
#include "gitio.h"
#include "packfetch.h"
#include "peer.h"
#include "store.h"

#define GITFX_WAIT_MS 10000

/* ---- histories ---------------------------------------------------------- */

/* A commit of one file name holding data (len bytes), its message name,
 * by "t" at a fixed time, on parent (NULL: a root); no ref moves. */
static inline void gitfx_commit(git_repository *repo,
                                git_oid *out,
                                const char *name,
                                const void *data,
                                size_t len,
                                const git_oid *parent_id)
{
	git_treebuilder *tb;
	git_oid blob, tree;
	git_tree *t;
	git_signature *sig;
	git_commit *parent = NULL;

	assert_int_equal(git_blob_create_from_buffer(&blob, repo, data, len),
	                 0);
	assert_int_equal(git_treebuilder_new(&tb, repo, NULL), 0);
	assert_int_equal(git_treebuilder_insert(NULL, tb, name, &blob,
	                                        GIT_FILEMODE_BLOB),
	                 0);
	assert_int_equal(git_treebuilder_write(&tree, tb), 0);
	git_treebuilder_free(tb);
	assert_int_equal(git_tree_lookup(&t, repo, &tree), 0);
	assert_int_equal(git_signature_new(&sig, "t", "t@e", 1700000000, 0), 0);
	if (parent_id)
		assert_int_equal(git_commit_lookup(&parent, repo, parent_id),
		                 0);
	assert_int_equal(git_commit_create_v(out, repo, NULL, sig, sig, NULL,
	                                     name, t, parent ? 1 : 0, parent),
	                 0);
	git_commit_free(parent);
	git_signature_free(sig);
	git_tree_free(t);
}

/* The same with text as the file "f" and the message. */
static inline void gitfx_commit_text(git_repository *repo,
                                     git_oid *out,
                                     const char *text,
                                     const git_oid *parent_id)
{
	gitfx_commit(repo, out, text, text, strlen(text), parent_id);
}

/* ref points at id, whatever it pointed at. */
static inline void
gitfx_set_ref(git_repository *repo, const char *ref, const git_oid *id)
{
	git_reference *r;

	assert_int_equal(git_reference_create(&r, repo, ref, id, 1, NULL), 0);
	git_reference_free(r);
}

/* len bytes that do not compress (xorshift from seed), for large packs. */
static inline void gitfx_noise(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed ? seed : 2463534242u;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* A pack of the repository at git_dir made by git, into out: with revs,
 * `pack-objects --revs --thin` of input (rev lines, "^" for haves);
 * without, exactly the objects `rev-list --objects` lists for input.
 * tmp is a directory for its files. */
static inline void gitfx_pack(const char *tmp,
                              const char *git_dir,
                              struct buf *out,
                              const char *input,
                              bool revs)
{
	char in[256], pk[256], cmd[1200], b[8192];
	FILE *fp;
	size_t n;

	snprintf(in, sizeof(in), "%s/pack.in", tmp);
	snprintf(pk, sizeof(pk), "%s/pack.out", tmp);
	assert_non_null(fp = fopen(in, "w"));
	fputs(input, fp);
	fclose(fp);
	if (revs)
		snprintf(cmd, sizeof(cmd),
		         "git --git-dir='%s' pack-objects --revs --thin "
		         "--stdout -q --delta-base-offset <'%s' >'%s'",
		         git_dir, in, pk);
	else
		snprintf(cmd, sizeof(cmd),
		         "git --git-dir='%s' rev-list --objects --stdin <'%s' "
		         "| git --git-dir='%s' pack-objects --stdout -q >'%s'",
		         git_dir, in, git_dir, pk);
	assert_int_equal(system(cmd), 0);
	buf_reset(out);
	assert_non_null(fp = fopen(pk, "r"));
	while ((n = fread(b, 1, sizeof(b), fp)) > 0)
		buf_add(out, b, n);
	fclose(fp);
	assert_true(out->len > 32);
	assert_memory_equal(out->p, "PACK", 4);
}

/* ---- sockets ------------------------------------------------------------ */

/* Receive one message (at most max frames) within ms into parts (the
 * caller closes them); returns how many frames came (0: none). */
static inline int gitfx_recv(void *sock, zmq_msg_t *parts, int max, int ms)
{
	zmq_pollitem_t in = {sock, 0, ZMQ_POLLIN, 0};
	int n = 0;

	if (zmq_poll(&in, 1, ms) != 1)
		return 0;
	do {
		zmq_msg_init(&parts[n]);
		assert_true(zmq_msg_recv(&parts[n], sock, 0) >= 0);
		n++;
	} while (n < max && zmq_msg_more(&parts[n - 1]));
	return n;
}

/* A peer: its sync socket, a CURVE ROUTER, and its site. */
struct gitfx_peer {
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	char ep[64];
	void *router;
	struct buf rid; /* the node's DEALER on it (gitfx_peer_wait) */
	struct peer_self self; /* stamps its frames */
};

static inline void
gitfx_peer_open(struct gitfx_peer *p, void *zctx, const char *site)
{
	int one = 1, zero = 0;
	size_t len = sizeof(p->ep);

	assert_int_equal(zmq_curve_keypair(p->pub, p->sec), 0);
	assert_non_null(p->router = zmq_socket(zctx, ZMQ_ROUTER));
	zmq_setsockopt(p->router, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(p->router, ZMQ_CURVE_SERVER, &one, sizeof(one));
	zmq_setsockopt(p->router, ZMQ_CURVE_SECRETKEY, p->sec, Z85_KEY_LEN);
	assert_int_equal(zmq_bind(p->router, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(
	        zmq_getsockopt(p->router, ZMQ_LAST_ENDPOINT, p->ep, &len), 0);
	p->self = (struct peer_self){zctx, site, NULL, NULL};
}

static inline void gitfx_peer_close(struct gitfx_peer *p)
{
	zmq_close(p->router);
	buf_free(&p->rid);
}

/* The peer as a struct config_peer (site and sync borrowed from p). */
static inline void gitfx_peer_config(const struct gitfx_peer *p,
                                     struct config_peer *c)
{
	*c = (struct config_peer){.site = (char *)p->self.site,
	                          .sync = (char *)p->ep};
	snprintf(c->public_key, sizeof(c->public_key), "%s", p->pub);
}

/* A probe on the node's DEALER until its handshake lets it go: the peer
 * learns the DEALER's routing id from it. */
static inline void gitfx_peer_wait(struct gitfx_peer *p, void *dealer)
{
	zmq_msg_t parts[2];
	int sent = -1;

	for (int i = 0; i < GITFX_WAIT_MS && sent < 0; i++) {
		sent = zmq_send(dealer, "probe", 5, ZMQ_DONTWAIT);
		if (sent < 0)
			usleep(1000);
	}
	assert_true(sent >= 0);
	assert_int_equal(gitfx_recv(p->router, parts, 2, GITFX_WAIT_MS), 2);
	buf_reset(&p->rid);
	buf_add(&p->rid, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]));
	assert_int_equal(zmq_msg_size(&parts[1]), 5);
	zmq_msg_close(&parts[0]);
	zmq_msg_close(&parts[1]);
}

/* The next message of kind (a Grantd__V1__PeerMsg__BodyCase) from site
 * at the peer within ms, skipping credits and stream errors (a fetch
 * given up says "cancelled" for each chunk that still comes); NULL when
 * none came.  The caller frees it. */
static inline Grantd__V1__PeerMsg *
gitfx_peer_next(struct gitfx_peer *p, int kind, const char *site, int ms)
{
	for (;;) {
		zmq_msg_t parts[3];
		const char *why;
		Grantd__V1__PeerMsg *m;
		int n = gitfx_recv(p->router, parts, 3, ms);

		if (!n)
			return NULL;
		assert_int_equal(n, 2);
		m = peer_msg_decode(zmq_msg_data(&parts[1]),
		                    zmq_msg_size(&parts[1]), site, &why);
		assert_non_null(m);
		zmq_msg_close(&parts[0]);
		zmq_msg_close(&parts[1]);
		if ((int)m->body_case == kind)
			return m;
		assert_true(m->body_case ==
		                    GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT ||
		            m->body_case ==
		                    GRANTD__V1__PEER_MSG__BODY_PACK_ERR);
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	}
}

/* A PackChunk from the peer to the node's DEALER. */
static inline void gitfx_peer_chunk(struct gitfx_peer *p,
                                    uint64_t id,
                                    uint32_t seq,
                                    const void *data,
                                    size_t len,
                                    bool last)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__PackChunk c = GRANTD__V1__PACK_CHUNK__INIT;

	peer_msg_init(&p->self, &m);
	c.has_id = c.has_seq = c.has_data = c.has_last = true;
	c.id = id;
	c.seq = seq;
	c.data.data = (uint8_t *)data;
	c.data.len = len;
	c.last = last;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK;
	m.pack_chunk = &c;
	assert_int_equal(peer_send(p->router, &m, p->rid.p, p->rid.len), 0);
}

/* The pack in chunks of at most chunk bytes, then the empty last one, as
 * packsrv sends it. */
static inline void gitfx_peer_pack(struct gitfx_peer *p,
                                   uint64_t id,
                                   const struct buf *pack,
                                   size_t chunk)
{
	uint32_t seq = 0;

	for (size_t off = 0; off < pack->len; off += chunk) {
		size_t n = pack->len - off < chunk ? pack->len - off : chunk;
		gitfx_peer_chunk(p, id, seq++, pack->p + off, n, false);
	}
	gitfx_peer_chunk(p, id, seq, "", 0, true);
}

/* A PackErr from the peer: it cannot (or will not) serve stream id. */
static inline void
gitfx_peer_err(struct gitfx_peer *p, uint64_t id, const char *why)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__PackErr e = GRANTD__V1__PACK_ERR__INIT;

	peer_msg_init(&p->self, &m);
	e.has_id = true;
	e.id = id;
	e.why = (char *)why;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_ERR;
	m.pack_err = &e;
	assert_int_equal(peer_send(p->router, &m, p->rid.p, p->rid.len), 0);
}

/* ---- the fetching node (test_packfetch.c, test_reconcile.c) -------------- */

#define GITFX_MSG_MAX (GITIO_CHUNK_MAX + 4096) /* the actor's DEALERs' */

/* What the gitrepl actor holds for a fetch, as paloalto, with peers
 * portland and montreal (gitfx_peer). */
struct gitfx_node {
	struct store *store;
	void *zctx;
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	struct peer_self self;
	struct config_peer peers[2];
	struct gitfx_peer tp[2];
	void *dealer[CONFIG_MAX_PEERS];
	struct gitio_stats st;
	struct gitio io;
	struct packfetch *pf;
};

/* Open n: its store at data (sealed with seal_key), the two peers, a
 * DEALER to each (handshake done), the gitio over repo_dir with the
 * given callbacks and their arg, and the packfetch. */
static inline void gitfx_node_open(
        struct gitfx_node *n,
        const char *data,
        const char *repo_dir,
        const uint8_t *seal_key,
        int (*to_router)(void *,
                         const struct buf *,
                         const Grantd__V1__PeerMsg *),
        void (*mark)(void *, const char *, size_t, const char *, size_t),
        void *arg)
{
	bool created;

	assert_int_equal(store_open(&n->store, &created, data, seal_key), 0);
	assert_non_null(n->zctx = zmq_ctx_new());
	assert_int_equal(zmq_curve_keypair(n->pub, n->sec), 0);
	n->self = (struct peer_self){n->zctx, "paloalto", n->pub, n->sec};
	gitfx_peer_open(&n->tp[0], n->zctx, "portland");
	gitfx_peer_open(&n->tp[1], n->zctx, "montreal");
	for (int i = 0; i < 2; i++) {
		gitfx_peer_config(&n->tp[i], &n->peers[i]);
		assert_non_null(n->dealer[i] = peer_curve_client(
		                        &n->self, ZMQ_DEALER, n->tp[i].ep,
		                        n->tp[i].pub, GITFX_MSG_MAX));
		gitfx_peer_wait(&n->tp[i], n->dealer[i]);
	}
	n->io = (struct gitio){.self = &n->self,
	                       .peers = n->peers,
	                       .npeers = 2,
	                       .repo_dir = repo_dir,
	                       .st = &n->st,
	                       .to_router = to_router,
	                       .mark = mark,
	                       .arg = arg};
	packfetch_open(&n->pf, &(struct packfetch_opts){.io = &n->io,
	                                                .store = n->store,
	                                                .dealer = n->dealer});
}

static inline void gitfx_node_close(struct gitfx_node *n)
{
	packfetch_destroy(&n->pf);
	gitio_close(&n->io);
	for (int i = 0; i < 2; i++) {
		zmq_close(n->dealer[i]);
		gitfx_peer_close(&n->tp[i]);
	}
	zmq_ctx_term(n->zctx);
	store_destroy(&n->store);
}

/* The actor's part: hand each frame on the DEALERs to the fetch until it
 * returns a verdict, or until nothing came for ms (PACKFETCH_GOING). */
static inline enum packfetch_verdict gitfx_node_drive(struct gitfx_node *n,
                                                      int ms)
{
	for (;;) {
		zmq_pollitem_t items[2];
		int k = n->io.npeers;

		for (int i = 0; i < k; i++)
			items[i] = (zmq_pollitem_t){n->dealer[i], 0, ZMQ_POLLIN,
			                            0};
		if (zmq_poll(items, k, ms) <= 0)
			return PACKFETCH_GOING;
		for (int i = 0; i < k; i++) {
			zmq_msg_t msg;
			enum packfetch_verdict v;
			if (!items[i].revents)
				continue;
			zmq_msg_init(&msg);
			assert_true(zmq_msg_recv(&msg, n->dealer[i], 0) >= 0);
			v = packfetch_dealer(n->pf, i, &msg);
			zmq_msg_close(&msg);
			if (v != PACKFETCH_GOING)
				return v;
		}
	}
}

#endif
