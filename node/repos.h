/*
 * repos.h: hosted bare repositories on disk (libgit2).
 *
 * A repository NAME lives at repo_dir/NAME.git.  Names reaching here were
 * checked by name_repo_norm(), so the path never leaves repo_dir.
 */
#ifndef GD_REPOS_H
#define GD_REPOS_H

#include <sys/types.h>

#include "buf.h"

/* repo_dir/NAME.git into out (replacing its contents). */
void repos_path(struct buf *out, const char *repo_dir, const char *name);

/* Create the bare repository if it does not exist (idempotent); a fork
 * borrows its parent's objects through objects/info/alternates.  hook, when
 * not NULL, is the post-receive hook's command line, installed in a new or
 * an existing repository alike (it is rewritten only when it differs).
 * Returns 0 or GD_EIO (logged). */
int repos_create(const char *repo_dir, const char *name, const char *fork_of,
		 const char *hook);

/* Start hook_path --config conf in the repository at path with stdin
 * empty: grant-hook then sends what earlier pushes' hooks spooled.
 * Returns its pid (the caller reaps it) or -1 (logged). */
pid_t repos_run_hook(const char *hook_path, const char *conf,
		     const char *path);

#endif
