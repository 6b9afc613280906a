/*
 * gitproc.c: child processes (gitproc.h), and the connectivity check and
 * the index-pack a fetch feeds; what git itself keeps in run-command.c,
 * connected.c and fetch-pack.c.  Any thread: it keeps no state.
 */
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addchdir_np */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "gitproc.h"
#include "xalloc.h"
#include "banned.h"

extern char **environ;

const char *gitproc_why(void)
{
	const git_error *e = git_error_last();
	return e && e->message ? e->message : "unknown libgit2 error";
}

/* prog as execve needs it: itself when it names a path, else the first
 * executable file of that name in envp's PATH (not ours: the child's
 * environment is its own), into out. */
static int find_prog(char *out, size_t n, const char *prog,
		     char *const envp[])
{
	const char *path = NULL;

	if (strchr(prog, '/')) {
		snprintf(out, n, "%s", prog);
		return 0;
	}
	for (size_t i = 0; envp[i]; i++)
		if (!strncmp(envp[i], "PATH=", 5))
			path = envp[i] + 5;
	while (path && *path) {
		size_t len = strcspn(path, ":");
		int k = snprintf(out, n, "%.*s/%s", (int)len,
				 len ? path : ".", prog);
		if (k > 0 && (size_t)k < n && access(out, X_OK) == 0)
			return 0;
		path += len + (path[len] == ':');
	}
	errno = ENOENT;
	return -1;
}

/* c's argv as execve takes it: git's with "git --git-dir=..." first
 * (gitdir holds that), else c->argv itself. */
static char **make_argv(const struct gitproc_cmd *c,
                        char **argv,
                        int max,
                        char *gitdir,
                        size_t n)
{
	int k = 0;

	if (c->prog)
		return (char **)c->argv;
	snprintf(gitdir, n, "--git-dir=%s", c->git_dir);
	argv[k++] = "git";
	argv[k++] = gitdir;
	for (int i = 0; c->argv[i] && k < max - 1; i++)
		argv[k++] = (char *)c->argv[i];
	argv[k] = NULL;
	return argv;
}

/* c's stdin, stdout and stderr as file actions on the pipes in and out. */
static void file_actions(posix_spawn_file_actions_t *fa,
                         const struct gitproc_cmd *c,
                         const int in[2],
                         const int out[2])
{
	if (c->no_stdin)
		posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY,
		                                 0);
	else
		posix_spawn_file_actions_adddup2(fa, in[0], 0);
	if (c->out_pipe)
		posix_spawn_file_actions_adddup2(fa, out[1], 1);
	else if (c->no_stdout)
		posix_spawn_file_actions_addopen(fa, 1, "/dev/null", O_WRONLY,
		                                 0);
	if (c->stderr_to_stdout)
		posix_spawn_file_actions_adddup2(fa, c->out_pipe ? out[1] : 1,
		                                 2);
	else if (c->err_file || c->no_stderr)
		posix_spawn_file_actions_addopen(
		        fa, 2, c->err_file ? c->err_file : "/dev/null",
		        O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (c->dir)
		posix_spawn_file_actions_addchdir_np(fa, c->dir);
}

/* Write input whole to the pipe fd (small: wants and haves). */
static void write_all(int fd, const struct buf *input)
{
	size_t off = 0;

	while (input && off < input->len) {
		ssize_t w = write(fd, input->p + off, input->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

int gitproc_start(struct gitproc_cmd *c)
{
	posix_spawn_file_actions_t fa;
	int in[2] = {-1, -1}, out[2] = {-1, -1};
	char gitdir[4200], file[4096], *args[16], **argv;
	char *const *envp = c->env ? c->env : environ;
	int e;

	c->pid = -1;
	c->in = c->out = -1;
	if (c->prog && c->env && find_prog(file, sizeof(file), c->prog, envp))
		return -1;
	if ((!c->no_stdin && pipe2(in, O_CLOEXEC) < 0) ||
	    (c->out_pipe && pipe2(out, O_CLOEXEC) < 0)) {
		e = errno;
		close_pair(in);
		errno = e;
		return -1;
	}
	argv = make_argv(c, args, 16, gitdir, sizeof(gitdir));
	posix_spawn_file_actions_init(&fa);
	file_actions(&fa, c, in, out);
	if (!c->prog)
		e = posix_spawnp(&c->pid, "git", &fa, NULL, argv, envp);
	else
		e = posix_spawn(&c->pid, c->env ? file : c->prog, &fa, NULL,
		                argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (in[0] >= 0)
		close(in[0]);
	if (out[1] >= 0)
		close(out[1]);
	if (e != 0) {
		c->pid = -1;
		if (in[1] >= 0)
			close(in[1]);
		if (out[0] >= 0)
			close(out[0]);
		errno = e;
		return -1;
	}
	if (in[1] >= 0) {
		write_all(in[1], c->input);
		if (c->in_pipe) {
			fcntl(in[1], F_SETFL, O_NONBLOCK);
			c->in = in[1];
		} else {
			close(in[1]);
		}
	}
	if (out[0] >= 0) {
		fcntl(out[0], F_SETFL, O_NONBLOCK);
		c->out = out[0];
	}
	return 0;
}

int gitproc_finish(struct gitproc_cmd *c)
{
	int rc;

	if (c->in >= 0)
		close(c->in);
	if (c->out >= 0)
		close(c->out);
	c->in = c->out = -1;
	rc = c->pid > 0 ? gitproc_wait(c->pid) : -1;
	c->pid = -1;
	return rc;
}

static int status_of(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int gitproc_wait(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status_of(st);
}

int gitproc_poll(pid_t pid)
{
	int st;
	pid_t w;

	while ((w = waitpid(pid, &st, WNOHANG)) < 0 && errno == EINTR)
		;
	if (w == 0)
		return GITPROC_RUNNING;
	return w < 0 ? -1 : status_of(st);
}

/* Our environment, and the objects as receive-pack sees a push in
 * quarantine: written to qdir, the repository's (at path) as its
 * alternate.  e1 and e2 hold the two added strings; free the array. */
static char **quarantine_env(const char *path, const char *qdir,
			     struct buf *e1, struct buf *e2)
{
	char **envp;
	size_t n = 0;

	buf_printf(e1, "GIT_OBJECT_DIRECTORY=%s", qdir);
	buf_printf(e2, "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s/objects", path);
	while (environ[n])
		n++;
	envp = xcalloc(n + 3, sizeof(*envp));
	memcpy(envp, environ, n * sizeof(*envp));
	envp[n] = e1->p;
	envp[n + 1] = e2->p;
	return envp;
}

bool gitproc_connected(const char *path, const char *qdir,
		       const char (*wants)[OID_HEX + 1], size_t nwants)
{
	static const char *const args[] = { "rev-list", "--objects", "--stdin",
					    "--not", "--all", "--alternate-refs",
					    "--quiet", NULL };
	struct buf in = BUF_INIT, e1 = BUF_INIT, e2 = BUF_INIT;
	char **envp = NULL;
	int rc;

	for (size_t i = 0; i < nwants; i++)
		buf_printf(&in, "%s\n", wants[i]);
	if (qdir)
		envp = quarantine_env(path, qdir, &e1, &e2);
	struct gitproc_cmd c = GITPROC_CMD_INIT;
	c.git_dir = path;
	c.argv = args;
	c.env = envp;
	c.input = &in;
	c.no_stdout = c.no_stderr = true;
	rc = gitproc_start(&c) == 0 ? gitproc_finish(&c) : -1;
	free(envp);
	buf_free(&in);
	buf_free(&e1);
	buf_free(&e2);
	return rc == 0;
}

#define INDEX_ERR "/index-pack.err"

pid_t gitproc_index_start(const char *path, const char *qdir, int *infd)
{
	/* --keep: the .keep stays in the quarantine (only .pack, .rev and
	 * .idx are moved in); --fix-thin: delta bases from the alternate */
	static const char *const args[] = { "index-pack", "--stdin",
					    "--fix-thin", "--keep=grantd",
					    NULL };
	struct buf e1 = BUF_INIT, e2 = BUF_INIT, err = BUF_INIT;
	char **envp = quarantine_env(path, qdir, &e1, &e2);
	struct gitproc_cmd c = GITPROC_CMD_INIT;

	buf_printf(&err, "%s" INDEX_ERR, qdir);
	c.git_dir = path;
	c.argv = args;
	c.env = envp;
	c.in_pipe = c.no_stdout = true;
	c.err_file = err.p;
	if (gitproc_start(&c) == 0)
		*infd = c.in;
	free(envp);
	buf_free(&e1);
	buf_free(&e2);
	buf_free(&err);
	return c.pid;
}

int gitproc_feed(int fd, const void *data, size_t len, int timeout_ms)
{
	const char *p = data;
	sigset_t pipe_set, old;
	int rc = 0;

	/* a child that died is EPIPE here, never a SIGPIPE (the node
	 * ignores it; a test program may not) */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			/* the child works on what it has: wait, not forever */
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			int n = poll(&pfd, 1, timeout_ms);
			if (n > 0 || (n < 0 && errno == EINTR))
				continue;
		}
		rc = GD_EIO;
		break;
	}
	if (rc < 0 && errno == EPIPE) {
		const struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void gitproc_index_why(const char *qdir, char *out, size_t n)
{
	char line[512], last[512] = "";
	struct buf err = BUF_INIT;
	FILE *fp;

	buf_printf(&err, "%s" INDEX_ERR, qdir);
	if ((fp = fopen(err.p, "r"))) {
		/* git's last word is its verdict: "fatal: ..." */
		while (fgets(line, sizeof(line), fp)) {
			line[strcspn(line, "\n")] = '\0';
			if (!strncmp(line, "fatal: ", 7) ||
			    (!*last && !strncmp(line, "error: ", 7)))
				snprintf(last, sizeof(last), "%s",
					 line + 7);
		}
		fclose(fp);
	}
	buf_free(&err);
	if (!*last)
		snprintf(out, n, "index-pack failed");
	else if (!strcmp(last, "early EOF"))
		/* what libgit2 called "incomplete pack" */
		snprintf(out, n, "incomplete pack: index-pack: %s", last);
	else
		snprintf(out, n, "index-pack: %s", last);
}

void gitproc_tips(git_repository *repo, struct buf *out, size_t *n,
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
