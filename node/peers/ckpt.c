/*
 * ckpt.c: checkpoints and their witnesses (ckpt.h).
 */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "ckpt.h"
#include "err.h"
#include "banned.h"

int ckpt_make(struct buf *out,
              const struct note_skey *key,
              const struct ckpt_tree *tree)
{
	struct buf text = BUF_INIT;
	struct tlog_hash root;
	int rc;

	if (tree->size < 1)
		return GD_EINVAL;
	if ((rc = tlog_tree_hash(&root, tree->size, tree->read,
	                         tree->payload)) < 0 ||
	    (rc = note_checkpoint_format(&text, key->name, key->name_len,
	                                 tree->size, &root)) < 0 ||
	    (rc = note_sign(out, text.p, text.len, key, 0)) < 0) {
		buf_free(&text);
		return rc;
	}
	buf_free(&text);
	return 0;
}

const char *ckpt_verdict_text(enum ckpt_verdict v)
{
	switch (v) {
	case CKPT_COSIGN:
		return "cosigned";
	case CKPT_SEEN:
		return "already cosigned";
	case CKPT_WAIT:
		return "waiting for its leaves";
	case CKPT_BAD_NOTE:
		return "not a signed checkpoint";
	case CKPT_BAD_SIG:
		return "not signed by the origin's key";
	case CKPT_WRONG_ROOT:
		return "its root is not the root of the origin's leaves here";
	case CKPT_INCONSISTENT:
		return "not consistent with the last checkpoint cosigned";
	}
	return "?";
}

/* Is the tree (size, root) consistent with last, by a proof made from
 * this site's stored hashes and checked as a client would? */
static enum ckpt_verdict consistent(const struct note_checkpoint *cp,
                                    const struct ckpt_tree *tree,
                                    const struct ckpt_last *last)
{
	struct tlog_hash proof[TLOG_MAX_PROOF];
	size_t np = 0;

	if (last->size == 0)
		return CKPT_COSIGN;
	if (cp->size < last->size)
		return CKPT_INCONSISTENT;
	if (cp->size == last->size)
		return tlog_hash_eq(&cp->root, &last->root) ? CKPT_SEEN
		                                            : CKPT_INCONSISTENT;
	if (tlog_prove_tree(proof, &np, cp->size, last->size, tree->read,
	                    tree->payload) < 0 ||
	    tlog_check_tree(proof, np, cp->size, &cp->root, last->size,
	                    &last->root) < 0)
		return CKPT_INCONSISTENT;
	return CKPT_COSIGN;
}

enum ckpt_verdict ckpt_witness(struct note_checkpoint *cp,
                               struct buf *line,
                               const char *note,
                               size_t len,
                               const struct note_vkey *origin,
                               const struct ckpt_tree *tree,
                               const struct ckpt_last *last,
                               const struct note_skey *cosigner,
                               uint64_t now)
{
	struct note n;
	struct tlog_hash here;
	enum ckpt_verdict v;
	int rc;

	memset(cp, 0, sizeof(*cp));
	rc = note_open(&n, note, len, origin, 1);
	if (rc == GD_ECRYPTO || rc == GD_ENOTFOUND)
		return CKPT_BAD_SIG;
	if (rc < 0 || note_checkpoint_parse(cp, n.text, n.text_len) < 0)
		return CKPT_BAD_NOTE;
	if (cp->origin_len != origin->name_len ||
	    memcmp(cp->origin, origin->name, origin->name_len))
		return CKPT_BAD_SIG; /* signed by the key of another log */
	if (cp->size < 1)
		return CKPT_BAD_NOTE;
	if (cp->size > tree->size)
		return CKPT_WAIT;
	if (tlog_tree_hash(&here, cp->size, tree->read, tree->payload) < 0 ||
	    !tlog_hash_eq(&here, &cp->root))
		return CKPT_WRONG_ROOT;
	if ((v = consistent(cp, tree, last)) != CKPT_COSIGN)
		return v;
	if (note_sign_line(line, n.text, n.text_len, cosigner, now) < 0)
		return CKPT_BAD_NOTE;
	return CKPT_COSIGN;
}

/* ---- log verify ---------------------------------------------------------- */

const char *ckpt_sig_text(enum ckpt_sig v)
{
	static const char *const t[] = {"ok", "no key", "bad", "malformed"};

	return (size_t)v < GD_ARRAY_SIZE(t) ? t[v] : "?";
}

const char *ckpt_root_text(enum ckpt_root v)
{
	static const char *const t[] = {"matches", "mismatch", "ahead"};

	return (size_t)v < GD_ARRAY_SIZE(t) ? t[v] : "?";
}

const char *ckpt_wit_text(enum ckpt_wit v)
{
	static const char *const t[] = {"none", "consistent", "inconsistent",
	                                "ahead"};

	return (size_t)v < GD_ARRAY_SIZE(t) ? t[v] : "?";
}

bool ckpt_check_failed(const struct ckpt_check *c)
{
	return c->sig == CKPT_SIG_BAD || c->sig == CKPT_SIG_MALFORMED ||
	       c->root == CKPT_ROOT_MISMATCH || c->wit == CKPT_WIT_INCONSISTENT;
}

static bool names_origin(const struct note_vkey *k,
                         const struct note_checkpoint *cp)
{
	return k->name_len == cp->origin_len &&
	       !memcmp(k->name, cp->origin, cp->origin_len);
}

/* The signature part of ckpt_check: out->sig and out->cosigs. */
static void check_sigs(struct ckpt_check *out,
                       const char *note,
                       size_t len,
                       const struct note_vkey *keys,
                       size_t nkeys)
{
	struct note n;
	bool origin_key = false;
	int rc = note_open(&n, note, len, keys, nkeys);

	for (size_t i = 0; i < nkeys; i++)
		if (keys[i].alg == NOTE_ALG_ED25519 &&
		    names_origin(&keys[i], &out->cp))
			origin_key = true;
	out->sig = origin_key ? CKPT_SIG_BAD : CKPT_SIG_NO_KEY;
	if (rc == GD_ECRYPTO) {
		out->sig = CKPT_SIG_BAD; /* a line by a known key is forged */
		return;
	}
	if (rc == GD_ENOTFOUND)
		return;
	if (rc < 0) {
		out->sig = CKPT_SIG_MALFORMED;
		return;
	}
	for (size_t i = 0; i < n.nsigs; i++) {
		const struct note_vkey *k;
		bool seen = false;
		if (n.sigs[i].key < 0)
			continue;
		k = &keys[n.sigs[i].key];
		if (k->alg == NOTE_ALG_ED25519 && names_origin(k, &out->cp)) {
			out->sig = CKPT_SIG_OK;
			continue;
		}
		if (k->alg != NOTE_ALG_COSIG || names_origin(k, &out->cp))
			continue;
		/* one count per cosigner, whichever of its keys signed */
		for (size_t j = 0; j < i; j++)
			if (n.sigs[j].key >= 0 &&
			    keys[n.sigs[j].key].alg == NOTE_ALG_COSIG &&
			    n.sigs[j].name_len == k->name_len &&
			    !memcmp(n.sigs[j].name, k->name, k->name_len))
				seen = true;
		out->cosigs += !seen;
	}
}

/* The last cosigned wit against the kept checkpoint cp: one log? */
static enum ckpt_wit check_wit(const struct note_checkpoint *cp,
                               const struct ckpt_tree *tree,
                               const struct ckpt_last *wit)
{
	struct note_checkpoint big = *cp;
	struct ckpt_last small = *wit;

	if (wit->size == 0)
		return CKPT_WIT_NONE;
	if (wit->size > cp->size) {
		big.size = wit->size, big.root = wit->root;
		small = (struct ckpt_last){cp->size, cp->root};
	}
	if (big.size > tree->size)
		return CKPT_WIT_AHEAD;
	return consistent(&big, tree, &small) == CKPT_INCONSISTENT
	               ? CKPT_WIT_INCONSISTENT
	               : CKPT_WIT_CONSISTENT;
}

int ckpt_check(struct ckpt_check *out,
               const char *note,
               size_t len,
               const struct note_vkey *keys,
               size_t nkeys,
               const struct ckpt_tree *tree,
               const struct ckpt_last *wit)
{
	const char *end = len ? memmem(note, len, "\n\n", 2) : NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!end ||
	    note_checkpoint_parse(&out->cp, note, (size_t)(end - note) + 1) <
	            0 ||
	    out->cp.size < 1) {
		memset(&out->cp, 0, sizeof(out->cp));
		out->sig = CKPT_SIG_MALFORMED;
		out->root = CKPT_ROOT_AHEAD;
		return 0;
	}
	check_sigs(out, note, len, keys, nkeys);
	if (out->cp.size > tree->size) {
		out->root = CKPT_ROOT_AHEAD;
	} else {
		if ((rc = tlog_tree_hash(&out->here, out->cp.size, tree->read,
		                         tree->payload)) < 0)
			return rc;
		out->root = tlog_hash_eq(&out->here, &out->cp.root)
		                    ? CKPT_ROOT_MATCH
		                    : CKPT_ROOT_MISMATCH;
	}
	out->wit = check_wit(&out->cp, tree, wit);
	return 0;
}
