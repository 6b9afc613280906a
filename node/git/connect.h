/*
 * connect.h: the check that a fetched pack connects, in-process, a stage
 * of repository replication.  What `git rev-list --objects --stdin --not
 * --all` proves after a fetch (git's check_connected), without starting
 * git: each object the pack brings links only to objects in the pack or
 * already in the repository, and each new tip is in one of them.  The
 * repository's own objects are taken as connected, as libgit2's indexer
 * and git's `index-pack --check-self-contained-and-connected` take them:
 * a pack enters only after this check, and receive-pack checks a push.
 * Its cost is the pack's objects (blobs are not read), never the history.
 *
 * packfetch.c calls it for a pack libgit2 indexed; it calls only
 * libgit2.  Any thread (the odb handed in is the caller's).
 */
#ifndef GD_CONNECT_H
#define GD_CONNECT_H

#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <stddef.h>

#include "gitproc.h"

/* The objects of the quarantine backend q (the pack just indexed; q is
 * one of all's backends, all the repository's objects and alternates
 * besides) link only to objects in all, and each of wants (nwants) is in
 * all.  Returns 0; GD_EPROTO when not connected, with the object that
 * lacks one in why (n bytes); or GD_EIO when an object cannot be read
 * (why: libgit2's reason). */
int connect_pack(git_odb *all,
                 git_odb_backend *q,
                 const char (*wants)[OID_HEX + 1],
                 size_t nwants,
                 char *why,
                 size_t n);

#endif
