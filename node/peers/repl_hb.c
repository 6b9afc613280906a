/*
 * repl_hb.c: heartbeats and what each peer holds.  Every REPL_HEARTBEAT_MS
 * the PUB carries our version vector (and the digest, the syncing flag,
 * our [policy]); a peer's last heartbeat says who is ahead of us
 * (repl_hb_ahead, which repl_range.c fetches from), and what every peer
 * holds decides which finished epochs are retired (ops.h), so the vector
 * stays bounded.  A peer that asks (vv_req, repl_rebuild) gets the same
 * vector on the sync ROUTER.  The heartbeat also says this node's release
 * and features (peerfeatures.h); a peer's are kept with its heartbeat.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "peerfeatures.h"
#include "log.h"
#include "repl_int.h"
#include "xalloc.h"
#include "plheads.h"
#include "version.h"
#include "banned.h"

/* Every feature of this build, as Heartbeat.features (read only). */
static char *const hb_features[] = {
#define HB_FEATURE(id, name, desc) name,
        GD_FEATURES(HB_FEATURE)
#undef HB_FEATURE
};

/* Our whole vector as heartbeat entries; free with repl_hb_free. */
void repl_hb_fill(struct repl *r, Grantd__V1__Heartbeat *hb)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen, cap = 0, over = 0;
	const struct ops *o = r->ops;

	store_iter_new(&it, r->store, NULL, CF_VV, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0) {
		size_t ol = strnlen(key, klen);
		if (ol + 1 + 8 != klen || v.len != 8)
			continue;
		/* never more than a peer takes (repl_hb_take); our own
		 * stream always has its place */
		bool ours = ol == strlen(ops_site(o)) &&
		            !memcmp(key, ops_site(o), ol) &&
		            store_get_be64(key + ol + 1) == ops_epoch(o);
		if (hb->n_vv >= MAX_VV - 1 && !ours) {
			over++;
			continue;
		}
		GD_GROW(hb->vv, cap, hb->n_vv + 1);
		Grantd__V1__VvEntry *e = xmalloc(sizeof(*e));
		grantd__v1__vv_entry__init(e);
		e->origin = xstrndup(key, ol);
		e->epoch = store_get_be64(key + ol + 1), e->has_epoch = 1;
		e->seq = store_get_be64(v.p), e->has_seq = 1;
		/* our own stream: only what is durable and published */
		if (!strcmp(e->origin, ops_site(r->ops)) &&
		    e->epoch == ops_epoch(r->ops) &&
		    e->seq > ops_published(r->ops))
			e->seq = ops_published(r->ops);
		hb->vv[hb->n_vv++] = e;
	}
	store_iter_free(&it);
	buf_free(&v);
	if (over && clock_mono_ms() - r->last_cap_log_ms > 60000) {
		r->last_cap_log_ms = clock_mono_ms();
		log_warn("heartbeat vector capped entries=%zu sent=%zu: "
		         "finished "
		         "epochs are retired only once every peer holds them",
		         hb->n_vv + over, hb->n_vv);
	}
	hb->hlc = ops_hlc_last(r->ops), hb->has_hlc = 1;
	hb->digest.data = (uint8_t *)ops_digest(r->ops);
	hb->digest.len = DIGEST_LEN, hb->has_digest = 1;
	hb->syncing = r->syncing, hb->has_syncing = 1;
	hb->policy = &r->hb_policy;
	hb->release = (char *)GRANTD_VERSION; /* not freed: repl_hb_free */
	hb->features = (char **)hb_features;
	hb->n_features = GD_ARRAY_SIZE(hb_features);
}

void repl_hb_free(Grantd__V1__Heartbeat *hb)
{
	for (size_t i = 0; i < hb->n_vv; i++) {
		free(hb->vv[i]->origin);
		free(hb->vv[i]);
	}
	free(hb->vv);
	hb->vv = NULL;
	hb->n_vv = 0;
}

/* Our vector as a heartbeat in m (hb filled: repl_hb_free after the
 * send): on PUB every 250 ms, or to the peer that asked (vv_req). */
void repl_hb_vector_msg(struct repl *r,
                        Grantd__V1__PeerMsg *m,
                        Grantd__V1__Heartbeat *hb)
{
	peer_msg_init(r->self, m);
	repl_hb_fill(r, hb);
	m->body_case = GRANTD__V1__PEER_MSG__BODY_HEARTBEAT;
	m->heartbeat = hb;
}

static void send_vector(struct repl *r)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;

	repl_hb_vector_msg(r, &m, &hb);
	peer_send(r->pub, &m, NULL, 0);
	repl_hb_free(&hb);
}

void repl_hb_on_vv_req(const struct peer_req *rq, void *payload)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;

	repl_hb_vector_msg(payload, &m, &hb);
	if (repl_mirror_to(payload, rq->site)) /* as repl_mirror_on_sub */
		hb.has_digest = 0, hb.digest.len = 0;
	peer_reply(rq, &m);
	repl_hb_free(&hb);
}

/* The seqs of our epochs of origin that peer p's heartbeat does not list:
 * epochs it has retired and we not yet (ops_vv_follow), so its retired
 * total is ahead of ours by them without p holding anything we lack. */
static uint64_t
unlisted(struct repl *r, const struct repl_peer *p, const char *origin)
{
	const struct ops *o = r->ops;
	uint64_t sum = 0;

	for (size_t i = 0; i < ops_vv_count(o); i++) {
		bool listed = false;
		if (ops_vv_at(o, i)->epoch == OPS_VV_RETIRED ||
		    ops_vv_at(o, i)->retired ||
		    strcmp(ops_vv_at(o, i)->origin, origin))
			continue;
		for (size_t j = 0; !listed && j < p->hb->n_vv; j++)
			listed =
			        p->hb->vv[j]->epoch == ops_vv_at(o, i)->epoch &&
			        !strcmp(p->hb->vv[j]->origin, origin);
		if (!listed)
			sum += ops_vv_at(o, i)->seq;
	}
	return sum;
}

/* The first entry where peer p is ahead of us; NULL when level.  Also
 * counts how far behind we are in total. */
const Grantd__V1__VvEntry *
repl_hb_ahead(struct repl *r, struct repl_peer *p, uint64_t *lag)
{
	const Grantd__V1__VvEntry *first = NULL;

	*lag = 0;
	if (!p->hb)
		return NULL;
	for (size_t i = 0; i < p->hb->n_vv; i++) {
		const Grantd__V1__VvEntry *e = p->hb->vv[i];
		uint64_t have = ops_vv_get(r->ops, NULL, e->origin, e->epoch);
		const struct repl_peer *q = repl_peer_by_site(r, e->origin);
		/* an epoch its origin retired and our total holds: p has
		 * not followed the retirement yet (ops_vv_covered) */
		if (e->seq > have && q && q != p && q->hb &&
		    ops_vv_covered(r->ops, e->origin, e->epoch, q->hb->vv,
		                   q->hb->n_vv))
			continue;
		/* no vector of origin's to ask (our own earlier epochs after
		 * a rebuild, an origin that is down), but p's totals show it
		 * has not followed a retirement we hold */
		if (e->seq > have && (!q || !q->hb) &&
		    ops_vv_inside_total(r->ops, e->origin, e->epoch, p->hb->vv,
		                        p->hb->n_vv))
			continue;
		if (e->epoch == OPS_VV_RETIRED && e->seq > have)
			have += unlisted(r, p, e->origin);
		if (e->seq > have) {
			*lag += e->seq - have;
			if (!first)
				first = e;
		}
	}
	return first;
}

/* A release or feature name a peer may show: printable, no space, at
 * most FEATURES_NAME_MAX. */
static bool name_shown_ok(const char *s)
{
	size_t n = strnlen(s, FEATURES_NAME_MAX + 1);

	if (n == 0 || n > FEATURES_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

/* Cut hb's release and features to what name_shown_ok takes and
 * FEATURES_MAX names; how many were cut. */
static size_t take_features(Grantd__V1__Heartbeat *hb)
{
	size_t kept = 0, cut = 0;

	if (hb->release && !name_shown_ok(hb->release)) {
		free(hb->release);
		hb->release = NULL;
		cut++;
	}
	for (size_t i = 0; i < hb->n_features; i++) {
		if (kept < FEATURES_MAX && name_shown_ok(hb->features[i])) {
			hb->features[kept++] = hb->features[i];
			continue;
		}
		free(hb->features[i]);
		cut++;
	}
	hb->n_features = kept;
	return cut;
}

/* Keep p's heartbeat, with what fits of its vector: entries past MAX_VV
 * and entries with a bad origin are cut (logged and counted), never the
 * whole heartbeat. */
void repl_hb_take(struct repl *r, struct repl_peer *p, Grantd__V1__PeerMsg *m)
{
	Grantd__V1__Heartbeat *hb = m->heartbeat;
	size_t kept = 0, bad = 0, over = 0;

	if (p->hb)
		grantd__v1__heartbeat__free_unpacked(p->hb, NULL);
	peerpolicy_take(&r->policy, p->cfg->site, hb->policy);
	/* keep the heartbeat, free the envelope */
	p->hb = hb;
	m->heartbeat = NULL;
	m->body_case = GRANTD__V1__PEER_MSG__BODY__NOT_SET;
	for (size_t i = 0; i < hb->n_vv; i++) {
		Grantd__V1__VvEntry *e = hb->vv[i];
		if (!e->origin || !name_site_ok(e->origin))
			bad++;
		else if (kept == MAX_VV)
			over++;
		else {
			hb->vv[kept++] = e;
			continue;
		}
		grantd__v1__vv_entry__free_unpacked(e, NULL);
	}
	if (bad || over)
		repl_stat_refuse(r, DROP_HB_VECTOR, 1,
		                 "heartbeat vector cut peer=%s "
		                 "entries=%zu kept=%zu bad=%zu over_limit=%zu "
		                 "(at most %d)",
		                 p->cfg->site, hb->n_vv, kept, bad, over,
		                 MAX_VV);
	hb->n_vv = kept;
	if ((bad = take_features(hb)) > 0)
		repl_stat_refuse(r, DROP_HB_VECTOR, 1,
		                 "heartbeat release or features cut peer=%s "
		                 "cut=%zu (at most %d names of %d characters)",
		                 p->cfg->site, bad, FEATURES_MAX,
		                 FEATURES_NAME_MAX);
}

const char *repl_peer_release(const struct repl_peer *p)
{
	if (!p->hb)
		return NULL;
	return p->hb->release ? p->hb->release : REPL_RELEASE_OLD;
}

bool repl_peer_has(const struct repl_peer *p, enum feature f)
{
	for (size_t i = 0; p->hb && i < p->hb->n_features; i++)
		if (!strcmp(p->hb->features[i], peerfeatures_name(f)))
			return true;
	return false;
}

bool repl_feature_everywhere(struct repl *r, enum feature f)
{
	for (int i = 0; i < r->npeers; i++)
		if (r->peers[i].cfg->role == CONFIG_ROLE_FRONTEND &&
		    !repl_peer_has(&r->peers[i], f))
			return false;
	return true;
}

/* The vector peer p last showed us (*vv NULL: none yet), or false when
 * p does not count for retiring epochs: two mirrors, or a mirror that
 * never subscribed (it catches up by state transfer if it comes). */
static bool
peer_vv(const struct repl_peer *p, Grantd__V1__VvEntry *const **vv, size_t *n)
{
	*vv = NULL;
	*n = 0;
	if (p->link == LINK_NONE || (p->link == LINK_FEED_OUT && !p->msub))
		return false;
	if (p->link == LINK_FEED_OUT) {
		*vv = p->msub->mirror_sub->vv;
		*n = p->msub->mirror_sub->n_vv;
	} else if (p->hb) {
		*vv = p->hb->vv;
		*n = p->hb->n_vv;
	}
	return true;
}

/* Does every peer's last heartbeat hold (origin, epoch) up to seq? */
static bool
peers_hold(const char *origin, uint64_t epoch, uint64_t seq, void *payload)
{
	struct repl *r = payload;

	for (int i = 0; i < r->npeers; i++) {
		Grantd__V1__VvEntry *const *vv;
		size_t n;
		bool held = false;
		if (!peer_vv(&r->peers[i], &vv, &n))
			continue;
		for (size_t j = 0; vv && !held && j < n; j++)
			held = vv[j]->epoch == epoch && vv[j]->seq >= seq &&
			       !strcmp(vv[j]->origin, origin);
		if (!held)
			return false;
	}
	return true;
}

/* Has every peer retired (origin, epoch) too: its last heartbeat does not
 * list it, and its retired total of origin is at least ours (total)? */
static bool
peers_retired(const char *origin, uint64_t epoch, uint64_t total, void *payload)
{
	struct repl *r = payload;

	for (int i = 0; i < r->npeers; i++) {
		Grantd__V1__VvEntry *const *vv;
		size_t n;
		uint64_t theirs = 0;
		if (!peer_vv(&r->peers[i], &vv, &n))
			continue;
		if (!vv)
			return false;
		for (size_t j = 0; j < n; j++) {
			if (strcmp(vv[j]->origin, origin))
				continue;
			if (vv[j]->epoch == epoch)
				return false;
			if (vv[j]->epoch == OPS_VV_RETIRED)
				theirs = vv[j]->seq;
		}
		if (theirs < total)
			return false;
	}
	return true;
}

/* Retire our finished epochs that every peer holds, follow what each
 * peer's heartbeat shows it retired of its own, and forget retired epochs
 * every peer has retired too (ops.h). */
static void retire_epochs(struct repl *r)
{
	struct ops *o = r->ops;
	int k = ops_vv_retire_own(o, r->batch, peers_hold, r), f;

	for (int i = 0; i < r->npeers; i++)
		if (r->peers[i].hb)
			k += ops_vv_follow(o, r->batch, r->peers[i].cfg->site,
			                   r->peers[i].hb->vv,
			                   r->peers[i].hb->n_vv);
	f = ops_vv_forget(o, r->batch, peers_retired, r);
	if (k > 0 || f > 0) {
		r->dirty = true;
		log_info("finished epochs retired n=%d forgotten=%d vector=%zu",
		         k, f, ops_vv_count(o));
	}
}

/* A peer's push log heads (its PUB): kept for log verify. */
void repl_hb_take_plheads(struct repl *r,
                          struct repl_peer *p,
                          const Grantd__V1__PushLogHeads *h)
{
	struct buf why = BUF_INIT;
	int rc = plheads_take(r->store, r->batch, p->cfg->site, h, &why);

	if (rc < 0)
		log_error("push log heads of peer=%s not kept: %s",
		          p->cfg->site, gd_strerror(rc));
	else if (rc > 0)
		repl_stat_refuse(r, DROP_HB_VECTOR, (uint64_t)rc,
		                 "push log heads "
		                 "dropped peer=%s: %s",
		                 p->cfg->site, why.p);
	buf_free(&why);
}

/* The heads of this site's push log chains, for the peers' `log verify`
 * (plheads.h). */
static void send_plheads(struct repl *r)
{
	Grantd__V1__PushLogHeads h;
	Grantd__V1__PeerMsg m;
	int rc;

	if ((rc = plheads_build(r->store, &h)) < 0) {
		log_error("push log heads not sent: %s", gd_strerror(rc));
		return;
	}
	peer_msg_init(r->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PUSHLOG_HEADS;
	m.pushlog_heads = &h;
	peer_send(r->pub, &m, NULL, 0);
	plheads_free(&h);
}

void repl_hb_tick(struct repl *r, uint64_t now_ms)
{
	if (r->pub && now_ms - r->last_hb_ms >= REPL_HEARTBEAT_MS) {
		r->last_hb_ms = now_ms;
		send_vector(r);
	}
	if (now_ms - r->last_retire_ms >= RETIRE_MS && !r->xfer.p) {
		r->last_retire_ms = now_ms;
		retire_epochs(r);
	}
	if (r->pub && now_ms - r->last_plheads_ms >= PLHEADS_MS) {
		r->last_plheads_ms = now_ms;
		send_plheads(r);
	}
}
