/*
 * writer.h: where a change is stored.
 *
 * The writer owns THE store batch every change of the node goes into
 * (local requests through control, peers' operations through repl, the
 * grant sweep), commits it, and owns what follows a commit:
 *
 *   writer_commit()  writes the batch with the node's counters
 *                    (ops_commit, no fsync), takes a ticket, moves the
 *                    batch's operations (ops.outbox) under that ticket,
 *                    takes a read view of the state just written, asks
 *                    the syncer for an fsync, and makes the directories
 *                    of the repositories the batch made live.  A commit
 *                    that fails drops the batch and every in-memory
 *                    advance it made (writer_discard): nothing of it is
 *                    half-applied, and the next batch starts clean.
 *   writer_hold()    keeps a caller's item (control's held replies) until
 *                    its ticket is durable.
 *   writer_synced()  the syncer's answer: for every ticket now durable,
 *                    one call to the node (o->durable_fn) hands over the
 *                    tickets' operations for peers, the newest read view
 *                    for readers and how far durability got; only then
 *                    are the held items handed back.  So a reader, a peer
 *                    and a caller all see a batch only once it is on
 *                    disk, and a caller's reply never goes out before the
 *                    operations it covers are published and the view
 *                    that shows them is handed over.
 *
 * Tickets grow by one per commit that wrote something; ticket T durable
 * means every batch up to T is.  One thread (the writer, main.c's loop)
 * calls everything here.
 */
#ifndef GD_WRITER_H
#define GD_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "ops.h"
#include "store.h"

struct syncer;
struct writer;

/* What finish() hands the node once the syncer covered some tickets. */
struct writer_durable {
	/* the packed operations of every ticket now durable, one after the
	 * other in ticket order, each behind a 4-byte length (ops.outbox's
	 * format, as repl_publish takes it); len 0 when they wrote none.
	 * The writer's: the callee may empty it (repl_publish does), the
	 * writer wipes and frees it after the call */
	struct buf *ops;
	/* the newest read view, of the state right after ticket; its
	 * ownership moves to the callee (readers_publish); NULL when no
	 * ticket ended here */
	struct store_batch *view;
	/* every ticket up to this one is durable (repl_synced: the latency
	 * samples close) */
	uint64_t ticket;
};

/* The node's one callback: called once per answer of the syncer, BEFORE
 * the held items of those tickets end (writer_hold), so replies go out
 * only after the operations are published and the view is handed over. */
typedef void (*writer_durable_fn)(const struct writer_durable *d,
                                  void *payload);

struct writer_opts {
	struct store *store;
	struct ops *ops;          /* the node's, borrowed */
	struct syncer *syncer;    /* borrowed; its answers come to
				   * writer_synced() */
	const char *repo_dir;     /* repositories follow their records */
	const char *hook;         /* their post-receive command line */
	/* gitolite mode: the repositories are gitolite's, adopted when
	 * there (repos_adopt), never made here */
	bool gitolite;
	/* where durable operations, views and tickets go (NULL: nobody;
	 * the operations are dropped and the newest view is kept, for
	 * writer_view()) */
	writer_durable_fn durable_fn;
	void *durable_payload;
};

/* A held item's end: durable is true once its ticket is on disk, false
 * when the writer goes away first (then only free it: the caller sees the
 * node go away and fails closed). */
typedef void (*writer_done_fn)(void *item, bool durable);

/* Open the writer: an empty batch, no ticket yet, and a first read view
 * of the committed state.  Strings in o must outlive it.  *out is the
 * caller's (writer_destroy).  Returns 0 or GD_EIO. */
int writer_open(struct writer **out, const struct writer_opts *o);

/* Drop what is not durable yet (held items ended with durable=false),
 * the batch and the views.  NULL-safe; sets *wp to NULL. */
void writer_destroy(struct writer **wp);

/* THE batch.  Borrowed; the same pointer for the writer's whole life (a
 * failed commit empties it, never replaces it). */
struct store_batch *writer_batch(struct writer *w);

/*
 * Commit the batch.  On success *ticket is the ticket whose durability
 * covers it: a new one when the batch wrote something, else the last one
 * taken (0: none yet), which may be durable already.  On failure nothing
 * of the batch is written, writer_discard() has run, *ticket is 0, and
 * GD_EIO comes back (logged): the callers must be told that the node
 * failed to decide.  GRANTD_TEST_FAULT_AT=commit makes every commit fail
 * so (crashpoint.h).
 */
int writer_commit(struct writer *w, uint64_t *ticket);

/* Throw the batch away: its writes, and what ops advanced in memory for
 * it (sequence, digest, vector, outbox). */
void writer_discard(struct writer *w);

/* Call done(item, true) once ticket is durable: at once when it already
 * is, else from writer_synced() (items in ticket order). */
void writer_hold(struct writer *w, uint64_t ticket, writer_done_fn done,
		 void *item);

/* The syncer's pipe, for the node's poll loop. */
void *writer_socket(struct writer *w);

/* Read the syncer's answer and finish every ticket it covers: one call
 * of o->durable_fn with their operations, the newest read view and the
 * ticket, then the held items end.  Returns the ticket now durable (0: no
 * answer). */
uint64_t writer_synced(struct writer *w);

/* At shutdown: wait (10 s at most) for every ticket taken, finishing
 * them as writer_synced() does. */
void writer_drain(struct writer *w);

/* The last ticket taken, and the last one durable. */
uint64_t writer_ticket(const struct writer *w);
uint64_t writer_durable(const struct writer *w);

/* Committed state for reads: a read-only view (store_view_new) of the
 * state right after the newest durable batch.  Borrowed; valid until the
 * next writer_synced().  NULL when the views go to o->durable_fn. */
struct store_batch *writer_view(struct writer *w);

/* Periodic work, rows of main.c's cron (their periods are there):
 * repositories whose directory could not be made are tried again
 * (writer_retry_repos; nothing when none waits), and the expired grants
 * are forgotten (writer_sweep: ops_sweep_grants in the batch, committed
 * here; it reads the wall clock for expiries itself). */
void writer_retry_repos(struct writer *w);
void writer_sweep(struct writer *w);

#endif
