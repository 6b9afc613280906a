/*
 * grant-hook: the post-receive hook of every hosted repository (the node
 * installs it).  It hands the node the pushed ref updates ("OLD NEW REF"
 * lines on stdin) so they replicate to every site, and returns at once.
 *
 * Nothing is lost when the node is down: the lines are written to
 * GIT_DIR/grantd-spool/ (fsynced) and sent later, by the next push's hook
 * or by the node itself when it starts.  Spooled files are sent first, in
 * order, so the updates of one repository keep their order.
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
#include "err.h"
#include "names.h"
#include "wire.h"
#include "banned.h"

static const char prog[] = "grant-hook";

#define SPOOL_DIR "grantd-spool"
#define LINES_PER_REQUEST 512
#define MAX_LINES 100000

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: grant-hook [--config FILE]\n"
"\n"
"The post-receive hook of hosted repositories (installed by grantd): reads\n"
"git's \"OLD NEW REF\" lines on stdin and hands them to the node, which\n"
"replicates the push to every site.  Run in the repository (GIT_DIR).  If\n"
"the node is unreachable the lines are kept in GIT_DIR/%s/ and sent\n"
"later; the push itself is never refused.\n"
"\n"
"  --config FILE  configuration (default $GRANTD_CONFIG, then %s)\n"
"  -h, --help     this text\n"
"\n"
"Exit status: 0 sent or kept for later, 2 usage or input error.\n",
		SPOOL_DIR, CONFIG_DEFAULT_PATH);
}

/* The hosted name of the repository in the current directory. */
static int repo_name(char *out, size_t len, const struct config *cfg)
{
	char here[PATH_MAX], root[PATH_MAX];
	size_t rl;

	if (!getcwd(here, sizeof(here)) || !realpath(cfg->repo_dir, root))
		return GD_EIO;
	rl = strlen(root);
	if (strncmp(here, root, rl) || here[rl] != '/')
		return GD_EINVAL;
	return name_repo_norm(out, len, here + rl + 1);
}

struct lines {
	char **v;
	size_t n, cap;
};

static int read_lines(struct lines *l, FILE *fp)
{
	char line[1024];

	while (fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (!*line)
			continue;
		if (l->n == MAX_LINES)
			return GD_ETOOBIG;
		if (l->n == l->cap) {
			l->cap = l->cap ? 2 * l->cap : 64;
			l->v = realloc(l->v, l->cap * sizeof(*l->v));
			if (!l->v)
				abort();
		}
		if (!(l->v[l->n++] = strdup(line)))
			abort();
	}
	return ferror(fp) ? GD_EIO : 0;
}

static void lines_free(struct lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* 0 sent, GD_EUNREACH (keep it), GD_EINVAL (the node refused it). */
static int send_lines(const struct config *cfg, const char *repo,
		      const struct lines *l)
{
	for (size_t off = 0; off < l->n; off += LINES_PER_REQUEST) {
		Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;
		Grantd__V1__Reply *rep = NULL;
		size_t n = l->n - off < LINES_PER_REQUEST ? l->n - off :
							    LINES_PER_REQUEST;
		char **args = calloc(n + 1, sizeof(*args));
		int rc;

		if (!args)
			abort();
		args[0] = (char *)repo;
		memcpy(args + 1, l->v + off, n * sizeof(*args));
		req.cmd = "hook.refs";
		req.args = args;
		req.n_args = n + 1;
		req.version = GD_WIRE_VERSION, req.has_version = 1;
		rc = wire_call(&rep, cfg->user_socket, &req, CLI_TIMEOUT_MS);
		free(args);
		if (rc < 0)
			return GD_EUNREACH;
		rc = rep->status;
		if (rc != GD_EXIT_OK && rep->err)
			fprintf(stderr, "%s: %s\n", prog, rep->err);
		grantd__v1__reply__free_unpacked(rep, NULL);
		if (rc != GD_EXIT_OK)
			return GD_EINVAL;
	}
	return 0;
}

/* Keep l for later: a new file in the spool, written and fsynced before
 * it gets its final name, so a crash leaves either nothing or all. */
static int spool(const struct lines *l)
{
	char tmp[300], name[256];
	struct timespec ts;
	int fd, rc = 0;

	if (mkdir(SPOOL_DIR, 0700) < 0 && errno != EEXIST)
		return GD_EIO;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(name, sizeof(name), SPOOL_DIR "/%020lld.%09ld.%d.refs",
		 (long long)ts.tv_sec, ts.tv_nsec, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return GD_EIO;
	FILE *fp = fdopen(fd, "w");
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
	if (rc == 0) {
		int dfd = open(SPOOL_DIR, O_RDONLY | O_DIRECTORY);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	return rc;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_refs(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return n > 5 && !strcmp(d->d_name + n - 5, ".refs");
}

/* Send what earlier hooks had to keep, oldest first; stop at the first
 * that cannot be sent (order matters).  0, or GD_EUNREACH. */
static int flush_spool(const struct config *cfg, const char *repo)
{
	struct dirent **ents = NULL;
	int n = scandir(SPOOL_DIR, &ents, is_refs, by_name), rc = 0;

	for (int i = 0; i < n; i++) {
		char path[512];
		struct lines l = { 0 };
		snprintf(path, sizeof(path), SPOOL_DIR "/%s", ents[i]->d_name);
		FILE *fp = rc == 0 ? fopen(path, "r") : NULL;
		if (fp) {
			if (read_lines(&l, fp) == 0) {
				int s = send_lines(cfg, repo, &l);
				if (s == GD_EUNREACH)
					rc = s;
				else
					unlink(path); /* sent, or refused for
						       * good: either way done */
			}
			fclose(fp);
		}
		lines_free(&l);
		free(ents[i]);
	}
	free(ents);
	return rc;
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL;
	struct config *cfg = NULL;
	char repo[NAME_REPO_MAX + 1];
	struct lines l = { 0 };
	int i, rc;

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
	if (repo_name(repo, sizeof(repo), cfg) < 0) {
		fprintf(stderr, "%s: not run inside a repository under "
			"repo_dir %s\n", prog, cfg->repo_dir);
		rc = GD_EXIT_USAGE;
		goto done;
	}
	if (read_lines(&l, stdin) < 0) {
		fprintf(stderr, "%s: cannot read the ref updates\n", prog);
		rc = GD_EXIT_USAGE;
		goto done;
	}
	/* one flusher at a time (the node re-runs this hook to send a
	 * spool; a push's hook may be at it too): a file sent twice would
	 * replay old lines with a newer stamp */
	int lock = open(SPOOL_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock >= 0 && flock(lock, LOCK_EX) < 0) {
		close(lock);
		lock = -1;
	}
	rc = flush_spool(cfg, repo);
	if (rc == 0 && l.n)
		rc = send_lines(cfg, repo, &l);
	if (lock >= 0)
		close(lock); /* releases the lock */
	if (rc == GD_EUNREACH && l.n) {
		if (spool(&l) == 0)
			fprintf(stderr, "%s: the grantd node is unreachable; "
				"this push is recorded and will replicate when "
				"it returns\n", prog);
		else
			fprintf(stderr, "%s: the grantd node is unreachable "
				"and the push could not be recorded: %s\n",
				prog, strerror(errno));
	}
	rc = GD_EXIT_OK;
done:
	lines_free(&l);
	config_free(&cfg);
	return rc;
}
