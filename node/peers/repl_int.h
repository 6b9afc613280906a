/*
 * repl_int.h: what the rooms of replication share, and nothing else
 * includes (but their unit tests, tests/unit/test_repl_*.c).
 *
 * repl.h is the contract with the node; this header is the one between
 * the files that implement it, each a sub-protocol:
 *
 *   repl.c         lifecycle, the peers and their sockets, the read loop
 *                  (repl_handle, handle_peer), live operations
 *                  (repl_apply_op), repl_publish, the syncing gate and the
 *                  tick that calls the others' ticks
 *   repl_hb.c      heartbeats, who is ahead of us, epoch retirement, the
 *                  peers' releases and features (peerfeatures.h)
 *   repl_range.c   range repair: ask, serve, take a reply
 *   repl_xfer.c    state transfer, when a peer's log no longer reaches
 *   repl_mirror.c  the read-only mirrors' feed, leases and lag
 *   repl_stat.c    drops by reason, the latency ring, repl_status,
 *                  repl_metrics
 *
 * Everything here runs on the node's main loop (the owner of struct
 * repl); nothing is thread-safe.
 */
#ifndef GD_REPL_INT_H
#define GD_REPL_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "peerfeatures.h"
#include "names.h"
#include "linkmon.h"
#include "ops.h"
#include "opsig.h"
#include "tlogwit.h"
#include "peer.h"
#include "peerpolicy.h"
#include "records.h"
#include "repl.h"

#define RANGE_MAX_OPS      4096
#define RANGE_MAX_BYTES    (8 * 1024 * 1024)
#define RANGE_TIMEOUT_MS   5000
#define PEER_MSG_MAX       (16 * 1024 * 1024) /* range and snapshot replies */
#define SUB_MSG_MAX        (1024 * 1024) /* one operation or heartbeat */
#define SYNC_GRACE_MS      5000
#define SYNC_MAX_MS        60000
#define CONNECTED_MS       1500
#define LIVE_GRACE_MS      500 /* see repl_range_tick */
#define MAX_SKEW_MS        (120 * 1000)
#define HANDLE_MAX         256
#define MAX_VV             4096 /* (origin, epoch) entries in a vector */
#define RETIRE_MS          1000 /* how often finished epochs are retired */
#define HANDLE_MAX_SAMPLES 4096
#define WAIT_SAMPLES       65536
#define TRUNCATE_MAX       100000
#define MIRROR_LEASE_MS                               \
	3000 /* a mirror's feed lives this long after \
	      * its last mirror_sub (sent every       \
	      * REPL_HEARTBEAT_MS) */
#define RID_MAX          256 /* a ROUTER routing id */
#define SNAP_MAX_RECORDS 4096 /* records in one state-transfer reply */

/* How this node talks with a peer, by the two roles (docs/mirrors.md). */
enum link_kind {
	LINK_FULL, /* two frontends: SUB to its PUB, DEALER to its sync */
	LINK_FEED_OUT, /* it is a mirror, we a frontend: it subscribes on
	                * our sync ROUTER (mirror_sub) and we push it
	                * mirror_ops; no socket of ours goes to it */
	LINK_FEED_IN, /* we are a mirror, it a frontend: our DEALER
	               * subscribes and asks for ranges; no SUB (its PUB
	               * refuses us) */
	LINK_NONE, /* two mirrors: nothing to say */
};

/* One configured peer site and what we know of it. */
struct repl_peer {
	const struct config_peer *cfg;
	enum link_kind link;
	void *sub;
	void *dealer;
	/* their handshakes: made again after one failed (linkmon.h) */
	struct linkmon sub_mon, dealer_mon;
	/* LINK_FEED_IN: when we last subscribed, and asked for the
	 * push log's checkpoints (tlogwit.h) */
	uint64_t last_sub_ms, last_ckpt_ms;
	/* LINK_FEED_OUT: the mirror's lease on our ROUTER, its last
	 * mirror_sub (owned; NULL: none yet) and since when it is behind */
	uint8_t rid[RID_MAX];
	size_t ridlen;
	uint64_t lease_until_ms;
	Grantd__V1__PeerMsg *msub;
	uint64_t last_heard_ms;
	Grantd__V1__Heartbeat *hb; /* the last one heard, owned */
	uint64_t behind_since_ms; /* 0: level with it */
	uint64_t lag_ops;
	bool range_inflight;
	uint64_t range_sent_ms;
	/* the last range asked of this peer (origin "": none, or answered):
	 * the only reply taken (repl_range_answers) */
	char range_origin[NAME_SITE_MAX + 1];
	uint64_t range_epoch;
	uint64_t range_from;
	/* the last range answered: a second answer to it (asked again after
	 * RANGE_TIMEOUT_MS) is ignored, not counted */
	char done_origin[NAME_SITE_MAX + 1];
	uint64_t done_epoch;
	uint64_t done_from;
	/* operations its SUB delivered, not yet applied (repl_live.c),
	 * and when each came (clock_wall_us, for the latency's stages) */
	Grantd__V1__PeerMsg **live;
	uint64_t *live_recv_us;
	size_t nlive, caplive;
};

/* A state transfer in progress (this node far behind one peer). */
struct repl_xfer {
	struct repl_peer *p; /* NULL: none running */
	int cf; /* index into repl_xfer_cfs */
	struct buf after; /* last key received */
	Grantd__V1__VvEntry **vv; /* the sender's vector at the start */
	size_t nvv;
	uint64_t sent_ms;
	uint64_t records;
	uint64_t refused; /* records that failed a check */
	/* started by `grantctl rebuild --from SITE --trust-unsigned`
	 * (repl_xfer_rebuild): a record without operations is taken as
	 * from an origin without a key, even when its origin has one;
	 * trusted counts those.  Never set again once the transfer ends
	 * or is cut: its restart checks as any other. */
	bool trust;
	uint64_t trusted;
};

/* Peer input refused for a reason of its own, counted apart (status:
 * replication.dropped.<name>) as well as in counts.dropped. */
enum repl_drop {
	DROP_FORGED_ORIGIN, /* a live operation not of the link's site */
	DROP_SNAP_RECORD, /* a state-transfer record failing a check */
	DROP_SNAP_VECTOR, /* a state-transfer vector claim not proved */
	DROP_HB_VECTOR, /* heartbeat entries over MAX_VV, or bad */
	DROP_PLANE, /* a kind the planes table does not take on
	             * this socket from the peer's role; with the
	             * ROUTER's (peer_planes_refused) in status */
	DROP_RANGE_UNASKED, /* a range reply (or an operation in it) that
	                     * does not answer the last range asked */
	DROP_MIRROR_HIDDEN, /* at a mirror: a hidden operation sent whole,
	                     * or records of a hidden family (SPEC 9: a
	                     * mirror never receives them) */
	DROP_SIGNATURE, /* an operation not signed by its origin's key
	                 * (common/opsig.h): unsigned, malformed or bad */
	DROP__COUNT
};

/* A live operation's way to durable here, each stamp the low 32 bits of
 * a wall clock's µs: published (the origin's clock, in the message),
 * received (ours, as the peer's socket gave it), checked and applied
 * into the batch, written (the batch committed to RocksDB), durable (the
 * syncer's fsync reported).  A sample's latency is durable - sent; its
 * stages (enum lat_stage) are the steps between, so that a slow p99 says
 * where it waited (bench/run-repl prints them). */
struct lat_stamp {
	uint32_t sent, recv, applied, written;
};
enum lat_stage {
	LAT_WIRE, /* sent to received: the origin's publish, the link */
	LAT_APPLY, /* received to applied: the round, the check, the merge */
	LAT_WRITE, /* applied to written: the rest of the round, the write */
	LAT_DURABLE, /* written to durable: the syncer's queue and fsync */
	LAT__STAGES
};

/* Replication latency samples (publish at the origin to durable here),
 * and the last catch-up episode, for `grantctl status` and bench/. */
#define LAT_SAMPLES (1 << 20)
struct repl_latency {
	uint32_t *lat_us; /* ring of samples */
	uint64_t lat_n; /* samples ever taken */
	/* the last WAIT_SAMPLES samples' stages, ring by lat_n too */
	uint32_t *stage_us[LAT__STAGES];
	struct lat_stamp pending[HANDLE_MAX_SAMPLES];
	int npending; /* applied, not yet committed */
	struct {
		uint64_t ticket; /* durable when the syncer passes it */
		struct lat_stamp at;
	} waiting[WAIT_SAMPLES];
	uint64_t wait_head, wait_tail; /* ring indexes */
	uint64_t behind_since_ms; /* current episode, 0: level */
	uint64_t episode_ops;
	uint64_t last_ops, last_ms;
	/* the percentiles status shows, as of sorted_n samples */
	uint64_t sorted_n, sorted_at_ms;
	uint32_t p50, p99, max;
	uint32_t stage_p50[LAT__STAGES], stage_p99[LAT__STAGES];
};

struct repl {
	struct ops *ops; /* the writer's: this thread's */
	struct store *store;
	const struct config *cfg;
	const struct peer_self *self;
	struct peer_link *link; /* its ROUTER serves ranges, snapshots */
	struct writer *writer; /* THE batch and its commit */
	struct metrics_hist *latency_hist; /* metrics.h; NULL: none */
	bool syncing; /* catching up: see repl_syncing */
	struct repl_xfer xfer;
	struct repl_latency lat;
	uint64_t last_truncate_ms;
	void *pub;
	struct repl_peer peers[CONFIG_MAX_PEERS];
	int npeers;
	uint64_t last_hb_ms;
	uint64_t last_plheads_ms;
	uint64_t started_ms;
	uint64_t dropped; /* peer messages refused here (repl_dropped) */
	uint64_t last_skew_log_ms;
	uint64_t drops[DROP__COUNT];
	uint64_t drop_log_ms[DROP__COUNT];
	uint64_t last_cap_log_ms;
	uint64_t last_retire_ms;
	struct store_batch *batch;
	bool dirty; /* batch holds applied peer ops */
	bool relinked; /* a peer socket was made again */
	uint32_t batch_ops; /* ops applied into it this round */
	/* [policy] settings: ours in every heartbeat, peers' compared */
	struct peerpolicy policy;
	Grantd__V1__PolicySettings hb_policy;
	/* the origins' keys; operations taken from origins without one */
	struct opsig_verifier verifier;
	uint64_t unchecked;
	/* records without operations taken because a rebuild trusted its
	 * peer (struct repl_xfer's trust; status
	 * replication.unsigned_records_trusted) */
	uint64_t unsigned_trusted;
	/* a trusting rebuild asked while a transfer ran: started from this
	 * peer as soon as that transfer is over (NULL: none) */
	struct repl_peer *trust_next;
	struct tlogwit *tlogwit; /* checkpoints (NULL: no signer) */
};

/* ---- repl.c: the peers, live operations ------------------------------- */

/* The peer of site; NULL when none is configured. */
struct repl_peer *repl_peer_by_site(struct repl *r, const char *site);
/* Is origin this site or a configured peer? */
bool repl_origin_known(struct repl *r, const char *origin);
/* No new range requests to p for RANGE_TIMEOUT_MS (a stream that keeps
 * failing). */
void repl_back_off(struct repl_peer *p, uint64_t now_ms);
/* repl_live.c: hold m (an operation from p's SUB, owned from now on);
 * flush: check what p's SUB delivered as one run, newest first, then
 * apply it in order; free: drop what is held (p going away). */
void repl_live_take(struct repl *r,
                    struct repl_peer *p,
                    Grantd__V1__PeerMsg *m,
                    uint64_t now_ms);
void repl_live_flush(struct repl *r, struct repl_peer *p, uint64_t now_ms);
void repl_live_free(struct repl_peer *p);
/* Check op as a live operation and apply it into the batch; a gap asks
 * p for the range (at: its publish and receipt for the latency, sent and
 * recv set; NULL: none).
 * checked: OPSIG_OK when the caller checked this very op's signature
 * (opsig_verify_run over what it holds), so it is not hashed again;
 * REPL_UNCHECKED otherwise. */
#define REPL_UNCHECKED (-1)
void repl_apply_op(struct repl *r,
                   struct repl_peer *p,
                   const Grantd__V1__Op *op,
                   int checked,
                   const struct lat_stamp *at,
                   uint64_t now_ms);
/* opsig_verify of op with this site's keys (the one check of every path
 * an operation or a state transfer's record takes); OPSIG_NO_KEY counted
 * as unchecked.  why: as opsig_verify's. */
enum opsig_verdict
repl_op_verdict(struct repl *r, const Grantd__V1__Op *op, struct buf *why);
/* An operation applied into the batch this round (counted for the
 * commit, the catch-up episode and, at not NULL, the latency). */
void repl_applied(struct repl *r, const struct lat_stamp *at);
/* n messages of peers dropped (with or without a reason of their own):
 * replication's count, repl_dropped_total() adds the link's */
static inline void repl_dropped(struct repl *r, uint64_t n)
{
	r->dropped += n;
}

/* ---- repl_hb.c: heartbeats, who is ahead, epoch retirement ------------ */

/* Our whole vector as heartbeat entries (capped at MAX_VV, our own stream
 * only as far as published); free with repl_hb_free. */
void repl_hb_fill(struct repl *r, Grantd__V1__Heartbeat *hb);
void repl_hb_free(Grantd__V1__Heartbeat *hb);
/* Our vector as a heartbeat in m (hb filled: repl_hb_free after the
 * send). */
void repl_hb_vector_msg(struct repl *r,
                        Grantd__V1__PeerMsg *m,
                        Grantd__V1__Heartbeat *hb);
/* The first entry where p's last heartbeat is ahead of us; NULL when
 * level; *lag: how far behind in total. */
const Grantd__V1__VvEntry *
repl_hb_ahead(struct repl *r, struct repl_peer *p, uint64_t *lag);
/* Keep p's heartbeat (taken out of m), its vector cut to what fits. */
void repl_hb_take(struct repl *r, struct repl_peer *p, Grantd__V1__PeerMsg *m);
/* vv_req on the sync ROUTER (peer_on's handler; payload: the repl). */
void repl_hb_on_vv_req(const struct peer_req *rq, void *payload);
/* A peer's push log heads (its PUB): kept for log verify (plheads.h). */
void repl_hb_take_plheads(struct repl *r,
                          struct repl_peer *p,
                          const Grantd__V1__PushLogHeads *h);
/* Send the heartbeat every REPL_HEARTBEAT_MS; retire epochs every
 * RETIRE_MS while no state transfer runs; send our push log heads every
 * PLHEADS_MS. */
void repl_hb_tick(struct repl *r, uint64_t now_ms);

/* What status shows of a peer that sent heartbeats without a release. */
#define REPL_RELEASE_OLD "0.1.0 or older"
/* The release p announced: its string, REPL_RELEASE_OLD when its last
 * heartbeat had none, NULL when none was heard yet (borrowed). */
const char *repl_peer_release(const struct repl_peer *p);
/* Did p's last heartbeat name feature f (peerfeatures.h)? */
bool repl_peer_has(const struct repl_peer *p, enum feature f);

/* ---- repl_range.c: range repair --------------------------------------- */

/* Ask p for (origin, epoch) from seq from on (nothing while a range is in
 * flight to p, or to another peer for the same stream). */
void repl_range_request_from(struct repl *r,
                             struct repl_peer *p,
                             const char *origin,
                             uint64_t epoch,
                             uint64_t from,
                             uint64_t now_ms);
/* The same, from after what we hold. */
void repl_range_request(struct repl *r,
                        struct repl_peer *p,
                        const char *origin,
                        uint64_t epoch,
                        uint64_t now_ms);
/* Does a reply (origin, epoch, from) answer the last range asked of p?
 * Taken once; otherwise refused and counted (DROP_RANGE_UNASKED). */
bool repl_range_answers(struct repl *r,
                        struct repl_peer *p,
                        const char *origin,
                        uint64_t epoch,
                        bool has_from,
                        uint64_t from);
/* Is an operation of a range reply of the range's stream?  (counted when
 * not) */
bool repl_range_holds(struct repl *r,
                      struct repl_peer *p,
                      const char *origin,
                      uint64_t epoch,
                      const char *op_origin,
                      uint64_t op_epoch,
                      uint64_t seq);
/* A range_rep from p's DEALER: apply it; truncated starts a state
 * transfer. */
void repl_range_apply(struct repl *r,
                      struct repl_peer *p,
                      const Grantd__V1__RangeRep *rr,
                      uint64_t now_ms);
/* range_req on the sync ROUTER (payload: the repl). */
void repl_range_on_req(const struct peer_req *rq, void *payload);
/* A range that timed out is forgotten; when p is ahead of us, ask it for
 * the first stream it is ahead in.  True when p is ahead. */
bool repl_range_tick(struct repl *r, struct repl_peer *p, uint64_t now_ms);

/* ---- repl_xfer.c: state transfer -------------------------------------- */

/* Start a state transfer from p (none when one runs). */
void repl_xfer_start(struct repl *r, struct repl_peer *p, uint64_t now_ms);
/* `grantctl rebuild --from p --trust-unsigned`: start a state transfer
 * from p that takes records without operations (struct repl_xfer's
 * trust); while one runs (its replies may be in flight), as soon as it is
 * over, finished or cut. */
void repl_xfer_rebuild(struct repl *r, struct repl_peer *p, uint64_t now_ms);
/* A snap_rep from p's DEALER: merge its records, ask for the next; at the
 * end raise the vector (repl_xfer's rules). */
void repl_xfer_apply(struct repl *r,
                     struct repl_peer *p,
                     Grantd__V1__SnapRep *rep,
                     uint64_t now_ms);
/* snap_req on the sync ROUTER (payload: the repl). */
void repl_xfer_on_req(const struct peer_req *rq, void *payload);
/* A transfer with no reply for RANGE_TIMEOUT_MS is dropped (started over
 * when the peer is still ahead). */
void repl_xfer_tick(struct repl *r, uint64_t now_ms);
void repl_xfer_free(struct repl_xfer *x);

/* ---- repl_mirror.c: the read-only mirrors' feed ----------------------- */

/* Is site a mirror this node feeds (LINK_FEED_OUT)? */
bool repl_mirror_to(struct repl *r, const char *site);
/* Reply to req with rep as mirror_ops (each hidden operation as its
 * stamp); peer_reply's result. */
int repl_mirror_reply_range(struct repl *r,
                            const struct peer_req *req,
                            const Grantd__V1__RangeRep *rep);
/* mirror_sub on the sync ROUTER (payload: the repl). */
void repl_mirror_on_sub(const struct peer_req *rq, void *payload);
/* mirror_ops from frontend p (we are a mirror). */
void repl_mirror_apply_ops(struct repl *r,
                           struct repl_peer *p,
                           const Grantd__V1__MirrorOps *mo,
                           uint64_t sent_us,
                           uint64_t now_ms);
/* Subscribe to frontend p (we are a mirror). */
void repl_mirror_subscribe(struct repl *r, struct repl_peer *p);
/* Our operations just published (raw: n packed Ops) to every mirror with
 * a live lease. */
void repl_mirror_feed(struct repl *r, const ProtobufCBinaryData *raw, size_t n);
/* What mirror p (LINK_FEED_OUT) lacks of ours, by its last mirror_sub. */
uint64_t repl_mirror_lag_ops(struct repl *r, const struct repl_peer *p);

/* ---- repl_stat.c: drops by reason, latency ---------------------------- */

/* Count n refusals for why (and in counts.dropped); the log says what at
 * most once a second per reason, with the running count. */
void repl_stat_refuse(struct repl *r,
                      enum repl_drop why,
                      uint64_t n,
                      const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
/* The batch of this round was committed as ticket (or not, rc < 0): its
 * latency samples wait for the syncer (repl_synced). */
void repl_stat_committed(struct repl *r, int rc, uint64_t ticket);
/* The catch-up episode: all_level or not after this tick. */
void repl_stat_catchup(struct repl *r, bool all_level, uint64_t now_ms);

#endif
