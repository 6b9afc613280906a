/*
 * plheads.h: the push log heads peers report (review N2; docs/push-log.md).
 *
 * Every frontend publishes, every PLHEADS_MS, the head (n, hash) of each
 * origin's push log chain as it holds it (PushLogHeads, PeerMsg body 27,
 * on PUB).  A node keeps the last heads each peer reported in its local
 * family `default` under "plpeer" \0 peer \0 origin -> n (8, BE) and hash
 * (32), written in the writer's batch, so that `grantctl log verify` (a
 * reader) holds them against its own entries: a peer whose entry n has
 * another hash than this site's is a break.
 *
 * plheads_build and plheads_list read committed state (any thread);
 * plheads_take writes to the writer's batch (writer thread).
 */
#ifndef GD_PLHEADS_H
#define GD_PLHEADS_H

#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"
#include "store.h"

#define PLHEADS_MS  2000
#define PLHEADS_MAX 4096 /* origins per message, as a heartbeat's vector */

/* This site's heads as a message (ops_pushlog_heads); free with
 * plheads_free.  Returns 0 or a store error. */
int plheads_build(struct store *s, Grantd__V1__PushLogHeads *out);
void plheads_free(Grantd__V1__PushLogHeads *m);

/* Keep what peer reported in b: each head that checks (a site name, n > 0,
 * a 32-byte hash) and differs from the one kept.  Returns how many heads
 * were refused (0: all taken), or a store error; why says of which. */
int plheads_take(struct store *s,
                 struct store_batch *b,
                 const char *peer,
                 const Grantd__V1__PushLogHeads *m,
                 struct buf *why);

/* One head a peer reported. */
struct plheads_peer {
	char peer[65];
	char origin[65];
	uint64_t n;
	uint8_t hash[32];
};

/* Every head the peers reported (committed state), by peer then origin.
 * *out is the caller's (free); returns how many, or a store error. */
int plheads_list(struct store *s, struct plheads_peer **out);

#endif
