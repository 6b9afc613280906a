/*
 * main.c: grantd, the node.  Wiring only: read the config, open the store,
 * start the threads, run the loop (loop.h), stop cleanly on SIGTERM/SIGINT,
 * read the config again on SIGHUP (the loop does: reload.h).
 *
 * The loop is the node's one writer thread: it waits on the requests the
 * reader thread forwards (readers.h: the reader owns the sockets and
 * answers the plain reads itself) and hands them to control_serve_batch(),
 * which answers only after one synced commit; then it runs the periodic
 * jobs, every one a row of one table with its period (cron.h).  A kill -9
 * at any moment loses nothing acknowledged: RocksDB's WAL holds every
 * committed batch.
 */
#include <errno.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <getopt.h>
#include <git2.h>
#include <signal.h>
#include <sodium.h>
#include <stdint.h>
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
#include "cron.h"
#include "crashpoint.h"
#include "err.h"
#include "gitrepl.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "node.h"
#include "otp.h"
#include "peer.h"
#include "readers.h"
#include "repl.h"
#include "repos.h"
#include "selfcheck.h"
#include "spool.h"
#include "syncer.h"
#include "vote.h"
#include "wire.h"
#include "writer.h"
#include "tlogwit.h"
#include "version.h"
#include "xalloc.h"
#include "banned.h"

static volatile sig_atomic_t stopping;
static volatile sig_atomic_t reloads; /* SIGHUPs so far (loop.h) */

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* SIGTERM, SIGINT and SIGHUP are for the main thread's loop alone (their
 * handlers set the flags it looks at every LOOP_WAIT_MS).  main blocks
 * them first thing, so that every thread made while the node starts
 * (RocksDB's, libzmq's, ours) inherits them blocked, and unblocks them in
 * the main thread as the loop starts; one that came meanwhile waits and
 * is taken then.  A signal handed to another thread can be held there:
 * under ThreadSanitizer, until that thread next calls into the library,
 * which a RocksDB thread sleeping on its timer may not do for minutes
 * (the node then ignored SIGTERM: integration/git_sites in the TSan
 * build, 2026-12-06). */
static void main_thread_signals(int how)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGHUP);
	pthread_sigmask(how, &s, NULL);
}

static void on_hup(int sig)
{
	(void)sig;
	reloads = reloads == SIG_ATOMIC_MAX ? 0 : reloads + 1;
}

/* clang-format off */
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
"  --version      print the version and exit\n"
"\n"
"Stops cleanly on SIGTERM or SIGINT; safe to kill -9 at any moment.  On\n"
"SIGHUP (systemctl reload grantd) it reads the config again and takes the\n"
"peers' new public_key values at once, without a restart (a peer's key\n"
"rotation); any other change is logged and waits for the next restart.\n"
"Under systemd (Type=notify) it sends READY=1 once it serves (the start-up\n"
"sync with its peers over), STATUS= lines and, with WatchdogSec=,\n"
"WATCHDOG=1.\n"
"Exit status: 0 stopped cleanly, 1 failed at run time, 2 bad config.\n",
		CONFIG_DEFAULT_PATH);
}
/* clang-format on */

/* The node holds its key and opened secrets in memory: no core dump of
 * it, no ptrace or /proc/PID/mem by other processes of its user. */
static int no_core_dumps(void)
{
	struct rlimit zero = {0, 0};

	if (setrlimit(RLIMIT_CORE, &zero) < 0 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return GD_EIO;
	return 0;
}

/* Read the node's CURVE key pair, and derive from its secret the sealing
 * key for secrets at rest (so the key file is the one secret an operator
 * keeps off the data disk). */
static int
load_keys(struct node *n, uint8_t seal[STORE_SEAL_KEY_LEN], struct buf *err)
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
		buf_printf(err,
		           "%s: the public and secret keys do not belong "
		           "together (make a new pair with grantctl keygen)",
		           keyfile);
		rc = GD_EINVAL;
	} else {
		char name[NOTE_NAME_MAX + 1];
		store_seal_key(seal, raw);
		if (opsig_key_name(name, n->cfg->host, n->cfg->site) < 0 ||
		    opsig_signer_init(&n->signer, raw, name) < 0) {
			buf_printf(err, "cannot make the signing key name "
			           "from [node] host and site");
			rc = GD_EINVAL;
		}
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
	k = snprintf(n->hook_path, sizeof(n->hook_path), "%s/grant-hook", self);
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
		n->hook_pids = xreallocarray(n->hook_pids, n->nhook_pids + 1,
		                             sizeof(*n->hook_pids));
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

	if (!n->cfg->gitolite_home) /* deleted ones first: a rename's */
		repos_follow_deleted(n->store, n->cfg->repo_dir, n->hook);
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
			if (spool_exists(path.p))
				flush_spool(n, path.p);
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
	const char *paths[] = {cfg->user_socket, cfg->admin_socket,
	                       cfg->keys_socket};
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

/* ---- set-up ------------------------------------------------------------ */

/* Batches now durable (writer_opts.durable_fn; repl and the reader open
 * after the writer, so through the node), before the replies they cover:
 * their operations go to the peers, the newest view to the reader thread
 * with the syncing flag of the moment and the counters status shows, and
 * the latency samples of peers' operations in them close. */
static void give_durable(const struct writer_durable *d, void *payload)
{
	struct node *n = payload;
	struct store_batch *view = d->view;

	if (n->repl && d->ops->len)
		repl_publish(d->ops, n->repl);
	if (view && n->readers) {
		readers_publish_status(
		        n->readers,
		        cmd_status_store(n->ops,
		                         (int64_t)(clock_wall_ms() / 1000)),
		        NULL);
		readers_publish(n->readers, view, n->syncing);
	} else {
		store_batch_free(&view);
	}
	if (n->repl)
		repl_synced(n->repl, d->ticket);
}

/* The reader thread, with a first view of the committed state. */
static int start_readers(struct node *n)
{
	struct store_batch *view;
	struct readers_opts ro = {
	        .cfg = n->cfg,
	        .store = n->store,
	        .host = n->host,
	        .zctx = n->zctx,
	        .syncing = n->syncing,
	        .counts = &n->counts,
	};

	store_view_new(&view, n->store);
	ro.view = view;
	ro.status_store =
	        cmd_status_store(n->ops, (int64_t)(clock_wall_ms() / 1000));
	ro.status_repl = cmd_status_repl(n->repl, n->gitrepl, clock_mono_ms());
	cJSON_AddItemToObject(ro.status_repl, "quorum", vote_status(n->vote));
	return readers_start(&n->readers, &ro);
}

/* The command line. */
struct args {
	const char *path;
	bool test, use_syslog, verbose;
};

/* Read the command line into a.  Returns -1 to go on, else the exit
 * status (help, or a bad argument). */
static int parse_args(struct args *a, int argc, char **argv)
{
	static const struct option longopts[] = {
	        {"config", required_argument, NULL, 'c'},
	        {"test", no_argument, NULL, 't'},
	        {"syslog", no_argument, NULL, 's'},
	        {"verbose", no_argument, NULL, 'v'},
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "c:tvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			a->path = optarg;
			break;
		case 't':
			a->test = true;
			break;
		case 's':
			a->use_syslog = true;
			break;
		case 'v':
			a->verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("grantd %s\n", GRANTD_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "grantd: unexpected argument '%s'\n",
		        argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!a->path)
		a->path = config_default_path();
	return -1;
}

/* Load and check the config and the key pair (the sealing key into key).
 * Returns -1 to go on, else the exit status: 0 after -t, 1 or 2. */
static int load_config(struct node *n,
                       const struct args *a,
                       uint8_t key[STORE_SEAL_KEY_LEN])
{
	struct buf err = BUF_INIT;
	int status = 2;

	if (config_load(&n->cfg, a->path, &err) < 0) {
		fprintf(stderr, "grantd: %s\n", err.p);
	} else if (!n->cfg->secret_key) {
		fprintf(stderr,
		        "grantd: %s: missing 'secret_key' in [node] "
		        "(make one with: grantctl keygen FILE)\n",
		        a->path);
		status = 1;
	} else if (load_keys(n, key, &err) < 0) {
		fprintf(stderr, "grantd: %s:%d: secret_key: %s\n", a->path,
		        n->cfg->secret_key_line, err.p);
	} else if (config_check_own_key(n->cfg, n->curve_pub, &err) < 0 ||
	           opsig_config_keys(&n->verifier, n->cfg, &n->signer, &err) <
	                   0) {
		fprintf(stderr, "grantd: %s\n", err.p);
	} else if (a->test) {
		if (n->cfg->metrics && metrics_listen_public(n->cfg->metrics))
			fprintf(stderr,
			        "grantd: %s: warning: metrics = %s is "
			        "not a loopback address: the endpoint has no "
			        "authentication (bind it to 127.0.0.1, or "
			        "filter the port)\n",
			        a->path, n->cfg->metrics);
		status = selfcheck_run(n->cfg, stderr) < 0 ? 2 : 0;
		if (!status)
			printf("configuration ok: %s\n", a->path);
	} else if (selfcheck_root(n->cfg, stderr) == 0) {
		status = -1;
	}
	buf_free(&err);
	return status;
}

/* Logging, the libraries, signals, the host name.  *git_up once libgit2
 * is initialised (to shut it down).  Returns 0 or GD_EINVAL (logged). */
static int set_up_process(struct node *n, const struct args *a, bool *git_up)
{
	enum log_level lvl = a->verbose ? LOG_LVL_DEBUG : LOG_LVL_INFO;
	const char *l = n->cfg->log_level;

	if (l && !a->verbose)
		lvl = !strcmp(l, "error")   ? LOG_LVL_ERROR
		      : !strcmp(l, "warn")  ? LOG_LVL_WARN
		      : !strcmp(l, "debug") ? LOG_LVL_DEBUG
		                            : LOG_LVL_INFO;
	log_init("grantd", a->use_syslog, lvl);
	if (sodium_init() < 0 || otp_init() < 0) {
		log_error("crypto libraries failed to initialise");
		return GD_EINVAL;
	}
	git_libgit2_init();
	*git_up = true;
	if (repos_git_isolate() < 0) {
		log_error("cannot keep git from reading the service account's "
		          "configuration");
		return GD_EINVAL;
	}
	crashpoint_init();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_hup);
	/* the name users ssh to, in every hint and otpauth URI */
	if (n->cfg->host)
		snprintf(n->host, sizeof(n->host), "%s", n->cfg->host);
	else if (gethostname(n->host, sizeof(n->host) - 1) < 0)
		snprintf(n->host, sizeof(n->host), "%s", "HOST");
	n->started_ms = clock_mono_ms();
	return 0;
}

/* A peer without verifier_key has its operations taken unchecked: say
 * so once at start, with the line to add. */
static void unchecked_peers(const struct node *n)
{
	for (int i = 0; i < n->cfg->npeers; i++)
		if (!n->cfg->peers[i].verifier_key)
			log_warn("peer %s has no verifier_key: its operations "
			         "are taken without checking their signature "
			         "(add to [peer %s] the line 'grantctl log "
			         "key' prints at %s)",
			         n->cfg->peers[i].site, n->cfg->peers[i].site,
			         n->cfg->peers[i].site);
}

/* The store, the node's state and the commit pipeline (syncer, writer).
 * key is wiped once the store has it. */
static int open_state(struct node *n,
                      const char *cfg_path,
                      uint8_t key[STORE_SEAL_KEY_LEN],
                      bool *created)
{
	int rc;

	if ((rc = make_dirs(n->cfg)) < 0 ||
	    (rc = store_open(&n->store, created, n->cfg->data_dir, key)) < 0)
		return rc;
	sodium_memzero(key, STORE_SEAL_KEY_LEN);
	if ((rc = ops_open(&n->ops, n->store, n->cfg, *created)) < 0) {
		log_error("cannot load node state: %s", gd_strerror(rc));
		return rc;
	}
	ops_set_signer(n->ops, &n->signer);
	unchecked_peers(n);
	if ((rc = hook_command(n, cfg_path)) < 0) {
		log_error("cannot name the post-receive hook (paths with a "
		          "quote?)");
		return rc;
	}
	n->zctx = zmq_ctx_new();
	metrics_counts_init(&n->counts);
	if ((rc = syncer_start(&n->syncer, n->store, n->zctx, &n->counts)) < 0)
		return rc;
	return writer_open(
	        &n->writer,
	        &(struct writer_opts){.store = n->store,
	                              .ops = n->ops,
	                              .syncer = n->syncer,
	                              .repo_dir = n->cfg->repo_dir,
	                              .hook = n->cfg->gitolite_home ? NULL
	                                                            : n->hook,
	                              .gitolite = n->cfg->gitolite_home != NULL,
	                              .durable_fn = give_durable,
	                              .durable_payload = n});
}

/* The link to peers, replication, the token quorum, and the gitrepl actor
 * (pack requests on the sync ROUTER go to it).  self is filled here and
 * lent to them: it must outlive them. */
static int open_peers(struct node *n, struct peer_self *self, bool created)
{
	int rc;

	*self = (struct peer_self){n->zctx, n->cfg->site, n->curve_pub,
	                           n->curve_sec};
	if ((rc = peer_open(&n->peer,
	                    &(struct peer_link_opts){.self = self,
	                                             .peers = n->cfg->peers,
	                                             .npeers = n->cfg->npeers,
	                                             .sync = n->cfg->sync,
	                                             .maxmsg = 64 * 1024})) <
	            0 ||
	    (rc = repl_open(&n->repl,
	                    &(struct repl_opts){
	                            .ops = n->ops,
	                            .store = n->store,
	                            .cfg = n->cfg,
	                            .self = self,
	                            .link = n->peer,
	                            .writer = n->writer,
	                            .verifier = &n->verifier,
	                            .signer = &n->signer,
	                            .latency_hist = &n->counts.repl_latency})) <
	            0)
		return rc;
	n->syncing = repl_syncing(n->repl);
	if ((rc = vote_open(&n->vote,
	                    &(struct vote_opts){.cfg = n->cfg,
	                                        .store = n->store,
	                                        .writer = n->writer,
	                                        .self = self,
	                                        .link = n->peer,
	                                        .data_dir = n->cfg->data_dir,
	                                        .created = created})) < 0 ||
	    (rc = gitrepl_start(
	             &n->gitrepl,
	             &(struct gitrepl_opts){
	                     .self = self,
	                     .peers = n->cfg->peers,
	                     .npeers = n->cfg->npeers,
	                     .repo_dir = n->cfg->repo_dir,
	                     .store = n->store,
	                     .hook_path = n->hook_path,
	                     .conf_path = n->conf_path,
	                     .gitolite_home = n->cfg->gitolite_home,
	                     .gitolite_program = n->cfg->gitolite_program,
	                     .fetch_hist = &n->counts.fetch})) < 0)
		return rc;
	if ((rc = peer_on(n->peer, GRANTD__V1__PEER_MSG__BODY_PACK_REQ,
	                  gitrepl_serve, n->gitrepl)) < 0 ||
	    (rc = peer_on(n->peer, GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT,
	                  gitrepl_serve, n->gitrepl)) < 0 ||
	    (rc = peer_on(n->peer, GRANTD__V1__PEER_MSG__BODY_PACK_ERR,
	                  gitrepl_serve, n->gitrepl)) < 0)
		return rc;
	return 0;
}

/* The reader thread and its sockets, the writer's side of requests, the
 * metrics endpoint and the push log's. */
static int open_front(struct node *n)
{
	int rc;

	if ((rc = start_readers(n)) < 0 ||
	    (rc = control_open(&n->control, n, readers_pipe(n->readers))) < 0)
		return rc;
	if (n->cfg->metrics &&
	    (rc = metrics_start(
	             &n->metrics,
	             &(struct metrics_opts){.listen = n->cfg->metrics,
	                                    .data_dir = n->cfg->data_dir,
	                                    .counts = &n->counts,
	                                    .syncing = n->syncing})) < 0)
		return rc;
	if (n->cfg->log_http) {
		tlogwit_source(&n->logsrc, n->store);
		if ((rc = loghttp_start(&n->loghttp, n->cfg->log_http,
		                        &n->logsrc)) < 0)
			return rc;
	}
	return 0;
}

/* Everything n holds, in the reverse order of its opening; each part may
 * be missing (a start that failed half-way). */
static void close_node(struct node *n, bool git_up)
{
	loghttp_stop(&n->loghttp);
	metrics_stop(&n->metrics);
	/* parked requests end with their votes, before control goes */
	vote_destroy(&n->vote);
	control_destroy(&n->control);
	/* after the drain: the answers it sent go out before the reader
	 * stops */
	readers_stop(&n->readers);
	gitrepl_stop(&n->gitrepl);
	repl_destroy(&n->repl);
	peer_close(&n->peer);
	writer_destroy(&n->writer);
	syncer_destroy(&n->syncer);
	if (n->zctx)
		zmq_ctx_term(n->zctx);
	store_destroy(&n->store);
	if (git_up)
		git_libgit2_shutdown();
	sodium_memzero(n->curve_sec, sizeof(n->curve_sec));
	opsig_signer_wipe(&n->signer);
	ops_destroy(&n->ops);
	free(n->hook_pids);
	config_free(&n->cfg);
}

int main(int argc, char **argv)
{
	struct args a = {0};
	struct node n = {0};
	struct peer_self self;
	uint8_t key[STORE_SEAL_KEY_LEN];
	bool created = false, git_up = false;
	int status;

	main_thread_signals(SIG_BLOCK);
	if ((status = parse_args(&a, argc, argv)) >= 0)
		return status;
	if (no_core_dumps() < 0) {
		fprintf(stderr, "grantd: cannot disable core dumps: %s\n",
		        strerror(errno));
		return 1;
	}
	if ((status = load_config(&n, &a, key)) < 0) {
		int rc = 0;
		status = 1;
		if (set_up_process(&n, &a, &git_up) == 0 &&
		    (rc = open_state(&n, a.path, key, &created)) == 0 &&
		    open_peers(&n, &self, created) == 0 &&
		    open_front(&n) == 0) {
			startup_repos(&n);
			main_thread_signals(SIG_UNBLOCK);
			status = loop_run(&n, &stopping, &reloads) < 0 ? 1 : 0;
		}
		if (rc == GD_EPROTO) /* a store of a newer release */
			status = 2;
	}
	close_node(&n, git_up);
	sodium_memzero(key, sizeof(key));
	return status;
}
