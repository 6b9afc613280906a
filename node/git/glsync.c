/*
 * glsync.c: gitolite mode's stage of git replication (glsync.h): the
 * admin sync, its child, its output, its counters.  Actor thread only.
 */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "gitproc.h"
#include "glsync.h"
#include "log.h"
#include "xalloc.h"
#include "banned.h"

#define GITOLITE_ADMIN  "gitolite-admin"
#define ADMIN_LOG_LINES 40 /* lines of a sync's output logged */
#define ADMIN_STOP_MS   5000 /* a sync's end waited for at stop */

/* One child at a time, never waited for: the compile takes seconds, and
 * a move meanwhile sets dirty again, so the newest commit is the one
 * compiled last. */
struct admin_sync {
	bool dirty; /* compile again */
	pid_t pid; /* the sync running, 0: none */
	int fd; /* its stdout and stderr, -1: closed */
	uint64_t started_ms;
	char commit[OID_HEX + 1]; /* HEAD when it started */
	struct buf line; /* a line not ended yet */
	unsigned lines; /* lines seen */
	char first_err[200]; /* its first line that says error */
	char last[200]; /* its last line */
};

struct glsync {
	struct gitio *io;
	char *gl_home, *gl_program, *conf_path;
	struct admin_sync admin;
};

/* The reconciler moved (or deleted) ref of repository name: when that is
 * the branch gitolite-admin's HEAD names (gitolite 3.6 compiles master
 * only; upstream, HEAD's branch), gitolite must compile it again. */
void glsync_moved(struct glsync *g,
                  git_repository *repo,
                  const char *name,
                  const char *ref)
{
	git_reference *head = NULL;
	const char *target;

	if (!g || strcmp(name, GITOLITE_ADMIN))
		return;
	if (git_reference_lookup(&head, repo, "HEAD") == 0 &&
	    (target = git_reference_symbolic_target(head)) &&
	    !strcmp(target, ref)) {
		g->admin.dirty = true;
		log_debug("gitolite admin moved ref=%s: compile again", ref);
	}
	git_reference_free(head);
}

/* One line of the sync's output: logged (the first ADMIN_LOG_LINES, with
 * control characters made '?'), the first that says error kept, and the
 * last. */
static void admin_line(struct glsync *g, char *line)
{
	struct admin_sync *a = &g->admin;
	char lower[sizeof(a->first_err)];
	size_t i;

	for (i = 0; line[i]; i++)
		if (iscntrl((unsigned char)line[i]))
			line[i] = '?';
	if (!*line)
		return;
	if (a->lines++ < ADMIN_LOG_LINES)
		log_info("gitolite admin sync: %.300s", line);
	else if (a->lines == ADMIN_LOG_LINES + 1)
		log_info("gitolite admin sync: further output not logged");
	snprintf(a->last, sizeof(a->last), "%s", line);
	for (i = 0; line[i] && i + 1 < sizeof(lower); i++)
		lower[i] = (char)tolower((unsigned char)line[i]);
	lower[i] = '\0';
	if (!*a->first_err &&
	    (strstr(lower, "fatal") || strstr(lower, "error")))
		snprintf(a->first_err, sizeof(a->first_err), "%s", line);
}

/* Hand each whole line of the sync's output to admin_line and keep the
 * rest; the rest too when all (its end) or when it grew past 4 KiB
 * without an end of line. */
static void admin_lines(struct glsync *g, bool all)
{
	struct buf *l = &g->admin.line;
	char *p = l->p, *end = l->p + l->len, *nl;
	size_t rest;

	if (!l->len)
		return;
	while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
		*nl = '\0';
		admin_line(g, p);
		p = nl + 1;
	}
	rest = (size_t)(end - p);
	if (rest && (all || rest > 4096)) {
		admin_line(g, p); /* NUL-terminated: the buffer's end */
		rest = 0;
	}
	memmove(l->p, p, rest);
	l->len = rest;
	l->p[rest] = '\0';
}

/* Read what the sync wrote so far; at its end (eof, or forced: it was
 * reaped) the pipe is closed and the last line ended. */
static void admin_read(struct glsync *g, bool force)
{
	struct admin_sync *a = &g->admin;
	char b[4096];
	bool eof = false;

	while (a->fd >= 0) {
		ssize_t n = read(a->fd, b, sizeof(b));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			eof = n == 0 || errno != EAGAIN;
			break;
		}
		buf_add(&a->line, b, (size_t)n);
		admin_lines(g, false);
	}
	if ((eof || force) && a->fd >= 0) {
		close(a->fd);
		a->fd = -1;
		admin_lines(g, true);
	}
}

/* The child's environment, built: gitolite as after a push to its admin
 * repository, and none of ours (GIT_CONFIG_GLOBAL=/dev/null above all:
 * repos_git_isolate).  env holds the strings, envp points at them. */
static void admin_env(const struct glsync *g, struct buf env[5], char *envp[6])
{
	struct passwd pw, *res = NULL;
	char pwbuf[4096], uid[32];
	const char *user = uid;

	snprintf(uid, sizeof(uid), "%u", (unsigned)getuid());
	if (getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res)
		user = res->pw_name;
	buf_printf(&env[0], "HOME=%s", g->gl_home);
	buf_printf(&env[1], "PATH=/usr/local/bin:/usr/bin:/bin");
	buf_printf(&env[2], "USER=%s", user);
	buf_printf(&env[3], "LOGNAME=%s", user);
	buf_printf(&env[4], "GRANTD_CONFIG=%s", g->conf_path);
	for (int i = 0; i < 5; i++)
		envp[i] = env[i].p;
	envp[5] = NULL;
}

/* Start `PROGRAM grantd-admin-sync` for the commit HEAD is at now. */
static void admin_spawn(struct glsync *g, uint64_t t)
{
	struct admin_sync *a = &g->admin;
	char *argv[] = { g->gl_program, "grantd-admin-sync", NULL };
	struct buf env[5] = { BUF_INIT, BUF_INIT, BUF_INIT, BUF_INIT,
			      BUF_INIT };
	char *envp[6];
	git_repository *repo;
	git_oid id;

	a->dirty = false;
	snprintf(a->commit, sizeof(a->commit), "-");
	if ((repo = gitio_repo(g->io, GITOLITE_ADMIN)) &&
	    git_reference_name_to_id(&id, repo, "HEAD") == 0)
		git_oid_tostr(a->commit, sizeof(a->commit), &id);
	a->lines = 0;
	a->first_err[0] = a->last[0] = '\0';
	buf_reset(&a->line);
	a->started_ms = t;
	admin_env(g, env, envp);
	struct gitproc_cmd c = GITPROC_CMD_INIT;
	c.prog = g->gl_program;
	c.argv = (const char *const *)argv;
	c.env = envp;
	c.dir = g->gl_home;
	c.no_stdin = c.out_pipe = c.stderr_to_stdout = true;
	if (gitproc_start(&c) < 0) {
		int e = errno;
		a->pid = 0;
		a->fd = -1;
		g->io->st->gitolite_syncs++;
		g->io->st->gitolite_failures++;
		snprintf(g->io->st->gitolite_last_error,
		         sizeof(g->io->st->gitolite_last_error),
		         "cannot run %s: %s", g->gl_program, strerror(e));
		log_error("gitolite admin not synced commit=%s: cannot run "
			  "program=%s: %s", a->commit, g->gl_program,
			  strerror(e));
	} else {
		a->pid = c.pid;
		a->fd = c.out;
		log_debug("gitolite admin sync started commit=%s pid=%d",
			  a->commit, (int)a->pid);
	}
	for (int i = 0; i < 5; i++)
		buf_free(&env[i]);
}

/* The sync ended with status rc (exit status, 128 + signal, -1). */
static void admin_done(struct glsync *g, int rc, uint64_t t)
{
	struct admin_sync *a = &g->admin;
	unsigned long long ms = (unsigned long long)(t - a->started_ms);

	a->pid = 0;
	g->io->st->gitolite_syncs++;
	if (rc == 0) {
		log_info("gitolite admin synced commit=%s ms=%llu rc=0",
			 a->commit, ms);
		return;
	}
	const char *why = *a->first_err ? a->first_err :
			  *a->last ? a->last : "no output";
	g->io->st->gitolite_failures++;
	/* bounded to fit: a long error is cut, status shows its start */
	snprintf(g->io->st->gitolite_last_error,
	         sizeof(g->io->st->gitolite_last_error),
	         "commit %.40s: rc=%d: %.180s", a->commit, rc, why);
	log_error("gitolite admin synced commit=%s ms=%llu rc=%d: %s",
		  a->commit, ms, rc, why);
}

/* From the loop: read the running sync's output, reap it (never
 * waiting), and start one when the admin repository moved since the last
 * one started. */
void glsync_tick(struct glsync *g, uint64_t t)
{
	struct admin_sync *a;

	if (!g)
		return;
	a = &g->admin;
	if (a->pid > 0) {
		admin_read(g, false);
		int rc = gitproc_poll(a->pid);
		if (rc == GITPROC_RUNNING)
			return;
		/* what it wrote before it ended; a grandchild still holding
		 * the pipe is not waited for */
		admin_read(g, true);
		admin_done(g, rc, t);
	}
	if (a->dirty)
		admin_spawn(g, t);
}

/* Stopping: a sync running gets ADMIN_STOP_MS to end (a compile cut
 * short would be done again at the next start anyway). */
void glsync_destroy(struct glsync **gsp)
{
	struct glsync *g = *gsp;
	if (!g)
		return;
	struct admin_sync *a = &g->admin;
	uint64_t end = clock_mono_ms() + ADMIN_STOP_MS;

	while (a->pid > 0 && clock_mono_ms() < end) {
		struct pollfd p = { .fd = a->fd, .events = POLLIN };
		if (a->fd < 0 || poll(&p, 1, 50) <= 0)
			usleep(a->fd < 0 ? 50 * 1000 : 0);
		glsync_tick(g, clock_mono_ms());
	}
	if (a->pid > 0)
		log_warn("gitolite admin sync still running pid=%d at stop: "
			 "not waited for (compiled again at the next start)",
			 (int)a->pid);
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	buf_free(&a->line);
	free(g->gl_home);
	free(g->gl_program);
	free(g->conf_path);
	free(g);
	*gsp = NULL;
}

void glsync_open(struct glsync **out, const struct glsync_opts *o)
{
	struct glsync *g;

	*out = NULL;
	if (!o->home)
		return;
	g = xcalloc(1, sizeof(*g));
	g->io = o->io;
	g->gl_home = xstrdup(o->home);
	g->gl_program = xstrdup(o->program ? o->program : "gitolite");
	g->conf_path = xstrdup(o->conf_path ? o->conf_path : "");
	g->admin.fd = -1;
	/* a move of the admin repository that a crash left uncompiled:
	 * compile once at start */
	g->admin.dirty = true;
	*out = g;
}

int glsync_fd(const struct glsync *g)
{
	return g ? g->admin.fd : -1;
}

bool glsync_ending(const struct glsync *g)
{
	return g && g->admin.pid > 0 && g->admin.fd < 0;
}
