/*
 * glsync.c: gitolite mode's stage of git replication (gitrepl_int.h): once
 * the reconciler moved the branch gitolite-admin's HEAD names, run
 * `PROGRAM grantd-admin-sync` (gitolite's own post-update of its admin
 * repository: checkout, compile, triggers) as a push there would have, in
 * the background, one run at a time, its output logged (docs/gitolite.md).
 */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "gitrepl_int.h"
#include "log.h"
#include "banned.h"

/* The reconciler moved (or deleted) ref of repository name: when that is
 * the branch gitolite-admin's HEAD names (gitolite 3.6 compiles master
 * only; upstream, HEAD's branch), gitolite must compile it again. */
void glsync_moved(struct gitrepl *g, git_repository *repo, const char *name,
		  const char *ref)
{
	git_reference *head = NULL;
	const char *target;

	if (!g->gl_program || strcmp(name, GITOLITE_ADMIN))
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
static void admin_line(struct gitrepl *g, char *line)
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
static void admin_lines(struct gitrepl *g, bool all)
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
static void admin_read(struct gitrepl *g, bool force)
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
static void admin_env(const struct gitrepl *g, struct buf env[5],
		      char *envp[6])
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
static void admin_spawn(struct gitrepl *g, uint64_t t)
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
	if ((repo = gitrepl_repo(g, GITOLITE_ADMIN)) &&
	    git_reference_name_to_id(&id, repo, "HEAD") == 0)
		git_oid_tostr(a->commit, sizeof(a->commit), &id);
	a->lines = 0;
	a->first_err[0] = a->last[0] = '\0';
	buf_reset(&a->line);
	a->started_ms = t;
	admin_env(g, env, envp);
	a->pid = gitproc_run(g->gl_program, argv, envp, g->gl_home, &a->fd);
	if (a->pid < 0) {
		int e = errno;
		a->pid = 0;
		a->fd = -1;
		g->st.gitolite_syncs++;
		g->st.gitolite_failures++;
		snprintf(g->st.gitolite_last_error,
			 sizeof(g->st.gitolite_last_error),
			 "cannot run %s: %s", g->gl_program, strerror(e));
		log_error("gitolite admin not synced commit=%s: cannot run "
			  "program=%s: %s", a->commit, g->gl_program,
			  strerror(e));
	} else {
		log_debug("gitolite admin sync started commit=%s pid=%d",
			  a->commit, (int)a->pid);
	}
	for (int i = 0; i < 5; i++)
		buf_free(&env[i]);
}

/* The sync ended with status rc (exit status, 128 + signal, -1). */
static void admin_done(struct gitrepl *g, int rc, uint64_t t)
{
	struct admin_sync *a = &g->admin;
	unsigned long long ms = (unsigned long long)(t - a->started_ms);

	a->pid = 0;
	g->st.gitolite_syncs++;
	if (rc == 0) {
		log_info("gitolite admin synced commit=%s ms=%llu rc=0",
			 a->commit, ms);
		return;
	}
	const char *why = *a->first_err ? a->first_err :
			  *a->last ? a->last : "no output";
	g->st.gitolite_failures++;
	/* bounded to fit: a long error is cut, status shows its start */
	snprintf(g->st.gitolite_last_error, sizeof(g->st.gitolite_last_error),
		 "commit %.40s: rc=%d: %.180s", a->commit, rc, why);
	log_error("gitolite admin synced commit=%s ms=%llu rc=%d: %s",
		  a->commit, ms, rc, why);
}

/* From the loop: read the running sync's output, reap it (never
 * waiting), and start one when the admin repository moved since the last
 * one started. */
void glsync_tick(struct gitrepl *g, uint64_t t)
{
	struct admin_sync *a = &g->admin;

	if (!g->gl_program)
		return;
	if (a->pid > 0) {
		int st;
		pid_t w;
		admin_read(g, false);
		while ((w = waitpid(a->pid, &st, WNOHANG)) < 0 &&
		       errno == EINTR)
			;
		if (w == 0)
			return;
		/* what it wrote before it ended; a grandchild still holding
		 * the pipe is not waited for */
		admin_read(g, true);
		admin_done(g, w < 0 ? -1 :
			      WIFEXITED(st) ? WEXITSTATUS(st) :
					      128 + WTERMSIG(st), t);
	}
	if (a->dirty)
		admin_spawn(g, t);
}

/* Stopping: a sync running gets ADMIN_STOP_MS to end (a compile cut
 * short would be done again at the next start anyway). */
void glsync_stop(struct gitrepl *g)
{
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
}
