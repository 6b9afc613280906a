/*
 * attest.h: records made before signing get their signed operations
 * (issue 21, docs/security.md "Upgraded stores").
 *
 * A store written by a release that did not sign (v0.1.0) keeps no
 * operations (recops.h) for its records, and a site rebuilt by state
 * transfer refuses every such record whose origin has a key there.  Nor
 * does a site of that release keep any for the operations it takes from
 * an upgraded peer during a rolling upgrade.  So each frontend, once
 * every frontend runs this release, re-issues as new signed operations of
 * its own every record it holds that it is the origin of (whether or not
 * it keeps operations for it here: a peer may keep none):
 *
 *   LWW      (users, enrollments, grants, unlocks, revocations, address
 *            revocations, repositories) the record's stamp origin is this
 *            site: the record as the body, with the record's ORIGINAL hlc
 *            (a new stamp would win over a concurrent newer write of
 *            another site); its merge is a no-op (equal stamp) and
 *            recops_note keeps it.  A ref: a RefUpdate of that one ref,
 *            old = new = its target, the ref's stamp.
 *   FAILS    the failures this site recorded (key site = this site).
 *   PUSHLOG  this site's entries (forks included), stamped as the entry
 *            (ops_check wants it): the same bytes, no fork.
 *   MARKS    every mark held (a mark names no site): a mark op of this
 *            site's with the record's value (a max: idempotent; a mark a
 *            kept one dominates adds nothing to recops).
 *   TLEAVES  skipped: only this release makes them, signed.
 * Those operations replicate like any other, so every site gets them.
 *
 * The job runs in chunks (attest_step) on the writer thread, which
 * commits each one and serves requests between them; each chunk's batch
 * keeps where it stopped (ATTEST_AT), so a restart goes on from there.
 * When every family is scanned, the marker ATTEST_META goes into the
 * chunk's batch and the job is not run again (attest_needed).  A mirror makes
 * no operations: its caller does not run it there.
 *
 * Callers: node/daemon/loop.c (the job, one chunk a turn), tests.
 */
#ifndef GD_ATTEST_H
#define GD_ATTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ops.h"
#include "store.h"

/* CF_META key: the job is done (value: how many it made, 8 bytes BE) */
#define ATTEST_META "recops/attested"
/* CF_META key: where a run stopped (family, 1 byte, then the last key) */
#define ATTEST_AT "recops/attest-at"
/* records attested per chunk (per commit) */
#define ATTEST_CHUNK 256

/* Where a job is: the family scanned and the last key taken there. */
struct attest_job {
	int cf; /* enum store_cf being scanned */
	struct buf after; /* its last key seen (empty: from the start) */
	uint64_t made; /* operations made so far (this run) */
	uint64_t skipped; /* records that do not check: left alone */
	bool done;
};

/* Does s lack the marker (the job still to run)?  Returns 0 or a store
 * error. */
int attest_needed(struct store *s, bool *need);

/* A job from where the last run stopped (ATTEST_AT), or from the start;
 * attest_free its memory.  Returns 0 or a store error. */
int attest_init(struct attest_job *j, struct store *s);
void attest_free(struct attest_job *j);

/* One chunk: up to max records (and at most 16 * max looked at) attested
 * as new local operations in b (ops_local); once the last family is
 * scanned, the marker is put in b and j->done set.  The caller commits b
 * (ops_commit: it signs them) before the next chunk.  Returns how many
 * operations were made, or a negative gd_err (drop b: ops_reload). */
int attest_step(struct attest_job *j,
                struct ops *o,
                struct store_batch *b,
                size_t max);

#endif
