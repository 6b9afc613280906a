/*
 * repl_stat.c: replication statistics.  Peer input refused for a reason
 * of its own, counted by reason (and in counts.dropped); the latency of
 * live operations (publish at the origin to durable here) in a ring,
 * struct repl_latency, with percentiles sorted lazily; the last catch-up
 * episode; and the per-peer status (with each peer's release and
 * features).
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
#include "repl_int.h"
#include "xalloc.h"
#include "metrics.h"
#include "banned.h"

static const char *const drop_names[DROP__COUNT] = {
        "forged_origin",    "snapshot_record", "snapshot_vector",
        "heartbeat_vector", "plane",           "range_unasked",
        "mirror_hidden",    "signature"};

/* status renders every 100 ms (main.c): with more samples than this
 * (a sort of up to LAT_SAMPLES takes tens of ms) the percentiles are
 * sorted again at most every LAT_SORT_MS. */
#define LAT_SORT_CHEAP 4096
#define LAT_SORT_MS    1000

void repl_stat_refuse(
        struct repl *r, enum repl_drop why, uint64_t n, const char *fmt, ...)
{
	uint64_t now_ms = clock_mono_ms();
	char m[512];
	va_list ap;

	GD_ASSERT(why < DROP__COUNT);
	r->drops[why] += n;
	repl_dropped(r, n);
	if (now_ms - r->drop_log_ms[why] < 1000)
		return;
	r->drop_log_ms[why] = now_ms;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	log_error("%s %s=%llu dropped=%llu", m, drop_names[why],
	          (unsigned long long)r->drops[why],
	          (unsigned long long)repl_dropped_total(r));
}

/* The worse of p's two sockets' states. */
static const struct linkmon *link_state(const struct repl_peer *p)
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

void repl_status(struct repl *r, cJSON *arr, uint64_t now_ms)
{
	for (int i = 0; i < r->npeers; i++) {
		struct repl_peer *p = &r->peers[i];
		cJSON *o = cJSON_CreateObject();
		uint64_t lag = 0;
		bool feed = p->link == LINK_FEED_OUT;
		if (feed)
			lag = repl_mirror_lag_ops(r, p);
		else
			repl_hb_ahead(r, p, &lag);
		cJSON_AddStringToObject(o, "site", p->cfg->site);
		cJSON_AddStringToObject(o, "role",
		                        config_role_name(p->cfg->role));
		/* a mirror we feed: connected while its lease lives, and its
		 * lag is what it lacks of ours (its last mirror_sub) */
		cJSON_AddBoolToObject(
		        o, "connected",
		        feed ? now_ms < p->lease_until_ms
		             : p->last_heard_ms && now_ms - p->last_heard_ms <
		                                           CONNECTED_MS);
		cJSON_AddNumberToObject(
		        o, "last_heard_ms",
		        p->last_heard_ms ? (double)(now_ms - p->last_heard_ms)
		                         : -1);
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
			cJSON_AddNumberToObject(
			        o, "handshake_failures",
			        (double)(p->sub_mon.failures +
			                 p->dealer_mon.failures));
		}
		cJSON_AddNumberToObject(
		        o, "lag_ms",
		        lag && p->behind_since_ms
		                ? (double)(now_ms - p->behind_since_ms)
		                : 0);
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
		/* what it runs: docs/upgrading.md (none heard yet: null) */
		const char *rel = repl_peer_release(p);
		if (rel)
			cJSON_AddStringToObject(o, "release", rel);
		else
			cJSON_AddNullToObject(o, "release");
		cJSON *fa = cJSON_AddArrayToObject(o, "features");
		for (size_t k = 0; p->hb && k < p->hb->n_features; k++)
			cJSON_AddItemToArray(
			        fa, cJSON_CreateString(p->hb->features[k]));
		cJSON_AddItemToArray(arr, o);
	}
}

void repl_synced(struct repl *r, uint64_t ticket)
{
	struct repl_latency *m = &r->lat;
	uint32_t now = (uint32_t)(clock_wall_us() & 0xffffffff);

	while (m->wait_head < m->wait_tail) {
		uint64_t w = m->wait_head % WAIT_SAMPLES;
		if (m->waiting[w].ticket > ticket)
			break;
		const struct lat_stamp *at = &m->waiting[w].at;
		/* a clock behind the origin's by more than the delay: 0 */
		uint32_t d = now - at->sent;
		if (m->lat_us) {
			uint32_t st[LAT__STAGES] = {
			        [LAT_WIRE] = at->recv - at->sent,
			        [LAT_APPLY] = at->applied - at->recv,
			        [LAT_WRITE] = at->written - at->applied,
			        [LAT_DURABLE] = now - at->written,
			};
			for (int k = 0; k < LAT__STAGES; k++)
				m->stage_us[k][m->lat_n % WAIT_SAMPLES] = st[k];
			m->lat_us[m->lat_n++ % LAT_SAMPLES] = d;
		}
		metrics_observe(r->latency_hist, d > INT32_MAX ? 0 : d);
		m->wait_head++;
	}
}

void repl_stat_committed(struct repl *r, int rc, uint64_t ticket)
{
	struct repl_latency *m = &r->lat;
	uint32_t now = (uint32_t)clock_wall_us();

	for (int i = 0; rc == 0 && i < m->npending; i++) {
		if (m->wait_tail - m->wait_head == WAIT_SAMPLES)
			break; /* samples, not data: drop */
		uint64_t w = m->wait_tail++ % WAIT_SAMPLES;
		m->waiting[w].ticket = ticket;
		m->waiting[w].at = m->pending[i];
		m->waiting[w].at.written = now;
	}
	m->npending = 0;
}

void repl_stat_catchup(struct repl *r, bool all_level, uint64_t now_ms)
{
	struct repl_latency *m = &r->lat;

	if (!all_level && !m->behind_since_ms) {
		m->behind_since_ms = now_ms;
		m->episode_ops = 0;
	} else if (all_level && m->behind_since_ms) {
		m->last_ops = m->episode_ops;
		m->last_ms = now_ms - m->behind_since_ms;
		m->behind_since_ms = 0;
		if (m->last_ops > 1000)
			log_info("caught up ops=%llu ms=%llu rate=%.0f/s",
			         (unsigned long long)m->last_ops,
			         (unsigned long long)m->last_ms,
			         m->last_ms ? 1000.0 * (double)m->last_ops /
			                              (double)m->last_ms
			                    : 0.0);
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* The p50 and p99 of the n samples v (sorted in place). */
static void percentiles(uint32_t *v, uint64_t n, uint32_t *p50, uint32_t *p99)
{
	qsort(v, n, sizeof(*v), cmp_u32);
	*p50 = v[n / 2];
	*p99 = v[n * 99 / 100];
}

/* Sort the samples again for their percentiles when new ones came (see
 * LAT_SORT_CHEAP); the stages over the last WAIT_SAMPLES of them. */
static void lat_sort(struct repl_latency *m)
{
	uint64_t n = m->lat_n < LAT_SAMPLES ? m->lat_n : LAT_SAMPLES;
	uint64_t ns = m->lat_n < WAIT_SAMPLES ? m->lat_n : WAIT_SAMPLES;
	uint64_t now = clock_mono_ms();

	if (!n || !m->lat_us || m->sorted_n == m->lat_n ||
	    (n > LAT_SORT_CHEAP && m->sorted_n &&
	     now - m->sorted_at_ms < LAT_SORT_MS))
		return;
	uint32_t *v = xreallocarray(NULL, n, sizeof(*v));
	memcpy(v, m->lat_us, n * sizeof(*v));
	percentiles(v, n, &m->p50, &m->p99);
	m->max = v[n - 1];
	for (int k = 0; k < LAT__STAGES; k++) {
		memcpy(v, m->stage_us[k], ns * sizeof(*v));
		percentiles(v, ns, &m->stage_p50[k], &m->stage_p99[k]);
	}
	free(v);
	m->sorted_n = m->lat_n;
	m->sorted_at_ms = now;
}

void repl_metrics(struct repl *r, cJSON *obj)
{
	cJSON *lat = cJSON_AddObjectToObject(obj, "latency_us");
	lat_sort(&r->lat);
	cJSON_AddNumberToObject(lat, "count", (double)r->lat.lat_n);
	if (r->lat.sorted_n) {
		cJSON_AddNumberToObject(lat, "p50", r->lat.p50);
		cJSON_AddNumberToObject(lat, "p99", r->lat.p99);
		cJSON_AddNumberToObject(lat, "max", r->lat.max);
		/* where the samples waited (struct lat_stamp), of the
		 * last WAIT_SAMPLES */
		static const char *const stage_names[LAT__STAGES] = {
		        [LAT_WIRE] = "wire",
		        [LAT_APPLY] = "apply",
		        [LAT_WRITE] = "write",
		        [LAT_DURABLE] = "durable",
		};
		cJSON *st = cJSON_AddObjectToObject(lat, "stages");
		for (int k = 0; k < LAT__STAGES; k++) {
			cJSON *o = cJSON_AddObjectToObject(st, stage_names[k]);
			cJSON_AddNumberToObject(o, "p50", r->lat.stage_p50[k]);
			cJSON_AddNumberToObject(o, "p99", r->lat.stage_p99[k]);
		}
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
	cJSON_AddNumberToObject(cu, "ops", (double)r->lat.last_ops);
	cJSON_AddNumberToObject(cu, "ms", (double)r->lat.last_ms);
	cJSON_AddNumberToObject(obj, "unsigned_records_trusted",
	                        (double)r->unsigned_trusted);
}
