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

/* ---- the check of `grantctl log verify` ---- */

/* One origin's tree as the walk found it. */
struct tlogstore_tree {
	char origin[65];
	uint64_t size; /* leaves 0 .. size - 1 held */
	uint64_t forks; /* other texts kept beside them */
	struct tlog_hash root; /* recomputed from the leaves' texts */
};

enum tlogstore_break {
	TLOGSTORE_OK = 0,
	TLOGSTORE_UNDECODABLE, /* a leaf's key or bytes are no leaf */
	TLOGSTORE_MISPLACED, /* its origin or index differ from its key's,
	                      * or its text's */
	TLOGSTORE_GAP, /* leaf `at` is missing, a later one held */
	TLOGSTORE_BAD_TEXT, /* its text does not parse (pushleaf.h) */
	TLOGSTORE_WRONG_SIZE, /* the stored size is not the leaves held */
	TLOGSTORE_WRONG_LEAF, /* the stored hash of leaf `at` is not its
	                       * text's */
	TLOGSTORE_WRONG_ROOT, /* the stored hashes' root is not the one
	                       * recomputed from the texts */
};

struct tlogstore_verify {
	struct tlogstore_tree *trees; /* each origin's, in key order */
	size_t ntrees, cap;
	uint64_t leaves, forks;
	/* the first break found, or TLOGSTORE_OK */
	enum tlogstore_break brk;
	char brk_site[65];
	uint64_t brk_at;
};

/* Walk every origin's leaves (committed state): each in place and whole,
 * their root recomputed from the texts alone (RFC 6962, never reading the
 * stored hashes), then held against the stored size, each leaf's stored
 * hash and the stored hashes' tree hash (tlog_tree_hash).  *v is the
 * caller's (tlogstore_verify_free); a break is in v, not an error.
 * Returns 0 or the store's error. */
int tlogstore_verify(struct tlogstore_verify *v, struct store *s);
void tlogstore_verify_free(struct tlogstore_verify *v);
/* "leaf missing (a later one held)", ...; "" for TLOGSTORE_OK */
const char *tlogstore_break_text(enum tlogstore_break b);

#endif
