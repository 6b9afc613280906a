/*
 * tlogstore.c: each origin's stored-hash table (tlogstore.h).
 *
 * Why the table is kept and not recomputed: a root, a proof or a tile
 * needs O(log n) hashes out of it, where recomputing from the leaves reads
 * all n; and keeping it costs about two hashes per leaf (tlog.h).  It is a
 * function of the leaves at (origin, 0 .. size - 1), which only ever grow
 * at the end, so it is local (not in the digest: the leaves are), and
 * `grantctl log verify` recomputes it from them.
 */
#include <string.h>

#include "err.h"
#include "tlogstore.h"
#include "pushleaf.h"
#include "records.h"
#include "banned.h"

static uint64_t be64(const char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | (uint8_t)p[i];
	return v;
}

int tlogstore_size(struct store *s,
                   struct store_batch *b,
                   const char *origin,
                   uint64_t *out)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	*out = 0;
	records_key_tlog_origin(&k, origin);
	rc = store_get(s, b, CF_THASHES, k.p, k.len, &v);
	if (rc == GD_ENOTFOUND)
		rc = 0;
	else if (rc == 0 && v.len != 8)
		rc = GD_EPROTO;
	else if (rc == 0)
		*out = be64(v.p);
	buf_free(&k);
	buf_free(&v);
	return rc;
}

int tlogstore_read(struct tlog_hash *out,
                   const int64_t *indexes,
                   size_t n,
                   void *payload)
{
	const struct tlogstore_table *t = payload;
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n; i++) {
		records_key_thash(&k, t->origin, indexes[i]);
		rc = store_get(t->s, t->b, CF_THASHES, k.p, k.len, &v);
		if (rc == GD_ENOTFOUND || (rc == 0 && v.len != TLOG_HASH_LEN))
			rc = GD_EPROTO;
		else if (rc == 0)
			memcpy(out[i].b, v.p, TLOG_HASH_LEN);
	}
	buf_free(&k);
	buf_free(&v);
	return rc;
}

int tlogstore_append(struct store *s,
                     struct store_batch *b,
                     const char *origin,
                     uint64_t index,
                     const void *text,
                     size_t len)
{
	struct tlogstore_table t = {s, b, origin};
	struct tlog_hash leaf, h[TLOG_MAX_STORED];
	struct buf k = BUF_INIT;
	uint8_t size[8];
	size_t nh;
	int64_t at;
	int rc;

	if (index >= (uint64_t)INT64_MAX / 2)
		return GD_EINVAL;
	tlog_leaf_hash(&leaf, text, len);
	rc = tlog_stored_hashes(h, &nh, (int64_t)index, &leaf, tlogstore_read,
	                        &t);
	if (rc < 0)
		return rc;
	at = tlog_stored_count((int64_t)index);
	for (size_t i = 0; i < nh; i++) {
		records_key_thash(&k, origin, at + (int64_t)i);
		store_put(b, CF_THASHES, k.p, k.len, h[i].b, TLOG_HASH_LEN);
	}
	for (int i = 0; i < 8; i++)
		size[i] = (uint8_t)((index + 1) >> (56 - 8 * i));
	records_key_tlog_origin(&k, origin);
	store_put(b, CF_THASHES, k.p, k.len, size, sizeof(size));
	buf_free(&k);
	return 0;
}

int tlogstore_root(struct tlog_hash *out,
                   struct store *s,
                   struct store_batch *b,
                   const char *origin,
                   uint64_t n)
{
	struct tlogstore_table t = {s, b, origin};

	if (n >= (uint64_t)INT64_MAX / 2)
		return GD_EINVAL;
	return tlog_tree_hash(out, (int64_t)n, tlogstore_read, &t);
}

const char *tlogstore_check(const Grantd__V1__Op *op)
{
	const Grantd__V1__PushLeaf *l = op->push_leaf;
	struct pushleaf p;
	const char *why = NULL;

	if (!l->origin || strcmp(l->origin, op->origin))
		return "push leaf of another origin";
	if (!l->has_index || l->index >= (uint64_t)INT64_MAX / 2)
		return "push leaf without index";
	if (!l->has_text || !l->text.len || l->text.len > PUSHLEAF_TEXT_MAX)
		return "push leaf without text";
	if (pushleaf_parse(&p, l->text.data, l->text.len) < 0)
		why = "push leaf text does not parse";
	else if (strcmp(p.origin, l->origin) || p.index != l->index)
		why = "push leaf text of another origin or index";
	pushleaf_free(&p);
	return why;
}
