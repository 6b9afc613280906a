/*
 * ops.h: operations and THE apply function.
 *
 * Every change to replicated state is an operation stamped (origin, epoch,
 * seq, hlc).  ops_local() stamps a change made here; ops_apply() merges an
 * operation into the store batch: the effect, the operation log, the
 * version vector and the state digest, all in the one batch.  The merge
 * rules (ops_merge.c): last-writer-wins by (hlc, origin) for users,
 * enrollments, grants, unlocks, address revocations, repositories and
 * refs (a ref's losing tip noted in CF_LOSERS); max/union for token-use
 * marks; union of attempt stamps for failures; a set for the push log
 * (one entry per (origin, n), a second one kept as a fork).  Local
 * changes and peers' operations both go through ops_apply, and records of
 * a state transfer through ops_merge_record with the same rules; there is
 * no second merge path.  Every replicated family (records.h) is in the
 * digest, refs, address revocations and the push log included.
 *
 * The module is opaque (struct ops lives in ops_int.h, for ops*.c only):
 * callers use the named calls below.  Rooms: ops.c (the operation, save
 * points, accessors), ops_merge.c, ops_vv.c, ops_check.c, ops_count.c,
 * ops_derived.c (keyfp, push ids, push-log heads), ops_digest.c,
 * ops_sweep.c.  Callers: the writer (writer.c), the request handlers
 * (node/requests), replication (repl.c, vote.c, plheads.c), main.c.
 *
 * One owner thread (the writer).  After a failed commit call ops_reload()
 * so the in-memory counters match the disk again.
 *
 * An operation is applied whole or not at all: ops_apply() undoes, in the
 * batch and in memory alike, whatever an operation that fails half-way
 * wrote (ops_savepoint), so the digest always describes the batch's
 * records.  Nothing outside the store happens inside an apply: a new
 * repository's directory is made after the commit (ops_take_repos), a
 * ref's objects fetched after it (ops_take_refs).
 */
#ifndef GD_OPS_H
#define GD_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "digest.h"
#include "grantd.pb-c.h"
#include "hlc.h"
#include "store.h"

struct config;

/* Bounded by ops_check().  Failed attempts kept per (user, site): the
 * newest ones, which is enough as long as no site may set lockout_failures
 * above it (config.c caps it at 64): whatever the split over sites, the
 * lockout_failures newest attempts after an unlock are all kept.  Equal at
 * every site whatever their configs, or their records would differ. */
#define OPS_MAX_FAILURES_KEPT 64
#define OPS_MAX_KEYS 64
#define OPS_MAX_REF_CHANGES 4096

struct ops; /* private: ops_int.h */

/* One entry of the version vector (ops_vv_count, ops_vv_at): read-only
 * outside the module. */
struct ops_vv {
	char origin[65];
	uint64_t epoch;
	uint64_t seq;
	bool retired;  /* kept only to know its operations (below) */
	bool dirty;    /* changed since the last commit */
};

/* Load (or, for a new store, create) epoch, seq, hlc and digest into a
 * new *out, the caller's (ops_destroy).  cfg and s must outlive it.
 * Returns 0 or a negative gd_err (then *out is NULL). */
int ops_open(struct ops **out, struct store *s, const struct config *cfg,
	     bool created);

/* Free *op and what ops_open and ops_local allocated; NULL-safe, sets
 * *op = NULL. */
void ops_destroy(struct ops **op);

/* Re-read the counters from committed state after a failed commit. */
int ops_reload(struct ops *o);

/* A point to come back to: in a batch (store_batch_savepoint) and in the
 * in-memory state that describes it (digest, sequence, outbox, touched
 * lists, counts, and a copy of the vector). */
struct ops_save {
	uint8_t digest[DIGEST_LEN];
	uint8_t fam_digest[CF__COUNT][DIGEST_LEN];
	uint64_t seq;
	size_t outbox_len, unsigned_len, refs_len, repos_len, undo_len, vv_at;
};

/* Open a save point in b.  Then either ops_release() keeps what was
 * applied since (it then belongs to the enclosing point, if any), or
 * ops_rollback() undoes it in b and in memory alike.  Points nest.
 * ops_rollback returns 0, or GD_EIO when the batch could not be rolled
 * back (then drop the batch and call ops_reload). */
void ops_savepoint(struct ops *o, struct store_batch *b, struct ops_save *sp);
void ops_release(struct ops *o, struct store_batch *b);
int ops_rollback(struct ops *o, struct store_batch *b,
		 const struct ops_save *sp);

/* The digest recomputed from the records on disk, beside the live one. */
struct ops_verify {
	uint8_t live[DIGEST_LEN];     /* in memory (grantctl status) */
	uint8_t stored[DIGEST_LEN];   /* committed with the last batch */
	uint8_t disk[DIGEST_LEN];     /* recomputed from the records */
	bool covered[CF__COUNT];      /* the family is in the digest */
	uint8_t live_fam[CF__COUNT][DIGEST_LEN];
	uint8_t disk_fam[CF__COUNT][DIGEST_LEN];
	uint64_t records[CF__COUNT];
	/* live records (status) as kept and as counted on disk, at the
	 * same time; both 0 for a family not counted */
	int64_t count_kept[CF__COUNT];
	int64_t count_disk[CF__COUNT];
	bool equal;                   /* live == stored == disk, counts too */
};

/* Recompute the digest from the committed records of every replicated
 * family and compare it with the live and the stored one.  It reads every
 * record: call it between batches (nothing applied and uncommitted), on
 * the writer thread.  Returns 0 (v->equal says the verdict) or a store
 * error. */
int ops_verify(struct ops *o, struct ops_verify *v);

/* How many records of cf are live at unix time now (`status`): kept as
 * operations apply, never scanned; 0 for a family records.h does not
 * count.  Moves the count's horizon (writer thread). */
int64_t ops_count(struct ops *o, enum store_cf cf, int64_t now);

/* A fresh HLC stamp, for a handler that must know the stamp of the
 * operation it is about to make (an enrollment's id). */
uint64_t ops_stamp(struct ops *o);

/*
 * Stamp op as a new local operation (origin = this site, the next seq,
 * op->hlc if already set, otherwise a fresh stamp) and apply it to b.
 * Returns 0 or a negative gd_err.
 */
int ops_local(struct ops *o, struct store_batch *b, Grantd__V1__Op *op);

void ops_outbox_clear(struct ops *o);

/* Sign this site's operations with s (common/opsig.h) from the next
 * commit on: ops_commit signs each batch's own operations once, in the
 * log and the outbox alike.  s must outlive o; NULL: unsigned. */
struct opsig_signer;
void ops_set_signer(struct ops *o, const struct opsig_signer *s);

/* Whether b, or the vector ops_commit would write with it, holds a
 * change. */
bool ops_pending(const struct ops *o, struct store_batch *b);

/* Write the node's counters (seq, clock, digest, the vector's changed
 * entries) into b once, then commit
 * it (sync: fsync before returning).  Every batch that went through
 * ops_apply is committed this way.  Returns 0 or GD_EIO. */
int ops_commit(struct ops *o, struct store_batch *b, bool sync);

/*
 * Apply an operation (local or a peer's) to b.  seq must be the next after
 * the version vector's entry for (origin, epoch): an earlier seq is a
 * duplicate and is skipped (*applied = false, returns 0); a later one is a
 * gap (GD_EINVAL, nothing written).
 */
int ops_apply(struct ops *o, struct store_batch *b, const Grantd__V1__Op *op,
	      bool *applied);

/*
 * Read-only mirrors (SPEC 9, docs/mirrors.md).  A mirror holds only the
 * families records_mirror_visible() names; its peers send it every other
 * operation as its stamp alone, which it takes with ops_skip: the version
 * vector moves past it (so the stream stays gap-free and catch-up knows
 * where it is) and nothing else is written, not even the log entry.
 */

/* May a mirror hold what op writes?  false for NULL and a body no family
 * is written by. */
bool ops_mirror_visible(const Grantd__V1__Op *op);

/* Take operation (origin, epoch, seq, hlc) as seen without its body: as
 * ops_apply, an earlier seq is a duplicate (*applied = false, 0), a later
 * one a gap (GD_EINVAL, nothing written); the next one raises the vector
 * (in b, at ops_commit) and the clock. */
int ops_skip(struct ops *o, struct store_batch *b, const char *origin,
	     uint64_t epoch, uint64_t seq, uint64_t hlc, bool *applied);

/* The digest of the families a mirror holds (the XOR of their shares):
 * equal at a frontend and a mirror that hold the same public state. */
void ops_digest_public(const struct ops *o, uint8_t out[DIGEST_LEN]);

/* What a record from a peer must pass besides ops_check, as a live
 * operation does: a stamp no later than max_hlc (the receiver's clock plus
 * the allowed skew), from an origin that known() accepts. */
struct ops_trust {
	uint64_t max_hlc;
	bool (*known)(const char *origin, void *payload);
	void *payload;
};

/*
 * Merge one state record (as sent in a snapshot) of family cf into b with
 * the same rules as ops_apply, without touching the log or the vector; the
 * clock observes its stamp, as it does an operation's.  t (NULL: only
 * ops_check, for records this node wrote itself) adds the checks a peer's
 * record must pass.  Returns 0, or GD_EPROTO for a record that does not
 * decode or check, with the reason in why (NULL is fine).
 */
int ops_merge_record(struct ops *o, struct store_batch *b, enum store_cf cf,
		     const void *val, size_t vlen, const struct ops_trust *t,
		     struct buf *why);

/* The n operations of one record from a state transfer (ops[i] packed as
 * packed[i]; each makes that record and is signed by its origin, which
 * the caller checked: recops.h): each checked as a peer's record is
 * (ops_check, t), then, all passed, each merged as ops_apply merges and
 * kept with the record (recops_note).  Returns 0, GD_EPROTO with the
 * reason in why (nothing applied), or a store error. */
int ops_merge_signed(struct ops *o,
                     struct store_batch *b,
                     Grantd__V1__Op *const *ops,
                     const ProtobufCBinaryData *packed,
                     size_t n,
                     const struct ops_trust *t,
                     struct buf *why);

/* Raise the vector entry for (origin, epoch) to seq if it is lower. */
void ops_vv_raise(struct ops *o, struct store_batch *b, const char *origin,
		  uint64_t epoch, uint64_t seq);

/* Hook requests (grant-hook's request ids, RefUpdate.push_id) recorded
 * here are remembered, this many per repository, the latest. */
#define OPS_PUSH_IDS_KEPT 256

/* Has the push request id of repo been recorded here (the batch b
 * included)?  Returns 0 with *seen set, or a negative gd_err. */
int ops_push_seen(struct ops *o, struct store_batch *b, const char *repo,
		  const char *id, bool *seen);

/*
 * Retiring finished epochs.  Each start makes a new epoch, so the vector
 * would grow by one entry per start.  Only an origin's current epoch can
 * grow; an older one is finished.  A finished epoch that every peer holds
 * in full is retired: its seq is added to the origin's retired total, the
 * entry (origin, epoch 0) (no operation has epoch 0), so the vector's sum
 * per origin stays the same, and its entry leaves the vector that is sent
 * and summed.  It stays in the store, marked retired, so that its
 * operations, relayed again by a peer that has not retired it yet, are
 * still known (ops_vv_get), until every peer shows it retired too
 * (ops_vv_forget).  Only the origin decides which of its epochs to retire;
 * the others follow what its own heartbeat shows (docs/replication.md).
 */
#define OPS_VV_RETIRED 0

/* Retire this site's finished epochs (all but o->epoch) that held() says
 * every peer holds up to seq.  Returns how many were retired. */
int ops_vv_retire_own(struct ops *o, struct store_batch *b,
		      bool (*held)(const char *origin, uint64_t epoch,
				   uint64_t seq, void *payload),
		      void *payload);

/* Follow origin's retirements as its own vector (vv, n entries; only those
 * of origin are read) shows them: when its retired total is exactly ours
 * plus the seqs of our epochs of origin that it no longer lists, retire
 * those.  Anything else (we lack retired history, or it lost some) is left
 * to ranges and state transfer.  Returns how many were retired. */
int ops_vv_follow(struct ops *o, struct store_batch *b, const char *origin,
		  Grantd__V1__VvEntry *const *vv, size_t n);

/* Is (origin, epoch) already inside our retired total of origin, as
 * origin's own vector (vv, n entries: its last heartbeat, or its state
 * transfer's vector) shows it?  True when origin is another site whose
 * vector does not list epoch (it retired it) and whose retired total is
 * no more than ours (and ours is not 0).  Operations of such an epoch,
 * fetched from a peer that has not followed the retirement yet, would be
 * counted twice (once in the total, once as the epoch): they are not
 * asked for.  A restored origin that lacks the epoch lists it again once
 * it has fetched it, and then it is asked for. */
bool ops_vv_covered(struct ops *o, const char *origin, uint64_t epoch,
		    Grantd__V1__VvEntry *const *vv, size_t n);

/* Is (origin, epoch), which peer vector vv (n entries) lists and we do
 * not, inside our retired total of origin by the count: our total is
 * above the peer's, by exactly the seqs of every epoch of origin the peer
 * lists and we do not list live (those we retired counted as our total
 * holds them)?  Then the peer has not followed a retirement we
 * hold (we took a state transfer from a site that had): fetching those
 * epochs would count them twice.  ops_vv_covered asks origin's own
 * vector; this is for when there is none: a rebuilt site's own earlier
 * epochs, or an origin that is down. */
bool ops_vv_inside_total(struct ops *o, const char *origin, uint64_t epoch,
			 Grantd__V1__VvEntry *const *vv, size_t n);

/* A state transfer raises origin's retired total to total: raise it, then
 * retire, without adding them to the total, our epochs of origin that
 * ops_vv_covered() says are inside it (own, n_own: origin's own vector)
 * and that the sender's vector (sent, n_sent) does not list either.  Else
 * an epoch fetched by range before the transfer would be counted twice
 * (status "applied" apart from the peers' while the digests agree).
 * Returns how many epochs were retired so. */
int ops_vv_raise_retired(struct ops *o, struct store_batch *b,
			 const char *origin, uint64_t total,
			 Grantd__V1__VvEntry *const *own, size_t n_own,
			 Grantd__V1__VvEntry *const *sent, size_t n_sent);

/* Delete the retired entries that gone() says every peer has retired too
 * (none lists it, and each one's retired total of its origin is at least
 * ours).  Returns how many. */
int ops_vv_forget(struct ops *o, struct store_batch *b,
		  bool (*gone)(const char *origin, uint64_t epoch,
			       uint64_t total, void *payload),
		  void *payload);

/* Delete up to max log entries older than cutoff_ms (HLC wall time);
 * returns how many were deleted or a negative gd_err. */
int ops_truncate_log(struct ops *o, uint64_t cutoff_ms, int max);

/* Look at up to max operations of CF_KEPTOPS, going on from where the last
 * call stopped (from the start once it reached the end), and delete each
 * no record names any more (recops.h).  Returns how many were deleted or
 * a negative gd_err. */
int ops_sweep_kept(struct ops *o, int max);

/* Expired grants stay this long after expiry, so a late operation for one
 * still meets the record it must lose against and `list-val all` shows
 * recent history; then ops_sweep_grants() forgets them. */
#define OPS_GRANT_GRACE_S (45LL * 86400)

/* Delete up to max grants that expired more than OPS_GRANT_GRACE_S before
 * now (unix seconds), keeping the digest in step.  Returns how many, or a
 * negative gd_err. */
int ops_sweep_grants(struct ops *o, struct store_batch *b, int64_t now,
		     int max);

/* Is stamp (h1, o1) after (h2, o2)?  The LWW order: HLC, then origin. */
bool ops_stamp_after(uint64_t h1, const char *o1, uint64_t h2,
		     const char *o2);

/* 40 lower-case hex digits. */
bool ops_oid_ok(const char *s);

/* A ref name grantd replicates: refs/..., git's check-ref-format rules,
 * and not under refs/grantd/ (ours). */
bool ops_ref_name_ok(const char *s);

/* Bounds and shape checks for an operation from outside (names, lengths,
 * one body).  Returns 0 or GD_EPROTO with a reason in err. */
int ops_check(const Grantd__V1__Op *op, struct buf *err);

/* Keys of the record families: records.h. */

/* The push log (docs/push-log.md): the head of origin's chain as this
 * node holds it (the batch b included): *n the highest entry number
 * applied (0: none) and hash that entry's hash (32 zero bytes for none).
 * Kept in CF_META by every apply and merge of an entry, in its batch.
 * Returns 0 or a store error. */
#define OPS_PUSHLOG_HASH 32
int ops_pushlog_head(struct ops *o, struct store_batch *b, const char *origin,
		     uint64_t *n, uint8_t hash[OPS_PUSHLOG_HASH]);

/* The origins whose heads s holds (committed state; any thread): each
 * origin's name, head n and hash, in name order.  *out is the caller's
 * (free); returns how many, or a store error. */
struct ops_pushlog_head {
	char origin[65];
	uint64_t n;
	uint8_t hash[OPS_PUSHLOG_HASH];
};
int ops_pushlog_heads(struct ops_pushlog_head **out, struct store *s);

/* How many forks (a second entry for the same origin and n, kept beside
 * the first: records_key_pushlog_fork) the push log holds, in b (NULL:
 * committed).  Returns 0 or a store error. */
int ops_pushlog_forks(struct ops *o, struct store_batch *b, uint64_t *n);

/* Version vector entry for (origin, epoch); 0 when none.  It reads the
 * cache, which includes batches not yet committed (b is unused). */
uint64_t ops_vv_get(struct ops *o, struct store_batch *b, const char *origin,
		    uint64_t epoch);

/* Does the vector list (origin, epoch) as a live stream: an entry, not
 * retired?  A retired epoch is inside its origin's retired total here
 * (and a forgotten one, no entry, was retired everywhere): its operations
 * are never served by range again (repl_range.c), since a peer that asks
 * for them counts them once more beside a total that holds them. */
bool ops_vv_lists(struct ops *o, const char *origin, uint64_t epoch);

/* ---- named calls instead of fields (writer thread, as the rest) ---- */

/* This site's name (the config's), the epoch made at open, and the last
 * sequence number given here. */
const char *ops_site(const struct ops *o);
uint64_t ops_epoch(const struct ops *o);
uint64_t ops_seq(const struct ops *o);
/* Own operations up to this seq are durable and published (ranges and
 * heartbeats never announce more); repl moves it. */
uint64_t ops_published(const struct ops *o);
void ops_set_published(struct ops *o, uint64_t seq);
/* The live state digest (DIGEST_LEN bytes, borrowed: it changes with
 * every apply). */
const uint8_t *ops_digest(const struct ops *o);
/* The clock's last stamp given or observed. */
uint64_t ops_hlc_last(const struct ops *o);
/* The clock itself, borrowed (a fuzzer puts it back between inputs). */
struct hlc *ops_hlc(struct ops *o);
struct store *ops_store(const struct ops *o);
const struct config *ops_config(const struct ops *o);
/* The version vector's entries, retired ones included (check ->retired):
 * ops_vv_at(o, i) for i < ops_vv_count(o), borrowed until the next
 * change to the vector. */
size_t ops_vv_count(const struct ops *o);
const struct ops_vv *ops_vv_at(const struct ops *o, size_t i);
/* Move what the applies since the last take gathered into *out (the
 * caller's: buf_free it), leaving ops an empty buffer; out's old bytes are
 * dropped (wiped, for the outbox) and its memory reused.  The outbox:
 * ops_local's operations, each behind a 4-byte big-endian length, to
 * publish once their batch is durable.  The refs whose record changed
 * ("repo \0 ref \0" each), for gitrepl.  The repositories made live
 * ("name \0" each), for repos_follow after the commit. */
void ops_take_outbox(struct ops *o, struct buf *out);
void ops_take_refs(struct ops *o, struct buf *out);
void ops_take_repos(struct ops *o, struct buf *out);
/* Push log entries refused (stamped no later than their predecessor). */
uint64_t ops_pushlog_refused(const struct ops *o);

#endif
