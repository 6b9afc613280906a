/*
 * vote_int.h: what the rooms of the token quorum share, and nobody else
 * (vote.h is the contract).  vote.c holds the rule, the voter answering
 * vote_req and the object's life; vote_round.c the origin's parallel round
 * on the DEALERs; vote_usesync.c the use sync that qualifies a new or
 * restored store.  struct vote is read and written by all three, only on
 * the node's main loop.  Included by those three files and their unit
 * tests only.
 */
#ifndef GD_VOTE_INT_H
#define GD_VOTE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "linkmon.h"
#include "vote.h"

#define VOTE_MAXMSG (256 * 1024)
/* CF_META: this store's promise counter, durable with each promise (8,
 * BE), and the highest counter each peer showed ("votes_seen" \0 site) */
#define VOTE_META_VOTES    "votes"
#define VOTE_META_SEEN     "votes_seen"
#define VOTE_SYNC_PAGE     256
#define VOTE_SYNC_RETRY_MS 1000

/* A frontend peer: where votes are asked and use records fetched. */
struct vpeer {
	const struct config_peer *cfg;
	void *dealer;
	struct linkmon mon; /* its handshakes: made again after one
	                     * failed (linkmon.h) */
	/* use sync (qualification) */
	struct buf after; /* the last key taken */
	bool synced; /* every page taken, from a voter */
	bool unqualified_logged;
	uint64_t seen; /* the highest promise counter it showed
	                * (durable: META_SEEN) */
	uint64_t checkin_ms; /* last check-in asked (use_sync_req, max 0) */
	bool checked_in; /* it answered one since this start */
	uint64_t asked_ms; /* 0: no page asked for */
};

struct proposal {
	uint64_t pid;
	struct vote_use use;
	uint64_t deadline_ms;
	vote_done_fn done;
	void *item;
	bool decided;
	bool self_pending; /* the writer has not said yet */
	bool self_yes; /* this site's promise is durable */
	int yes; /* peers that promised */
	uint32_t answered; /* bit i: peer i answered (or was not sent) */
	uint32_t unreachable; /* bit i: could not be sent to */
	int used; /* peers that said USED or PROMISED */
	uint64_t votes; /* this store's counter with its promise */
	struct proposal *next;
};

struct vote {
	const struct config *cfg;
	struct store *store;
	struct writer *writer;
	const struct peer_self *self;
	struct peer_link *link;
	bool majority;
	bool voter;
	bool qualifying; /* the use sync's last pages are being made
	                  * durable */
	bool checked; /* a peer confirmed, since this start, that
	               * this store's promise counter is not behind
	               * what it saw (a voter votes only then) */
	uint64_t votes; /* promises made by this store, ever
	                 * (META_VOTES; the last maybe not durable) */
	uint64_t votes_durable;
	uint64_t votes_floor; /* the highest counter a peer says it saw of
	                       * this store */
	uint64_t self_votes; /* the counter of the last vote_propose */
	char qualified_path[4096];
	struct vpeer peers[CONFIG_MAX_PEERS];
	int npeers;
	struct proposal *props;
	uint64_t accepted, refused, promised, votes_refused;
	bool relinked; /* a DEALER was made again (vote_relinked) */
};

/* ---- vote.c: the counters and the promise record ---------------------------
 */

/* Does this store vote now: qualified, and its counter confirmed? */
bool vote_voting(const struct vote *v);

/* A u64 of CF_META (8 bytes BE; 0 when absent), read committed.  Returns
 * 0, GD_EPROTO (not 8 bytes) or a store error. */
int vote_meta_get(struct store *s, const void *key, size_t klen, uint64_t *out);
void vote_meta_put(struct store_batch *b,
                   const void *key,
                   size_t klen,
                   uint64_t val);

/* The CF_META key of what peer site showed of its counter, into k. */
void vote_seen_key(struct buf *k, const char *site);

/* One more promise of this store, in b with it; returns the counter. */
uint64_t vote_votes_bump(struct vote *v, struct store_batch *b);

/* Peer vp showed counter n: remember the highest (in the writer's batch,
 * durable with the next commit).  Returns false when n is below what it
 * showed before: a copy of an older store of that site (review N7), whose
 * word is not counted. */
bool vote_seen_take(struct vote *v, struct vpeer *vp, uint64_t n);

/* Put in b the promise of use u over old (what was held): the highest
 * next, the union of scratch bits, for proposal pid of site at hlc. */
void vote_promise_put(struct store_batch *b,
                      const struct vote_use *u,
                      const Grantd__V1__Promise *old,
                      uint64_t pid,
                      const char *site,
                      uint64_t hlc);

/* ---- vote_round.c: the origin -------------------------------------------- */

/* vote_destroy's part: end every proposal (VOTE_END_GONE) and free those
 * the writer no longer holds; the others are freed by their hold. */
void vote_round_end_all(struct vote *v);

/* An answer to a vote_req from peer i. */
void vote_round_on_rep(struct vote *v, int i, const Grantd__V1__VoteRep *r);

/* ---- vote_usesync.c: qualification --------------------------------------- */

/* Is the store qualified (VOTE_QUALIFIED_FILE present)?  Sets v->voter and
 * logs what follows; created: the store is new at this start. */
void vote_usesync_open(struct vote *v, bool created);

/* use_sync_req on the sync ROUTER (registered by vote_open). */
void vote_usesync_on_req(const struct peer_req *rq, void *payload);

/* An answer to a use_sync_req (a check-in or a page) from peer i. */
void vote_usesync_on_rep(struct vote *v,
                         int i,
                         const Grantd__V1__UseSyncRep *r);

/* Check-ins of this start, and the pages of a store not qualified. */
void vote_usesync_tick(struct vote *v, uint64_t now_ms);

/* A page of use records: keys (CF_MARKS / CF_PROMISES key) and values (a
 * packed Mark: the max of mark and promise), n of each. */
struct vote_page {
	ProtobufCBinaryData *keys;
	ProtobufCBinaryData *vals;
	size_t n;
	bool done; /* no record after the last one */
};

/* At most max use records of s (committed state) strictly after *after
 * (NULL: from the first), in key order over the union of CF_MARKS' and
 * CF_PROMISES' keys, into *out (the caller's: vote_usesync_page_free, also on
 * an error).  Returns 0 or a store error. */
int vote_usesync_page(struct vote_page *out,
                      struct store *s,
                      const ProtobufCBinaryData *after,
                      uint32_t max);
void vote_usesync_page_free(struct vote_page *pg);

/* Raise the promises of s, in b, to a page of peer site's use records
 * (never lowered; a record that does not parse is skipped); *after is the
 * last key taken.  Returns 0 or a store error (b then holds part). */
int vote_usesync_take(struct store *s,
                      struct store_batch *b,
                      const char *site,
                      const Grantd__V1__UseSyncRep *r,
                      struct buf *after);

#endif
