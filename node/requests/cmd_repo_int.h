/*
 * cmd_repo_int.h: what the repository handler files share.
 *
 * cmd_repo.c holds the rows of every repository command and the handlers
 * of fetches (repo.read), pushes (hook.refs), repo add, mode, writers and
 * list; cmd_repoadmin.c what moves a repository's directory at every
 * site: adopting one that exists (for repo add), repo del and repo
 * rename.  Only these two include this header.  Handlers of CMD_BATCH
 * rows: the control thread, in the batch.
 */
#ifndef GD_CMD_REPO_INT_H
#define GD_CMD_REPO_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "cmd.h"

/*
 * Before repo add NAME makes its record: what is at repo_dir/NAME.git.
 * Returns 0 when nothing is (a new repository), 1 when a bare repository
 * is (its refs that grantd replicates into refs, "ref \0 hex \0" each, *n
 * of them; HEAD's symbolic target into head), GD_EDENIED when something
 * else is (r refused, saying what to do), or a negative gd_err.
 */
int cmd_repo_found(struct cmd_ctx *x,
                   struct req *r,
                   const char *name,
                   struct buf *refs,
                   size_t *n,
                   struct buf *head);

/* The refs in pairs ("ref \0 hex \0" each) recorded for repo as
 * RefUpdates (at most 1024 changes each): created (old zeros, new hex)
 * or, del, deleted (old hex, new zeros).  Returns 0 or a negative
 * gd_err. */
int cmd_repo_refs_emit(struct cmd_ctx *x,
                       const char *repo,
                       const struct buf *pairs,
                       bool del);

/* repo.del NAME and repo.rename OLD NEW (the rows in cmd_repo.c). */
int cmd_repo_del(struct cmd_ctx *x, struct req *r);
int cmd_repo_rename(struct cmd_ctx *x, struct req *r);

#endif
