/*
 * glog.c: grant-log's checks (glog.h): keys, a checkpoint's signature and
 * cosignatures, consistency between two checkpoints, the tree and tiles
 * recomputed from the entries, the entry fields it reads.
 *
 * Nothing here trusts the server: a checkpoint counts only with its
 * origin's signature and a quorum of cosignatures; hashes come out of
 * tiles only through tlog_tile_read_hashes, which checks them against a
 * verified root; the recomputed tree is built from the entries alone, and
 * the tiles the server serves are compared with it, not used.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "glog.h"
#include "xalloc.h"
#include "banned.h"

#define GLOG_ORIGIN_MARK "/grantd/"

/* ---- keys ---------------------------------------------------------------- */

int glog_keys_add(struct glog_keys *ks, const char *s, size_t len, bool witness)
{
	struct note_vkey k, given;
	int rc = note_vkey_parse(&given, s, len);

	if (rc != 0)
		return GD_EINVAL;
	k = given;
	if (witness && given.alg == NOTE_ALG_ED25519)
		rc = note_vkey_init(&k, given.name, given.name_len,
		                    NOTE_ALG_COSIG, given.pub);
	if (rc != 0 || k.alg != (witness ? NOTE_ALG_COSIG : NOTE_ALG_ED25519))
		return GD_EINVAL;
	for (size_t i = 0; i < ks->n; i++)
		if (ks->witness[i] == witness && ks->key[i].id == k.id &&
		    !strcmp(ks->key[i].name, k.name) &&
		    !memcmp(ks->key[i].pub, k.pub, NOTE_PUB_LEN))
			return 0;
	if (ks->n == GLOG_MAX_KEYS)
		return GD_ETOOBIG;
	ks->key[ks->n] = k;
	ks->witness[ks->n++] = witness;
	return 0;
}

/* The line [p, end) without its trailing spaces and "\r". */
static size_t line_trim(const char *p, size_t n)
{
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	return n;
}

int glog_keys_file(struct glog_keys *ks,
                   const char *text,
                   size_t len,
                   size_t *line)
{
	const char *p = text, *end = text + len;

	*line = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		const char *q = p;
		bool witness;
		int rc;

		++*line;
		p = nl ? nl + 1 : end;
		n = line_trim(q, n);
		while (n && (*q == ' ' || *q == '\t'))
			q++, n--;
		if (!n || *q == '#')
			continue;
		if (n > 4 && !memcmp(q, "key ", 4))
			witness = false, q += 4, n -= 4;
		else if (n > 8 && !memcmp(q, "witness ", 8))
			witness = true, q += 8, n -= 8;
		else
			return GD_EINVAL;
		while (n && *q == ' ')
			q++, n--;
		if ((rc = glog_keys_add(ks, q, n, witness)) != 0)
			return rc;
	}
	return 0;
}

/* ---- checkpoints ------------------------------------------------------- */

static int origin_of_site(const struct note_checkpoint *c, const char *site)
{
	size_t sl = strlen(site), ml = strlen(GLOG_ORIGIN_MARK);

	return c->origin_len > sl + ml &&
	       !memcmp(c->origin + c->origin_len - sl, site, sl) &&
	       !memcmp(c->origin + c->origin_len - sl - ml, GLOG_ORIGIN_MARK,
	               ml);
}

static bool have_origin_key(const struct glog_keys *ks, const char *origin)
{
	for (size_t i = 0; i < ks->n; i++)
		if (!ks->witness[i] && !strcmp(ks->key[i].name, origin))
			return true;
	return false;
}

/* The witnesses whose cosignatures verified, one per name, and whether
 * the origin's key signed. */
static bool
tally(struct glog_ckpt *out, const struct note *nt, const struct glog_keys *ks)
{
	const char *origin = out->c.origin;
	bool signed_ = false;

	out->nwitnesses = 0;
	for (size_t i = 0; i < nt->nsigs; i++) {
		const struct note_sig *s = &nt->sigs[i];
		const struct note_vkey *k;
		bool seen = false;

		if (s->key < 0)
			continue;
		k = &ks->key[s->key];
		if (!ks->witness[s->key]) {
			signed_ |= !strcmp(k->name, origin);
			continue;
		}
		if (!strcmp(k->name, origin))
			continue; /* the origin cosigning itself counts not */
		for (size_t j = 0; j < out->nwitnesses; j++)
			seen |= !strcmp(out->witnesses[j], k->name);
		if (!seen && out->nwitnesses < GLOG_MAX_KEYS)
			memcpy(out->witnesses[out->nwitnesses++], k->name,
			       k->name_len + 1);
	}
	return signed_;
}

int glog_ckpt_open(struct glog_ckpt *out,
                   const char *msg,
                   size_t len,
                   const struct glog_keys *ks,
                   const char *site,
                   size_t quorum,
                   struct buf *why)
{
	struct note *nt = xcalloc(1, sizeof(*nt));
	int rc = note_open(nt, msg, len, ks->key, ks->n);

	memset(out, 0, sizeof(*out));
	if (rc == GD_ECRYPTO) {
		buf_printf(why, "a signature by %.*s does not verify",
		           (int)nt->sigs[nt->bad].name_len,
		           nt->sigs[nt->bad].name);
		goto done;
	}
	if (rc != 0 && rc != GD_ENOTFOUND) {
		buf_printf(why, "not a signed note (%s)", gd_strerror(rc));
		rc = GD_EINVAL;
		goto done;
	}
	if (note_checkpoint_parse(&out->c, nt->text, nt->text_len) != 0) {
		buf_puts(why, "not a checkpoint (origin, size, root)");
		rc = GD_EINVAL;
		goto done;
	}
	if (!origin_of_site(&out->c, site)) {
		buf_printf(why, "origin '%s' is not HOST/grantd/%s",
		           out->c.origin, site);
		rc = GD_EINVAL;
		goto done;
	}
	if (!have_origin_key(ks, out->c.origin)) {
		buf_printf(why, "no origin key named '%s' given",
		           out->c.origin);
		rc = GD_ENOTFOUND;
		goto done;
	}
	rc = GD_ECRYPTO;
	if (!tally(out, nt, ks)) {
		buf_printf(why, "checkpoint of '%s' not signed by its key",
		           out->c.origin);
		goto done;
	}
	if (out->nwitnesses < quorum) {
		buf_printf(why,
		           "checkpoint of '%s' cosigned by %zu witness%s, "
		           "quorum %zu",
		           out->c.origin, out->nwitnesses,
		           out->nwitnesses == 1 ? "" : "es", quorum);
		goto done;
	}
	rc = 0;
done:
	free(nt);
	return rc;
}

int glog_ckpt_parse_kept(struct note_checkpoint *out,
                         const char *msg,
                         size_t len)
{
	struct note *nt = xcalloc(1, sizeof(*nt));
	int rc = note_open(nt, msg, len, NULL, 0);

	if (rc == 0 || rc == GD_ENOTFOUND)
		rc = note_checkpoint_parse(out, nt->text, nt->text_len);
	else
		rc = GD_EINVAL;
	free(nt);
	return rc;
}

/* 0 when the tree (n, nroot) is a prefix of (t, troot), read out of the
 * latter's tiles; GD_ECRYPTO from tlog_check_tree: it is not (a fork);
 * GD_EAGAIN for GD_ECRYPTO out of the tiles themselves. */
static int prefix(int64_t t,
                  const struct tlog_hash *troot,
                  int64_t n,
                  const struct tlog_hash *nroot,
                  tlog_tile_fetch_fn *fetch,
                  void *payload)
{
	struct tlog_tile_reader r = {t, *troot, fetch, payload};
	struct tlog_hash proof[TLOG_MAX_PROOF];
	size_t np;
	int rc = tlog_prove_tree(proof, &np, t, n, tlog_tile_read_hashes, &r);

	if (rc == GD_ECRYPTO)
		return GD_EAGAIN;
	if (rc != 0)
		return rc;
	return tlog_check_tree(proof, np, t, troot, n, nroot);
}

int glog_relate(enum glog_rel *out,
                int64_t old_size,
                const struct tlog_hash *old_root,
                int64_t new_size,
                const struct tlog_hash *new_root,
                tlog_tile_fetch_fn *fetch,
                void *payload)
{
	int rc = 0;

	if (old_size == new_size) {
		*out = tlog_hash_eq(old_root, new_root) ? GLOG_SAME : GLOG_FORK;
		return 0;
	}
	/* the empty tree is a prefix of every tree */
	if (old_size == 0 || new_size == 0) {
		*out = old_size == 0 ? GLOG_NEWER : GLOG_OLDER;
		return 0;
	}
	if (new_size > old_size)
		rc = prefix(new_size, new_root, old_size, old_root, fetch,
		            payload);
	else
		rc = prefix(old_size, old_root, new_size, new_root, fetch,
		            payload);
	if (rc == GD_ECRYPTO) {
		*out = GLOG_FORK;
		return 0;
	}
	if (rc == GD_EAGAIN)
		return GD_ECRYPTO;
	if (rc != 0)
		return rc;
	*out = new_size > old_size ? GLOG_NEWER : GLOG_OLDER;
	return 0;
}

/* ---- the tree, recomputed ----------------------------------------------- */

void glog_tree_init(struct glog_tree *t)
{
	memset(t, 0, sizeof(*t));
}

/* The root of the full subtree of 2^k hashes h[0..2^k) (overwritten). */
static void subtree_root(struct tlog_hash *out, struct tlog_hash *h, size_t n)
{
	for (; n > 1; n /= 2)
		for (size_t i = 0; i < n / 2; i++)
			tlog_node_hash(&h[i], &h[2 * i], &h[2 * i + 1]);
	*out = h[0];
}

/* Adds hash h to level lv's tile buffer; a full tile goes to fn and its
 * root one level up. */
static int tile_push(struct glog_tree *t,
                     int lv,
                     const struct tlog_hash *h,
                     int64_t tile_n,
                     glog_tile_fn *fn,
                     void *payload)
{
	struct tlog_hash root;
	struct tlog_tile tile = {lv, tile_n, TLOG_TILE_WIDTH};
	int rc;

	GD_ASSERT(lv < GLOG_TILE_LEVELS);
	memcpy(t->tile[lv] + (size_t)t->count[lv] * TLOG_HASH_LEN, h->b,
	       TLOG_HASH_LEN);
	if (++t->count[lv] < TLOG_TILE_WIDTH)
		return 0;
	if (fn && (rc = fn(&tile, t->tile[lv], payload)) != 0)
		return rc;
	/* fn has seen the tile: its buffer is scratch now */
	subtree_root(&root, (struct tlog_hash *)t->tile[lv], TLOG_TILE_WIDTH);
	t->count[lv] = 0;
	return tile_push(t, lv + 1, &root, tile_n >> TLOG_TILE_HEIGHT, fn,
	                 payload);
}

int glog_tree_add(struct glog_tree *t,
                  const struct tlog_hash *leaf,
                  glog_tile_fn *fn,
                  void *payload)
{
	int64_t i = t->n;
	int rc;

	GD_ASSERT(t->depth < GD_ARRAY_SIZE(t->stack));
	t->stack[t->depth++] = *leaf;
	for (; i & 1; i >>= 1, t->depth--)
		tlog_node_hash(&t->stack[t->depth - 2], &t->stack[t->depth - 2],
		               &t->stack[t->depth - 1]);
	rc = tile_push(t, 0, leaf, t->n >> TLOG_TILE_HEIGHT, fn, payload);
	t->n++;
	return rc;
}

int glog_tree_root(struct glog_tree *t,
                   struct tlog_hash *root,
                   glog_tile_fn *fn,
                   void *payload)
{
	int rc;

	for (int lv = 0; lv < GLOG_TILE_LEVELS && fn; lv++) {
		int64_t above = t->n >> (TLOG_TILE_HEIGHT * lv);
		struct tlog_tile tile = {lv, above >> TLOG_TILE_HEIGHT,
		                         t->count[lv]};

		if (t->count[lv] == 0)
			continue;
		if ((rc = fn(&tile, t->tile[lv], payload)) != 0)
			return rc;
	}
	if (t->depth == 0) {
		tlog_empty_hash(root);
		return 0;
	}
	*root = t->stack[t->depth - 1];
	for (size_t k = t->depth - 1; k-- > 0;)
		tlog_node_hash(root, &t->stack[k], root);
	return 0;
}

/* ---- entries ------------------------------------------------------------- */

const struct pushleaf_ref *
glog_entry_ref(const struct pushleaf *e, const char *repo, const char *ref)
{
	const struct pushleaf_ref *found = NULL;

	if (strcmp(e->repo, repo))
		return NULL;
	for (size_t i = 0; i < e->nrefs; i++)
		if (!strcmp(e->refs[i].ref, ref))
			found = &e->refs[i];
	return found;
}

/* ---- state --------------------------------------------------------------- */

void glog_state_name(struct buf *out, const char *origin)
{
	for (const char *p = origin; *p; p++) {
		unsigned char c = (unsigned char)*p;
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		             (c >= '0' && c <= '9') || c == '_' || c == '-' ||
		             (c == '.' && p != origin);

		if (plain)
			buf_add(out, p, 1);
		else
			buf_printf(out, "%%%02X", c);
	}
}
