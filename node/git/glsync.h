/*
 * glsync.h: gitolite mode's stage of repository replication.  Once the
 * reconciler moved the branch gitolite-admin's HEAD names, run
 * `PROGRAM grantd-admin-sync` (gitolite's own post-update of its admin
 * repository: checkout, compile, triggers) as a push there would have, in
 * the background, one run at a time, its output logged, with an
 * environment of its own (HOME the gitolite home); also once at start,
 * for a move a crash left uncompiled (docs/gitolite.md).
 *
 * The gitrepl actor owns it (and polls its pipe); the reconciler tells it
 * of moves.  It calls only gitio.c and gitproc.c.  Actor thread only.
 * Every function takes NULL (not gitolite mode) and then does nothing.
 */
#ifndef GD_GLSYNC_H
#define GD_GLSYNC_H

#include <git2.h>
#include <stdbool.h>
#include <stdint.h>

#include "gitio.h"

struct glsync;

struct glsync_opts {
	struct gitio *io;
	const char *home; /* gitolite's HOME (NULL: not gitolite mode) */
	const char *program; /* the gitolite command */
	const char *conf_path; /* our config, for its GRANTD_CONFIG */
};

/* *out is the caller's (glsync_destroy), NULL when o->home is; the
 * strings are copied, io borrowed. */
void glsync_open(struct glsync **out, const struct glsync_opts *o);

/* Stopping: a sync running gets a few seconds to end (a compile cut
 * short is done again at the next start), then it is freed. */
void glsync_destroy(struct glsync **gsp);

/* The reconciler moved (or deleted) ref of repository name: when it is
 * the branch gitolite-admin's HEAD names, a sync is due. */
void glsync_moved(struct glsync *gs,
                  git_repository *repo,
                  const char *name,
                  const char *ref);

/* From the loop: read the running sync's output, reap it (never
 * waiting), and start one when one is due. */
void glsync_tick(struct glsync *gs, uint64_t now_ms);

/* The running sync's output to poll, or -1. */
int glsync_fd(const struct glsync *gs);

/* Has the running sync's output ended (it is about to exit: reap it
 * soon, so that its time says how long the compile took)? */
bool glsync_ending(const struct glsync *gs);

#endif
