/*
 * tlogstore.h: each origin's transparency log as this site holds it (issue
 * 21, docs/push-log.md "The transparency log's leaves").
 *
 * The leaves are CF_TLEAVES records (origin, index) -> PushLeaf, merged by
 * ops_tlog.c (ops_tlog_apply); each one taken appends its stored hashes
 * (tlog.h) to its origin's table in CF_THASHES and moves the tree size
 * there, in the leaf's batch.  This room holds the table: reading it (a
 * tlog_read_fn), appending to it, the size, the root, and the check of a
 * PushLeaf operation's shape (ops_check.c).
 *
 * Pure functions of the store: no state of their own.  Callers:
 * ops_tlog.c and ops_check.c (the writer thread), cmd_repo.c
 * (the origin's next index, in its batch), cmd_log.c (log verify, on
 * committed state: any thread with the store).  Errors are negative enum
 * gd_err: the store's, passed up, or GD_EPROTO for a stored value that is
 * not a hash or a size.
 */
#ifndef GD_TLOGSTORE_H
#define GD_TLOGSTORE_H

#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"
#include "store.h"
#include "tlog.h"

/* The tree size of origin's log here (0: no leaf), in b (NULL:
 * committed). */
int tlogstore_size(struct store *s,
                   struct store_batch *b,
                   const char *origin,
                   uint64_t *out);

/* Append leaf index (= the size now) with text to origin's table in b:
 * its stored hashes, and the size index + 1. */
int tlogstore_append(struct store *s,
                     struct store_batch *b,
                     const char *origin,
                     uint64_t index,
                     const void *text,
                     size_t len);

/* The payload of tlogstore_read: origin's table in b (NULL: committed). */
struct tlogstore_table {
	struct store *s;
	struct store_batch *b;
	const char *origin;
};

/* A tlog_read_fn over the table payload (struct tlogstore_table *) names;
 * GD_EPROTO for a hash missing or not 32 bytes. */
int tlogstore_read(struct tlog_hash *out,
                   const int64_t *indexes,
                   size_t n,
                   void *payload);

/* The root of origin's tree of size n, from its stored hashes. */
int tlogstore_root(struct tlog_hash *out,
                   struct store *s,
                   struct store_batch *b,
                   const char *origin,
                   uint64_t n);

/* A PushLeaf operation's shape: its origin's, an index, a text that
 * pushleaf_parse accepts and that names the same origin and index.  NULL,
 * or why not. */
const char *tlogstore_check(const Grantd__V1__Op *op);

#endif
