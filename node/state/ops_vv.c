/*
 * ops_vv.c: the version vector: the cache of CF_VV (every change goes
 * through here, so the cache is the store's vector; a changed entry is
 * written once, at ops_commit), and the retirement of finished epochs
 * (retire own, follow, covered, raise retired, forget: ops.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ops_int.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

static struct ops_vv *
vv_find(struct ops *o, const char *origin, uint64_t epoch, bool add)
{
	for (size_t i = 0; i < o->nvv; i++)
		if (o->vv[i].epoch == epoch && !strcmp(o->vv[i].origin, origin))
			return &o->vv[i];
	if (!add || strlen(origin) >= sizeof(o->vv[0].origin))
		return NULL;
	GD_GROW(o->vv, o->capvv, o->nvv + 1);
	struct ops_vv *e = &o->vv[o->nvv++];
	snprintf(e->origin, sizeof(e->origin), "%s", origin);
	e->epoch = epoch;
	e->seq = 0;
	e->retired = false;
	e->dirty = false;
	return e;
}

uint64_t ops_vv_get(struct ops *o,
                    struct store_batch *b,
                    const char *origin,
                    uint64_t epoch)
{
	(void)b;
	struct ops_vv *e = vv_find(o, origin, epoch, false);
	return e ? e->seq : 0;
}

bool ops_vv_lists(struct ops *o, const char *origin, uint64_t epoch)
{
	const struct ops_vv *e = vv_find(o, origin, epoch, false);

	return e && !e->retired;
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

void ops_vv_set(struct ops *o,
                struct store_batch *b,
                const char *origin,
                uint64_t epoch,
                uint64_t seq)
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
void ops_vv_flush(struct ops *o, struct store_batch *b)
{
	for (size_t i = 0; i < o->nvv; i++)
		if (o->vv[i].dirty) {
			vv_put(b, &o->vv[i]);
			o->vv[i].dirty = false;
		}
}

/* Load the vector cache from the committed store (ops_int.h). */
int ops_vv_load(struct ops *o)
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
		struct ops_vv *e =
		        vv_find(o, origin, store_get_be64(key + ol + 1), true);
		if (e)
			e->seq = store_get_be64(v.p), e->retired = v.len == 9;
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

void ops_vv_raise(struct ops *o,
                  struct store_batch *b,
                  const char *origin,
                  uint64_t epoch,
                  uint64_t seq)
{
	const struct ops_vv *e = vv_find(o, origin, epoch, false);

	/* a retired epoch is finished: its total is already counted */
	if (seq > ops_vv_get(o, b, origin, epoch) && !(e && e->retired))
		ops_vv_set(o, b, origin, epoch, seq);
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
	ops_vv_set(o, b, o->vv[i].origin, OPS_VV_RETIRED,
	           ops_vv_get(o, b, o->vv[i].origin, OPS_VV_RETIRED) +
	                   o->vv[i].seq);
}

int ops_vv_retire_own(struct ops *o,
                      struct store_batch *b,
                      bool (*held)(const char *origin,
                                   uint64_t epoch,
                                   uint64_t seq,
                                   void *payload),
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

static bool vv_lists(Grantd__V1__VvEntry *const *vv,
                     size_t n,
                     const char *origin,
                     uint64_t epoch)
{
	for (size_t i = 0; i < n; i++)
		if (vv[i]->epoch == epoch && vv[i]->origin &&
		    !strcmp(vv[i]->origin, origin))
			return true;
	return false;
}

int ops_vv_follow(struct ops *o,
                  struct store_batch *b,
                  const char *origin,
                  Grantd__V1__VvEntry *const *vv,
                  size_t n)
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
static uint64_t
vv_total(Grantd__V1__VvEntry *const *vv, size_t n, const char *origin)
{
	for (size_t i = 0; i < n; i++)
		if (vv[i]->epoch == OPS_VV_RETIRED && vv[i]->origin &&
		    !strcmp(vv[i]->origin, origin))
			return vv[i]->seq;
	return 0;
}

bool ops_vv_covered(struct ops *o,
                    const char *origin,
                    uint64_t epoch,
                    Grantd__V1__VvEntry *const *vv,
                    size_t n)
{
	uint64_t ours = ops_vv_get(o, NULL, origin, OPS_VV_RETIRED);

	if (!vv || !n || epoch == OPS_VV_RETIRED || !ours ||
	    !strcmp(origin, o->site) || vv_lists(vv, n, origin, epoch))
		return false;
	return vv_total(vv, n, origin) <= ours;
}

bool ops_vv_inside_total(struct ops *o,
                         const char *origin,
                         uint64_t epoch,
                         Grantd__V1__VvEntry *const *vv,
                         size_t n)
{
	uint64_t ours = ops_vv_get(o, NULL, origin, OPS_VV_RETIRED);
	uint64_t theirs = vv_total(vv, n, origin), unlisted = 0;
	bool listed = false;

	if (!vv || epoch == OPS_VV_RETIRED || ours <= theirs)
		return false;
	for (size_t i = 0; i < n; i++) {
		const Grantd__V1__VvEntry *e = vv[i];
		if (e->epoch == OPS_VV_RETIRED || !e->origin ||
		    strcmp(e->origin, origin))
			continue;
		const struct ops_vv *mine = vv_find(o, origin, e->epoch, false);
		if (mine && !mine->retired)
			continue;
		/* one we retired is in our total with our count: it explains
		 * that much of the difference, not the epoch asked about */
		listed |= !mine && e->epoch == epoch;
		unlisted += mine ? mine->seq : e->seq;
	}
	return listed && ours == theirs + unlisted;
}

int ops_vv_raise_retired(struct ops *o,
                         struct store_batch *b,
                         const char *origin,
                         uint64_t total,
                         Grantd__V1__VvEntry *const *own,
                         size_t n_own,
                         Grantd__V1__VvEntry *const *sent,
                         size_t n_sent)
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

int ops_vv_forget(struct ops *o,
                  struct store_batch *b,
                  bool (*gone)(const char *origin,
                               uint64_t epoch,
                               uint64_t total,
                               void *payload),
                  void *payload)
{
	struct buf k = BUF_INIT;
	int n = 0;

	for (size_t i = 0; i < o->nvv;) {
		const struct ops_vv *e = &o->vv[i];
		if (!e->retired ||
		    !gone(e->origin, e->epoch,
		          ops_vv_get(o, b, e->origin, OPS_VV_RETIRED),
		          payload)) {
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
