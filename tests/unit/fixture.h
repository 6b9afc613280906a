/*
 * fixture.h: what the unit tests of node/ modules set up alike: the
 * libraries and the log of the program (a cmocka group setup), a
 * temporary directory per test, a store with the operations module on
 * it, operations made by hand as a peer would send them, a replicating
 * node (store, writer, peer link, repl and, when asked, the vote) and a
 * pair of such nodes.  tests/unit/fixture.c is linked into every unit
 * test that links gdnode (tests/CMakeLists.txt); it is not a test itself.
 *
 * Each returns 0 or -1, as cmocka's setup and teardown functions do, and
 * asserts nothing: a setup returns what they return.
 */
#ifndef GD_TEST_FIXTURE_H
#define GD_TEST_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

struct config;
struct ops;
struct store;

/* A cmocka group setup's work: libsodium, libgit2, and the log on stderr
 * as ident at level.  fx_group_teardown (a cmocka group teardown) ends
 * libgit2 again. */
int fx_group_setup(const char *ident, enum log_level level);
int fx_group_teardown(void **state);

/* Make a new directory NAME.XXXXXX, its path in dir (size bytes): in
 * /dev/shm when tmpfs and there is one (for many synced commits), else in
 * $TMPDIR when that is set and shorter than 32 bytes (so that socket
 * paths below it fit), else in /tmp. */
int fx_mkdtemp(char *dir, size_t size, const char *name, bool tmpfs);

/* rm -rf dir. */
int fx_rmtree(const char *dir);

/* Open the store dir/store, sealed with seal_key (STORE_SEAL_KEY_LEN
 * bytes), into *s and, when o is not NULL, the operations module *o on
 * it for cfg (which must outlive *o).  fx_store_close(s, o) closes both. */
int fx_store_open(struct store **s,
                  struct ops **o,
                  const char *dir,
                  const struct config *cfg,
                  const uint8_t *seal_key);
void fx_store_close(struct store **s, struct ops **o);

/* ---- operations by hand (tests/unit/test_ops_*.c) ---------------------- */

#include "grantd.pb-c.h"

/* the epoch of every hand-made operation; any non-zero value will do */
#define FX_EPOCH UINT64_C(0x00e90c0000000001)
/* an HLC stamp: milliseconds << 16 | logical */
#define FX_HLC(ms, l) (((uint64_t)(ms) << 16) | (uint64_t)(l))
/* two well-formed public key lines (their fingerprints differ) */
#define FX_KEY_A                                                              \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHLAx+6EsJuGELLoK4oqtzjiFQlr/4K" \
	"ExvUYKBZ/LSGg a"
#define FX_KEY_B                                                              \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPz0OdImpZkZRFWa0DIvXMsC+wwuYm7" \
	"TcnlPutvwRV5v b"

/* One operation and room for its body; the strings are borrowed. */
struct fx_op {
	Grantd__V1__Op op;
	Grantd__V1__User user;
	Grantd__V1__Grant grant;
	char *keys[1];
};

/* Operation seq of origin (epoch FX_EPOCH), stamped hlc: user name with
 * key (NULL: none; deleted when del), or a grant of user to net until
 * expires (revoked when revoked). */
Grantd__V1__Op *fx_op_user(struct fx_op *t,
                           const char *origin,
                           uint64_t seq,
                           uint64_t hlc,
                           const char *name,
                           const char *key,
                           bool del);
Grantd__V1__Op *fx_op_grant(struct fx_op *t,
                            const char *origin,
                            uint64_t seq,
                            uint64_t hlc,
                            const char *user,
                            const char *net,
                            int64_t expires,
                            bool revoked);

/* Apply n operations to o in one batch of s (ops_apply: each must be
 * applied) and commit it.  Returns 0 or -1. */
int fx_apply(struct ops *o,
             struct store *s,
             Grantd__V1__Op *const *ops,
             size_t n);

#include "config.h"

/* A site's store and operations module alone (no writer, no links), for
 * the tests of the ops rooms. */
struct fx_site {
	char dir[96]; /* the store is dir/store */
	char site[16];
	struct config cfg;
	struct store *s;
	struct ops *o;
};

/* Open site's store and ops in parent/site (made when missing): after
 * fx_site_close, the same store again. */
int fx_site_open(struct fx_site *n, const char *parent, const char *site);
/* NULL-safe on a site never opened. */
void fx_site_close(struct fx_site *n);

/* A new directory and room for FX_SITES sites in it (opened by the test):
 * a cmocka state.  fx_sites_teardown closes them and removes it. */
#define FX_SITES 3
struct fx_sites {
	char dir[64];
	struct fx_site n[FX_SITES];
};
int fx_sites_open(struct fx_sites **out, const char *name);
int fx_sites_teardown(void **state);

/* ---- a replicating node (tests/unit/test_repl_*.c) -------------------- */

#include "buf.h"
#include "peer.h"

struct repl;
struct syncer;
struct vote;
struct writer;

/* A node as main.c wires it for replication, on a real store in a temp
 * directory and real CURVE sockets over ipc: store, ops, syncer, writer,
 * then (fx_node_link) the peer link and repl, and (fx_node_vote) the
 * token quorum.  Everything is the caller's; fx_node_close closes what
 * was opened. */
struct fx_node {
	char dir[96];
	char site[64];
	char pub_ep[128], sync_ep[128], repo_dir[128];
	char curve_pub[Z85_KEY_LEN + 1], curve_sec[Z85_KEY_LEN + 1];
	struct config cfg;
	struct store *s;
	struct ops *o; /* allocated here */
	void *zctx;
	struct syncer *sy;
	struct writer *w;
	struct peer_self self;
	struct peer_link *link;
	struct repl *repl;
	struct vote *vote; /* NULL unless fx_node_vote */
	struct buf published; /* every packed op it published, in order
	                       * (each behind a 4-byte length) */
	int npublished;
};

/* Open n as site in a new directory under parent (fx_mkdtemp's), sealed
 * with seal_key: everything but the link and repl. */
int fx_node_open(struct fx_node *n,
                 const char *parent,
                 const char *site,
                 const uint8_t *seal_key);
/* Configure other as a peer of n (of role), before fx_node_link. */
void fx_node_peer(struct fx_node *n,
                  const struct fx_node *other,
                  enum config_role role);
/* Open n's peer link and repl (its PUB and sync ROUTER bound). */
int fx_node_link(struct fx_node *n);
/* Open n's vote (vote.h) on its link, after fx_node_link; the config's
 * [policy] (token_quorum ...) as the caller set it. */
int fx_node_vote(struct fx_node *n);
void fx_node_close(struct fx_node *n);
/* One round of the main loop for each of the nodes: poll their sockets
 * (and the syncers' pipes, and the votes' DEALERs) up to ms, repl_handle,
 * vote_handle, writer_synced (its publish goes to repl_publish, kept in
 * published), repl_tick, vote_tick. */
void fx_nodes_round(struct fx_node *const *nodes, int n, int ms);

/* Make k grants at n (user<i>, one commit) and run n's loop until they
 * are published (wait_ms at most).  Returns 0 or -1. */
int fx_node_grants(struct fx_node *n, int k, int wait_ms);

/* ---- two nodes ----------------------------------------------------------- */

/* paloalto (a, a frontend) and portland (b) in one new directory, each
 * configured as the other's peer. */
struct fx_pair {
	char dir[64];
	struct fx_node a, b;
};

/* How far fx_pair_open links the two. */
enum fx_pair_link {
	FX_PAIR_UNLINKED, /* stores and writers: the caller links */
	FX_PAIR_LINK_A, /* paloalto linked, portland not yet */
	FX_PAIR_LINKED, /* both */
};

/* Open a pair in a new directory named for the test (fx_mkdtemp's name),
 * portland with role b_role (paloalto is told so too), linked as
 * how says.  *out is the caller's (fx_pair_close); on failure what was opened
 * is closed again and *out is NULL. */
int fx_pair_open(struct fx_pair **out,
                 const char *name,
                 enum config_role b_role,
                 enum fx_pair_link how);
/* Close both nodes and remove the directory; NULL-safe, sets *pp = NULL.
 * Returns 0 or -1 (the directory stayed), a cmocka teardown's answer. */
int fx_pair_close(struct fx_pair **pp);
/* A cmocka teardown: fx_pair_close(*state). */
int fx_pair_teardown(void **state);

#endif
