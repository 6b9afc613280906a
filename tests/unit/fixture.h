/*
 * fixture.h: what the unit tests of node/ modules set up alike: the
 * libraries and the log of the program (a cmocka group setup), a
 * temporary directory per test, and a store with the operations module
 * on it.  tests/unit/fixture.c is linked into every unit test that links
 * gdnode (tests/CMakeLists.txt); it is not a test itself.
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

/* ---- a replicating node (tests/unit/test_repl_*.c) -------------------- */

#include "buf.h"
#include "config.h"
#include "peer.h"

struct repl;
struct syncer;
struct writer;

/* A node as main.c wires it for replication, on a real store in a temp
 * directory and real CURVE sockets over ipc: store, ops, syncer, writer,
 * then (fx_node_link) the peer link and repl.  Everything is the
 * caller's; fx_node_close closes what was opened. */
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
void fx_node_close(struct fx_node *n);
/* One round of the main loop for each of the nodes: poll their sockets
 * (and the syncers' pipes) up to ms, repl_handle, writer_synced (its
 * publish goes to repl_publish, kept in published), repl_tick. */
void fx_nodes_round(struct fx_node *const *nodes, int n, int ms);

/* Make k grants at n (user<i>, one commit) and run n's loop until they
 * are published (wait_ms at most).  Returns 0 or -1. */
int fx_node_grants(struct fx_node *n, int k, int wait_ms);

#endif
