/*
 * loop.h: the node's loop, on the writer thread (main.c calls it once
 * everything is open).
 *
 * It waits on the reader's pipe, the syncer's, the gitrepl actor's and
 * the peers' sockets, answers what arrives, and runs the node's periodic
 * jobs from one table (cron.h: the rows and their periods are loop.c's
 * node_cron).  Adding a periodic job is adding one row there.
 */
#ifndef GD_LOOP_H
#define GD_LOOP_H

#include <signal.h>

struct node;

/* Run until *stop is set (a signal handler sets it), then finish the
 * writes in flight (writer_drain).  Each time *reloads changes (SIGHUP's
 * handler counts them) the configuration is read again between two turns
 * (reload.h).  Returns 0, GD_ENOMEM or GD_EIO (the poll failed; logged). */
int loop_run(struct node *n, const volatile sig_atomic_t *stop,
	     const volatile sig_atomic_t *reloads);

#endif
