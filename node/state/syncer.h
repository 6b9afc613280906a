/*
 * syncer.h: the fsync thread (pipelined group commit).
 *
 * The writer thread commits batches without waiting for the disk
 * (store_commit(b, false): in the memtable and the WAL file, visible to the
 * next batch) and hands the syncer a ticket.  The syncer drains every
 * ticket waiting, makes the WAL durable with one fsync, and answers with
 * the highest ticket it covered.  Only then does the writer send the
 * replies and publish the operations of those batches.  So the writer
 * keeps serving while the disk works, and one fsync covers every batch
 * that queued up behind it.
 *
 * An actor in the ZeroMQ guide's sense: a thread and an inproc PAIR pipe.
 * If an fsync fails the node stops (exit 1): it can no longer promise that
 * what it acknowledges is on disk, and a restart replays the WAL.
 */
#ifndef GD_SYNCER_H
#define GD_SYNCER_H

#include <stdint.h>

#include "store.h"

struct syncer;

struct metrics_counts;

/* Start the thread.  *out is the caller's (syncer_destroy, which stops
 * the thread after the last sync).  counts (NULL: none; it must outlive
 * the syncer) gets each fsync's duration and the commits it covered
 * (metrics.h). */
int syncer_start(struct syncer **out, struct store *s, void *zctx,
		 struct metrics_counts *counts);
void syncer_destroy(struct syncer **sp);

/* Ask for every write committed so far to be made durable. */
void syncer_request(struct syncer *sy, uint64_t ticket);

/* The writer's end of the pipe, to poll for answers. */
void *syncer_socket(struct syncer *sy);

/* Read one answer: the highest ticket now durable (0: none waiting). */
uint64_t syncer_done(struct syncer *sy);

#endif
