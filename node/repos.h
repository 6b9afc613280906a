/*
 * repos.h: hosted bare repositories on disk (libgit2).
 *
 * A repository NAME lives at repo_dir/NAME.git.  Names reaching here were
 * checked by name_repo_norm(), so the path never leaves repo_dir.
 */
#ifndef GD_REPOS_H
#define GD_REPOS_H

#include "buf.h"

/* repo_dir/NAME.git into out (replacing its contents). */
void repos_path(struct buf *out, const char *repo_dir, const char *name);

/* Create the bare repository if it does not exist (idempotent); a fork
 * borrows its parent's objects through objects/info/alternates.  hook, when
 * not NULL, is the post-receive hook's command line (repos_install_hook).
 * Returns 0 or GD_EIO (logged). */
int repos_create(const char *repo_dir, const char *name, const char *fork_of,
		 const char *hook);

/* Make hooks/post-receive run hook (a shell command line, e.g. exec
 * '/usr/bin/grant-hook' --config '/etc/grantd/grantd.conf'), so every push
 * is handed to the node to replicate.  Rewrites it only when it differs.
 * Returns 0 or GD_EIO (logged). */
int repos_install_hook(const char *repo_dir, const char *name,
		       const char *hook);

#endif
