/*
 * gitrepl_int.h: what the files of repository replication share, and
 * nobody else.  One actor thread runs all of it (gitrepl.h):
 *
 *   gitrepl.c    the actor: its pair with the writer, the items (refs to
 *                bring in line with their records), reconcile, losers
 *   packfetch.c  the one fetch in flight: ask a peer, give credit, chunks
 *                into git index-pack (libgit2's indexer for a small
 *                pack) in a quarantine, check, commit
 *   packsrv.c    packs served to peers: pack-objects streams, credit,
 *                keep-alives
 *   gitproc.c    git child processes, the connectivity check and the
 *                index-pack a fetch feeds (what git keeps in
 *                run-command.c, connected.c and fetch-pack.c)
 *
 * Everything in struct gitrepl belongs to the actor, except what the
 * "writer" part names: the writer thread's end of the pair and the last
 * copy of the counters the actor sent it.
 */
#ifndef GD_GITREPL_INT_H
#define GD_GITREPL_INT_H

#include <git2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <zmq.h>

#include "buf.h"
#include "config.h"
#include "gitrepl.h"
#include "linkmon.h"
#include "grantd.pb-c.h"
#include "names.h"
#include "peer.h"
#include "store.h"

#define CHUNK_MAX (256 * 1024)      /* pack bytes per PackChunk */
#define WINDOW 8                    /* chunks a fetch lets ahead */
#define CREDIT_MAX 64               /* most a server lets itself be owed */
#define STREAMS_MAX 8               /* packs served at once */
#define STREAMS_PER_PEER 3          /* ... to one peer */
#define KEEPALIVE_MS 3000           /* an empty chunk while git is busy */
#define WANTS_MAX 256
#define HAVES_MAX 512
#define FETCH_IDLE_MS 10000         /* silent this long: ask the next peer */
#define SERVE_IDLE_MS 30000         /* no credit this long: stream dropped */
#define RETRY_MIN_MS 250
#define RETRY_MAX_MS 4000
#define WORK_MAX 256                /* refs checked per loop turn */
#define DEALER_MSG_MAX (CHUNK_MAX + 4096)
#define MARKS_RECENT 64             /* conflict marks remembered as sent */

#define OID_HEX 40
#define CONFLICTS_PREFIX "refs/grantd/conflicts/"

/* A ref to bring in line with its record: "repo \0 ref \0". */
struct item {
	char *key;
	size_t klen;                /* with both NULs */
	uint64_t not_before_ms;
	uint32_t backoff_ms;
	bool waiting;               /* its objects are being fetched */
};

/* A pack being served to a peer. */
struct stream {
	struct buf rid;             /* the asker's ROUTER routing id */
	char site[NAME_SITE_MAX + 1];
	uint64_t id;
	pid_t pid;
	int fd;                     /* pack-objects' stdout, non-blocking */
	uint32_t credit, seq;
	uint64_t last_ms;           /* last credit or chunk: idle measure */
	uint64_t sent_ms;           /* last frame sent, for keep-alives */
	uint64_t bytes;
};

/* The one fetch in flight. */
struct fetch {
	bool active;
	uint64_t id;
	int peer;                   /* index being asked */
	uint32_t tried;             /* peers asked this round (bits) */
	int first;                  /* peer to ask first, -1: config order */
	char repo[NAME_REPO_MAX + 1];
	char wants[WANTS_MAX][OID_HEX + 1];
	size_t nwants;
	struct buf qdir;            /* the quarantine, "" when none */
	struct buf held;            /* the pack's first bytes, until there
				     * are too many and index-pack starts
				     * (a small pack: libgit2's indexer) */
	pid_t ipid;                 /* git index-pack into it, 0: none */
	int ifd;                    /* its stdin (non-blocking), -1: closed */
	uint32_t seq;
	uint64_t last_ms, started_ms, bytes;
};

/* The counters gitrepl_status shows: kept by the actor, copied to the
 * writer over the pair whenever they change. */
struct stats {
	uint64_t fetches, fetch_failures, bytes_in, served, bytes_out;
	uint64_t refs_moved, conflicts, pending;
	uint64_t last_fetch_ms, last_fetch_bytes;
	char last_error[256];
	/* gitolite mode: admin syncs run, and those that failed */
	uint64_t gitolite_syncs, gitolite_failures;
	char gitolite_last_error[256];
};

/* gitolite mode: gitolite's admin repository is compiled again
 * (`PROGRAM grantd-admin-sync`, a LOCAL_CODE command that runs its
 * post-update hook) once the reconciler moved the branch its HEAD names,
 * as a push to it would have.  One child at a time, never waited for: the
 * compile takes seconds, and a move meanwhile sets dirty again, so the
 * newest commit is the one compiled last. */
#define GITOLITE_ADMIN "gitolite-admin"
#define ADMIN_LOG_LINES 40          /* lines of a sync's output logged */
#define ADMIN_STOP_MS 5000          /* a sync's end waited for at stop */

struct admin_sync {
	bool dirty;                 /* compile again */
	pid_t pid;                  /* the sync running, 0: none */
	int fd;                     /* its stdout and stderr, -1: closed */
	uint64_t started_ms;
	char commit[OID_HEX + 1];   /* HEAD when it started */
	struct buf line;            /* a line not ended yet */
	unsigned lines;             /* lines seen */
	char first_err[200];        /* its first line that says error */
	char last[200];             /* its last line */
};

enum verdict { V_DONE, V_RETRY, V_NEED };

struct gitrepl {
	/* what it was opened with (copied, or borrowed for its life) */
	const struct peer_self *self;
	const struct config_peer *peers;
	int npeers;
	struct store *store;        /* read only, here */
	struct metrics_hist *fetch_hist; /* atomic: any thread (metrics.h) */
	char *repo_dir, *hook_path, *conf_path;
	/* gitolite mode (both NULL: not): its HOME and command */
	char *gl_home, *gl_program;
	pthread_t thread;
	bool started;
	char endpoint[64];
	/* writer */
	void *main_pair;            /* the writer's end */
	struct stats seen;          /* the last copy the actor sent */
	/* actor */
	void *pair;
	void *dealer[CONFIG_MAX_PEERS];
	/* their handshakes: made again after one failed (linkmon.h) */
	struct linkmon mon[CONFIG_MAX_PEERS];
	struct item *items;
	size_t nitems, capitems;
	struct stream streams[STREAMS_MAX];
	int nstreams;
	struct fetch f;
	uint64_t next_id;
	int prefer;                 /* peer index from gitrepl_all, or -1 */
	/* the tips the last fetch proved connected in repository
	 * verified_repo: a ref of that repository may move onto them
	 * without another check (in another one they may not connect) */
	char verified[WANTS_MAX][OID_HEX + 1];
	size_t nverified;
	char verified_repo[NAME_REPO_MAX + 1];
	char hook_repo[NAME_REPO_MAX + 1]; /* grant-hook last run here, */
	uint64_t hook_ms;           /* ... then */
	git_repository *repo;       /* the one open repository, cached */
	char repo_name[NAME_REPO_MAX + 1];
	/* conflict marks sent to the writer, maybe not written yet: a
	 * second look at the same loser meanwhile must not count it twice */
	struct buf marked[MARKS_RECENT];
	unsigned nmarked;
	struct admin_sync admin;
	bool quit;
	struct stats st;
	struct stats st_sent;       /* what the writer was last sent */
};

/* ---- gitrepl.c: shared by the stages ------------------------------------ */

/* The path of repository name. */
void gitrepl_path(const struct gitrepl *g, struct buf *out, const char *name);

/* The repository name, opened bare and cached; NULL when it cannot be
 * opened (yet).  Borrowed until the next call. */
git_repository *gitrepl_repo(struct gitrepl *g, const char *name);

/* Peer index of site in the config, or -1. */
int gitrepl_peer_index(const struct gitrepl *g, const char *site);

/* The last error, for status. */
void gitrepl_error(struct gitrepl *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Send m to a peer: on one of our DEALERs (rid NULL), or through the
 * writer to the ROUTER behind rid (sock is then g->pair).  Returns 0 or
 * GD_EIO. */
int gitrepl_send(struct gitrepl *g, void *sock, const struct buf *rid,
		 const Grantd__V1__PeerMsg *m);

/* A PackErr {id, why} to a peer, as gitrepl_send. */
void gitrepl_pack_err(struct gitrepl *g, void *sock, const struct buf *rid,
		      uint64_t id, const char *why);

/* The fetch is over (ok: its tips are in): the items waiting for it are
 * due again, now or after a back-off. */
void gitrepl_fetched(struct gitrepl *g, bool ok, uint64_t now);

/* ---- gitproc.c ---------------------------------------------------------- */

/* libgit2's last error text; never NULL. */
const char *gitproc_why(void);

/* Run git in the repository at path with args (after "git"), feeding it
 * input, with envp (NULL: ours); *outfd, when not NULL, gets its stdout
 * (non-blocking) and the child is left running.  Its stderr is dropped
 * (the caller logs the exit status with context).  Returns the pid or
 * -1. */
pid_t gitproc_spawn(const char *path, const char *const *args,
		    const struct buf *input, int *outfd, char **envp);

/* Wait for pid: its exit status, 128 + signal, or -1. */
int gitproc_wait(pid_t pid);

/* Start prog (a path, or a name looked for in the PATH that envp sets)
 * with argv and exactly the environment envp (nothing of ours), in the
 * directory cwd, stdin /dev/null; *outfd gets its stdout and stderr
 * together (non-blocking).  The caller reaps it.  Returns the pid, or -1
 * with errno set (ENOENT: prog not found). */
pid_t gitproc_run(const char *prog, char *const argv[], char *const envp[],
		  const char *cwd, int *outfd);

/* git's own check after a fetch (check_connected): everything reachable
 * from the tips wants is in the quarantine qdir (NULL: none) or the
 * repository at path, and joins what the refs already reach. */
bool gitproc_connected(const char *path, const char *qdir,
		       const char (*wants)[OID_HEX + 1], size_t nwants);

/* Start `git index-pack --stdin --fix-thin --keep` writing into the
 * quarantine qdir (an objects directory) of the repository at path, whose
 * objects complete a thin pack; *infd gets its stdin (non-blocking), its
 * stderr goes to a file in qdir (gitproc_index_why).  The environment is
 * ours (repos_git_isolate: no global or system configuration).  Returns
 * the pid or -1. */
pid_t gitproc_index_start(const char *path, const char *qdir, int *infd);

/* Write len bytes to the non-blocking pipe fd, waiting at most
 * timeout_ms each time the pipe is full.  Returns 0, or GD_EIO: the child
 * is gone (EPIPE, never a SIGPIPE) or stalled. */
int gitproc_feed(int fd, const void *data, size_t len, int timeout_ms);

/* Why index-pack refused its pack (its stderr in qdir), as one line for
 * the log into out. */
void gitproc_index_why(const char *qdir, char *out, size_t n);

/* Add each ref tip of repo to out, one 40-hex line each, counting in *n
 * (at most max in all). */
void gitproc_tips(git_repository *repo, struct buf *out, size_t *n,
		  size_t max);

/* ---- packsrv.c ---------------------------------------------------------- */

/* A PackReq from site (behind rid on the ROUTER): start pack-objects, or
 * say why not. */
void packsrv_request(struct gitrepl *g, const struct buf *rid,
		     const char *site, const Grantd__V1__PackReq *q);
/* More credit, or the asker gave the stream up. */
void packsrv_credit(struct gitrepl *g, const char *site,
		    const Grantd__V1__PackCredit *c);
void packsrv_cancel(struct gitrepl *g, const char *site, uint64_t id);
/* s's pack-objects has output and the asker has credit: one chunk
 * (chunk: CHUNK_MAX bytes of scratch). */
void packsrv_read(struct gitrepl *g, struct stream *s, uint8_t *chunk);
/* Keep-alives for streams git is slow on; streams without credit for
 * too long are dropped. */
void packsrv_tick(struct gitrepl *g, uint64_t now);
/* Every stream closed, its child killed. */
void packsrv_close_all(struct gitrepl *g);

/* ---- packfetch.c -------------------------------------------------------- */

/* Fetch g->f.wants into repo, asking peer first (-1: config order) or
 * g->prefer; g->f.active says whether it started. */
void packfetch_start(struct gitrepl *g, const char *repo, int first);
/* One frame on peer i's DEALER. */
void packfetch_dealer(struct gitrepl *g, int i, zmq_msg_t *msg);
/* A fetch silent for too long asks the next peer. */
void packfetch_tick(struct gitrepl *g, uint64_t now);
/* Drop a fetch in progress (stopping). */
void packfetch_abort(struct gitrepl *g);

/* glsync.c, gitolite mode only (nothing without gl_program): */
/* The reconciler moved (or deleted) ref of repository name: when it is
 * the branch gitolite-admin's HEAD names, a sync is due. */
void glsync_moved(struct gitrepl *g, git_repository *repo, const char *name,
		  const char *ref);
/* From the loop: read the running sync's output, reap it (never
 * waiting), and start one when one is due. */
void glsync_tick(struct gitrepl *g, uint64_t now);
/* Stopping: a sync running gets ADMIN_STOP_MS to end. */
void glsync_stop(struct gitrepl *g);

#endif
