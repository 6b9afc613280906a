/*
 * repl.c: PUB/SUB for live operations, ROUTER/DEALER for repair, ZAP for
 * admission.  The shape follows the ZeroMQ guide's reliable pub-sub (the
 * Clone pattern), made multi-master: every node is the publisher of its
 * own operations, sequence numbers are per (origin, epoch), and the
 * heartbeat carries the whole version vector so a node learns of
 * operations it missed from any peer, not only from their origin.
 *
 * This file holds the replicator itself: opening and closing, the peers
 * and their sockets, the read loop and its commit, live operations,
 * publishing, the syncing gate and the tick.  The sub-protocols are rooms
 * of their own (repl_int.h): heartbeats (repl_hb.c), range repair
 * (repl_range.c), state transfer (repl_xfer.c), the mirrors' feed
 * (repl_mirror.c) and statistics (repl_stat.c).
 *
 * The link below (framing, CURVE sockets, ZAP, the sync ROUTER) is
 * peer.c's; the requests peers make on that ROUTER reach the rooms through
 * the handlers registered in repl_open.
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
#include "crashpoint.h"
#include "metrics.h"
#include "planes.h"
#include "writer.h"
#include "banned.h"

struct repl_peer *repl_peer_by_site(struct repl *r, const char *site)
{
	for (int i = 0; i < r->npeers; i++)
		if (!strcmp(r->peers[i].cfg->site, site))
			return &r->peers[i];
	return NULL;
}

bool repl_origin_known(struct repl *r, const char *origin)
{
	if (!strcmp(origin, ops_site(r->ops)))
		return true;
	for (int i = 0; i < r->npeers; i++)
		if (!strcmp(r->peers[i].cfg->site, origin))
			return true;
	return false;
}

/* A stream that keeps failing (an operation that does not check, or one
 * from a clock far ahead): no new range requests to that peer for a
 * while, instead of asking again every loop. */
void repl_back_off(struct repl_peer *p, uint64_t now_ms)
{
	p->range_inflight = true;
	p->range_sent_ms = now_ms;
	p->range_origin[0] = '\0';
}

void repl_tlog_status(struct repl *r, cJSON *status)
{
	if (r->tlogwit)
		tlogwit_status(r->tlogwit, status);
}

void repl_set_verifier(struct repl *r, const struct opsig_verifier *v)
{
	r->verifier = *v;
}

enum opsig_verdict
repl_op_verdict(struct repl *r, const Grantd__V1__Op *op, struct buf *why)
{
	enum opsig_verdict d = opsig_verify(&r->verifier, op, why);

	if (d == OPSIG_NO_KEY)
		r->unchecked++;
	return d;
}

/* Is op signed by its origin (common/opsig.h)?  One that is not is
 * dropped and counted (DROP_SIGNATURE); one whose origin has no key here
 * is taken, and counted as unchecked.  checked: repl_apply_op's. */
static bool signed_by_origin(struct repl *r, struct repl_peer *p,
                             const Grantd__V1__Op *op, int checked,
                             uint64_t now_ms)
{
	struct buf why = BUF_INIT;
	enum opsig_verdict d;

	if (checked == OPSIG_OK)
		return true;
	d = repl_op_verdict(r, op, &why);

	if (d == OPSIG_OK || d == OPSIG_NO_KEY)
		return true;
	repl_stat_refuse(r, DROP_SIGNATURE, 1,
	                 "peer operation dropped peer=%s origin=%s seq=%llu: "
	                 "%s",
	                 p->cfg->site, op->origin,
	                 (unsigned long long)op->seq, why.p);
	buf_free(&why);
	/* as for any refused operation: no range from p for a while, or a
	 * peer serving what is refused would be asked again at once */
	repl_back_off(p, now_ms);
	return false;
}

void repl_apply_op(struct repl *r,
                   struct repl_peer *p,
                   const Grantd__V1__Op *op,
                   int checked,
                   const struct lat_stamp *at,
                   uint64_t now_ms)
{
	uint64_t wall_ms = clock_wall_ms(); /* stamps; now_ms: intervals */
	struct buf why = BUF_INIT;
	bool applied;
	int rc;

	if (ops_check(op, &why) == 0 && !repl_origin_known(r, op->origin))
		buf_puts(&why, "unknown origin site");
	else if (why.len == 0 && hlc_ms(op->hlc) > wall_ms + MAX_SKEW_MS)
		buf_printf(&why,
		           "stamped %llu ms in the future (check the "
		           "clock of origin=%s)",
		           (unsigned long long)(hlc_ms(op->hlc) - wall_ms),
		           op->origin);
	if (why.len) {
		repl_dropped(r, 1);
		if (now_ms - r->last_skew_log_ms > 1000) {
			r->last_skew_log_ms = now_ms;
			log_error("peer operation dropped peer=%s origin=%s "
			          "seq=%llu: %s dropped=%llu",
			          p->cfg->site, op->origin ? op->origin : "-",
			          (unsigned long long)op->seq, why.p,
			          (unsigned long long)repl_dropped_total(r));
		}
		repl_back_off(p, now_ms);
		buf_free(&why);
		return;
	}
	buf_free(&why);
	if (!signed_by_origin(r, p, op, checked, now_ms))
		return;
	if (r->cfg->role == CONFIG_ROLE_MIRROR && !ops_mirror_visible(op)) {
		/* a frontend must send a mirror no such body (mirror_ops
		 * carry its stamp alone); should one come, its stamp is all
		 * that is kept, and it is counted */
		repl_stat_refuse(
		        r, DROP_MIRROR_HIDDEN, 1,
		        "hidden operation sent to a "
		        "mirror peer=%s origin=%s seq=%llu: only its stamp "
		        "kept",
		        p->cfg->site, op->origin, (unsigned long long)op->seq);
		rc = ops_skip(r->ops, r->batch, op->origin, op->epoch, op->seq,
		              op->hlc, &applied);
	} else {
		rc = ops_apply(r->ops, r->batch, op, &applied);
	}
	if (rc == GD_EINVAL) {
		/* a gap: fetch what is missing from whoever sent it */
		repl_range_request(r, p, op->origin, op->epoch, now_ms);
		return;
	}
	if (rc < 0) {
		log_error("cannot apply operation origin=%s seq=%llu: %s",
		          op->origin, (unsigned long long)op->seq,
		          gd_strerror(rc));
		return;
	}
	if (applied)
		repl_applied(r, at);
}

void repl_applied(struct repl *r, const struct lat_stamp *at)
{
	r->dirty = true;
	r->batch_ops++;
	r->lat.episode_ops++;
	if (at && r->lat.npending < HANDLE_MAX_SAMPLES) {
		struct lat_stamp *s = &r->lat.pending[r->lat.npending++];
		*s = *at;
		s->applied = (uint32_t)clock_wall_us();
	}
}

static void *link_sub(struct repl *r, struct repl_peer *p)
{
	return peer_curve_client_watched(r->self, ZMQ_SUB, p->cfg->publish,
	                                 p->cfg->public_key, SUB_MSG_MAX,
	                                 &p->sub_mon);
}

static void *link_dealer(struct repl *r, struct repl_peer *p)
{
	return peer_curve_client_watched(r->self, ZMQ_DEALER, p->cfg->sync,
	                                 p->cfg->public_key, PEER_MSG_MAX,
	                                 &p->dealer_mon);
}

/* libzmq never retries a connection whose handshake failed (linkmon.h):
 * make p's sockets again when their monitors say so, and at once when
 * p's public_key is no longer the one they were made for (a reload set a
 * new one: reload.h).  The sockets change, so the loop polls the new ones
 * (repl_relinked). */
static void relink(struct repl *r, struct repl_peer *p, uint64_t now_ms)
{
	char what[NAME_SITE_MAX + Z85_KEY_LEN + 48];

	snprintf(what, sizeof(what), "peer=%s socket=sub key=%s", p->cfg->site,
	         r->self->curve_pub);
	if (p->sub && (linkmon_stale(&p->sub_mon, p->cfg->public_key) ||
	               linkmon_poll(&p->sub_mon, now_ms, what))) {
		linkmon_detach(&p->sub_mon, p->sub);
		zmq_close(p->sub);
		p->sub = NULL;
	}
	if (!p->sub && p->link == LINK_FULL) {
		p->sub_mon.retry_at_ms = 0;
		p->sub = link_sub(r, p); /* NULL (logged): next tick */
		r->relinked = true;
		log_debug("peer socket made again peer=%s socket=sub",
		          p->cfg->site);
	}
	snprintf(what, sizeof(what), "peer=%s socket=sync key=%s", p->cfg->site,
	         r->self->curve_pub);
	if (p->dealer && (linkmon_stale(&p->dealer_mon, p->cfg->public_key) ||
	                  linkmon_poll(&p->dealer_mon, now_ms, what))) {
		linkmon_detach(&p->dealer_mon, p->dealer);
		zmq_close(p->dealer);
		p->dealer = NULL;
		p->range_inflight = false; /* asked on the old one */
	}
	if (!p->dealer) {
		p->dealer_mon.retry_at_ms = 0;
		p->dealer = link_dealer(r, p);
		r->relinked = true;
		log_debug("peer socket made again peer=%s socket=sync",
		          p->cfg->site);
	}
}

bool repl_relinked(struct repl *r)
{
	bool was = r->relinked;

	r->relinked = false;
	return was;
}

int repl_open(struct repl **out, const struct repl_opts *o)
{
	struct repl *r = xcalloc(1, sizeof(*r));
	const struct config *cfg = o->cfg;

	*out = NULL;
	r->ops = o->ops;
	r->store = o->store;
	r->cfg = cfg;
	r->self = o->self;
	r->link = o->link;
	r->writer = o->writer;
	r->latency_hist = o->latency_hist;
	if (o->verifier)
		r->verifier = *o->verifier;
	r->started_ms = clock_mono_ms();
	r->batch = writer_batch(o->writer); /* borrowed: THE batch */
	for (int i = 0; i < cfg->npeers; i++)
		r->peers[r->npeers++].cfg = &cfg->peers[i];
	peerpolicy_init(&r->policy, cfg);
	peerpolicy_fill(cfg, &r->hb_policy);
	if (cfg->publish &&
	    !(r->pub = peer_server(r->link, ZMQ_PUB, cfg->publish, 1024)))
		goto fail;
	if (peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_RANGE_REQ,
	            repl_range_on_req, r) < 0 ||
	    peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_SNAP_REQ,
	            repl_xfer_on_req, r) < 0 ||
	    peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_VV_REQ,
	            repl_hb_on_vv_req, r) < 0 ||
	    peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_MIRROR_SUB,
	            repl_mirror_on_sub, r) < 0)
		goto fail;
	for (int i = 0; i < r->npeers; i++) {
		struct repl_peer *p = &r->peers[i];
		bool we_mirror = cfg->role == CONFIG_ROLE_MIRROR;
		bool it_mirror = p->cfg->role == CONFIG_ROLE_MIRROR;
		p->link = !we_mirror ? (it_mirror ? LINK_FEED_OUT : LINK_FULL)
		                     : (it_mirror ? LINK_NONE : LINK_FEED_IN);
		if (p->link == LINK_FULL && !(p->sub = link_sub(r, p)))
			goto fail;
		if ((p->link == LINK_FULL || p->link == LINK_FEED_IN) &&
		    !(p->dealer = link_dealer(r, p)))
			goto fail;
	}
	if (o->signer &&
	    tlogwit_open(&r->tlogwit,
	                 &(struct tlogwit_opts){.store = r->store,
	                                        .cfg = cfg,
	                                        .self = r->self,
	                                        .pub = r->pub,
	                                        .signer = o->signer}) < 0)
		goto fail;
	if (r->tlogwit &&
	    peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_CKPT_REQ,
	            tlogwit_on_req, r->tlogwit) < 0)
		goto fail;
	r->lat.lat_us = xcalloc(LAT_SAMPLES, sizeof(*r->lat.lat_us));
	for (int k = 0; k < LAT__STAGES; k++)
		r->lat.stage_us[k] =
		        xcalloc(WAIT_SAMPLES, sizeof(*r->lat.stage_us[k]));
	r->syncing = r->npeers > 0;
	if (r->syncing)
		log_info("syncing with peers before validating tokens peers=%d",
		         r->npeers);
	*out = r;
	return 0;
fail:
	repl_destroy(&r);
	return GD_EIO;
}

void repl_destroy(struct repl **rp)
{
	struct repl *r = *rp;
	if (!r)
		return;
	for (int i = 0; i < r->npeers; i++) {
		struct repl_peer *p = &r->peers[i];
		if (p->sub) {
			linkmon_detach(&p->sub_mon, p->sub);
			zmq_close(p->sub);
		}
		if (p->dealer) {
			linkmon_detach(&p->dealer_mon, p->dealer);
			zmq_close(p->dealer);
		}
		if (p->hb)
			grantd__v1__heartbeat__free_unpacked(p->hb, NULL);
		if (p->msub)
			grantd__v1__peer_msg__free_unpacked(p->msub, NULL);
		repl_live_free(p);
	}
	tlogwit_destroy(&r->tlogwit);
	if (r->pub)
		zmq_close(r->pub);
	repl_xfer_free(&r->xfer);
	free(r->lat.lat_us);
	for (int k = 0; k < LAT__STAGES; k++)
		free(r->lat.stage_us[k]);
	free(r);
	*rp = NULL;
}

int repl_pollitems(struct repl *r, zmq_pollitem_t *items, int max)
{
	int k = peer_pollitems(r->link, items, max);

	for (int i = 0; i < r->npeers; i++) {
		/* a NULL socket would poll fd 0 */
		if (k < max && r->peers[i].sub)
			items[k++] = (zmq_pollitem_t){r->peers[i].sub, 0,
			                              ZMQ_POLLIN, 0};
		if (k < max && r->peers[i].dealer)
			items[k++] = (zmq_pollitem_t){r->peers[i].dealer, 0,
			                              ZMQ_POLLIN, 0};
	}
	return k;
}

/* Decode one frame from peer p's link; NULL when it is bad (counted). */
static Grantd__V1__PeerMsg *
decode(struct repl *r, const char *site, zmq_msg_t *msg)
{
	const char *why;
	Grantd__V1__PeerMsg *m = peer_msg_decode(zmq_msg_data(msg),
	                                         zmq_msg_size(msg), site, &why);

	if (m)
		return m;
	static struct log_limit lim; /* a misnamed peer sends 4 a second */
	uint64_t held;
	repl_dropped(r, 1);
	if (log_limit_pass(&lim, clock_mono_ms(), LOG_LIMIT_MS, &held))
		log_warn("peer message dropped peer=%s: %s dropped=%llu "
		         "(%llu more such lines held back)",
		         site, why, (unsigned long long)repl_dropped_total(r),
		         (unsigned long long)held);
	return NULL;
}

/* A peer publishes only its own operations: on its live channel an
 * operation of another origin is a forgery (taking that origin's sequence
 * numbers).  Relays of other origins come only in range answers. */
static bool
op_from_link(struct repl *r, struct repl_peer *p, const Grantd__V1__Op *op)
{
	if (!op->origin || !strcmp(op->origin, p->cfg->site))
		return true; /* (no origin: repl_apply_op refuses it) */
	repl_stat_refuse(r, DROP_FORGED_ORIGIN, 1,
	                 "peer operation dropped peer=%s "
	                 "origin=%s seq=%llu: origin is not the link's site",
	                 p->cfg->site,
	                 name_site_ok(op->origin) ? op->origin : "?",
	                 (unsigned long long)op->seq);
	return false;
}

/* One frame from a peer's SUB or DEALER. */
static int
handle_peer(struct repl *r, struct repl_peer *p, void *sock, uint64_t now_ms)
{
	zmq_msg_t body;

	if (!peer_recv_frame(sock, &body))
		return 0;
	if (zmq_msg_more(&body)) {
		peer_drain(sock, &body);
		zmq_msg_close(&body);
		repl_dropped(r, 1);
		return 1;
	}
	Grantd__V1__PeerMsg *m = decode(r, p->cfg->site, &body);
	zmq_msg_close(&body);
	if (!m)
		return 1;
	p->last_heard_ms = now_ms;
	enum plane_sock ps = sock == p->sub ? PLANE_SUB : PLANE_DEALER;
	if (planes_answer((int)m->body_case, ps, planes_role(p->cfg->role)) !=
	    PLANE_TAKE) {
		const struct plane_row *row = planes_row((int)m->body_case);
		repl_stat_refuse(r, DROP_PLANE, 1,
		                 "peer message dropped peer=%s "
		                 "socket=%s kind=%s: not taken from a %s",
		                 p->cfg->site, planes_sock_name(ps),
		                 row ? row->name : "unknown",
		                 planes_role_name(planes_role(p->cfg->role)));
		if (m->body_case == GRANTD__V1__PEER_MSG__BODY_OP)
			records_op_wipe(m->op);
		grantd__v1__peer_msg__free_unpacked(m, NULL);
		return 1;
	}
	if (m->body_case == GRANTD__V1__PEER_MSG__BODY_OP && sock == p->sub &&
	    op_from_link(r, p, m->op)) {
		repl_live_take(r, p, m, now_ms); /* checked as a run */
		return 1;
	}
	repl_live_flush(r, p, now_ms); /* what came before m applies first */
	switch (m->body_case) {
	case GRANTD__V1__PEER_MSG__BODY_OP:
		if (sock != p->sub)
			repl_dropped(r, 1);
		records_op_wipe(m->op);
		break;
	case GRANTD__V1__PEER_MSG__BODY_HEARTBEAT:
		repl_hb_take(r, p, m);
		break;
	case GRANTD__V1__PEER_MSG__BODY_PUSHLOG_HEADS:
		if (sock == p->sub)
			repl_hb_take_plheads(r, p, m->pushlog_heads);
		else
			repl_dropped(r, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_CHECKPOINT:
		if (sock == p->sub && r->tlogwit)
			tlogwit_take_checkpoint(r->tlogwit, p->cfg->site,
			                        m->checkpoint);
		else
			repl_dropped(r, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_COSIG:
		if (sock == p->sub && r->tlogwit)
			tlogwit_take_cosig(r->tlogwit, p->cfg->site, m->cosig);
		else
			repl_dropped(r, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_CKPT_REP:
		if (sock == p->dealer && p->link == LINK_FEED_IN && r->tlogwit)
			tlogwit_take_notes(r->tlogwit, m->ckpt_rep);
		else
			repl_dropped(r, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_SNAP_REP:
		if (sock == p->dealer)
			repl_xfer_apply(r, p, m->snap_rep, now_ms);
		else
			repl_dropped(r, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_RANGE_REP:
		/* a mirror asks for ranges as mirror_ops only */
		if (sock == p->dealer && p->link == LINK_FULL)
			repl_range_apply(r, p, m->range_rep, now_ms);
		else
			repl_dropped(r, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_MIRROR_OPS:
		if (sock == p->dealer && p->link == LINK_FEED_IN)
			repl_mirror_apply_ops(r, p, m->mirror_ops, m->sent_us,
			                      now_ms);
		else
			repl_dropped(r, 1);
		break;
	default:
		repl_dropped(r, 1);
	}
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	return 1;
}

void repl_handle(struct repl *r)
{
	uint64_t now_ms = clock_mono_ms();
	int handled = 0;

	/* a round commits at most about one range: with the next range
	 * asked before this one is applied, replies keep coming, and one
	 * batch of 100,000 operations took 0.8 s to write at the end */
	r->batch_ops = 0;
	while (peer_zap_handle(r->link),
	       handled < HANDLE_MAX && r->batch_ops < RANGE_MAX_OPS) {
		int got = peer_route(r->link);
		for (int i = 0; i < r->npeers; i++) {
			if (r->peers[i].sub)
				got += handle_peer(r, &r->peers[i],
				                   r->peers[i].sub, now_ms);
			if (r->peers[i].dealer)
				got += handle_peer(r, &r->peers[i],
				                   r->peers[i].dealer, now_ms);
		}
		if (!got)
			break;
		handled += got;
	}
	for (int i = 0; i < r->npeers; i++)
		repl_live_flush(r, &r->peers[i], now_ms);
	/* whatever the batch holds goes to disk now, with the digest it
	 * moved: an operation that failed left nothing in it (ops_apply) */
	if (!r->dirty && !ops_pending(r->ops, r->batch))
		return;
	r->dirty = false;
	crashpoint("peer-batch");
	/* Written now; made durable by the syncer, like local writes, so
	 * the loop never waits on the disk.  Nothing is acknowledged for a
	 * peer's operation: a crash before the fsync only means it is fetched
	 * again (the vector in the same batch rolls back with it). */
	uint64_t t = 0;
	int rc = writer_commit(r->writer, &t);
	repl_stat_committed(r, rc, t);
	if (rc < 0) /* the writer dropped it, and what it moved in memory */
		log_error("peer batch not committed; it will be fetched again");
}

void repl_publish(struct buf *ob, void *payload)
{
	struct repl *r = payload;
	size_t off = 0, nraw = 0, capraw = 0;
	ProtobufCBinaryData *raw = NULL;

	while (r->pub && off + 4 <= ob->len) {
		const uint8_t *p = (const uint8_t *)ob->p + off;
		size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 |
		             (size_t)p[2] << 8 | p[3];
		if (off + 4 + len > ob->len)
			break;
		Grantd__V1__Op *op = grantd__v1__op__unpack(NULL, len, p + 4);
		if (op && op->epoch == ops_epoch(r->ops) &&
		    op->seq > ops_published(r->ops))
			ops_set_published(r->ops, op->seq);
		if (op) {
			Grantd__V1__PeerMsg m;
			peer_msg_init(r->self, &m);
			m.body_case = GRANTD__V1__PEER_MSG__BODY_OP;
			m.op = op;
			if (peer_send(r->pub, &m, NULL, 0) < 0)
				log_warn("publish failed seq=%llu: %s "
				         "(peers will fetch it)",
				         (unsigned long long)op->seq,
				         zmq_strerror(errno));
			records_op_wipe(op);
			grantd__v1__op__free_unpacked(op, NULL);
			GD_GROW(raw, capraw, nraw + 1);
			raw[nraw++] =
			        (ProtobufCBinaryData){len, (uint8_t *)p + 4};
		}
		off += 4 + len;
	}
	repl_mirror_feed(r, raw, nraw);
	free(raw);
	sodium_memzero(ob->p, ob->len);
	buf_reset(ob);
}

/* The operation log keeps oplog_retention seconds: truncated at most
 * every minute (half the retention when shorter). */
static void truncate_log(struct repl *r, uint64_t now_ms)
{
	int64_t keep = r->cfg->oplog_retention * 1000;

	if (now_ms - r->last_truncate_ms <=
	    (uint64_t)(keep / 2 < 60000 ? keep / 2 : 60000))
		return;
	r->last_truncate_ms = now_ms;
	int k = ops_truncate_log(r->ops, clock_wall_ms() - (uint64_t)keep,
	                         TRUNCATE_MAX);
	if (k > 0)
		log_info("operation log truncated entries=%d", k);
	/* and the operations records kept that none names any more */
	k = ops_sweep_kept(r->ops, TRUNCATE_MAX);
	if (k > 0)
		log_info("kept operations dropped n=%d (no record names them)",
		         k);
}

/* What the peers' ticks found: the syncing gate's input. */
struct level {
	bool all_level, any_heard, all_heard;
};

/* One peer's tick: its sockets, a mirror's subscription, range repair. */
static void tick_peer(struct repl *r,
                      struct repl_peer *p,
                      uint64_t now_ms,
                      struct level *lv)
{
	relink(r, p, now_ms);
	if (p->link == LINK_FEED_IN &&
	    now_ms - p->last_sub_ms >= REPL_HEARTBEAT_MS) {
		p->last_sub_ms = now_ms;
		repl_mirror_subscribe(r, p);
	}
	if (p->link == LINK_FEED_IN && r->tlogwit &&
	    now_ms - p->last_ckpt_ms >= TLOGWIT_EVERY_MS) {
		p->last_ckpt_ms = now_ms;
		tlogwit_ask(r->tlogwit, p->dealer);
	}
	if (repl_range_tick(r, p, now_ms))
		lv->all_level = false;
	if (p->hb && now_ms - p->last_heard_ms < CONNECTED_MS)
		lv->any_heard = true;
	else
		lv->all_heard = false;
}

/* The syncing gate (repl_syncing): open once level with every peer heard,
 * or level with some after SYNC_GRACE_MS, or none heard in SYNC_GRACE_MS,
 * or after SYNC_MAX_MS whatever the state. */
static void sync_gate(struct repl *r, const struct level *lv, uint64_t now_ms)
{
	uint64_t up = now_ms - r->started_ms;
	uint64_t grace = crashpoint_sync_grace_ms(SYNC_GRACE_MS);

	if (!r->syncing)
		return;
	if ((lv->all_level && lv->all_heard) ||
	    (lv->all_level && lv->any_heard && up > grace) ||
	    (!lv->any_heard && up > grace) || up > SYNC_MAX_MS) {
		r->syncing = false;
		log_info("sync done: validating tokens peers_heard=%s "
		         "after_ms=%llu",
		         lv->any_heard ? "yes" : "none",
		         (unsigned long long)up);
	}
}

void repl_tick(struct repl *r, uint64_t now_ms)
{
	struct level lv = {.all_level = true, .all_heard = true};

	repl_xfer_tick(r, now_ms);
	repl_hb_tick(r, now_ms);
	if (r->tlogwit)
		tlogwit_tick(r->tlogwit, now_ms);
	truncate_log(r, now_ms);
	for (int i = 0; i < r->npeers; i++) {
		struct repl_peer *p = &r->peers[i];
		/* a mirror we feed asks us; two mirrors say nothing */
		if (p->link != LINK_FEED_OUT && p->link != LINK_NONE)
			tick_peer(r, p, now_ms, &lv);
	}
	repl_stat_catchup(r, lv.all_level, now_ms);
	sync_gate(r, &lv, now_ms);
}

const struct peerpolicy *repl_peerpolicy(const struct repl *r)
{
	return &r->policy;
}

int repl_rebuild(struct repl *r, const char *site, bool trust_unsigned)
{
	struct repl_peer *p = repl_peer_by_site(r, site);
	Grantd__V1__PeerMsg m;

	if (!p)
		return GD_ENOTFOUND;
	peer_msg_init(r->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VV_REQ;
	m.vv_req = 1;
	if (peer_send(p->dealer, &m, NULL, 0) < 0)
		return GD_EUNREACH;
	log_info("rebuild requested from peer=%s", site);
	if (trust_unsigned)
		repl_xfer_rebuild(r, p, clock_mono_ms());
	return 0;
}

uint64_t repl_dropped_total(const struct repl *r)
{
	return r->dropped + peer_dropped(r->link);
}

uint64_t repl_refused(struct repl *r)
{
	return peer_refused(r->link);
}

bool repl_syncing(const struct repl *r)
{
	return r->syncing;
}
