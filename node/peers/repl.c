/*
 * repl.c: PUB/SUB for live operations, ROUTER/DEALER for repair, ZAP for
 * admission.  The shape follows the ZeroMQ guide's reliable pub-sub (the
 * Clone pattern), made multi-master: every node is the publisher of its
 * own operations, sequence numbers are per (origin, epoch), and the
 * heartbeat carries the whole version vector so a node learns of
 * operations it missed from any peer, not only from their origin.
 *
 * The link below (framing, CURVE sockets, ZAP, the sync ROUTER) is
 * peer.c's; the requests peers make on that ROUTER reach serve_range,
 * serve_snap and vector_msg through the handlers registered in repl_open.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "crashpoint.h"
#include "err.h"
#include "linkmon.h"
#include "log.h"
#include "metrics.h"
#include "names.h"
#include "ops.h"
#include "peer.h"
#include "planes.h"
#include "peerpolicy.h"
#include "plheads.h"
#include "repl.h"
#include "writer.h"
#include "banned.h"

#define RANGE_MAX_OPS 4096
#define RANGE_MAX_BYTES (8 * 1024 * 1024)
#define RANGE_TIMEOUT_MS 5000
#define PEER_MSG_MAX (16 * 1024 * 1024) /* range and snapshot replies */
#define SUB_MSG_MAX (1024 * 1024)       /* one operation or heartbeat */
#define SYNC_GRACE_MS 5000
#define SYNC_MAX_MS 60000
#define CONNECTED_MS 1500
#define LIVE_GRACE_MS 500       /* see repl_tick */
#define MAX_SKEW_MS (120 * 1000)
#define HANDLE_MAX 256
#define MAX_VV 4096             /* (origin, epoch) entries in a vector */
#define RETIRE_MS 1000          /* how often finished epochs are retired */
#define HANDLE_MAX_SAMPLES 4096
#define WAIT_SAMPLES 65536
#define TRUNCATE_MAX 100000
#define MIRROR_LEASE_MS 3000    /* a mirror's feed lives this long after
				 * its last mirror_sub (sent every
				 * REPL_HEARTBEAT_MS) */
#define RID_MAX 256             /* a ROUTER routing id */

/* How this node talks with a peer, by the two roles (docs/mirrors.md). */
enum link_kind {
	LINK_FULL,      /* two frontends: SUB to its PUB, DEALER to its sync */
	LINK_FEED_OUT,  /* it is a mirror, we a frontend: it subscribes on
			 * our sync ROUTER (mirror_sub) and we push it
			 * mirror_ops; no socket of ours goes to it */
	LINK_FEED_IN,   /* we are a mirror, it a frontend: our DEALER
			 * subscribes and asks for ranges; no SUB (its PUB
			 * refuses us) */
	LINK_NONE,      /* two mirrors: nothing to say */
};

struct peer {
	const struct config_peer *cfg;
	enum link_kind link;
	void *sub;
	void *dealer;
	/* their handshakes: made again after one failed (linkmon.h) */
	struct linkmon sub_mon, dealer_mon;
	/* LINK_FEED_IN: when we last subscribed */
	uint64_t last_sub_ms;
	/* LINK_FEED_OUT: the mirror's lease on our ROUTER, its last
	 * mirror_sub (owned; NULL: none yet) and since when it is behind */
	uint8_t rid[RID_MAX];
	size_t ridlen;
	uint64_t lease_until_ms;
	Grantd__V1__PeerMsg *msub;
	uint64_t last_heard_ms;
	Grantd__V1__Heartbeat *hb;   /* the last one heard, owned */
	uint64_t behind_since_ms;    /* 0: level with it */
	uint64_t lag_ops;
	bool range_inflight;
	uint64_t range_sent_ms;
	/* the last range asked of this peer (origin "": none, or answered):
	 * the only reply taken (range_answers) */
	char range_origin[NAME_SITE_MAX + 1];
	uint64_t range_epoch;
	uint64_t range_from;
	/* the last range answered: a second answer to it (asked again after
	 * RANGE_TIMEOUT_MS) is ignored, not counted */
	char done_origin[NAME_SITE_MAX + 1];
	uint64_t done_epoch;
	uint64_t done_from;
};

/* A state transfer in progress (this node far behind one peer). */
struct snap {
	struct peer *p;            /* NULL: none running */
	int cf;                    /* index into snap_cfs */
	struct buf after;          /* last key received */
	Grantd__V1__VvEntry **vv;  /* the sender's vector at the start */
	size_t nvv;
	uint64_t sent_ms;
	uint64_t records;
	uint64_t refused;          /* records that failed a check */
};

/* the replicated families, in table order (records.h) */
static const enum store_cf snap_cfs[] = { GD_RECORD_KINDS(RECORDS_SNAP_CF) };
#define SNAP_MAX_RECORDS 4096

static void snap_free(struct snap *sn);

/* Peer input refused for a reason of its own, counted apart (status:
 * replication.dropped.<name>) as well as in counts.dropped. */
enum drop_why {
	DROP_FORGED_ORIGIN,   /* a live operation not of the link's site */
	DROP_SNAP_RECORD,     /* a state-transfer record failing a check */
	DROP_SNAP_VECTOR,     /* a state-transfer vector claim not proved */
	DROP_HB_VECTOR,       /* heartbeat entries over MAX_VV, or bad */
	DROP_PLANE,           /* a kind the planes table does not take on
			       * this socket from the peer's role; with the
			       * ROUTER's (peer_planes_refused) in status */
	DROP_RANGE_UNASKED,   /* a range reply (or an operation in it) that
			       * does not answer the last range asked */
	DROP_MIRROR_HIDDEN,   /* at a mirror: a hidden operation sent whole,
			       * or records of a hidden family (SPEC 9: a
			       * mirror never receives them) */
	DROP__COUNT
};
static const char *const drop_names[DROP__COUNT] = {
	"forged_origin", "snapshot_record", "snapshot_vector",
	"heartbeat_vector", "plane", "range_unasked", "mirror_hidden"
};

/* Replication latency samples (publish at the origin to durable here),
 * and the last catch-up episode, for `grantctl status` and bench/. */
#define LAT_SAMPLES (1 << 20)
struct metrics {
	uint32_t *lat_us;          /* ring of samples */
	uint64_t lat_n;            /* samples ever taken */
	uint32_t pending[HANDLE_MAX_SAMPLES];
	int npending;              /* applied, not yet committed */
	struct {
		uint64_t ticket;   /* durable when the syncer passes it */
		uint32_t sent;
	} waiting[WAIT_SAMPLES];
	uint64_t wait_head, wait_tail; /* ring indexes */
	uint64_t behind_since_ms;  /* current episode, 0: level */
	uint64_t episode_ops;
	uint64_t last_ops, last_ms;
	/* the percentiles status shows, as of sorted_n samples */
	uint64_t sorted_n, sorted_at_ms;
	uint32_t p50, p99, max;
};

/* status renders every 100 ms (main.c): with more samples than this
 * (a sort of up to LAT_SAMPLES takes tens of ms) the percentiles are
 * sorted again at most every LAT_SORT_MS. */
#define LAT_SORT_CHEAP 4096
#define LAT_SORT_MS 1000

struct repl {
	struct ops *ops;             /* the writer's: this thread's */
	struct store *store;
	const struct config *cfg;
	const struct peer_self *self;
	struct peer_link *link;      /* its ROUTER serves ranges, snapshots */
	struct writer *writer;       /* THE batch and its commit */
	struct metrics_hist *latency_hist; /* metrics.h; NULL: none */
	bool syncing;                /* catching up: see repl_syncing */
	struct snap snap;
	struct metrics met;
	uint64_t last_truncate_ms;
	void *pub;
	struct peer peers[CONFIG_MAX_PEERS];
	int npeers;
	uint64_t last_hb_ms;
	uint64_t last_plheads_ms;
	uint64_t started_ms;
	uint64_t last_skew_log_ms;
	uint64_t drops[DROP__COUNT];
	uint64_t drop_log_ms[DROP__COUNT];
	uint64_t last_cap_log_ms;
	uint64_t last_retire_ms;
	struct store_batch *batch;
	bool dirty;                  /* batch holds applied peer ops */
	bool relinked;               /* a peer socket was made again */
	uint32_t batch_ops;          /* ops applied into it this round */
	/* [policy] settings: ours in every heartbeat, peers' compared */
	struct peerpolicy policy;
	Grantd__V1__PolicySettings hb_policy;
};

static struct peer *peer_by_site(struct repl *r, const char *site);

/* Is site a mirror this node feeds (LINK_FEED_OUT)? */
static bool to_mirror(struct repl *r, const char *site)
{
	const struct peer *p = site ? peer_by_site(r, site) : NULL;

	return p && p->link == LINK_FEED_OUT;
}

/* Operations as a mirror receives them (MirrorOps): each with its stamp,
 * and its bytes only when a mirror may hold what it writes. */
struct mops {
	Grantd__V1__MirrorOps mo;
	Grantd__V1__MirrorOp *items;
	Grantd__V1__MirrorOp **ptrs;
	Grantd__V1__Op **ops;      /* unpacked, for their stamps (owned) */
	size_t n;
};

/* raw (n packed Ops) is borrowed and must outlive b's sending. */
static void mops_build(struct mops *b, const ProtobufCBinaryData *raw,
		       size_t n)
{
	memset(b, 0, sizeof(*b));
	grantd__v1__mirror_ops__init(&b->mo);
	b->items = calloc(n ? n : 1, sizeof(*b->items));
	b->ptrs = calloc(n ? n : 1, sizeof(*b->ptrs));
	b->ops = calloc(n ? n : 1, sizeof(*b->ops));
	if (!b->items || !b->ptrs || !b->ops)
		abort();
	for (size_t i = 0; i < n; i++) {
		Grantd__V1__Op *op = grantd__v1__op__unpack(NULL, raw[i].len,
							   raw[i].data);
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
		ops_wipe(b->ops[i]);
		grantd__v1__op__free_unpacked(b->ops[i], NULL);
	}
	free(b->items);
	free(b->ptrs);
	free(b->ops);
	memset(b, 0, sizeof(*b));
}

/* Count n refusals for why (and in counts.dropped); the log says what at
 * most once a second per reason, with the running count. */
static void refuse(struct repl *r, enum drop_why why, uint64_t n,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void refuse(struct repl *r, enum drop_why why, uint64_t n,
		   const char *fmt, ...)
{
	uint64_t now_ms = clock_mono_ms();
	char m[512];
	va_list ap;

	r->drops[why] += n;
	ops_note_dropped(r->ops, n);
	if (now_ms - r->drop_log_ms[why] < 1000)
		return;
	r->drop_log_ms[why] = now_ms;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	log_error("%s %s=%llu dropped=%llu", m, drop_names[why],
		  (unsigned long long)r->drops[why],
		  (unsigned long long)ops_dropped(r->ops));
}

/* ---- version vectors ------------------------------------------------------ */

/* Our whole vector as heartbeat entries; free with hb_free_entries. */
static void hb_fill(struct repl *r, Grantd__V1__Heartbeat *hb)
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
		/* never more than a peer takes (take_heartbeat); our own
		 * stream always has its place */
		bool ours = ol == strlen(ops_site(o)) &&
			    !memcmp(key, ops_site(o), ol) &&
			    store_get_be64(key + ol + 1) == ops_epoch(o);
		if (hb->n_vv >= MAX_VV - 1 && !ours) {
			over++;
			continue;
		}
		if (hb->n_vv == cap) {
			cap = cap ? 2 * cap : 8;
			hb->vv = realloc(hb->vv, cap * sizeof(*hb->vv));
			if (!hb->vv)
				abort();
		}
		Grantd__V1__VvEntry *e = malloc(sizeof(*e));
		if (!e)
			abort();
		grantd__v1__vv_entry__init(e);
		e->origin = strndup(key, ol);
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
		log_warn("heartbeat vector capped entries=%zu sent=%zu: finished "
			 "epochs are retired only once every peer holds them",
			 hb->n_vv + over, hb->n_vv);
	}
	hb->hlc = ops_hlc_last(r->ops), hb->has_hlc = 1;
	hb->digest.data = (uint8_t *)ops_digest(r->ops);
	hb->digest.len = DIGEST_LEN, hb->has_digest = 1;
	hb->syncing = r->syncing, hb->has_syncing = 1;
	hb->policy = &r->hb_policy;
}

static void hb_free_entries(Grantd__V1__Heartbeat *hb)
{
	for (size_t i = 0; i < hb->n_vv; i++) {
		free(hb->vv[i]->origin);
		free(hb->vv[i]);
	}
	free(hb->vv);
	hb->vv = NULL;
	hb->n_vv = 0;
}

/* The seqs of our epochs of origin that peer p's heartbeat does not list:
 * epochs it has retired and we not yet (ops_vv_follow), so its retired
 * total is ahead of ours by them without p holding anything we lack. */
static uint64_t unlisted(struct repl *r, const struct peer *p,
			 const char *origin)
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
			listed = p->hb->vv[j]->epoch ==
					 ops_vv_at(o, i)->epoch &&
				 !strcmp(p->hb->vv[j]->origin, origin);
		if (!listed)
			sum += ops_vv_at(o, i)->seq;
	}
	return sum;
}

/* The first entry where peer p is ahead of us; NULL when level.  Also
 * counts how far behind we are in total. */
static const Grantd__V1__VvEntry *peer_ahead(struct repl *r, struct peer *p,
					     uint64_t *lag)
{
	const Grantd__V1__VvEntry *first = NULL;

	*lag = 0;
	if (!p->hb)
		return NULL;
	for (size_t i = 0; i < p->hb->n_vv; i++) {
		const Grantd__V1__VvEntry *e = p->hb->vv[i];
		uint64_t have = ops_vv_get(r->ops, NULL, e->origin,
					   e->epoch);
		const struct peer *q = peer_by_site(r, e->origin);
		/* an epoch its origin retired and our total holds: p has
		 * not followed the retirement yet (ops_vv_covered) */
		if (e->seq > have && q && q != p && q->hb &&
		    ops_vv_covered(r->ops, e->origin, e->epoch, q->hb->vv,
				   q->hb->n_vv))
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

/* Ask p for origin's operations of epoch from seq from on. */
static void request_range_from(struct repl *r, struct peer *p,
			       const char *origin, uint64_t epoch,
			       uint64_t from, uint64_t now_ms)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__RangeReq rq = GRANTD__V1__RANGE_REQ__INIT;

	if (p->range_inflight)
		return;
	/* one peer at a time per stream: the others would send it again */
	for (int i = 0; i < r->npeers; i++) {
		struct peer *q = &r->peers[i];
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
static void request_range(struct repl *r, struct peer *p, const char *origin,
			  uint64_t epoch, uint64_t now_ms)
{
	request_range_from(r, p, origin, epoch,
			   ops_vv_get(r->ops, NULL, origin, epoch) + 1,
			   now_ms);
}

/* ---- opening --------------------------------------------------------------- */

static void on_range_req(const struct peer_req *rq, void *payload);
static void on_snap_req(const struct peer_req *rq, void *payload);
static void on_vv_req(const struct peer_req *rq, void *payload);
static void on_mirror_sub(const struct peer_req *rq, void *payload);

/* ---- the links to peers -------------------------------------------------- */

static void *link_sub(struct repl *r, struct peer *p)
{
	return peer_curve_client_watched(r->self, ZMQ_SUB, p->cfg->publish,
					 p->cfg->public_key, SUB_MSG_MAX,
					 &p->sub_mon);
}

static void *link_dealer(struct repl *r, struct peer *p)
{
	return peer_curve_client_watched(r->self, ZMQ_DEALER, p->cfg->sync,
					 p->cfg->public_key, PEER_MSG_MAX,
					 &p->dealer_mon);
}

/* libzmq never retries a connection whose handshake failed (linkmon.h):
 * make p's sockets again when their monitors say so.  The sockets change,
 * so the loop polls the new ones (repl_relinked). */
static void relink(struct repl *r, struct peer *p, uint64_t now_ms)
{
	char what[NAME_SITE_MAX + Z85_KEY_LEN + 48];

	snprintf(what, sizeof(what), "peer=%s socket=sub key=%s",
		 p->cfg->site, r->self->curve_pub);
	if (p->sub && linkmon_poll(&p->sub_mon, now_ms, what)) {
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
	snprintf(what, sizeof(what), "peer=%s socket=sync key=%s",
		 p->cfg->site, r->self->curve_pub);
	if (p->dealer && linkmon_poll(&p->dealer_mon, now_ms, what)) {
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

/* The worse of p's two sockets' states. */
static const struct linkmon *link_state(const struct peer *p)
{
	const struct linkmon *a = &p->sub_mon, *b = &p->dealer_mon;

	if (!p->sub)
		return b;
	if (!p->dealer)
		return a;
	if (a->state == LINKMON_KEY_REFUSED || b->state == LINKMON_UP)
		return a;
	return b;
}

int repl_open(struct repl **out, const struct repl_opts *o)
{
	struct repl *r = calloc(1, sizeof(*r));
	const struct config *cfg = o->cfg;

	if (!r)
		abort();
	*out = NULL;
	r->ops = o->ops;
	r->store = o->store;
	r->cfg = cfg;
	r->self = o->self;
	r->link = o->link;
	r->writer = o->writer;
	r->latency_hist = o->latency_hist;
	r->started_ms = clock_mono_ms();
	r->batch = writer_batch(o->writer); /* borrowed: THE batch */
	for (int i = 0; i < cfg->npeers; i++)
		r->peers[r->npeers++].cfg = &cfg->peers[i];
	peerpolicy_init(&r->policy, cfg);
	peerpolicy_fill(cfg, &r->hb_policy);
	if (cfg->publish &&
	    !(r->pub = peer_server(r->link, ZMQ_PUB, cfg->publish, 1024)))
		goto fail;
	if (peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_RANGE_REQ, on_range_req,
		    r) < 0 ||
	    peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_SNAP_REQ, on_snap_req,
		    r) < 0 ||
	    peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_VV_REQ, on_vv_req,
		    r) < 0 ||
	    peer_on(r->link, GRANTD__V1__PEER_MSG__BODY_MIRROR_SUB,
		    on_mirror_sub, r) < 0)
		goto fail;
	for (int i = 0; i < r->npeers; i++) {
		struct peer *p = &r->peers[i];
		bool we_mirror = cfg->role == CONFIG_ROLE_MIRROR;
		bool it_mirror = p->cfg->role == CONFIG_ROLE_MIRROR;
		p->link = !we_mirror ? (it_mirror ? LINK_FEED_OUT : LINK_FULL) :
			  (it_mirror ? LINK_NONE : LINK_FEED_IN);
		if (p->link == LINK_FULL && !(p->sub = link_sub(r, p)))
			goto fail;
		if ((p->link == LINK_FULL || p->link == LINK_FEED_IN) &&
		    !(p->dealer = link_dealer(r, p)))
			goto fail;
	}
	r->met.lat_us = calloc(LAT_SAMPLES, sizeof(*r->met.lat_us));
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
		struct peer *p = &r->peers[i];
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
	}
	if (r->pub)
		zmq_close(r->pub);
	snap_free(&r->snap);
	free(r->met.lat_us);
	free(r);
	*rp = NULL;
}

int repl_pollitems(struct repl *r, zmq_pollitem_t *items, int max)
{
	int k = peer_pollitems(r->link, items, max);

	for (int i = 0; i < r->npeers; i++) {
		/* a NULL socket would poll fd 0 */
		if (k < max && r->peers[i].sub)
			items[k++] = (zmq_pollitem_t){ r->peers[i].sub, 0,
						       ZMQ_POLLIN, 0 };
		if (k < max && r->peers[i].dealer)
			items[k++] = (zmq_pollitem_t){ r->peers[i].dealer, 0,
						       ZMQ_POLLIN, 0 };
	}
	return k;
}

/* ---- applying --------------------------------------------------------------- */

static bool origin_known(struct repl *r, const char *origin)
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
static void back_off(struct peer *p, uint64_t now_ms)
{
	p->range_inflight = true;
	p->range_sent_ms = now_ms;
	p->range_origin[0] = '\0';
}

static void apply_op(struct repl *r, struct peer *p, const Grantd__V1__Op *op,
		     uint64_t sent_us, uint64_t now_ms)
{
	uint64_t wall_ms = clock_wall_ms(); /* stamps; now_ms: intervals */
	struct buf why = BUF_INIT;
	bool applied;
	int rc;

	if (ops_check(op, &why) == 0 && !origin_known(r, op->origin))
		buf_puts(&why, "unknown origin site");
	else if (why.len == 0 && hlc_ms(op->hlc) > wall_ms + MAX_SKEW_MS)
		buf_printf(&why, "stamped %llu ms in the future (check the "
			   "clock of origin=%s)",
			   (unsigned long long)(hlc_ms(op->hlc) - wall_ms),
			   op->origin);
	if (why.len) {
		ops_note_dropped(r->ops, 1);
		if (now_ms - r->last_skew_log_ms > 1000) {
			r->last_skew_log_ms = now_ms;
			log_error("peer operation dropped peer=%s origin=%s "
				  "seq=%llu: %s dropped=%llu", p->cfg->site,
				  op->origin ? op->origin : "-",
				  (unsigned long long)op->seq, why.p,
				  (unsigned long long)ops_dropped(r->ops));
		}
		back_off(p, now_ms);
		buf_free(&why);
		return;
	}
	buf_free(&why);
	if (r->cfg->role == CONFIG_ROLE_MIRROR && !ops_mirror_visible(op)) {
		/* a frontend must send a mirror no such body (mirror_ops
		 * carry its stamp alone); should one come, its stamp is all
		 * that is kept, and it is counted */
		refuse(r, DROP_MIRROR_HIDDEN, 1, "hidden operation sent to a "
		       "mirror peer=%s origin=%s seq=%llu: only its stamp "
		       "kept", p->cfg->site, op->origin,
		       (unsigned long long)op->seq);
		rc = ops_skip(r->ops, r->batch, op->origin, op->epoch, op->seq,
			      op->hlc, &applied);
	} else {
		rc = ops_apply(r->ops, r->batch, op, &applied);
	}
	if (rc == GD_EINVAL) {
		/* a gap: fetch what is missing from whoever sent it */
		request_range(r, p, op->origin, op->epoch, now_ms);
		return;
	}
	if (rc < 0) {
		log_error("cannot apply operation origin=%s seq=%llu: %s",
			  op->origin, (unsigned long long)op->seq,
			  gd_strerror(rc));
		return;
	}
	if (applied) {
		r->dirty = true;
		r->batch_ops++;
		r->met.episode_ops++;
		if (sent_us && r->met.npending < HANDLE_MAX_SAMPLES)
			r->met.pending[r->met.npending++] =
				(uint32_t)(sent_us & 0xffffffff);
	}
}


/* ---- state transfer (snapshots) ---------------------------------------- */

static void snap_free(struct snap *sn)
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
	struct snap *sn = &r->snap;
	Grantd__V1__PeerMsg m;
	Grantd__V1__SnapReq rq = GRANTD__V1__SNAP_REQ__INIT;

	peer_msg_init(r->self, &m);
	rq.cf = (uint32_t)snap_cfs[sn->cf], rq.has_cf = 1;
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

static void snap_start(struct repl *r, struct peer *p, uint64_t now_ms)
{
	if (r->snap.p)
		return;
	r->snap.p = p;
	log_info("state transfer started peer=%s (behind its operation log)",
		 p->cfg->site);
	snap_request(r, now_ms);
}

static void serve_snap(struct repl *r, const struct peer_req *req,
		       const Grantd__V1__SnapReq *rq)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__SnapRep rep = GRANTD__V1__SNAP_REP__INIT;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	struct store_iter *it;
	struct buf v = BUF_INIT;
	ProtobufCBinaryData *keys, *vals;
	const char *key;
	size_t klen, bytes = 0;
	uint32_t max = rq->max && rq->max < SNAP_MAX_RECORDS ? rq->max :
							       SNAP_MAX_RECORDS;
	bool known = false;
	int rc = 0;

	for (size_t i = 0; i < GD_ARRAY_SIZE(snap_cfs); i++)
		known |= rq->cf == (uint32_t)snap_cfs[i];
	if (!known || rq->after.len > 4096) {
		ops_note_dropped(r->ops, 1);
		return;
	}
	/* to a mirror, a family it may not hold is sent empty */
	bool hide = to_mirror(r, req->site) &&
		    !records_mirror_visible((enum store_cf)rq->cf);
	if (rq->cf == (uint32_t)snap_cfs[0] && !rq->has_after) {
		/* the vector first, then the records: every record read later
		 * is at least as new as the vector says */
		hb_fill(r, &hb);
		rep.vv = hb.vv;
		rep.n_vv = hb.n_vv;
	}
	keys = calloc(max, sizeof(*keys));
	vals = calloc(max, sizeof(*vals));
	if (!keys || !vals)
		abort();
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
		keys[rep.n_keys].data = malloc(klen ? klen : 1);
		vals[rep.n_keys].data = malloc(v.len ? v.len : 1);
		if (!keys[rep.n_keys].data || !vals[rep.n_keys].data)
			abort();
		memcpy(keys[rep.n_keys].data, key, klen);
		keys[rep.n_keys].len = klen;
		memcpy(vals[rep.n_keys].data, v.p, v.len);
		vals[rep.n_keys].len = v.len;
		bytes += klen + v.len;
		rep.n_keys++;
	}
	rep.cf_done = rep.has_cf_done = hide || rc <= 0;
	store_iter_free(&it);
	rep.cf = rq->cf, rep.has_cf = 1;
	rep.keys = keys;
	rep.values = vals;
	rep.n_values = rep.n_keys;
	peer_msg_init(r->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_SNAP_REP;
	m.snap_rep = &rep;
	peer_reply(req, &m);
	for (size_t i = 0; i < rep.n_keys; i++) {
		free(keys[i].data);
		sodium_memzero(vals[i].data, vals[i].len);
		free(vals[i].data);
	}
	free(keys);
	free(vals);
	hb_free_entries(&hb);
	sodium_memzero(v.p, v.len);
	buf_free(&v);
}

static void snap_take_vv(struct snap *sn, Grantd__V1__SnapRep *rep)
{
	sn->vv = calloc(rep->n_vv ? rep->n_vv : 1, sizeof(*sn->vv));
	if (!sn->vv)
		abort();
	for (size_t i = 0; i < rep->n_vv && sn->nvv < MAX_VV; i++) {
		if (!rep->vv[i]->origin || !name_site_ok(rep->vv[i]->origin))
			continue;
		Grantd__V1__VvEntry *e = malloc(sizeof(*e));
		if (!e)
			abort();
		*e = *rep->vv[i];
		e->origin = strdup(rep->vv[i]->origin);
		sn->vv[sn->nvv++] = e;
	}
}

static bool known_cb(const char *origin, void *payload)
{
	return origin_known(payload, origin);
}

/* How far a state transfer from p may raise our entry for (origin, epoch)
 * (e->seq claimed): p speaks for its own streams, and a finished epoch of
 * ours can never grow; another site's stream is raised no further than
 * that site's own last heartbeat shows it (a claim beyond it would make us
 * drop that site's later operations as duplicates). */
static uint64_t snap_vv_cap(struct repl *r, struct peer *p,
			    const Grantd__V1__VvEntry *e)
{
	const struct peer *q = peer_by_site(r, e->origin);
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

/* Every family merged: raise the vector to what the sender's vector says,
 * as far as snap_vv_cap allows; not at all when a record was refused (we
 * may then lack effects the vector would claim). */
static void snap_raise(struct repl *r, struct peer *p)
{
	struct snap *sn = &r->snap;
	struct ops *o = r->ops;
	uint64_t capped = 0;

	for (size_t i = 0; !sn->refused && i < sn->nvv; i++) {
		Grantd__V1__VvEntry *e = sn->vv[i];
		uint64_t cap = snap_vv_cap(r, p, e);
		if (cap < e->seq && cap < ops_vv_get(o, NULL, e->origin, e->epoch))
			cap = ops_vv_get(o, NULL, e->origin, e->epoch);
		if (cap < e->seq && !capped++)
			refuse(r, DROP_SNAP_VECTOR, 0, "state transfer vector "
			       "claim not proved peer=%s origin=%s epoch=%016llx "
			       "seq=%llu raised_to=%llu", p->cfg->site, e->origin,
			       (unsigned long long)e->epoch,
			       (unsigned long long)e->seq,
			       (unsigned long long)cap);
		if (e->epoch != OPS_VV_RETIRED) {
			ops_vv_raise(o, r->batch, e->origin, e->epoch, cap);
			continue;
		}
		/* the origin's own vector: the sender's when it is the
		 * origin, else the origin's last heartbeat */
		const struct peer *q = peer_by_site(r, e->origin);
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
	ops_note_dropped(o, capped);
	if (sn->refused)
		log_error("state transfer done peer=%s records=%llu refused=%llu:"
			  " vector not raised", p->cfg->site,
			  (unsigned long long)sn->records,
			  (unsigned long long)sn->refused);
	else
		log_info("state transfer done peer=%s records=%llu "
			 "claims_capped=%llu", p->cfg->site,
			 (unsigned long long)sn->records,
			 (unsigned long long)capped);
}

static void apply_snap(struct repl *r, struct peer *p,
		       Grantd__V1__SnapRep *rep, uint64_t now_ms)
{
	struct snap *sn = &r->snap;
	struct ops *o = r->ops;
	struct buf why = BUF_INIT;
	/* the checks a live operation gets (apply_op) */
	struct ops_trust t = { ((clock_wall_ms() + MAX_SKEW_MS) << 16) | 0xffff,
			       known_cb, r };

	if (sn->p != p || rep->cf != (uint32_t)snap_cfs[sn->cf] ||
	    rep->n_keys != rep->n_values) {
		ops_note_dropped(o, 1);
		return;
	}
	if (rep->n_vv && !sn->vv)
		snap_take_vv(sn, rep);
	if (r->cfg->role == CONFIG_ROLE_MIRROR && rep->n_values &&
	    !records_mirror_visible((enum store_cf)rep->cf))
		refuse(r, DROP_MIRROR_HIDDEN, rep->n_values, "hidden family "
		       "sent to a mirror peer=%s cf=%s records=%zu: dropped",
		       p->cfg->site, store_cf_name((enum store_cf)rep->cf),
		       rep->n_values);
	/* a mirror holds no secret family, whatever a peer sends */
	for (size_t i = 0; (r->cfg->role != CONFIG_ROLE_MIRROR ||
			    records_mirror_visible((enum store_cf)rep->cf)) &&
			   i < rep->n_values; i++) {
		buf_reset(&why);
		if (ops_merge_record(o, r->batch, (enum store_cf)rep->cf,
				     rep->values[i].data, rep->values[i].len,
				     &t, &why) < 0) {
			sn->refused++;
			refuse(r, DROP_SNAP_RECORD, 1, "state transfer record "
			       "dropped peer=%s cf=%u: %s", p->cfg->site,
			       (unsigned)rep->cf, why.len ? why.p : "?");
		} else {
			sn->records++;
		}
	}
	buf_free(&why);
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
	if (sn->cf < (int)GD_ARRAY_SIZE(snap_cfs)) {
		snap_request(r, now_ms);
		return;
	}
	snap_raise(r, p);
	if (sn->refused)
		back_off(p, now_ms); /* not a state transfer a second */
	snap_free(sn);
}

/* Does a range reply (origin, epoch, from) answer the last range asked of
 * p?  Then it is taken, once: the question is forgotten.  Otherwise it is
 * refused and counted (review N5: a reply nobody asked for would put its
 * operations under any origin's numbers). */
static bool range_answers(struct repl *r, struct peer *p, const char *origin,
			  uint64_t epoch, bool has_from, uint64_t from)
{
	if (p->range_origin[0] && origin && has_from &&
	    !strcmp(origin, p->range_origin) && epoch == p->range_epoch &&
	    from == p->range_from) {
		memcpy(p->done_origin, p->range_origin,
		       sizeof(p->done_origin));
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
	refuse(r, DROP_RANGE_UNASKED, 1, "range reply dropped peer=%s "
	       "origin=%s epoch=%016llx from=%llu: not the range asked "
	       "(origin=%s epoch=%016llx from=%llu)", p->cfg->site,
	       origin && name_site_ok(origin) ? origin : "?",
	       (unsigned long long)epoch, (unsigned long long)from,
	       p->range_origin[0] ? p->range_origin : "-",
	       (unsigned long long)p->range_epoch,
	       (unsigned long long)p->range_from);
	return false;
}

/* An operation of a range reply must be of the range's stream. */
static bool range_holds(struct repl *r, struct peer *p, const char *origin,
			uint64_t epoch, const char *op_origin,
			uint64_t op_epoch, uint64_t seq)
{
	if (op_origin && !strcmp(op_origin, origin) && op_epoch == epoch)
		return true;
	refuse(r, DROP_RANGE_UNASKED, 1, "range operation dropped peer=%s "
	       "origin=%s seq=%llu: not of the range's origin=%s",
	       p->cfg->site,
	       op_origin && name_site_ok(op_origin) ? op_origin : "?",
	       (unsigned long long)seq, origin);
	return false;
}

static void apply_range(struct repl *r, struct peer *p,
			const Grantd__V1__RangeRep *rr, uint64_t now_ms)
{
	char origin[NAME_SITE_MAX + 1];
	uint64_t epoch = rr->epoch;

	if (!range_answers(r, p, rr->origin, rr->epoch, rr->has_from,
			   rr->from))
		return;
	snprintf(origin, sizeof(origin), "%s", rr->origin);
	/* A full reply: there is more.  Ask for the next range before
	 * applying this one, so the peer serves it while we apply (catch-up
	 * waited a round trip and the peer's read per range).  Should this
	 * one not apply whole, the next reply shows a gap and the range is
	 * asked again from where we are. */
	if (rr->n_ops >= RANGE_MAX_OPS && !rr->truncated)
		request_range_from(r, p, origin, epoch, rr->from + rr->n_ops,
				   now_ms);
	for (size_t i = 0; i < rr->n_ops; i++) {
		Grantd__V1__Op *op = grantd__v1__op__unpack(
			NULL, rr->ops[i].len, rr->ops[i].data);
		if (!op) {
			ops_note_dropped(r->ops, 1);
			continue;
		}
		if (range_holds(r, p, origin, epoch, op->origin, op->epoch,
				op->seq))
			apply_op(r, p, op, 0, now_ms);
		ops_wipe(op);
		grantd__v1__op__free_unpacked(op, NULL);
	}
	if (rr->truncated)
		snap_start(r, p, now_ms);
}

static void serve_range(struct repl *r, const struct peer_req *req,
			const Grantd__V1__RangeReq *rq)
{
	const char *site = req->site;
	Grantd__V1__PeerMsg m;
	Grantd__V1__RangeRep rep = GRANTD__V1__RANGE_REP__INIT;
	struct store_iter *it;
	struct buf prefix = BUF_INIT, v = BUF_INIT;
	ProtobufCBinaryData *ops = NULL;
	const char *key;
	size_t klen, bytes = 0, cap = 0;
	uint8_t be[16];
	uint64_t want;
	uint32_t max = rq->max && rq->max < RANGE_MAX_OPS ? rq->max :
							     RANGE_MAX_OPS;

	if (!rq->origin || !name_site_ok(rq->origin) || !rq->from) {
		ops_note_dropped(r->ops, 1);
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
	if (!strcmp(rq->origin, ops_site(r->ops)) &&
	    rq->epoch == ops_epoch(r->ops)) {
		uint64_t pub = ops_published(r->ops);
		if (pub < rq->from)
			max = 0;
		else if (pub - rq->from + 1 < max)
			max = (uint32_t)(pub - rq->from + 1);
	}
	while (store_iter_next(it, &key, &klen, &v) > 0 && rep.n_ops < max &&
	       bytes < RANGE_MAX_BYTES) {
		if (klen != prefix.len)
			continue;
		uint64_t seq = store_get_be64(key + klen - 8);
		if (seq < want)
			continue;
		if (seq != want) {
			/* the start was cut off by the log's retention */
			if (rep.n_ops == 0)
				rep.truncated = rep.has_truncated = 1;
			break;
		}
		if (rep.n_ops == cap) {
			cap = cap ? 2 * cap : 64;
			ops = realloc(ops, cap * sizeof(*ops));
			if (!ops)
				abort();
		}
		uint8_t *copy = malloc(v.len ? v.len : 1);
		if (!copy)
			abort();
		memcpy(copy, v.p, v.len);
		ops[rep.n_ops++] = (ProtobufCBinaryData){ v.len, copy };
		bytes += v.len;
		want++;
	}
	store_iter_free(&it);
	if (rep.n_ops == 0 && max > 0 &&
	    ops_vv_get(r->ops, NULL, rq->origin, rq->epoch) >= rq->from)
		rep.truncated = rep.has_truncated = 1;
	peer_msg_init(r->self, &m);
	rep.origin = rq->origin;
	rep.epoch = rq->epoch, rep.has_epoch = 1;
	rep.from = rq->from, rep.has_from = 1;
	rep.ops = ops;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_RANGE_REP;
	m.range_rep = &rep;
	struct mops mb;
	memset(&mb, 0, sizeof(mb));
	if (to_mirror(r, site)) {
		/* the same range, each hidden operation as its stamp */
		mops_build(&mb, ops, rep.n_ops);
		mb.mo.range = mb.mo.has_range = 1;
		mb.mo.origin = rq->origin;
		mb.mo.epoch = rq->epoch, mb.mo.has_epoch = 1;
		mb.mo.from = rq->from, mb.mo.has_from = 1;
		mb.mo.truncated = rep.truncated;
		mb.mo.has_truncated = rep.has_truncated;
		m.body_case = GRANTD__V1__PEER_MSG__BODY_MIRROR_OPS;
		m.mirror_ops = &mb.mo;
	}
	int sent = peer_reply(req, &m);
	if (m.body_case == GRANTD__V1__PEER_MSG__BODY_MIRROR_OPS)
		mops_free(&mb);
	if (sent < 0)
		log_warn("range reply not sent peer=%s: %s", site,
			 zmq_strerror(errno));
	else
		log_debug("range served peer=%s origin=%s from=%llu n=%zu",
			  site, rq->origin, (unsigned long long)rq->from,
			  rep.n_ops);
	for (size_t i = 0; i < rep.n_ops; i++) {
		sodium_memzero(ops[i].data, ops[i].len);
		free(ops[i].data);
	}
	free(ops);
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	buf_free(&prefix);
}

/* Our vector as a heartbeat in m (hb filled: hb_free_entries after the
 * send): on PUB every 250 ms, or to the peer that asked (vv_req). */
static void vector_msg(struct repl *r, Grantd__V1__PeerMsg *m,
		       Grantd__V1__Heartbeat *hb)
{
	peer_msg_init(r->self, m);
	hb_fill(r, hb);
	m->body_case = GRANTD__V1__PEER_MSG__BODY_HEARTBEAT;
	m->heartbeat = hb;
}

static void send_vector(struct repl *r)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;

	vector_msg(r, &m, &hb);
	peer_send(r->pub, &m, NULL, 0);
	hb_free_entries(&hb);
}

static struct peer *peer_by_site(struct repl *r, const char *site)
{
	for (int i = 0; i < r->npeers; i++)
		if (!strcmp(r->peers[i].cfg->site, site))
			return &r->peers[i];
	return NULL;
}

/* Decode one frame from peer p's link; NULL when it is bad (counted). */
static Grantd__V1__PeerMsg *decode(struct repl *r, const char *site,
				   zmq_msg_t *msg)
{
	const char *why;
	Grantd__V1__PeerMsg *m = peer_msg_decode(
		zmq_msg_data(msg), zmq_msg_size(msg), site, &why);

	if (m)
		return m;
	ops_note_dropped(r->ops, 1);
	log_warn("peer message dropped peer=%s: %s dropped=%llu", site, why,
		 (unsigned long long)ops_dropped(r->ops));
	return NULL;
}

/* Keep p's heartbeat, with what fits of its vector: entries past MAX_VV
 * and entries with a bad origin are cut (logged and counted), never the
 * whole heartbeat. */
static void take_heartbeat(struct repl *r, struct peer *p,
			   Grantd__V1__PeerMsg *m)
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
		refuse(r, DROP_HB_VECTOR, 1, "heartbeat vector cut peer=%s "
		       "entries=%zu kept=%zu bad=%zu over_limit=%zu (at most %d)",
		       p->cfg->site, hb->n_vv, kept, bad, over, MAX_VV);
	hb->n_vv = kept;
}

/* The requests peers make on the sync ROUTER (peer.c reads it). */
static void on_range_req(const struct peer_req *rq, void *payload)
{
	serve_range(payload, rq, rq->m->range_req);
}

static void on_snap_req(const struct peer_req *rq, void *payload)
{
	serve_snap(payload, rq, rq->m->snap_req);
}

static void on_vv_req(const struct peer_req *rq, void *payload)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;

	vector_msg(payload, &m, &hb);
	if (to_mirror(payload, rq->site)) /* as on_mirror_sub */
		hb.has_digest = 0, hb.digest.len = 0;
	peer_reply(rq, &m);
	hb_free_entries(&hb);
}

/* How many operations mirror p (LINK_FEED_OUT) lacks of those we hold,
 * by its last mirror_sub; 0 when it never subscribed. */
static uint64_t mirror_lag_ops(struct repl *r, const struct peer *p)
{
	const struct ops *o = r->ops;
	uint64_t lag = 0;

	if (!p->msub)
		return 0;
	const Grantd__V1__MirrorSub *ms = p->msub->mirror_sub;
	for (size_t i = 0; i < ops_vv_count(o); i++) {
		uint64_t ours = ops_vv_at(o, i)->seq, theirs = 0;
		if (ops_vv_at(o, i)->epoch == OPS_VV_RETIRED ||
		    ops_vv_at(o, i)->retired)
			continue;
		if (!strcmp(ops_vv_at(o, i)->origin, ops_site(o)) &&
		    ops_vv_at(o, i)->epoch == ops_epoch(o) &&
		    ours > ops_published(o))
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
static void on_mirror_sub(const struct peer_req *rq, void *payload)
{
	struct repl *r = payload;
	struct peer *p = peer_by_site(r, rq->site);
	uint64_t now_ms = clock_mono_ms();
	Grantd__V1__PeerMsg *m, hbm;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	size_t bad = 0;

	if (!p || p->link != LINK_FEED_OUT || rq->ridlen > RID_MAX) {
		/* a frontend (or we are a mirror): no feed here */
		ops_note_dropped(r->ops, 1);
		return;
	}
	m = grantd__v1__peer_msg__unpack(NULL, rq->len, rq->frame);
	if (!m || m->body_case != GRANTD__V1__PEER_MSG__BODY_MIRROR_SUB) {
		if (m)
			grantd__v1__peer_msg__free_unpacked(m, NULL);
		ops_note_dropped(r->ops, 1);
		return;
	}
	for (size_t i = 0; i < m->mirror_sub->n_vv; i++)
		bad += !m->mirror_sub->vv[i]->origin ||
		       !name_site_ok(m->mirror_sub->vv[i]->origin);
	if (bad || m->mirror_sub->n_vv > MAX_VV) {
		refuse(r, DROP_HB_VECTOR, 1, "mirror subscription dropped "
		       "peer=%s entries=%zu bad=%zu (at most %d)", rq->site,
		       m->mirror_sub->n_vv, bad, MAX_VV);
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
	if (!mirror_lag_ops(r, p))
		p->behind_since_ms = 0;
	else if (!p->behind_since_ms)
		p->behind_since_ms = now_ms;
	vector_msg(r, &hbm, &hb);
	/* the full digest covers families a mirror must not hold: it gets
	 * none (it compares digest_public instead) */
	hb.has_digest = 0;
	hb.digest.len = 0;
	peer_reply(rq, &hbm);
	hb_free_entries(&hb);
}

/* One operation a mirror gets as its stamp alone (MirrorOp without op):
 * the checks a live operation gets, then only the vector moves. */
static void mirror_skip(struct repl *r, struct peer *p,
			const Grantd__V1__MirrorOp *e, uint64_t now_ms)
{
	bool applied;
	int rc;

	if (!origin_known(r, e->origin) ||
	    hlc_ms(e->hlc) > clock_wall_ms() + MAX_SKEW_MS) {
		ops_note_dropped(r->ops, 1);
		if (now_ms - r->last_skew_log_ms > 1000) {
			r->last_skew_log_ms = now_ms;
			log_error("peer operation stamp dropped peer=%s "
				  "origin=%s seq=%llu: unknown origin or "
				  "stamped in the future dropped=%llu",
				  p->cfg->site, e->origin,
				  (unsigned long long)e->seq,
				  (unsigned long long)ops_dropped(r->ops));
		}
		back_off(p, now_ms);
		return;
	}
	rc = ops_skip(r->ops, r->batch, e->origin, e->epoch, e->seq, e->hlc,
		      &applied);
	if (rc == GD_EINVAL)
		request_range(r, p, e->origin, e->epoch, now_ms);
	else if (applied) {
		r->dirty = true;
		r->batch_ops++;
		r->met.episode_ops++;
	}
}

/* mirror_ops from frontend p (we are a mirror): live, p's own operations
 * as it makes them; or a range we asked for, relays included. */
static void apply_mirror_ops(struct repl *r, struct peer *p,
			     const Grantd__V1__MirrorOps *mo, uint64_t sent_us,
			     uint64_t now_ms)
{
	if (mo->range) {
		if (!range_answers(r, p, mo->origin, mo->epoch, mo->has_from,
				   mo->from))
			return;
		if (mo->n_ops >= RANGE_MAX_OPS && !mo->truncated)
			request_range_from(r, p, mo->origin, mo->epoch,
					   mo->from + mo->n_ops, now_ms);
	}
	for (size_t i = 0; i < mo->n_ops; i++) {
		const Grantd__V1__MirrorOp *e = mo->ops[i];
		if (!e->origin || !name_site_ok(e->origin) || !e->has_epoch ||
		    !e->has_seq || !e->seq) {
			ops_note_dropped(r->ops, 1);
			continue;
		}
		if (mo->range && !range_holds(r, p, mo->origin, mo->epoch,
					      e->origin, e->epoch, e->seq))
			continue;
		if (!mo->range && strcmp(e->origin, p->cfg->site)) {
			refuse(r, DROP_FORGED_ORIGIN, 1, "mirror operation "
			       "dropped peer=%s origin=%s seq=%llu: origin is "
			       "not the link's site", p->cfg->site, e->origin,
			       (unsigned long long)e->seq);
			continue;
		}
		if (!e->has_op) {
			mirror_skip(r, p, e, now_ms);
			continue;
		}
		Grantd__V1__Op *op = grantd__v1__op__unpack(NULL, e->op.len,
							   e->op.data);
		if (!op || !op->origin || strcmp(op->origin, e->origin) ||
		    op->epoch != e->epoch || op->seq != e->seq)
			/* its stamp is not its own */
			ops_note_dropped(r->ops, 1);
		else
			apply_op(r, p, op, mo->range ? 0 : sent_us, now_ms);
		if (op) {
			ops_wipe(op);
			grantd__v1__op__free_unpacked(op, NULL);
		}
	}
	if (mo->range && mo->truncated)
		snap_start(r, p, now_ms);
}

/* Subscribe to frontend p (we are a mirror): our vector and public
 * digest; it answers with its vector and feeds us for MIRROR_LEASE_MS. */
static void mirror_subscribe(struct repl *r, struct peer *p)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__Heartbeat hb = GRANTD__V1__HEARTBEAT__INIT;
	Grantd__V1__MirrorSub ms = GRANTD__V1__MIRROR_SUB__INIT;
	uint8_t d[DIGEST_LEN];

	hb_fill(r, &hb);
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
	hb_free_entries(&hb);
}

/* A peer publishes only its own operations: on its live channel an
 * operation of another origin is a forgery (taking that origin's sequence
 * numbers).  Relays of other origins come only in range answers. */
static bool op_from_link(struct repl *r, struct peer *p,
			 const Grantd__V1__Op *op)
{
	if (!op->origin || !strcmp(op->origin, p->cfg->site))
		return true; /* (no origin: apply_op refuses it) */
	refuse(r, DROP_FORGED_ORIGIN, 1, "peer operation dropped peer=%s "
	       "origin=%s seq=%llu: origin is not the link's site",
	       p->cfg->site, name_site_ok(op->origin) ? op->origin : "?",
	       (unsigned long long)op->seq);
	return false;
}

/* A peer's push log heads (its PUB): kept for log verify. */
static void take_plheads(struct repl *r, struct peer *p,
			 const Grantd__V1__PushLogHeads *h)
{
	struct buf why = BUF_INIT;
	int rc = plheads_take(r->store, r->batch, p->cfg->site, h, &why);

	if (rc < 0)
		log_error("push log heads of peer=%s not kept: %s",
			  p->cfg->site, gd_strerror(rc));
	else if (rc > 0)
		refuse(r, DROP_HB_VECTOR, (uint64_t)rc, "push log heads "
		       "dropped peer=%s: %s", p->cfg->site, why.p);
	buf_free(&why);
}

/* One frame from a peer's SUB or DEALER. */
static int handle_peer(struct repl *r, struct peer *p, void *sock,
		       uint64_t now_ms)
{
	zmq_msg_t body;

	if (!peer_recv_frame(sock, &body))
		return 0;
	if (zmq_msg_more(&body)) {
		peer_drain(sock, &body);
		zmq_msg_close(&body);
		ops_note_dropped(r->ops, 1);
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
		refuse(r, DROP_PLANE, 1,
		       "peer message dropped peer=%s "
		       "socket=%s kind=%s: not taken from a %s",
		       p->cfg->site, planes_sock_name(ps),
		       row ? row->name : "unknown",
		       planes_role_name(planes_role(p->cfg->role)));
		if (m->body_case == GRANTD__V1__PEER_MSG__BODY_OP)
			ops_wipe(m->op);
		grantd__v1__peer_msg__free_unpacked(m, NULL);
		return 1;
	}
	switch (m->body_case) {
	case GRANTD__V1__PEER_MSG__BODY_OP:
		if (sock != p->sub)
			ops_note_dropped(r->ops, 1);
		else if (op_from_link(r, p, m->op))
			apply_op(r, p, m->op, m->sent_us, now_ms);
		ops_wipe(m->op);
		break;
	case GRANTD__V1__PEER_MSG__BODY_HEARTBEAT:
		take_heartbeat(r, p, m);
		break;
	case GRANTD__V1__PEER_MSG__BODY_PUSHLOG_HEADS:
		if (sock == p->sub)
			take_plheads(r, p, m->pushlog_heads);
		else
			ops_note_dropped(r->ops, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_SNAP_REP:
		if (sock == p->dealer)
			apply_snap(r, p, m->snap_rep, now_ms);
		else
			ops_note_dropped(r->ops, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_RANGE_REP:
		/* a mirror asks for ranges as mirror_ops only */
		if (sock == p->dealer && p->link == LINK_FULL)
			apply_range(r, p, m->range_rep, now_ms);
		else
			ops_note_dropped(r->ops, 1);
		break;
	case GRANTD__V1__PEER_MSG__BODY_MIRROR_OPS:
		if (sock == p->dealer && p->link == LINK_FEED_IN)
			apply_mirror_ops(r, p, m->mirror_ops, m->sent_us,
					 now_ms);
		else
			ops_note_dropped(r->ops, 1);
		break;
	default:
		ops_note_dropped(r->ops, 1);
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
	while (peer_zap_handle(r->link), handled < HANDLE_MAX &&
	       r->batch_ops < RANGE_MAX_OPS) {
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
	uint64_t t;
	int rc = writer_commit(r->writer, &t);
	if (rc == 0) {
		for (int i = 0; i < r->met.npending; i++) {
			if (r->met.wait_tail - r->met.wait_head == WAIT_SAMPLES)
				break; /* samples, not data: drop */
			uint64_t w = r->met.wait_tail++ % WAIT_SAMPLES;
			r->met.waiting[w].ticket = t;
			r->met.waiting[w].sent = r->met.pending[i];
		}
	}
	r->met.npending = 0;
	if (rc < 0) /* the writer dropped it, and what it moved in memory */
		log_error("peer batch not committed; it will be fetched again");
}

/* ---- publishing, heartbeats, catch-up ---------------------------------- */

/* Our operations just published, to every mirror with a live lease, as
 * one mirror_ops over the sync ROUTER (raw: n packed Ops). */
static void feed_mirrors(struct repl *r, const ProtobufCBinaryData *raw,
			 size_t n)
{
	uint64_t now_ms = clock_mono_ms();
	void *router = peer_router(r->link);
	struct mops mb;
	bool built = false;

	for (int i = 0; n && router && i < r->npeers; i++) {
		struct peer *p = &r->peers[i];
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
			ops_wipe(op);
			grantd__v1__op__free_unpacked(op, NULL);
			if (nraw == capraw) {
				capraw = capraw ? 2 * capraw : 16;
				raw = realloc(raw, capraw * sizeof(*raw));
				if (!raw)
					abort();
			}
			raw[nraw++] = (ProtobufCBinaryData){ len,
							     (uint8_t *)p + 4 };
		}
		off += 4 + len;
	}
	feed_mirrors(r, raw, nraw);
	free(raw);
	sodium_memzero(ob->p, ob->len);
	buf_reset(ob);
}

/* The vector peer p last showed us (*vv NULL: none yet), or false when
 * p does not count for retiring epochs: two mirrors, or a mirror that
 * never subscribed (it catches up by state transfer if it comes). */
static bool peer_vv(const struct peer *p, Grantd__V1__VvEntry *const **vv,
		    size_t *n)
{
	*vv = NULL;
	*n = 0;
	if (p->link == LINK_NONE ||
	    (p->link == LINK_FEED_OUT && !p->msub))
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
static bool peers_hold(const char *origin, uint64_t epoch, uint64_t seq,
		       void *payload)
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
static bool peers_retired(const char *origin, uint64_t epoch, uint64_t total,
			  void *payload)
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

void repl_tick(struct repl *r, uint64_t now_ms)
{
	bool all_level = true, any_heard = false, all_heard = true;

	if (r->pub && now_ms - r->last_hb_ms >= REPL_HEARTBEAT_MS) {
		r->last_hb_ms = now_ms;
		send_vector(r);
	}
	if (r->pub && now_ms - r->last_plheads_ms >= PLHEADS_MS) {
		r->last_plheads_ms = now_ms;
		send_plheads(r);
	}
	if (r->snap.p && now_ms - r->snap.sent_ms > RANGE_TIMEOUT_MS) {
		log_warn("state transfer timed out peer=%s; starting over",
			 r->snap.p->cfg->site);
		snap_free(&r->snap);
	}
	if (now_ms - r->last_retire_ms >= RETIRE_MS && !r->snap.p) {
		r->last_retire_ms = now_ms;
		retire_epochs(r);
	}
	int64_t keep = r->cfg->oplog_retention * 1000;
	if (now_ms - r->last_truncate_ms >
	    (uint64_t)(keep / 2 < 60000 ? keep / 2 : 60000)) {
		r->last_truncate_ms = now_ms;
		int k = ops_truncate_log(r->ops,
					 clock_wall_ms() - (uint64_t)keep,
					 TRUNCATE_MAX);
		if (k > 0)
			log_info("operation log truncated entries=%d", k);
	}
	for (int i = 0; i < r->npeers; i++) {
		struct peer *p = &r->peers[i];
		/* a mirror we feed asks us; two mirrors say nothing */
		if (p->link == LINK_FEED_OUT || p->link == LINK_NONE)
			continue;
		relink(r, p, now_ms);
		if (p->link == LINK_FEED_IN &&
		    now_ms - p->last_sub_ms >= REPL_HEARTBEAT_MS) {
			p->last_sub_ms = now_ms;
			mirror_subscribe(r, p);
		}
		if (p->range_inflight &&
		    now_ms - p->range_sent_ms > RANGE_TIMEOUT_MS)
			p->range_inflight = false;
		const Grantd__V1__VvEntry *e = peer_ahead(r, p, &p->lag_ops);
		if (e) {
			if (!p->behind_since_ms)
				p->behind_since_ms = now_ms;
			/* during a state transfer, ranges wait for it; and
			 * what a third site already has of an origin we hear
			 * directly is usually on its way to us live: give it
			 * a moment before fetching it twice */
			struct peer *o = peer_by_site(r, e->origin);
			bool live = o && o != p && o->last_heard_ms &&
				    now_ms - o->last_heard_ms < CONNECTED_MS &&
				    now_ms - p->behind_since_ms < LIVE_GRACE_MS;
			if (!r->snap.p && !live)
				request_range(r, p, e->origin, e->epoch,
					      now_ms);
			all_level = false;
		} else {
			p->behind_since_ms = 0;
		}
		if (p->hb && now_ms - p->last_heard_ms < CONNECTED_MS)
			any_heard = true;
		else
			all_heard = false;
	}
	if (!all_level && !r->met.behind_since_ms) {
		r->met.behind_since_ms = now_ms;
		r->met.episode_ops = 0;
	} else if (all_level && r->met.behind_since_ms) {
		r->met.last_ops = r->met.episode_ops;
		r->met.last_ms = now_ms - r->met.behind_since_ms;
		r->met.behind_since_ms = 0;
		if (r->met.last_ops > 1000)
			log_info("caught up ops=%llu ms=%llu rate=%.0f/s",
				 (unsigned long long)r->met.last_ops,
				 (unsigned long long)r->met.last_ms,
				 r->met.last_ms ? 1000.0 * (double)r->met.last_ops /
							  (double)r->met.last_ms :
						  0.0);
	}
	if (r->syncing) {
		uint64_t up = now_ms - r->started_ms;
		if ((all_level && all_heard) ||
		    (all_level && any_heard && up > SYNC_GRACE_MS) ||
		    (!any_heard && up > SYNC_GRACE_MS) || up > SYNC_MAX_MS) {
			r->syncing = false;
			log_info("sync done: validating tokens peers_heard=%s "
				 "after_ms=%llu", any_heard ? "yes" : "none",
				 (unsigned long long)up);
		}
	}
}

void repl_status(struct repl *r, cJSON *arr, uint64_t now_ms)
{
	for (int i = 0; i < r->npeers; i++) {
		struct peer *p = &r->peers[i];
		cJSON *o = cJSON_CreateObject();
		uint64_t lag = 0;
		bool feed = p->link == LINK_FEED_OUT;
		if (feed)
			lag = mirror_lag_ops(r, p);
		else
			peer_ahead(r, p, &lag);
		cJSON_AddStringToObject(o, "site", p->cfg->site);
		cJSON_AddStringToObject(o, "role",
					config_role_name(p->cfg->role));
		/* a mirror we feed: connected while its lease lives, and its
		 * lag is what it lacks of ours (its last mirror_sub) */
		cJSON_AddBoolToObject(o, "connected",
				      feed ? now_ms < p->lease_until_ms :
				      p->last_heard_ms &&
					      now_ms - p->last_heard_ms <
						      CONNECTED_MS);
		cJSON_AddNumberToObject(o, "last_heard_ms",
					p->last_heard_ms ?
						(double)(now_ms -
							 p->last_heard_ms) :
						-1);
		cJSON_AddNumberToObject(o, "lag_ops", (double)lag);
		if (p->sub || p->dealer) {
			const struct linkmon *lm = link_state(p);
			cJSON_AddStringToObject(o, "link",
						linkmon_state_name(lm->state));
			cJSON_AddBoolToObject(o, "key_refused",
					      lm->state == LINKMON_KEY_REFUSED);
			cJSON_AddBoolToObject(o, "handshake_failed",
					      lm->state ==
						      LINKMON_HANDSHAKE_FAILED);
			cJSON_AddNumberToObject(o, "handshake_failures",
						(double)(p->sub_mon.failures +
							 p->dealer_mon.failures));
		}
		cJSON_AddNumberToObject(o, "lag_ms",
					lag && p->behind_since_ms ?
						(double)(now_ms -
							 p->behind_since_ms) :
						0);
		if (p->hb && p->hb->digest.len == DIGEST_LEN) {
			char hex[2 * DIGEST_LEN + 1];
			digest_hex(hex, p->hb->digest.data);
			cJSON_AddStringToObject(o, "digest", hex);
		}
		const Grantd__V1__MirrorSub *ms =
			feed && p->msub ? p->msub->mirror_sub : NULL;
		if (ms && ms->digest_public.len == DIGEST_LEN) {
			char hex[2 * DIGEST_LEN + 1];
			uint8_t ours[DIGEST_LEN];
			digest_hex(hex, ms->digest_public.data);
			cJSON_AddStringToObject(o, "digest_public", hex);
			ops_digest_public(r->ops, ours);
			cJSON_AddBoolToObject(o, "digest_public_equal",
					      !memcmp(ours,
						      ms->digest_public.data,
						      DIGEST_LEN));
		}
		peerpolicy_json(&r->policy, p->cfg->site, o);
		cJSON_AddItemToArray(arr, o);
	}
}

const struct peerpolicy *repl_peerpolicy(const struct repl *r)
{
	return &r->policy;
}

void repl_mirror_lag(struct repl *r, cJSON *obj, uint64_t now_ms)
{
	if (r->cfg->role != CONFIG_ROLE_MIRROR)
		return;
	cJSON *arr = cJSON_AddArrayToObject(obj, "mirror_lag");
	for (int i = 0; i < r->npeers; i++) {
		struct peer *p = &r->peers[i];
		uint64_t lag = 0;
		if (p->link != LINK_FEED_IN)
			continue;
		peer_ahead(r, p, &lag);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "site", p->cfg->site);
		cJSON_AddBoolToObject(o, "fed",
				      p->hb && p->last_heard_ms &&
					      now_ms - p->last_heard_ms <
						      CONNECTED_MS);
		cJSON_AddNumberToObject(o, "ops", (double)lag);
		cJSON_AddNumberToObject(o, "ms",
					lag && p->behind_since_ms ?
						(double)(now_ms -
							 p->behind_since_ms) :
						0);
		cJSON_AddItemToArray(arr, o);
	}
}

int repl_rebuild(struct repl *r, const char *site)
{
	struct peer *p = peer_by_site(r, site);
	Grantd__V1__PeerMsg m;

	if (!p)
		return GD_ENOTFOUND;
	peer_msg_init(r->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VV_REQ;
	m.vv_req = 1;
	if (peer_send(p->dealer, &m, NULL, 0) < 0)
		return GD_EUNREACH;
	log_info("rebuild requested from peer=%s", site);
	return 0;
}

void repl_synced(struct repl *r, uint64_t ticket)
{
	uint32_t now = (uint32_t)(clock_wall_us() & 0xffffffff);

	while (r->met.wait_head < r->met.wait_tail) {
		uint64_t w = r->met.wait_head % WAIT_SAMPLES;
		if (r->met.waiting[w].ticket > ticket)
			break;
		if (r->met.lat_us)
			r->met.lat_us[r->met.lat_n++ % LAT_SAMPLES] =
				now - r->met.waiting[w].sent;
		/* a clock behind the origin's by more than the delay: 0 */
		uint32_t d = now - r->met.waiting[w].sent;
		metrics_observe(r->latency_hist, d > INT32_MAX ? 0 : d);
		r->met.wait_head++;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Sort the samples again for their percentiles when new ones came (see
 * LAT_SORT_CHEAP). */
static void lat_sort(struct metrics *m)
{
	uint64_t n = m->lat_n < LAT_SAMPLES ? m->lat_n : LAT_SAMPLES;
	uint64_t now = clock_mono_ms();

	if (!n || !m->lat_us || m->sorted_n == m->lat_n ||
	    (n > LAT_SORT_CHEAP && m->sorted_n &&
	     now - m->sorted_at_ms < LAT_SORT_MS))
		return;
	uint32_t *v = malloc(n * sizeof(*v));
	if (!v)
		abort();
	memcpy(v, m->lat_us, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_u32);
	m->p50 = v[n / 2];
	m->p99 = v[n * 99 / 100];
	m->max = v[n - 1];
	free(v);
	m->sorted_n = m->lat_n;
	m->sorted_at_ms = now;
}

void repl_metrics(struct repl *r, cJSON *obj)
{
	cJSON *lat = cJSON_AddObjectToObject(obj, "latency_us");
	lat_sort(&r->met);
	cJSON_AddNumberToObject(lat, "count", (double)r->met.lat_n);
	if (r->met.sorted_n) {
		cJSON_AddNumberToObject(lat, "p50", r->met.p50);
		cJSON_AddNumberToObject(lat, "p99", r->met.p99);
		cJSON_AddNumberToObject(lat, "max", r->met.max);
	}
	cJSON *dr = cJSON_AddObjectToObject(obj, "dropped");
	for (int i = 0; i < DROP__COUNT; i++)
		cJSON_AddNumberToObject(
		        dr, drop_names[i],
		        (double)(r->drops[i] +
		                 (i == DROP_PLANE ? peer_planes_refused(r->link)
		                                  : 0)));
	const char *addr, *key = peer_last_refused(r->link, &addr);
	if (key) { /* whose key to set where: the log says it too */
		cJSON *lr = cJSON_AddObjectToObject(obj, "last_refused");
		cJSON_AddStringToObject(lr, "key", key);
		cJSON_AddStringToObject(lr, "addr", addr);
	}
	cJSON *cu = cJSON_AddObjectToObject(obj, "last_catchup");
	cJSON_AddNumberToObject(cu, "ops", (double)r->met.last_ops);
	cJSON_AddNumberToObject(cu, "ms", (double)r->met.last_ms);
}

uint64_t repl_refused(struct repl *r)
{
	return peer_refused(r->link);
}

bool repl_syncing(const struct repl *r)
{
	return r->syncing;
}
