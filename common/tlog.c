/*
 * tlog.c: RFC 6962 tree hashes and proofs over an append-only table of
 * stored hashes.
 *
 * The table's order is Crosby and Wallach's (as Go's sumdb/tlog has it):
 * leaf n is followed by the hashes of the subtrees it completes, so the
 * table only ever grows at its end.  A proof is built in two passes over
 * the same recursion: the first lists the table indexes it needs (in the
 * order it will use them), one read fetches them all, the second folds
 * them into the proof.  Verifying walks the recursion once more, from the
 * proof alone.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sha256.h"
#include "tlog.h"
#include "xalloc.h"
#include "banned.h"

void tlog_leaf_hash(struct tlog_hash *out, const void *entry, size_t len)
{
	const uint8_t prefix = 0x00;

	sha256_2(out->b, &prefix, 1, entry, len);
}

void tlog_node_hash(struct tlog_hash *out,
                    const struct tlog_hash *l,
                    const struct tlog_hash *r)
{
	uint8_t in[1 + 2 * TLOG_HASH_LEN];

	in[0] = 0x01;
	memcpy(in + 1, l->b, TLOG_HASH_LEN);
	memcpy(in + 1 + TLOG_HASH_LEN, r->b, TLOG_HASH_LEN);
	sha256_2(out->b, in, sizeof(in), NULL, 0);
}

void tlog_empty_hash(struct tlog_hash *out)
{
	sha256_2(out->b, NULL, 0, NULL, 0);
}

bool tlog_hash_eq(const struct tlog_hash *a, const struct tlog_hash *b)
{
	return sodium_memcmp(a->b, b->b, TLOG_HASH_LEN) == 0;
}

/* k = the largest power of two strictly below n (n >= 2): where RFC 6962
 * splits a tree of n leaves. */
static int64_t split_at(int64_t n)
{
	GD_ASSERT(n >= 2);
	return (int64_t)1 << (63 - __builtin_clzll((uint64_t)(n - 1)));
}

/* The largest power of two at most n (n >= 1), and its log2. */
static int64_t pow2_le(int64_t n, int *level)
{
	GD_ASSERT(n >= 1);
	*level = 63 - __builtin_clzll((uint64_t)n);
	return (int64_t)1 << *level;
}

int64_t tlog_stored_index(int level, int64_t n)
{
	int64_t i = 0;

	GD_ASSERT(level >= 0 && level < 63 && n >= 0);
	GD_ASSERT(n <= (INT64_MAX >> 2) >> level);
	/* Level L's n'th hash follows level L-1's (2n+1)'th: go down to 0. */
	for (int l = level; l > 0; l--)
		n = 2 * n + 1;
	/* Level 0's n'th hash is at n + n/2 + n/4 + ... */
	for (; n > 0; n >>= 1)
		i += n;
	return i + level;
}

void tlog_split_stored_index(int64_t index, int *level, int64_t *n)
{
	int64_t leaf, at;

	GD_ASSERT(index >= 0);
	/* tlog_stored_index(0, leaf) < 2 * leaf: start at index / 2 and walk
	 * up; each leaf adds 1 + trailing ones of its number. */
	leaf = index / 2;
	at = tlog_stored_index(0, leaf);
	GD_ASSERT(at <= index);
	for (;;) {
		int64_t next = at + 1 + __builtin_ctzll((uint64_t)(leaf + 1));
		if (next > index)
			break;
		leaf++;
		at = next;
	}
	*level = (int)(index - at);
	*n = leaf >> *level;
}

int64_t tlog_stored_count(int64_t n)
{
	int64_t count;

	if (n <= 0)
		return 0;
	count = tlog_stored_index(0, n - 1) + 1;
	for (uint64_t i = (uint64_t)(n - 1); i & 1; i >>= 1)
		count++;
	return count;
}

/* ---- reading the table ------------------------------------------------ */

struct need {
	int64_t *idx;
	size_t n, cap;
	struct tlog_hash *h; /* after the read: h[k] is the hash of idx[k] */
	size_t next; /* the next h to use */
};

static void need_add(struct need *nd, int64_t index)
{
	GD_GROW(nd->idx, nd->cap, nd->n + 1);
	nd->idx[nd->n++] = index;
}

static int need_read(struct need *nd, tlog_read_fn *read, void *payload)
{
	nd->h = xreallocarray(NULL, nd->n ? nd->n : 1, sizeof(*nd->h));
	nd->next = 0;
	return nd->n ? read(nd->h, nd->idx, nd->n, payload) : 0;
}

static const struct tlog_hash *need_take(struct need *nd)
{
	GD_ASSERT(nd->next < nd->n);
	return &nd->h[nd->next++];
}

static void need_free(struct need *nd)
{
	free(nd->idx);
	free(nd->h);
}

/* The table indexes the hash of leaves [lo, hi) is made of: its perfect
 * subtrees, largest first. */
static void subtree_need(struct need *nd, int64_t lo, int64_t hi)
{
	while (lo < hi) {
		int level;
		int64_t k = pow2_le(hi - lo, &level);
		GD_ASSERT((lo & (k - 1)) == 0);
		need_add(nd, tlog_stored_index(level, lo >> level));
		lo += k;
	}
}

/* The hash of leaves [lo, hi) from the hashes subtree_need listed. */
static void
subtree_hash(struct tlog_hash *out, struct need *nd, int64_t lo, int64_t hi)
{
	const struct tlog_hash *parts[64];
	int np = 0, level;

	while (lo < hi) {
		GD_ASSERT(np < 64);
		parts[np++] = need_take(nd);
		lo += pow2_le(hi - lo, &level);
	}
	GD_ASSERT(np > 0);
	*out = *parts[np - 1];
	for (int i = np - 2; i >= 0; i--)
		tlog_node_hash(out, parts[i], out);
}

int tlog_stored_hashes(struct tlog_hash *out,
                       size_t *nout,
                       int64_t n,
                       const struct tlog_hash *leaf,
                       tlog_read_fn *read,
                       void *payload)
{
	struct need nd = {0};
	int m, err;

	if (n < 0 || n >= INT64_MAX / 4)
		return GD_EINVAL;
	/* Each trailing 1 bit of n completes a subtree: its left half is
	 * already stored. */
	m = __builtin_ctzll((uint64_t)(n + 1));
	for (int i = m - 1; i >= 0; i--)
		need_add(&nd, tlog_stored_index(i, (n >> i) - 1));
	err = need_read(&nd, read, payload);
	if (err)
		goto cleanup;
	out[0] = *leaf;
	for (int i = 0; i < m; i++)
		tlog_node_hash(&out[i + 1], &nd.h[m - 1 - i], &out[i]);
	*nout = (size_t)m + 1;
cleanup:
	need_free(&nd);
	return err;
}

int tlog_tree_hash(struct tlog_hash *out,
                   int64_t n,
                   tlog_read_fn *read,
                   void *payload)
{
	struct need nd = {0};
	int err;

	if (n < 0 || n >= INT64_MAX / 4)
		return GD_EINVAL;
	if (n == 0) {
		tlog_empty_hash(out);
		return 0;
	}
	subtree_need(&nd, 0, n);
	err = need_read(&nd, read, payload);
	if (!err) {
		subtree_hash(out, &nd, 0, n);
		GD_ASSERT(nd.next == nd.n);
	}
	need_free(&nd);
	return err;
}

/* ---- inclusion proofs ------------------------------------------------- */

/* Pass 1 (out == NULL) lists the indexes; pass 2 folds them into out. */
static void record_proof(struct tlog_hash *out,
                         size_t *np,
                         struct need *nd,
                         int64_t lo,
                         int64_t hi,
                         int64_t i)
{
	struct tlog_hash left;
	int64_t k;

	GD_ASSERT(lo <= i && i < hi);
	if (lo + 1 == hi)
		return; /* the leaf itself: the verifier has it */
	k = split_at(hi - lo);
	if (i < lo + k) {
		record_proof(out, np, nd, lo, lo + k, i);
		if (out)
			subtree_hash(&out[*np], nd, lo + k, hi);
		else
			subtree_need(nd, lo + k, hi);
	} else {
		/* the left subtree's hashes were listed first: take them
		 * first, but write it after the deeper hashes */
		if (out)
			subtree_hash(&left, nd, lo, lo + k);
		else
			subtree_need(nd, lo, lo + k);
		record_proof(out, np, nd, lo + k, hi, i);
		if (out)
			out[*np] = left;
	}
	GD_ASSERT(*np < TLOG_MAX_PROOF);
	(*np)++;
}

int tlog_prove_record(struct tlog_hash *proof,
                      size_t *nproof,
                      int64_t t,
                      int64_t i,
                      tlog_read_fn *read,
                      void *payload)
{
	struct need nd = {0};
	size_t np = 0;
	int err;

	if (t <= 0 || t >= INT64_MAX / 4 || i < 0 || i >= t)
		return GD_EINVAL;
	record_proof(NULL, &np, &nd, 0, t, i);
	err = need_read(&nd, read, payload);
	if (!err) {
		np = 0;
		record_proof(proof, &np, &nd, 0, t, i);
		GD_ASSERT(nd.next == nd.n);
		*nproof = np;
	}
	need_free(&nd);
	return err;
}

/* The root of [lo, hi) implied by proof[0..n) and the leaf i's hash. */
static int run_record(struct tlog_hash *out,
                      const struct tlog_hash *proof,
                      size_t n,
                      int64_t lo,
                      int64_t hi,
                      int64_t i,
                      const struct tlog_hash *leaf)
{
	struct tlog_hash sub;
	int64_t k;
	int err;

	if (lo + 1 == hi) {
		if (n != 0)
			return GD_ECRYPTO; /* hashes to spare */
		*out = *leaf;
		return 0;
	}
	if (n == 0)
		return GD_ECRYPTO;
	k = split_at(hi - lo);
	if (i < lo + k) {
		err = run_record(&sub, proof, n - 1, lo, lo + k, i, leaf);
		if (!err)
			tlog_node_hash(out, &sub, &proof[n - 1]);
	} else {
		err = run_record(&sub, proof, n - 1, lo + k, hi, i, leaf);
		if (!err)
			tlog_node_hash(out, &proof[n - 1], &sub);
	}
	return err;
}

int tlog_check_record(const struct tlog_hash *proof,
                      size_t nproof,
                      int64_t t,
                      const struct tlog_hash *root,
                      int64_t i,
                      const struct tlog_hash *leaf)
{
	struct tlog_hash got;
	int err;

	if (t <= 0 || i < 0 || i >= t)
		return GD_EINVAL;
	if (nproof > TLOG_MAX_PROOF)
		return GD_ECRYPTO;
	err = run_record(&got, proof, nproof, 0, t, i, leaf);
	if (err)
		return err;
	return tlog_hash_eq(&got, root) ? 0 : GD_ECRYPTO;
}

/* ---- consistency proofs ----------------------------------------------- */

/* The sub-proof for [lo, hi) where the old tree has n leaves
 * (lo < n <= hi); pass 1 (out == NULL) lists, pass 2 folds. */
static void tree_proof(struct tlog_hash *out,
                       size_t *np,
                       struct need *nd,
                       int64_t lo,
                       int64_t hi,
                       int64_t n)
{
	struct tlog_hash left;
	int64_t k;

	GD_ASSERT(lo < n && n <= hi);
	if (n == hi) {
		if (lo == 0)
			return; /* exactly the old tree: the verifier has it */
		if (out)
			subtree_hash(&out[*np], nd, lo, hi);
		else
			subtree_need(nd, lo, hi);
		goto one_more;
	}
	k = split_at(hi - lo);
	if (n <= lo + k) {
		tree_proof(out, np, nd, lo, lo + k, n);
		if (out)
			subtree_hash(&out[*np], nd, lo + k, hi);
		else
			subtree_need(nd, lo + k, hi);
	} else {
		if (out)
			subtree_hash(&left, nd, lo, lo + k);
		else
			subtree_need(nd, lo, lo + k);
		tree_proof(out, np, nd, lo + k, hi, n);
		if (out)
			out[*np] = left;
	}
one_more:
	GD_ASSERT(*np < TLOG_MAX_PROOF);
	(*np)++;
}

int tlog_prove_tree(struct tlog_hash *proof,
                    size_t *nproof,
                    int64_t t,
                    int64_t n,
                    tlog_read_fn *read,
                    void *payload)
{
	struct need nd = {0};
	size_t np = 0;
	int err;

	if (n < 1 || n > t || t >= INT64_MAX / 4)
		return GD_EINVAL;
	tree_proof(NULL, &np, &nd, 0, t, n);
	err = need_read(&nd, read, payload);
	if (!err) {
		np = 0;
		tree_proof(proof, &np, &nd, 0, t, n);
		GD_ASSERT(nd.next == nd.n);
		*nproof = np;
	}
	need_free(&nd);
	return err;
}

/* The old and new roots of [lo, hi) implied by proof[0..np), the old tree
 * having n leaves with root *old. */
static int run_tree(struct tlog_hash *oh,
                    struct tlog_hash *th,
                    const struct tlog_hash *proof,
                    size_t np,
                    int64_t lo,
                    int64_t hi,
                    int64_t n,
                    const struct tlog_hash *old)
{
	struct tlog_hash o, t;
	int64_t k;
	int err;

	if (n == hi) {
		if (np != (lo == 0 ? 0u : 1u))
			return GD_ECRYPTO;
		*oh = *th = lo == 0 ? *old : proof[0];
		return 0;
	}
	if (np == 0)
		return GD_ECRYPTO;
	k = split_at(hi - lo);
	if (n <= lo + k) {
		err = run_tree(&o, &t, proof, np - 1, lo, lo + k, n, old);
		if (err)
			return err;
		*oh = o;
		tlog_node_hash(th, &t, &proof[np - 1]);
	} else {
		err = run_tree(&o, &t, proof, np - 1, lo + k, hi, n, old);
		if (err)
			return err;
		tlog_node_hash(oh, &proof[np - 1], &o);
		tlog_node_hash(th, &proof[np - 1], &t);
	}
	return 0;
}

int tlog_check_tree(const struct tlog_hash *proof,
                    size_t nproof,
                    int64_t t,
                    const struct tlog_hash *troot,
                    int64_t n,
                    const struct tlog_hash *nroot)
{
	struct tlog_hash oh, th;
	int err;

	if (n < 1 || n > t)
		return GD_EINVAL;
	if (nproof > TLOG_MAX_PROOF)
		return GD_ECRYPTO;
	err = run_tree(&oh, &th, proof, nproof, 0, t, n, nroot);
	if (err)
		return err;
	if (!tlog_hash_eq(&oh, nroot) || !tlog_hash_eq(&th, troot))
		return GD_ECRYPTO;
	return 0;
}
