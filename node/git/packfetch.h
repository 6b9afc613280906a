/*
 * packfetch.h: the one fetch in flight, a stage of repository
 * replication.  The objects one repository lacks are asked of a peer as a
 * thin pack (PackReq{wants, haves} on the actor's DEALER to it), a window
 * of chunks ahead; the pack is indexed into a quarantine and enters the
 * repository only once its tips are proved connected (a small pack:
 * indexed and checked in-process, connect.h; a large one: git index-pack
 * and git rev-list).  A peer that fails (an error, a bad or unconnected
 * pack, a silence) is dropped for the next; when none is left the fetch
 * fails.
 *
 * The gitrepl actor owns it and feeds it its DEALERs' frames and ticks;
 * the reconciler (reconcile.c) starts fetches.  Each call that can end
 * the fetch returns its verdict, which the actor hands to the reconciler
 * (reconcile_fetched): nothing here calls either back.  It calls only
 * gitio.c, gitproc.c, connect.c and the store.  Actor thread only.
 */
#ifndef GD_PACKFETCH_H
#define GD_PACKFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "gitio.h"
#include "metrics.h"
#include "store.h"

/* What a call did to the fetch. */
enum packfetch_verdict {
	PACKFETCH_GOING, /* still going (or none) */
	PACKFETCH_OK, /* over: the wants are in the repository */
	PACKFETCH_FAILED, /* over: no peer could give them */
	PACKFETCH_UNSTARTED, /* packfetch_start: the repository cannot be
	                      * opened, nothing was asked */
};

struct packfetch_opts {
	struct gitio *io;
	struct store *store; /* read only: a fork's parent */
	void *const *dealer; /* the actor's DEALER to each peer of
	                      * io->peers (the array: it may be
	                      * remade in place) */
	struct metrics_hist *fetch_hist; /* each fetch's ms (NULL: none) */
};

struct packfetch;

/* *out is the caller's (packfetch_destroy); o's pointers are borrowed for
 * its life. */
void packfetch_open(struct packfetch **out, const struct packfetch_opts *o);

/* Drop a fetch in progress (its quarantine removed); NULL is fine. */
void packfetch_destroy(struct packfetch **pfp);

/* The repository being fetched into, or NULL when no fetch is. */
const char *packfetch_repo(const struct packfetch *pf);

/* The tips of the last fetch that ended (*n of them): after
 * PACKFETCH_OK, proved connected in packfetch_last_repo. */
const char (*packfetch_wants(const struct packfetch *pf,
                             size_t *n))[OID_HEX + 1];
const char *packfetch_last_repo(const struct packfetch *pf);

/* Fetch wants (nwants, at most GITIO_WANTS_MAX) into repo, asking peer
 * first (-1: config order) first.  No fetch may be going. */
enum packfetch_verdict packfetch_start(struct packfetch *pf,
                                       const char *repo,
                                       const char (*wants)[OID_HEX + 1],
                                       size_t nwants,
                                       int first);

/* One frame on peer i's DEALER. */
enum packfetch_verdict
packfetch_dealer(struct packfetch *pf, int i, zmq_msg_t *msg);

/* A fetch silent for too long asks the next peer. */
enum packfetch_verdict packfetch_tick(struct packfetch *pf, uint64_t now_ms);

#endif
