/*
 * repl_range.c: range repair.  A node that misses operations (a gap in
 * the live stream, or a peer's heartbeat ahead of it) asks that peer's
 * sync ROUTER for the range of one (origin, epoch) from a sequence on, in
 * bounded batches; the peer serves it from its operation log.  Only the
 * reply to the last range asked is taken, and only operations of its
 * stream; a range the log no longer reaches (retention) comes back
 * "truncated", and the requester falls back to a state transfer
 * (repl_xfer.c); an epoch retired at the peer comes back "retired" and
 * empty (range_read says why).
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
#include "oplog.h"
#include "records.h"
#include "repl_int.h"
#include "xalloc.h"
#include "banned.h"

/* Ask p for origin's operations of epoch from seq from on. */
void repl_range_request_from(struct repl *r,
                             struct repl_peer *p,
                             const char *origin,
                             uint64_t epoch,
                             uint64_t from,
                             uint64_t now_ms)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__RangeReq rq = GRANTD__V1__RANGE_REQ__INIT;

	if (p->range_inflight)
		return;
	/* one peer at a time per stream: the others would send it again */
	for (int i = 0; i < r->npeers; i++) {
		struct repl_peer *q = &r->peers[i];
		if (q != p && q->range_inflight && q->range_epoch == epoch &&
		    !strcmp(q->range_origin, origin))
			return;
	}
	peer_msg_init(r->self, &m);
	rq.origin = (char *)origin;
	rq.epoch = epoch, rq.has_epoch = 1;
	rq.from = from;
	rq.has_from = 1;
	rq.max = RANGE_MAX_OPS, rq.has_max = 1;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_RANGE_REQ;
	m.range_req = &rq;
	if (peer_send(p->dealer, &m, NULL, 0) == 0) {
		p->range_inflight = true;
		p->range_sent_ms = now_ms;
		snprintf(p->range_origin, sizeof(p->range_origin), "%s",
		         origin);
		p->range_epoch = epoch;
		p->range_from = from;
		log_debug("range requested peer=%s origin=%s from=%llu",
		          p->cfg->site, origin, (unsigned long long)rq.from);
	}
}

/* The operations after those applied so far. */
void repl_range_request(struct repl *r,
                        struct repl_peer *p,
                        const char *origin,
                        uint64_t epoch,
                        uint64_t now_ms)
{
	repl_range_request_from(r, p, origin, epoch,
	                        ops_vv_get(r->ops, NULL, origin, epoch) + 1,
	                        now_ms);
}

/* Does a range reply (origin, epoch, from) answer the last range asked of
 * p?  Then it is taken, once: the question is forgotten.  Otherwise it is
 * refused and counted (review N5: a reply nobody asked for would put its
 * operations under any origin's numbers). */
bool repl_range_answers(struct repl *r,
                        struct repl_peer *p,
                        const char *origin,
                        uint64_t epoch,
                        bool has_from,
                        uint64_t from)
{
	if (p->range_origin[0] && origin && has_from &&
	    !strcmp(origin, p->range_origin) && epoch == p->range_epoch &&
	    from == p->range_from) {
		memcpy(p->done_origin, p->range_origin, sizeof(p->done_origin));
		p->done_epoch = epoch;
		p->done_from = from;
		p->range_origin[0] = '\0';
		p->range_inflight = false;
		return true;
	}
	if (p->done_origin[0] && origin && has_from &&
	    !strcmp(origin, p->done_origin) && epoch == p->done_epoch &&
	    from == p->done_from)
		return false; /* answered already */
	repl_stat_refuse(
	        r, DROP_RANGE_UNASKED, 1,
	        "range reply dropped peer=%s "
	        "origin=%s epoch=%016llx from=%llu: not the range asked "
	        "(origin=%s epoch=%016llx from=%llu)",
	        p->cfg->site, origin && name_site_ok(origin) ? origin : "?",
	        (unsigned long long)epoch, (unsigned long long)from,
	        p->range_origin[0] ? p->range_origin : "-",
	        (unsigned long long)p->range_epoch,
	        (unsigned long long)p->range_from);
	return false;
}

/* An operation of a range reply must be of the range's stream. */
bool repl_range_holds(struct repl *r,
                      struct repl_peer *p,
                      const char *origin,
                      uint64_t epoch,
                      const char *op_origin,
                      uint64_t op_epoch,
                      uint64_t seq)
{
	if (op_origin && !strcmp(op_origin, origin) && op_epoch == epoch)
		return true;
	repl_stat_refuse(r, DROP_RANGE_UNASKED, 1,
	                 "range operation dropped peer=%s "
	                 "origin=%s seq=%llu: not of the range's origin=%s",
	                 p->cfg->site,
	                 op_origin && name_site_ok(op_origin) ? op_origin : "?",
	                 (unsigned long long)seq, origin);
	return false;
}

void repl_range_apply(struct repl *r,
                      struct repl_peer *p,
                      const Grantd__V1__RangeRep *rr,
                      uint64_t now_ms)
{
	char origin[NAME_SITE_MAX + 1];
	uint64_t epoch = rr->epoch;

	if (!repl_range_answers(r, p, rr->origin, rr->epoch, rr->has_from,
	                        rr->from))
		return;
	snprintf(origin, sizeof(origin), "%s", rr->origin);
	/* A full reply: there is more.  Ask for the next range before
	 * applying this one, so the peer serves it while we apply (catch-up
	 * waited a round trip and the peer's read per range).  Should this
	 * one not apply whole, the next reply shows a gap and the range is
	 * asked again from where we are. */
	if (rr->n_ops >= RANGE_MAX_OPS && !rr->truncated)
		repl_range_request_from(r, p, origin, epoch,
		                        rr->from + rr->n_ops, now_ms);
	/* checked newest first, one run (opsig.h's chain), then applied */
	Grantd__V1__Op **ops = xcalloc(rr->n_ops ? rr->n_ops : 1, sizeof(*ops));
	size_t n = 0;
	for (size_t i = 0; i < rr->n_ops; i++) {
		ops[n] = grantd__v1__op__unpack(NULL, rr->ops[i].len,
		                                rr->ops[i].data);
		if (ops[n])
			n++;
		else
			repl_dropped(r, 1);
	}
	enum opsig_verdict *d = xcalloc(n ? n : 1, sizeof(*d));
	opsig_verify_run(&r->verifier, (const Grantd__V1__Op *const *)ops, n,
	                 d);
	for (size_t i = 0; i < n; i++) {
		Grantd__V1__Op *op = ops[i];
		if (repl_range_holds(r, p, origin, epoch, op->origin, op->epoch,
		                     op->seq))
			repl_apply_op(r, p, op, (int)d[i], NULL, now_ms);
		records_op_wipe(op);
		grantd__v1__op__free_unpacked(op, NULL);
	}
	free(ops);
	free(d);
	if (rr->retired)
		log_debug("range retired at peer=%s origin=%s epoch=%016llx: "
		          "inside its retired total, nothing to fetch",
		          p->cfg->site, origin, (unsigned long long)epoch);
	else if (rr->truncated)
		repl_xfer_start(r, p, now_ms);
}

/* Fill rep with (rq->origin, rq->epoch)'s operations from rq->from on,
 * as our log holds them (copies in rep->ops: range_free); truncated when
 * the log no longer reaches rq->from. */
static void range_read(struct repl *r,
                       const Grantd__V1__RangeReq *rq,
                       Grantd__V1__RangeRep *rep)
{
	struct store_iter *it;
	struct buf prefix = BUF_INIT, v = BUF_INIT;
	struct oplog_cache cache = {BUF_INIT, BUF_INIT};
	const char *key;
	size_t klen, bytes = 0, cap = 0;
	uint8_t be[16];
	uint64_t want;
	uint32_t max =
	        rq->max && rq->max < RANGE_MAX_OPS ? rq->max : RANGE_MAX_OPS;
	bool own = !strcmp(rq->origin, ops_site(r->ops)) &&
	           rq->epoch == ops_epoch(r->ops);

	/* An epoch retired here is inside our retired total of its origin,
	 * and so inside the total of every peer that follows us or takes a
	 * state transfer from us: one that asks for it anyway read a vector
	 * older than what it holds (a heartbeat sent before the retirement,
	 * beside a state transfer sent after it), and would count its
	 * operations a second time.  Nothing is served. */
	if (!own && !ops_vv_lists(r->ops, rq->origin, rq->epoch)) {
		rep->retired = rep->has_retired = 1;
		return;
	}
	buf_add(&prefix, rq->origin, strlen(rq->origin) + 1);
	store_be64(be, rq->epoch);
	buf_add(&prefix, be, 8);
	store_be64(be + 8, rq->from);
	buf_add(&prefix, be + 8, 8);
	/* keys are origin \0 epoch seq: walk this (origin, epoch) from seq */
	store_iter_new_at(&it, r->store, NULL, CF_OPLOG, prefix.p,
	                  prefix.len - 8, prefix.p, prefix.len);
	want = rq->from;
	/* our own operations only once durable and published */
	if (own) {
		uint64_t pub = ops_published(r->ops);
		if (pub < rq->from)
			max = 0;
		else if (pub - rq->from + 1 < max)
			max = (uint32_t)(pub - rq->from + 1);
	}
	while (store_iter_next(it, &key, &klen, &v) > 0 && rep->n_ops < max &&
	       bytes < RANGE_MAX_BYTES) {
		if (klen != prefix.len)
			continue;
		uint64_t seq = store_get_be64(key + klen - 8);
		if (seq < want)
			continue;
		if (seq != want) {
			/* the start was cut off by the log's retention */
			if (rep->n_ops == 0)
				rep->truncated = rep->has_truncated = 1;
			break;
		}
		/* whole, as signed and sent (the log keeps it compact) */
		if (oplog_whole(r->store, NULL, &cache, key, klen, &v) < 0)
			break;
		GD_GROW(rep->ops, cap, rep->n_ops + 1);
		rep->ops[rep->n_ops++] =
		        (ProtobufCBinaryData){v.len, xmemdup(v.p, v.len)};
		bytes += v.len;
		want++;
	}
	store_iter_free(&it);
	oplog_cache_free(&cache);
	if (rep->n_ops == 0 && max > 0 &&
	    ops_vv_get(r->ops, NULL, rq->origin, rq->epoch) >= rq->from)
		rep->truncated = rep->has_truncated = 1;
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	buf_free(&prefix);
}

static void range_free(Grantd__V1__RangeRep *rep)
{
	for (size_t i = 0; i < rep->n_ops; i++) {
		sodium_memzero(rep->ops[i].data, rep->ops[i].len);
		free(rep->ops[i].data);
	}
	free(rep->ops);
	rep->ops = NULL;
	rep->n_ops = 0;
}

static void serve_range(struct repl *r,
                        const struct peer_req *req,
                        const Grantd__V1__RangeReq *rq)
{
	const char *site = req->site;
	Grantd__V1__PeerMsg m;
	Grantd__V1__RangeRep rep = GRANTD__V1__RANGE_REP__INIT;
	int sent;

	if (!rq->origin || !name_site_ok(rq->origin) || !rq->from) {
		repl_dropped(r, 1);
		return;
	}
	range_read(r, rq, &rep);
	rep.origin = rq->origin;
	rep.epoch = rq->epoch, rep.has_epoch = 1;
	rep.from = rq->from, rep.has_from = 1;
	if (repl_mirror_to(r, site)) {
		/* the same range, each hidden operation as its stamp */
		sent = repl_mirror_reply_range(r, req, &rep);
	} else {
		peer_msg_init(r->self, &m);
		m.body_case = GRANTD__V1__PEER_MSG__BODY_RANGE_REP;
		m.range_rep = &rep;
		sent = peer_reply(req, &m);
	}
	if (sent < 0)
		log_warn("range reply not sent peer=%s: %s", site,
		         zmq_strerror(errno));
	else
		log_debug("range served peer=%s origin=%s from=%llu n=%zu%s",
		          site, rq->origin, (unsigned long long)rq->from,
		          rep.n_ops, rep.retired ? " (retired here)" : "");
	range_free(&rep);
}

/* The requests peers make on the sync ROUTER (peer.c reads it). */
void repl_range_on_req(const struct peer_req *rq, void *payload)
{
	serve_range(payload, rq, rq->m->range_req);
}

bool repl_range_tick(struct repl *r, struct repl_peer *p, uint64_t now_ms)
{
	if (p->range_inflight && now_ms - p->range_sent_ms > RANGE_TIMEOUT_MS)
		p->range_inflight = false;
	const Grantd__V1__VvEntry *e = repl_hb_ahead(r, p, &p->lag_ops);
	if (!e) {
		p->behind_since_ms = 0;
		return false;
	}
	if (!p->behind_since_ms)
		p->behind_since_ms = now_ms;
	/* during a state transfer, ranges wait for it; and what a third site
	 * already has of an origin we hear directly is usually on its way to
	 * us live: give it a moment before fetching it twice */
	struct repl_peer *o = repl_peer_by_site(r, e->origin);
	bool live = o && o != p && o->last_heard_ms &&
	            now_ms - o->last_heard_ms < CONNECTED_MS &&
	            now_ms - p->behind_since_ms < LIVE_GRACE_MS;
	if (!r->xfer.p && !live)
		repl_range_request(r, p, e->origin, e->epoch, now_ms);
	return true;
}
