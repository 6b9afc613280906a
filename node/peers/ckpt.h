/*
 * ckpt.h: checkpoints of each frontend's push log, and cosigning them as a
 * witness (issue 21, SPEC 9, docs/push-log.md "Checkpoints and witnesses").
 *
 * An origin signs, at most every second while it has new leaves, a C2SP
 * tlog-checkpoint of its tree: origin line HOST/grantd/SITE (its signing
 * key's name, opsig.h), size, base64 root.  Every other frontend is a
 * witness: it cosigns (C2SP tlog-cosignature, cosignature/v1) a checkpoint
 * only when
 *   - the origin's key signed it (the checkpoint's origin line names the
 *     key of [peer SITE] verifier_key),
 *   - the root is the root of its own copy of that origin's leaves at that
 *     size (it waits while it holds fewer), and
 *   - the tree is consistent with the last checkpoint of that origin it
 *     cosigned (a consistency proof from its own stored hashes, checked
 *     with tlog_check_tree), which the caller stores atomically with the
 *     cosignature (tlog-witness asks it so).
 * A checkpoint that fails one of the last two, with a good signature, is
 * proof that the origin signed a tree that is not its log: the caller keeps
 * it.
 *
 * Pure functions: any thread; the tree is read through a tlog_read_fn.
 */
#ifndef GD_CKPT_H
#define GD_CKPT_H

#include <stdint.h>

#include "buf.h"
#include "note.h"
#include "tlog.h"

/* This site's copy of one origin's tree. */
struct ckpt_tree {
	int64_t size; /* leaves held */
	tlog_read_fn *read; /* its stored hashes */
	void *payload;
};

/* The last checkpoint of an origin this witness cosigned (size 0: none). */
struct ckpt_last {
	int64_t size;
	struct tlog_hash root;
};

/* Append to out the origin's checkpoint of tree (size >= 1), signed with
 * key (alg NOTE_ALG_ED25519, named as the origin line). */
int ckpt_make(struct buf *out,
              const struct note_skey *key,
              const struct ckpt_tree *tree);

enum ckpt_verdict {
	CKPT_COSIGN, /* cosigned: line holds the cosignature */
	CKPT_SEEN, /* the last one cosigned again: nothing new */
	CKPT_WAIT, /* this site holds fewer leaves than its size */
	CKPT_BAD_NOTE, /* not a signed checkpoint note */
	CKPT_BAD_SIG, /* not signed by the origin's key */
	CKPT_WRONG_ROOT, /* signed, but not the root of the leaves here */
	CKPT_INCONSISTENT, /* signed, but smaller than, or not consistent
	                    * with, the last one cosigned */
};

/* "cosigned", "seen", "wait", "not a signed checkpoint", ... */
const char *ckpt_verdict_text(enum ckpt_verdict v);

/* Is v proof against the origin (a checkpoint it signed that is not its
 * log)? */
static inline int ckpt_verdict_proof(enum ckpt_verdict v)
{
	return v == CKPT_WRONG_ROOT || v == CKPT_INCONSISTENT;
}

/*
 * Check note[0..len) (untrusted, from the origin) as a witness: against
 * origin (its verifier key), tree (this site's copy) and last.  On
 * CKPT_COSIGN, line gets the cosignature line of cosigner (alg
 * NOTE_ALG_COSIG) at unix time now, and *cp the checkpoint (its size and
 * root: the caller's new last); cp is filled for every verdict after
 * CKPT_BAD_SIG too.
 */
enum ckpt_verdict ckpt_witness(struct note_checkpoint *cp,
                               struct buf *line,
                               const char *note,
                               size_t len,
                               const struct note_vkey *origin,
                               const struct ckpt_tree *tree,
                               const struct ckpt_last *last,
                               const struct note_skey *cosigner,
                               uint64_t now);

#endif
