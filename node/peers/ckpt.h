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

#include <stdbool.h>
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

/* ---- log verify: a kept checkpoint checked again ------------------------ */

enum ckpt_sig {
	CKPT_SIG_OK, /* signed by one of the origin's keys */
	CKPT_SIG_NO_KEY, /* no key of the origin given: unchecked */
	CKPT_SIG_BAD, /* not signed by the origin's key, or a line by a
	               * known key that does not verify */
	CKPT_SIG_MALFORMED, /* not a signed checkpoint note */
};

enum ckpt_root {
	CKPT_ROOT_MATCH, /* the root of the leaves here at its size */
	CKPT_ROOT_MISMATCH, /* another root */
	CKPT_ROOT_AHEAD, /* larger than the tree here: not checked */
};

enum ckpt_wit {
	CKPT_WIT_NONE, /* no last cosigned given (size 0) */
	CKPT_WIT_CONSISTENT, /* the two trees are one log */
	CKPT_WIT_INCONSISTENT,
	CKPT_WIT_AHEAD, /* one of them is larger than the tree here */
};

/* What ckpt_check found. */
struct ckpt_check {
	struct note_checkpoint cp; /* size 0 when CKPT_SIG_MALFORMED */
	enum ckpt_sig sig;
	enum ckpt_root root;
	struct tlog_hash here; /* the root here at cp.size (not AHEAD) */
	int cosigs; /* cosigner keys (distinct names) whose line verifies */
	enum ckpt_wit wit;
};

/* "ok", "no key", "bad", "malformed"; "matches", "mismatch", "ahead";
 * "none", "consistent", "inconsistent", "ahead". */
const char *ckpt_sig_text(enum ckpt_sig v);
const char *ckpt_root_text(enum ckpt_root v);
const char *ckpt_wit_text(enum ckpt_wit v);

/* Is c a failure of the log (a bad signature, a root that is not the
 * leaves', a last cosigned of another log)? */
bool ckpt_check_failed(const struct ckpt_check *c);

/*
 * Check a kept note[0..len) (a checkpoint with its signatures) again, as
 * `grantctl log verify` does: its signature against keys (the origin's
 * signing keys, NOTE_ALG_ED25519, named as its origin line; the others
 * are cosigners' keys, NOTE_ALG_COSIG, whose lines are counted), its root
 * against tree, and wit (this site's last cosigned, size 0: none) against
 * it by a consistency proof from tree.  Returns 0 (out filled, whatever
 * it found) or a negative error reading tree.
 */
int ckpt_check(struct ckpt_check *out,
               const char *note,
               size_t len,
               const struct note_vkey *keys,
               size_t nkeys,
               const struct ckpt_tree *tree,
               const struct ckpt_last *wit);

#endif
