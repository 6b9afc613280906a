/*
 * metrics.c: /metrics, /health and /ready (metrics.h).
 *
 * Why libmicrohttpd: a scrape is a few kilobytes once every few seconds,
 * but it comes from the network, so the HTTP parsing should be a
 * well-kept library's, not ours (docs/dependencies.md).  Its one internal
 * thread polls the socket and calls answer(); that thread renders the
 * page from its own copies of the status parts (taken from the hand-over
 * slots under a mutex held for pointer swaps) and from the atomic
 * counters.  So no thread of the node waits for a scrape, and a slow or
 * hostile client holds only this thread (bounded: few connections per
 * client address, a short timeout, GET only, no request body).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "err.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "xalloc.h"
#include "banned.h"

#ifndef GRANTD_VERSION
#define GRANTD_VERSION "unknown"
#endif

/* Connection limits: httpd.h (review N9: sixteen half-open connections
 * from one address no longer stop /health for the probe on another,
 * test_metrics.sh). */

/* ---- counters ------------------------------------------------------------- */

static void hist_init(struct metrics_hist *h, const uint64_t *le, int n,
		      double scale)
{
	memset(h, 0, sizeof(*h));
	h->nle = n;
	memcpy(h->le, le, (size_t)n * sizeof(*le));
	h->scale = scale;
}

void metrics_counts_init(struct metrics_counts *c)
{
	/* microseconds */
	static const uint64_t lat[] = { 500, 1000, 2500, 5000, 10000, 25000,
		50000, 100000, 250000, 500000, 1000000, 2500000, 5000000,
		10000000 };
	static const uint64_t fsync[] = { 100, 250, 500, 1000, 2500, 5000,
		10000, 25000, 50000, 100000, 250000, 500000, 1000000 };
	/* milliseconds */
	static const uint64_t fetch[] = { 10, 25, 50, 100, 250, 500, 1000,
		2500, 5000, 10000, 30000, 60000, 300000 };
	/* commits */
	static const uint64_t batches[] = { 1, 2, 4, 8, 16, 32, 64, 128,
		256 };

	memset(c, 0, sizeof(*c));
	hist_init(&c->repl_latency, lat, GD_ARRAY_SIZE(lat), 1e6);
	hist_init(&c->fsync, fsync, GD_ARRAY_SIZE(fsync), 1e6);
	hist_init(&c->fetch, fetch, GD_ARRAY_SIZE(fetch), 1e3);
	hist_init(&c->commit_batches, batches, GD_ARRAY_SIZE(batches), 1);
}

void metrics_observe(struct metrics_hist *h, uint64_t v)
{
	int i = 0;

	if (!h)
		return;
	while (i < h->nle && v > h->le[i])
		i++;
	atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

/* ---- the exposition writer ------------------------------------------------ */

/* s with \ and newline escaped, and " too when quote. */
static void put_escaped(struct buf *out, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			buf_puts(out, "\\\\");
		else if (*s == '\n')
			buf_puts(out, "\\n");
		else if (quote && *s == '"')
			buf_puts(out, "\\\"");
		else
			buf_add(out, s, 1);
	}
}

/* A value as the text format spells it: integers exactly, NaN, +Inf. */
static void put_value(struct buf *out, double v)
{
	if (isnan(v))
		buf_puts(out, "NaN");
	else if (isinf(v))
		buf_puts(out, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		buf_printf(out, "%.0f", v);
	else {
		/* the shortest of 15 and 17 digits that reads back as v */
		char t[40];
		snprintf(t, sizeof(t), "%.15g", v);
		if (strtod(t, NULL) != v)
			snprintf(t, sizeof(t), "%.17g", v);
		buf_puts(out, t);
	}
}

void metrics_family(struct buf *out, const char *name, const char *type,
		    const char *help)
{
	buf_printf(out, "# HELP %s ", name);
	put_escaped(out, help, false);
	buf_printf(out, "\n# TYPE %s %s\n", name, type);
}

void metrics_sample(struct buf *out, const char *name,
		    const char *const *labels, double v)
{
	buf_puts(out, name);
	if (labels && labels[0]) {
		buf_puts(out, "{");
		for (int i = 0; labels[i] && labels[i + 1]; i += 2) {
			buf_printf(out, "%s%s=\"", i ? "," : "", labels[i]);
			put_escaped(out, labels[i + 1], true);
			buf_puts(out, "\"");
		}
		buf_puts(out, "}");
	}
	buf_puts(out, " ");
	put_value(out, v);
	buf_puts(out, "\n");
}

void metrics_histogram(struct buf *out, const char *name, const char *help,
		       const struct metrics_hist *h)
{
	struct buf n = BUF_INIT;
	uint64_t cum = 0, sum;
	char le[40];

	metrics_family(out, name, "histogram", help);
	buf_printf(&n, "%s_bucket", name);
	for (int i = 0; i <= h->nle; i++) {
		cum += atomic_load_explicit(&h->bucket[i],
					    memory_order_relaxed);
		if (i < h->nle) {
			struct buf t = BUF_INIT;
			put_value(&t, (double)h->le[i] / h->scale);
			snprintf(le, sizeof(le), "%s", t.p);
			buf_free(&t);
		} else {
			snprintf(le, sizeof(le), "+Inf");
		}
		metrics_sample(out, n.p, (const char *[]){ "le", le, NULL },
			       (double)cum);
	}
	sum = atomic_load_explicit(&h->sum, memory_order_relaxed);
	buf_reset(&n);
	buf_printf(&n, "%s_sum", name);
	metrics_sample(out, n.p, NULL, (double)sum / h->scale);
	buf_reset(&n);
	buf_printf(&n, "%s_count", name);
	metrics_sample(out, n.p, NULL, (double)cum);
	buf_free(&n);
}

/* ---- the page ------------------------------------------------------------- */

static double num_of(const cJSON *o, const char *key, double dflt)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(i) ? i->valuedouble : dflt;
}

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(i) ? i->valuestring : NULL;
}

/* One family of one sample without labels. */
static void one(struct buf *out, const char *name, const char *type,
		const char *help, double v)
{
	metrics_family(out, name, type, help);
	metrics_sample(out, name, NULL, v);
}

/* The token quorum (status "quorum", vote.h); nothing without it. */
static void render_quorum(struct buf *out, const cJSON *q)
{
	const char *mode = str_of(q, "mode");

	if (!q || !mode)
		return;
	one(out, "grantd_token_quorum_majority", "gauge",
	    "1 when token_quorum = majority is in force here, 0 for local.",
	    !strcmp(mode, "majority"));
	one(out, "grantd_token_quorum_voter", "gauge",
	    "1 while this site votes (its store holds a majority's token "
	    "uses), 0 when it does not.",
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "voter")));
	metrics_family(out, "grantd_token_quorum_uses_total", "counter",
		       "Token uses proposed here, by the sites' verdict.");
	metrics_sample(out, "grantd_token_quorum_uses_total",
		       (const char *[]){ "result", "accepted", NULL },
		       num_of(q, "accepted", 0));
	metrics_sample(out, "grantd_token_quorum_uses_total",
		       (const char *[]){ "result", "refused", NULL },
		       num_of(q, "refused", 0));
	metrics_family(out, "grantd_token_quorum_votes_total", "counter",
		       "Votes this site gave to other sites' proposals.");
	metrics_sample(out, "grantd_token_quorum_votes_total",
		       (const char *[]){ "vote", "yes", NULL },
		       num_of(q, "promised", 0));
	metrics_sample(out, "grantd_token_quorum_votes_total",
		       (const char *[]){ "vote", "no", NULL },
		       num_of(q, "votes_refused", 0));
	one(out, "grantd_token_quorum_waiting", "gauge",
	    "Token uses waiting for the sites' votes now.",
	    num_of(q, "waiting", 0));
}

static void render_store(struct buf *out, const cJSON *store)
{
	static const char *const kinds[] = { "users", "grants", "repos",
					     "refs" };
	const cJSON *counts = cJSON_GetObjectItemCaseSensitive(store, "counts");
	const cJSON *vec = cJSON_GetObjectItemCaseSensitive(store, "vector");
	const cJSON *e;
	cJSON *sums = cJSON_CreateObject();

	metrics_family(out, "grantd_records", "gauge",
		       "Live records of each kind at this site (users, grants "
		       "neither revoked nor expired, repositories, refs).");
	for (size_t i = 0; i < GD_ARRAY_SIZE(kinds); i++)
		metrics_sample(out, "grantd_records",
			       (const char *[]){ "kind", kinds[i], NULL },
			       num_of(counts, kinds[i], 0));
	one(out, "grantd_push_log_forks", "gauge",
	    "Push log entries kept beside another entry of the same site and "
	    "number (a forked chain: grantctl log verify names it).",
	    num_of(counts, "push_log_forks", 0));
	one(out, "grantd_push_log_refused_total", "counter",
	    "Push log entries refused: stamped no later than the entry "
	    "before them.", num_of(counts, "push_log_refused", 0));
	/* the vector's sum per origin: retired epochs count in the origin's
	 * retired total (epoch 0), their own entries are left out */
	cJSON_ArrayForEach(e, vec) {
		const char *origin = str_of(e, "origin");
		if (!origin ||
		    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "retired")))
			continue;
		cJSON *prev = cJSON_GetObjectItemCaseSensitive(sums, origin);
		if (prev)
			cJSON_SetNumberValue(prev, prev->valuedouble +
					     num_of(e, "seq", 0));
		else
			cJSON_AddNumberToObject(sums, origin,
						num_of(e, "seq", 0));
	}
	metrics_family(out, "grantd_ops_applied_total", "counter",
		       "Operations applied at this site, by the site that "
		       "made them (the version vector's sum per origin).");
	cJSON_ArrayForEach(e, sums)
		metrics_sample(out, "grantd_ops_applied_total",
			       (const char *[]){ "origin", e->string, NULL },
			       e->valuedouble);
	cJSON_Delete(sums);
}

static void render_peers(struct buf *out, const cJSON *peers)
{
	static const struct {
		const char *name, *key, *help;
		double div;
	} g[] = {
		{ "grantd_peer_connected", "connected",
		  "1 while a heartbeat of the peer came in the last 1.5 s.",
		  1 },
		{ "grantd_peer_last_heard_seconds", "last_heard_ms",
		  "Seconds since the peer was last heard (-1: never since "
		  "this node started).", 1e3 },
		{ "grantd_peer_lag_ops", "lag_ops",
		  "Operations the peer has applied that this site has not.",
		  1 },
		{ "grantd_peer_lag_seconds", "lag_ms",
		  "Seconds this site has been behind the peer (0: level).",
		  1e3 },
		{ "grantd_peer_policy_mismatches", "policy_mismatches",
		  "[policy] settings that must agree across sites "
		  "(token_quorum, lockout, token windows, security_keys) "
		  "and differ from the peer's (0: all agree).", 1 },
		{ "grantd_peer_key_refused", "key_refused",
		  "1 while the peer refuses this node's key (its [peer] "
		  "public_key for this site is not this node's key).", 1 },
		{ "grantd_peer_handshake_failed", "handshake_failed",
		  "1 while the last handshake with the peer failed (check "
		  "its public_key in this node's configuration).", 1 },
	};
	const cJSON *p;

	for (size_t i = 0; i < GD_ARRAY_SIZE(g); i++) {
		metrics_family(out, g[i].name, "gauge", g[i].help);
		cJSON_ArrayForEach(p, peers) {
			const char *site = str_of(p, "site");
			const cJSON *v =
				cJSON_GetObjectItemCaseSensitive(p, g[i].key);
			double x = cJSON_IsBool(v) ? cJSON_IsTrue(v) :
				   cJSON_IsNumber(v) ? v->valuedouble : NAN;
			/* the last two: a mirror we feed has no link of
			 * ours to watch */
			if (!site || (!v && i + 2 >= GD_ARRAY_SIZE(g)))
				continue;
			if (x >= 0)
				x /= g[i].div;
			metrics_sample(out, g[i].name,
				       (const char *[]){ "peer", site, NULL },
				       x);
		}
	}
}

static void render_git(struct buf *out, const cJSON *git)
{
	static const struct {
		const char *name, *type, *key, *help;
	} g[] = {
		{ "grantd_git_fetches_total", "counter", "packs_fetched",
		  "Packs fetched from peers and moved into repositories." },
		{ "grantd_git_fetch_failures_total", "counter",
		  "fetch_failures",
		  "Pack fetches that failed (peer gone, pack refused, "
		  "connectivity check failed)." },
		{ "grantd_git_fetched_bytes_total", "counter", "bytes_fetched",
		  "Bytes of packs fetched from peers." },
		{ "grantd_git_served_packs_total", "counter", "packs_served",
		  "Packs served to peers." },
		{ "grantd_git_served_bytes_total", "counter", "bytes_served",
		  "Bytes of packs served to peers." },
		{ "grantd_git_refs_moved_total", "counter", "refs_moved",
		  "Refs moved on disk to follow their records." },
		{ "grantd_git_conflicts_total", "counter", "conflicts_kept",
		  "Losing tips of concurrent pushes kept under "
		  "refs/grantd/conflicts/." },
		{ "grantd_git_pending_refs", "gauge", "pending_refs",
		  "Refs whose repository on disk does not yet match the "
		  "record." },
	};

	for (size_t i = 0; i < GD_ARRAY_SIZE(g); i++)
		one(out, g[i].name, g[i].type, g[i].help,
		    num_of(git, g[i].key, 0));
}

static void render_repl(struct buf *out, const cJSON *repl)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(repl, "replication");
	const cJSON *dr = cJSON_GetObjectItemCaseSensitive(r, "dropped");
	const cJSON *git = cJSON_GetObjectItemCaseSensitive(repl, "git");
	const cJSON *e;
	double named = 0;

	render_peers(out, cJSON_GetObjectItemCaseSensitive(repl, "peers"));
	metrics_family(out, "grantd_peer_messages_dropped_total", "counter",
		       "Peer messages and records refused, by reason (other: "
		       "did not decode or check, out of order, unknown "
		       "sender).");
	cJSON_ArrayForEach(e, dr) {
		metrics_sample(out, "grantd_peer_messages_dropped_total",
			       (const char *[]){ "reason", e->string, NULL },
			       e->valuedouble);
		named += e->valuedouble;
	}
	if (cJSON_GetObjectItemCaseSensitive(repl, "dropped")) {
		double all = num_of(repl, "dropped", 0);
		metrics_sample(out, "grantd_peer_messages_dropped_total",
			       (const char *[]){ "reason", "other", NULL },
			       all > named ? all - named : 0);
	}
	one(out, "grantd_peer_connections_refused_total", "counter",
	    "CURVE connections refused by the ZAP handler (a key that is no "
	    "configured peer's).", num_of(repl, "refused_peers", 0));
	if (git)
		render_git(out, git);
	render_quorum(out, cJSON_GetObjectItemCaseSensitive(repl, "quorum"));
}

static void render_counts(struct buf *out, const struct metrics_counts *c)
{
	static const char *const vals[METRICS_VAL__COUNT] = {
		"valid", "invalid", "locked", "not_enrolled", "malformed",
		"error" };
	static const char *const checks[METRICS_CHECK__COUNT] = {
		"allowed", "refused", "error" };

	metrics_family(out, "grantd_token_validations_total", "counter",
		       "Tokens validated here (2fa val and its variants, "
		       "enrollment confirmations), by result.");
	for (int i = 0; i < METRICS_VAL__COUNT; i++)
		metrics_sample(out, "grantd_token_validations_total",
			       (const char *[]){ "result", vals[i], NULL },
			       (double)atomic_load_explicit(
				       &c->vals[i], memory_order_relaxed));
	metrics_family(out, "grantd_push_checks_total", "counter",
		       "Push checks answered (grant-shell, gitolite's VREF, "
		       "grantctl check), by result.");
	for (int i = 0; i < METRICS_CHECK__COUNT; i++)
		metrics_sample(out, "grantd_push_checks_total",
			       (const char *[]){ "result", checks[i], NULL },
			       (double)atomic_load_explicit(
				       &c->checks[i], memory_order_relaxed));
	one(out, "grantd_lockouts_total", "counter",
	    "Failed validations here that locked a user out "
	    "(lockout_failures reached within lockout_window).",
	    (double)atomic_load_explicit(&c->lockouts, memory_order_relaxed));
	metrics_histogram(out, "grantd_replication_latency_seconds",
			  "Live peer operations: published at their origin "
			  "to durable here (the clocks of both sites).",
			  &c->repl_latency);
	metrics_histogram(out, "grantd_fsync_duration_seconds",
			  "The syncer's fsync of the write-ahead log.",
			  &c->fsync);
	metrics_histogram(out, "grantd_group_commit_batches",
			  "Writer commits made durable by one fsync (group "
			  "commit).", &c->commit_batches);
	metrics_histogram(out, "grantd_git_fetch_duration_seconds",
			  "Pack fetches from peers that succeeded, from the "
			  "request to the refs moved.", &c->fetch);
}

void metrics_render(struct buf *out, const cJSON *store, const cJSON *repl,
		    bool syncing, const struct metrics_counts *c,
		    const char *version)
{
	const char *site = store ? str_of(store, "site") : NULL;

	metrics_family(out, "grantd_build_info", "gauge",
		       "Always 1; the labels say which grantd this is.");
	metrics_sample(out, "grantd_build_info",
		       (const char *[]){ "version", version, "site",
					 site ? site : "", NULL }, 1);
	one(out, "grantd_syncing", "gauge",
	    "1 while the node catches up with its peers (2fa refused, "
	    "/ready 503).", syncing);
	if (store)
		render_store(out, store);
	if (repl)
		render_repl(out, repl);
	if (c)
		render_counts(out, c);
}

/* ---- readiness ------------------------------------------------------------ */

const char *metrics_unready(bool syncing, const char *data_dir)
{
	struct statvfs sv;

	if (syncing)
		return "syncing: catching up with peers (2fa refused)";
	if (access(data_dir, W_OK) < 0)
		return "store not writable: data_dir cannot be written";
	if (statvfs(data_dir, &sv) < 0)
		return "store not writable: data_dir cannot be examined";
	if (sv.f_flag & ST_RDONLY)
		return "store not writable: data_dir is on a read-only "
		       "file system";
	if (sv.f_bavail == 0)
		return "store not writable: data_dir's file system is full";
	return NULL;
}

/* ---- the endpoint --------------------------------------------------------- */

struct metrics {
	struct MHD_Daemon *d;
	const struct metrics_counts *counts;
	char *data_dir;
	/* the hand-over: the writer leaves the newest parts here */
	pthread_mutex_t lock;
	cJSON *next[2];
	bool syncing;
	/* the server thread's own */
	cJSON *cur[2];
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code,
			     const char *type, struct buf *body)
{
	return httpd_reply(conn, code, type, "no-store", body);
}

/* The newest parts, moved from the hand-over slots; the syncing flag. */
static bool take(struct metrics *m)
{
	cJSON *next[2];
	bool syncing;

	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < 2; i++) {
		next[i] = m->next[i];
		m->next[i] = NULL;
	}
	syncing = m->syncing;
	pthread_mutex_unlock(&m->lock);
	for (int i = 0; i < 2; i++)
		if (next[i]) {
			cJSON_Delete(m->cur[i]);
			m->cur[i] = next[i];
		}
	return syncing;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	static const char text[] = "text/plain; charset=utf-8";
	struct metrics *m = cls;
	struct buf body = BUF_INIT;
	const char *why;
	unsigned code = MHD_HTTP_OK;
	enum MHD_Result ret;
	bool syncing;

	if (!httpd_get_only(conn, method, upload_size, &ret))
		return ret;
	syncing = take(m);
	if (!strcmp(url, "/metrics")) {
		metrics_render(&body, m->cur[0], m->cur[1], syncing, m->counts,
			       GRANTD_VERSION);
		ret = reply(conn, code,
			    "text/plain; version=0.0.4; charset=utf-8", &body);
	} else if (!strcmp(url, "/health")) {
		/* this thread answering is the process serving */
		buf_puts(&body, "ok\n");
		ret = reply(conn, code, text, &body);
	} else if (!strcmp(url, "/ready")) {
		if ((why = metrics_unready(syncing, m->data_dir))) {
			code = MHD_HTTP_SERVICE_UNAVAILABLE;
			buf_printf(&body, "not ready: %s\n", why);
		} else {
			buf_puts(&body, "ready\n");
		}
		ret = reply(conn, code, text, &body);
	} else {
		buf_puts(&body, "not found: try /metrics, /health or /ready\n");
		ret = reply(conn, MHD_HTTP_NOT_FOUND, text, &body);
	}
	buf_free(&body);
	return ret;
}

bool metrics_listen_public(const char *listen)
{
	return httpd_listen_public(listen);
}

int metrics_start(struct metrics **out, const struct metrics_opts *o)
{
	struct metrics *m;
	int rc;

	*out = NULL;
	m = xcalloc(1, sizeof(*m));
	m->data_dir = xstrdup(o->data_dir);
	if (httpd_listen_public(o->listen))
		log_warn("metrics endpoint on a non-loopback address listen=%s: "
			 "it has no authentication, so whoever reaches the port "
			 "reads the counters and peer names (bind it to "
			 "127.0.0.1, or filter the port)", o->listen);
	m->counts = o->counts;
	m->syncing = o->syncing;
	pthread_mutex_init(&m->lock, NULL);
	if ((rc = httpd_start(&m->d, o->listen, "metrics", answer,
			      m)) < 0) {
		metrics_stop(&m);
		return rc;
	}
	*out = m;
	return 0;
}

void metrics_stop(struct metrics **mp)
{
	struct metrics *m = *mp;

	if (!m)
		return;
	httpd_stop(&m->d);
	for (int i = 0; i < 2; i++) {
		cJSON_Delete(m->next[i]);
		cJSON_Delete(m->cur[i]);
	}
	pthread_mutex_destroy(&m->lock);
	free(m->data_dir);
	free(m);
	*mp = NULL;
}

void metrics_publish(struct metrics *m, cJSON *store, cJSON *repl,
		     bool syncing)
{
	cJSON *part[2] = { store, repl };

	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < 2; i++)
		if (part[i]) {
			/* one the server has not taken yet is already older */
			cJSON_Delete(m->next[i]);
			m->next[i] = part[i];
		}
	m->syncing = syncing;
	pthread_mutex_unlock(&m->lock);
}
