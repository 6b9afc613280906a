/*
 * repl_mirror.c: the read-only mirrors' feed (docs/mirrors.md).  A
 * frontend neither subscribes to a mirror nor lets it on PUB; the
 * mirror's DEALER subscribes on the frontend's sync ROUTER (mirror_sub,
 * every REPL_HEARTBEAT_MS, a MIRROR_LEASE_MS lease), and the frontend
 * pushes it mirror_ops after each publish and answers its ranges
 * filtered: an operation a mirror may not hold (ops_mirror_visible) goes
 * as its stamp alone, which the mirror takes with ops_skip.  A frontend
 * without mirrors never gets here.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "records.h"
#include "repl_int.h"
#include "xalloc.h"
#include "banned.h"

/* Operations as a mirror receives them (MirrorOps): each with its stamp,
 * and its bytes only when a mirror may hold what it writes. */
struct mops {
	Grantd__V1__MirrorOps mo;
	Grantd__V1__MirrorOp *items;
	Grantd__V1__MirrorOp **ptrs;
	Grantd__V1__Op **ops; /* unpacked, for their stamps (owned) */
	size_t n;
};

/* Is site a mirror this node feeds (LINK_FEED_OUT)? */
bool repl_mirror_to(struct repl *r, const char *site)
{
	const struct repl_peer *p = site ? repl_peer_by_site(r, site) : NULL;

	return p && p->link == LINK_FEED_OUT;
}

/* raw (n packed Ops) is borrowed and must outlive b's sending. */
static void mops_build(struct mops *b, const ProtobufCBinaryData *raw, size_t n)
{
	memset(b, 0, sizeof(*b));
	grantd__v1__mirror_ops__init(&b->mo);
	b->items = xcalloc(n, sizeof(*b->items));
	b->ptrs = xcalloc(n, sizeof(*b->ptrs));
	b->ops = xcalloc(n, sizeof(*b->ops));
	for (size_t i = 0; i < n; i++) {
		Grantd__V1__Op *op =
		        grantd__v1__op__unpack(NULL, raw[i].len, raw[i].data);
		if (!op)
			continue; /* our own log: the mirror finds the gap */
		Grantd__V1__MirrorOp *e = &b->items[b->n];
		grantd__v1__mirror_op__init(e);
		e->origin = op->origin;
		e->epoch = op->epoch, e->has_epoch = 1;
		e->seq = op->seq, e->has_seq = 1;
		e->hlc = op->hlc, e->has_hlc = 1;
		if (ops_mirror_visible(op)) {
			e->op = raw[i];
			e->has_op = 1;
		}
		b->ops[b->n] = op;
		b->ptrs[b->n++] = e;
	}
	b->mo.ops = b->ptrs;
	b->mo.n_ops = b->n;
}

static void mops_free(struct mops *b)
{
	for (size_t i = 0; i < b->n; i++) {
		records_op_wipe(b->ops[i]);
		grantd__v1__op__free_unpacked(b->ops[i], NULL);
	}
	free(b->items);
	free(b->ptrs);
	free(b->ops);
	memset(b, 0, sizeof(*b));
}

int repl_mirror_reply_range(struct repl *r,
                            const struct peer_req *req,
                            const Grantd__V1__RangeRep *rep)
{
	Grantd__V1__PeerMsg m;
	struct mops mb;
	int sent;

	mops_build(&mb, rep->ops, rep->n_ops);
	mb.mo.range = mb.mo.has_range = 1;
	mb.mo.origin = rep->origin;
	mb.mo.epoch = rep->epoch, mb.mo.has_epoch = 1;
	mb.mo.from = rep->from, mb.mo.has_from = 1;
	mb.mo.truncated = rep->truncated;
	mb.mo.has_truncated = rep->has_truncated;
	peer_msg_init(r->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_MIRROR_OPS;
	m.mirror_ops = &mb.mo;
	sent = peer_reply(req, &m);
	mops_free(&mb);
	return sent;
}

/* How many operations mirror p (LINK_FEED_OUT) lacks of those we hold,
 * by its last mirror_sub; 0 when it never subscribed. */
uint64_t repl_mirror_lag_ops(struct repl *r, const struct repl_peer *p)
{
	const struct ops *o = r->ops;
	uint64_t lag = 0;

	if (!p->msub)
		return 0;
	const Grantd__V1__MirrorSub *ms = p->msub->mirror_sub;
	for (size_t i = 0; i < ops_vv_count(o); i++) {
		uint64_t ours = ops_vv_at(o, i)->seq, theirs = 0;
		if (ops_vv_at(o, i)->epoch == OPS_VV_RETIRED || ops_vv_at(o, i)->retired)
			continue;
		if (!strcmp(ops_vv_at(o, i)->origin, ops_site(o)) &&
		    ops_vv_at(o, i)->epoch == ops_epoch(o) && ours > ops_published(o))
			ours = ops_published(o);
		for (size_t j = 0; j < ms->n_vv; j++)
			if (ms->vv[j]->epoch == ops_vv_at(o, i)->epoch &&
			    !strcmp(ms->vv[j]->origin, ops_vv_at(o, i)->origin))
				theirs = ms->vv[j]->seq;
		if (ours > theirs)
			lag += ours - theirs;
	}
	return lag;
}

/* A mirror subscribes (or renews its lease): keep its routing id and its
 * vector, and answer with ours, from which it finds what it lacks (it
 * asks for ranges, answered filtered: serve_range).  Until the lease
 * runs out, repl_publish pushes it our operations as they are made. */
void repl_mirror_on_sub(const struct peer_req *rq, void *payload)
{
	struct repl *r = payload;
	struct repl_peer *p = repl_peer_by_site(r, rq->site);
	uint64_t now_ms = clock_mono_ms();
	Grantd__V1__PeerMsg *m, hbm;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	size_t bad = 0;

	if (!p || p->link != LINK_FEED_OUT || rq->ridlen > RID_MAX) {
		/* a frontend (or we are a mirror): no feed here */
		repl_dropped(r, 1);
		return;
	}
	m = grantd__v1__peer_msg__unpack(NULL, rq->len, rq->frame);
	if (!m || m->body_case != GRANTD__V1__PEER_MSG__BODY_MIRROR_SUB) {
		if (m)
			grantd__v1__peer_msg__free_unpacked(m, NULL);
		repl_dropped(r, 1);
		return;
	}
	for (size_t i = 0; i < m->mirror_sub->n_vv; i++)
		bad += !m->mirror_sub->vv[i]->origin ||
		       !name_site_ok(m->mirror_sub->vv[i]->origin);
	if (bad || m->mirror_sub->n_vv > MAX_VV) {
		repl_stat_refuse(r, DROP_HB_VECTOR, 1,
		                 "mirror subscription dropped "
		                 "peer=%s entries=%zu bad=%zu (at most %d)",
		                 rq->site, m->mirror_sub->n_vv, bad, MAX_VV);
		grantd__v1__peer_msg__free_unpacked(m, NULL);
		return;
	}
	if (now_ms >= p->lease_until_ms)
		log_info("mirror subscribed peer=%s lease_ms=%d", rq->site,
		         MIRROR_LEASE_MS);
	if (p->msub)
		grantd__v1__peer_msg__free_unpacked(p->msub, NULL);
	p->msub = m;
	memcpy(p->rid, rq->rid, rq->ridlen);
	p->ridlen = rq->ridlen;
	p->lease_until_ms = now_ms + MIRROR_LEASE_MS;
	p->last_heard_ms = now_ms;
	if (!repl_mirror_lag_ops(r, p))
		p->behind_since_ms = 0;
	else if (!p->behind_since_ms)
		p->behind_since_ms = now_ms;
	repl_hb_vector_msg(r, &hbm, &hb);
	/* the full digest covers families a mirror must not hold: it gets
	 * none (it compares digest_public instead) */
	hb.has_digest = 0;
	hb.digest.len = 0;
	peer_reply(rq, &hbm);
	repl_hb_free(&hb);
}

/* One operation a mirror gets as its stamp alone (MirrorOp without op):
 * the checks a live operation gets, then only the vector moves. */
static void mirror_skip(struct repl *r,
                        struct repl_peer *p,
                        const Grantd__V1__MirrorOp *e,
                        uint64_t now_ms)
{
	bool applied;
	int rc;

	if (!repl_origin_known(r, e->origin) ||
	    hlc_ms(e->hlc) > clock_wall_ms() + MAX_SKEW_MS) {
		repl_dropped(r, 1);
		if (now_ms - r->last_skew_log_ms > 1000) {
			r->last_skew_log_ms = now_ms;
			log_error("peer operation stamp dropped peer=%s "
			          "origin=%s seq=%llu: unknown origin or "
			          "stamped in the future dropped=%llu",
			          p->cfg->site, e->origin,
			          (unsigned long long)e->seq,
			          (unsigned long long)repl_dropped_total(r));
		}
		repl_back_off(p, now_ms);
		return;
	}
	rc = ops_skip(r->ops, r->batch, e->origin, e->epoch, e->seq, e->hlc,
	              &applied);
	if (rc == GD_EINVAL)
		repl_range_request(r, p, e->origin, e->epoch, now_ms);
	else if (applied)
		repl_applied(r, NULL);
}

/* mirror_ops from frontend p (we are a mirror): live, p's own operations
 * as it makes them; or a range we asked for, relays included. */
void repl_mirror_apply_ops(struct repl *r,
                           struct repl_peer *p,
                           const Grantd__V1__MirrorOps *mo,
                           uint64_t sent_us,
                           uint64_t now_ms)
{
	struct lat_stamp at = {.sent = (uint32_t)sent_us,
	                       .recv = (uint32_t)clock_wall_us()};

	if (mo->range) {
		if (!repl_range_answers(r, p, mo->origin, mo->epoch,
		                        mo->has_from, mo->from))
			return;
		if (mo->n_ops >= RANGE_MAX_OPS && !mo->truncated)
			repl_range_request_from(r, p, mo->origin, mo->epoch,
			                        mo->from + mo->n_ops, now_ms);
	}
	/* the operations decoded first and checked newest first, one run
	 * (opsig.h's chain); each is then taken or dropped below */
	Grantd__V1__Op **dec = xcalloc(mo->n_ops ? mo->n_ops : 1, sizeof(*dec));
	const Grantd__V1__Op **run = xcalloc(mo->n_ops ? mo->n_ops : 1,
	                                     sizeof(*run));
	enum opsig_verdict *d = xcalloc(mo->n_ops ? mo->n_ops : 1, sizeof(*d));
	int *verdict = xcalloc(mo->n_ops ? mo->n_ops : 1, sizeof(*verdict));
	size_t nrun = 0;
	for (size_t i = 0; i < mo->n_ops; i++)
		if (mo->ops[i]->has_op &&
		    (dec[i] = grantd__v1__op__unpack(NULL, mo->ops[i]->op.len,
		                                     mo->ops[i]->op.data)))
			run[nrun++] = dec[i];
	opsig_verify_run(&r->verifier, run, nrun, d);
	for (size_t i = 0, k = 0; i < mo->n_ops; i++)
		verdict[i] = dec[i] ? (int)d[k++] : REPL_UNCHECKED;
	free(run);
	free(d);
	for (size_t i = 0; i < mo->n_ops; i++) {
		const Grantd__V1__MirrorOp *e = mo->ops[i];
		if (!e->origin || !name_site_ok(e->origin) || !e->has_epoch ||
		    !e->has_seq || !e->seq) {
			repl_dropped(r, 1);
			continue;
		}
		if (mo->range && !repl_range_holds(r, p, mo->origin, mo->epoch,
		                                   e->origin, e->epoch, e->seq))
			continue;
		if (!mo->range && strcmp(e->origin, p->cfg->site)) {
			repl_stat_refuse(
			        r, DROP_FORGED_ORIGIN, 1,
			        "mirror operation "
			        "dropped peer=%s origin=%s seq=%llu: origin is "
			        "not the link's site",
			        p->cfg->site, e->origin,
			        (unsigned long long)e->seq);
			continue;
		}
		if (!e->has_op) {
			mirror_skip(r, p, e, now_ms);
			continue;
		}
		Grantd__V1__Op *op = dec[i];
		dec[i] = NULL;
		if (!op || !op->origin || strcmp(op->origin, e->origin) ||
		    op->epoch != e->epoch || op->seq != e->seq)
			repl_dropped(r, 1); /* its stamp is not its own */
		else
			repl_apply_op(r, p, op, verdict[i],
			              mo->range || !sent_us ? NULL : &at,
			              now_ms);
		if (op) {
			records_op_wipe(op);
			grantd__v1__op__free_unpacked(op, NULL);
		}
	}
	for (size_t i = 0; i < mo->n_ops; i++) /* those dropped above */
		if (dec[i]) {
			records_op_wipe(dec[i]);
			grantd__v1__op__free_unpacked(dec[i], NULL);
		}
	free(dec);
	free(verdict);
	if (mo->range && mo->truncated)
		repl_xfer_start(r, p, now_ms);
}

/* Subscribe to frontend p (we are a mirror): our vector and public
 * digest; it answers with its vector and feeds us for MIRROR_LEASE_MS. */
void repl_mirror_subscribe(struct repl *r, struct repl_peer *p)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	Grantd__V1__MirrorSub ms = GRANTD__V1__MIRROR_SUB__INIT;
	uint8_t d[DIGEST_LEN];

	repl_hb_fill(r, &hb);
	ops_digest_public(r->ops, d);
	ms.vv = hb.vv;
	ms.n_vv = hb.n_vv;
	ms.digest_public.data = d;
	ms.digest_public.len = DIGEST_LEN;
	ms.has_digest_public = 1;
	peer_msg_init(r->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_MIRROR_SUB;
	m.mirror_sub = &ms;
	peer_send(p->dealer, &m, NULL, 0);
	repl_hb_free(&hb);
}

/* Our operations just published, to every mirror with a live lease, as
 * one mirror_ops over the sync ROUTER (raw: n packed Ops). */
void repl_mirror_feed(struct repl *r, const ProtobufCBinaryData *raw, size_t n)
{
	uint64_t now_ms = clock_mono_ms();
	void *router = peer_router(r->link);
	struct mops mb;
	bool built = false;

	for (int i = 0; n && router && i < r->npeers; i++) {
		struct repl_peer *p = &r->peers[i];
		if (p->link != LINK_FEED_OUT || now_ms >= p->lease_until_ms)
			continue;
		if (!built) {
			mops_build(&mb, raw, n);
			built = true;
		}
		Grantd__V1__PeerMsg m;
		peer_msg_init(r->self, &m);
		m.body_case = GRANTD__V1__PEER_MSG__BODY_MIRROR_OPS;
		m.mirror_ops = &mb.mo;
		/* not sent (gone, or its queue full): the mirror finds the
		 * gap from our next answer to its subscription */
		if (peer_send(router, &m, p->rid, p->ridlen) < 0)
			log_debug("mirror feed not sent peer=%s: %s",
			          p->cfg->site, zmq_strerror(errno));
	}
	if (built)
		mops_free(&mb);
}

void repl_mirror_lag(struct repl *r, cJSON *obj, uint64_t now_ms)
{
	if (r->cfg->role != CONFIG_ROLE_MIRROR)
		return;
	cJSON *arr = cJSON_AddArrayToObject(obj, "mirror_lag");
	for (int i = 0; i < r->npeers; i++) {
		struct repl_peer *p = &r->peers[i];
		uint64_t lag = 0;
		if (p->link != LINK_FEED_IN)
			continue;
		repl_hb_ahead(r, p, &lag);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "site", p->cfg->site);
		cJSON_AddBoolToObject(o, "fed",
		                      p->hb && p->last_heard_ms &&
		                              now_ms - p->last_heard_ms <
		                                      CONNECTED_MS);
		cJSON_AddNumberToObject(o, "ops", (double)lag);
		cJSON_AddNumberToObject(
		        o, "ms",
		        lag && p->behind_since_ms
		                ? (double)(now_ms - p->behind_since_ms)
		                : 0);
		cJSON_AddItemToArray(arr, o);
	}
}
