/*
 * plheads.c: the push log heads peers report (plheads.h).
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "names.h"
#include "ops.h"
#include "plheads.h"
#include "xalloc.h"
#include "banned.h"

/* "plpeer" \0 peer \0 origin, in CF_META */
#define META_PLPEER "plpeer"

static void peer_key(struct buf *k, const char *peer, const char *origin)
{
	buf_reset(k);
	buf_add(k, META_PLPEER, sizeof(META_PLPEER));
	buf_add(k, peer, strlen(peer) + 1);
	buf_puts(k, origin);
}

int plheads_build(struct store *s, Grantd__V1__PushLogHeads *out)
{
	struct ops_pushlog_head *h = NULL;
	int n = ops_pushlog_heads(&h, s);

	grantd__v1__push_log_heads__init(out);
	if (n < 0)
		return n;
	out->heads = xcalloc(n ? (size_t)n : 1, sizeof(*out->heads));
	for (int i = 0; i < n && i < PLHEADS_MAX; i++) {
		Grantd__V1__PushLogHead *e =
		        xmalloc(sizeof(*e) + OPS_PUSHLOG_HASH);
		grantd__v1__push_log_head__init(e);
		e->origin = xstrdup(h[i].origin);
		e->n = h[i].n, e->has_n = 1;
		e->hash.data = (uint8_t *)(e + 1);
		memcpy(e->hash.data, h[i].hash, OPS_PUSHLOG_HASH);
		e->hash.len = OPS_PUSHLOG_HASH, e->has_hash = 1;
		out->heads[out->n_heads++] = e;
	}
	free(h);
	return 0;
}

void plheads_free(Grantd__V1__PushLogHeads *m)
{
	for (size_t i = 0; i < m->n_heads; i++) {
		free(m->heads[i]->origin);
		free(m->heads[i]);
	}
	free(m->heads);
	m->heads = NULL;
	m->n_heads = 0;
}

int plheads_take(struct store *s,
                 struct store_batch *b,
                 const char *peer,
                 const Grantd__V1__PushLogHeads *m,
                 struct buf *why)
{
	struct buf k = BUF_INIT, old = BUF_INIT;
	uint8_t v[8 + OPS_PUSHLOG_HASH];
	int refused = 0, rc = 0;

	if (m->n_heads > PLHEADS_MAX) {
		buf_printf(why, "%zu heads (at most %d)", m->n_heads,
		           PLHEADS_MAX);
		return (int)m->n_heads;
	}
	for (size_t i = 0; i < m->n_heads; i++) {
		const Grantd__V1__PushLogHead *e = m->heads[i];
		if (!e->origin || !name_site_ok(e->origin) || !e->n ||
		    e->hash.len != OPS_PUSHLOG_HASH) {
			if (!refused++)
				buf_puts(why, "a head without a site name, "
				              "number or 32-byte hash");
			continue;
		}
		store_be64(v, e->n);
		memcpy(v + 8, e->hash.data, OPS_PUSHLOG_HASH);
		peer_key(&k, peer, e->origin);
		rc = store_get(s, b, CF_META, k.p, k.len, &old);
		if (rc == 0 && old.len == sizeof(v) &&
		    !memcmp(old.p, v, sizeof(v)))
			continue;
		if (rc < 0 && rc != GD_ENOTFOUND)
			break;
		rc = 0;
		store_put(b, CF_META, k.p, k.len, v, sizeof(v));
	}
	buf_free(&k);
	buf_free(&old);
	return rc < 0 ? rc : refused;
}

int plheads_list(struct store *s, struct plheads_peer **out)
{
	struct plheads_peer *h = NULL;
	struct store_iter *it = NULL;
	struct buf v = BUF_INIT;
	const char *key, *peer, *origin;
	size_t klen, n = 0, cap = 0, pl = sizeof(META_PLPEER);
	int rc;

	*out = NULL;
	if ((rc = store_iter_new(&it, s, NULL, CF_META, META_PLPEER, pl)) < 0)
		return rc;
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		const char *nul;
		if (klen <= pl || v.len != 8 + OPS_PUSHLOG_HASH)
			continue;
		peer = key + pl;
		nul = memchr(peer, '\0', klen - pl);
		if (!nul || nul == peer || (size_t)(nul - peer) >= 65)
			continue;
		origin = nul + 1;
		if ((size_t)(key + klen - origin) >= 65 || origin == key + klen)
			continue;
		GD_GROW(h, cap, n + 1);
		memcpy(h[n].peer, peer, (size_t)(nul - peer));
		h[n].peer[nul - peer] = '\0';
		memcpy(h[n].origin, origin, (size_t)(key + klen - origin));
		h[n].origin[key + klen - origin] = '\0';
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
