/*
 * oplog.h: how the operation log (CF_OPLOG, records.h) stores a signed
 * operation: compact, its batch's proof once beside it (CF_OPBATCH).
 *
 * An entry of the log is a packed Op under origin \0 epoch seq.  A signed
 * one is stored compact (opsig.h, "the log's compact form"): its OpSig
 * holds its index and its batch's count (and its path, for a peer's), and
 * the batch's record (signature, prev, root; for this site's batches the
 * tree's table) sits in CF_OPBATCH under the key of the batch's last
 * operation, origin \0 epoch last_seq.  An entry without a signature, or
 * one written before this layout, is stored whole and read as it is.
 *
 * Every reader that hands an entry on (a range served to a peer, a state
 * transfer's kept operations, the retention's copies to CF_KEPTOPS) takes
 * it whole through oplog_whole or oplog_get: what leaves the log is what
 * was signed and sent, byte for byte.
 *
 * Keying the record by the batch's last seq lets the retention cut both
 * families with one range: cutting the log's entries up to seq S drops
 * exactly the records of the batches that end at or before S, and a batch
 * that goes on past S keeps its record for its entries left.
 *
 * A batch record is written once per store batch (the cache); a peer's
 * operation whose batch already has another record under that key (its
 * origin signed two batches over one seq: only a dishonest origin does)
 * is logged whole, so its proof is never lost.
 *
 * Threads: the functions touch only what they are given; a cache belongs
 * to one caller (the writer's is in struct ops; a range read keeps its
 * own).
 */
#ifndef GD_OPLOG_H
#define GD_OPLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"
#include "store.h"

/* The last batch record read or written: its CF_OPBATCH key and bytes. */
struct oplog_cache {
	struct buf key;
	struct buf rec;
};

/* Forget the cached record (after a rollback or a dropped batch, whose
 * writes it may name). */
void oplog_cache_reset(struct oplog_cache *c);
void oplog_cache_free(struct oplog_cache *c);

/* Log a peer's decoded operation in b, compact when it is signed whole
 * (opsig_compact) and its batch's record is not another one already;
 * whole otherwise. */
void oplog_put(struct store *s,
               struct store_batch *b,
               struct oplog_cache *c,
               const Grantd__V1__Op *op);

/* Log this site's signed batch in b: logged[0..n) (opsig_sign_batch_
 * logged's compact forms) at seqs first..first + n - 1 of (origin, epoch),
 * and its record rec. */
void oplog_put_batch(struct store_batch *b,
                     const char *origin,
                     uint64_t epoch,
                     uint64_t first,
                     struct buf *const *logged,
                     size_t n,
                     const struct buf *rec);

/* v holds the bytes stored at the log key key (klen bytes): make them the
 * whole operation, in place (an entry already whole is left as it is).
 * b may be NULL (committed state).  0, GD_EPROTO (logged: its record is
 * missing or does not fit it), or an error of store_get. */
int oplog_whole(struct store *s,
                struct store_batch *b,
                struct oplog_cache *c,
                const char *key,
                size_t klen,
                struct buf *v);

/* The whole operation at the log key: store_get, then oplog_whole.
 * GD_ENOTFOUND when the log does not hold it. */
int oplog_get(struct store *s,
              struct store_batch *b,
              const void *key,
              size_t klen,
              struct buf *out);

/* Cut the log's entries [begin, end) and the records of the batches that
 * end in that range (keys origin \0 epoch seq, one stream); stream_end:
 * the cut reaches the stream's last entry, so every record of the stream
 * from begin on goes too (a batch held only in part has no entry left).
 * A record cut while its batch goes on is written again with the next of
 * its entries (oplog_put).  Straight to the store, as store_delete_range.
 * 0 or GD_EIO. */
int oplog_cut(struct store *s,
              const void *begin,
              size_t blen,
              const void *end,
              size_t elen,
              bool stream_end);

#endif
