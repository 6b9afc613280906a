/*
 * reconcile.h: the reconciler, the heart of repository replication: the
 * items (refs whose record changed), each brought in line with its record
 * (read the record, compare with the disk, fetch the objects it lacks,
 * move the ref with a compare-and-swap), and the tips that lost an LWW
 * race kept as refs/grantd/conflicts/SITE/REF (gitrepl.h tells the
 * whole story; docs/git-replication.md the design).  The refs of a
 * repository whose record is deleted are done at once: never waited for,
 * never fetched (its directory was moved aside).
 *
 * The gitrepl actor owns it and feeds it what the writer says (changed
 * refs, "look at all") and the verdicts of the fetches it starts
 * (reconcile_fetched).  It calls down only: packfetch.c (to start a
 * fetch), glsync.c (a ref moved), gitio.c (marks for the writer, errors,
 * the repositories), gitproc.c, repos.c (the hook, for spooled pushes)
 * and the store (read only).  Actor thread only.
 */
#ifndef GD_RECONCILE_H
#define GD_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gitio.h"
#include "glsync.h"
#include "packfetch.h"
#include "store.h"

struct reconcile_opts {
	struct gitio *io;
	struct store *store; /* read only */
	struct packfetch *fetch; /* borrowed: the actor's */
	struct glsync *glsync; /* borrowed: NULL when not gitolite mode */
	const char *hook_path; /* grant-hook, for spooled pushes (copied) */
	const char *conf_path; /* ... and its config (copied) */
};

struct reconcile;

/* *out is the caller's (reconcile_destroy). */
void reconcile_open(struct reconcile **out, const struct reconcile_opts *o);
void reconcile_destroy(struct reconcile **rcp);

/* Refs whose record changed: "repo \0 ref \0" ..., len bytes. */
void reconcile_changed(struct reconcile *rc, const char *p, size_t len);

/* Every ref record, fetching from peer index prefer first until the
 * sweep is over: until the refs it found, or (none yet: a site just
 * started) the first ones the state transfer brings, are done.  -1: each
 * record's origin, unless a sweep that prefers a peer is going on. */
void reconcile_all(struct reconcile *rc, int prefer);

/* Check the refs that are due; the objects one repository lacks are
 * asked in one fetch, as soon as one is found to lack any: the refs of
 * other repositories are looked at after it is asked (and one already
 * known to need a fetch, once no fetch is in flight), so each ref is
 * looked at a bounded number of times however many repositories wait.
 * Returns true when more are due right away. */
bool reconcile_work(struct reconcile *rc);

/* The fetch ended with verdict v (PACKFETCH_OK or _FAILED): the refs
 * waiting for it are due again, now (they move once the next fetch is
 * asked) or after a back-off. */
void reconcile_fetched(struct reconcile *rc,
                       enum packfetch_verdict v,
                       uint64_t now_ms);

#endif
