/*
 * ckpt.c: checkpoints and their witnesses (ckpt.h).
 */
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
