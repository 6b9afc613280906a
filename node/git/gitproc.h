/*
 * gitproc.h: child processes, described once; and the git checks a
 * fetch needs.  What git keeps in run-command.h (struct child_process),
 * connected.c and fetch-pack.c's index-pack.
 *
 * A child is a struct gitproc_cmd, filled in and handed to
 * gitproc_start(): what it runs, its arguments and environment, its
 * directory, and what its stdin, stdout and stderr are.  One place says
 * what a child inherits from a daemon that holds secrets (no descriptor
 * but 0-2: ours are all O_CLOEXEC; our environment unless told).
 *
 * Used by the stages of repository replication (packfetch.c, packsrv.c,
 * glsync.c, reconcile.c, on the gitrepl actor) and by the repository
 * hooks (repos.c, on the writer thread); it calls nobody in node/.
 */
#ifndef GD_GITPROC_H
#define GD_GITPROC_H

#include <git2.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"

#define OID_HEX 40 /* a SHA-1 object id in hex */

struct gitproc_cmd {
	/* what runs: git (prog NULL: `git --git-dir=GIT_DIR ARGV...`, git
	 * found in our PATH), or prog (a path, or a name found in the PATH
	 * of env) with argv (argv[0] included) */
	const char *prog;
	const char *git_dir;
	const char *const *argv;
	char *const *env; /* exactly this environment; NULL: ours */
	const char *dir; /* its working directory; NULL: ours */
	/* stdin: /dev/null (no_stdin), or a pipe that gets input (when not
	 * NULL, written whole: it must fit the pipe) and is then closed,
	 * or left open in .in (in_pipe, non-blocking) */
	bool no_stdin, in_pipe;
	const struct buf *input;
	/* stdout: a pipe in .out (out_pipe, non-blocking), /dev/null
	 * (no_stdout), or ours */
	bool out_pipe, no_stdout;
	/* stderr: with stdout (stderr_to_stdout), into the file err_file
	 * (created), /dev/null (no_stderr), or ours */
	bool stderr_to_stdout, no_stderr;
	const char *err_file;
	/* set by gitproc_start: the caller's to close and reap */
	pid_t pid;
	int in, out;
};

#define GITPROC_CMD_INIT                       \
	{                                      \
		.pid = -1, .in = -1, .out = -1 \
	}

/* Start c.  Returns 0 (c->pid, and c->in, c->out as asked, set), or -1
 * with errno set (ENOENT: prog not found). */
int gitproc_start(struct gitproc_cmd *c);

/* Close what gitproc_start left open in c and wait for the child: its
 * exit status, 128 + signal, or -1. */
int gitproc_finish(struct gitproc_cmd *c);

/* Wait for pid: its exit status, 128 + signal, or -1. */
int gitproc_wait(pid_t pid);

/* The same without waiting: GITPROC_RUNNING while pid runs. */
#define GITPROC_RUNNING (-2)
int gitproc_poll(pid_t pid);

/* libgit2's last error text; never NULL. */
const char *gitproc_why(void);

/* git's own check after a fetch (check_connected): everything reachable
 * from the tips wants is in the quarantine qdir (NULL: none) or the
 * repository at path, and joins what the refs already reach. */
bool gitproc_connected(const char *path,
                       const char *qdir,
                       const char (*wants)[OID_HEX + 1],
                       size_t nwants);

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
void gitproc_tips(git_repository *repo, struct buf *out, size_t *n, size_t max);

#endif
