/*
 * gitproc.c: git child processes and the connectivity check, for the
 * repository replication stages (gitrepl_int.h); what git itself keeps in
 * run-command.c and connected.c.  Actor thread only.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gitrepl_int.h"
#include "banned.h"

extern char **environ;

const char *gitproc_why(void)
{
	const git_error *e = git_error_last();
	return e && e->message ? e->message : "unknown libgit2 error";
}

pid_t gitproc_spawn(const char *path, const char *const *args,
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

int gitproc_wait(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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
	if (qdir) {
		/* the objects as receive-pack sees a push in quarantine */
		size_t n = 0;
		buf_printf(&e1, "GIT_OBJECT_DIRECTORY=%s", qdir);
		buf_printf(&e2, "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s/objects",
			   path);
		while (environ[n])
			n++;
		if (!(envp = calloc(n + 3, sizeof(*envp))))
			abort();
		memcpy(envp, environ, n * sizeof(*envp));
		envp[n] = e1.p;
		envp[n + 1] = e2.p;
	}
	pid = gitproc_spawn(path, args, &in, NULL, envp);
	rc = pid > 0 ? gitproc_wait(pid) : -1;
	free(envp);
	buf_free(&in);
	buf_free(&e1);
	buf_free(&e2);
	return rc == 0;
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
