/*
 * sdnotify.h: telling systemd how the node is (sd_notify(3), libsystemd),
 * for a unit of Type=notify.
 *
 * READY=1 goes once, when the node serves: its sockets answer and the
 * start-up sync with the peers is over (tokens are validated).  STATUS=
 * lines ("serving; peers 2/2; syncing no") go whenever their text
 * changes; `systemctl status grantd` shows the last.  With WatchdogSec= in
 * the unit, systemd sets WATCHDOG_USEC and WATCHDOG_PID, and WATCHDOG=1
 * goes every half of that interval from the main loop: a loop that stops
 * turning gets the node restarted.  STOPPING=1 goes when it stops.
 *
 * Without NOTIFY_SOCKET (not started by systemd) every call does nothing
 * (sd_notify returns 0).  A failed send is logged once and never stops
 * the node.  One thread (the main loop) calls all of these.
 */
#ifndef GRANTD_SDNOTIFY_H
#define GRANTD_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

/* What STATUS= says and READY=1 waits for. */
struct sdnotify_state {
	bool syncing;   /* start-up sync with the peers not over */
	int peers_up;   /* peers connected now */
	int npeers;     /* peers configured */
};

struct sdnotify;

/* Reads the watchdog interval the manager asked for (none: no pings).
 * Returns 0 (out of memory ends the process: xalloc.h); *out is the
 * caller's (sdnotify_destroy). */
int sdnotify_open(struct sdnotify **out);

/* The node's state now: sends STATUS= when its text changed, and READY=1
 * the first time st->syncing is false. */
void sdnotify_update(struct sdnotify *s, const struct sdnotify_state *st);

/* WATCHDOG=1 when half the watchdog interval has passed since the last
 * one (monotonic clock); nothing without a watchdog. */
void sdnotify_tick(struct sdnotify *s);

/* STOPPING=1 and STATUS=stopping. */
void sdnotify_stopping(struct sdnotify *s);

/* NULL-safe; sets *sp = NULL. */
void sdnotify_destroy(struct sdnotify **sp);

#endif
