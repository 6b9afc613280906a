/*
 * loop.c: the writer thread's loop (loop.h).
 *
 * Each turn: wait for an event or the next job due, answer the events
 * (the syncer's tickets, the requests the reader forwards, peers'
 * messages, the gitrepl actor's), then run the cron's table, where every
 * periodic job of the node is one row with its period (cron.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <zmq.h>

#include "attest.h"
#include "clock.h"
#include "cmd.h"
#include "control.h"
#include "crashpoint.h"
#include "cron.h"
#include "err.h"
#include "gitrepl.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "node.h"
#include "peer.h"
#include "peerfeatures.h"
#include "readers.h"
#include "reload.h"
#include "repl.h"
#include "sdnotify.h"
#include "vote.h"
#include "writer.h"
#include "banned.h"

#define BATCH_MAX 512
/* the longest the loop waits for an event (cron.h: less when a job is
 * due sooner); the jobs of period 0 run at least this often */
#define LOOP_WAIT_MS 50
/* periods of the cron's rows (cron.h) */
#define STATUS_MS      100
#define REAP_MS        100
#define REPOS_RETRY_MS 5000
#define SWEEP_MS       (6ULL * 3600 * 1000)

/* Reap the grant-hook runs this thread started (and only those: the
 * gitrepl actor waits for its own git children). */
static void reap_hooks(struct node *n)
{
	for (size_t i = 0; i < n->nhook_pids;)
		if (waitpid(n->hook_pids[i], NULL, WNOHANG) != 0)
			n->hook_pids[i] = n->hook_pids[--n->nhook_pids];
		else
			i++;
}

/* What the gitrepl actor sent: its frames for peers go out on the sync
 * ROUTER, its conflict marks are written here, in the writer's batch (the
 * actor never writes the store). */
static void pump_gitrepl(struct node *n)
{
	uint64_t t;

	if (gitrepl_pump(n->gitrepl, peer_router(n->peer),
	                 writer_batch(n->writer)) > 0 &&
	    writer_commit(n->writer, &t) < 0)
		log_error("conflict marks not written: the refs are looked at "
		          "again at the next start");
}

/* The parts of status that changed go to the reader
 * (readers_publish_status); last[] are the writer's copies of what it
 * last sent, to compare with.  Returns the peers connected now (for
 * systemd's STATUS=). */
static int
tick_status(struct node *n, cJSON *last[2], cJSON *attest, uint64_t now_ms)
{
	cJSON *part[2] = {
	        cmd_status_store(n->ops, (int64_t)(clock_wall_ms() / 1000)),
	        cmd_status_repl(n->repl, n->gitrepl, now_ms),
	};
	cJSON *give[2] = {NULL, NULL};
	const cJSON *p;
	int up = 0;

	cJSON_AddItemToObject(part[1], "attest", attest);

	cJSON_AddItemToObject(part[1], "quorum", vote_status(n->vote));
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(part[1], "peers")) up +=
	        cJSON_IsTrue(cJSON_GetObjectItem(p, "connected"));
	for (int i = 0; i < 2; i++) {
		if (last[i] && cJSON_Compare(last[i], part[i], true)) {
			cJSON_Delete(part[i]);
			continue;
		}
		cJSON_Delete(last[i]);
		last[i] = part[i];
		give[i] = cJSON_Duplicate(part[i], true);
	}
	if (n->metrics) /* its own copies: the reader's move there */
		metrics_publish(n->metrics,
		                give[0] ? cJSON_Duplicate(give[0], true) : NULL,
		                give[1] ? cJSON_Duplicate(give[1], true) : NULL,
		                n->syncing);
	if (give[0] || give[1])
		readers_publish_status(n->readers, give[0], give[1]);
	return up;
}

/* What the loop keeps between turns; the cron's payload. */
struct loop {
	struct node *n;
	zmq_pollitem_t items[3 + 2 + 3 * CONFIG_MAX_PEERS];
	int nitems;
	bool was_syncing;
	cJSON *status_last[2]; /* tick_status's copies */
	struct sdnotify *sd;
	/* records made before signing (attest.h) */
	struct attest_job attest;
	/* status attest.state: "none" (a mirror), "waiting" (not every
	 * frontend runs this release yet), "running" (the job runs while
	 * one of these two), "done", "stopped" */
	const char *attest_state;
};

/* The sockets to wait on: the reader's pipe, the syncer's, the gitrepl
 * actor's, then the peers' (repl's and vote's, made again on a relink). */
static void loop_items(struct loop *l)
{
	struct node *n = l->n;
	int max = (int)GD_ARRAY_SIZE(l->items);

	l->items[0] =
	        (zmq_pollitem_t){control_socket(n->control), 0, ZMQ_POLLIN, 0};
	l->items[1] =
	        (zmq_pollitem_t){writer_socket(n->writer), 0, ZMQ_POLLIN, 0};
	l->items[2] =
	        (zmq_pollitem_t){gitrepl_socket(n->gitrepl), 0, ZMQ_POLLIN, 0};
	l->nitems = 3 + repl_pollitems(n->repl, l->items + 3, max - 3);
	l->nitems +=
	        vote_pollitems(n->vote, l->items + l->nitems, max - l->nitems);
}

static void job_vote(void *payload, uint64_t now)
{
	struct loop *l = payload;
	vote_tick(l->n->vote, now);
}

static void job_clock_step(void *payload, uint64_t now)
{
	(void)payload, (void)now;
	crashpoint_clock();
}

static void job_repl(void *payload, uint64_t now)
{
	struct loop *l = payload;
	repl_tick(l->n->repl, now);
}

/* Peers' sockets made again: wait on the new ones (both asked: each
 * clears its flag). */
static void job_relink(void *payload, uint64_t now)
{
	struct loop *l = payload;
	bool relinked = repl_relinked(l->n->repl);

	(void)now;
	if (vote_relinked(l->n->vote))
		relinked = true;
	if (relinked)
		loop_items(l);
}

/* The syncing flag (repl's), and the repositories following the records. */
static void job_syncing(void *payload, uint64_t now)
{
	struct loop *l = payload;
	struct node *n = l->n;

	(void)now;
	n->syncing = repl_syncing(n->repl);
	/* refs whose records changed: the disk follows them (the writer
	 * made the new repositories after each commit) */
	struct buf refs = BUF_INIT;
	ops_take_refs(n->ops, &refs);
	gitrepl_changed(n->gitrepl, &refs);
	buf_free(&refs);
	if (l->was_syncing && !n->syncing)
		gitrepl_all(n->gitrepl, NULL); /* caught up: look again */
	if (l->was_syncing != n->syncing) /* the reader gates 2fa reads */
		readers_publish(n->readers, NULL, n->syncing);
	l->was_syncing = n->syncing;
}

static void job_reap(void *payload, uint64_t now)
{
	struct loop *l = payload;
	(void)now;
	reap_hooks(l->n);
}

static void job_repos_retry(void *payload, uint64_t now)
{
	struct loop *l = payload;
	(void)now;
	writer_retry_repos(l->n->writer);
}

static void job_sweep(void *payload, uint64_t now)
{
	struct loop *l = payload;
	(void)now;
	writer_sweep(l->n->writer);
}

/* status attest: the job's state and what this run of the node did */
static cJSON *attest_status(const struct loop *l)
{
	cJSON *a = cJSON_CreateObject();

	cJSON_AddStringToObject(a, "state",
	                        l->attest_state ? l->attest_state : "none");
	cJSON_AddNumberToObject(a, "made", (double)l->attest.made);
	cJSON_AddNumberToObject(a, "skipped", (double)l->attest.skipped);
	return a;
}

/* Status to the reader, metrics and systemd (READY=1 once serving: the
 * start-up sync over). */
static void job_status(void *payload, uint64_t now)
{
	struct loop *l = payload;
	struct node *n = l->n;
	int up = tick_status(n, l->status_last, attest_status(l), now);

	sdnotify_update(l->sd, &(struct sdnotify_state){n->syncing, up,
	                                                n->cfg->npeers});
}

/* One chunk of attest.h's job a turn, committed at once: requests are
 * served between chunks. */
static void job_attest(void *payload, uint64_t now)
{
	struct loop *l = payload;
	struct node *n = l->n;
	uint64_t t;
	int k;

	(void)now;
	/* not before every frontend runs a release that keeps signed
	 * operations per record: an older one would take these operations
	 * and keep none of them (push-tlog came with them, issue 21) */
	if (!l->attest_state || (strcmp(l->attest_state, "waiting") &&
	                         strcmp(l->attest_state, "running")))
		return;
	if (!repl_feature_everywhere(n->repl, FEATURE_PUSH_TLOG)) {
		l->attest_state = "waiting";
		return;
	}
	l->attest_state = "running";
	k = attest_step(&l->attest, n->ops, writer_batch(n->writer),
	                ATTEST_CHUNK);
	if (k >= 0) /* the operations, or where it stopped, or the marker */
		k = writer_commit(n->writer, &t);
	else
		writer_discard(n->writer);
	if (k < 0) {
		/* tried again at the next start: what is attested stays */
		log_error("attesting records made before signing stopped "
		          "after %llu: %s",
		          (unsigned long long)l->attest.made, gd_strerror(k));
		l->attest_state = "stopped";
	} else if (l->attest.done) {
		log_info("attested %llu records made before signing: done "
		         "(%llu that do not check left alone)",
		         (unsigned long long)l->attest.made,
		         (unsigned long long)l->attest.skipped);
		l->attest_state = "done";
	}
}

/* A frontend's store without attest.h's marker: start the job (a mirror
 * makes no operations; nor does a node under the test fault no-attest,
 * crashpoint.h). */
static void attest_start(struct loop *l)
{
	bool need = false;
	int rc;

	memset(&l->attest, 0, sizeof(l->attest));
	l->attest_state = "none";
	if (l->n->cfg->role != CONFIG_ROLE_FRONTEND || faultpoint("no-attest"))
		return;
	if ((rc = attest_needed(l->n->store, &need)) == 0 && need)
		rc = attest_init(&l->attest, l->n->store);
	if (rc < 0)
		log_error("attesting records made before signing: %s",
		          gd_strerror(rc));
	l->attest_state = rc < 0 ? "stopped" : need ? "waiting" : "done";
	if (rc < 0 || !need)
		return;
	log_info("attesting the records made before signing: this site's "
	         "as its signed operations, %d a batch, once every frontend "
	         "runs this release",
	         ATTEST_CHUNK);
}

static void job_watchdog(void *payload, uint64_t now)
{
	struct loop *l = payload;
	(void)now;
	sdnotify_tick(l->sd);
}

/* Every periodic job of the node, in the order they run (cron.h).  The
 * rows of period 0 keep their own timers (repl.h, vote.h, sdnotify.h). */
static const struct cron_job node_cron[] = {
        {"vote", 0, job_vote, 0},
        {"clock-step", 0, job_clock_step, 0}, /* crashpoint.h */
        {"repl", 0, job_repl, 0},
        {"relink", 0, job_relink, 0},
        {"syncing", 0, job_syncing, 0},
        {"reap-hooks", REAP_MS, job_reap, 0},
        {"repos-retry", REPOS_RETRY_MS, job_repos_retry, 0},
        {"grant-sweep", SWEEP_MS, job_sweep, 0},
        {"status", STATUS_MS, job_status, 0},
        {"attest", 0, job_attest, 0},
        {"watchdog", 0, job_watchdog, 0},
};

/* What the sockets say: durable tickets first (peers, readers, then
 * callers see what is durable: writer_opts), then new requests, peers'
 * messages and the gitrepl actor's. */
static void on_events(struct loop *l)
{
	struct node *n = l->n;

	if (l->items[1].revents)
		writer_synced(n->writer);
	if (l->items[0].revents)
		control_serve_batch(n->control, BATCH_MAX);
	repl_handle(n->repl);
	vote_handle(n->vote);
	if (l->items[2].revents)
		pump_gitrepl(n);
}

int loop_run(struct node *n,
             const volatile sig_atomic_t *stop,
             const volatile sig_atomic_t *reloads)
{
	struct loop l = {.n = n, .was_syncing = n->syncing};
	struct cron_job jobs[GD_ARRAY_SIZE(node_cron)];
	/* a SIGHUP since the start (the config read before it) counts */
	sig_atomic_t reloaded = 0;
	int rc = 0;

	memcpy(jobs, node_cron, sizeof(jobs));
	if (sdnotify_open(&l.sd) < 0)
		return GD_ENOMEM;
	loop_items(&l);
	attest_start(&l);
	/* every repository checked against its records once at start */
	gitrepl_all(n->gitrepl, NULL);
	log_info("node running site=%s user_socket=%s admin_socket=%s "
	         "peers=%d",
	         n->cfg->site, n->cfg->user_socket, n->cfg->admin_socket,
	         n->cfg->npeers);
	while (!*stop) {
		long wait = cron_wait_ms(jobs, GD_ARRAY_SIZE(jobs),
		                         clock_mono_ms(), LOOP_WAIT_MS);
		if (zmq_poll(l.items, l.nitems, wait) < 0) {
			if (errno == EINTR)
				continue;
			log_error("poll failed: %s", zmq_strerror(errno));
			rc = GD_EIO;
			break;
		}
		on_events(&l);
		/* SIGHUP: before the cron, whose relink row and peers' ticks
		 * make the sockets of a peer with a new key again at once */
		if (*reloads != reloaded) {
			reloaded = *reloads;
			/* (logged; the node runs on either way) */
			reload_run(n->cfg, n->peer, n->gitrepl, n->repl,
			           n->curve_pub, &n->signer);
		}
		/* intervals, never stamps: the monotonic clock */
		cron_run(jobs, GD_ARRAY_SIZE(jobs), clock_mono_ms(), &l);
		/* requests whose votes came in: handled again now */
		if (control_resumed(n->control))
			control_serve_batch(n->control, BATCH_MAX);
	}
	if (!rc)
		sdnotify_stopping(l.sd);
	sdnotify_destroy(&l.sd);
	for (int i = 0; i < 2; i++)
		cJSON_Delete(l.status_last[i]);
	attest_free(&l.attest);
	if (rc)
		return rc;
	log_info("node stopping site=%s", n->cfg->site);
	/* finish in-flight writes: answer them once they are durable */
	writer_drain(n->writer);
	return 0;
}
