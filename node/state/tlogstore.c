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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "pushleaf.h"
#include "records.h"
#include "tlogstore.h"
#include "xalloc.h"
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

/* ---- the check of `grantctl log verify` --------------------------------- */

/* An RFC 6962 root computed leaf by leaf, in O(log n) space: the roots
 * of the complete subtrees so far, largest first (each level at most
 * once). */
struct range {
	struct tlog_hash h[64];
	int level[64];
	int n;
};

static void range_add(struct range *r, const struct tlog_hash *leaf)
{
	r->h[r->n] = *leaf;
	r->level[r->n++] = 0;
	while (r->n >= 2 && r->level[r->n - 1] == r->level[r->n - 2]) {
		tlog_node_hash(&r->h[r->n - 2], &r->h[r->n - 2],
		               &r->h[r->n - 1]);
		r->level[r->n - 2]++;
		r->n--;
	}
}

static void range_root(struct tlog_hash *out, const struct range *r)
{
	if (!r->n) {
		tlog_empty_hash(out);
		return;
	}
	*out = r->h[r->n - 1];
	for (int i = r->n - 2; i >= 0; i--)
		tlog_node_hash(out, &r->h[i], out);
}

static void brk(struct tlogstore_verify *v,
                enum tlogstore_break b,
                const char *origin,
                uint64_t at)
{
	if (v->brk != TLOGSTORE_OK)
		return;
	v->brk = b;
	snprintf(v->brk_site, sizeof(v->brk_site), "%s", origin);
	v->brk_at = at;
}

/* The walk's state for the origin being walked. */
struct walk {
	struct tlogstore_verify *v;
	struct store *s;
	struct range r;
	struct tlogstore_tree *t; /* NULL: none yet */
};

/* Done with w->t: its root, and the stored table held against it. */
static int tree_end(struct walk *w)
{
	struct tlogstore_tree *t = w->t;
	struct tlog_hash stored;
	uint64_t size;
	int rc;

	if (!t)
		return 0;
	range_root(&t->root, &w->r);
	if ((rc = tlogstore_size(w->s, NULL, t->origin, &size)) < 0)
		return rc;
	if (size != t->size) {
		brk(w->v, TLOGSTORE_WRONG_SIZE, t->origin, size);
		return 0;
	}
	rc = tlogstore_root(&stored, w->s, NULL, t->origin, size);
	if (rc == GD_EPROTO || (rc == 0 && !tlog_hash_eq(&stored, &t->root)))
		brk(w->v, TLOGSTORE_WRONG_ROOT, t->origin, size);
	return rc == GD_EPROTO ? 0 : rc;
}

/* One leaf (not a fork) of t at index: in place, whole, and its stored
 * hash its text's. */
static int leaf_one(struct walk *w, uint64_t index, const struct buf *val)
{
	struct tlogstore_tree *t = w->t;
	Grantd__V1__PushLeaf *l = grantd__v1__push_leaf__unpack(
	        NULL, val->len, (const uint8_t *)val->p);
	struct tlogstore_table tab = {w->s, NULL, t->origin};
	struct tlog_hash h, sh;
	struct pushleaf p;
	int64_t si;
	int rc = 0;

	if (index != t->size)
		brk(w->v, TLOGSTORE_GAP, t->origin, t->size);
	if (!l || !l->has_text) {
		brk(w->v, TLOGSTORE_UNDECODABLE, t->origin, index);
		goto done;
	}
	if (!l->origin || strcmp(l->origin, t->origin) || l->index != index)
		brk(w->v, TLOGSTORE_MISPLACED, t->origin, index);
	if (pushleaf_parse(&p, l->text.data, l->text.len) < 0)
		brk(w->v, TLOGSTORE_BAD_TEXT, t->origin, index);
	else if (strcmp(p.origin, t->origin) || p.index != index)
		brk(w->v, TLOGSTORE_MISPLACED, t->origin, index);
	pushleaf_free(&p);
	tlog_leaf_hash(&h, l->text.data, l->text.len);
	range_add(&w->r, &h);
	si = tlog_stored_index(0, (int64_t)index);
	rc = tlogstore_read(&sh, &si, 1, &tab);
	if (rc == GD_EPROTO || (rc == 0 && !tlog_hash_eq(&h, &sh)))
		brk(w->v, TLOGSTORE_WRONG_LEAF, t->origin, index);
	if (rc == GD_EPROTO)
		rc = 0;
done:
	t->size = index + 1;
	w->v->leaves++;
	if (l)
		grantd__v1__push_leaf__free_unpacked(l, NULL);
	return rc;
}

/* Key by key: a new origin closes the last one's tree. */
static int
walk_key(struct walk *w, const char *key, size_t klen, const struct buf *val)
{
	struct tlogstore_verify *v = w->v;
	struct records_span o;
	const uint8_t *fork;
	uint64_t index;
	int rc;

	if (records_tleaf_parse(key, klen, &o, &index, &fork) < 0 ||
	    o.len >= sizeof(w->t->origin)) {
		brk(v, TLOGSTORE_UNDECODABLE, "?", 0);
		return 0;
	}
	if (!w->t || strlen(w->t->origin) != o.len ||
	    memcmp(w->t->origin, o.p, o.len)) {
		/* w->t points into v->trees, which the growth may move: it
		 * is done with first, then pointed at the new one */
		if ((rc = tree_end(w)) < 0)
			return rc;
		if (v->ntrees == v->cap)
			GD_GROW(v->trees, v->cap, v->ntrees + 1);
		w->t = &v->trees[v->ntrees++];
		memset(w->t, 0, sizeof(*w->t));
		memcpy(w->t->origin, o.p, o.len);
		memset(&w->r, 0, sizeof(w->r));
	}
	if (fork) {
		w->t->forks++;
		v->forks++;
		return 0;
	}
	return leaf_one(w, index, val);
}

int tlogstore_verify(struct tlogstore_verify *v, struct store *s)
{
	struct walk w = {.v = v, .s = s};
	struct store_iter *it = NULL;
	struct buf val = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	memset(v, 0, sizeof(*v));
	if ((rc = store_iter_new(&it, s, NULL, CF_TLEAVES, "", 0)) < 0)
		return rc;
	while ((rc = store_iter_next(it, &key, &klen, &val)) > 0) {
		if ((rc = walk_key(&w, key, klen, &val)) < 0)
			break;
	}
	if (rc == 0)
		rc = tree_end(&w);
	store_iter_free(&it);
	buf_free(&val);
	return rc < 0 ? rc : 0;
}

void tlogstore_verify_free(struct tlogstore_verify *v)
{
	free(v->trees);
	v->trees = NULL;
	v->ntrees = v->cap = 0;
}

const char *tlogstore_break_text(enum tlogstore_break b)
{
	switch (b) {
	case TLOGSTORE_OK:
		return "";
	case TLOGSTORE_UNDECODABLE:
		return "a leaf does not decode";
	case TLOGSTORE_MISPLACED:
		return "a leaf names another origin or index than its place";
	case TLOGSTORE_GAP:
		return "leaf missing (a later one is held)";
	case TLOGSTORE_BAD_TEXT:
		return "a leaf's text is not a push leaf";
	case TLOGSTORE_WRONG_SIZE:
		return "the stored tree size is not the leaves held";
	case TLOGSTORE_WRONG_LEAF:
		return "the stored hash of the leaf is not its text's";
	case TLOGSTORE_WRONG_ROOT:
		return "the stored hashes' root differs from the root of the "
		       "leaves' texts";
	}
	return "?";
}
