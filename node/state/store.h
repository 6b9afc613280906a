/*
 * store.h: the node's RocksDB store.
 *
 * One column family per kind of record, plus the operation log, the
 * version vector and metadata.  Values of the sealed families (enrollments,
 * which hold OTP secrets, and the operation log, which carries them) are
 * encrypted with the node's sealing key (libsodium secretbox) on the way in
 * and opened on the way out, so secrets are never on disk or in a backup in
 * the clear.
 *
 * Writes go through a batch (a RocksDB WriteBatchWithIndex): reads given
 * the batch see its own pending writes, so many requests can be handled in
 * one batch and committed with one fsync.  One thread owns the store's
 * batches; reads without a batch may come from any thread.  A read view
 * (store_view_new) is a batch that only reads, over a snapshot: the
 * writer takes one after each commit, and the reader thread answers from
 * it once that commit is durable (writer.h, readers.h).
 */
#ifndef GD_STORE_H
#define GD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "records.h"

/* enum store_cf (CF_USERS, CF_GRANTS, ..., CF__COUNT): one column family
 * per row of records.h's table, which documents each family's layout. */

#define STORE_SEAL_KEY_LEN 32

/* The family's name ("users", "grants", ...; "default" for CF_META). */
const char *store_cf_name(enum store_cf cf);

struct store;
struct store_batch;
struct store_iter;

/*
 * Open (creating if missing) the store at path.  seal_key is copied.
 * *created is set when the store was new.  *out is the caller's
 * (store_destroy).  The store's format is checked and raised in place
 * (store_fmt.c).  Returns 0, GD_EIO (logged with RocksDB's reason) or
 * GD_EPROTO (the store's format is newer than this build's: logged, with
 * both formats and what to do).
 */
int store_open(struct store **out, bool *created, const char *path,
	       const uint8_t seal_key[STORE_SEAL_KEY_LEN]);
void store_destroy(struct store **sp);

/* A point read.  b may be NULL (read committed state only).  The value is
 * put in val (replacing its contents).  Returns 0, GD_ENOTFOUND, GD_EIO, or
 * GD_ECRYPTO when a sealed value does not open. */
int store_get(struct store *s, struct store_batch *b, enum store_cf cf,
	      const void *key, size_t klen, struct buf *val);

int store_batch_new(struct store_batch **out, struct store *s);
void store_batch_free(struct store_batch **bp);
/* Drop every write and save point of b (and a rekey it held): b is then
 * as new. */
void store_batch_clear(struct store_batch *b);

/*
 * A read view: the committed state at this moment (a RocksDB snapshot),
 * read wherever a batch is read (store_get, store_iter_new...), so read
 * handlers take a view or a batch alike.  A view cannot be written
 * (store_put and store_del on it abort; store_commit and store_rekey
 * return GD_EINVAL).  Take it on the writer thread; it carries its own
 * copy of the sealing keys, so it may then be read and freed
 * (store_batch_free) by any one thread, the store outliving it.  *out is
 * the caller's.  Returns 0.
 */
int store_view_new(struct store_batch **out, struct store *s);
bool store_batch_is_view(const struct store_batch *b);
void store_put(struct store_batch *b, enum store_cf cf, const void *key,
	       size_t klen, const void *val, size_t vlen);
void store_del(struct store_batch *b, enum store_cf cf, const void *key,
	       size_t klen);
int store_batch_count(struct store_batch *b);
/* Save points nest: store_batch_savepoint() opens one; then either
 * store_batch_release() closes the innermost open one keeping its writes
 * (they belong to the enclosing point, if any), or store_batch_rollback()
 * undoes every write since the innermost open one and closes it.  A
 * commit closes them all.  Rollback returns 0, GD_EINVAL (no open point)
 * or GD_EIO (logged; the batch is then refused by store_commit, whose
 * callers drop it and re-read their state). */
void store_batch_savepoint(struct store_batch *b);
void store_batch_release(struct store_batch *b);
int store_batch_rollback(struct store_batch *b);

/* Delete the keys of cf in [begin, end) at once, straight to the store
 * (no batch, no fsync): one range tombstone that iterators skip whole,
 * where a key-by-key delete leaves a tombstone each for every later scan
 * to step over until compaction.  For local, non-replicated families
 * only (the operation log).  Returns 0 or GD_EIO. */
int store_delete_range(struct store *s, enum store_cf cf, const void *begin,
		       size_t blen, const void *end, size_t elen);

/* Write the batch atomically; sync makes it durable (fsync) before the
 * return.  The batch is emptied either way.  Returns 0 or GD_EIO (also for
 * a batch whose rollback failed). */
int store_commit(struct store_batch *b, bool sync);

/*
 * Iterate the keys starting with prefix (plen may be 0: everything), in
 * key order, seeing the batch's pending writes when b is given.
 * store_iter_next returns 1 with key/val filled (key borrowed until the
 * next call; val is the caller's buffer), 0 at the end, or a negative
 * gd_err.  An iterator over a read view is freed before the view: the
 * view keeps its RocksDB iterator for the next store_iter_new of that
 * family (made once a view, sought again: no iterator made per read).
 */
int store_iter_new(struct store_iter **out, struct store *s,
		   struct store_batch *b, enum store_cf cf, const void *prefix,
		   size_t plen);
/* The same, but starting at the first key >= start (which should begin
 * with prefix). */
int store_iter_new_at(struct store_iter **out, struct store *s,
		      struct store_batch *b, enum store_cf cf,
		      const void *prefix, size_t plen, const void *start,
		      size_t slen);
int store_iter_next(struct store_iter *it, const char **key, size_t *klen,
		    struct buf *val);
void store_iter_free(struct store_iter **itp);

/* Move to the first key >= key; the next store_iter_next returns it. */
void store_iter_seek(struct store_iter *it, const void *key, size_t klen);

/* Make every write committed so far durable (fsync the WAL).  Safe to
 * call from another thread than the writer.  Returns 0 or GD_EIO. */
int store_sync(struct store *s);

/* The sealing key of a node whose CURVE secret key (raw, 32 bytes) is
 * sec: BLAKE2b keyed with it over "grantd seal v1". */
void store_seal_key(uint8_t out[STORE_SEAL_KEY_LEN], const uint8_t sec[32]);

/*
 * Key rotation: put every value of the sealed families (as b sees them,
 * pending writes included) into b again, sealed with new_key, and seal
 * everything later with new_key, so the change is one atomic batch.  Until
 * the process ends values sealed with the old key still open; if b is
 * freed or fails to commit, sealing goes back to the old key (what is on
 * disk).  *count is the number of values re-sealed.  Writer thread only.
 * Returns 0, GD_EAGAIN (a rekey is already pending in a batch), GD_EIO or
 * GD_ECRYPTO (a value does not open: nothing changed).
 */
int store_rekey(struct store *s, struct store_batch *b,
		const uint8_t new_key[STORE_SEAL_KEY_LEN], size_t *count);

/* A consistent on-disk copy (RocksDB checkpoint) into dir, which must not
 * exist. */
int store_checkpoint(struct store *s, const char *dir);

/*
 * The store's format (store_fmt.c, docs/upgrading.md): CF_META
 * STORE_META_FORMAT holds it (8, BE).  A store without it was made by
 * 0.1.0 and is format 1; STORE_FORMAT is this build's.  Raise it (and add
 * a step to store_fmt.c) when the layout on disk changes.
 */
#define STORE_FORMAT            2
#define STORE_FORMAT_UNSTAMPED  0
#define STORE_META_FORMAT       "store_format"

/* The format stamped in s (STORE_FORMAT_UNSTAMPED: none).  Returns 0 or
 * GD_EIO. */
int store_fmt_read(struct store *s, uint64_t *format);

/* Big-endian helpers for keys. */
void store_be64(uint8_t out[8], uint64_t v);
uint64_t store_get_be64(const void *p);

#endif
