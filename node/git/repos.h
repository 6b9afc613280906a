/*
 * repos.h: hosted bare repositories on disk (libgit2).
 *
 * A repository NAME lives at repo_dir/NAME.git.  Names reaching here were
 * checked by name_repo_norm(), so the path never leaves repo_dir.
 */
#ifndef GD_REPOS_H
#define GD_REPOS_H

#include <stdbool.h>
#include <sys/types.h>

#include "buf.h"
#include "store.h"

/* repo_dir/NAME.git into out (replacing its contents). */
/* Make libgit2 read no global, XDG, system or ProgramData configuration,
 * and the git programs the node runs none either (environment), so hosted
 * repositories never depend on the service account's own.  Call once,
 * before any thread.  Returns 0 or GD_EIO. */
int repos_git_isolate(void);

void repos_path(struct buf *out, const char *repo_dir, const char *name);

/* Create the bare repository if it does not exist (idempotent), whole or
 * not at all (made beside its place, then renamed into it); complete one
 * that a crash left half-made.  A fork borrows its parent's objects
 * through objects/info/alternates.  hook, when not NULL, is the
 * post-receive hook's command line, installed in a new or an existing
 * repository alike (rewritten only when it differs); receive.fsckObjects
 * is set in both.  Returns 0 or GD_EIO (logged). */
int repos_create(const char *repo_dir, const char *name, const char *fork_of,
		 const char *hook);

/* The same for a repository someone else makes (gitolite, which creates
 * its repositories when it compiles its admin repository): settle one that
 * exists (receive.fsckObjects, a fork's alternates, the hook when not
 * NULL), but never create or complete it.  Returns 0, GD_ENOTFOUND (no
 * directory yet: not a failure, nothing logged; gitrepl waits for it) or
 * GD_EIO (logged). */
int repos_adopt(const char *repo_dir, const char *name, const char *fork_of,
		const char *hook);

/* Create (repos_create; make false: repos_adopt, gitolite mode) each
 * repository named in names ("name \0" each, as ops.repos_touched holds
 * them) whose committed record is live; a name whose record is absent (its
 * batch was not committed) or deleted is skipped, and so is one that
 * repos_adopt does not find.  names is emptied; a name that failed is
 * added to failed (once) to be tried again later.  Writer thread.  Returns
 * 0, or GD_EIO when one failed. */
int repos_follow(struct store *s, const char *repo_dir, const char *hook,
		 bool make, struct buf *names, struct buf *failed);

/* Start hook_path --config conf in the repository at path with stdin
 * empty: grant-hook then sends what earlier pushes' hooks spooled.
 * Returns its pid (the caller reaps it) or -1 (logged). */
pid_t repos_run_hook(const char *hook_path, const char *conf,
		     const char *path);

#endif
