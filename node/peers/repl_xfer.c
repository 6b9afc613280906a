/*
 * repl_xfer.c: state transfer.  When a peer's log no longer reaches what
 * we lack, the replicated families (records.h, in table order) are copied
 * from it in bounded batches, each record with the signed operations that
 * made it (recops.h): those are checked against their origins' keys and
 * applied (ops_merge_signed), never the record; a record without them is
 * merged with the checks a live operation gets (ops_merge_record) only
 * when its origin has no key here; the sender's vector comes with the
 * first reply and is raised into ours only when every family is merged
 * and no record was refused, and then no further than the sender can
 * prove (snap_vv_cap).  A transfer cut in the middle (no reply within
 * RANGE_TIMEOUT_MS) is dropped and starts over from the first family: the
 * records merged so far are harmless (a merge never goes backwards), and
 * the vector, never raised, still asks for what is missing.
 *
 * One exception, asked for by an operator: the transfer that `grantctl
 * rebuild --from SITE --trust-unsigned` starts (repl_xfer_rebuild) takes
 * a record without operations as from an origin without a key, whatever
 * its origin (a store written before recops.h keeps none; upgrading.md).
 * Records with operations are checked as always; the trust ends with the
 * transfer, finished or cut (its restart checks as any other).  Asked
 * while another transfer runs, it starts when that one is over (not
 * before: that one's replies may still be on their way, and a reply is
 * known only by its family and keys).
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
#include "recops.h"
#include "records.h"
#include "repl_int.h"
#include "xalloc.h"
#include "banned.h"

/* the replicated families, in table order (records.h) */
static const enum store_cf repl_xfer_cfs[] = {GD_RECORD_KINDS(RECORDS_SNAP_CF)};

void repl_xfer_free(struct repl_xfer *sn)
{
	for (size_t i = 0; i < sn->nvv; i++) {
		free(sn->vv[i]->origin);
		free(sn->vv[i]);
	}
	free(sn->vv);
	buf_free(&sn->after);
	memset(sn, 0, sizeof(*sn));
}

static void snap_request(struct repl *r, uint64_t now_ms)
{
	struct repl_xfer *sn = &r->xfer;
	Grantd__V1__PeerMsg m;
	Grantd__V1__SnapReq rq = GRANTD__V1__SNAP_REQ__INIT;

	GD_ASSERT(sn->p && sn->cf < (int)GD_ARRAY_SIZE(repl_xfer_cfs));
	peer_msg_init(r->self, &m);
	rq.cf = (uint32_t)repl_xfer_cfs[sn->cf], rq.has_cf = 1;
	if (sn->after.len) {
		rq.after.data = (uint8_t *)sn->after.p;
		rq.after.len = sn->after.len;
		rq.has_after = 1;
	}
	rq.max = SNAP_MAX_RECORDS, rq.has_max = 1;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_SNAP_REQ;
	m.snap_req = &rq;
	peer_send(sn->p->dealer, &m, NULL, 0);
	sn->sent_ms = now_ms;
}

void repl_xfer_start(struct repl *r, struct repl_peer *p, uint64_t now_ms)
{
	if (r->xfer.p)
		return;
	r->xfer.p = p;
	log_info("state transfer started peer=%s (behind its operation log)",
	         p->cfg->site);
	snap_request(r, now_ms);
}

void repl_xfer_rebuild(struct repl *r, struct repl_peer *p, uint64_t now_ms)
{
	if (r->xfer.p) {
		r->trust_next = p;
		log_info("rebuild from %s trusting records without signed "
		         "operations: after the state transfer from peer=%s",
		         p->cfg->site, r->xfer.p->cfg->site);
		return;
	}
	r->xfer.p = p;
	r->xfer.trust = true;
	log_warn("rebuild from %s trusting records without signed operations",
	         p->cfg->site);
	snap_request(r, now_ms);
}

/* The transfer is over (finished or cut): forget it; a trusting rebuild
 * waiting for it starts now. */
static void xfer_over(struct repl *r, uint64_t now_ms)
{
	struct repl_peer *next = r->trust_next;

	repl_xfer_free(&r->xfer);
	r->trust_next = NULL;
	if (next)
		repl_xfer_rebuild(r, next, now_ms);
}

/* The operations of one reply sent once (SnapRep.shared): a push's
 * operation is kept by every ref it wrote, and sent whole with each it
 * would cost the reply the square of its refs. */
struct snap_shared {
	ProtobufCBinaryData *ent; /* owned copies */
	size_t n, cap;
};

#define SNAP_SHARE_MIN 1024 /* smaller ones go inline */

/* ro's operations of SNAP_SHARE_MIN bytes or more moved into sh (once
 * each) and named by their index in ro->shared; returns the bytes sh
 * grew by. */
static size_t share_ops(struct snap_shared *sh, Grantd__V1__RecordOps *ro)
{
	size_t added = 0, kept = 0;

	for (size_t i = 0; i < ro->n_ops; i++) {
		ProtobufCBinaryData *op = &ro->ops[i];
		size_t j = 0;
		if (op->len < SNAP_SHARE_MIN) {
			ro->ops[kept++] = *op;
			continue;
		}
		while (j < sh->n &&
		       (sh->ent[j].len != op->len ||
		        memcmp(sh->ent[j].data, op->data, op->len)))
			j++;
		if (j == sh->n) {
			GD_GROW(sh->ent, sh->cap, sh->n + 1);
			sh->ent[sh->n++] = (ProtobufCBinaryData){
			        op->len, xmemdup(op->data, op->len)};
			added += op->len;
		}
		ro->shared = xreallocarray(ro->shared, ro->n_shared + 1,
		                           sizeof(*ro->shared));
		ro->shared[ro->n_shared++] = (uint32_t)j;
		sodium_memzero(op->data, op->len);
		free(op->data);
	}
	ro->n_ops = kept;
	return added;
}

static void shared_free(struct snap_shared *sh)
{
	for (size_t i = 0; i < sh->n; i++) {
		sodium_memzero(sh->ent[i].data, sh->ent[i].len);
		free(sh->ent[i].data);
	}
	free(sh->ent);
}

static void serve_snap(struct repl *r,
                       const struct peer_req *req,
                       const Grantd__V1__SnapReq *rq)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__SnapRep rep = GRANTD__V1__SNAP_REP__INIT;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	struct store_iter *it;
	struct buf v = BUF_INIT;
	ProtobufCBinaryData *keys, *vals;
	Grantd__V1__RecordOps **ops, none = GRANTD__V1__RECORD_OPS__INIT;
	struct buf ob = BUF_INIT;
	struct snap_shared sh = {0};
	const char *key;
	size_t klen, bytes = 0, inline_ops;
	uint32_t max = rq->max && rq->max < SNAP_MAX_RECORDS ? rq->max
	                                                     : SNAP_MAX_RECORDS;
	bool known = false;
	int rc = 0;

	for (size_t i = 0; i < GD_ARRAY_SIZE(repl_xfer_cfs); i++)
		known |= rq->cf == (uint32_t)repl_xfer_cfs[i];
	if (!known || rq->after.len > 4096) {
		repl_dropped(r, 1);
		return;
	}
	/* to a mirror, a family it may not hold is sent empty */
	bool hide = repl_mirror_to(r, req->site) &&
	            !records_mirror_visible((enum store_cf)rq->cf);
	if (rq->cf == (uint32_t)repl_xfer_cfs[0] && !rq->has_after) {
		/* the vector first, then the records: every record read later
		 * is at least as new as the vector says */
		repl_hb_fill(r, &hb);
		rep.vv = hb.vv;
		rep.n_vv = hb.n_vv;
	}
	keys = xcalloc(max, sizeof(*keys));
	vals = xcalloc(max, sizeof(*vals));
	ops = xcalloc(max, sizeof(*ops));
	if (rq->has_after)
		store_iter_new_at(&it, r->store, NULL, rq->cf, "", 0,
		                  rq->after.data, rq->after.len);
	else
		store_iter_new(&it, r->store, NULL, rq->cf, "", 0);
	while (!hide && (rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		if (rq->has_after && klen == rq->after.len &&
		    !memcmp(key, rq->after.data, klen))
			continue;
		if (rep.n_keys == max || bytes > RANGE_MAX_BYTES)
			break;
		keys[rep.n_keys].data = xmemdup(key, klen);
		keys[rep.n_keys].len = klen;
		vals[rep.n_keys].data = xmemdup(v.p, v.len);
		vals[rep.n_keys].len = v.len;
		/* the signed operations that made it (recops.h): none
		 * kept, or unreadable, and it goes without (the receiver
		 * then takes it only from an origin without a key) */
		ops[rep.n_keys] = &none;
		inline_ops = 0;
		if (recops_get(r->store, NULL, (enum store_cf)rq->cf, key, klen,
		               &ob) == 0 &&
		    ob.len) {
			Grantd__V1__RecordOps *ro =
			        grantd__v1__record_ops__unpack(
			                NULL, ob.len, (const uint8_t *)ob.p);
			if (ro) {
				bytes += share_ops(&sh, ro);
				for (size_t j = 0; j < ro->n_ops; j++)
					inline_ops += ro->ops[j].len;
				ops[rep.n_keys] = ro;
			}
		}
		bytes += klen + v.len + inline_ops;
		rep.n_keys++;
	}
	rep.cf_done = rep.has_cf_done = hide || rc <= 0;
	store_iter_free(&it);
	rep.cf = rq->cf, rep.has_cf = 1;
	rep.keys = keys;
	rep.values = vals;
	rep.n_values = rep.n_keys;
	rep.ops = ops;
	rep.n_ops = rep.n_keys;
	rep.shared = sh.ent;
	rep.n_shared = sh.n;
	peer_msg_init(r->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_SNAP_REP;
	m.snap_rep = &rep;
	peer_reply(req, &m);
	for (size_t i = 0; i < rep.n_keys; i++) {
		free(keys[i].data);
		sodium_memzero(vals[i].data, vals[i].len);
		free(vals[i].data);
		if (ops[i] != &none)
			grantd__v1__record_ops__free_unpacked(ops[i], NULL);
	}
	free(keys);
	free(vals);
	free(ops);
	shared_free(&sh);
	sodium_memzero(ob.p, ob.len);
	buf_free(&ob);
	repl_hb_free(&hb);
	sodium_memzero(v.p, v.len);
	buf_free(&v);
}

void repl_xfer_on_req(const struct peer_req *rq, void *payload)
{
	serve_snap(payload, rq, rq->m->snap_req);
}

static void snap_take_vv(struct repl_xfer *sn, Grantd__V1__SnapRep *rep)
{
	sn->vv = xcalloc(rep->n_vv ? rep->n_vv : 1, sizeof(*sn->vv));
	for (size_t i = 0; i < rep->n_vv && sn->nvv < MAX_VV; i++) {
		if (!rep->vv[i]->origin || !name_site_ok(rep->vv[i]->origin))
			continue;
		Grantd__V1__VvEntry *e = xmalloc(sizeof(*e));
		*e = *rep->vv[i];
		e->origin = xstrdup(rep->vv[i]->origin);
		sn->vv[sn->nvv++] = e;
	}
}

static bool known_cb(const char *origin, void *payload)
{
	return repl_origin_known(payload, origin);
}

/* How far a state transfer from p may raise our entry for (origin, epoch)
 * (e->seq claimed): p speaks for its own streams, and a finished epoch of
 * ours can never grow; another site's stream is raised no further than
 * that site's own last heartbeat shows it (a claim beyond it would make us
 * drop that site's later operations as duplicates). */
static uint64_t
snap_vv_cap(struct repl *r, struct repl_peer *p, const Grantd__V1__VvEntry *e)
{
	const struct repl_peer *q = repl_peer_by_site(r, e->origin);
	uint64_t said = 0;

	if (!strcmp(e->origin, p->cfg->site))
		return e->seq;
	if (!strcmp(e->origin, ops_site(r->ops)))
		return e->epoch == ops_epoch(r->ops) ? 0 : e->seq;
	for (size_t i = 0; q && q->hb && i < q->hb->n_vv; i++)
		if (q->hb->vv[i]->epoch == e->epoch &&
		    !strcmp(q->hb->vv[i]->origin, e->origin))
			said = q->hb->vv[i]->seq;
	return said < e->seq ? said : e->seq;
}

/* A record that came with its operations (ro): each must decode, check,
 * make this record and be signed by its origin (repl_op_verdict, as every
 * operation's path); then they are applied (ops_merge_signed) and the
 * record's own bytes never are.  One bad operation refuses the record.
 * 0, or GD_EPROTO with why and the count it falls under in *drop. */
static int take_signed(struct repl *r,
                       enum store_cf cf,
                       const ProtobufCBinaryData *key,
                       const Grantd__V1__RecordOps *ro,
                       const Grantd__V1__SnapRep *rep,
                       const struct ops_trust *t,
                       struct buf *why,
                       enum repl_drop *drop)
{
	size_t n = ro->n_ops + ro->n_shared;
	Grantd__V1__Op **ops = xcalloc(n, sizeof(*ops));
	ProtobufCBinaryData *all = xcalloc(n, sizeof(*all));
	struct buf sw = BUF_INIT;
	int rc = 0;

	*drop = DROP_SNAP_RECORD;
	/* its own, then those of the reply's shared ones it names */
	for (size_t i = 0; i < ro->n_ops; i++)
		all[i] = ro->ops[i];
	for (size_t i = 0; rc == 0 && i < ro->n_shared; i++) {
		if (ro->shared[i] >= rep->n_shared) {
			buf_printf(why, "shared operation %u of %zu",
			           (unsigned)ro->shared[i], rep->n_shared);
			rc = GD_EPROTO;
		} else {
			all[ro->n_ops + i] = rep->shared[ro->shared[i]];
		}
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		enum opsig_verdict d;
		ops[i] = grantd__v1__op__unpack(NULL, all[i].len, all[i].data);
		if (!ops[i]) {
			buf_puts(why, "an operation does not decode");
			rc = GD_EPROTO;
		} else if ((rc = ops_check(ops[i], why)) < 0) {
			rc = GD_EPROTO;
		} else if (!recops_makes(ops[i], cf, key->data, key->len)) {
			buf_printf(why,
			           "an operation of another record "
			           "(origin %s seq %llu)",
			           ops[i]->origin,
			           (unsigned long long)ops[i]->seq);
			rc = GD_EPROTO;
		} else if ((d = repl_op_verdict(r, ops[i], &sw)) != OPSIG_OK &&
		           d != OPSIG_NO_KEY) {
			buf_printf(why, "origin=%s seq=%llu: %s",
			           ops[i]->origin,
			           (unsigned long long)ops[i]->seq,
			           sw.len ? sw.p : opsig_verdict_text(d));
			*drop = DROP_SIGNATURE;
			rc = GD_EPROTO;
		}
	}
	if (rc == 0)
		rc = ops_merge_signed(r->ops, r->batch, ops, all, n, t, why);
	for (size_t i = 0; i < n; i++)
		if (ops[i]) {
			records_op_wipe(ops[i]); /* an enrollment's secret */
			grantd__v1__op__free_unpacked(ops[i], NULL);
		}
	free(ops);
	free(all);
	buf_free(&sw);
	return rc;
}

/* A record without operations: first the checks any record gets
 * (ops_merge_record; a bad one is a snapshot_record drop, as a live
 * operation's checks come before its signature's); then, when the site
 * that must have made it has a key here (a mark: when any site has one),
 * refused (DROP_SIGNATURE) and its merge taken back, for only its signed
 * operations may bring it; else kept, counted as unchecked.  A transfer
 * that trusts its peer (struct repl_xfer's trust) keeps it too, counted
 * as trusted as well. */
static int take_bare(struct repl *r,
                     enum store_cf cf,
                     const ProtobufCBinaryData *key,
                     const ProtobufCBinaryData *val,
                     const struct ops_trust *t,
                     struct buf *why,
                     enum repl_drop *drop)
{
	struct ops_save sp;
	char origin[65];
	bool any, need, trusted;
	int rc, rb;

	*drop = DROP_SNAP_RECORD;
	need = recops_record_origin(origin, &any, cf, key->data, key->len,
	                            val->data, val->len) == 0 &&
	       (any ? r->verifier.nkeys > 0
	            : opsig_verifier_has(&r->verifier, origin));
	trusted = need && r->xfer.trust;
	if (trusted)
		need = false;
	if (need)
		ops_savepoint(r->ops, r->batch, &sp);
	rc = ops_merge_record(r->ops, r->batch, cf, val->data, val->len, t,
	                      why);
	if (!need) {
		if (rc == 0) {
			r->unchecked++;
			r->xfer.trusted += trusted;
			r->unsigned_trusted += trusted;
		}
		return rc;
	}
	if ((rb = ops_rollback(r->ops, r->batch, &sp)) < 0)
		return rb;
	if (rc < 0)
		return rc;
	buf_printf(why, "origin=%s: no signed operations with it",
	           any ? "(any)" : origin);
	*drop = DROP_SIGNATURE;
	return GD_EPROTO;
}

/* One record of a reply: with its operations or without. */
static void take_record(struct repl *r,
                        struct repl_peer *p,
                        const Grantd__V1__SnapRep *rep,
                        size_t i,
                        const struct ops_trust *t)
{
	struct repl_xfer *sn = &r->xfer;
	enum store_cf cf = (enum store_cf)rep->cf;
	struct buf why = BUF_INIT;
	enum repl_drop drop;
	int rc;

	if (rep->n_ops == rep->n_keys &&
	    (rep->ops[i]->n_ops || rep->ops[i]->n_shared))
		rc = take_signed(r, cf, &rep->keys[i], rep->ops[i], rep, t,
		                 &why, &drop);
	else
		rc = take_bare(r, cf, &rep->keys[i], &rep->values[i], t, &why,
		               &drop);
	if (rc < 0) {
		sn->refused++;
		repl_stat_refuse(r, drop, 1,
		                 "state transfer record dropped peer=%s "
		                 "cf=%s: %s",
		                 p->cfg->site, store_cf_name(cf),
		                 why.len ? why.p : gd_strerror(rc));
	} else {
		sn->records++;
	}
	buf_free(&why);
}

/* Every family merged: raise the vector to what the sender's vector says,
 * as far as snap_vv_cap allows; not at all when a record was refused (we
 * may then lack effects the vector would claim). */
static void snap_raise(struct repl *r, struct repl_peer *p)
{
	struct repl_xfer *sn = &r->xfer;
	struct ops *o = r->ops;
	uint64_t capped = 0;

	for (size_t i = 0; !sn->refused && i < sn->nvv; i++) {
		Grantd__V1__VvEntry *e = sn->vv[i];
		uint64_t cap = snap_vv_cap(r, p, e);
		if (cap < e->seq &&
		    cap < ops_vv_get(o, NULL, e->origin, e->epoch))
			cap = ops_vv_get(o, NULL, e->origin, e->epoch);
		if (cap < e->seq && !capped++)
			repl_stat_refuse(r, DROP_SNAP_VECTOR, 0,
			                 "state transfer vector "
			                 "claim not proved peer=%s origin=%s "
			                 "epoch=%016llx "
			                 "seq=%llu raised_to=%llu",
			                 p->cfg->site, e->origin,
			                 (unsigned long long)e->epoch,
			                 (unsigned long long)e->seq,
			                 (unsigned long long)cap);
		if (e->epoch != OPS_VV_RETIRED) {
			ops_vv_raise(o, r->batch, e->origin, e->epoch, cap);
			continue;
		}
		/* the origin's own vector: the sender's when it is the
		 * origin, else the origin's last heartbeat */
		const struct repl_peer *q = repl_peer_by_site(r, e->origin);
		Grantd__V1__VvEntry *const *ov = NULL;
		size_t on = 0;
		if (!strcmp(e->origin, p->cfg->site))
			ov = sn->vv, on = sn->nvv;
		else if (q && q->hb)
			ov = q->hb->vv, on = q->hb->n_vv;
		ops_vv_raise_retired(o, r->batch, e->origin, cap, ov, on,
		                     sn->vv, sn->nvv);
	}
	r->drops[DROP_SNAP_VECTOR] += capped;
	repl_dropped(r, capped);
	if (sn->refused)
		log_error(
		        "state transfer done peer=%s records=%llu refused=%llu:"
		        " vector not raised",
		        p->cfg->site, (unsigned long long)sn->records,
		        (unsigned long long)sn->refused);
	else
		log_info("state transfer done peer=%s records=%llu "
		         "claims_capped=%llu",
		         p->cfg->site, (unsigned long long)sn->records,
		         (unsigned long long)capped);
	if (sn->trust)
		log_warn("rebuild from %s done: %llu records without signed "
		         "operations trusted",
		         p->cfg->site, (unsigned long long)sn->trusted);
}

void repl_xfer_apply(struct repl *r,
                     struct repl_peer *p,
                     Grantd__V1__SnapRep *rep,
                     uint64_t now_ms)
{
	struct repl_xfer *sn = &r->xfer;
	/* the checks a live operation gets (repl_apply_op) */
	struct ops_trust t = {((clock_wall_ms() + MAX_SKEW_MS) << 16) | 0xffff,
	                      known_cb, r};

	if (sn->p != p || rep->cf != (uint32_t)repl_xfer_cfs[sn->cf] ||
	    rep->n_keys != rep->n_values) {
		repl_dropped(r, 1);
		return;
	}
	if (rep->n_vv && !sn->vv)
		snap_take_vv(sn, rep);
	if (r->cfg->role == CONFIG_ROLE_MIRROR && rep->n_values &&
	    !records_mirror_visible((enum store_cf)rep->cf))
		repl_stat_refuse(
		        r, DROP_MIRROR_HIDDEN, rep->n_values,
		        "hidden family "
		        "sent to a mirror peer=%s cf=%s records=%zu: dropped",
		        p->cfg->site, store_cf_name((enum store_cf)rep->cf),
		        rep->n_values);
	/* a mirror holds no secret family, whatever a peer sends */
	for (size_t i = 0; (r->cfg->role != CONFIG_ROLE_MIRROR ||
	                    records_mirror_visible((enum store_cf)rep->cf)) &&
	                   i < rep->n_values;
	     i++)
		take_record(r, p, rep, i, &t);
	r->dirty = true;
	if (rep->n_keys) {
		buf_reset(&sn->after);
		buf_add(&sn->after, rep->keys[rep->n_keys - 1].data,
		        rep->keys[rep->n_keys - 1].len);
	}
	if (rep->cf_done) {
		buf_reset(&sn->after);
		sn->cf++;
	}
	if (sn->cf < (int)GD_ARRAY_SIZE(repl_xfer_cfs)) {
		snap_request(r, now_ms);
		return;
	}
	snap_raise(r, p);
	if (sn->refused)
		repl_back_off(p, now_ms); /* not a state transfer a second */
	xfer_over(r, now_ms);
}

void repl_xfer_tick(struct repl *r, uint64_t now_ms)
{
	if (r->xfer.p && now_ms - r->xfer.sent_ms > RANGE_TIMEOUT_MS) {
		log_warn("state transfer timed out peer=%s; starting over",
		         r->xfer.p->cfg->site);
		if (r->xfer.trust)
			log_warn("rebuild from %s cut after %llu records "
			         "without signed operations trusted; its "
			         "restart checks them (rebuild again to "
			         "trust it)",
			         r->xfer.p->cfg->site,
			         (unsigned long long)r->xfer.trusted);
		xfer_over(r, now_ms);
	}
}
