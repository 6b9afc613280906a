/*
 * ops_tlog.c: the merge rule of the transparency log's leaves
 * (RECORDS_LEAF, records.h; ops_merge.c hands each leaf here): a leaf is
 * kept at (origin, index) whatever order it arrives in, and the tree is
 * the leaves held from index 0 without a gap: a leaf at the origin's tree
 * size here has its stored hashes appended in the same batch (tlogstore.h),
 * and so have the leaves held after it, up to the next gap.  So a leaf that
 * arrives before the ones under it (a state transfer still under way, a
 * live operation first) waits for them instead of being lost, and every
 * site ends with the same records and the same tree.  Another text at an
 * index held is kept as a fork.
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "ops_int.h"
#include "ops_tlog.h"
#include "records.h"
#include "tlogstore.h"
#include "banned.h"

/* ---- the merge rule (ops_merge.c: RECORDS_LEAF) ------------------------- */

/* A new record val at key (nothing there before), with its digest and
 * live count. */
static void put_new(struct ops *o,
                    struct store_batch *b,
                    const struct buf *k,
                    const struct buf *val)
{
	ops_digest_toggle(o, CF_TLEAVES, k->p, k->len, val->p, val->len);
	ops_count_record(o, o->counts, CF_TLEAVES, val->p, val->len, 1, true);
	store_put(b, CF_TLEAVES, k->p, k->len, val->p, val->len);
}

/* A leaf not at the origin's tree size here: counted, logged at most once
 * a second (a dishonest origin could send many). */
static void refused(struct ops *o, const Grantd__V1__PushLeaf *l, uint64_t size)
{
	uint64_t now = clock_mono_ms();

	o->tleaf_refused++;
	if (o->tleaf_refused_logged_ms &&
	    now < o->tleaf_refused_logged_ms + 1000)
		return;
	o->tleaf_refused_logged_ms = now ? now : 1;
	log_warn("push leaf refused origin=%s index=%llu: the tree here has "
	         "%llu leaves (an origin adds at its size, never skips) "
	         "refused=%llu",
	         l->origin, (unsigned long long)l->index,
	         (unsigned long long)size,
	         (unsigned long long)o->tleaf_refused);
}

/* Another text at an index held: kept under its leaf hash, as proof. */
static int keep_fork(struct ops *o,
                     struct store_batch *b,
                     const Grantd__V1__PushLeaf *l,
                     const struct buf *val)
{
	struct buf k = BUF_INIT, old = BUF_INIT;
	struct tlog_hash h;
	char hex[2 * TLOG_HASH_LEN + 1];
	int rc;

	tlog_leaf_hash(&h, l->text.data, l->text.len);
	records_key_tleaf_fork(&k, l->origin, l->index, h.b);
	rc = store_get(o->store, b, CF_TLEAVES, k.p, k.len, &old);
	if (rc == GD_ENOTFOUND) {
		rc = 0;
		put_new(o, b, &k, val);
		for (int i = 0; i < TLOG_HASH_LEN; i++)
			snprintf(hex + 2 * i, 3, "%02x", h.b[i]);
		log_warn("push leaf fork origin=%s index=%llu leaf=%s: a "
		         "second, different text for a leaf held; kept beside "
		         "the first, which stays in the tree",
		         l->origin, (unsigned long long)l->index, hex);
	}
	buf_free(&k);
	buf_free(&old);
	return rc;
}

/* Append to origin's tree the leaves held from index size on, up to the
 * first one missing. */
static int advance(struct ops *o, struct store_batch *b, const char *origin,
                   uint64_t size)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	Grantd__V1__PushLeaf *l;
	int rc;

	for (;; size++) {
		records_key_tleaf(&k, origin, size);
		buf_reset(&v);
		rc = store_get(o->store, b, CF_TLEAVES, k.p, k.len, &v);
		if (rc == GD_ENOTFOUND) {
			rc = 0;
			break;
		}
		if (rc < 0)
			break;
		l = grantd__v1__push_leaf__unpack(NULL, v.len,
		                                  (const uint8_t *)v.p);
		if (!l) {
			rc = GD_EPROTO;
			break;
		}
		rc = tlogstore_append(o->store, b, origin, size, l->text.data,
		                      l->text.len);
		grantd__v1__push_leaf__free_unpacked(l, NULL);
		if (rc < 0)
			break;
	}
	buf_free(&k);
	buf_free(&v);
	return rc;
}

int ops_tlog_apply(struct ops *o,
                   struct store_batch *b,
                   const Grantd__V1__PushLeaf *l)
{
	Grantd__V1__PushLeaf copy = *l;
	struct buf k = BUF_INIT, old = BUF_INIT, val = BUF_INIT;
	uint64_t size;
	int rc;

	/* fields of a newer protocol would make the bytes, and so the
	 * digest, depend on which copy arrived first */
	copy.base.n_unknown_fields = 0;
	copy.base.unknown_fields = NULL;
	records_pack(&val, &copy.base);
	if ((rc = tlogstore_size(o->store, b, l->origin, &size)) < 0)
		goto done;
	records_key_tleaf(&k, l->origin, l->index);
	if (l->index >= size) {
		rc = store_get(o->store, b, CF_TLEAVES, k.p, k.len, &old);
		if (rc == GD_ENOTFOUND) {
			put_new(o, b, &k, &val);
			rc = advance(o, b, l->origin, size);
		} else if (rc == 0 && (old.len != val.len ||
		                       memcmp(old.p, val.p, val.len))) {
			rc = keep_fork(o, b, l, &val);
		}
	} else if ((rc = store_get(o->store, b, CF_TLEAVES, k.p, k.len,
	                           &old)) == GD_ENOTFOUND) {
		/* the size says held: the table and the leaves parted */
		log_error("push leaf origin=%s index=%llu: below the tree size "
		          "%llu but not held (run grantctl log verify)",
		          l->origin, (unsigned long long)l->index,
		          (unsigned long long)size);
		refused(o, l, size);
		rc = 0;
	} else if (rc == 0 &&
	           (old.len != val.len || memcmp(old.p, val.p, val.len))) {
		rc = keep_fork(o, b, l, &val);
	}
done:
	buf_free(&k);
	buf_free(&old);
	buf_free(&val);
	return rc;
}

uint64_t ops_tlog_refused(const struct ops *o)
{
	return o->tleaf_refused;
}
