/*
 * ops_derived.c: local families this node derives from the replicated
 * ones, in the same batch: SSH keys by fingerprint (CF_KEYFP, from
 * CF_USERS), the push request ids recorded here (grant-hook's resends),
 * and the heads of each origin's push log chain and the fork count (both
 * in CF_META), and two reads of a push log entry the set rule uses (its
 * stamp, its hash in hex).  Also the test fault that drops the newest push
 * log entries.
 */
#include <stdlib.h>
#include <string.h>

#include "crashpoint.h"
#include "err.h"
#include "log.h"
#include "ops_int.h"
#include "pushlog.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

/* Index (put) or forget the keys of the user record rec. */
void ops_keyfp_index(struct store_batch *b, const void *rec, size_t len,
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
int ops_keyfp_open(struct ops *o, struct store_batch *b)
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
		ops_keyfp_index(b, v.p, v.len, true);
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

int ops_pushlog_drop_tail(struct ops *o)
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
			ops_digest_toggle(o, CF_PUSHLOG, k.p, k.len, v.p,
					  v.len);
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
int ops_push_remember(struct ops *o, struct store_batch *b,
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
		GD_GROW(h, cap, n + 1);
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

int ops_pushlog_forks(struct ops *o, struct store_batch *b, uint64_t *n)
{
	return ops_meta_u64_in(o->store, b, META_PLFORKS, n);
}

int ops_pushlog_fork_counted(struct ops *o, struct store_batch *b)
{
	uint64_t forks;
	int rc = ops_pushlog_forks(o, b, &forks);

	if (rc == 0)
		ops_meta_put_u64(b, META_PLFORKS, forks + 1);
	return rc;
}

void ops_pushlog_head_put(struct store_batch *b, const char *origin,
			  uint64_t n, const uint8_t hash[OPS_PUSHLOG_HASH])
{
	struct buf k = BUF_INIT;
	uint8_t hv[8 + OPS_PUSHLOG_HASH];

	store_be64(hv, n);
	memcpy(hv + 8, hash, OPS_PUSHLOG_HASH);
	plhead_key(&k, origin);
	store_put(b, CF_META, k.p, k.len, hv, sizeof(hv));
	buf_free(&k);
}

void ops_pushlog_hash_hex(char out[2 * OPS_PUSHLOG_HASH + 1],
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
int ops_pushlog_stamp(struct ops *o, struct store_batch *b, const char *origin,
		      uint64_t n, uint64_t *hlc)
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
