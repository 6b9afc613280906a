/*
 * spool.h: where grant-hook keeps pushes the node could not be told of.
 *
 * A post-receive hook that cannot reach the node writes the push's lines
 * to GIT_DIR/grantd-spool/NAME.refs (client/grant-hook.c) and the next
 * run of the hook sends them.  The node looks for such files too: at
 * start it runs the hook in each repository that has a spool (main.c),
 * and the reconciler leaves a repository with spooled pushes alone until
 * they are sent (node/git/reconcile.c), so a local push is never rolled
 * back.  The name of the directory and of its files is said here once.
 */
#ifndef GD_SPOOL_H
#define GD_SPOOL_H

#include <stdbool.h>

#include "buf.h"

#define SPOOL_DIR    "grantd-spool" /* in GIT_DIR */
#define SPOOL_SUFFIX ".refs" /* a spooled push; other names are not */

/* git_dir/grantd-spool into out (replacing its contents). */
void spool_path(struct buf *out, const char *git_dir);

/* Is name (a file name in the spool) a spooled push? */
bool spool_is_file(const char *name);

/* Has the repository at git_dir a spool directory at all? */
bool spool_exists(const char *git_dir);

/* Has the repository at git_dir a spooled push (one file at least)? */
bool spool_pending(const char *git_dir);

#endif
