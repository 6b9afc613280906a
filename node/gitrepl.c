/*
 * gitrepl.c: the actor that makes repositories on disk follow the ref
 * records, fetching objects from peers and serving packs to them.  The
 * contract is in gitrepl.h; the design in docs/git-replication.md.
 *
 * Everything below "actor" runs on the actor thread only; the functions
 * at the end (gitrepl_*) run on the writer thread and only touch the
 * writer's end of the pair, and the counters under g->mu.
 */
#define _GNU_SOURCE /* pipe2 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include <sodium.h>

#include "crashpoint.h"
#include "err.h"
#include "gitrepl.h"
#include "grantd.pb-c.h"
#include "log.h"
#include "names.h"
#include "ops.h"
#include "repl.h"
#include "repos.h"
#include "store.h"
#include "banned.h"

extern char **environ;

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
	git_odb *odb;               /* the quarantine's */
	struct buf qdir;            /* the quarantine, "" when none */
	git_odb_writepack *wp;
	git_indexer_progress prog;  /* the indexer counts in it: one per pack */
	uint32_t seq;
	uint64_t last_ms, started_ms, bytes;
};

struct stats {
	uint64_t fetches, fetch_failures, bytes_in, served, bytes_out;
	uint64_t refs_moved, conflicts, pending;
	uint64_t last_fetch_ms, last_fetch_bytes;
	char last_error[256];
};

struct gitrepl {
	struct node *n;             /* read-only here: cfg, store, keys */
	pthread_t thread;
	bool started;
	char endpoint[64];
	void *main_pair;            /* the writer's end */
	/* actor */
	void *pair;
	void *dealer[CONFIG_MAX_PEERS];
	int npeers;
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
	bool quit;
	/* shared with the writer */
	pthread_mutex_t mu;
	struct stats st;
};

enum verdict { V_DONE, V_RETRY, V_NEED };

/* Timeouts: a clock that never steps back. */
static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void set_error(struct gitrepl *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_error(struct gitrepl *g, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&g->mu);
	va_start(ap, fmt);
	vsnprintf(g->st.last_error, sizeof(g->st.last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&g->mu);
}

#define STAT_ADD(g, field, v) do { \
	pthread_mutex_lock(&(g)->mu); \
	(g)->st.field += (v); \
	pthread_mutex_unlock(&(g)->mu); \
} while (0)

static const char *git_why(void)
{
	const git_error *e = git_error_last();
	return e && e->message ? e->message : "unknown libgit2 error";
}

static int peer_index(struct gitrepl *g, const char *site)
{
	for (int i = 0; site && i < g->npeers; i++)
		if (!strcmp(g->n->cfg->peers[i].site, site))
			return i;
	return -1;
}

/* ---- messages ------------------------------------------------------------- */

/* Send m (made by repl_msg_init) on sock, behind rid when given. */
static int send_peer_msg(void *sock, const Grantd__V1__PeerMsg *m,
			 const struct buf *rid)
{
	return repl_send(sock, m, rid ? rid->p : NULL, rid ? rid->len : 0);
}

static void send_err(struct gitrepl *g, void *sock, const struct buf *rid,
		     uint64_t id, const char *why)
{
	Grantd__V1__PeerMsg m;
	repl_msg_init(g->n, &m);
	Grantd__V1__PackErr e = GRANTD__V1__PACK_ERR__INIT;
	e.has_id = true;
	e.id = id;
	e.why = (char *)why;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_ERR;
	m.pack_err = &e;
	send_peer_msg(sock, &m, rid);
}

/* Decode a frame from site; NULL when it is not a well-formed PeerMsg
 * from that site. */
static Grantd__V1__PeerMsg *decode(const char *site, const void *p,
				   size_t len)
{
	Grantd__V1__PeerMsg *m = grantd__v1__peer_msg__unpack(NULL, len, p);
	const char *why = repl_msg_problem(m, site);

	if (!why)
		return m;
	log_warn("git peer message dropped peer=%s: %s", site, why);
	if (m)
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	return NULL;
}

/* ---- repositories ------------------------------------------------------- */

static git_repository *open_repo(struct gitrepl *g, const char *name)
{
	struct buf path = BUF_INIT;

	if (g->repo && !strcmp(g->repo_name, name))
		return g->repo;
	git_repository_free(g->repo);
	g->repo = NULL;
	repos_path(&path, g->n->cfg->repo_dir, name);
	if (git_repository_open_bare(&g->repo, path.p) < 0) {
		g->repo = NULL;
		log_debug("repository not openable (yet) repo=%s: %s", name,
			  git_why());
	} else {
		snprintf(g->repo_name, sizeof(g->repo_name), "%s", name);
	}
	buf_free(&path);
	return g->repo;
}

/* The repository's hook kept pushes the node has not recorded yet. */
static bool spool_pending(struct gitrepl *g, const char *name)
{
	struct buf path = BUF_INIT;
	struct dirent *de;
	bool any = false;
	DIR *d;

	repos_path(&path, g->n->cfg->repo_dir, name);
	buf_puts(&path, "/grantd-spool");
	if ((d = opendir(path.p))) {
		while (!any && (de = readdir(d)))
			any = strlen(de->d_name) > 5 &&
			      !strcmp(de->d_name + strlen(de->d_name) - 5,
				      ".refs");
		closedir(d);
	}
	buf_free(&path);
	return any;
}

/* Run git in the repository at path with argv (after "git"), feeding it
 * input, with envp (NULL: ours); *outfd, when not NULL, gets its stdout
 * (non-blocking) and the child is left running.  Its stderr is dropped
 * (the caller logs the exit status with context).  Returns the pid or
 * -1. */
static pid_t spawn_git(const char *path, const char *const *args,
		       const struct buf *input, int *outfd, char **envp)
{
	posix_spawn_file_actions_t fa;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 };
	char gitdir[4200];
	char *argv[16];
	pid_t pid = -1;
	int k = 0;

	snprintf(gitdir, sizeof(gitdir), "--git-dir=%s", path);
	argv[k++] = "git";
	argv[k++] = gitdir;
	for (int i = 0; args[i] && k < 15; i++)
		argv[k++] = (char *)args[i];
	argv[k] = NULL;
	if (pipe2(in, O_CLOEXEC) < 0)
		return -1;
	if (outfd && pipe2(out, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	if (outfd)
		posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null",
						 O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (posix_spawnp(&pid, "git", &fa, NULL, argv,
			 envp ? envp : environ) != 0)
		pid = -1;
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	if (outfd)
		close(out[1]);
	if (pid > 0 && input) {
		/* small (wants and haves): fits the pipe, written whole */
		size_t off = 0;
		while (off < input->len) {
			ssize_t w = write(in[1], input->p + off,
					  input->len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;
			off += (size_t)w;
		}
	}
	close(in[1]);
	if (outfd) {
		if (pid > 0) {
			fcntl(out[0], F_SETFL, O_NONBLOCK);
			*outfd = out[0];
		} else {
			close(out[0]);
		}
	}
	return pid;
}

static int wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* git's own check after a fetch (check_connected): everything reachable
 * from the new tips is in the quarantine qdir or the repository, and joins
 * what the refs already reach. */
static bool connected(struct gitrepl *g, const char *name, const char *qdir,
		      const char (*wants)[OID_HEX + 1], size_t nwants)
{
	static const char *const args[] = { "rev-list", "--objects", "--stdin",
					    "--not", "--all", "--alternate-refs",
					    "--quiet", NULL };
	struct buf path = BUF_INIT, in = BUF_INIT, e1 = BUF_INIT, e2 = BUF_INIT;
	char **envp = NULL;
	pid_t pid;
	int rc;

	repos_path(&path, g->n->cfg->repo_dir, name);
	for (size_t i = 0; i < nwants; i++)
		buf_printf(&in, "%s\n", wants[i]);
	if (qdir) {
		/* the objects as receive-pack sees a push in quarantine */
		size_t n = 0;
		buf_printf(&e1, "GIT_OBJECT_DIRECTORY=%s", qdir);
		buf_printf(&e2, "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s/objects",
			   path.p);
		while (environ[n])
			n++;
		if (!(envp = calloc(n + 3, sizeof(*envp))))
			abort();
		memcpy(envp, environ, n * sizeof(*envp));
		envp[n] = e1.p;
		envp[n + 1] = e2.p;
	}
	pid = spawn_git(path.p, args, &in, NULL, envp);
	rc = pid > 0 ? wait_child(pid) : -1;
	free(envp);
	buf_free(&path);
	buf_free(&in);
	buf_free(&e1);
	buf_free(&e2);
	return rc == 0;
}

/* ---- the quarantine ---------------------------------------------------------
 * A pack from a peer is indexed into NAME.git/grantd-incoming-XXXXXX/ (an
 * objects directory of its own, the repository's objects as its
 * alternate), checked there, and only then renamed into objects/pack/:
 * objects that fail the checks never enter the repository, so a ref can
 * never be moved onto them later. */

#define QUARANTINE "grantd-incoming-"

/* Remove a quarantine directory and what is in it (two levels). */
static void quarantine_remove(const char *dir)
{
	struct buf p = BUF_INIT;
	const char *sub[] = { "/pack", "" };

	for (size_t i = 0; i < GD_ARRAY_SIZE(sub); i++) {
		struct dirent *de;
		DIR *d;
		buf_reset(&p);
		buf_printf(&p, "%s%s", dir, sub[i]);
		if ((d = opendir(p.p))) {
			while ((de = readdir(d)))
				if (strcmp(de->d_name, ".") &&
				    strcmp(de->d_name, ".."))
					unlinkat(dirfd(d), de->d_name,
						 !strcmp(de->d_name, "pack") &&
							 !*sub[i] ?
						 AT_REMOVEDIR : 0);
			closedir(d);
		}
	}
	rmdir(dir);
	buf_free(&p);
}

/* Quarantines left by a fetch that a crash interrupted. */
static void quarantine_sweep(const char *repo_path)
{
	struct buf p = BUF_INIT;
	struct dirent *de;
	DIR *d = opendir(repo_path);

	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, QUARANTINE, strlen(QUARANTINE))) {
			buf_reset(&p);
			buf_printf(&p, "%s/%s", repo_path, de->d_name);
			quarantine_remove(p.p);
		}
	if (d)
		closedir(d);
	buf_free(&p);
}

/* Make qdir (an objects directory) and an odb that writes packs there and
 * reads the repository's objects (and its alternates) for thin-pack
 * bases. */
static int quarantine_open(const char *repo_path, struct buf *qdir,
			   git_odb **out)
{
	struct buf pack = BUF_INIT, objects = BUF_INIT;
	git_odb_backend *be = NULL;
	git_odb *odb = NULL;
	int rc = 0;

	buf_reset(qdir);
	buf_printf(qdir, "%s/" QUARANTINE "XXXXXX", repo_path);
	if (!mkdtemp(qdir->p)) {
		buf_reset(qdir);
		return GD_EIO;
	}
	buf_printf(&pack, "%s/pack", qdir->p);
	buf_printf(&objects, "%s/objects", repo_path);
	if (mkdir(pack.p, 0755) < 0 || git_odb_new(&odb) < 0 ||
	    git_odb_backend_pack(&be, qdir->p) < 0 ||
	    git_odb_add_backend(odb, be, 2) < 0 ||
	    git_odb_add_disk_alternate(odb, objects.p) < 0) {
		git_odb_free(odb);
		quarantine_remove(qdir->p);
		buf_reset(qdir);
		rc = GD_EIO;
	} else {
		*out = odb;
	}
	buf_free(&pack);
	buf_free(&objects);
	return rc;
}

/* Move the checked pack (and its index, last: it makes the pack visible)
 * into the repository, fsynced. */
static int quarantine_commit(const char *repo_path, const char *qdir)
{
	static const char *const exts[] = { ".pack", ".rev", ".idx" };
	struct buf from = BUF_INIT, to = BUF_INIT, dir = BUF_INIT;
	struct buf moved = BUF_INIT;
	struct dirent *de;
	int rc = 0;
	DIR *d;

	buf_printf(&dir, "%s/pack", qdir);
	if (!(d = opendir(dir.p))) {
		buf_free(&dir);
		return GD_EIO;
	}
	for (size_t e = 0; rc == 0 && e < GD_ARRAY_SIZE(exts); e++) {
		rewinddir(d);
		while (rc == 0 && (de = readdir(d))) {
			size_t l = strlen(de->d_name), el = strlen(exts[e]);
			if (l <= el || strcmp(de->d_name + l - el, exts[e]))
				continue;
			buf_reset(&from);
			buf_reset(&to);
			buf_printf(&from, "%s/%s", dir.p, de->d_name);
			buf_printf(&to, "%s/objects/pack/%s", repo_path,
				   de->d_name);
			if (rename(from.p, to.p) < 0) {
				rc = GD_EIO;
				break;
			}
			buf_add(&moved, to.p, to.len + 1);
			crashpoint("pack-move"); /* the pack in, its index not */
		}
	}
	closedir(d);
	/* a pack without its index is invisible but takes space: a move
	 * that failed half-way takes back what it moved */
	for (size_t off = 0; rc < 0 && off < moved.len;
	     off += strlen(moved.p + off) + 1)
		unlink(moved.p + off);
	buf_free(&moved);
	buf_reset(&dir);
	buf_printf(&dir, "%s/objects/pack", repo_path);
	int fd = open(dir.p, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || fsync(fd) < 0)
		rc = GD_EIO;
	if (fd >= 0)
		close(fd);
	buf_free(&from);
	buf_free(&to);
	buf_free(&dir);
	return rc;
}

/* Run grant-hook (stdin empty) in the repository: it sends what earlier
 * hooks spooled while the node could not be reached. */
static void run_hook(struct gitrepl *g, const char *name)
{
	struct buf path = BUF_INIT;
	pid_t pid;

	repos_path(&path, g->n->cfg->repo_dir, name);
	if ((pid = repos_run_hook(g->n->hook_path, g->n->conf_path,
				  path.p)) > 0)
		wait_child(pid);
	buf_free(&path);
}

/* ---- serving packs ---------------------------------------------------------- */

static void stream_close(struct gitrepl *g, struct stream *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		wait_child(s->pid);
	}
	if (s->fd >= 0)
		close(s->fd);
	buf_free(&s->rid);
	*s = g->streams[--g->nstreams];
	g->streams[g->nstreams] = (struct stream){ .fd = -1 };
}

static struct stream *stream_find(struct gitrepl *g, const char *site,
				  uint64_t id)
{
	for (int i = 0; i < g->nstreams; i++)
		if (g->streams[i].id == id && !strcmp(g->streams[i].site, site))
			return &g->streams[i];
	return NULL;
}

/* Add each ref tip of repo to out, one 40-hex line each, counting in *n
 * (at most max in all). */
static void tips(git_repository *repo, struct buf *out, size_t *n,
		 size_t max)
{
	git_reference_iterator *it;
	git_reference *ref;

	if (git_reference_iterator_new(&it, repo) < 0)
		return;
	while (*n < max && git_reference_next(&ref, it) == 0) {
		const git_oid *id = git_reference_target(ref);
		if (id) {
			char hex[OID_HEX + 1];
			git_oid_tostr(hex, sizeof(hex), id);
			buf_printf(out, "%s\n", hex);
			++*n;
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
}

static void serve_req(struct gitrepl *g, const struct buf *rid,
		      const char *site, const Grantd__V1__PackReq *q)
{
	static const char *const args[] = { "pack-objects", "--revs", "--thin",
					    "--stdout", "-q",
					    "--delta-base-offset", NULL };
	char norm[NAME_REPO_MAX + 1];
	struct buf path = BUF_INIT, in = BUF_INIT;
	git_repository *repo = NULL;
	git_odb *odb = NULL;
	const char *why = NULL;
	git_oid oid;

	if (!q->has_id || !q->repo || !q->n_wants ||
	    q->n_wants > WANTS_MAX || q->n_haves > HAVES_MAX ||
	    name_repo_norm(norm, sizeof(norm), q->repo) < 0 ||
	    strcmp(norm, q->repo)) {
		why = "bad request";
		goto out;
	}
	int mine = 0;
	for (int i = 0; i < g->nstreams; i++)
		mine += !strcmp(g->streams[i].site, site);
	if (g->nstreams == STREAMS_MAX || mine == STREAMS_PER_PEER ||
	    stream_find(g, site, q->id)) {
		why = "busy";
		goto out;
	}
	repos_path(&path, g->n->cfg->repo_dir, q->repo);
	if (git_repository_open_bare(&repo, path.p) < 0 ||
	    git_repository_odb(&odb, repo) < 0) {
		why = "no such repository here";
		goto out;
	}
	for (size_t i = 0; i < q->n_wants; i++) {
		if (!ops_oid_ok(q->wants[i]) ||
		    git_oid_fromstr(&oid, q->wants[i]) < 0) {
			why = "bad request";
			goto out;
		}
		if (!git_odb_exists(odb, &oid)) {
			why = "not here";
			goto out;
		}
		buf_printf(&in, "%s\n", q->wants[i]);
	}
	for (size_t i = 0; i < q->n_haves; i++)
		if (ops_oid_ok(q->haves[i]) &&
		    git_oid_fromstr(&oid, q->haves[i]) == 0 &&
		    git_odb_exists(odb, &oid))
			buf_printf(&in, "^%s\n", q->haves[i]);
	struct stream *s = &g->streams[g->nstreams];
	*s = (struct stream){ .fd = -1, .id = q->id };
	s->pid = spawn_git(path.p, args, &in, &s->fd, NULL);
	if (s->pid < 0) {
		why = "cannot run git pack-objects";
		goto out;
	}
	g->nstreams++;
	buf_add(&s->rid, rid->p, rid->len);
	snprintf(s->site, sizeof(s->site), "%s", site);
	s->credit = !q->has_credit || !q->credit ? 1 :
		    q->credit < CREDIT_MAX ? q->credit : CREDIT_MAX;
	s->last_ms = s->sent_ms = now_ms();
	log_debug("serving pack peer=%s repo=%s wants=%zu haves=%zu", site,
		  q->repo, q->n_wants, q->n_haves);
out:
	if (why) {
		log_info("pack not served peer=%s repo=%s: %s", site,
			 q->repo ? q->repo : "-", why);
		send_err(g, g->pair, rid, q->has_id ? q->id : 0, why);
	}
	git_odb_free(odb);
	git_repository_free(repo);
	buf_free(&path);
	buf_free(&in);
}

static void send_chunk(struct gitrepl *g, struct stream *s, const void *p,
		       size_t len, bool last)
{
	Grantd__V1__PeerMsg m;
	repl_msg_init(g->n, &m);
	Grantd__V1__PackChunk c = GRANTD__V1__PACK_CHUNK__INIT;
	c.has_id = c.has_seq = c.has_data = c.has_last = true;
	c.id = s->id;
	c.seq = s->seq++;
	c.data.data = (uint8_t *)p;
	c.data.len = len;
	c.last = last;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK;
	m.pack_chunk = &c;
	send_peer_msg(g->pair, &m, &s->rid);
	s->sent_ms = now_ms();
	s->bytes += len;
}

/* pack-objects has output and the asker has credit: one chunk. */
static void stream_read(struct gitrepl *g, struct stream *s, uint8_t *chunk)
{
	size_t got = 0;
	bool eof = false;

	if (!s->credit)
		return;
	while (got < CHUNK_MAX) {
		ssize_t r = read(s->fd, chunk + got, CHUNK_MAX - got);
		if (r > 0) {
			got += (size_t)r;
		} else if (r == 0) {
			eof = true;
			break;
		} else if (errno != EINTR) {
			break; /* EAGAIN: send what there is */
		}
	}
	s->last_ms = now_ms();
	if (got) {
		send_chunk(g, s, chunk, got, false);
		s->credit--;
	}
	if (!eof)
		return;
	int rc = wait_child(s->pid);
	s->pid = -1;
	if (rc == 0) {
		send_chunk(g, s, "", 0, true);
		STAT_ADD(g, served, 1);
		STAT_ADD(g, bytes_out, s->bytes);
		log_info("pack served peer=%s bytes=%llu", s->site,
			 (unsigned long long)s->bytes);
	} else {
		log_warn("git pack-objects failed peer=%s status=%d", s->site,
			 rc);
		send_err(g, g->pair, &s->rid, s->id, "pack-objects failed");
	}
	stream_close(g, s);
}

/* ---- fetching packs ------------------------------------------------------- */

static void fetch_done(struct gitrepl *g, bool ok);

/* Look at it again later: 0.25 s, doubling to 4 s. */
static void back_off(struct item *it, uint64_t t)
{
	it->backoff_ms = it->backoff_ms ? it->backoff_ms * 2 : RETRY_MIN_MS;
	if (it->backoff_ms > RETRY_MAX_MS)
		it->backoff_ms = RETRY_MAX_MS;
	it->not_before_ms = t + it->backoff_ms;
}

/* The haves of a fetch: the repository's own tips, and for a fork its
 * parent's (objects the fork reaches through alternates). */
static void fetch_haves(struct gitrepl *g, git_repository *repo,
			Grantd__V1__PackReq *q, struct buf *hv)
{
	struct buf v = BUF_INIT, path = BUF_INIT;
	size_t n = 0;

	tips(repo, hv, &n, HAVES_MAX);
	if (store_get(g->n->store, NULL, CF_REPOS, g->f.repo,
		      strlen(g->f.repo), &v) == 0) {
		Grantd__V1__Repo *r = grantd__v1__repo__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		git_repository *parent = NULL;
		if (r && r->fork_of && *r->fork_of) {
			repos_path(&path, g->n->cfg->repo_dir, r->fork_of);
			if (git_repository_open_bare(&parent, path.p) == 0)
				tips(parent, hv, &n, HAVES_MAX);
			git_repository_free(parent);
		}
		if (r)
			grantd__v1__repo__free_unpacked(r, NULL);
	}
	q->n_haves = n;
	q->haves = calloc(n ? n : 1, sizeof(char *));
	if (!q->haves)
		abort();
	/* hv holds n lines of 41 bytes: point into it, NUL for newline */
	for (size_t i = 0; i < n; i++) {
		q->haves[i] = hv->p + i * (OID_HEX + 1);
		q->haves[i][OID_HEX] = '\0';
	}
	buf_free(&v);
	buf_free(&path);
}

/* Ask the next peer not asked yet; when none is left the fetch fails. */
/* Drop the current attempt: its writer, its quarantine and what is in it. */
static void attempt_drop(struct fetch *f)
{
	if (f->wp)
		f->wp->free(f->wp);
	f->wp = NULL;
	git_odb_free(f->odb);
	f->odb = NULL;
	if (f->qdir.len)
		quarantine_remove(f->qdir.p);
	buf_reset(&f->qdir);
}

static void fetch_ask(struct gitrepl *g)
{
	struct fetch *f = &g->f;
	struct buf path = BUF_INIT;
	git_repository *repo;

	repos_path(&path, g->n->cfg->repo_dir, f->repo);
	for (;;) {
		int i = -1;
		if (f->first >= 0 && !(f->tried & (1u << f->first)))
			i = f->first;
		for (int k = 0; i < 0 && k < g->npeers; k++)
			if (!(f->tried & (1u << k)))
				i = k;
		if (i < 0 || !(repo = open_repo(g, f->repo))) {
			fetch_done(g, false);
			break;
		}
		f->tried |= 1u << i;
		Grantd__V1__PeerMsg m;
		Grantd__V1__PackReq q = GRANTD__V1__PACK_REQ__INIT;
		char *wants[WANTS_MAX];
		struct buf hv = BUF_INIT;
		for (size_t k = 0; k < f->nwants; k++)
			wants[k] = f->wants[k];
		q.has_id = q.has_credit = true;
		q.id = f->id = ++g->next_id;
		q.repo = f->repo;
		q.wants = wants;
		q.n_wants = f->nwants;
		q.credit = WINDOW;
		fetch_haves(g, repo, &q, &hv);
		repl_msg_init(g->n, &m);
		m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_REQ;
		m.pack_req = &q;
		int rc = send_peer_msg(g->dealer[i], &m, NULL);
		free(q.haves);
		buf_free(&hv);
		if (rc < 0) {
			log_debug("pack request not sent peer=%s (not "
				  "connected)", g->n->cfg->peers[i].site);
			continue;
		}
		if (quarantine_open(path.p, &f->qdir, &f->odb) < 0 ||
		    git_odb_write_pack(&f->wp, f->odb, NULL, NULL) < 0) {
			log_error("cannot start receiving a pack repo=%s: %s",
				  f->repo, git_why());
			set_error(g, "cannot receive into %s", f->repo);
			f->wp = NULL;
			fetch_done(g, false);
			break;
		}
		f->peer = i;
		f->prog = (git_indexer_progress){ 0 };
		f->seq = 0;
		f->bytes = 0;
		f->last_ms = now_ms();
		break;
	}
	buf_free(&path);
}

static void fetch_start(struct gitrepl *g, const char *repo, int first)
{
	struct fetch *f = &g->f;
	struct buf path = BUF_INIT;

	if (!open_repo(g, repo))
		return;
	/* one fetch at a time: any quarantine here is a crash's leftover */
	repos_path(&path, g->n->cfg->repo_dir, repo);
	quarantine_sweep(path.p);
	buf_free(&path);
	f->active = true;
	f->tried = 0;
	f->first = g->prefer >= 0 ? g->prefer : first;
	f->started_ms = now_ms();
	snprintf(f->repo, sizeof(f->repo), "%s", repo);
	fetch_ask(g);
}

/* The peer being asked failed us: say why, drop what it sent, ask the
 * next one. */
static void fetch_failed_peer(struct gitrepl *g, const char *why)
{
	struct fetch *f = &g->f;
	const char *site = g->n->cfg->peers[f->peer].site;

	log_warn("pack fetch failed repo=%s peer=%s bytes=%llu: %s", f->repo,
		 site, (unsigned long long)f->bytes, why);
	set_error(g, "fetch from %s of %s: %s", site, f->repo, why);
	STAT_ADD(g, fetch_failures, 1);
	send_err(g, g->dealer[f->peer], NULL, f->id, "cancelled");
	attempt_drop(f);
	fetch_ask(g);
}

static void fetch_done(struct gitrepl *g, bool ok)
{
	struct fetch *f = &g->f;
	uint64_t t = now_ms();

	attempt_drop(f);
	if (ok) {
		memcpy(g->verified, f->wants, f->nwants * sizeof(f->wants[0]));
		g->nverified = f->nwants;
		snprintf(g->verified_repo, sizeof(g->verified_repo), "%s",
			 f->repo);
		pthread_mutex_lock(&g->mu);
		g->st.fetches++;
		g->st.bytes_in += f->bytes;
		g->st.last_fetch_ms = t - f->started_ms;
		g->st.last_fetch_bytes = f->bytes;
		pthread_mutex_unlock(&g->mu);
		log_info("pack fetched repo=%s peer=%s wants=%zu bytes=%llu "
			 "ms=%llu", f->repo, g->n->cfg->peers[f->peer].site,
			 f->nwants, (unsigned long long)f->bytes,
			 (unsigned long long)(t - f->started_ms));
	} else {
		log_info("objects not found at any reachable peer repo=%s "
			 "wants=%zu (will retry)", f->repo, f->nwants);
	}
	for (size_t i = 0; i < g->nitems; i++) {
		struct item *it = &g->items[i];
		if (!it->waiting)
			continue;
		it->waiting = false;
		if (ok) {
			it->not_before_ms = 0;
		} else {
			back_off(it, t);
		}
	}
	f->active = false;
	f->nwants = 0;
}

/* The whole pack is indexed in the quarantine: check it, move it in. */
static void fetch_finish(struct gitrepl *g)
{
	struct fetch *f = &g->f;
	struct buf path = BUF_INIT;
	git_repository *repo;
	git_odb *odb = NULL;

	repos_path(&path, g->n->cfg->repo_dir, f->repo);
	if (!connected(g, f->repo, f->qdir.p, f->wants, f->nwants)) {
		buf_free(&path);
		fetch_failed_peer(g, "pack does not connect the new tips");
		return;
	}
	if (quarantine_commit(path.p, f->qdir.p) < 0) {
		log_error("cannot move a fetched pack into repo=%s: %s",
			  f->repo, strerror(errno));
		set_error(g, "cannot move a pack into %s: %s", f->repo,
			  strerror(errno));
		buf_free(&path);
		fetch_done(g, false);
		return;
	}
	if ((repo = open_repo(g, f->repo)) &&
	    git_repository_odb(&odb, repo) == 0)
		git_odb_refresh(odb);
	git_odb_free(odb);
	buf_free(&path);
	fetch_done(g, true);
}

static void fetch_chunk(struct gitrepl *g, const Grantd__V1__PackChunk *c)
{
	struct fetch *f = &g->f;

	if (!c->has_seq || c->seq != f->seq) {
		fetch_failed_peer(g, "chunk out of order");
		return;
	}
	f->seq++;
	f->last_ms = now_ms();
	if (c->has_data && c->data.len) {
		f->bytes += c->data.len;
		if (f->wp->append(f->wp, c->data.data, c->data.len,
				  &f->prog) < 0) {
			fetch_failed_peer(g, git_why());
			return;
		}
	}
	if (!c->last && !(c->has_data && c->data.len))
		return; /* a keep-alive: git is still counting or compressing */
	if (!c->last) {
		Grantd__V1__PeerMsg m;
		Grantd__V1__PackCredit cr = GRANTD__V1__PACK_CREDIT__INIT;
		cr.has_id = cr.has_n = true;
		cr.id = f->id;
		cr.n = 1;
		repl_msg_init(g->n, &m);
		m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT;
		m.pack_credit = &cr;
		send_peer_msg(g->dealer[f->peer], &m, NULL);
		return;
	}
	if (f->wp->commit(f->wp, &f->prog) < 0) {
		fetch_failed_peer(g, git_why());
		return;
	}
	fetch_finish(g);
}

/* One frame on peer i's DEALER. */
static void dealer_msg(struct gitrepl *g, int i, zmq_msg_t *msg)
{
	const char *site = g->n->cfg->peers[i].site;
	Grantd__V1__PeerMsg *m = decode(site, zmq_msg_data(msg),
					zmq_msg_size(msg));
	struct fetch *f = &g->f;
	uint64_t id = 0;

	if (!m)
		return;
	if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK)
		id = m->pack_chunk->id;
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_ERR)
		id = m->pack_err->id;
	if (!f->active || f->peer != i || id != f->id || !f->wp) {
		/* a stream given up: tell the peer to stop it */
		if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK &&
		    !m->pack_chunk->last)
			send_err(g, g->dealer[i], NULL, id, "cancelled");
	} else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CHUNK) {
		fetch_chunk(g, m->pack_chunk);
	} else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_ERR) {
		char why[128];
		snprintf(why, sizeof(why), "peer says: %s",
			 m->pack_err->why ? m->pack_err->why : "?");
		fetch_failed_peer(g, why);
	}
	grantd__v1__peer_msg__free_unpacked(m, NULL);
}

/* ---- making the disk follow the records -------------------------------------- */

/* The verdict "fetch hex first", preferably from site origin. */
static enum verdict need_tip(struct gitrepl *g, const char *hex,
			     const char *origin, char *need, int *from)
{
	snprintf(need, OID_HEX + 1, "%s", hex);
	*from = peer_index(g, origin);
	return V_NEED;
}

/* May a ref point at hex?  Objects here came from pushes (checked by
 * receive-pack) or from packs whose wants were checked, but a pack may
 * carry more than its wants: a tip that was not a checked want is
 * checked now, so a ref never lands on an incomplete history. */
static bool safe_tip(struct gitrepl *g, const char *name, const char *hex)
{
	char one[1][OID_HEX + 1];

	for (size_t i = 0; !strcmp(g->verified_repo, name) &&
			   i < g->nverified; i++)
		if (!strcmp(g->verified[i], hex))
			return true;
	snprintf(one[0], sizeof(one[0]), "%s", hex);
	if (connected(g, name, NULL, (const char (*)[OID_HEX + 1])one, 1))
		return true;
	log_warn("tip not connected here repo=%s tip=%s: fetching it again "
		 "before any ref points at it", name, hex);
	set_error(g, "%s: tip %s is not connected", name, hex);
	return false;
}

/* Keep or drop the tips that lost an LWW race on this ref.  target is the
 * winner (NULL: the ref is deleted).  V_NEED with *need and *from set when
 * a loser's objects must be fetched first. */
static enum verdict losers(struct gitrepl *g, git_repository *repo,
			   const char *name, const char *ref,
			   const git_oid *target, char *need, int *from)
{
	struct store_iter *it;
	struct buf prefix = BUF_INIT, v = BUF_INIT, cref = BUF_INIT;
	enum verdict out = V_DONE;
	const char *key;
	size_t klen;
	git_odb *odb = NULL;

	buf_add(&prefix, name, strlen(name) + 1);
	buf_add(&prefix, ref, strlen(ref) + 1);
	if (git_repository_odb(&odb, repo) < 0) {
		buf_free(&prefix);
		return V_RETRY;
	}
	store_iter_new(&it, g->n->store, NULL, CF_LOSERS, prefix.p, prefix.len);
	while (out == V_DONE && store_iter_next(it, &key, &klen, &v) > 0) {
		const char *origin = key + prefix.len;
		char hex[OID_HEX + 1];
		git_oid tip;
		git_reference *out_ref = NULL;

		if (klen <= prefix.len + 9 || v.len < OID_HEX ||
		    strnlen(origin, klen - prefix.len) >= klen - prefix.len)
			continue;
		if (v.len > OID_HEX)
			continue; /* "TIP kept": done before */
		memcpy(hex, v.p, OID_HEX);
		hex[OID_HEX] = '\0';
		if (git_oid_fromstr(&tip, hex) < 0)
			continue;
		if (!git_odb_exists(odb, &tip)) {
			out = need_tip(g, hex, origin, need, from);
			break;
		}
		if (target && (git_oid_equal(&tip, target) ||
			       git_graph_descendant_of(repo, target, &tip) == 1)) {
			/* the winner builds on it: no conflict */
			store_put_now(g->n->store, CF_LOSERS, key, klen, NULL,
				      0);
			continue;
		}
		if (!safe_tip(g, name, hex)) {
			out = need_tip(g, hex, origin, need, from);
			break;
		}
		buf_reset(&cref);
		buf_printf(&cref, CONFLICTS_PREFIX "%s/%s", origin, ref);
		if (git_reference_create(&out_ref, repo, cref.p, &tip, 1,
					 "grantd: losing tip of a concurrent "
					 "push") < 0) {
			set_error(g, "cannot keep %s in %s: %s", cref.p, name,
				  git_why());
			out = V_RETRY;
			break;
		}
		git_reference_free(out_ref);
		buf_reset(&v);
		buf_printf(&v, "%s kept", hex);
		store_put_now(g->n->store, CF_LOSERS, key, klen, v.p, v.len);
		STAT_ADD(g, conflicts, 1);
		log_warn("push conflict repo=%s ref=%s: the tip %s from site=%s "
			 "lost to a later push; kept as %s", name, ref, hex,
			 origin, cref.p);
	}
	store_iter_free(&it);
	git_odb_free(odb);
	buf_free(&prefix);
	buf_free(&v);
	buf_free(&cref);
	return out;
}

/* Bring one ref in line with its record. */
static enum verdict reconcile(struct gitrepl *g, const struct item *item,
			      char *need, int *from)
{
	const char *name = item->key, *ref = item->key + strlen(name) + 1;
	Grantd__V1__Ref *rec = NULL;
	struct buf v = BUF_INIT;
	git_repository *repo;
	git_reference *out = NULL;
	git_oid disk, target;
	git_odb *odb = NULL;
	enum verdict res = V_RETRY;
	bool have;
	int rc;

	if (spool_pending(g, name)) {
		/* a local push the node has not recorded yet: leave the refs
		 * alone, and have the hook send it (the node is back) */
		uint64_t t = now_ms();
		if (strcmp(g->hook_repo, name) || t - g->hook_ms > 1000) {
			run_hook(g, name);
			snprintf(g->hook_repo, sizeof(g->hook_repo), "%s",
				 name);
			g->hook_ms = t;
		}
		goto out;
	}
	rc = store_get(g->n->store, NULL, CF_REFS, item->key, item->klen - 1,
		       &v);
	if (rc == GD_ENOTFOUND) {
		res = V_DONE;
		goto out;
	}
	if (rc < 0 || !(rec = grantd__v1__ref__unpack(
				NULL, v.len, (const uint8_t *)v.p)) ||
	    !rec->target)
		goto out;
	if (!(repo = open_repo(g, name)))
		goto out; /* not created here yet: its Repo op comes first */
	rc = git_reference_name_to_id(&disk, repo, ref);
	if (rc < 0 && rc != GIT_ENOTFOUND)
		goto out;
	have = rc == 0;
	if (!*rec->target) {
		if (have) {
			if (git_reference_lookup(&out, repo, ref) < 0 ||
			    !git_reference_target(out) ||
			    !git_oid_equal(git_reference_target(out), &disk) ||
			    git_reference_delete(out) < 0)
				goto out; /* moved meanwhile: read again */
			log_info("ref deleted repo=%s ref=%s origin=%s", name,
				 ref, rec->origin ? rec->origin : "-");
			STAT_ADD(g, refs_moved, 1);
		}
		res = losers(g, repo, name, ref, NULL, need, from);
		goto out;
	}
	if (git_oid_fromstr(&target, rec->target) < 0)
		goto out;
	if (!have || !git_oid_equal(&disk, &target)) {
		if (git_repository_odb(&odb, repo) < 0)
			goto out;
		if (!git_odb_exists(odb, &target)) {
			res = need_tip(g, rec->target, rec->origin, need, from);
			goto out;
		}
		if (have && rec->origin &&
		    !strcmp(rec->origin, g->n->ops.site) &&
		    git_graph_descendant_of(repo, &disk, &target) == 1) {
			/* a push here went on from this site's own record:
			 * its hook is recording it; never step back */
			res = V_DONE;
			goto out;
		}
		if (!safe_tip(g, name, rec->target)) {
			/* fetch it again: the pack brings what is missing */
			res = need_tip(g, rec->target, rec->origin, need, from);
			goto out;
		}
		rc = git_reference_create_matching(&out, repo, ref, &target,
						   have, have ? &disk : NULL,
						   "grantd: replicated");
		if (rc < 0) {
			if (rc != GIT_EMODIFIED && rc != GIT_EEXISTS &&
			    rc != GIT_ENOTFOUND && rc != GIT_ELOCKED)
				set_error(g, "cannot move %s in %s: %s", ref,
					  name, git_why());
			goto out;
		}
		STAT_ADD(g, refs_moved, 1);
		log_info("ref moved repo=%s ref=%s to=%s origin=%s", name, ref,
			 rec->target, rec->origin ? rec->origin : "-");
	}
	res = losers(g, repo, name, ref, &target, need, from);
out:
	git_reference_free(out);
	git_odb_free(odb);
	if (rec)
		grantd__v1__ref__free_unpacked(rec, NULL);
	buf_free(&v);
	return res;
}

static void item_add(struct gitrepl *g, const char *key, size_t klen,
		     bool dedupe)
{
	if (dedupe)
		for (size_t i = 0; i < g->nitems; i++)
			if (g->items[i].klen == klen &&
			    !memcmp(g->items[i].key, key, klen)) {
				g->items[i].not_before_ms = 0;
				return;
			}
	if (g->nitems == g->capitems) {
		g->capitems = g->capitems ? 2 * g->capitems : 64;
		g->items = realloc(g->items, g->capitems * sizeof(*g->items));
		if (!g->items)
			abort();
	}
	struct item *it = &g->items[g->nitems++];
	*it = (struct item){ .klen = klen };
	if (!(it->key = malloc(klen)))
		abort();
	memcpy(it->key, key, klen);
}

static void item_del(struct gitrepl *g, size_t i)
{
	free(g->items[i].key);
	g->items[i] = g->items[--g->nitems];
}

/* "repo \0 ref \0" ... from the writer. */
static void add_changed(struct gitrepl *g, const char *p, size_t len)
{
	/* small lists are merged; a flood (a catch-up) is taken as is, and
	 * a ref listed twice only costs a second look */
	bool dedupe = g->nitems < 4096;
	size_t off = 0;

	while (off < len) {
		size_t a = strnlen(p + off, len - off);
		if (off + a + 1 >= len)
			break;
		size_t b = strnlen(p + off + a + 1, len - off - a - 1);
		if (off + a + 1 + b + 1 > len)
			break;
		item_add(g, p + off, a + 1 + b + 1, dedupe);
		off += a + 1 + b + 1;
	}
}

static void add_all(struct gitrepl *g)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, k = BUF_INIT;
	const char *key;
	size_t klen;

	for (size_t i = g->nitems; i-- > 0;)
		if (!g->items[i].waiting)
			item_del(g, i);
	store_iter_new(&it, g->n->store, NULL, CF_REFS, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0) {
		buf_reset(&k);
		buf_add(&k, key, klen);
		item_add(g, k.p, k.len + 1, false);
	}
	store_iter_free(&it);
	buf_free(&v);
	buf_free(&k);
}

/* Check the refs that are due; collect the objects one repository lacks
 * into one fetch.  Returns true when more are due right away. */
static bool work(struct gitrepl *g)
{
	uint64_t t = now_ms();
	char fetch_repo[NAME_REPO_MAX + 1] = "";
	int fetch_from = -1, done = 0;
	bool more = false;

	for (size_t i = 0; i < g->nitems;) {
		struct item *it = &g->items[i];
		char need[OID_HEX + 1];
		int from = -1;

		if (it->waiting || it->not_before_ms > t) {
			i++;
			continue;
		}
		if (done++ == WORK_MAX) {
			more = true;
			break;
		}
		if (g->f.active && !strcmp(it->key, g->f.repo)) {
			i++; /* its repository is being fetched into */
			continue;
		}
		switch (reconcile(g, it, need, &from)) {
		case V_DONE:
			item_del(g, i);
			continue;
		case V_NEED:
			if (!g->f.active && (!*fetch_repo ||
					     !strcmp(fetch_repo, it->key))) {
				struct fetch *f = &g->f;
				bool dup = false;
				snprintf(fetch_repo, sizeof(fetch_repo), "%s",
					 it->key);
				for (size_t k = 0; k < f->nwants; k++)
					dup |= !strcmp(f->wants[k], need);
				if (!dup && f->nwants < WANTS_MAX)
					memcpy(f->wants[f->nwants++], need,
					       OID_HEX + 1);
				if (fetch_from < 0)
					fetch_from = from;
				it->waiting = true;
				break;
			}
			it->not_before_ms = t + 100; /* after this fetch */
			break;
		case V_RETRY:
			back_off(it, t);
			break;
		}
		i++;
	}
	if (*fetch_repo) {
		fetch_start(g, fetch_repo, fetch_from);
		if (!g->f.active) /* could not even start */
			for (size_t i = 0; i < g->nitems; i++)
				if (g->items[i].waiting) {
					g->items[i].waiting = false;
					g->items[i].not_before_ms = t +
								    RETRY_MAX_MS;
				}
		g->f.nwants = g->f.active ? g->f.nwants : 0;
	}
	if (!g->nitems)
		g->prefer = -1; /* a rebuild's sweep is over */
	pthread_mutex_lock(&g->mu);
	g->st.pending = g->nitems;
	pthread_mutex_unlock(&g->mu);
	return more;
}

/* ---- the actor's loop -------------------------------------------------------- */

/* One message from the writer. */
static void pair_msg(struct gitrepl *g, uint8_t *chunk)
{
	zmq_msg_t parts[4];
	int n = 0;

	(void)chunk;
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
	switch (tag[0]) {
	case 'C':
		add_changed(g, tag + 1, tlen - 1);
		break;
	case 'A': {
		char site[NAME_SITE_MAX + 1] = "";
		if (tlen > 1 && tlen - 1 <= NAME_SITE_MAX)
			memcpy(site, tag + 1, tlen - 1);
		g->prefer = *site ? peer_index(g, site) : -1;
		add_all(g);
		break;
	}
	case 'S':
		if (n == 4) {
			struct buf rid = BUF_INIT;
			char site[NAME_SITE_MAX + 1];
			size_t sl = zmq_msg_size(&parts[2]);
			if (sl > NAME_SITE_MAX)
				break;
			memcpy(site, zmq_msg_data(&parts[2]), sl);
			site[sl] = '\0';
			buf_add(&rid, zmq_msg_data(&parts[1]),
				zmq_msg_size(&parts[1]));
			Grantd__V1__PeerMsg *m = decode(
				site, zmq_msg_data(&parts[3]),
				zmq_msg_size(&parts[3]));
			struct stream *s = NULL;
			if (m && m->body_case ==
					 GRANTD__V1__PEER_MSG__BODY_PACK_REQ)
				serve_req(g, &rid, site, m->pack_req);
			else if (m && m->body_case ==
					      GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT &&
				 (s = stream_find(g, site, m->pack_credit->id))) {
				uint64_t c = (uint64_t)s->credit +
					     m->pack_credit->n;
				s->credit = c > CREDIT_MAX ? CREDIT_MAX :
							     (uint32_t)c;
				s->last_ms = now_ms();
			} else if (m && m->body_case ==
						GRANTD__V1__PEER_MSG__BODY_PACK_ERR &&
				   (s = stream_find(g, site, m->pack_err->id))) {
				log_info("pack stream cancelled by peer=%s",
					 site);
				stream_close(g, s);
			}
			if (m)
				grantd__v1__peer_msg__free_unpacked(m, NULL);
			buf_free(&rid);
		}
		break;
	case 'Q':
		g->quit = true;
		break;
	}
out:
	for (int i = 0; i < n; i++)
		zmq_msg_close(&parts[i]);
}

static void *actor(void *arg)
{
	struct gitrepl *g = arg;
	zmq_pollitem_t items[1 + CONFIG_MAX_PEERS + STREAMS_MAX];
	struct stream *polled[STREAMS_MAX];
	uint8_t *chunk = malloc(CHUNK_MAX);
	bool more = false;

	if (!chunk)
		abort();
	while (!g->quit) {
		int k = 0, ns = 0;
		items[k++] = (zmq_pollitem_t){ g->pair, 0, ZMQ_POLLIN, 0 };
		for (int i = 0; i < g->npeers; i++)
			items[k++] = (zmq_pollitem_t){ g->dealer[i], 0,
						       ZMQ_POLLIN, 0 };
		for (int i = 0; i < g->nstreams; i++)
			if (g->streams[i].credit > 0) {
				polled[ns++] = &g->streams[i];
				items[k++] = (zmq_pollitem_t){
					NULL, g->streams[i].fd, ZMQ_POLLIN, 0 };
			}
		if (zmq_poll(items, k, more ? 0 : 100) < 0) {
			if (errno == EINTR)
				continue;
			log_error("gitrepl poll failed: %s",
				  zmq_strerror(errno));
			break;
		}
		/* streams first: polled[] points into g->streams, which
		 * pair_msg may reorder by closing one; closing one here
		 * reorders too, so go from the end */
		for (int i = ns; i-- > 0;)
			if (items[1 + g->npeers + i].revents)
				stream_read(g, polled[i], chunk);
		if (items[0].revents)
			for (int b = 0; b < 64 && !g->quit; b++) {
				int ev = 0;
				size_t el = sizeof(ev);
				pair_msg(g, chunk);
				if (zmq_getsockopt(g->pair, ZMQ_EVENTS, &ev,
						   &el) < 0 ||
				    !(ev & ZMQ_POLLIN))
					break;
			}
		for (int i = 0; i < g->npeers; i++) {
			zmq_msg_t msg;
			for (int b = 0; b < 64; b++) {
				zmq_msg_init(&msg);
				if (zmq_msg_recv(&msg, g->dealer[i],
						 ZMQ_DONTWAIT) < 0) {
					zmq_msg_close(&msg);
					break;
				}
				if (!zmq_msg_more(&msg))
					dealer_msg(g, i, &msg);
				zmq_msg_close(&msg);
			}
		}
		uint64_t t = now_ms();
		for (int i = 0; i < g->nstreams; i++) {
			struct stream *st = &g->streams[i];
			if (st->credit && t - st->sent_ms > KEEPALIVE_MS)
				send_chunk(g, st, "", 0, false);
		}
		for (int i = g->nstreams; i-- > 0;)
			if (!g->streams[i].credit &&
			    t - g->streams[i].last_ms > SERVE_IDLE_MS) {
				log_warn("pack stream dropped peer=%s: no "
					 "credit for %d s", g->streams[i].site,
					 SERVE_IDLE_MS / 1000);
				stream_close(g, &g->streams[i]);
			}
		if (g->f.active && t - g->f.last_ms > FETCH_IDLE_MS)
			fetch_failed_peer(g, "timed out");
		more = work(g);
	}
	while (g->nstreams)
		stream_close(g, &g->streams[0]);
	if (g->f.active) {
		g->f.first = -1;
		g->f.tried = ~0u;
		fetch_done(g, false);
	}
	git_repository_free(g->repo);
	g->repo = NULL;
	free(chunk);
	return NULL;
}

/* ---- the writer's side ------------------------------------------------------- */

static void pair_opts(void *s)
{
	int zero = 0;
	zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
}

int gitrepl_start(struct gitrepl **out, struct node *n)
{
	struct gitrepl *g = calloc(1, sizeof(*g));

	if (!g)
		abort();
	*out = NULL;
	g->n = n;
	g->prefer = -1;
	/* stream ids unlike those of an earlier run of this node, whose
	 * streams a peer may still hold */
	randombytes_buf(&g->next_id, sizeof(g->next_id));
	g->next_id >>= 1;
	pthread_mutex_init(&g->mu, NULL);
	for (int i = 0; i < STREAMS_MAX; i++)
		g->streams[i].fd = -1;
	/* fsync objects and refs before a ref points at them */
	git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, 1);
	snprintf(g->endpoint, sizeof(g->endpoint), "inproc://gitrepl-%p",
		 (void *)g);
	g->main_pair = zmq_socket(n->zctx, ZMQ_PAIR);
	g->pair = zmq_socket(n->zctx, ZMQ_PAIR);
	if (!g->main_pair || !g->pair)
		goto fail;
	pair_opts(g->main_pair);
	pair_opts(g->pair);
	if (zmq_bind(g->main_pair, g->endpoint) < 0 ||
	    zmq_connect(g->pair, g->endpoint) < 0)
		goto fail;
	for (int i = 0; i < n->cfg->npeers; i++) {
		const struct config_peer *p = &n->cfg->peers[i];
		g->dealer[i] = repl_curve_client(n, ZMQ_DEALER, p->sync,
						 p->public_key, DEALER_MSG_MAX);
		if (!g->dealer[i])
			goto fail;
		g->npeers++;
	}
	/* the sockets are handed to the actor: it alone uses them now */
	if (pthread_create(&g->thread, NULL, actor, g) != 0)
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
		zmq_send(g->main_pair, "Q", 1, 0);
		pthread_join(g->thread, NULL);
	}
	for (int i = 0; i < g->npeers; i++)
		zmq_close(g->dealer[i]);
	if (g->pair)
		zmq_close(g->pair);
	if (g->main_pair)
		zmq_close(g->main_pair);
	for (size_t i = 0; i < g->nitems; i++)
		free(g->items[i].key);
	free(g->items);
	buf_free(&g->f.qdir);
	pthread_mutex_destroy(&g->mu);
	free(g);
	*gp = NULL;
}

void *gitrepl_socket(struct gitrepl *g) { return g->main_pair; }

void gitrepl_pump(struct gitrepl *g, void *router)
{
	for (int b = 0; b < 256; b++) {
		zmq_msg_t rid, body;
		zmq_msg_init(&rid);
		if (zmq_msg_recv(&rid, g->main_pair, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&rid);
			return;
		}
		zmq_msg_init(&body);
		if (!zmq_msg_more(&rid) ||
		    zmq_msg_recv(&body, g->main_pair, 0) < 0) {
			zmq_msg_close(&body);
			zmq_msg_close(&rid);
			continue;
		}
		/* ROUTER_MANDATORY: a peer gone means EHOSTUNREACH; a full
		 * queue EAGAIN.  Either way the frame is dropped and the
		 * stream times out at the asker, who asks again. */
		if (zmq_msg_send(&rid, router, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
		    zmq_msg_send(&body, router, ZMQ_DONTWAIT) < 0)
			log_debug("pack frame for a peer dropped: %s",
				  zmq_strerror(errno));
		zmq_msg_close(&body);
		zmq_msg_close(&rid);
	}
}

void gitrepl_changed(struct gitrepl *g, struct buf *refs)
{
	if (!refs->len)
		return;
	uint8_t *p = malloc(refs->len + 1);
	if (!p)
		abort();
	p[0] = 'C';
	memcpy(p + 1, refs->p, refs->len);
	zmq_send(g->main_pair, p, refs->len + 1, 0);
	free(p);
	buf_reset(refs);
}

void gitrepl_all(struct gitrepl *g, const char *prefer)
{
	char m[1 + NAME_SITE_MAX + 1];
	int k = snprintf(m, sizeof(m), "A%s", prefer ? prefer : "");
	zmq_send(g->main_pair, m, (size_t)k, 0);
}

void gitrepl_serve(struct gitrepl *g, const void *rid, size_t ridlen,
		   const char *site, const void *body, size_t len)
{
	zmq_send(g->main_pair, "S", 1, ZMQ_SNDMORE);
	zmq_send(g->main_pair, rid, ridlen, ZMQ_SNDMORE);
	zmq_send(g->main_pair, site, strlen(site), ZMQ_SNDMORE);
	zmq_send(g->main_pair, body, len, 0);
}

void gitrepl_status(struct gitrepl *g, cJSON *obj)
{
	struct stats st;

	pthread_mutex_lock(&g->mu);
	st = g->st;
	pthread_mutex_unlock(&g->mu);
	cJSON_AddNumberToObject(obj, "pending_refs", (double)st.pending);
	cJSON_AddNumberToObject(obj, "packs_fetched", (double)st.fetches);
	cJSON_AddNumberToObject(obj, "fetch_failures",
				(double)st.fetch_failures);
	cJSON_AddNumberToObject(obj, "bytes_fetched", (double)st.bytes_in);
	cJSON_AddNumberToObject(obj, "packs_served", (double)st.served);
	cJSON_AddNumberToObject(obj, "bytes_served", (double)st.bytes_out);
	cJSON_AddNumberToObject(obj, "refs_moved", (double)st.refs_moved);
	cJSON_AddNumberToObject(obj, "conflicts_kept", (double)st.conflicts);
	cJSON_AddNumberToObject(obj, "last_fetch_ms", (double)st.last_fetch_ms);
	cJSON_AddNumberToObject(obj, "last_fetch_bytes",
				(double)st.last_fetch_bytes);
	cJSON_AddStringToObject(obj, "last_error", st.last_error);
}
