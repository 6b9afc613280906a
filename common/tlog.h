/*
 * tlog.h: the Merkle tree of a transparency log (RFC 6962 hashing, as in
 * C2SP tlog-tiles, and the "stored hash" layout of Go's
 * golang.org/x/mod/sumdb/tlog), for the push log of issue 21 (SPEC 9,
 * docs/push-log.md "Formats (C2SP)").
 *
 * A log of n entries keeps an append-only table of hashes: appending entry
 * n adds tlog_stored_hashes() to the end of the table (the entry's leaf hash
 * and the hash of every subtree that entry completes: on average two),
 * so the table of a log of n entries holds tlog_stored_count(n) hashes and
 * hash (level L, index i) sits at tlog_stored_index(L, i).  Everything else
 * (a tree hash, an inclusion or consistency proof, a tile) is read out of
 * that table through a tlog_read_fn the caller supplies.  Checking a proof
 * needs no table.
 *
 * Pure functions of their arguments: any thread.  Hashing is libsodium's
 * SHA-256 (call sodium_init() first).  Errors are negative enum gd_err:
 * GD_EINVAL for arguments out of range (an index not in the tree, a tree
 * size below 0), GD_ECRYPTO for a proof that does not check, and whatever
 * the read callback returns, unchanged.
 *
 * Tiles and entry bundles (C2SP tlog-tiles) are in tlog_tile.h.
 */
#ifndef GD_TLOG_H
#define GD_TLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TLOG_HASH_LEN 32
/* Proofs are at most this many hashes (a tree of < 2^63 entries needs at
 * most 63 for inclusion and 64 for consistency). */
#define TLOG_MAX_PROOF 72
/* tlog_stored_hashes() returns at most this many hashes. */
#define TLOG_MAX_STORED 64

struct tlog_hash {
	uint8_t b[TLOG_HASH_LEN];
};

/* Reads the stored hashes at indexes[0..n) (increasing) into out[0..n);
 * returns 0 or a negative enum gd_err, passed up unchanged. */
typedef int tlog_read_fn(struct tlog_hash *out,
                         const int64_t *indexes,
                         size_t n,
                         void *payload);

/* SHA-256(0x00 || entry): the hash of a leaf (RFC 6962 2.1). */
void tlog_leaf_hash(struct tlog_hash *out, const void *entry, size_t len);
/* SHA-256(0x01 || l || r): the hash of an interior node. */
void tlog_node_hash(struct tlog_hash *out,
                    const struct tlog_hash *l,
                    const struct tlog_hash *r);
/* SHA-256 of nothing: the hash of the empty tree. */
void tlog_empty_hash(struct tlog_hash *out);
bool tlog_hash_eq(const struct tlog_hash *a, const struct tlog_hash *b);

/* Where hash (level, n) sits in the table: level 0 hashes are the leaves,
 * level L hash n covers leaves [n << L, (n + 1) << L).  level in 0..62,
 * n >= 0 and small enough that the result fits: the caller's (GD_ASSERT). */
int64_t tlog_stored_index(int level, int64_t n);
/* The inverse: the level and n of the hash at index (>= 0). */
void tlog_split_stored_index(int64_t index, int *level, int64_t *n);
/* How many hashes the table of a log of n entries holds. */
int64_t tlog_stored_count(int64_t n);

/* The hashes to append to the table when entry n (0-based; the table
 * holds tlog_stored_count(n) hashes) with leaf hash *leaf is added: out
 * [0..*nout), *nout <= TLOG_MAX_STORED, out[0] = *leaf.  Reads the hashes
 * the completed subtrees need through read. */
int tlog_stored_hashes(struct tlog_hash *out,
                       size_t *nout,
                       int64_t n,
                       const struct tlog_hash *leaf,
                       tlog_read_fn *read,
                       void *payload);

/* The root hash of the tree of the first n entries (n >= 0; the table
 * holds at least tlog_stored_count(n) hashes). */
int tlog_tree_hash(struct tlog_hash *out,
                   int64_t n,
                   tlog_read_fn *read,
                   void *payload);

/* The proof that leaf i is in the tree of size t (0 <= i < t):
 * proof[0..*nproof), *nproof <= TLOG_MAX_PROOF, leaf side first (RFC 6962
 * audit path order). */
int tlog_prove_record(struct tlog_hash *proof,
                      size_t *nproof,
                      int64_t t,
                      int64_t i,
                      tlog_read_fn *read,
                      void *payload);
/* 0 when proof shows that the tree of size t with root *root has leaf i
 * with hash *leaf; GD_ECRYPTO when it does not; GD_EINVAL unless
 * 0 <= i < t. */
int tlog_check_record(const struct tlog_hash *proof,
                      size_t nproof,
                      int64_t t,
                      const struct tlog_hash *root,
                      int64_t i,
                      const struct tlog_hash *leaf);

/* The proof that the tree of size t contains the tree of size n as a
 * prefix (1 <= n <= t): proof[0..*nproof), *nproof <= TLOG_MAX_PROOF, in
 * RFC 6962 order. */
int tlog_prove_tree(struct tlog_hash *proof,
                    size_t *nproof,
                    int64_t t,
                    int64_t n,
                    tlog_read_fn *read,
                    void *payload);
/* 0 when proof shows that the tree of size t with root *troot contains the
 * tree of size n with root *nroot; GD_ECRYPTO when it does not.  n = t
 * needs an empty proof and equal roots; GD_EINVAL unless 1 <= n <= t (a
 * proof from the empty tree proves nothing: Go's sumdb/tlog and
 * transparency-dev/merkle refuse it too). */
int tlog_check_tree(const struct tlog_hash *proof,
                    size_t nproof,
                    int64_t t,
                    const struct tlog_hash *troot,
                    int64_t n,
                    const struct tlog_hash *nroot);

#endif
