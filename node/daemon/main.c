/*
 * main.c: grantd, the node.  Wiring only: read the config, open the store,
 * start the threads, run the loop, stop cleanly on SIGTERM/SIGINT.
 *
 * The loop is the node's one writer thread: it waits on the requests the
 * reader thread forwards (readers.h: the reader owns the sockets and
 * answers the plain reads itself) and hands them to control_serve_batch(),
 * which answers only after one synced commit.  A kill -9 at any moment loses
 * nothing acknowledged: RocksDB's WAL holds every committed batch.
 */
#include <errno.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <getopt.h>
#include <git2.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "cmd.h"
#include "config.h"
#include "control.h"
#include "crashpoint.h"
#include "err.h"
#include "gitrepl.h"
#include "log.h"
#include "metrics.h"
#include "node.h"
#include "otp.h"
#include "peer.h"
#include "readers.h"
#include "repl.h"
#include "repos.h"
#include "sdnotify.h"
#include "selfcheck.h"
#include "syncer.h"
#include "vote.h"
#include "wire.h"
#include "writer.h"
#include "banned.h"

#define BATCH_MAX 512

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: grantd [--config FILE] [-t] [--syslog] [-v]\n"
"\n"
"Run a grantd node in the foreground: validate 2FA tokens for the git\n"
"frontends of this site, keep users, enrollments, grants and token-use\n"
"marks in RocksDB, replicate them to the [peer] sites over CurveZMQ, and\n"
"answer grant-shell, grant-keys and grantctl on the user and admin sockets\n"
"named in the config.\n"
"\n"
"  --config FILE  configuration (default $GRANTD_CONFIG, then %s)\n"
"  -t, --test     check the configuration and key file, then exit\n"
"  --syslog       log to syslog instead of stderr\n"
"  -v, --verbose  log debug lines too\n"
"  -h, --help     this text\n"
"\n"
"Stops cleanly on SIGTERM or SIGINT; safe to kill -9 at any moment.  Under\n"
"systemd (Type=notify) it sends READY=1 once it serves (the start-up sync\n"
"with its peers over), STATUS= lines and, with WatchdogSec=, WATCHDOG=1.\n"
"Exit status: 0 stopped cleanly, 1 failed at run time, 2 bad config.\n",
		CONFIG_DEFAULT_PATH);
}

/* The node holds its key and opened secrets in memory: no core dump of
 * it, no ptrace or /proc/PID/mem by other processes of its user. */
static int no_core_dumps(void)
{
	struct rlimit zero = { 0, 0 };

	if (setrlimit(RLIMIT_CORE, &zero) < 0 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return GD_EIO;
	return 0;
}

/* Read the node's CURVE key pair, and derive from its secret the sealing
 * key for secrets at rest (so the key file is the one secret an operator
 * keeps off the data disk). */
static int load_keys(struct node *n, uint8_t seal[STORE_SEAL_KEY_LEN],
		     struct buf *err)
{
	const char *keyfile = n->cfg->secret_key;
	char derived[Z85_KEY_LEN + 1];
	uint8_t raw[32];
	int rc = config_read_keyfile(keyfile, n->curve_pub, n->curve_sec, err);

	if (rc < 0)
		return rc;
	if (!zmq_z85_decode(raw, n->curve_sec) ||
	    zmq_curve_public(derived, n->curve_sec) != 0 ||
	    strcmp(derived, n->curve_pub)) {
		buf_printf(err, "%s: the public and secret keys do not belong "
			   "together (make a new pair with grantctl keygen)",
			   keyfile);
		rc = GD_EINVAL;
	} else {
		store_seal_key(seal, raw);
	}
	sodium_memzero(raw, sizeof(raw));
	return rc;
}

/* The post-receive hook every hosted repository runs: grant-hook from
 * beside this program, with this node's config (absolute paths). */
static int hook_command(struct node *n, const char *cfg_path)
{
	char self[PATH_MAX], conf[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (k <= 0 || !realpath(cfg_path, conf) ||
	    strlen(conf) >= sizeof(n->conf_path))
		return GD_EIO;
	snprintf(n->conf_path, sizeof(n->conf_path), "%s", conf);
	self[k] = '\0';
	if (!(slash = strrchr(self, '/')))
		return GD_EIO;
	*slash = '\0';
	k = snprintf(n->hook_path, sizeof(n->hook_path), "%s/grant-hook",
		     self);
	if (k < 0 || (size_t)k >= sizeof(n->hook_path))
		return GD_EIO;
	if (strchr(n->hook_path, '\'') || strchr(conf, '\''))
		return GD_EINVAL;
	snprintf(n->hook, sizeof(n->hook), "exec '%s' --config '%s'",
		 n->hook_path, conf);
	return 0;
}

/* Run grant-hook (stdin empty) in a repository whose earlier hooks could
 * not reach the node: it sends what they kept. */
static void flush_spool(struct node *n, const char *dir)
{
	pid_t pid = repos_run_hook(n->hook_path, n->conf_path, dir);
	if (pid > 0) {
		pid_t *p = realloc(n->hook_pids,
				   (n->nhook_pids + 1) * sizeof(*p));
		if (!p)
			abort();
		n->hook_pids = p;
		n->hook_pids[n->nhook_pids++] = pid;
	}
}

/* Every hosted repository gets the current hook, and sends what its
 * hooks kept while the node was away.  Beside gitolite the node writes no
 * hook (gitolite links its LOCAL_CODE post-receive) and makes no
 * repository: it only settles those gitolite made (repos_adopt). */
static void startup_repos(struct node *n)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, path = BUF_INIT;
	const char *key;
	size_t klen;
	struct stat st;

	store_iter_new(&it, n->store, NULL, CF_REPOS, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0) {
		Grantd__V1__Repo *r = grantd__v1__repo__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		if (r && !r->deleted) {
			/* made if an earlier attempt failed, hook refreshed */
			if (n->cfg->gitolite_home)
				repos_adopt(n->cfg->repo_dir, r->name,
					    r->fork_of, NULL);
			else
				repos_create(n->cfg->repo_dir, r->name,
					     r->fork_of, n->hook);
			repos_path(&path, n->cfg->repo_dir, r->name);
			buf_puts(&path, "/grantd-spool");
			if (stat(path.p, &st) == 0) {
				path.len -= strlen("/grantd-spool");
				path.p[path.len] = '\0';
				flush_spool(n, path.p);
			}
		}
		if (r)
			grantd__v1__repo__free_unpacked(r, NULL);
	}
	store_iter_free(&it);
	buf_free(&v);
	buf_free(&path);
}

static int make_dirs(const struct config *cfg)
{
	const char *paths[] = { cfg->user_socket, cfg->admin_socket,
				cfg->keys_socket };
	if (mkdir(cfg->repo_dir, 0755) < 0 && errno != EEXIST) {
		log_error("cannot create repo_dir=%s: %s", cfg->repo_dir,
			  strerror(errno));
		return GD_EIO;
	}
	for (size_t i = 0; i < GD_ARRAY_SIZE(paths); i++) {
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s", paths[i]);
		char *slash = strrchr(dir, '/');
		if (slash && slash != dir) {
			*slash = '\0';
			if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
				log_error("cannot create socket dir=%s: %s",
					  dir, strerror(errno));
				return GD_EIO;
			}
		}
	}
	return 0;
}

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

/* Every STATUS_MS at most, the parts of status that changed go to the
 * reader (readers_publish_status); last[] are the writer's copies of
 * what it last sent, to compare with.  Returns the peers connected now
 * (for systemd's STATUS=). */
#define STATUS_MS 100

static int tick_status(struct node *n, cJSON *last[2], uint64_t now_ms)
{
	cJSON *part[2] = {
		cmd_status_store(&n->ops, (int64_t)(clock_wall_ms() / 1000)),
		cmd_status_repl(n->repl, n->gitrepl, now_ms),
	};
	cJSON *give[2] = { NULL, NULL };
	const cJSON *p;
	int up = 0;

	cJSON_AddItemToObject(part[1], "quorum", vote_status(n->vote));
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(part[1], "peers"))
		up += cJSON_IsTrue(cJSON_GetObjectItem(p, "connected"));
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

static int run(struct node *n)
{
	cJSON *status_last[2] = { NULL, NULL };
	uint64_t status_at = 0;
	zmq_pollitem_t items[3 + 2 + 3 * CONFIG_MAX_PEERS];
	bool was_syncing = n->syncing;
	struct sdnotify *sd;
	int nitems;

	if (sdnotify_open(&sd) < 0)
		return GD_ENOMEM;

	items[0] = (zmq_pollitem_t){ control_socket(n->control), 0,
				     ZMQ_POLLIN, 0 };
	items[1] = (zmq_pollitem_t){ writer_socket(n->writer), 0, ZMQ_POLLIN,
				     0 };
	items[2] = (zmq_pollitem_t){ gitrepl_socket(n->gitrepl), 0,
				     ZMQ_POLLIN, 0 };
	nitems = 3 + repl_pollitems(n->repl, items + 3,
				    (int)GD_ARRAY_SIZE(items) - 3);
	nitems += vote_pollitems(n->vote, items + nitems,
				 (int)GD_ARRAY_SIZE(items) - nitems);
	/* every repository checked against its records once at start */
	gitrepl_all(n->gitrepl, NULL);
	log_info("node running site=%s user_socket=%s admin_socket=%s "
		 "peers=%d", n->cfg->site, n->cfg->user_socket,
		 n->cfg->admin_socket, n->cfg->npeers);
	while (!stopping) {
		int rc = zmq_poll(items, nitems, 50);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			log_error("poll failed: %s", zmq_strerror(errno));
			sdnotify_destroy(&sd);
			return GD_EIO;
		}
		if (items[1].revents) {
			/* peers, readers, then callers see what is durable */
			uint64_t t = writer_synced(n->writer, repl_publish,
						   n->repl);
			repl_synced(n->repl, t);
		}
		if (items[0].revents)
			control_serve_batch(n->control, BATCH_MAX);
		repl_handle(n->repl);
		vote_handle(n->vote);
		vote_tick(n->vote, clock_mono_ms());
		/* requests whose votes came in: handled again now */
		if (control_resumed(n->control))
			control_serve_batch(n->control, BATCH_MAX);
		if (items[2].revents)
			pump_gitrepl(n);
		crashpoint_clock();
		uint64_t now = clock_mono_ms(); /* intervals, never stamps */
		repl_tick(n->repl, now);
		/* their sockets changed (both asked: each clears its flag) */
		bool relinked = repl_relinked(n->repl);
		if (vote_relinked(n->vote))
			relinked = true;
		if (relinked) {
			nitems = 3 + repl_pollitems(n->repl, items + 3,
						    (int)GD_ARRAY_SIZE(items) -
							    3);
			nitems += vote_pollitems(n->vote, items + nitems,
						 (int)GD_ARRAY_SIZE(items) -
							 nitems);
		}
		n->syncing = repl_syncing(n->repl);
		/* refs whose records changed: the disk follows them (the
		 * writer made the new repositories after each commit) */
		gitrepl_changed(n->gitrepl, &n->ops.refs_touched);
		if (was_syncing && !n->syncing)
			gitrepl_all(n->gitrepl, NULL); /* caught up: look again */
		if (was_syncing != n->syncing) /* the reader gates 2fa reads */
			readers_publish(n->readers, NULL, n->syncing);
		was_syncing = n->syncing;
		reap_hooks(n);
		writer_tick(n->writer, now);
		if (now - status_at >= STATUS_MS) {
			/* READY=1 once serving (the start-up sync over) */
			sdnotify_update(sd, &(struct sdnotify_state){
				n->syncing, tick_status(n, status_last, now),
				n->cfg->npeers });
			status_at = now;
		}
		sdnotify_tick(sd);
	}
	sdnotify_stopping(sd);
	sdnotify_destroy(&sd);
	for (int i = 0; i < 2; i++)
		cJSON_Delete(status_last[i]);
	log_info("node stopping site=%s", n->cfg->site);
	/* finish in-flight writes: answer them once they are durable */
	writer_drain(n->writer, repl_publish, n->repl);
	return 0;
}

/* A durable view goes to the reader thread, with the syncing flag of the
 * moment and the counters status shows, before the replies it covers
 * (writer_opts.view_fn). */
static void give_view(struct store_batch *view, void *payload)
{
	struct node *n = payload;

	if (n->readers) {
		readers_publish_status(n->readers, cmd_status_store(
			&n->ops, (int64_t)(clock_wall_ms() / 1000)), NULL);
		readers_publish(n->readers, view, n->syncing);
	} else {
		store_batch_free(&view);
	}
}

/* The reader thread, with a first view of the committed state. */
static int start_readers(struct node *n)
{
	struct store_batch *view;
	struct readers_opts ro = {
		.cfg = n->cfg, .store = n->store, .host = n->host,
		.zctx = n->zctx, .syncing = n->syncing, .counts = &n->counts,
	};

	store_view_new(&view, n->store);
	ro.view = view;
	ro.status_store = cmd_status_store(&n->ops,
					   (int64_t)(clock_wall_ms() / 1000));
	ro.status_repl = cmd_status_repl(n->repl, n->gitrepl, clock_mono_ms());
	cJSON_AddItemToObject(ro.status_repl, "quorum", vote_status(n->vote));
	return readers_start(&n->readers, &ro);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "test", no_argument, NULL, 't' },
		{ "syslog", no_argument, NULL, 's' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	bool test = false, use_syslog = false, verbose = false;
	struct node n = { 0 };
	struct peer_self self;
	struct buf err = BUF_INIT;
	uint8_t key[STORE_SEAL_KEY_LEN];
	bool created = false;
	int opt, rc, status = 1;

	while ((opt = getopt_long(argc, argv, "c:tvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 't': test = true; break;
		case 's': use_syslog = true; break;
		case 'v': verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "grantd: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	if (no_core_dumps() < 0) {
		fprintf(stderr, "grantd: cannot disable core dumps: %s\n",
			strerror(errno));
		return 1;
	}
	if (!path)
		path = config_default_path();
	if (config_load(&n.cfg, path, &err) < 0) {
		fprintf(stderr, "grantd: %s\n", err.p);
		buf_free(&err);
		return 2;
	}
	if (!n.cfg->secret_key) {
		fprintf(stderr, "grantd: %s: missing 'secret_key' in [node] "
			"(make one with: grantctl keygen FILE)\n", path);
		goto out_cfg;
	}
	if (load_keys(&n, key, &err) < 0) {
		fprintf(stderr, "grantd: %s:%d: secret_key: %s\n", path,
			n.cfg->secret_key_line, err.p);
		status = 2;
		goto out_cfg;
	}
	if (config_check_own_key(n.cfg, n.curve_pub, &err) < 0) {
		fprintf(stderr, "grantd: %s\n", err.p);
		status = 2;
		goto out_cfg;
	}
	if (test) {
		if (n.cfg->metrics && metrics_listen_public(n.cfg->metrics))
			fprintf(stderr, "grantd: %s: warning: metrics = %s is "
				"not a loopback address: the endpoint has no "
				"authentication (bind it to 127.0.0.1, or "
				"filter the port)\n", path, n.cfg->metrics);
		status = selfcheck_run(n.cfg, stderr) < 0 ? 2 : 0;
		if (!status)
			printf("configuration ok: %s\n", path);
		goto out_cfg;
	}
	if (selfcheck_root(n.cfg, stderr) < 0) {
		status = 2;
		goto out_cfg;
	}
	{
		enum log_level lvl = verbose ? LOG_LVL_DEBUG : LOG_LVL_INFO;
		const char *l = n.cfg->log_level;
		if (l && !verbose)
			lvl = !strcmp(l, "error") ? LOG_LVL_ERROR :
			      !strcmp(l, "warn")  ? LOG_LVL_WARN :
			      !strcmp(l, "debug") ? LOG_LVL_DEBUG :
						    LOG_LVL_INFO;
		log_init("grantd", use_syslog, lvl);
	}
	if (sodium_init() < 0 || otp_init() < 0) {
		log_error("crypto libraries failed to initialise");
		goto out_cfg;
	}
	git_libgit2_init();
	if (repos_git_isolate() < 0) {
		log_error("cannot keep git from reading the service account's "
			  "configuration");
		goto out_git;
	}
	crashpoint_init();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	/* the name users ssh to, in every hint and otpauth URI */
	if (n.cfg->host)
		snprintf(n.host, sizeof(n.host), "%s", n.cfg->host);
	else if (gethostname(n.host, sizeof(n.host) - 1) < 0)
		snprintf(n.host, sizeof(n.host), "%s", "HOST");
	n.started_ms = clock_mono_ms();
	if (make_dirs(n.cfg) < 0)
		goto out_git;
	if ((rc = store_open(&n.store, &created, n.cfg->data_dir, key)) < 0)
		goto out_git;
	sodium_memzero(key, sizeof(key));
	if ((rc = ops_open(&n.ops, n.store, n.cfg, created)) < 0) {
		log_error("cannot load node state: %s", gd_strerror(rc));
		goto out_store;
	}
	if (hook_command(&n, path) < 0) {
		log_error("cannot name the post-receive hook (paths with a "
			  "quote?)");
		goto out_store;
	}
	n.zctx = zmq_ctx_new();
	self = (struct peer_self){ n.zctx, n.cfg->site, n.curve_pub,
				   n.curve_sec };
	metrics_counts_init(&n.counts);
	if ((rc = syncer_start(&n.syncer, n.store, n.zctx, &n.counts)) < 0)
		goto out_zmq;
	{
		struct writer_opts wo = {
			.store = n.store, .ops = &n.ops, .syncer = n.syncer,
			.repo_dir = n.cfg->repo_dir,
			.hook = n.cfg->gitolite_home ? NULL : n.hook,
			.gitolite = n.cfg->gitolite_home != NULL,
			.view_fn = give_view, .view_payload = &n,
		};
		if ((rc = writer_open(&n.writer, &wo)) < 0)
			goto out_syncer;
	}
	if ((rc = peer_open(&n.peer, &(struct peer_link_opts){
			.self = &self, .peers = n.cfg->peers,
			.npeers = n.cfg->npeers, .sync = n.cfg->sync,
			.maxmsg = 64 * 1024, .dropped = &n.ops.dropped })) < 0)
		goto out_writer;
	if ((rc = repl_open(&n.repl, &(struct repl_opts){
			.ops = &n.ops, .store = n.store, .cfg = n.cfg,
			.self = &self, .link = n.peer, .writer = n.writer,
			.latency_hist = &n.counts.repl_latency })) < 0)
		goto out_peer;
	n.syncing = repl_syncing(n.repl);
	if ((rc = vote_open(&n.vote, &(struct vote_opts){
			.cfg = n.cfg, .store = n.store, .writer = n.writer,
			.self = &self, .link = n.peer,
			.data_dir = n.cfg->data_dir, .created = created })) < 0)
		goto out_repl;
	if ((rc = gitrepl_start(&n.gitrepl, &(struct gitrepl_opts){
			.self = &self, .peers = n.cfg->peers,
			.npeers = n.cfg->npeers, .repo_dir = n.cfg->repo_dir,
			.store = n.store, .hook_path = n.hook_path,
			.conf_path = n.conf_path,
			.gitolite_home = n.cfg->gitolite_home,
			.gitolite_program = n.cfg->gitolite_program,
			.fetch_hist = &n.counts.fetch })) < 0)
		goto out_repl;
	/* pack requests on the sync ROUTER go to the actor */
	if (peer_on(n.peer, GRANTD__V1__PEER_MSG__BODY_PACK_REQ,
		    gitrepl_serve, n.gitrepl) < 0 ||
	    peer_on(n.peer, GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT,
		    gitrepl_serve, n.gitrepl) < 0 ||
	    peer_on(n.peer, GRANTD__V1__PEER_MSG__BODY_PACK_ERR,
		    gitrepl_serve, n.gitrepl) < 0)
		goto out_gitrepl;
	if ((rc = start_readers(&n)) < 0)
		goto out_gitrepl;
	if ((rc = control_open(&n.control, &n, readers_pipe(n.readers))) < 0)
		goto out_readers;
	if (n.cfg->metrics &&
	    (rc = metrics_start(&n.metrics, &(struct metrics_opts){
			.listen = n.cfg->metrics, .data_dir = n.cfg->data_dir,
			.counts = &n.counts, .syncing = n.syncing })) < 0)
		goto out_control;
	startup_repos(&n);
	status = run(&n) < 0 ? 1 : 0;
	metrics_stop(&n.metrics);
out_control:
	/* parked requests end with their votes, before control goes */
	vote_destroy(&n.vote);
	control_destroy(&n.control);
out_readers:
	/* after the drain: the answers it sent go out before the reader
	 * stops */
	readers_stop(&n.readers);
out_gitrepl:
	gitrepl_stop(&n.gitrepl);
out_repl:
	vote_destroy(&n.vote);
	repl_destroy(&n.repl);
out_peer:
	peer_close(&n.peer);
out_writer:
	writer_destroy(&n.writer);
out_syncer:
	syncer_destroy(&n.syncer);
out_zmq:
	zmq_ctx_term(n.zctx);
out_store:
	store_destroy(&n.store);
out_git:
	git_libgit2_shutdown();
out_cfg:
	sodium_memzero(key, sizeof(key));
	sodium_memzero(n.curve_sec, sizeof(n.curve_sec));
	ops_close(&n.ops);
	free(n.hook_pids);
	config_free(&n.cfg);
	buf_free(&err);
	return status;
}
