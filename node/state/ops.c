/*
 * ops.c: stamping local operations and THE apply function.
 *
 * Merge rules (SPEC 5): users, enrollments, grants, unlocks and
 * repositories are last-writer-wins registers ordered by (hlc, origin);
 * token-use marks merge by max (next) and union (scratch codes spent);
 * failures merge by union of attempt stamps per (user, site).  Each rule is
 * commutative, associative and idempotent, so sites that apply the same
 * operations in any order end with the same records, and so with the same
 * digest.
 */
#include <assert.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "crashpoint.h"
#include "err.h"
#include "log.h"
#include "addr.h"
#include "hookline.h"
#include "names.h"
#include "ops.h"
#include "pushlog.h"
#include "records.h"
#include "banned.h"

#define SET_STAMP(op, e, s, h)                                                 \
	((op).epoch = (e), (op).has_epoch = 1, (op).seq = (s),                 \
	 (op).has_seq = 1, (op).hlc = (h), (op).has_hlc = 1)

#define META_EPOCH "epoch"
#define META_SEQ "seq"
#define META_HLC "hlc"
#define META_DIGEST "digest"
/* "push" \0 repo \0 request id -> the op's hlc (8, BE): grant-hook's
 * requests recorded here (local, like the rest of CF_META) */
#define META_PUSH "push"
/* present once CF_KEYFP indexes every user's keys (a store made before
 * the index has none: it is built at open) */
#define META_KEYFP "keyfp"
/* "plhead" \0 origin -> n (8, BE) and hash (32): the head of origin's
 * push log chain here (ops_pushlog_head) */
#define META_PLHEAD "plhead"
/* -> how many forks (records_key_pushlog_fork) CF_PUSHLOG holds (8, BE) */
#define META_PLFORKS "plforks"

/* key's value in b (NULL: committed), 0 when there is none */
static int meta_u64_in(struct store *s, struct store_batch *b,
		       const char *key, uint64_t *out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, b, CF_META, key, strlen(key), &v);

	*out = rc == 0 && v.len == 8 ? store_get_be64(v.p) : 0;
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

static int meta_u64(struct store *s, const char *key, uint64_t *out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, NULL, CF_META, key, strlen(key), &v);
	if (rc == 0 && v.len == 8)
		*out = store_get_be64(v.p);
	else if (rc == 0)
		rc = GD_EIO;
	buf_free(&v);
	return rc;
}

static void meta_put_u64(struct store_batch *b, const char *key, uint64_t val)
{
	uint8_t be[8];
	store_be64(be, val);
	store_put(b, CF_META, key, strlen(key), be, sizeof(be));
}

/* ---- live counts (status) ---- */

static void heap_push(struct ops_heap *h, int64_t v)
{
	size_t i;

	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 64;
		h->v = realloc(h->v, h->cap * sizeof(*h->v));
		if (!h->v)
			abort();
	}
	for (i = h->n++; i > 0 && h->v[(i - 1) / 2] > v; i = (i - 1) / 2)
		h->v[i] = h->v[(i - 1) / 2];
	h->v[i] = v;
}

static void heap_pop(struct ops_heap *h)
{
	int64_t last = h->v[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1] < h->v[c])
			c++;
		if (h->v[c] >= last)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Take the gone limits out of until (a sorted array is a heap), so that
 * limits replaced long before they pass do not pile up. */
static void count_compact(struct ops_count *c)
{
	size_t i = 0, j = 0, w = 0;

	qsort(c->until.v, c->until.n, sizeof(int64_t), cmp_i64);
	qsort(c->gone.v, c->gone.n, sizeof(int64_t), cmp_i64);
	for (; i < c->until.n; i++) {
		while (j < c->gone.n && c->gone.v[j] < c->until.v[i])
			j++; /* cannot happen: gone is part of until */
		if (j < c->gone.n && c->gone.v[j] == c->until.v[i])
			j++;
		else
			c->until.v[w++] = c->until.v[i];
	}
	c->until.n = w;
	c->gone.n = 0;
}

/* One live record more (sign 1) or less (-1), live until `until`. */
static void count_move(struct ops_count *c, int sign, int64_t until)
{
	c->live += sign;
	if (until == INT64_MAX)
		return;
	if (until <= c->horizon) {
		c->expired += sign;
		return;
	}
	heap_push(sign > 0 ? &c->until : &c->gone, until);
	if (c->gone.n > 1024 && c->gone.n > c->until.n / 2)
		count_compact(c);
}

static int64_t count_at(struct ops_count *c, int64_t now)
{
	if (now > c->horizon) {
		c->horizon = now;
		while (c->until.n && c->until.v[0] <= now) {
			if (c->gone.n && c->gone.v[0] == c->until.v[0])
				heap_pop(&c->gone);
			else
				c->expired++;
			heap_pop(&c->until);
		}
	}
	return c->live - c->expired;
}

static void count_free(struct ops_count *c)
{
	free(c->until.v);
	free(c->gone.v);
	memset(c, 0, sizeof(*c));
}

/* Count the record (val, vlen) of cf in (sign 1) or out (-1), when the
 * family is counted and the record is live; undo: remember it for
 * ops_rollback and ops_reload. */
static void count_record(struct ops *o, struct ops_count *counts,
			 enum store_cf cf, const void *val, size_t vlen,
			 int sign, bool undo)
{
	const struct records_kind *k = records_kind(cf);
	int64_t until;

	if (!k->live || !vlen || !k->live(val, vlen, &until))
		return;
	count_move(&counts[cf], sign, until);
	if (!undo)
		return;
	if (o->nundo == o->capundo) {
		o->capundo = o->capundo ? 2 * o->capundo : 64;
		o->undo = realloc(o->undo, o->capundo * sizeof(*o->undo));
		if (!o->undo)
			abort();
	}
	o->undo[o->nundo++] =
		(struct ops_count_undo){ .cf = cf, .sign = sign, .until = until };
}

/* Undo the count changes made since the undo log had len entries. */
static void count_undo(struct ops *o, size_t len)
{
	while (o->nundo > len) {
		const struct ops_count_undo *u = &o->undo[--o->nundo];
		count_move(&o->counts[u->cf], -u->sign, u->until);
	}
}

static int64_t count_of(struct ops_count *c, enum store_cf cf, int64_t now)
{
	const struct records_kind *k = records_kind(cf);
	return k && k->live ? count_at(c, now) : 0;
}

int64_t ops_count(struct ops *o, enum store_cf cf, int64_t now)
{
	return count_of(&o->counts[cf], cf, now);
}

/* ---- SSH keys by fingerprint (CF_KEYFP, derived from CF_USERS) ---- */

/* Index (put) or forget the keys of the user record rec. */
static void keyfp_index(struct store_batch *b, const void *rec, size_t len,
			bool put)
{
	Grantd__V1__User *u;
	struct buf k = BUF_INIT;
	char fp[RECORDS_FP_MAX];

	if (!len || faultpoint("no-keyfp") ||
	    !(u = grantd__v1__user__unpack(NULL, len, rec)))
		return;
	for (size_t i = 0; u->name && (!put || !u->deleted) && i < u->n_keys;
	     i++) {
		if (records_ssh_fingerprint(fp, u->keys[i]) < 0)
			continue;
		records_key_keyfp(&k, fp, u->name);
		if (put)
			store_put(b, CF_KEYFP, k.p, k.len, u->keys[i],
				  strlen(u->keys[i]));
		else
			store_del(b, CF_KEYFP, k.p, k.len);
	}
	grantd__v1__user__free_unpacked(u, NULL);
	buf_free(&k);
}

static int vv_load(struct ops *o);

int ops_reload(struct ops *o)
{
	struct buf v = BUF_INIT;
	uint64_t h = 0;
	int rc;

	o->seq = 0;
	count_undo(o, 0);
	o->vv_saves.len = o->vv_top = 0;
	if ((rc = vv_load(o)) < 0)
		goto done;
	if ((rc = meta_u64(o->store, META_EPOCH, &o->epoch)) < 0)
		goto done;
	rc = meta_u64(o->store, META_SEQ, &o->seq);
	if (rc < 0 && rc != GD_ENOTFOUND)
		goto done;
	rc = meta_u64(o->store, META_HLC, &h);
	if (rc < 0 && rc != GD_ENOTFOUND)
		goto done;
	hlc_observe(&o->hlc, h);
	memset(o->digest, 0, sizeof(o->digest));
	rc = store_get(o->store, NULL, CF_META, META_DIGEST,
		       strlen(META_DIGEST), &v);
	if (rc == 0 && v.len == DIGEST_LEN)
		memcpy(o->digest, v.p, DIGEST_LEN);
	rc = rc == GD_ENOTFOUND ? 0 : rc;
	memcpy(o->fam_digest, o->fam_committed, sizeof(o->fam_digest));
done:
	buf_free(&v);
	return rc;
}

/* The digest of every replicated family, from the committed records;
 * records and counts (the live records, ops_count) may be NULL. */
static int digest_scan(struct ops *o, uint8_t fam[CF__COUNT][DIGEST_LEN],
		       uint64_t records[CF__COUNT], struct ops_count *counts)
{
	struct buf v = BUF_INIT;
	int rc = 0;

	memset(fam, 0, CF__COUNT * DIGEST_LEN);
	for (int cf = 0; rc == 0 && cf < CF__COUNT; cf++) {
		struct store_iter *it;
		const char *key;
		size_t klen;
		if (!records_replicated(cf))
			continue;
		store_iter_new(&it, o->store, NULL, cf, "", 0);
		while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
			digest_toggle(fam[cf], cf, key, klen, v.p, v.len);
			if (records)
				records[cf]++;
			if (counts)
				count_record(o, counts, cf, v.p, v.len, 1,
					     false);
		}
		store_iter_free(&it);
	}
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	return rc;
}

static void digest_total(uint8_t d[DIGEST_LEN],
			 uint8_t fam[CF__COUNT][DIGEST_LEN])
{
	memset(d, 0, DIGEST_LEN);
	for (int cf = 0; cf < CF__COUNT; cf++)
		digest_xor(d, fam[cf]);
}

/* At open the digest is made again from the records, which are what every
 * decision reads: a stored digest that differs (a bug, or a store written
 * by an older grantd that could split them) is reported and replaced, so
 * no split outlives a restart. */
static int digest_open(struct ops *o, struct store_batch *b)
{
	uint8_t d[DIGEST_LEN];
	int rc = digest_scan(o, o->fam_digest, NULL, o->counts);

	if (rc < 0)
		return rc;
	digest_total(d, o->fam_digest);
	if (memcmp(d, o->digest, DIGEST_LEN)) {
		static const uint8_t zero[DIGEST_LEN];
		char had[2 * DIGEST_LEN + 1], want[2 * DIGEST_LEN + 1];
		digest_hex(had, o->digest);
		digest_hex(want, d);
		if (memcmp(o->digest, zero, DIGEST_LEN))
			log_error("state digest did not match the records "
				  "stored=%s records=%s: the records win",
				  had, want);
		memcpy(o->digest, d, DIGEST_LEN);
	}
	memcpy(o->fam_committed, o->fam_digest, sizeof(o->fam_committed));
	store_put(b, CF_META, META_DIGEST, strlen(META_DIGEST), o->digest,
		  DIGEST_LEN);
	return 0;
}

/* A store from before the index, for its test (crashpoint.h): no index,
 * no mark. */
static int keyfp_forget(struct ops *o, struct store_batch *b)
{
	struct buf v = BUF_INIT;
	struct store_iter *it;
	const char *key;
	size_t klen;
	int rc;

	store_del(b, CF_META, META_KEYFP, strlen(META_KEYFP));
	store_iter_new(&it, o->store, NULL, CF_KEYFP, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0)
		store_del(b, CF_KEYFP, key, klen);
	store_iter_free(&it);
	buf_free(&v);
	return rc;
}

/* Index every user's keys by fingerprint, once: for a store made before
 * the index (then kept by replace_record, in each user record's batch). */
static int keyfp_open(struct ops *o, struct store_batch *b)
{
	struct buf v = BUF_INIT;
	struct store_iter *it;
	const char *key;
	size_t klen, n = 0;
	int rc;

	if (faultpoint("no-keyfp"))
		return keyfp_forget(o, b);
	rc = store_get(o->store, NULL, CF_META, META_KEYFP, strlen(META_KEYFP),
		       &v);
	if (rc != GD_ENOTFOUND) {
		buf_free(&v);
		return rc;
	}
	store_iter_new(&it, o->store, NULL, CF_USERS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		keyfp_index(b, v.p, v.len, true);
		n++;
	}
	store_iter_free(&it);
	buf_free(&v);
	if (rc < 0)
		return rc;
	store_put(b, CF_META, META_KEYFP, strlen(META_KEYFP), "1", 1);
	if (n)
		log_info("ssh keys indexed by fingerprint users=%zu", n);
	return 0;
}

/* The test hook pushlog-drop-tail (crashpoint.h): the newest entry of
 * every origin's chain removed, and from the digest, its head left, as a
 * site that drops its newest entries would (`grantctl log verify` names
 * it); committed before the digest is checked against the records. */
static void toggle(struct ops *o, enum store_cf cf, const void *key,
		   size_t klen, const void *val, size_t vlen);

static int pushlog_drop_tail(struct ops *o)
{
	struct ops_pushlog_head *h = NULL;
	struct store_batch *b;
	struct buf k = BUF_INIT, v = BUF_INIT;
	int n = ops_pushlog_heads(&h, o->store), rc;

	if (n < 0)
		return n;
	store_batch_new(&b, o->store);
	for (int i = 0; i < n; i++) {
		records_key_pushlog(&k, h[i].origin, h[i].n);
		if (store_get(o->store, NULL, CF_PUSHLOG, k.p, k.len, &v) == 0)
			toggle(o, CF_PUSHLOG, k.p, k.len, v.p, v.len);
		store_del(b, CF_PUSHLOG, k.p, k.len);
		log_warn("test fault pushlog-drop-tail: push log entry removed "
			 "origin=%s n=%llu", h[i].origin,
			 (unsigned long long)h[i].n);
	}
	store_put(b, CF_META, META_DIGEST, strlen(META_DIGEST), o->digest,
		  DIGEST_LEN);
	rc = store_commit(b, true);
	store_batch_free(&b);
	free(h);
	buf_free(&k);
	buf_free(&v);
	return rc;
}

int ops_open(struct ops *o, struct store *s, const struct config *cfg,
	     bool created)
{
	struct store_batch *b;
	uint64_t epoch;
	int rc;

	memset(o, 0, sizeof(*o));
	o->store = s;
	o->cfg = cfg;
	snprintf(o->site, sizeof(o->site), "%s", cfg->site);
	if ((rc = ops_reload(o)) < 0 && rc != GD_ENOTFOUND)
		return rc;
	/* A new epoch at every start: a store restored from a backup (or
	 * one that lost its tail) can then never hand out a sequence number
	 * that peers already hold for different operations. */
	do
		randombytes_buf(&epoch, sizeof(epoch));
	while (epoch == 0);
	if (faultpoint("pushlog-drop-tail") && (rc = pushlog_drop_tail(o)) < 0)
		return rc;
	store_batch_new(&b, s);
	meta_put_u64(b, META_EPOCH, epoch);
	meta_put_u64(b, META_SEQ, 0);
	if ((rc = keyfp_open(o, b)) == 0 && (rc = digest_open(o, b)) == 0)
		rc = store_commit(b, true);
	store_batch_free(&b);
	if (rc < 0)
		return rc;
	o->epoch = epoch;
	o->seq = 0;
	log_info("%s store site=%s epoch=%016llx", created ? "new" : "opened",
		 o->site, (unsigned long long)epoch);
	return 0;
}

void ops_close(struct ops *o)
{
	ops_outbox_clear(o);
	buf_free(&o->outbox);
	buf_free(&o->refs_touched);
	buf_free(&o->repos_touched);
	free(o->vv);
	o->vv = NULL;
	o->nvv = o->capvv = 0;
	buf_free(&o->vv_saves);
	for (int cf = 0; cf < CF__COUNT; cf++)
		count_free(&o->counts[cf]);
	free(o->undo);
	o->undo = NULL;
	o->nundo = o->capundo = 0;
}

uint64_t ops_stamp(struct ops *o)
{
	return hlc_now(&o->hlc);
}

static struct ops_vv *vv_find(struct ops *o, const char *origin,
			      uint64_t epoch, bool add)
{
	for (size_t i = 0; i < o->nvv; i++)
		if (o->vv[i].epoch == epoch && !strcmp(o->vv[i].origin, origin))
			return &o->vv[i];
	if (!add || strlen(origin) >= sizeof(o->vv[0].origin))
		return NULL;
	if (o->nvv == o->capvv) {
		o->capvv = o->capvv ? 2 * o->capvv : 16;
		o->vv = realloc(o->vv, o->capvv * sizeof(*o->vv));
		if (!o->vv)
			abort();
	}
	struct ops_vv *e = &o->vv[o->nvv++];
	snprintf(e->origin, sizeof(e->origin), "%s", origin);
	e->epoch = epoch;
	e->seq = 0;
	e->retired = false;
	e->dirty = false;
	return e;
}

uint64_t ops_vv_get(struct ops *o, struct store_batch *b, const char *origin,
		    uint64_t epoch)
{
	(void)b;
	struct ops_vv *e = vv_find(o, origin, epoch, false);
	return e ? e->seq : 0;
}

static void vv_put(struct store_batch *b, const struct ops_vv *e)
{
	struct buf k = BUF_INIT;
	uint8_t val[9];

	records_key_vv(&k, e->origin, e->epoch);
	store_be64(val, e->seq);
	val[8] = 1;
	/* 9 bytes: a retired epoch's (seq, 1), outside the vector */
	store_put(b, CF_VV, k.p, k.len, val, e->retired ? 9 : 8);
	buf_free(&k);
}

static void vv_set(struct ops *o, struct store_batch *b, const char *origin,
		   uint64_t epoch, uint64_t seq)
{
	struct ops_vv *e = vv_find(o, origin, epoch, true);

	if (e) {
		e->seq = seq;
		e->dirty = true;
		return;
	}
	/* an origin too long for the cache (vv_find): written at once */
	struct buf k = BUF_INIT;
	uint8_t be[8];
	records_key_vv(&k, origin, epoch);
	store_be64(be, seq);
	store_put(b, CF_VV, k.p, k.len, be, sizeof(be));
	buf_free(&k);
}

/* The entries changed since the last commit go into b, once each. */
static void vv_flush(struct ops *o, struct store_batch *b)
{
	for (size_t i = 0; i < o->nvv; i++)
		if (o->vv[i].dirty) {
			vv_put(b, &o->vv[i]);
			o->vv[i].dirty = false;
		}
}

/* Load the vector cache from the committed store. */
static int vv_load(struct ops *o)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	o->nvv = 0;
	store_iter_new(&it, o->store, NULL, CF_VV, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		size_t ol = strnlen(key, klen);
		char origin[65];
		/* 9 bytes: a retired epoch's (seq, 1), outside the vector */
		if (ol + 9 != klen || (v.len != 8 && v.len != 9) ||
		    ol >= sizeof(origin))
			continue;
		memcpy(origin, key, ol);
		origin[ol] = '\0';
		struct ops_vv *e = vv_find(o, origin,
					   store_get_be64(key + ol + 1), true);
		if (e)
			e->seq = store_get_be64(v.p), e->retired = v.len == 9;
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

static void pack_msg(struct buf *out, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	buf_reset(out);
	protobuf_c_message_pack(m, buf_extend(out, n));
}

bool ops_stamp_after(uint64_t h1, const char *o1, uint64_t h2,
			const char *o2)
{
	if (h1 != h2)
		return h1 > h2;
	return strcmp(o1 ? o1 : "", o2 ? o2 : "") > 0;
}

/* XOR one record in or out of the digest and its family's share. */
static void toggle(struct ops *o, enum store_cf cf, const void *key,
		   size_t klen, const void *val, size_t vlen)
{
	uint8_t h[DIGEST_LEN];

	digest_hash(h, cf, key, klen, val, vlen);
	digest_xor(o->digest, h);
	digest_xor(o->fam_digest[cf], h);
}

/* Put val at key in place of old (empty: none), keeping the digest, the
 * live counts and the derived families in step; nothing when the bytes
 * are the same. */
static void replace_record(struct ops *o, struct store_batch *b,
			   enum store_cf cf, const void *key, size_t klen,
			   const struct buf *old, const struct buf *val)
{
	if (old->len == val->len && !memcmp(old->p, val->p, val->len))
		return;
	if (old->len)
		toggle(o, cf, key, klen, old->p, old->len);
	toggle(o, cf, key, klen, val->p, val->len);
	count_record(o, o->counts, cf, old->p, old->len, -1, true);
	count_record(o, o->counts, cf, val->p, val->len, 1, true);
	if (cf == CF_USERS) {
		keyfp_index(b, old->p, old->len, false);
		keyfp_index(b, val->p, val->len, true);
	}
	store_put(b, cf, key, klen, val->p, val->len);
}

/* Write val at key unless the record there carries a later stamp. */
static int lww_put(struct ops *o, struct store_batch *b, enum store_cf cf,
		   const void *key, size_t klen, const struct buf *val,
		   uint64_t hlc, const char *origin, bool *won)
{
	struct buf old = BUF_INIT;
	int rc;

	*won = false;
	rc = store_get(o->store, b, cf, key, klen, &old);
	if (rc == 0) {
		Grantd__V1__Stamped *st = grantd__v1__stamped__unpack(
			NULL, old.len, (const uint8_t *)old.p);
		/* a record that does not decode loses to anything */
		bool later = !st ||
			     ops_stamp_after(hlc, origin, st->hlc, st->origin);
		if (st)
			grantd__v1__stamped__free_unpacked(st, NULL);
		if (!later)
			goto done;
	} else if (rc != GD_ENOTFOUND) {
		goto done;
	} else {
		buf_reset(&old);
	}
	rc = 0;
	replace_record(o, b, cf, key, klen, &old, val);
	*won = true;
done:
	sodium_memzero(old.p, old.len);
	buf_free(&old);
	return rc;
}

static int apply_mark(struct ops *o, struct store_batch *b,
		      const Grantd__V1__Mark *m)
{
	struct buf k = BUF_INIT, old = BUF_INIT, val = BUF_INIT;
	Grantd__V1__Mark merged = *m;
	int rc;

	/* fields of a newer protocol would make the bytes, and so the
	 * digest, depend on which copy arrived first */
	merged.base.n_unknown_fields = 0;
	merged.base.unknown_fields = NULL;

	records_key_mark(&k, m->user, m->enroll_id);
	rc = store_get(o->store, b, CF_MARKS, k.p, k.len, &old);
	if (rc == 0) {
		Grantd__V1__Mark *om = grantd__v1__mark__unpack(
			NULL, old.len, (const uint8_t *)old.p);
		if (om) {
			if (om->next > merged.next)
				merged.next = om->next;
			merged.scratch_used |= om->scratch_used;
			grantd__v1__mark__free_unpacked(om, NULL);
		}
	} else if (rc != GD_ENOTFOUND) {
		goto done;
	}
	merged.has_next = merged.has_scratch_used = 1;
	merged.has_enroll_id = 1;
	pack_msg(&val, &merged.base);
	rc = 0;
	replace_record(o, b, CF_MARKS, k.p, k.len, &old, &val);
done:
	buf_free(&k);
	buf_free(&old);
	buf_free(&val);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Attempts merge by union of their stamps (one stamp, one attempt: see
 * Failures in grantd.proto), the newest OPS_MAX_FAILURES_KEPT kept; the
 * newest of a union is the newest of the newest of its parts, so the bound
 * keeps the rule associative. */
static int apply_failure(struct ops *o, struct store_batch *b,
			 const Grantd__V1__Failures *f)
{
	struct buf k = BUF_INIT, old = BUF_INIT, val = BUF_INIT;
	Grantd__V1__Failures merged = GRANTD__V1__FAILURES__INIT;
	uint64_t at[2 * OPS_MAX_FAILURES_KEPT];
	size_t n = 0;
	int rc;

	records_key_fail(&k, f->user, f->site);
	rc = store_get(o->store, b, CF_FAILS, k.p, k.len, &old);
	if (rc == 0) {
		Grantd__V1__Failures *of = grantd__v1__failures__unpack(
			NULL, old.len, (const uint8_t *)old.p);
		for (size_t i = 0; of && i < of->n_hlc &&
				   n < OPS_MAX_FAILURES_KEPT; i++)
			at[n++] = of->hlc[i];
		if (of)
			grantd__v1__failures__free_unpacked(of, NULL);
	} else if (rc != GD_ENOTFOUND) {
		goto done;
	}
	for (size_t i = 0; i < f->n_hlc && i < OPS_MAX_FAILURES_KEPT; i++)
		at[n++] = f->hlc[i];
	qsort(at, n, sizeof(at[0]), cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || at[u - 1] != at[i])
			at[u++] = at[i];
	size_t first = u > OPS_MAX_FAILURES_KEPT ? u - OPS_MAX_FAILURES_KEPT : 0;
	merged.user = f->user;
	merged.site = f->site;
	merged.hlc = at + first;
	merged.n_hlc = u - first;
	pack_msg(&val, &merged.base);
	rc = 0;
	replace_record(o, b, CF_FAILS, k.p, k.len, &old, &val);
done:
	buf_free(&k);
	buf_free(&old);
	buf_free(&val);
	return rc;
}

/* The body of an operation: the generated oneof is a union of pointers. */
static const ProtobufCMessage *op_body(const Grantd__V1__Op *op)
{
	return (const ProtobufCMessage *)op->user;
}

/* Pack an LWW body as its record, stamped with its operation's (hlc,
 * origin): fields 14 and 15 of every LWW record (see Stamped). */
static void pack_stamped(struct buf *out, const ProtobufCMessage *body,
			 uint64_t hlc, const char *origin)
{
	const ProtobufCMessageDescriptor *d = body->descriptor;
	const ProtobufCFieldDescriptor *fh =
		protobuf_c_message_descriptor_get_field(d, 14);
	const ProtobufCFieldDescriptor *fo =
		protobuf_c_message_descriptor_get_field(d, 15);
	uint8_t *copy = malloc(d->sizeof_message);

	if (!copy)
		abort();
	memcpy(copy, body, d->sizeof_message);
	memcpy(copy + fh->offset, &hlc, sizeof(hlc));
	*(protobuf_c_boolean *)(copy + fh->quantifier_offset) = 1;
	memcpy(copy + fo->offset, &origin, sizeof(origin));
	pack_msg(out, (const ProtobufCMessage *)copy);
	free(copy);
}

static bool oid_zero(const char *oid)
{
	return strspn(oid, "0") == 40;
}

/* The key of a recorded hook request; without id, the prefix of all of
 * repo's. */
static void push_key(struct buf *k, const char *repo, const char *id)
{
	buf_reset(k);
	buf_add(k, META_PUSH, sizeof(META_PUSH));
	buf_add(k, repo, strlen(repo) + 1);
	if (id)
		buf_puts(k, id);
}

int ops_push_seen(struct ops *o, struct store_batch *b, const char *repo,
		  const char *id, bool *seen)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	push_key(&k, repo, id);
	rc = store_get(o->store, b, CF_META, k.p, k.len, &v);
	*seen = rc == 0;
	buf_free(&k);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* Remember the request id of a push made here (a resend of it is then
 * answered without a second operation), and forget the oldest of its
 * repository's past OPS_PUSH_IDS_KEPT: ids begin with the hook's clock,
 * so key order is age.  Resends come in push order (grant-hook sends its
 * spool oldest first and stops at the first it cannot send), so only
 * the latest pushes of a repository can come again. */
static int push_remember(struct ops *o, struct store_batch *b,
			 const Grantd__V1__Op *op)
{
	const Grantd__V1__RefUpdate *u = op->refs;
	struct buf k = BUF_INIT, v = BUF_INIT, old = BUF_INIT;
	struct store_iter *it = NULL;
	const char *key;
	size_t klen, n = 0;
	uint8_t be[8];
	int rc;

	if (!u->push_id || strcmp(op->origin, o->site))
		return 0;
	push_key(&k, u->repo, u->push_id);
	store_be64(be, op->hlc);
	store_put(b, CF_META, k.p, k.len, be, sizeof(be));
	push_key(&k, u->repo, NULL);
	store_iter_new(&it, o->store, b, CF_META, k.p, k.len);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0)
		n++;
	store_iter_free(&it);
	/* the keys to drop are collected first: a batch that changes
	 * under its iterator invalidates it */
	if (rc == 0 && n > OPS_PUSH_IDS_KEPT) {
		store_iter_new(&it, o->store, b, CF_META, k.p, k.len);
		for (size_t i = n - OPS_PUSH_IDS_KEPT; i > 0 &&
		     (rc = store_iter_next(it, &key, &klen, &v)) > 0; i--) {
			uint8_t len[4] = { (uint8_t)(klen >> 24),
					   (uint8_t)(klen >> 16),
					   (uint8_t)(klen >> 8), (uint8_t)klen };
			buf_add(&old, len, sizeof(len));
			buf_add(&old, key, klen);
		}
		store_iter_free(&it);
		rc = rc < 0 ? rc : 0;
	}
	for (size_t off = 0; rc == 0 && off + 4 <= old.len;) {
		const uint8_t *p = (const uint8_t *)old.p + off;
		size_t kl = (size_t)p[0] << 24 | (size_t)p[1] << 16 |
			    (size_t)p[2] << 8 | p[3];
		store_del(b, CF_META, p + 4, kl);
		off += 4 + kl;
	}
	buf_free(&k);
	buf_free(&v);
	buf_free(&old);
	return rc;
}

/*
 * A push: each ref is an LWW register (repo, ref) -> tip.  When two sites
 * moved a ref from different starting points, the tip that loses is noted
 * (CF_LOSERS, local) so it can be kept as refs/grantd/conflicts/SITE/REF
 * once its objects are here; a loser that the winner descends from is no
 * conflict, which only the objects can tell, so that is decided later.
 */
static int apply_refs(struct ops *o, struct store_batch *b,
		      const Grantd__V1__Op *op)
{
	const Grantd__V1__RefUpdate *u = op->refs;
	struct buf k = BUF_INIT, val = BUF_INIT, old = BUF_INIT, lk = BUF_INIT;
	struct buf lv = BUF_INIT;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < u->n_changes; i++) {
		const Grantd__V1__RefChange *ch = u->changes[i];
		Grantd__V1__Ref rec = GRANTD__V1__REF__INIT;
		Grantd__V1__Ref *cur = NULL;
		bool won;

		rec.repo = u->repo;
		rec.ref = ch->ref;
		rec.target = oid_zero(ch->new_) ? "" : ch->new_;
		pack_stamped(&val, &rec.base, op->hlc, op->origin);
		records_key_ref(&k, u->repo, ch->ref);
		rc = store_get(o->store, b, CF_REFS, k.p, k.len, &old);
		if (rc == 0)
			cur = grantd__v1__ref__unpack(NULL, old.len,
						      (const uint8_t *)old.p);
		else if (rc != GD_ENOTFOUND)
			break;
		rc = lww_put(o, b, CF_REFS, k.p, k.len, &val, op->hlc,
			     op->origin, &won);
		if (rc == 0)
			buf_add(&o->refs_touched, k.p, k.len + 1);
		if (rc == 0 && cur && cur->target && cur->origin) {
			const char *from = oid_zero(ch->old) ? "" : ch->old;
			if (won && *cur->target && strcmp(cur->target, from) &&
			    strcmp(cur->target, rec.target)) {
				records_key_loser(&lk, u->repo, ch->ref,
						  cur->origin, cur->hlc);
				records_loser_value(&lv, cur->target, false);
				store_put(b, CF_LOSERS, lk.p, lk.len, lv.p,
					  lv.len);
			} else if (!won && *rec.target &&
				   strcmp(rec.target, cur->target)) {
				records_key_loser(&lk, u->repo, ch->ref,
						  op->origin, op->hlc);
				records_loser_value(&lv, rec.target, false);
				store_put(b, CF_LOSERS, lk.p, lk.len, lv.p,
					  lv.len);
			}
		}
		if (cur)
			grantd__v1__ref__free_unpacked(cur, NULL);
	}
	if (rc == 0)
		rc = push_remember(o, b, op);
	buf_free(&k);
	buf_free(&val);
	buf_free(&old);
	buf_free(&lk);
	buf_free(&lv);
	return rc;
}

static void plhead_key(struct buf *k, const char *origin)
{
	buf_reset(k);
	buf_add(k, META_PLHEAD, sizeof(META_PLHEAD));
	buf_puts(k, origin);
}

int ops_pushlog_head(struct ops *o, struct store_batch *b, const char *origin,
		     uint64_t *n, uint8_t hash[OPS_PUSHLOG_HASH])
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	*n = 0;
	memset(hash, 0, OPS_PUSHLOG_HASH);
	plhead_key(&k, origin);
	rc = store_get(o->store, b, CF_META, k.p, k.len, &v);
	if (rc == 0 && v.len == 8 + OPS_PUSHLOG_HASH) {
		*n = store_get_be64(v.p);
		memcpy(hash, v.p + 8, OPS_PUSHLOG_HASH);
	}
	buf_free(&k);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

int ops_pushlog_heads(struct ops_pushlog_head **out, struct store *s)
{
	struct ops_pushlog_head *h = NULL;
	struct store_iter *it = NULL;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen, n = 0, cap = 0, pl = sizeof(META_PLHEAD);
	int rc;

	*out = NULL;
	if ((rc = store_iter_new(&it, s, NULL, CF_META, META_PLHEAD, pl)) < 0)
		return rc;
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		if (klen <= pl || klen - pl >= sizeof(h->origin) ||
		    v.len != 8 + OPS_PUSHLOG_HASH)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			h = realloc(h, cap * sizeof(*h));
			if (!h)
				abort();
		}
		memcpy(h[n].origin, key + pl, klen - pl);
		h[n].origin[klen - pl] = '\0';
		h[n].n = store_get_be64(v.p);
		memcpy(h[n].hash, v.p + 8, OPS_PUSHLOG_HASH);
		n++;
	}
	store_iter_free(&it);
	buf_free(&v);
	if (rc < 0) {
		free(h);
		return rc;
	}
	*out = h;
	return (int)n;
}

/* Which of two entries for the same (origin, n) sits at origin \0 n: the
 * earlier (hlc, bytes), so that every site puts the same one there
 * whatever the order they came in; the other is kept too, under its hash
 * (records_key_pushlog_fork).  Only a forked chain (a wiped site that took
 * a push before it caught up, or a lying one) has two; `grantctl log
 * verify` names the fork and both hashes. */
static bool pushlog_keeps_old(const struct buf *old, const struct buf *val)
{
	Grantd__V1__PushLogEntry *oe = grantd__v1__push_log_entry__unpack(
		NULL, old->len, (const uint8_t *)old->p);
	Grantd__V1__PushLogEntry *ve = grantd__v1__push_log_entry__unpack(
		NULL, val->len, (const uint8_t *)val->p);
	size_t n = old->len < val->len ? old->len : val->len;
	int c = memcmp(old->p, val->p, n);
	bool keep;

	if (!oe || !ve)
		keep = ve == NULL; /* a record that does not decode loses */
	else if (oe->hlc != ve->hlc)
		keep = oe->hlc < ve->hlc;
	else
		keep = c < 0 || (c == 0 && old->len <= val->len);
	if (oe)
		grantd__v1__push_log_entry__free_unpacked(oe, NULL);
	if (ve)
		grantd__v1__push_log_entry__free_unpacked(ve, NULL);
	return keep;
}

static void entry_hash_hex(char out[2 * OPS_PUSHLOG_HASH + 1],
			   const struct buf *v)
{
	Grantd__V1__PushLogEntry *e = grantd__v1__push_log_entry__unpack(
		NULL, v->len, (const uint8_t *)v->p);

	out[0] = '\0';
	if (!e)
		return;
	pushlog_hex(out, e->hash.data, e->hash.len);
	grantd__v1__push_log_entry__free_unpacked(e, NULL);
}

/* The stamp of origin's entry n here (0: none, or it does not decode). */
static int pushlog_stamp(struct ops *o, struct store_batch *b,
			 const char *origin, uint64_t n, uint64_t *hlc)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	Grantd__V1__PushLogEntry *e;
	int rc;

	*hlc = 0;
	records_key_pushlog(&k, origin, n);
	rc = store_get(o->store, b, CF_PUSHLOG, k.p, k.len, &v);
	if (rc == 0 && (e = grantd__v1__push_log_entry__unpack(
				NULL, v.len, (const uint8_t *)v.p))) {
		*hlc = e->hlc;
		grantd__v1__push_log_entry__free_unpacked(e, NULL);
	}
	buf_free(&k);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

int ops_pushlog_forks(struct ops *o, struct store_batch *b, uint64_t *n)
{
	return meta_u64_in(o->store, b, META_PLFORKS, n);
}

/* Keep val (an entry of origin, n that lost its place at origin \0 n) as a
 * fork, under its hash; of two with the same hash, the earlier, as at
 * origin \0 n.  Counts a new fork (META_PLFORKS). */
static int pushlog_keep_fork(struct ops *o, struct store_batch *b,
			     const char *origin, uint64_t n,
			     const struct buf *val)
{
	Grantd__V1__PushLogEntry *e = grantd__v1__push_log_entry__unpack(
		NULL, val->len, (const uint8_t *)val->p);
	struct buf k = BUF_INIT, old = BUF_INIT;
	uint64_t forks;
	uint8_t be[8];
	int rc = GD_EPROTO;

	if (!e || e->hash.len != OPS_PUSHLOG_HASH)
		goto done;
	records_key_pushlog_fork(&k, origin, n, e->hash.data);
	rc = store_get(o->store, b, CF_PUSHLOG, k.p, k.len, &old);
	if (rc == GD_ENOTFOUND) {
		buf_reset(&old);
		if ((rc = ops_pushlog_forks(o, b, &forks)) < 0)
			goto done;
		store_be64(be, forks + 1);
		store_put(b, CF_META, META_PLFORKS, strlen(META_PLFORKS), be,
			  sizeof(be));
	} else if (rc < 0 || pushlog_keeps_old(&old, val)) {
		goto done;
	}
	rc = 0;
	replace_record(o, b, CF_PUSHLOG, k.p, k.len, &old, val);
done:
	if (e)
		grantd__v1__push_log_entry__free_unpacked(e, NULL);
	buf_free(&k);
	buf_free(&old);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* A push log entry: written once at origin \0 n; the head of origin's
 * chain moves with it (same batch).  An entry stamped no later than its
 * predecessor is refused: counted (pushlog_refused), logged, not kept; its
 * operation still counts as applied, so the stream goes on. */
static int apply_pushlog(struct ops *o, struct store_batch *b,
			 const Grantd__V1__PushLogEntry *e)
{
	Grantd__V1__PushLogEntry copy = *e;
	struct buf k = BUF_INIT, old = BUF_INIT, val = BUF_INIT;
	uint8_t head[OPS_PUSHLOG_HASH], hv[8 + OPS_PUSHLOG_HASH];
	char h1[2 * OPS_PUSHLOG_HASH + 1], h2[2 * OPS_PUSHLOG_HASH + 1];
	const struct buf *top = &val;
	uint64_t hn, before = 0;
	int rc;

	if (e->n > 1 &&
	    (rc = pushlog_stamp(o, b, e->origin, e->n - 1, &before)) < 0)
		return rc;
	if (before && e->hlc <= before) {
		o->pushlog_refused++;
		log_warn("push log entry refused origin=%s n=%llu: stamped "
			 "hlc=%llu, not after entry %llu's hlc=%llu "
			 "refused=%llu", e->origin, (unsigned long long)e->n,
			 (unsigned long long)e->hlc,
			 (unsigned long long)(e->n - 1),
			 (unsigned long long)before,
			 (unsigned long long)o->pushlog_refused);
		return 0;
	}
	/* fields of a newer protocol would make the bytes depend on which
	 * copy arrived first */
	copy.base.n_unknown_fields = 0;
	copy.base.unknown_fields = NULL;
	pack_msg(&val, &copy.base);
	records_key_pushlog_fork(&k, e->origin, e->n, e->hash.data);
	rc = store_get(o->store, b, CF_PUSHLOG, k.p, k.len, &old);
	if (rc == 0 && old.len == val.len && !memcmp(old.p, val.p, val.len))
		goto done; /* a fork already kept */
	if (rc < 0 && rc != GD_ENOTFOUND)
		goto done;
	records_key_pushlog(&k, e->origin, e->n);
	rc = store_get(o->store, b, CF_PUSHLOG, k.p, k.len, &old);
	if (rc == GD_ENOTFOUND) {
		buf_reset(&old);
	} else if (rc < 0) {
		goto done;
	} else if (old.len == val.len && !memcmp(old.p, val.p, val.len)) {
		goto done;
	} else {
		bool keep = pushlog_keeps_old(&old, &val);
		/* named as log verify names them: the one in place first */
		entry_hash_hex(keep ? h1 : h2, &old);
		pushlog_hex(keep ? h2 : h1, e->hash.data, e->hash.len);
		log_warn("push log fork origin=%s n=%llu hash=%s hash=%s: two "
			 "different entries, both kept", e->origin,
			 (unsigned long long)e->n, h1, h2);
		rc = pushlog_keep_fork(o, b, e->origin, e->n,
				       keep ? &val : &old);
		if (rc < 0 || keep)
			goto done;
	}
	rc = 0;
	replace_record(o, b, CF_PUSHLOG, k.p, k.len, &old, top);
	if ((rc = ops_pushlog_head(o, b, e->origin, &hn, head)) < 0)
		goto done;
	if (e->n >= hn) {
		store_be64(hv, e->n);
		memcpy(hv + 8, e->hash.data, OPS_PUSHLOG_HASH);
		plhead_key(&k, e->origin);
		store_put(b, CF_META, k.p, k.len, hv, sizeof(hv));
	}
done:
	buf_free(&k);
	buf_free(&old);
	buf_free(&val);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* Effect of one operation on the state families. */
static int apply_body(struct ops *o, struct store_batch *b,
		      const Grantd__V1__Op *op)
{
	const struct records_kind *f = records_by_body(op->body_case);
	struct buf k = BUF_INIT, val = BUF_INIT;
	bool won = false;
	int rc;

	if (!f)
		return GD_EPROTO;
	switch (f->merge) {
	case RECORDS_MAX:
		return apply_mark(o, b, op->mark);
	case RECORDS_UNION:
		return apply_failure(o, b, op->failure);
	case RECORDS_SET:
		return apply_pushlog(o, b, op->push_log);
	case RECORDS_LWW:
		break;
	default:
		return GD_EPROTO;
	}
	/* a push's records are Refs, one per ref: see apply_refs */
	if (op->body_case == GRANTD__V1__OP__BODY_REFS)
		return apply_refs(o, b, op);
	pack_stamped(&val, op_body(op), op->hlc, op->origin);
	records_key_lww(&k, op);
	rc = lww_put(o, b, f->cf, k.p, k.len, &val, op->hlc, op->origin, &won);
	/* A repository's directory is made once the record is committed
	 * (repos_follow): a disk that refuses it cannot leave a record and
	 * its digest change half-applied, and a commit that fails leaves no
	 * repository behind. */
	if (rc == 0 && won && op->body_case == GRANTD__V1__OP__BODY_REPO &&
	    !op->repo->deleted)
		buf_add(&o->repos_touched, op->repo->name,
			strlen(op->repo->name) + 1);
	sodium_memzero(val.p, val.len);
	buf_free(&k);
	buf_free(&val);
	return rc;
}

int ops_apply(struct ops *o, struct store_batch *b, const Grantd__V1__Op *op,
	      bool *applied)
{
	struct buf k = BUF_INIT, val = BUF_INIT;
	struct ops_save sp;
	uint64_t have;
	int rc;

	*applied = false;
	have = ops_vv_get(o, b, op->origin, op->epoch);
	if (op->seq <= have)
		return 0;
	if (op->seq != have + 1)
		return GD_EINVAL;
	hlc_observe(&o->hlc, op->hlc);
	ops_savepoint(o, b, &sp);
	if ((rc = apply_body(o, b, op)) < 0) {
		/* e.g. a push whose second ref could not be read: its first
		 * ref's record and digest change go, together */
		ops_rollback(o, b, &sp);
		goto done;
	}

	records_key_oplog(&k, op->origin, op->epoch, op->seq);
	pack_msg(&val, &op->base);
	store_put(b, CF_OPLOG, k.p, k.len, val.p, val.len);

	vv_set(o, b, op->origin, op->epoch, op->seq);

	if (!strcmp(op->origin, o->site) && op->epoch == o->epoch &&
	    op->seq > o->seq)
		o->seq = op->seq;
	ops_release(o, b);
	*applied = true;
done:
	sodium_memzero(val.p, val.len);
	buf_free(&k);
	buf_free(&val);
	return rc;
}

int ops_skip(struct ops *o, struct store_batch *b, const char *origin,
	     uint64_t epoch, uint64_t seq, uint64_t hlc, bool *applied)
{
	uint64_t have = ops_vv_get(o, b, origin, epoch);

	*applied = false;
	if (seq <= have)
		return 0;
	if (seq != have + 1)
		return GD_EINVAL;
	/* the clock still learns the stamp: a later visible operation of
	 * this origin is stamped after it anyway */
	hlc_observe(&o->hlc, hlc);
	vv_set(o, b, origin, epoch, seq);
	*applied = true;
	return 0;
}

bool ops_mirror_visible(const Grantd__V1__Op *op)
{
	const struct records_kind *k = op ? records_by_body(op->body_case) :
					    NULL;

	return k && records_mirror_visible(k->cf);
}

void ops_digest_public(const struct ops *o, uint8_t out[DIGEST_LEN])
{
	memset(out, 0, DIGEST_LEN);
	for (int cf = 0; cf < CF__COUNT; cf++)
		if (records_mirror_visible((enum store_cf)cf))
			digest_xor(out, o->fam_digest[cf]);
}

int ops_local(struct ops *o, struct store_batch *b, Grantd__V1__Op *op)
{
	struct buf why = BUF_INIT;
	bool applied;
	int rc;

	op->origin = o->site;
	op->epoch = o->epoch, op->has_epoch = 1;
	op->seq = o->seq + 1, op->has_seq = 1;
	if (!op->has_hlc || !op->hlc)
		op->hlc = hlc_now(&o->hlc);
	op->has_hlc = 1;
	/* what peers would refuse is never made here: one refused operation
	 * would stop every later one of this origin at every peer */
	if ((rc = ops_check(op, &why)) < 0) {
		log_error("operation refused before it was made: %s", why.p);
		buf_free(&why);
		return GD_EINVAL;
	}
	rc = ops_apply(o, b, op, &applied);
	if (rc == 0) {
		size_t n = grantd__v1__op__get_packed_size(op);
		uint8_t len[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16),
				   (uint8_t)(n >> 8), (uint8_t)n };
		buf_add(&o->outbox, len, sizeof(len));
		grantd__v1__op__pack(op, buf_extend(&o->outbox, n));
	}
	return rc;
}

bool ops_pending(const struct ops *o, struct store_batch *b)
{
	if (store_batch_count(b) > 0)
		return true;
	for (size_t i = 0; i < o->nvv; i++)
		if (o->vv[i].dirty)
			return true;
	return false;
}

int ops_commit(struct ops *o, struct store_batch *b, bool sync)
{
	int rc;

	vv_flush(o, b);
	o->vv_saves.len = o->vv_top = 0; /* store_commit drops save points */
	if (store_batch_count(b) == 0) {
		rc = store_commit(b, sync);
		if (rc == 0)
			o->nundo = 0;
		return rc;
	}
	meta_put_u64(b, META_SEQ, o->seq);
	meta_put_u64(b, META_HLC, o->hlc.last);
	store_put(b, CF_META, META_DIGEST, strlen(META_DIGEST), o->digest,
		  DIGEST_LEN);
	if ((rc = store_commit(b, sync)) == 0) {
		memcpy(o->fam_committed, o->fam_digest,
		       sizeof(o->fam_committed));
		o->nundo = 0;
	}
	return rc;
}

/* The header of a copy of the vector on o->vv_saves (its entries follow). */
struct ops_vv_saved {
	size_t prev; /* the enclosing copy's offset */
	size_t n;
};

void ops_savepoint(struct ops *o, struct store_batch *b, struct ops_save *sp)
{
	struct ops_vv_saved h = { .prev = o->vv_top, .n = o->nvv };

	memcpy(sp->digest, o->digest, sizeof(sp->digest));
	memcpy(sp->fam_digest, o->fam_digest, sizeof(sp->fam_digest));
	sp->seq = o->seq;
	sp->outbox_len = o->outbox.len;
	sp->refs_len = o->refs_touched.len;
	sp->repos_len = o->repos_touched.len;
	sp->undo_len = o->nundo;
	sp->vv_at = o->vv_top = o->vv_saves.len;
	buf_add(&o->vv_saves, &h, sizeof(h));
	if (o->nvv)
		buf_add(&o->vv_saves, o->vv, o->nvv * sizeof(*o->vv));
	store_batch_savepoint(b);
}

/* Drop the innermost copy of the vector. */
static void vv_pop(struct ops *o)
{
	struct ops_vv_saved h;

	memcpy(&h, o->vv_saves.p + o->vv_top, sizeof(h));
	o->vv_saves.len = o->vv_top;
	o->vv_top = h.prev;
}

void ops_release(struct ops *o, struct store_batch *b)
{
	vv_pop(o);
	store_batch_release(b);
}

int ops_rollback(struct ops *o, struct store_batch *b,
		 const struct ops_save *sp)
{
	int rc = store_batch_rollback(b);
	struct ops_vv_saved h;

	memcpy(o->digest, sp->digest, sizeof(o->digest));
	memcpy(o->fam_digest, sp->fam_digest, sizeof(o->fam_digest));
	o->seq = sp->seq;
	if (o->outbox.len > sp->outbox_len) {
		sodium_memzero(o->outbox.p + sp->outbox_len,
			       o->outbox.len - sp->outbox_len);
		o->outbox.len = sp->outbox_len;
	}
	if (o->refs_touched.len > sp->refs_len)
		o->refs_touched.len = sp->refs_len;
	if (o->repos_touched.len > sp->repos_len)
		o->repos_touched.len = sp->repos_len;
	count_undo(o, sp->undo_len);
	/* the vector as it was, dirty marks included: its changes are in
	 * memory only until ops_commit */
	assert(sp->vv_at == o->vv_top);
	memcpy(&h, o->vv_saves.p + sp->vv_at, sizeof(h));
	if (h.n > o->capvv) {
		o->capvv = h.n;
		o->vv = realloc(o->vv, o->capvv * sizeof(*o->vv));
		if (!o->vv)
			abort();
	}
	if (h.n)
		memcpy(o->vv, o->vv_saves.p + sp->vv_at + sizeof(h),
		       h.n * sizeof(*o->vv));
	o->nvv = h.n;
	vv_pop(o);
	return rc;
}

int ops_verify(struct ops *o, struct ops_verify *v)
{
	struct buf m = BUF_INIT;
	int rc;

	memset(v, 0, sizeof(*v));
	memcpy(v->live, o->digest, DIGEST_LEN);
	memcpy(v->live_fam, o->fam_digest, sizeof(v->live_fam));
	rc = store_get(o->store, NULL, CF_META, META_DIGEST,
		       strlen(META_DIGEST), &m);
	if (rc == 0 && m.len == DIGEST_LEN)
		memcpy(v->stored, m.p, DIGEST_LEN);
	buf_free(&m);
	if (rc < 0 && rc != GD_ENOTFOUND)
		return rc;
	for (int cf = 0; cf < CF__COUNT; cf++)
		v->covered[cf] = records_replicated(cf);
	struct ops_count *disk = calloc(CF__COUNT, sizeof(*disk));
	if (!disk)
		abort();
	if ((rc = digest_scan(o, v->disk_fam, v->records, disk)) < 0)
		goto done;
	digest_total(v->disk, v->disk_fam);
	v->equal = !memcmp(v->live, v->disk, DIGEST_LEN) &&
		   !memcmp(v->stored, v->disk, DIGEST_LEN) &&
		   !memcmp(v->live_fam, v->disk_fam, sizeof(v->disk_fam));
	int64_t now = (int64_t)(clock_wall_ms() / 1000);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		v->count_kept[cf] = ops_count(o, cf, now);
		v->count_disk[cf] = count_of(&disk[cf], cf, now);
		if (v->count_kept[cf] == v->count_disk[cf])
			continue;
		log_error("verify: the live count of family=%s is %lld, its "
			  "records say %lld", store_cf_name(cf),
			  (long long)v->count_kept[cf],
			  (long long)v->count_disk[cf]);
		v->equal = false;
	}
done:
	for (int cf = 0; cf < CF__COUNT; cf++)
		count_free(&disk[cf]);
	free(disk);
	return rc;
}

void ops_outbox_clear(struct ops *o)
{
	if (o->outbox.p)
		sodium_memzero(o->outbox.p, o->outbox.len);
	buf_reset(&o->outbox);
}

void ops_vv_raise(struct ops *o, struct store_batch *b, const char *origin,
		  uint64_t epoch, uint64_t seq)
{
	const struct ops_vv *e = vv_find(o, origin, epoch, false);

	/* a retired epoch is finished: its total is already counted */
	if (seq > ops_vv_get(o, b, origin, epoch) && !(e && e->retired))
		vv_set(o, b, origin, epoch, seq);
}

/* Retire entry i: its seq joins its origin's retired total, and it is
 * kept marked retired (9 bytes: seq, 1). */
static void vv_retire(struct ops *o, struct store_batch *b, size_t i)
{
	struct ops_vv *e = &o->vv[i];

	e->retired = true;
	e->dirty = true;
	log_debug("epoch retired origin=%s epoch=%016llx seq=%llu", e->origin,
		  (unsigned long long)e->epoch, (unsigned long long)e->seq);
	/* (vv_set may move the array: e is not used after it) */
	vv_set(o, b, o->vv[i].origin, OPS_VV_RETIRED,
	       ops_vv_get(o, b, o->vv[i].origin, OPS_VV_RETIRED) +
		       o->vv[i].seq);
}

int ops_vv_retire_own(struct ops *o, struct store_batch *b,
		      bool (*held)(const char *origin, uint64_t epoch,
				   uint64_t seq, void *payload),
		      void *payload)
{
	int n = 0;

	for (size_t i = 0; i < o->nvv; i++) {
		const struct ops_vv *e = &o->vv[i];
		if (strcmp(e->origin, o->site) || e->epoch == o->epoch ||
		    e->epoch == OPS_VV_RETIRED || e->retired ||
		    !held(e->origin, e->epoch, e->seq, payload))
			continue;
		vv_retire(o, b, i);
		n++;
	}
	return n;
}

static bool vv_lists(Grantd__V1__VvEntry *const *vv, size_t n,
		     const char *origin, uint64_t epoch)
{
	for (size_t i = 0; i < n; i++)
		if (vv[i]->epoch == epoch && vv[i]->origin &&
		    !strcmp(vv[i]->origin, origin))
			return true;
	return false;
}

int ops_vv_follow(struct ops *o, struct store_batch *b, const char *origin,
		  Grantd__V1__VvEntry *const *vv, size_t n)
{
	uint64_t theirs = 0, ours, gone = 0;
	int k = 0;

	for (size_t i = 0; i < n; i++)
		if (vv[i]->epoch == OPS_VV_RETIRED && vv[i]->origin &&
		    !strcmp(vv[i]->origin, origin))
			theirs = vv[i]->seq;
	ours = ops_vv_get(o, b, origin, OPS_VV_RETIRED);
	if (theirs <= ours || !strcmp(origin, o->site))
		return 0;
	for (size_t i = 0; i < o->nvv; i++)
		if (o->vv[i].epoch != OPS_VV_RETIRED && !o->vv[i].retired &&
		    !strcmp(o->vv[i].origin, origin) &&
		    !vv_lists(vv, n, origin, o->vv[i].epoch))
			gone += o->vv[i].seq;
	if (ours + gone != theirs)
		return 0;
	for (size_t i = 0; i < o->nvv; i++)
		if (o->vv[i].epoch != OPS_VV_RETIRED && !o->vv[i].retired &&
		    !strcmp(o->vv[i].origin, origin) &&
		    !vv_lists(vv, n, origin, o->vv[i].epoch)) {
			vv_retire(o, b, i);
			k++;
		}
	return k;
}

/* origin's retired total as its vector (vv, n) shows it */
static uint64_t vv_total(Grantd__V1__VvEntry *const *vv, size_t n,
			 const char *origin)
{
	for (size_t i = 0; i < n; i++)
		if (vv[i]->epoch == OPS_VV_RETIRED && vv[i]->origin &&
		    !strcmp(vv[i]->origin, origin))
			return vv[i]->seq;
	return 0;
}

bool ops_vv_covered(struct ops *o, const char *origin, uint64_t epoch,
		    Grantd__V1__VvEntry *const *vv, size_t n)
{
	uint64_t ours = ops_vv_get(o, NULL, origin, OPS_VV_RETIRED);

	if (!vv || !n || epoch == OPS_VV_RETIRED || !ours ||
	    !strcmp(origin, o->site) || vv_lists(vv, n, origin, epoch))
		return false;
	return vv_total(vv, n, origin) <= ours;
}

int ops_vv_raise_retired(struct ops *o, struct store_batch *b,
			 const char *origin, uint64_t total,
			 Grantd__V1__VvEntry *const *own, size_t n_own,
			 Grantd__V1__VvEntry *const *sent, size_t n_sent)
{
	int k = 0;

	ops_vv_raise(o, b, origin, OPS_VV_RETIRED, total);
	for (size_t i = 0; i < o->nvv; i++) {
		struct ops_vv *e = &o->vv[i];
		if (e->epoch == OPS_VV_RETIRED || e->retired ||
		    strcmp(e->origin, origin) ||
		    vv_lists(sent, n_sent, origin, e->epoch) ||
		    !ops_vv_covered(o, origin, e->epoch, own, n_own))
			continue;
		/* inside the total already: retired, not added again */
		e->retired = true;
		e->dirty = true;
		log_info("epoch already counted in the retired total "
			 "origin=%s epoch=%016llx seq=%llu total=%llu",
			 e->origin, (unsigned long long)e->epoch,
			 (unsigned long long)e->seq,
			 (unsigned long long)ops_vv_get(o, b, origin,
						       OPS_VV_RETIRED));
		k++;
	}
	return k;
}

int ops_vv_forget(struct ops *o, struct store_batch *b,
		  bool (*gone)(const char *origin, uint64_t epoch,
			       uint64_t total, void *payload),
		  void *payload)
{
	struct buf k = BUF_INIT;
	int n = 0;

	for (size_t i = 0; i < o->nvv;) {
		const struct ops_vv *e = &o->vv[i];
		if (!e->retired ||
		    !gone(e->origin, e->epoch,
			  ops_vv_get(o, b, e->origin, OPS_VV_RETIRED), payload)) {
			i++;
			continue;
		}
		records_key_vv(&k, e->origin, e->epoch);
		store_del(b, CF_VV, k.p, k.len);
		o->vv[i] = o->vv[--o->nvv]; /* entry i is now another one */
		n++;
	}
	buf_free(&k);
	return n;
}

/* A peer's record stamped (hlc, origin): the checks a live operation
 * gets (repl.c apply_op), then the clock observes the stamp. */
static int trust_stamp(struct ops *o, const struct ops_trust *t, uint64_t hlc,
		       const char *origin, struct buf *why)
{
	if (t && hlc > t->max_hlc) {
		buf_printf(why, "stamped %llu ms ahead of the allowed skew "
			   "(check the clock of origin=%s)",
			   (unsigned long long)(hlc_ms(hlc) - hlc_ms(t->max_hlc)),
			   origin);
		return GD_EPROTO;
	}
	if (t && t->known && !t->known(origin, t->payload)) {
		buf_printf(why, "unknown origin site %s", origin);
		return GD_EPROTO;
	}
	hlc_observe(&o->hlc, hlc);
	return 0;
}

/* A Ref from a snapshot: the same register apply_refs writes. */
static int merge_ref(struct ops *o, struct store_batch *b, const void *val,
		     size_t vlen, const struct ops_trust *t, struct buf *why)
{
	Grantd__V1__Ref *r = grantd__v1__ref__unpack(NULL, vlen, val);
	struct buf k = BUF_INIT, v = BUF_INIT;
	char norm[NAME_REPO_MAX + 1];
	bool won;
	int rc = GD_EPROTO;

	if (!r || !r->repo || !r->ref || !r->target || !r->origin ||
	    !r->hlc || !name_site_ok(r->origin) ||
	    name_repo_norm(norm, sizeof(norm), r->repo) < 0 ||
	    strcmp(norm, r->repo) || !ops_ref_name_ok(r->ref) ||
	    (*r->target && !ops_oid_ok(r->target))) {
		buf_puts(why, "bad ref record");
		goto done;
	}
	if ((rc = trust_stamp(o, t, r->hlc, r->origin, why)) < 0)
		goto done;
	records_key_ref(&k, r->repo, r->ref);
	buf_add(&v, val, vlen);
	rc = lww_put(o, b, CF_REFS, k.p, k.len, &v, r->hlc, r->origin, &won);
	if (rc == 0 && won)
		buf_add(&o->refs_touched, k.p, k.len + 1);
done:
	if (r)
		grantd__v1__ref__free_unpacked(r, NULL);
	buf_free(&k);
	buf_free(&v);
	return rc;
}

/* A push log entry from a snapshot: the checks of a live one (its stamp
 * and origin are the entry's own), then the same set rule. */
static int merge_pushlog(struct ops *o, struct store_batch *b,
			 const void *val, size_t vlen,
			 const struct ops_trust *t, struct buf *why)
{
	Grantd__V1__PushLogEntry *e =
		grantd__v1__push_log_entry__unpack(NULL, vlen, val);
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	int rc = GD_EPROTO;

	if (!e) {
		buf_puts(why, "record does not decode");
		return rc;
	}
	op.body_case = GRANTD__V1__OP__BODY_PUSH_LOG;
	op.push_log = e;
	SET_STAMP(op, 1, 1, e->hlc);
	op.origin = e->origin ? e->origin : "";
	rc = ops_check(&op, why);
	if (rc == 0)
		rc = trust_stamp(o, t, op.hlc, op.origin, why);
	if (rc == 0)
		rc = apply_pushlog(o, b, e);
	grantd__v1__push_log_entry__free_unpacked(e, NULL);
	return rc;
}

int ops_merge_record(struct ops *o, struct store_batch *b, enum store_cf cf,
		     const void *val, size_t vlen, const struct ops_trust *t,
		     struct buf *why_out)
{
	const struct records_kind *f =
		records_replicated(cf) ? records_kind(cf) : NULL;
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	struct buf why = BUF_INIT;
	ProtobufCMessage *m = NULL;
	int rc = GD_EPROTO;

	if (!f) {
		buf_puts(&why, "not a state family");
		goto done;
	}
	if (cf == CF_REFS) {
		rc = merge_ref(o, b, val, vlen, t, &why);
		goto done;
	}
	if (cf == CF_PUSHLOG) {
		rc = merge_pushlog(o, b, val, vlen, t, &why);
		goto done;
	}
	m = protobuf_c_message_unpack(f->desc, NULL, vlen, val);
	if (!m) {
		buf_puts(&why, "record does not decode");
		goto done;
	}
	/* a record is the body of the operation that wrote it, with that
	 * operation's stamp; merged records need none */
	op.body_case = f->body;
	memcpy(&op.user, &m, sizeof(m));
	SET_STAMP(op, 1, 1, 1);
	op.origin = o->site;
	if (f->merge == RECORDS_LWW) {
		Grantd__V1__Stamped *st = grantd__v1__stamped__unpack(NULL, vlen,
								      val);
		if (!st) {
			buf_puts(&why, "record without a stamp");
			goto done;
		}
		op.hlc = st->hlc;
		op.origin = st->origin ? st->origin : "";
		rc = ops_check(&op, &why);
		if (rc == 0)
			rc = trust_stamp(o, t, op.hlc, op.origin, &why);
		if (rc == 0)
			rc = apply_body(o, b, &op);
		grantd__v1__stamped__free_unpacked(st, NULL);
	} else {
		rc = ops_check(&op, &why);
		/* failed attempts carry their own stamps: a peer's far-future
		 * one would keep the user locked, or dodge an unlock */
		if (rc == 0 && cf == CF_FAILS) {
			const Grantd__V1__Failures *fl = op.failure;
			for (size_t i = 0; rc == 0 && i < fl->n_hlc; i++)
				rc = trust_stamp(o, t, fl->hlc[i], fl->site,
						 &why);
		}
		if (rc == 0)
			rc = apply_body(o, b, &op);
	}
done:
	if (why_out && why.len)
		buf_puts(why_out, why.p);
	buf_free(&why);
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	return rc;
}

int ops_sweep_grants(struct ops *o, struct store_batch *b, int64_t now,
		     int max)
{
	struct store_iter *it;
	struct ops_save sp;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc = 0, n = 0;

	ops_savepoint(o, b, &sp);
	store_iter_new(&it, o->store, NULL, CF_GRANTS, "", 0);
	while (n < max && (rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Grant *g = grantd__v1__grant__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		bool old = g && g->expires + OPS_GRANT_GRACE_S < now;
		if (g)
			grantd__v1__grant__free_unpacked(g, NULL);
		if (!old)
			continue;
		toggle(o, CF_GRANTS, key, klen, v.p, v.len);
		count_record(o, o->counts, CF_GRANTS, v.p, v.len, -1, true);
		store_del(b, CF_GRANTS, key, klen);
		n++;
	}
	store_iter_free(&it);
	buf_free(&v);
	/* a scan that failed half-way takes back its deletions and their
	 * digest changes together */
	if (rc < 0) {
		ops_rollback(o, b, &sp);
		return rc;
	}
	ops_release(o, b);
	return n;
}

/* Each (origin, epoch) stream's run of old entries goes as one range
 * delete (store_delete_range): key-by-key tombstones made every later
 * truncation (each 30 s, or keep/2) and every range served step over all
 * that were ever cut, until compaction: a store that had cut 2.2 million
 * entries spent seconds per scan on the writer thread. */
static int cut_run(struct ops *o, const struct buf *first, uint64_t last_seq)
{
	uint8_t end[NAME_SITE_MAX + 1 + 16];

	if (first->len < 16 || first->len > sizeof(end))
		return 0; /* no run (a key is origin \0 epoch seq) */
	memcpy(end, first->p, first->len - 8);
	store_be64(end + first->len - 8, last_seq + 1);
	return store_delete_range(o->store, CF_OPLOG, first->p, first->len,
				  end, first->len);
}

int ops_truncate_log(struct ops *o, uint64_t cutoff_ms, int max)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, skip = BUF_INIT, first = BUF_INIT;
	const char *key;
	size_t klen;
	uint64_t last_seq = 0;
	int rc = 0, n = 0;

	store_iter_new(&it, o->store, NULL, CF_OPLOG, "", 0);
	while (n < max && (rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Op *op = grantd__v1__op__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		bool old = op && hlc_ms(op->hlc) < cutoff_ms;
		if (op)
			grantd__v1__op__free_unpacked(op, NULL);
		if (klen <= 16)
			continue;
		/* a new stream: cut the last one's run */
		if (first.len && (klen != first.len ||
				  memcmp(key, first.p, klen - 8))) {
			if ((rc = cut_run(o, &first, last_seq)) < 0)
				break;
			buf_reset(&first);
		}
		if (old) {
			if (!first.len)
				buf_add(&first, key, klen);
			last_seq = store_get_be64(key + klen - 8);
			n++;
			continue;
		}
		/* within one stream stamps grow with seq: once one is
		 * recent, cut the run before it and skip the rest of the
		 * stream (seek past origin \0 epoch, all-ones seq) */
		if ((rc = cut_run(o, &first, last_seq)) < 0)
			break;
		buf_reset(&first);
		buf_reset(&skip);
		buf_add(&skip, key, klen - 8);
		buf_add(&skip, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
		buf_add(&skip, "", 1);
		store_iter_seek(it, skip.p, skip.len);
	}
	store_iter_free(&it);
	if (rc >= 0)
		rc = cut_run(o, &first, last_seq);
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	buf_free(&skip);
	buf_free(&first);
	return rc < 0 ? rc : n;
}

static bool str_ok(const char *s, size_t max)
{
	return s && strnlen(s, max + 1) <= max;
}

void ops_wipe(Grantd__V1__Op *op)
{
	if (op && op->body_case == GRANTD__V1__OP__BODY_ENROLL &&
	    op->enroll && op->enroll->secret.data)
		sodium_memzero(op->enroll->secret.data, op->enroll->secret.len);
}

bool ops_oid_ok(const char *s)
{
	if (!s || strlen(s) != 40)
		return false;
	return strspn(s, "0123456789abcdef") == 40;
}

bool ops_ref_name_ok(const char *s)
{
	size_t n = s ? strnlen(s, 257) : 0;

	if (n < 6 || n > 255 || strncmp(s, "refs/", 5) ||
	    !strncmp(s, "refs/grantd/", 12) || s[n - 1] == '/' ||
	    s[n - 1] == '.' || strstr(s, "..") || strstr(s, "//") ||
	    strstr(s, "/.") || strstr(s, "@{") ||
	    (n >= 5 && !strcmp(s + n - 5, ".lock")))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c == 0x7f || strchr("~^:?*[\\", c))
			return false;
	}
	return true;
}

static bool opt_str_ok(const char *s, size_t max)
{
	if (!s)
		return true;
	if (strnlen(s, max + 1) > max)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* A push log entry: its shape, not its hash (a peer keeps and passes on
 * what its origin wrote; `grantctl log verify` judges the chain). */
static const char *pushlog_check(const Grantd__V1__Op *op)
{
	const Grantd__V1__PushLogEntry *e = op->push_log;
	char norm[NAME_REPO_MAX + 1];
	struct gd_net net;

	if (!e->origin || strcmp(e->origin, op->origin))
		return "push log entry of another origin";
	if (!e->n || !e->has_hlc || e->hlc != op->hlc)
		return "push log entry without number or stamp";
	if (e->prev.len != 32 || e->hash.len != 32)
		return "push log entry without its hashes";
	if (e->user && *e->user && !name_user_ok(e->user))
		return "bad user name";
	if (!opt_str_ok(e->key_fp, 100) || !opt_str_ok(e->key_kind, 16) ||
	    !opt_str_ok(e->factor, 32) ||
	    !str_ok(e->factor_detail ? e->factor_detail : "", 256))
		return "push log entry out of bounds";
	if (e->client_ip && *e->client_ip &&
	    (!str_ok(e->client_ip, 64) || addr_parse(&net, e->client_ip,
						     false) < 0))
		return "bad client address";
	if (!e->repo || name_repo_norm(norm, sizeof(norm), e->repo) < 0 ||
	    strcmp(norm, e->repo))
		return "bad repository name";
	if (e->push_id && !hookline_req_id_ok(e->push_id))
		return "bad push id";
	if (e->n_changes > OPS_MAX_REF_CHANGES)
		return "push log entry out of bounds";
	for (size_t i = 0; i < e->n_changes; i++) {
		const Grantd__V1__RefChange *c = e->changes[i];
		if (!ops_ref_name_ok(c->ref))
			return "bad ref name";
		if (!ops_oid_ok(c->old) || !ops_oid_ok(c->new_))
			return "bad object id";
	}
	return NULL;
}

int ops_check(const Grantd__V1__Op *op, struct buf *err)
{
	const char *why = NULL;

	if (!op->origin || !name_site_ok(op->origin))
		why = "bad origin";
	else if (!op->has_epoch || !op->epoch || !op->has_seq || !op->seq ||
		 !op->has_hlc || !op->hlc)
		why = "missing stamp";
	switch (op->body_case) {
	case GRANTD__V1__OP__BODY_USER:
		if (!op->user->name || !name_user_ok(op->user->name))
			why = "bad user name";
		else if (op->user->n_keys > OPS_MAX_KEYS)
			why = "too many keys";
		for (size_t i = 0; !why && i < op->user->n_keys; i++)
			if (!str_ok(op->user->keys[i], 16384) ||
			    !name_pubkey_ok(op->user->keys[i]))
				why = "bad ssh key";
		break;
	case GRANTD__V1__OP__BODY_ENROLL: {
		const Grantd__V1__Enrollment *e = op->enroll;
		if (!e->user || !name_user_ok(e->user))
			why = "bad user name";
		else if (e->secret.len > 128 || e->n_scratch > 16)
			why = "enrollment out of bounds";
		else if (!e->deleted &&
			 ((e->kind != GRANTD__V1__OTP_KIND__OTP_TOTP &&
			   e->kind != GRANTD__V1__OTP_KIND__OTP_HOTP) ||
			  (e->digits != 6 && e->digits != 8) ||
			  (e->kind == GRANTD__V1__OTP_KIND__OTP_TOTP &&
			   (e->period < 10 || e->period > 300)) ||
			  e->secret.len == 0))
			why = "bad enrollment settings";
		break;
	}
	case GRANTD__V1__OP__BODY_GRANT: {
		struct gd_net net;
		if (!op->grant->user || !name_user_ok(op->grant->user))
			why = "bad user name";
		else if (!op->grant->net ||
			 addr_parse(&net, op->grant->net, true) < 0)
			why = "bad grant address";
		else if (!str_ok(op->grant->net, 64) ||
			 !str_ok(op->grant->session ? op->grant->session : "",
				 256) ||
			 !str_ok(op->grant->site ? op->grant->site : "", 64))
			why = "grant out of bounds";
		break;
	}
	case GRANTD__V1__OP__BODY_MARK:
		if (!op->mark->user || !name_user_ok(op->mark->user))
			why = "bad user name";
		break;
	case GRANTD__V1__OP__BODY_FAILURE:
		if (!op->failure->user || !name_user_ok(op->failure->user) ||
		    !op->failure->site || !name_site_ok(op->failure->site) ||
		    op->failure->n_hlc > OPS_MAX_FAILURES_KEPT)
			why = "bad failure record";
		for (size_t i = 0; !why && i < op->failure->n_hlc; i++)
			if (!op->failure->hlc[i])
				why = "bad failure record";
		break;
	case GRANTD__V1__OP__BODY_UNLOCK:
		if (!op->unlock->user || !name_user_ok(op->unlock->user))
			why = "bad user name";
		break;
	case GRANTD__V1__OP__BODY_REVOKE:
		if (!op->revoke->user || !name_user_ok(op->revoke->user))
			why = "bad user name";
		break;
	case GRANTD__V1__OP__BODY_ADDR_REVOKE: {
		const Grantd__V1__AddrRevocation *ar = op->addr_revoke;
		struct gd_net net;
		char canon[ADDR_STRLEN];
		if (!ar->user || !name_user_ok(ar->user))
			why = "bad user name";
		else if (!ar->net || !str_ok(ar->net, 64) ||
			 addr_parse(&net, ar->net, true) < 0)
			why = "bad revoked address";
		if (!why) {
			/* one key per (user, net): a second spelling of it
			 * would be a second record */
			addr_format(canon, &net);
			if (strcmp(canon, ar->net))
				why = "bad revoked address";
		}
		break;
	}
	case GRANTD__V1__OP__BODY_REPO: {
		char norm[NAME_REPO_MAX + 1];
		const Grantd__V1__Repo *rp = op->repo;
		if (!rp->name || name_repo_norm(norm, sizeof(norm), rp->name) < 0 ||
		    strcmp(norm, rp->name))
			why = "bad repository name";
		else if (rp->fork_of && *rp->fork_of &&
			 (name_repo_norm(norm, sizeof(norm), rp->fork_of) < 0 ||
			  strcmp(norm, rp->fork_of)))
			why = "bad fork parent";
		else if (rp->mode != GRANTD__V1__REPO_MODE__MODE_OFF &&
			 rp->mode != GRANTD__V1__REPO_MODE__MODE_OPT_IN &&
			 rp->mode != GRANTD__V1__REPO_MODE__MODE_REQUIRED)
			why = "bad repository mode";
		else if (rp->n_writers > 4096)
			why = "too many writers";
		for (size_t i = 0; !why && i < rp->n_writers; i++)
			if (!rp->writers[i] || !name_user_ok(rp->writers[i]))
				why = "bad writer name";
		break;
	}
	case GRANTD__V1__OP__BODY_REFS: {
		char norm[NAME_REPO_MAX + 1];
		const Grantd__V1__RefUpdate *u = op->refs;
		if (!u->repo || name_repo_norm(norm, sizeof(norm), u->repo) < 0 ||
		    strcmp(norm, u->repo))
			why = "bad repository name";
		else if (u->n_changes == 0 || u->n_changes > OPS_MAX_REF_CHANGES)
			why = "ref update out of bounds";
		else if (u->push_id && !hookline_req_id_ok(u->push_id))
			why = "bad push id";
		for (size_t i = 0; !why && i < u->n_changes; i++) {
			const Grantd__V1__RefChange *c = u->changes[i];
			if (!ops_ref_name_ok(c->ref))
				why = "bad ref name";
			else if (!ops_oid_ok(c->old) || !ops_oid_ok(c->new_))
				why = "bad object id";
		}
		break;
	}
	case GRANTD__V1__OP__BODY_PUSH_LOG:
		if (!why)
			why = pushlog_check(op);
		break;
	default:
		why = "no body";
	}
	if (why) {
		buf_puts(err, why);
		return GD_EPROTO;
	}
	return 0;
}
