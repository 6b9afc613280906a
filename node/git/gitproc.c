/*
 * gitproc.c: git child processes and the connectivity check, for the
 * repository replication stages (gitrepl_int.h); what git itself keeps in
 * run-command.c and connected.c, and the index-pack a fetch feeds (what
 * fetch-pack.c runs).  Actor thread only.
 */
#define _GNU_SOURCE /* pipe2 */
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
#include "gitrepl_int.h"
#include "banned.h"

extern char **environ;

const char *gitproc_why(void)
{
	const git_error *e = git_error_last();
	return e && e->message ? e->message : "unknown libgit2 error";
}

/* Run git in the repository at path with args (after "git") and envp
 * (NULL: ours).  Its stdin: input written whole and closed (input), or a
 * pipe left open in *infd (non-blocking), or nothing.  Its stdout: a pipe
 * in *outfd (non-blocking), or /dev/null.  Its stderr: the file errpath
 * (created), or /dev/null.  Returns the pid or -1. */
static pid_t spawn(const char *path, const char *const *args,
		   const struct buf *input, int *infd, int *outfd,
		   const char *errpath, char **envp)
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
	posix_spawn_file_actions_addopen(&fa, 2, errpath ? errpath :
					 "/dev/null", O_WRONLY | O_CREAT |
					 O_TRUNC, 0600);
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
	if (pid > 0 && infd) {
		fcntl(in[1], F_SETFL, O_NONBLOCK);
		*infd = in[1];
	} else {
		close(in[1]);
	}
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

pid_t gitproc_spawn(const char *path, const char *const *args,
		    const struct buf *input, int *outfd, char **envp)
{
	return spawn(path, args, input, NULL, outfd, NULL, envp);
}

int gitproc_wait(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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

pid_t gitproc_run(const char *prog, char *const argv[], char *const envp[],
		  const char *cwd, int *outfd)
{
	posix_spawn_file_actions_t fa;
	char file[4096];
	int out[2];
	pid_t pid = -1;
	int e;

	if (find_prog(file, sizeof(file), prog, envp) < 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, out[1], 2);
	if (cwd)
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
	e = posix_spawn(&pid, file, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(out[1]);
	if (e != 0) {
		close(out[0]);
		errno = e;
		return -1;
	}
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	*outfd = out[0];
	return pid;
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
	if (!(envp = calloc(n + 3, sizeof(*envp))))
		abort();
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
	pid_t pid;
	int rc;

	for (size_t i = 0; i < nwants; i++)
		buf_printf(&in, "%s\n", wants[i]);
	if (qdir)
		envp = quarantine_env(path, qdir, &e1, &e2);
	pid = gitproc_spawn(path, args, &in, NULL, envp);
	rc = pid > 0 ? gitproc_wait(pid) : -1;
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
	pid_t pid;

	buf_printf(&err, "%s" INDEX_ERR, qdir);
	pid = spawn(path, args, NULL, infd, NULL, err.p, envp);
	free(envp);
	buf_free(&e1);
	buf_free(&e2);
	buf_free(&err);
	return pid;
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
