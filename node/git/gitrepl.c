/*
 * gitrepl.c: the actor of repository replication (gitrepl.h): its thread,
 * its DEALERs to the peers, its pair with the writer, and the loop that
 * hands each stage its input and the reconciler the stages' verdicts:
 *
 *   reconcile.c  the items, each ref brought in line with its record
 *   packfetch.c  the one fetch in flight
 *   packsrv.c    packs served to peers
 *   glsync.c     gitolite mode's admin sync
 *   gitio.c      what each stage is handed at open (frames out, marks,
 *                the repositories, the counters)
 *   gitproc.c    child processes
 *
 * Calls go one way, from here down; no stage calls the actor back.
 * Everything below "actor" runs on the actor thread only; the functions
 * of "the writer's side" run on the writer thread and only touch the
 * writer's end of the pair and the counters the actor copied there.  The
 * messages on the pair are enum gitrepl_msg (gitrepl.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "gitio.h"
#include "gitrepl.h"
#include "glsync.h"
#include "linkmon.h"
#include "log.h"
#include "packfetch.h"
#include "packsrv.h"
#include "reconcile.h"
#include "records.h"
#include "thread.h"
#include "xalloc.h"
#include "banned.h"

#define DEALER_MSG_MAX (GITIO_CHUNK_MAX + 4096)

struct gitrepl {
	/* what it was opened with (copied, or borrowed for its life) */
	const struct peer_self *self;
	const struct config_peer *peers; /* their sites and endpoints */
	int npeers;
	char *repo_dir;
	bool gitolite; /* gitolite mode: status says more */
	pthread_t thread;
	bool started;
	char endpoint[64];
	/* writer */
	void *main_pair; /* the writer's end */
	struct gitio_stats seen; /* the last copy the actor sent */
	/* actor */
	void *pair;
	void *dealer[CONFIG_MAX_PEERS];
	/* their handshakes: made again after one failed, or for a new key
	 * (linkmon.h) */
	struct linkmon mon[CONFIG_MAX_PEERS];
	/* the peers' public keys: the actor's own copy, changed only by
	 * GITREPL_MSG_KEY (the writer's config is not shared) */
	char keys[CONFIG_MAX_PEERS][Z85_KEY_LEN + 1];
	struct gitio io; /* handed to each stage */
	struct reconcile *rc;
	struct packfetch *pf;
	struct packsrv *ps;
	struct glsync *gs;
	bool quit;
	struct gitio_stats st;
	struct gitio_stats st_sent; /* what the writer was last sent */
};

/* ---- the actor: what the stages send ------------------------------------ */

/* gitio's to_router: through the writer, whose ROUTER it is. */
static int
to_router(void *arg, const struct buf *rid, const Grantd__V1__PeerMsg *m)
{
	struct gitrepl *g = arg;
	uint8_t tag = GITREPL_MSG_PEER;

	if (zmq_send(g->pair, &tag, 1, ZMQ_SNDMORE) < 0)
		return GD_EIO;
	return peer_send(g->pair, m, rid->p, rid->len);
}

/* gitio's mark: the writer stores val (NULL: deletes) under CF_LOSERS
 * key; the actor never writes the store. */
static void
to_marks(void *arg, const char *key, size_t klen, const char *val, size_t vlen)
{
	struct gitrepl *g = arg;
	uint8_t tag = val ? GITREPL_MSG_MARK : GITREPL_MSG_UNMARK;

	zmq_send(g->pair, &tag, 1, ZMQ_SNDMORE);
	zmq_send(g->pair, key, klen, val ? ZMQ_SNDMORE : 0);
	if (val)
		zmq_send(g->pair, val, vlen, 0);
}

/* The counters to the writer, when they changed. */
static void send_stats(struct gitrepl *g)
{
	uint8_t m[1 + sizeof(struct gitio_stats)];

	if (!memcmp(&g->st, &g->st_sent, sizeof(g->st)))
		return;
	g->st_sent = g->st;
	m[0] = GITREPL_MSG_STATS;
	memcpy(m + 1, &g->st, sizeof(g->st));
	zmq_send(g->pair, m, sizeof(m), 0);
}

/* ---- the actor's loop --------------------------------------------------- */

/* A peer's pack request, credit or error (S rid site body), which
 * peer.c checked already: decoded again here, where the actor owns what
 * it points into, and handed to the pack server. */
static void pair_serve(struct gitrepl *g, zmq_msg_t *parts)
{
	struct buf rid = BUF_INIT;
	char site[NAME_SITE_MAX + 1];
	size_t sl = zmq_msg_size(&parts[2]);
	static struct log_limit lim; /* dropped lines, at most one per 10 s */
	uint64_t held;
	const char *why;

	if (sl > NAME_SITE_MAX)
		return;
	memcpy(site, zmq_msg_data(&parts[2]), sl);
	site[sl] = '\0';
	buf_add(&rid, zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]));
	Grantd__V1__PeerMsg *m = peer_msg_decode(
		zmq_msg_data(&parts[3]), zmq_msg_size(&parts[3]), site, &why);
	if (!m) {
		if (log_limit_pass(&lim, clock_mono_ms(), LOG_LIMIT_MS, &held))
			log_warn("git peer message dropped peer=%s: %s (%llu "
				 "more such lines held back)",
				 site, why, (unsigned long long)held);
	} else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_REQ)
		packsrv_request(g->ps, &rid, site, m->pack_req);
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT)
		packsrv_credit(g->ps, site, m->pack_credit);
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_ERR)
		packsrv_cancel(g->ps, site, m->pack_err->id);
	if (m)
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	buf_free(&rid);
}

/* A peer's new public key (K site \0 key): its DEALER is made again with
 * it at the next relink. */
static void pair_key(struct gitrepl *g, const char *p, size_t len)
{
	const char *nul = memchr(p, '\0', len);
	int i;

	if (!nul || len - (size_t)(nul + 1 - p) != Z85_KEY_LEN ||
	    (i = gitio_peer_index(&g->io, p)) < 0)
		return;
	memcpy(g->keys[i], nul + 1, Z85_KEY_LEN);
	g->keys[i][Z85_KEY_LEN] = '\0';
}

/* One message from the writer. */
static void pair_msg(struct gitrepl *g)
{
	zmq_msg_t parts[4];
	int n = 0;

	do {
		zmq_msg_init(&parts[n]);
		if (zmq_msg_recv(&parts[n], g->pair, 0) < 0) {
			zmq_msg_close(&parts[n]);
			goto out;
		}
		n++;
	} while (n < 4 && zmq_msg_more(&parts[n - 1]));
	const char *tag = zmq_msg_data(&parts[0]);
	size_t tlen = zmq_msg_size(&parts[0]);
	if (!tlen)
		goto out;
	switch ((uint8_t)tag[0]) {
	case GITREPL_MSG_CHANGED:
		reconcile_changed(g->rc, tag + 1, tlen - 1);
		break;
	case GITREPL_MSG_ALL: {
		char site[NAME_SITE_MAX + 1] = "";
		if (tlen > 1 && tlen - 1 <= NAME_SITE_MAX)
			memcpy(site, tag + 1, tlen - 1);
		reconcile_all(g->rc,
		              *site ? gitio_peer_index(&g->io, site) : -1);
		break;
	}
	case GITREPL_MSG_SERVE:
		if (n == 4)
			pair_serve(g, parts);
		break;
	case GITREPL_MSG_KEY:
		pair_key(g, tag + 1, tlen - 1);
		break;
	case GITREPL_MSG_QUIT:
		g->quit = true;
		break;
	}
out:
	for (int i = 0; i < n; i++)
		zmq_msg_close(&parts[i]);
}

/* libzmq never retries a DEALER whose handshake failed (linkmon.h): make
 * it again when its monitor says so, or at once for a new key of the peer
 * (GITREPL_MSG_KEY).  A fetch asked on the old one times out
 * (packfetch_tick) and is asked again. */
static void relink(struct gitrepl *g, uint64_t now_ms)
{
	char what[NAME_SITE_MAX + Z85_KEY_LEN + 48];

	for (int i = 0; i < g->npeers; i++) {
		snprintf(what, sizeof(what), "peer=%s socket=git key=%s",
			 g->peers[i].site, g->self->curve_pub);
		if (!linkmon_stale(&g->mon[i], g->keys[i]) &&
		    !linkmon_poll(&g->mon[i], now_ms, what))
			continue;
		void *s = NULL;
		linkmon_detach(&g->mon[i], g->dealer[i]);
		g->mon[i].retry_at_ms = 0;
		s = peer_curve_client_watched(g->self, ZMQ_DEALER,
					      g->peers[i].sync, g->keys[i],
					      DEALER_MSG_MAX, &g->mon[i]);
		if (!s) /* logged; the old one stays, tried again later */
			continue;
		zmq_close(g->dealer[i]);
		g->dealer[i] = s;
		log_debug("peer socket made again peer=%s socket=git",
			  g->peers[i].site);
	}
}

/* The frames on the DEALERs: the fetch's. */
static void dealers(struct gitrepl *g)
{
	for (int i = 0; i < g->npeers; i++) {
		zmq_msg_t msg;
		for (int b = 0; b < 64; b++) {
			enum packfetch_verdict v = PACKFETCH_GOING;
			zmq_msg_init(&msg);
			if (zmq_msg_recv(&msg, g->dealer[i], ZMQ_DONTWAIT) <
			    0) {
				zmq_msg_close(&msg);
				break;
			}
			if (!zmq_msg_more(&msg))
				v = packfetch_dealer(g->pf, i, &msg);
			zmq_msg_close(&msg);
			if (v != PACKFETCH_GOING)
				reconcile_fetched(g->rc, v, clock_mono_ms());
		}
	}
}

/* One turn: poll the pair, the DEALERs, the streams with credit and the
 * admin sync's output; hand each its input.  Returns 0, or -1 when the
 * poll failed. */
static int turn(struct gitrepl *g, bool more)
{
	zmq_pollitem_t items[1 + CONFIG_MAX_PEERS + PACKSRV_STREAMS_MAX + 1];
	int k = 0, streams;

	items[k++] = (zmq_pollitem_t){g->pair, 0, ZMQ_POLLIN, 0};
	for (int i = 0; i < g->npeers; i++)
		items[k++] = (zmq_pollitem_t){g->dealer[i], 0, ZMQ_POLLIN, 0};
	streams = k;
	k += packsrv_poll(g->ps, &items[streams]);
	/* the admin sync's output (read in glsync_tick) */
	if (glsync_fd(g->gs) >= 0)
		items[k++] =
		        (zmq_pollitem_t){NULL, glsync_fd(g->gs), ZMQ_POLLIN, 0};
	/* a sync whose output ended is about to exit: reap it soon, so
	 * that its ms says how long the compile took */
	int wait_ms = more ? 0 : glsync_ending(g->gs) ? 5 : 100;
	if (zmq_poll(items, k, wait_ms) < 0) {
		if (errno == EINTR)
			return 0;
		log_error("gitrepl poll failed: %s", zmq_strerror(errno));
		return -1;
	}
	/* streams first: the pair's messages may close one */
	packsrv_ready(g->ps, &items[streams]);
	if (items[0].revents)
		for (int b = 0; b < 64 && !g->quit; b++) {
			int ev = 0;
			size_t el = sizeof(ev);
			pair_msg(g);
			if (zmq_getsockopt(g->pair, ZMQ_EVENTS, &ev, &el) < 0 ||
			    !(ev & ZMQ_POLLIN))
				break;
		}
	dealers(g);
	return 0;
}

static void *actor(void *arg)
{
	struct gitrepl *g = arg;
	bool more = false;

	while (!g->quit) {
		if (turn(g, more) < 0)
			break;
		uint64_t t = clock_mono_ms();
		enum packfetch_verdict v;
		packsrv_tick(g->ps, t);
		if ((v = packfetch_tick(g->pf, t)) != PACKFETCH_GOING)
			reconcile_fetched(g->rc, v, t);
		relink(g, t);
		more = reconcile_work(g->rc);
		glsync_tick(g->gs, t);
		send_stats(g);
	}
	glsync_destroy(&g->gs);
	packsrv_destroy(&g->ps);
	packfetch_destroy(&g->pf);
	gitio_close(&g->io);
	return NULL;
}

/* ---- the writer's side -------------------------------------------------- */

static void pair_opts(void *s)
{
	int zero = 0;
	zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
}

/* The stages, opened on the writer's thread and handed to the actor
 * with its sockets. */
static void open_stages(struct gitrepl *g, const struct gitrepl_opts *o)
{
	g->io = (struct gitio){.self = o->self,
	                       .peers = o->peers,
	                       .npeers = g->npeers,
	                       .repo_dir = g->repo_dir,
	                       .st = &g->st,
	                       .to_router = to_router,
	                       .mark = to_marks,
	                       .arg = g};
	packfetch_open(&g->pf,
	               &(struct packfetch_opts){.io = &g->io,
	                                        .store = o->store,
	                                        .dealer = g->dealer,
	                                        .fetch_hist = o->fetch_hist});
	packsrv_open(&g->ps, &g->io);
	glsync_open(&g->gs,
	            &(struct glsync_opts){.io = &g->io,
	                                  .home = o->gitolite_home,
	                                  .program = o->gitolite_program,
	                                  .conf_path = o->conf_path});
	reconcile_open(&g->rc,
	               &(struct reconcile_opts){.io = &g->io,
	                                        .store = o->store,
	                                        .fetch = g->pf,
	                                        .glsync = g->gs,
	                                        .hook_path = o->hook_path,
	                                        .conf_path = o->conf_path});
}

int gitrepl_start(struct gitrepl **out, const struct gitrepl_opts *o)
{
	struct gitrepl *g = xcalloc(1, sizeof(*g));

	*out = NULL;
	g->self = o->self;
	g->peers = o->peers;
	g->repo_dir = xstrdup(o->repo_dir ? o->repo_dir : "");
	g->gitolite = o->gitolite_home != NULL;
	/* fsync objects and refs before a ref points at them */
	git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, 1);
	snprintf(g->endpoint, sizeof(g->endpoint), "inproc://gitrepl-%p",
		 (void *)g);
	g->main_pair = zmq_socket(o->self->zctx, ZMQ_PAIR);
	g->pair = zmq_socket(o->self->zctx, ZMQ_PAIR);
	if (!g->main_pair || !g->pair)
		goto fail;
	pair_opts(g->main_pair);
	pair_opts(g->pair);
	if (zmq_bind(g->main_pair, g->endpoint) < 0 ||
	    zmq_connect(g->pair, g->endpoint) < 0)
		goto fail;
	for (int i = 0; i < o->npeers && i < CONFIG_MAX_PEERS; i++) {
		const struct config_peer *p = &o->peers[i];
		memcpy(g->keys[i], p->public_key, sizeof(g->keys[i]));
		g->dealer[i] = peer_curve_client_watched(o->self, ZMQ_DEALER,
							 p->sync, g->keys[i],
							 DEALER_MSG_MAX,
							 &g->mon[i]);
		if (!g->dealer[i])
			goto fail;
		g->npeers++;
	}
	open_stages(g, o);
	/* the sockets and stages are handed to the actor: it alone uses
	 * them now */
	if (thread_start(&g->thread, "gd-gitrepl", actor, g) != 0)
		goto fail;
	g->started = true;
	*out = g;
	return 0;
fail:
	log_error("cannot start repository replication: %s",
		  zmq_strerror(errno));
	gitrepl_stop(&g);
	return GD_EIO;
}

void gitrepl_stop(struct gitrepl **gp)
{
	struct gitrepl *g = *gp;
	if (!g)
		return;
	if (g->started) {
		uint8_t quit = GITREPL_MSG_QUIT;
		zmq_send(g->main_pair, &quit, 1, 0);
		pthread_join(g->thread, NULL);
	}
	/* the actor's end (or never started) */
	reconcile_destroy(&g->rc);
	glsync_destroy(&g->gs);
	packsrv_destroy(&g->ps);
	packfetch_destroy(&g->pf);
	gitio_close(&g->io);
	for (int i = 0; i < g->npeers; i++) {
		linkmon_detach(&g->mon[i], g->dealer[i]);
		zmq_close(g->dealer[i]);
	}
	if (g->pair)
		zmq_close(g->pair);
	if (g->main_pair)
		zmq_close(g->main_pair);
	free(g->repo_dir);
	free(g);
	*gp = NULL;
}

void *gitrepl_socket(struct gitrepl *g) { return g->main_pair; }

int gitrepl_set_key(struct gitrepl *g, const char *site, const char *key)
{
	struct buf m = BUF_INIT;
	uint8_t tag = GITREPL_MSG_KEY;
	int i = 0, rc = 0;

	while (i < g->npeers && strcmp(g->peers[i].site, site))
		i++;
	if (i == g->npeers)
		return GD_ENOTFOUND;
	if (strlen(key) != Z85_KEY_LEN)
		return GD_EINVAL;
	buf_add(&m, &tag, 1);
	buf_add(&m, site, strlen(site) + 1);
	buf_add(&m, key, Z85_KEY_LEN);
	if (zmq_send(g->main_pair, m.p, m.len, 0) < 0)
		rc = GD_EIO;
	buf_free(&m);
	return rc;
}

/* One message from the actor (n parts in f) for the writer. */
static int take(struct gitrepl *g, zmq_msg_t *f, int n, void *router,
		struct store_batch *marks)
{
	const char *tag = zmq_msg_data(&f[0]);

	if (zmq_msg_size(&f[0]) < 1)
		return 0;
	switch ((uint8_t)tag[0]) {
	case GITREPL_MSG_PEER:
		/* ROUTER_MANDATORY: a peer gone means EHOSTUNREACH; a full
		 * queue EAGAIN.  Either way the frame is dropped and the
		 * stream times out at the asker, who asks again. */
		if (n == 3 && router &&
		    (zmq_msg_send(&f[1], router,
				  ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
		     zmq_msg_send(&f[2], router, ZMQ_DONTWAIT) < 0))
			log_debug("pack frame for a peer dropped: %s",
				  zmq_strerror(errno));
		return 0;
	case GITREPL_MSG_STATS:
		if (zmq_msg_size(&f[0]) == 1 + sizeof(g->seen))
			memcpy(&g->seen, tag + 1, sizeof(g->seen));
		return 0;
	case GITREPL_MSG_MARK:
		if (n != 3)
			return 0;
		store_put(marks, CF_LOSERS, zmq_msg_data(&f[1]),
			  zmq_msg_size(&f[1]), zmq_msg_data(&f[2]),
			  zmq_msg_size(&f[2]));
		return 1;
	case GITREPL_MSG_UNMARK:
		if (n != 2)
			return 0;
		store_del(marks, CF_LOSERS, zmq_msg_data(&f[1]),
			  zmq_msg_size(&f[1]));
		return 1;
	}
	return 0;
}

int gitrepl_pump(struct gitrepl *g, void *router, struct store_batch *marks)
{
	int k = 0;

	for (int b = 0; b < 256; b++) {
		zmq_msg_t f[3];
		int n = 0;
		zmq_msg_init(&f[0]);
		if (zmq_msg_recv(&f[0], g->main_pair, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&f[0]);
			break;
		}
		n = 1;
		/* the rest of a message is there once its first part is */
		while (n < 3 && zmq_msg_more(&f[n - 1])) {
			zmq_msg_init(&f[n]);
			if (zmq_msg_recv(&f[n], g->main_pair, 0) < 0) {
				zmq_msg_close(&f[n]);
				break;
			}
			n++;
		}
		if (zmq_msg_more(&f[n - 1]))
			peer_drain(g->main_pair, &f[n - 1]); /* not ours */
		else
			k += take(g, f, n, router, marks);
		for (int i = 0; i < n; i++)
			zmq_msg_close(&f[i]);
	}
	return k;
}

void gitrepl_changed(struct gitrepl *g, struct buf *refs)
{
	if (!refs->len)
		return;
	uint8_t *p = xmalloc(refs->len + 1);
	p[0] = GITREPL_MSG_CHANGED;
	memcpy(p + 1, refs->p, refs->len);
	zmq_send(g->main_pair, p, refs->len + 1, 0);
	free(p);
	buf_reset(refs);
}

void gitrepl_all(struct gitrepl *g, const char *prefer)
{
	char m[1 + NAME_SITE_MAX + 1];
	int k = snprintf(m, sizeof(m), "%c%s", GITREPL_MSG_ALL,
	                 prefer ? prefer : "");
	zmq_send(g->main_pair, m, (size_t)k, 0);
}

void gitrepl_serve(const struct peer_req *rq, void *payload)
{
	struct gitrepl *g = payload;

	uint8_t tag = GITREPL_MSG_SERVE;

	zmq_send(g->main_pair, &tag, 1, ZMQ_SNDMORE);
	zmq_send(g->main_pair, rq->rid, rq->ridlen, ZMQ_SNDMORE);
	zmq_send(g->main_pair, rq->site, strlen(rq->site), ZMQ_SNDMORE);
	zmq_send(g->main_pair, rq->frame, rq->len, 0);
}

void gitrepl_status(struct gitrepl *g, cJSON *obj)
{
	const struct gitio_stats *st = &g->seen;

	cJSON_AddNumberToObject(obj, "pending_refs", (double)st->pending);
	cJSON_AddNumberToObject(obj, "packs_fetched", (double)st->fetches);
	cJSON_AddNumberToObject(obj, "fetch_failures",
				(double)st->fetch_failures);
	cJSON_AddNumberToObject(obj, "bytes_fetched", (double)st->bytes_in);
	cJSON_AddNumberToObject(obj, "packs_served", (double)st->served);
	cJSON_AddNumberToObject(obj, "bytes_served", (double)st->bytes_out);
	cJSON_AddNumberToObject(obj, "refs_moved", (double)st->refs_moved);
	cJSON_AddNumberToObject(obj, "conflicts_kept", (double)st->conflicts);
	cJSON_AddNumberToObject(obj, "last_fetch_ms",
				(double)st->last_fetch_ms);
	cJSON_AddNumberToObject(obj, "last_fetch_bytes",
				(double)st->last_fetch_bytes);
	cJSON_AddStringToObject(obj, "last_error", st->last_error);
	if (g->gitolite) {
		cJSON_AddNumberToObject(obj, "gitolite_syncs",
					(double)st->gitolite_syncs);
		cJSON_AddNumberToObject(obj, "gitolite_sync_failures",
					(double)st->gitolite_failures);
		cJSON_AddStringToObject(obj, "gitolite_last_error",
					st->gitolite_last_error);
	}
}
