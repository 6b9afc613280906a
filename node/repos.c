/*
 * repos.c: creating hosted repositories with libgit2.  libgit2 is
 * initialised once by main() before any thread starts.
 */
#define _GNU_SOURCE /* posix_spawn_file_actions_addchdir_np */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <git2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "repos.h"
#include "banned.h"

extern char **environ;

pid_t repos_run_hook(const char *hook_path, const char *conf,
		     const char *path)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = { (char *)hook_path, "--config", (char *)conf, NULL };
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addchdir_np(&fa, path);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (posix_spawn(&pid, hook_path, &fa, NULL, argv, environ) != 0) {
		log_warn("cannot run grant-hook in dir=%s", path);
		pid = -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	return pid;
}

void repos_path(struct buf *out, const char *repo_dir, const char *name)
{
	buf_reset(out);
	buf_printf(out, "%s/%s.git", repo_dir, name);
}

static int write_alternates(const char *path, const char *parent)
{
	struct buf f = BUF_INIT;
	int rc = 0;

	buf_printf(&f, "%s/objects/info/alternates", path);
	FILE *fp = fopen(f.p, "w");
	if (!fp || fprintf(fp, "%s/objects\n", parent) < 0) {
		log_error("cannot write alternates path=%s: %s", f.p,
			  strerror(errno));
		rc = GD_EIO;
	}
	if (fp && fclose(fp) != 0)
		rc = GD_EIO;
	buf_free(&f);
	return rc;
}

/* libgit2's built-in template writes files no hosted repository needs;
 * each costs a disk block, which is most of what a fork costs (its
 * objects live in the parent). */
static void drop_samples(const char *path)
{
	static const char *const files[] = { "description", "info/exclude",
					     "hooks/README.sample" };
	struct buf f = BUF_INIT;

	for (size_t i = 0; i < GD_ARRAY_SIZE(files); i++) {
		buf_reset(&f);
		buf_printf(&f, "%s/%s", path, files[i]);
		unlink(f.p);
	}
	buf_reset(&f);
	buf_printf(&f, "%s/info", path);
	rmdir(f.p);
	buf_free(&f);
}

/* Make hooks/post-receive run hook (a shell command line, e.g. exec
 * '/usr/bin/grant-hook' --config '/etc/grantd/grantd.conf'), so every push
 * is handed to the node to replicate.  Rewrites it only when it differs. */
static int repos_install_hook(const char *repo_dir, const char *name,
			      const char *hook)
{
	struct buf path = BUF_INIT, tmp = BUF_INIT, want = BUF_INIT;
	char have[4096];
	int rc = 0;

	buf_printf(&path, "%s/%s.git/hooks/post-receive", repo_dir, name);
	buf_printf(&want, "#!/bin/sh\n# installed by grantd: hand this push to "
		   "the node, which replicates it to every site\n%s\n", hook);
	FILE *fp = fopen(path.p, "r");
	if (fp) {
		size_t n = fread(have, 1, sizeof(have) - 1, fp);
		have[n] = '\0';
		fclose(fp);
		if (n == want.len && !memcmp(have, want.p, n))
			goto done;
	}
	buf_printf(&tmp, "%s.grantd-tmp", path.p);
	fp = fopen(tmp.p, "w");
	if (!fp || fwrite(want.p, 1, want.len, fp) != want.len ||
	    fchmod(fileno(fp), 0755) < 0 || fclose(fp) != 0 ||
	    rename(tmp.p, path.p) < 0) {
		log_error("cannot install post-receive hook repo=%s: %s", name,
			  strerror(errno));
		rc = GD_EIO;
	}
done:
	buf_free(&path);
	buf_free(&tmp);
	buf_free(&want);
	return rc;
}

int repos_create(const char *repo_dir, const char *name, const char *fork_of,
		 const char *hook)
{
	git_repository *repo = NULL;
	git_repository_init_options io;
	struct buf path = BUF_INIT, parent = BUF_INIT;
	struct stat st;
	int rc = 0;

	git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	repos_path(&path, repo_dir, name);
	if (stat(path.p, &st) == 0)
		goto hook; /* exists: only make sure of its hook */
	io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH |
		   GIT_REPOSITORY_INIT_NO_REINIT;
	io.initial_head = "main"; /* what clones check out */
	if (git_repository_init_ext(&repo, path.p, &io) < 0) {
		const git_error *e = git_error_last();
		log_error("cannot create repository repo=%s: %s", name,
			  e ? e->message : "unknown error");
		rc = GD_EIO;
		goto done;
	}
	drop_samples(path.p);
	if (fork_of && *fork_of) {
		repos_path(&parent, repo_dir, fork_of);
		rc = write_alternates(path.p, parent.p);
	}
	log_info("created repository repo=%s%s%s", name,
		 fork_of && *fork_of ? " fork_of=" : "",
		 fork_of && *fork_of ? fork_of : "");
hook:
	if (rc == 0 && hook)
		rc = repos_install_hook(repo_dir, name, hook);
done:
	git_repository_free(repo);
	buf_free(&path);
	buf_free(&parent);
	return rc;
}
