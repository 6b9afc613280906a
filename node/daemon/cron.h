/*
 * cron.h: the node's periodic jobs, run from one table.
 *
 * main.c's loop waits for events (requests, the syncer's answers, peers'
 * messages), then runs the cron: every row whose period is up, in table
 * order.  A row's period is its only schedule (Redis's serverCron and
 * run_with_period): a job with period P runs at the first turn, then
 * once per P at most; period 0 means every turn (work whose own timers
 * live in its module, such as repl_tick's heartbeats).  So every period
 * of the node is listed once, all on the monotonic clock, and adding a
 * periodic job is adding one row.
 *
 * One thread (the loop's) calls everything here.
 */
#ifndef GD_CRON_H
#define GD_CRON_H

#include <stddef.h>
#include <stdint.h>

/* A job: payload is the cron's (cron_run), now_ms the monotonic clock. */
typedef void (*cron_fn)(void *payload, uint64_t now_ms);

struct cron_job {
	const char *name;    /* for logs and tests */
	uint64_t period_ms;  /* 0: every turn */
	cron_fn run;
	uint64_t due_ms;     /* the cron's: next run (0: at the first turn) */
};

/* Run every job of jobs[0..n) due at now_ms, in table order, each with
 * payload; a job that ran is next due at now_ms + its period. */
void cron_run(struct cron_job *jobs, size_t n, uint64_t now_ms,
	      void *payload);

/* How long the loop may wait for events at now_ms: the time until the
 * earliest job with a period is due (0: one is due now), at most max_ms.
 * Jobs of period 0 do not count: they run whenever the loop turns. */
long cron_wait_ms(const struct cron_job *jobs, size_t n, uint64_t now_ms,
		  long max_ms);

#endif
