/*
 * repos.h: hosted bare repositories on disk (libgit2).
 *
 * A repository NAME lives at repo_dir/NAME.git.  Names reaching here were
 * checked by name_repo_norm(), so the path never leaves repo_dir.
 */
#ifndef GD_REPOS_H
#define GD_REPOS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "store.h"

/* Make libgit2 read no global, XDG, system or ProgramData configuration,
 * and the git programs the node runs none either (environment), so hosted
 * repositories never depend on the service account's own.  Call once,
 * before any thread.  Returns 0 or GD_EIO. */
int repos_git_isolate(void);

/* repo_dir/NAME.git into out (replacing its contents). */
void repos_path(struct buf *out, const char *repo_dir, const char *name);

/* Create the bare repository if it does not exist (idempotent), whole or
 * not at all (made beside its place, then renamed into it); complete one
 * that a crash left half-made.  A fork borrows its parent's objects
 * through objects/info/alternates.  hook, when not NULL, is the
 * post-receive hook's command line, installed in a new or an existing
 * repository alike (rewritten only when it differs); receive.fsckObjects
 * is set in both.  Returns 0 or GD_EIO (logged). */
int repos_create(const char *repo_dir,
                 const char *name,
                 const char *fork_of,
                 const char *hook);

/* The same for a repository someone else makes (gitolite, which creates
 * its repositories when it compiles its admin repository): settle one that
 * exists (receive.fsckObjects, a fork's alternates, the hook when not
 * NULL), but never create or complete it.  Returns 0, GD_ENOTFOUND (no
 * directory yet: not a failure, nothing logged; gitrepl waits for it) or
 * GD_EIO (logged). */
int repos_adopt(const char *repo_dir,
                const char *name,
                const char *fork_of,
                const char *hook);

/* Make the disk follow the committed record of each repository named in
 * names ("name \0" each, as ops.repos_touched holds them); a name whose
 * record is absent (its batch was not committed) is skipped.
 *  - live: created (repos_create), or with make false (gitolite mode)
 *    settled (repos_adopt; one it does not find is skipped).  A record
 *    with renamed_from = OLD whose directory is not there takes OLD.git's
 *    (renamed: objects kept, nothing fetched) once OLD's record is
 *    deleted; while OLD's record is live and older, the rename's deletion
 *    of OLD is still on its way: the name is left in failed for later.
 *  - deleted (make true only; beside gitolite its conf owns the
 *    directories): NAME.git, when there, is renamed to the live record
 *    renamed from it that has no directory yet, or else moved aside to
 *    repos_aside_path (never destroyed; logged).
 * names is emptied; a name that failed is added to failed (once) to be
 * tried again later.  Writer thread.  Returns 0, or GD_EIO when one
 * failed. */
int repos_follow(struct store *s,
                 const char *repo_dir,
                 const char *hook,
                 bool make,
                 struct buf *names,
                 struct buf *failed);

/* At start, before the live repositories are made: each deleted
 * repository whose directory is still here (the node stopped between the
 * deletion's commit and repos_follow) follows its record, as
 * repos_follow does (moved aside, or renamed to the repository a rename
 * made of it).  Not beside gitolite.  Returns 0 or GD_EIO (logged). */
int repos_follow_deleted(struct store *s,
                         const char *repo_dir,
                         const char *hook);

/* Is there anything at repo_dir/NAME.git (a directory, a file, a link)? */
bool repos_present(const char *repo_dir, const char *name);

/* Where a repository deleted by a record stamped hlc is moved aside:
 * repo_dir/NAME.git.grantd-deleted-YYYYMMDDTHHMMSSZ (the deletion's UTC
 * time, the same at every site), into out (replacing its contents).  When
 * that is taken, repos_follow adds -2, -3, ... */
void repos_aside_path(struct buf *out,
                      const char *repo_dir,
                      const char *name,
                      uint64_t hlc);

/* What an operator brought at repo_dir/NAME.git (grantctl repo add of an
 * existing repository): each ref naming an object directly (symbolic refs
 * are left out), "ref \0 hex \0" each, into refs, and HEAD's symbolic
 * target into head ("" when it is not symbolic); both replaced.  Any
 * thread (opens the repository and frees it again).  Returns 0,
 * GD_ENOTFOUND (nothing there), GD_EINVAL with why set (something there
 * that is not a bare git repository libgit2 can open) or GD_EIO with why
 * set. */
int repos_refs(const char *repo_dir,
               const char *name,
               struct buf *refs,
               struct buf *head,
               struct buf *why);

/* Start hook_path --config conf in the repository at path with stdin
 * empty: grant-hook then sends what earlier pushes' hooks spooled.
 * Returns its pid (the caller reaps it) or -1 (logged). */
pid_t repos_run_hook(const char *hook_path, const char *conf, const char *path);

#endif
