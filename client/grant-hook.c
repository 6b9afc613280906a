/*
 * grant-hook: the post-receive hook of every hosted repository (the node
 * installs it).  It hands the node the pushed ref updates ("OLD NEW REF"
 * lines on stdin) so they replicate to every site, and returns at once.
 *
 * Nothing is lost when the node is down: the lines are written to
 * GIT_DIR/grantd-spool/ (fsynced) and sent later, by the next push's hook
 * or by the node itself when it starts.  Spooled files are sent first, in
 * order, so the updates of one repository keep their order.
 *
 * A push is kept on every outcome but a "malformed" answer (status 2):
 * no answer at all, a timeout (the node may have recorded it and not
 * answered in time), a refusal or an internal error.  So it may be sent
 * twice: each push gets an id (hookline.h), kept in its spool file and
 * sent with every request, and the node records a request id once, so a
 * repeat is answered OK without a second, newer record that could move a
 * ref back over a later push from another site.
 *
 * Once recorded, a push with a transparency log leaf (issue 21) is shown
 * to the pusher as git shows a hook's stderr: "remote: grantd: logged as
 * SITE#INDEX", the leaf grant-log can prove (docs/push-log.md).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "buf.h"
#include "err.h"
#include "hookline.h"
#include "names.h"
#include "spool.h"
#include "wire.h"
#include "version.h"
#include "xalloc.h"
#include "banned.h"

static const char prog[] = "grant-hook";

#define LINES_PER_REQUEST 512
/* and at most this many bytes of lines, well under GD_CTL_MAX_REQUEST */
#define BYTES_PER_REQUEST (48 * 1024)
/* the most input read (stdin or a spool file) */
#define HOOK_MAX_INPUT (32 * 1024 * 1024)

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: grant-hook [--config FILE]\n"
"\n"
"The post-receive hook of hosted repositories (installed by grantd): reads\n"
"git's \"OLD NEW REF\" lines on stdin and hands them to the node, which\n"
"replicates the push to every site.  Run in the repository (GIT_DIR).  Unless\n"
"the node records them (or answers that they are malformed) the lines are\n"
"kept in GIT_DIR/%s/, with the push's id, and sent again later: by\n"
"the next push's hook or by the node when it starts.  The node records a\n"
"push id once, so a push sent again after a timeout is not recorded twice.\n"
"The push itself is never refused.  Who pushed (for the push log) comes\n"
"from grant-shell's GRANTD_PUSH_USER, GRANTD_PUSH_IP, GRANTD_PUSH_KEY_FP,\n"
"GRANTD_PUSH_KEY_KIND and GRANTD_PUSH_FACTOR (under gitolite: GL_USER and\n"
"SSH_CONNECTION), and is kept in the spool with the lines.\n"
"\n"
"  --config FILE  configuration (default $GRANTD_CONFIG, then %s)\n"
"  -h, --help     this text\n"
"  --version      print the version and exit\n"
"\n"
"Exit status: 0 sent or kept for later, 2 usage or input error (a line\n"
"that is not \"OLD NEW REF\": nothing is sent).\n",
		SPOOL_DIR, CONFIG_DEFAULT_PATH);
}

/* The hosted name of the repository in the current directory: 0,
 * GD_EINVAL (not under repo_dir) or GD_EDENIED (a name grantd does not
 * host, e.g. with a '@' that gitolite allows: it is said why). */
static int repo_name(char *out, size_t len, const struct config *cfg)
{
	char here[PATH_MAX], root[PATH_MAX];
	size_t rl;

	if (!getcwd(here, sizeof(here)) || !realpath(cfg->repo_dir, root))
		return GD_EIO;
	rl = strlen(root);
	if (strncmp(here, root, rl) || here[rl] != '/')
		return GD_EINVAL;
	if (name_repo_norm(out, len, here + rl + 1) < 0) {
		fprintf(stderr, "%s: repository '%.300s' is not replicated: "
			"grantd names are parts of [A-Za-z0-9_.+-] separated "
			"by '/', none starting with '.'\n", prog,
			here + rl + 1);
		return GD_EDENIED;
	}
	return 0;
}

/* Read a push's lines (and id) from fp.  0, GD_EIO, GD_ETOOBIG or
 * GD_EINVAL (*bad_line: which line is malformed). */
static int read_lines(struct hooklines *l, FILE *fp, size_t *bad_line)
{
	struct buf in = BUF_INIT;
	size_t n;
	int rc = 0;

	*bad_line = 0;
	do {
		n = fread(buf_extend(&in, 65536), 1, 65536, fp);
		in.len -= 65536 - n;
		if (in.len > HOOK_MAX_INPUT)
			rc = GD_ETOOBIG;
	} while (rc == 0 && n > 0);
	if (rc == 0 && ferror(fp))
		rc = GD_EIO;
	if (rc == 0)
		rc = hooklines_parse(l, in.p, in.len, bad_line);
	buf_free(&in);
	return rc;
}

/* How many lines from off go in one request: a part of a push is the
 * same every time the push is sent, so its request id names the same
 * lines. */
static size_t part_lines(const struct hooklines *l, size_t off)
{
	size_t n = 0, bytes = 0;

	while (off + n < l->n && n < LINES_PER_REQUEST &&
	       (n == 0 || bytes + strlen(l->v[off + n]) + 8 <=
				  BYTES_PER_REQUEST))
		bytes += strlen(l->v[off + n++]) + 8;
	return n;
}

/* The answer's "logged as SITE#INDEX" lines (hook.refs, one per leaf
 * made), on stderr as "grantd: logged as SITE#INDEX": a site name and a
 * number only, never anything else the answer holds. */
static void show_logged(const char *out)
{
	static const char tag[] = "logged as ";

	for (const char *p = out; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		size_t t = strlen(tag);
		if (n > t && n < t + 96 && !strncmp(p, tag, t) &&
		    strspn(p + t, "abcdefghijklmnopqrstuvwxyz0123456789-#") ==
		            n - t)
			fprintf(stderr, "grantd: %.*s\n", (int)n, p);
		p = nl ? nl + 1 : NULL;
	}
}

/* 0 recorded; GD_EINVAL: the node says the lines are malformed (status 2:
 * sending them again cannot help); GD_EUNREACH: anything else (no answer,
 * a timeout, a refusal, an internal error), so keep them.  show: print
 * where the node logged them (this push's lines, not a spool's). */
static int send_lines(const struct config *cfg, const char *repo,
		      const struct hooklines *l, bool show)
{
	unsigned part = 0;
	size_t n;

	for (size_t off = 0; off < l->n; off += n, part++) {
		Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;
		Grantd__V1__Reply *rep = NULL;
		char **args;
		char id[HOOKLINE_REQ_ID_MAX + 1];
		int rc;

		n = part_lines(l, off);
		args = xcalloc(n + 1, sizeof(*args));
		args[0] = (char *)repo;
		memcpy(args + 1, l->v + off, n * sizeof(*args));
		char user[HOOKLINE_BY_VALUE_MAX + 1], ip[sizeof(user)];
		char fp[sizeof(user)], kind[sizeof(user)], factor[sizeof(user)];
		req.cmd = "hook.refs";
		/* who pushed: the node records it in the push log */
		req.user = hookline_by_get(user, l->by, "user") ? user : NULL;
		req.client_ip = hookline_by_get(ip, l->by, "ip") ? ip : NULL;
		req.key_fp = hookline_by_get(fp, l->by, "fp") ? fp : NULL;
		req.key_kind = hookline_by_get(kind, l->by, "kind") ? kind
								      : NULL;
		req.factor = hookline_by_get(factor, l->by, "factor") ? factor
								       : NULL;
		req.args = args;
		req.n_args = n + 1;
		req.version = GD_WIRE_VERSION, req.has_version = 1;
		/* the same id for this part every time it is sent */
		hookline_req_id(id, l->id, part);
		req.push_id = id;
		rc = wire_call(&rep, cfg->user_socket, &req, CLI_TIMEOUT_MS);
		free(args);
		if (rc < 0) {
			fprintf(stderr, "%s: no answer from the grantd node "
				"(%s)\n", prog, gd_strerror(rc));
			return GD_EUNREACH;
		}
		rc = rep->status;
		if (rc == GD_EXIT_OK && show)
			show_logged(rep->out);
		if (rc != GD_EXIT_OK)
			fprintf(stderr, "%s: the grantd node answered status "
				"%d: %s\n", prog, rc,
				rep->err ? rep->err : "(no reason given)");
		grantd__v1__reply__free_unpacked(rep, NULL);
		if (rc == GD_EXIT_USAGE)
			return GD_EINVAL;
		if (rc != GD_EXIT_OK)
			return GD_EUNREACH;
	}
	return 0;
}

/* Write l (its id first) as the spool file name: written and fsynced
 * under a temporary name first, so a crash leaves the old file or the new
 * one, never a part. */
static int spool_write(const char *name, const struct hooklines *l)
{
	char tmp[300];
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return GD_EIO;
	FILE *fp = fdopen(fd, "w");
	if (fp && fprintf(fp, "id %s\n", l->id) < 0)
		rc = GD_EIO;
	if (fp && l->by[0] && fprintf(fp, "by %s\n", l->by) < 0)
		rc = GD_EIO;
	for (size_t i = 0; fp && i < l->n; i++)
		if (fprintf(fp, "%s\n", l->v[i]) < 0)
			rc = GD_EIO;
	if (!fp || fflush(fp) != 0 || fsync(fd) != 0)
		rc = GD_EIO;
	if (fp)
		fclose(fp);
	else
		close(fd);
	if (rc == 0 && rename(tmp, name) < 0)
		rc = GD_EIO;
	if (rc < 0)
		unlink(tmp);
	if (rc == 0) {
		int dfd = open(SPOOL_DIR, O_RDONLY | O_DIRECTORY);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	return rc;
}

/* Keep l for later: a new file in the spool, named so files sort in the
 * order they were made. */
static int spool(const struct hooklines *l)
{
	char name[256];
	struct timespec ts;

	if (mkdir(SPOOL_DIR, 0700) < 0 && errno != EEXIST)
		return GD_EIO;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(name, sizeof(name), SPOOL_DIR "/%020lld.%09ld.%d" SPOOL_SUFFIX,
		 (long long)ts.tv_sec, ts.tv_nsec, (int)getpid());
	return spool_write(name, l);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_refs(const struct dirent *d)
{
	return spool_is_file(d->d_name);
}

/* Send one spooled file: 0 done with it (sent, or malformed: either way
 * it goes), GD_EUNREACH (keep it and stop). */
static int flush_one(const struct config *cfg, const char *repo,
		     const char *path)
{
	struct hooklines l = { 0 };
	size_t bad = 0;
	int rc = 0;
	FILE *fp = fopen(path, "r");

	if (!fp) {
		fprintf(stderr, "%s: cannot read %s: %s\n", prog, path,
			strerror(errno));
		return GD_EUNREACH;
	}
	rc = read_lines(&l, fp, &bad);
	fclose(fp);
	if (rc == GD_EINVAL || rc == GD_ETOOBIG) {
		fprintf(stderr, "%s: %s is not a spool file (line %zu); "
			"dropped\n", prog, path, bad);
		rc = 0;
	} else if (rc < 0) {
		rc = GD_EUNREACH;
	} else if (!*l.id &&
		   (hookline_id_make(l.id, (uint64_t)time(NULL) * 1000) < 0 ||
		    spool_write(path, &l) < 0)) {
		/* a file an earlier version wrote: its id is kept with it
		 * before it is sent, or a resend would carry another one */
		rc = GD_EUNREACH;
	} else {
		rc = send_lines(cfg, repo, &l, false);
		if (rc == GD_EINVAL)
			fprintf(stderr, "%s: the node refused %s as malformed; "
				"dropped\n", prog, path);
		rc = rc == GD_EINVAL ? 0 : rc;
	}
	if (rc == 0)
		unlink(path);
	hooklines_free(&l);
	return rc;
}

/* Send what earlier hooks had to keep, oldest first; stop at the first
 * that cannot be sent (order matters).  0, or GD_EUNREACH. */
static int flush_spool(const struct config *cfg, const char *repo)
{
	struct dirent **ents = NULL;
	int n = scandir(SPOOL_DIR, &ents, is_refs, by_name), rc = 0;

	for (int i = 0; i < n; i++) {
		char path[512];
		snprintf(path, sizeof(path), SPOOL_DIR "/%s", ents[i]->d_name);
		if (rc == 0)
			rc = flush_one(cfg, repo, path);
		free(ents[i]);
	}
	free(ents);
	return rc;
}

/* Who made this push, from the environment grant-shell (or gitolite)
 * gave git: what does not pass is left out.  The key kind only as the
 * node knows kinds (another would get the lines refused as malformed). */
static void who_pushed(char by[HOOKLINE_BY_MAX + 1])
{
	const char *user = getenv("GRANTD_PUSH_USER"), *ip;
	const char *kind = getenv("GRANTD_PUSH_KEY_KIND");
	char conn[128] = "";

	by[0] = '\0';
	ip = getenv("GRANTD_PUSH_IP");
	if (!user && getenv("GL_USER")) {
		/* gitolite: its user, and the address sshd saw */
		const char *c = getenv("SSH_CONNECTION");
		user = getenv("GL_USER");
		if (c) {
			snprintf(conn, sizeof(conn), "%s", c);
			conn[strcspn(conn, " ")] = '\0';
			ip = conn;
		}
	}
	if (user && name_user_ok(user))
		hookline_by_add(by, "user", user);
	hookline_by_add(by, "ip", ip);
	hookline_by_add(by, "fp", getenv("GRANTD_PUSH_KEY_FP"));
	if (kind && (!strcmp(kind, "plain") || !strcmp(kind, "sk-touch") ||
		     !strcmp(kind, "sk-pin")))
		hookline_by_add(by, "kind", kind);
	hookline_by_add(by, "factor", getenv("GRANTD_PUSH_FACTOR"));
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL;
	struct config *cfg = NULL;
	char repo[NAME_REPO_MAX + 1];
	struct hooklines l = { 0 };
	struct timespec now;
	size_t bad;
	int i, rc;

	if (argc > 1 && !strcmp(argv[1], "--version")) {
		printf("%s %s\n", prog, GRANTD_VERSION);
		return GD_EXIT_OK;
	}
	rc = cli_options(argc, argv, &i, prog, usage, &cfg_path, NULL);
	if (rc >= 0)
		return rc;
	if (i != argc) {
		fprintf(stderr, "%s: unexpected argument '%s' (see %s "
			"--help)\n", prog, argv[i], prog);
		return GD_EXIT_USAGE;
	}
	if ((rc = cli_load_config(&cfg, prog, cfg_path)) != 0)
		return rc;
	if ((rc = repo_name(repo, sizeof(repo), cfg)) < 0) {
		if (rc != GD_EDENIED)
			fprintf(stderr, "%s: not run inside a repository under "
				"repo_dir %s\n", prog, cfg->repo_dir);
		rc = GD_EXIT_USAGE;
		goto done;
	}
	if ((rc = read_lines(&l, stdin, &bad)) < 0) {
		if (rc == GD_EINVAL)
			fprintf(stderr, "%s: bad ref update line %zu (want 'OLD "
				"NEW REF' as post-receive reads them); nothing "
				"sent\n", prog, bad);
		else
			fprintf(stderr, "%s: cannot read the ref updates: %s\n",
				prog, gd_strerror(rc));
		rc = GD_EXIT_USAGE;
		goto done;
	}
	/* an id or "by" given on stdin is not ours to reuse: every push
	 * gets its own */
	who_pushed(l.by);
	clock_gettime(CLOCK_REALTIME, &now);
	if (l.n && hookline_id_make(l.id, (uint64_t)now.tv_sec * 1000 +
						  (uint64_t)now.tv_nsec / 1000000) < 0) {
		fprintf(stderr, "%s: no random bytes for the push id\n", prog);
		rc = GD_EXIT_USAGE;
		goto done;
	}
	/* One hook at a time in a repository (the node re-runs this hook to
	 * send a spool; other pushes' hooks may be at it too), from the
	 * first spooled file to this push's own spool file: a file sent
	 * twice, or a later push sent before an earlier one is kept, would
	 * put the records out of the pushes' order. */
	int lock = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock >= 0 && flock(lock, LOCK_EX) < 0) {
		close(lock);
		lock = -1;
	}
	rc = flush_spool(cfg, repo);
	if (rc == 0 && l.n)
		rc = send_lines(cfg, repo, &l, true);
	if (rc == GD_EUNREACH && l.n) {
		if (spool(&l) == 0)
			fprintf(stderr, "%s: the grantd node did not record this "
				"push; it is kept in %s/ and will be sent again "
				"(by the next push, or by the node when it "
				"starts)\n", prog, SPOOL_DIR);
		else
			fprintf(stderr, "%s: the grantd node did not record this "
				"push and it could not be kept: %s\n", prog,
				strerror(errno));
	} else if (rc == GD_EINVAL) {
		fprintf(stderr, "%s: the node refused these lines as "
			"malformed; nothing kept\n", prog);
	}
	if (lock >= 0)
		close(lock); /* releases the lock */
	rc = GD_EXIT_OK;
done:
	hooklines_free(&l);
	config_free(&cfg);
	return rc;
}
