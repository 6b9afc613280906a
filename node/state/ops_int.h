/*
 * ops_int.h: struct ops and what the rooms of the operations module share.
 *
 * Private to node/state/ops*.c (as repl_int.h is to the repl rooms):
 * every other file reaches the module through ops.h and its named calls.
 * The rooms:
 *   ops.c         open / reload / close, stamp, local, apply, skip, commit,
 *                 save points, the accessors
 *   ops_merge.c   every merge rule, an operation's and a snapshot
 *                 record's side by side
 *   ops_vv.c      the version vector
 *   ops_check.c   checks of incoming operations (pure, no store)
 *   ops_count.c   live counts for `status`
 *   ops_derived.c keyfp index, push ids seen, push-log heads
 *   ops_digest.c  the digest at open, verify, the per-family toggle
 *   ops_sweep.c   grant sweep and log truncation
 *   ops_tlog.c    the transparency log leaves' merge rule (tlogstore.h)
 * One owner thread (the writer), as ops.h says.
 */
#ifndef GD_OPS_INT_H
#define GD_OPS_INT_H

#include "oplog.h"
#include "opsig.h"
#include "ops.h"

/* CF_META keys of this module */
#define META_EPOCH  "epoch"
#define META_SEQ    "seq"
#define META_HLC    "hlc"
#define META_DIGEST "digest"
/* "push" \0 repo \0 request id -> the op's hlc (8, BE): grant-hook's
 * requests recorded here (local, like the rest of CF_META) */
#define META_PUSH "push"
/* present once CF_KEYFP indexes every user's keys (a store made before
 * the index has none: it is built at open) */
#define META_KEYFP "keyfp"
/* "plhead" \0 origin -> n (8, BE) and hash (32): the head of origin's
 * push log chain here (ops_pushlog_head) */
#define META_PLHEAD "plhead"
/* -> how many forks (records_key_pushlog_fork) CF_PUSHLOG holds (8, BE) */
#define META_PLFORKS "plforks"

/* A min-heap of unix seconds. */
struct ops_heap {
	int64_t *v;
	size_t n, cap;
};

/* The live records of one family (records.h's live test), kept as
 * operations apply so that `status` needs no scan.  A record live until a
 * time (a grant, until it expires) counts until then: the limits of the
 * live ones wait in a heap, and those passed by the latest time asked for
 * (horizon) are counted as expired. */
struct ops_count {
	int64_t live; /* live records, time aside */
	int64_t expired; /* of them, those whose limit <= horizon */
	int64_t horizon;
	struct ops_heap until; /* limits > horizon of live records */
	struct ops_heap gone; /* limits of those since replaced or deleted */
};

struct opsig_signer;

struct ops {
	struct store *store;
	const struct config *cfg;
	char site[65];
	uint64_t epoch; /* random, made when the store was created */
	uint64_t seq; /* last sequence number given here */
	struct hlc hlc;
	uint8_t digest[DIGEST_LEN];
	/* each replicated family's share of the digest (digest is their
	 * XOR): recomputed from the records at open, so `grantctl verify`
	 * can name the family whose records and digest parted; and the same
	 * as of the last commit, for ops_reload */
	uint8_t fam_digest[CF__COUNT][DIGEST_LEN];
	uint8_t fam_committed[CF__COUNT][DIGEST_LEN];
	/* push log entries refused: stamped no later than their
	 * predecessor (ops_merge.c) */
	uint64_t pushlog_refused;
	/* transparency log leaves refused: an index other than the
	 * origin's tree size here (ops_tlog.c); when one was
	 * last logged (monotonic ms: at most one line a second) */
	uint64_t tleaf_refused;
	uint64_t tleaf_refused_logged_ms;
	/* Operations made by ops_local() since the last ops_outbox_clear(),
	 * packed, each behind a 4-byte big-endian length: published by repl
	 * once their batch is committed, dropped if the commit failed. */
	struct buf outbox;
	/* The part of outbox before this offset is signed (ops_commit signs
	 * the rest, opsig.h); and the seq of each operation after it, in
	 * order (uint64_t each), for the log entries signing rewrites. */
	size_t outbox_signed;
	struct buf unsigned_seqs;
	/* where ops_sweep_kept goes on in CF_KEPTOPS (empty: the start) */
	struct buf kept_cursor;
	/* this site's signing key (ops_set_signer; NULL: operations go out
	 * unsigned, as in unit tests that do not set one) */
	const struct opsig_signer *signer;
	/* the chain value of the batch signed last (zeros: none since this
	 * node started), which the next batch signs as its prev */
	uint8_t sig_chain[OPSIG_HASH_LEN];
	/* the batch record the log wrote or read last (oplog.h): reset at
	 * every commit, rollback and dropped batch, whose writes it names */
	struct oplog_cache logcache;
	/* Refs whose record an applied operation or snapshot record
	 * touched, each "repo \0 ref \0": handed to gitrepl (main.c), which
	 * makes the disk follow; an entry from a batch that then failed to
	 * commit only costs gitrepl a look. */
	struct buf refs_touched;
	/* Repositories whose record an applied operation or snapshot record
	 * made live, each "name \0": main.c makes their directories once the
	 * batch is committed (repos_follow), never inside the apply. */
	struct buf repos_touched;
	/* The version vector, cached: every change to it goes through this
	 * module, so the cache is the store's vector.  A changed entry is
	 * written to the batch once, by ops_commit (not once per operation:
	 * at catch-up that was a third of the batch's writes). */
	struct ops_vv *vv;
	size_t nvv, capvv;
	/* a copy of the vector at each open save point, innermost last, for
	 * ops_rollback: each is a struct ops_vv_saved and its entries;
	 * vv_top is the innermost's offset */
	struct buf vv_saves;
	size_t vv_top;
	/* own operations up to here are durable and published (ranges and
	 * heartbeats never announce more) */
	uint64_t published;
	/* live records per family (ops_count), loaded at open; and each
	 * change to them since the last commit, undone by ops_rollback and
	 * ops_reload */
	struct ops_count counts[CF__COUNT];
	struct ops_count_undo {
		int cf;
		int sign;
		int64_t until;
	} * undo;
	size_t nundo, capundo;
};

/* ops.c: CF_META's 8-byte counters.  ops_meta_u64_in reads key in b
 * (NULL: committed), 0 when there is none; ops_meta_u64 returns
 * GD_ENOTFOUND then. */
int ops_meta_u64_in(struct store *s,
                    struct store_batch *b,
                    const char *key,
                    uint64_t *out);
int ops_meta_u64(struct store *s, const char *key, uint64_t *out);
void ops_meta_put_u64(struct store_batch *b, const char *key, uint64_t val);
/* Pack an LWW body as its record, stamped (hlc, origin). */
void ops_pack_stamped(struct buf *out, const ProtobufCMessage *body,
		      uint64_t hlc, const char *origin);

/* ops_merge.c: the effect of one operation on the state families (its
 * body merged by its family's rule), for ops_apply.  *made (may be
 * NULL): op alone makes the one record it writes (an LWW op that won, a
 * mark whose merged values are op's own), so recops_note needs no read;
 * false when it does not or the rule does not say (a push, failures, an
 * entry). */
int ops_merge_op(struct ops *o,
                 struct store_batch *b,
                 const Grantd__V1__Op *op,
                 bool *made);

/* ops_tlog.c: a transparency log leaf merged (RECORDS_LEAF): taken at
 * index = its origin's tree size here (the table follows, in b), refused
 * (counted, logged) beyond it, kept as a fork when another text is held
 * at its index. */
int ops_tlog_apply(struct ops *o,
                   struct store_batch *b,
                   const Grantd__V1__PushLeaf *l);

/* ops_vv.c */
int ops_vv_load(struct ops *o);
void ops_vv_set(struct ops *o,
                struct store_batch *b,
                const char *origin,
                uint64_t epoch,
                uint64_t seq);
void ops_vv_flush(struct ops *o, struct store_batch *b);

/* ops_count.c: count the record (val, vlen) of cf in (sign 1) or out (-1)
 * of counts, when the family is counted and the record is live; undo:
 * remember it for ops_count_undo.  ops_count_undo takes back the changes
 * made since the undo log had len entries. */
void ops_count_record(struct ops *o,
                      struct ops_count *counts,
                      enum store_cf cf,
                      const void *val,
                      size_t vlen,
                      int sign,
                      bool undo);
void ops_count_undo(struct ops *o, size_t len);
int64_t ops_count_of(struct ops_count *c, enum store_cf cf, int64_t now);
void ops_count_free(struct ops_count *c);

/* ops_derived.c */
void ops_keyfp_index(struct store_batch *b,
                     const void *rec,
                     size_t len,
                     bool put);
int ops_keyfp_open(struct ops *o, struct store_batch *b);
int ops_push_remember(struct ops *o,
                      struct store_batch *b,
                      const Grantd__V1__Op *op);
/* Move origin's push log head to (n, hash) in b. */
void ops_pushlog_head_put(struct store_batch *b,
                          const char *origin,
                          uint64_t n,
                          const uint8_t hash[OPS_PUSHLOG_HASH]);
/* One fork more in the count ops_pushlog_forks reads. */
int ops_pushlog_fork_counted(struct ops *o, struct store_batch *b);
int ops_pushlog_drop_tail(struct ops *o);
/* The stamp of origin's entry n here, in b (0: none, or it does not
 * decode); an entry's hash in hex (empty when it does not decode). */
int ops_pushlog_stamp(struct ops *o, struct store_batch *b,
		      const char *origin, uint64_t n, uint64_t *hlc);
void ops_pushlog_hash_hex(char out[2 * OPS_PUSHLOG_HASH + 1],
			  const struct buf *v);

/* ops_digest.c */
void ops_digest_toggle(struct ops *o,
                       enum store_cf cf,
                       const void *key,
                       size_t klen,
                       const void *val,
                       size_t vlen);
int ops_digest_open(struct ops *o, struct store_batch *b);

#endif
