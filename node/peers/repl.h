/*
 * repl.h: replication among sites over CurveZMQ.
 *
 * Each node binds a PUB (`publish`) and a ROUTER (`sync`), and connects one
 * SUB and one DEALER to every configured peer; all four are CURVE, and a
 * ZAP handler admits only the public keys of configured peers (and counts
 * every refusal).
 *
 *  - Live: after a batch of local operations is committed, repl_publish()
 *    sends each on PUB.  A peer applies it with ops_apply() (the one apply
 *    path) if it is the next of its (origin, epoch); a duplicate is
 *    dropped; a gap triggers a range request.
 *  - Repair: every 250 ms the PUB carries a heartbeat with this node's
 *    version vector.  A node that sees a peer ahead of it for any origin
 *    (even a dead third site) asks that peer's sync ROUTER for the missing
 *    range, in bounded batches, until it is level.
 *  - A node that starts with peers configured is "syncing" (it refuses
 *    token validation, so an empty or stale store cannot accept a replayed
 *    token) until it has caught up with the peers it can hear, or a grace
 *    period passes with no peer heard.
 *
 * Every received frame is size-capped by ZMQ_MAXMSGSIZE, decoded, checked
 * (ops_check) and only then applied; a bad one is dropped and counted in
 * ops.dropped.  A peer holding a valid key is not trusted with the others'
 * history: on its live channel only its own operations are taken, a state
 * transfer's records get the live checks (origin, clock) and its vector
 * raises another site's entry no further than that site's own heartbeat
 * shows, and an oversized heartbeat is cut, not dropped; these refusals
 * are also counted by reason (repl_metrics: replication.dropped).  Finished
 * epochs that every peer holds are retired, so the vector stays bounded
 * (ops.h).  One owner thread: the node's main loop.
 *
 * Read-only mirrors (docs/mirrors.md): a frontend neither subscribes to a
 * mirror nor lets it on PUB; the mirror's DEALER subscribes on the
 * frontend's sync ROUTER (mirror_sub, every REPL_HEARTBEAT_MS, a 3 s
 * lease), and the frontend pushes it mirror_ops after each publish and
 * answers its ranges and state transfers filtered: an operation a mirror
 * may not hold (records_mirror_visible) goes as its stamp alone, which
 * the mirror takes with ops_skip.  Two mirrors ignore each other.
 *
 * The link itself (framing, CURVE sockets, ZAP, the sync ROUTER) is
 * peer.c's: repl registers its ROUTER requests there (ranges, snapshots,
 * vectors) and reads the link in repl_handle.
 *
 * The rooms behind this header, one per sub-protocol (repl_int.h is what
 * they share; only they and their unit tests include it):
 *   repl.c         lifecycle, peers and their sockets, repl_handle, live
 *                  operations, repl_publish, the syncing gate, repl_tick
 *   repl_hb.c      heartbeats, who is ahead, epoch retirement, push log
 *                  heads
 *   repl_range.c   range repair (tests/unit/test_repl_range.c)
 *   repl_xfer.c    state transfer (tests/unit/test_repl_xfer.c)
 *   repl_mirror.c  the read-only mirrors' feed, leases and lag
 *   repl_stat.c    drops by reason, latency, repl_status, repl_metrics
 */
#ifndef GD_REPL_H
#define GD_REPL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#include "buf.h"
#include "config.h"
#include "ops.h"
#include "peer.h"
#include "peerpolicy.h"
#include "store.h"

#define REPL_HEARTBEAT_MS 250

struct repl;
struct writer;

/* What repl works with; all borrowed, all the main loop's, and all must
 * outlive it. */
struct repl_opts {
	struct ops *ops;            /* applies peers' operations */
	struct store *store;
	const struct config *cfg;   /* peers, publish, oplog_retention */
	const struct peer_self *self;
	struct peer_link *link;     /* ZAP and the sync ROUTER, open */
	struct writer *writer;      /* THE batch (borrowed), its commit */
	/* the origins' keys (common/opsig.h), copied: every operation from
	 * a peer is checked against its origin's before it applies */
	const struct opsig_verifier *verifier;
	/* this site's key: it signs the push log's checkpoints
	 * (tlogwit.h); NULL: none made nor cosigned (unit tests) */
	const struct opsig_signer *signer;
	/* metrics.h: replication latency of each live operation (NULL:
	 * none) */
	struct metrics_hist *latency_hist;
};

/* Bind PUB (admitted by link's ZAP), connect to every peer, register the
 * ROUTER requests with link (which must not route after repl_destroy).
 * *out is the caller's (repl_destroy).  Returns 0 or GD_EIO (logged). */
int repl_open(struct repl **out, const struct repl_opts *o);
void repl_destroy(struct repl **rp);

/* The sockets to poll for input (the link's too); returns how many were
 * written (at most max). */
int repl_pollitems(struct repl *r, zmq_pollitem_t *items, int max);

/* Were peer sockets made again (after a failed handshake, linkmon.h) since
 * the last call?  Then the sockets repl_pollitems gave are gone: ask again
 * before the next poll. */
bool repl_relinked(struct repl *r);

/* The transparency log's checkpoints, for `status` (tlogwit.h). */
void repl_tlog_status(struct repl *r, cJSON *status);

/* New keys (a reload that changed a verifier_key): copied. */
void repl_set_verifier(struct repl *r, const struct opsig_verifier *v);

/* Handle everything waiting on the replication sockets: answer ZAP,
 * serve ranges, apply peers' operations (one batch, one commit). */
void repl_handle(struct repl *r);

/* Heartbeats, range requests and the syncing state; call every loop. */
void repl_tick(struct repl *r, uint64_t now_ms);

/* Publish operations made durable here (packed, each behind a 4-byte
 * length, as in ops.outbox), and empty ops.  The signature is
 * control_publish_fn's; payload is the struct repl. */
void repl_publish(struct buf *ops, void *payload);

/* The syncer made everything up to ticket durable: the latency samples of
 * peers' operations in those batches are taken now. */
void repl_synced(struct repl *r, uint64_t ticket);

/* Add {site, role, connected, last_heard_ms, lag_ops, lag_ms, ...}
 * objects for every peer to arr.  For a mirror this frontend feeds,
 * connected means its lease lives, lag_ops is what it lacks of ours, and
 * digest_public(_equal) compares its public digest with ours. */
void repl_status(struct repl *r, cJSON *arr, uint64_t now_ms);

/* On a mirror (SPEC 9): add "mirror_lag", [{site, fed, ops, ms}] for
 * every frontend: the operations it holds that this mirror lacks, by its
 * last answer, and for how long this mirror has been behind it.  Nothing
 * on a frontend (its peers' lag_ops say how far each mirror is). */
void repl_mirror_lag(struct repl *r, cJSON *obj, uint64_t now_ms);

/* Ask SITE for its version vector and fetch everything it has that this
 * node lacks.  trust_unsigned (`--trust-unsigned`): also start a state
 * transfer from SITE (now, or when one running is over) that takes its
 * records without signed operations unchecked (records written before
 * they were kept), that transfer only (repl_int.h, struct repl_xfer).  Returns 0, GD_ENOTFOUND
 * for an unknown site or GD_EUNREACH when SITE cannot be sent to. */
int repl_rebuild(struct repl *r, const char *site, bool trust_unsigned);

/* Add "latency_us" {count, p50, p99, max} (live operations, publish at
 * the origin to committed here), "dropped" {forged_origin, snapshot_record,
 * snapshot_vector, heartbeat_vector} (peer input refused, by reason; each
 * also in counts.dropped) and "last_catchup" {ops, ms} to obj.  With
 * more than 4096 samples, p50/p99/max are sorted again at most once a
 * second (status renders every 100 ms): up to a second behind count. */
void repl_metrics(struct repl *r, cJSON *obj);

/* The [policy] settings of the frontend peers compared with this site's
 * (peerpolicy.h); the main loop's, as repl. */
const struct peerpolicy *repl_peerpolicy(const struct repl *r);

/* ZAP refusals so far. */
/* Peer messages and records refused so far: replication's and the peer
 * link's (status counts.dropped, grantd_peer_messages_dropped_total). */
uint64_t repl_dropped_total(const struct repl *r);

uint64_t repl_refused(struct repl *r);

/* Catching up with peers after a start: token validation is refused
 * meanwhile (true from repl_open while peers are configured, until
 * repl_tick finds the node level or the grace period over). */
bool repl_syncing(const struct repl *r);

#endif
