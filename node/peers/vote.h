/*
 * vote.h: the strict token quorum (SPEC 9, [policy] token_quorum =
 * majority).
 *
 * A token (or scratch code) use is accepted only once a majority of the
 * frontends, this site included, has durably promised it.  Each site keeps
 * one promise per enrollment (CF_PROMISES, local, never replicated): the
 * highest use it promised and the scratch codes it promised.  Any two
 * majorities share a site, and a site promises a use only when it is above
 * everything it holds (its mark and its promise), so no use is accepted
 * twice, across any partition.  One parallel round, no second one: the
 * mark that follows an acceptance replicates as today.
 *
 *  - The rule (vote_promise): YES when the use (Mark.next of a HOTP
 *    counter or TOTP step, or one scratch bit) is above the mark and the
 *    promise this site holds, or was promised to this very proposal
 *    already (a repeat); then the promise is raised in the batch.  USED
 *    when the mark covers it, PROMISED when a promise to another proposal
 *    does.  Pure store reads and writes: unit tested on a real store.
 *  - The voter: a frontend answers vote_req on its sync ROUTER; a YES is
 *    committed through the writer and answered only once durable.  Only
 *    a configured frontend's key is served: the planes table (planes.h)
 *    answers any other NOT_VOTER before this module sees the request.
 *    A mirror, a local-mode node, and a store not yet qualified answer
 *    NOT_VOTER; bad input BAD, and so a next no proposer could have
 *    validated (vote_in_reach: above the look-ahead or the window).
 *  - The origin (vote_start): after the caller put its own promise in the
 *    batch and committed it, vote_req goes to every frontend peer at once
 *    on a CURVE DEALER to its sync endpoint; the caller's item is handed
 *    back (done) with YES once a majority is in (this site counting once
 *    its promise is durable), NO as soon as a majority cannot be reached
 *    or token_quorum_timeout passes, never blocking the loop.
 *  - Qualification: a store restored from an empty disk or a backup may
 *    have lost promises it gave.  A node is a voter only while the file
 *    VOTE_QUALIFIED_FILE is in its data_dir (a RocksDB checkpoint, i.e. a
 *    backup, never carries it); without it the node pages every use record
 *    (max of mark and promise, use_sync_req/rep) from enough frontends that
 *    any majority it may have been part of meets them (frontends - majority
 *    + 1 of the others, each answering as a voter, or never seen to
 *    promise: review N3), raises its promises to them, and only once those
 *    are durable writes the file and votes.
 *  - The promise counter (review N7): each store counts its promises in
 *    CF_META with each one, shows it in VoteRep.votes and UseSyncRep.votes,
 *    and remembers each peer's; a YES whose counter went backwards is not
 *    counted, and a store told (UseSyncRep.seen_your_votes) that a peer
 *    saw it make more promises than it holds is a copy of an older store:
 *    it drops the file and qualifies again.  A voter votes only once a
 *    peer has answered its check-in since this start.
 *
 * Rooms: vote.c (the rule, the voter answering vote_req, the promise
 * counter, vote_open/vote_status), vote_round.c (the origin's parallel
 * round on the DEALERs: vote_propose, vote_start, vote_handle, vote_tick),
 * vote_usesync.c (the use sync and the qualified file); what they share is
 * vote_int.h, private to them and their unit tests (test_vote.c,
 * test_vote_usesync.c).
 *
 * Threads: everything here runs on the node's main loop (the writer
 * thread), but vote_promise and vote_held, which only need a store.
 */
#ifndef GD_VOTE_H
#define GD_VOTE_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <zmq.h>

#include "config.h"
#include "grantd.pb-c.h"
#include "names.h"
#include "peer.h"
#include "store.h"

#define VOTE_QUALIFIED_FILE "grantd-voter"

struct vote;
struct writer;

/* One use of a token: the enrollment, and either next (the Mark.next the
 * use leaves: counter or step + 1) or one scratch bit. */
struct vote_use {
	char user[NAME_USER_MAX + 1];
	uint64_t enroll_id;
	uint64_t next;
	uint32_t scratch;
};

/* ---- the rule ------------------------------------------------------------ */

/* The use a peer's vote_req proposes, into *u (*pid its proposal): 0, or
 * GD_EPROTO for a request missing a field or out of bounds (a user name
 * too long; vote_promise judges the rest).  Any input. */
int vote_use_from_req(struct vote_use *u, uint64_t *pid,
		      const Grantd__V1__VoteReq *q);

/* What this site holds for an enrollment: its mark and its promise (0s
 * when there are none), read through b (NULL: committed state).
 * Returns 0, GD_EIO or GD_EPROTO (a record that does not decode). */
int vote_held(struct store *s, struct store_batch *b, const char *user,
	      uint64_t enroll_id, Grantd__V1__Mark *mark,
	      Grantd__V1__Promise *promise);

#define VOTE_PERIOD_MIN 10 /* the shortest TOTP step (2fa enroll) */
#define VOTE_SKEW_S     60 /* how far a proposer's clock may lead */

/*
 * Could a proposer have validated use u (review N1)?  *ok false when u's
 * next is above *reach: for HOTP max(enrollment counter, held mark or
 * promise) + hotp_lookahead + 1; for TOTP the step of now (unix seconds,
 * plus VOTE_SKEW_S) + totp_window + 1, and with no enrollment (id) here
 * the same with the shortest step.  A scratch bit is always in reach.
 * Returns 0 or a negative gd_err from the store.
 */
int vote_in_reach(struct store *s,
                  struct store_batch *b,
                  const struct vote_use *u,
                  int64_t now,
                  int totp_window,
                  int hotp_lookahead,
                  bool *ok,
                  uint64_t *reach);

/*
 * Judge use u for proposal pid (from site, at hlc) against what this site
 * holds; on YES, raise the promise in b (not committed).  *verdict is
 * VOTE_YES, VOTE_USED, VOTE_PROMISED or VOTE_BAD (no next and no single
 * scratch bit); *held is the next this site holds on a no.  Returns 0, or
 * a negative gd_err from the store (nothing written).
 */
int vote_promise(struct store *s, struct store_batch *b,
		 const struct vote_use *u, uint64_t pid, const char *site,
		 uint64_t hlc, Grantd__V1__VoteVerdict *verdict,
		 uint64_t *held);

/* ---- the node's side ----------------------------------------------------- */

struct vote_opts {
	const struct config *cfg;
	struct store *store;
	struct writer *writer;       /* THE batch and its commit */
	const struct peer_self *self;
	struct peer_link *link;      /* the sync ROUTER, open */
	const char *data_dir;        /* where the qualified file lives */
	bool created;                /* the store was new at this start */
};

/* Register vote_req and use_sync_req with link; in majority mode open a
 * DEALER to every frontend peer.  *out is the caller's (vote_destroy),
 * which must come before the link closes.  Returns 0 or GD_EIO/GD_EINVAL
 * (logged). */
int vote_open(struct vote **out, const struct vote_opts *o);

/* Hand back every proposal still waiting (end VOTE_END_GONE), close the
 * DEALERs.  NULL-safe; sets *vp to NULL. */
void vote_destroy(struct vote **vp);

/* Is token_quorum = majority in force here (a frontend)? */
bool vote_majority(const struct vote *v);

/* The DEALERs to poll; returns how many were written (at most max). */
int vote_pollitems(struct vote *v, zmq_pollitem_t *items, int max);

/* Were DEALERs made again since the last call (vote_tick, after a failed
 * handshake: linkmon.h)?  Then vote_pollitems must be called again. */
bool vote_relinked(struct vote *v);

/* Read every answer waiting on the DEALERs. */
void vote_handle(struct vote *v);

/* Timeouts of proposals, the use sync of a node not yet qualified, and
 * DEALERs made again after a failed handshake (vote_relinked);
 * now_ms is the monotonic clock (clock_mono_ms: a wall clock stepped back
 * must not stretch a vote). */
void vote_tick(struct vote *v, uint64_t now_ms);

/* status: {"mode", "voter", "frontends", "majority", "accepted",
 * "refused", "promised", "votes_refused", "waiting"}; the caller's. */
cJSON *vote_status(const struct vote *v);

/* ---- the origin ---------------------------------------------------------- */

enum vote_end { VOTE_END_YES, VOTE_END_NO, VOTE_END_GONE };

/* A proposal's end: the caller's item back, with the reason of a NO
 * (a sentence for the user, "Token not accepted: ...").  Called once. */
typedef void (*vote_done_fn)(void *item, enum vote_end end, const char *why);

/*
 * Propose u here: a fresh proposal id in *pid, and this site's own promise
 * in b (vote_promise).  *verdict says whether this site itself promised;
 * only on VOTE_YES may the caller commit b and call vote_start.  Returns
 * 0 or a store error.
 */
int vote_propose(struct vote *v, struct store_batch *b,
		 const struct vote_use *u, uint64_t *pid,
		 Grantd__V1__VoteVerdict *verdict, uint64_t *held);

/* Ask every frontend peer to promise (u, pid); this site's promise counts
 * once ticket (the commit that holds it) is durable.  done(item, ...)
 * follows from vote_handle, vote_tick or the writer's sync. */
void vote_start(struct vote *v, const struct vote_use *u, uint64_t pid,
		uint64_t ticket, vote_done_fn done, void *item);

/* Count an accepted or refused use (status counters). */
void vote_count(struct vote *v, bool accepted);

#endif
