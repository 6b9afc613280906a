/*
 * packbuild.h: a small pack built in-process, a stage of repository
 * replication.  A push of a few commits is served with libgit2's
 * packbuilder instead of a `git pack-objects` child: the fork and exec of
 * git and its opening of the repository cost more than the objects of a
 * one-commit push (issue 23: one commit replicated against a `git fetch`).
 *
 * What it packs: the commits reachable from the wants without passing
 * through a have (at most PACKBUILD_COMMITS_MAX of them), each with the
 * objects of its tree that none of its parents' trees holds at the same
 * path; a have is a tip the asker has, with everything it reaches.  Not a
 * thin pack (libgit2 makes none): deltas only between objects it holds.
 * A request past the limits (a commit count, an object count, their
 * bytes), or one it cannot answer this way (a want
 * that is neither a commit nor a tag of one, a history that does not meet
 * the haves within the limit), is left to pack-objects.
 *
 * packsrv.c calls it; it calls only libgit2.  Any thread (the repository
 * handed in is the caller's).
 */
#ifndef GD_PACKBUILD_H
#define GD_PACKBUILD_H

#include <git2.h>
#include <stddef.h>

#include "buf.h"

#define PACKBUILD_COMMITS_MAX 32 /* new commits in a small pack */
#define PACKBUILD_OBJECTS_MAX 512 /* objects in a small pack */
/* Their bytes, uncompressed: a pack that is not thin holds each new
 * version of a file whole (a thin one, a delta against the asker's), and
 * compressing it costs here what pack-objects' start costs (a 40 KB file:
 * 3.3 ms against 3.4, a pack 36 times larger).  So that the pack stays
 * under what packfetch.c indexes in-process (HOLD_MAX, 32 KiB); above,
 * pack-objects' thin pack is the better deal. */
#define PACKBUILD_BYTES_MAX (24 * 1024)

/* The pack of what wants (nwants) reach and haves (nhaves, all present
 * in repo) do not, into out (reset first).  Returns 0; GD_ETOOBIG when
 * the request is not a small one (use pack-objects; out is empty); or
 * GD_EIO when libgit2 failed (gitproc_why() says why). */
int packbuild_small(struct buf *out,
                    git_repository *repo,
                    const git_oid *wants,
                    size_t nwants,
                    const git_oid *haves,
                    size_t nhaves);

#endif
