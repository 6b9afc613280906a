/*
 * metrics.h: the node's HTTP endpoint for operators ([node] metrics =
 * ADDR:PORT): /metrics in the Prometheus text exposition format (0.0.4),
 * /health and /ready.
 *
 * Served by libmicrohttpd on a thread of its own (one internal polling
 * thread, a few connections at a time): a scrape never runs on the
 * writer, the reader or the syncer, and none of them ever waits for it.
 * What it shows comes two ways, both snapshots:
 *  - the parts of `grantctl status` the writer already renders every
 *    100 ms (cmd.h: cmd_status_store, cmd_status_repl), handed over by
 *    metrics_publish() like readers_publish_status(): the peers, their
 *    lag, the vector, the drops, git replication, the counts;
 *  - struct metrics_counts: relaxed atomic counters and histograms for
 *    the events a hot path counts itself (token validations on the
 *    writer, push checks on the reader, fsyncs on the syncer, replication
 *    latency on the writer, pack fetches on the gitrepl actor).  An
 *    increment is one atomic add; nothing takes a lock for it.
 *
 * No label carries a user, an address or a token: the labels are results,
 * reasons, record kinds, and site names (origin, peer).
 */
#ifndef GD_METRICS_H
#define GD_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

struct cJSON;

/* ---- counters the hot paths keep ----------------------------------------- */

#define METRICS_HIST_MAX 16

/* A histogram of integer observations (microseconds, or plain counts):
 * le[] the upper bounds in the same integers, shown divided by scale
 * (1e6: microseconds shown as seconds).  bucket[i] counts observations in
 * (le[i-1], le[i]], bucket[nle] those above the last bound; they are made
 * cumulative only when written. */
struct metrics_hist {
	int nle;
	uint64_t le[METRICS_HIST_MAX];
	double scale;
	_Atomic uint64_t bucket[METRICS_HIST_MAX + 1];
	_Atomic uint64_t sum;
};

/* What a validation of a token ended in (grantd_token_validations_total). */
enum metrics_val {
	METRICS_VAL_VALID,        /* a mark was written */
	METRICS_VAL_INVALID,      /* wrong or replayed token: a failure */
	METRICS_VAL_LOCKED,       /* refused: the user is locked out */
	METRICS_VAL_NOT_ENROLLED,
	METRICS_VAL_MALFORMED,    /* not 6 or 8 digits */
	METRICS_VAL_ERROR,        /* the node failed to decide */
	METRICS_VAL__COUNT
};

/* What a push check (push.check, vref.check, grantctl check) answered. */
enum metrics_check {
	METRICS_CHECK_ALLOWED,
	METRICS_CHECK_REFUSED,
	METRICS_CHECK_ERROR,
	METRICS_CHECK__COUNT
};

struct metrics_counts {
	_Atomic uint64_t vals[METRICS_VAL__COUNT];
	_Atomic uint64_t checks[METRICS_CHECK__COUNT];
	_Atomic uint64_t lockouts;     /* failures that locked a user out */
	struct metrics_hist repl_latency;  /* publish there to durable here */
	struct metrics_hist fsync;         /* the syncer's fsync of the WAL */
	struct metrics_hist commit_batches; /* writer commits per fsync */
	struct metrics_hist fetch;         /* one pack fetch, asked to moved */
};

/* Set the histograms' bounds and zero everything.  Before any thread
 * that counts starts. */
void metrics_counts_init(struct metrics_counts *c);

/* Count one event; c may be NULL (no counting).  Any thread. */
static inline void metrics_inc(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Observe v (in the histogram's integers); h may be NULL.  Any thread. */
void metrics_observe(struct metrics_hist *h, uint64_t v);

/* ---- the exposition writer (pure: unit-tested) ---------------------------- */

/* "# HELP name help" and "# TYPE name type" (help escaped: \ and
 * newline). */
void metrics_family(struct buf *out, const char *name, const char *type,
		    const char *help);

/* One sample line: name{l1="v1",...} value.  labels: NULL, or name and
 * value pairs ended by NULL; values escaped (\, " and newline).  NaN and
 * the infinities are written as Prometheus spells them. */
void metrics_sample(struct buf *out, const char *name,
		    const char *const *labels, double v);

/* A whole histogram family: HELP, TYPE, the cumulative _bucket lines up to
 * le="+Inf", _sum and _count (equal to the +Inf bucket). */
void metrics_histogram(struct buf *out, const char *name, const char *help,
		       const struct metrics_hist *h);

/*
 * The whole /metrics page into out: build info, the published status
 * parts (store, repl: NULL ones are left out), syncing, and the counters
 * (c may be NULL).  version is the build's (CMake's project version).
 */
void metrics_render(struct buf *out, const struct cJSON *store,
		    const struct cJSON *repl, bool syncing,
		    const struct metrics_counts *c, const char *version);

/* ---- the endpoint ---------------------------------------------------------- */

struct metrics;

struct metrics_opts {
	const char *listen;              /* ADDR:PORT, [IPv6]:PORT */
	const char *data_dir;            /* /ready: is it writable? */
	const struct metrics_counts *counts; /* outlives the endpoint */
	bool syncing;                    /* the first state */
};

/* Is listen (ADDR:PORT) an address other than the loopback interface's?
 * The endpoint has no authentication: metrics_start and `grantd -t` warn
 * then.  false when it does not resolve (metrics_start says so). */
bool metrics_listen_public(const char *listen);

/* Bind listen and start the server's thread.  *out is the caller's
 * (metrics_stop).  Returns 0, GD_EINVAL (an address that does not
 * resolve) or GD_EIO (cannot bind), logged. */
int metrics_start(struct metrics **out, const struct metrics_opts *o);

/* Stop the thread, close the socket.  NULL-safe; sets *mp to NULL. */
void metrics_stop(struct metrics **mp);

/* Hand the endpoint new status parts (their ownership moves; NULL: that
 * part unchanged) and the syncing flag.  Takes a mutex for two pointer
 * swaps only; the page is rendered on the server's thread.  Writer. */
void metrics_publish(struct metrics *m, struct cJSON *store,
		     struct cJSON *repl, bool syncing);

/* Why the node is not ready (NULL: ready): syncing, or a data_dir that
 * cannot be written (read-only, full, not ours).  Any thread. */
const char *metrics_unready(bool syncing, const char *data_dir);

#endif
