/*
 * thread.h: how the node starts a thread.
 *
 * Every helper thread (syncer, readers, gitrepl) is started here, with
 * every asynchronous signal blocked and a name.  Signals are the main
 * loop's: a SIGTERM that landed on a helper thread would make its blocking
 * zmq_recv fail with EINTR, the helper would end, and the main thread's
 * stop message to it would then block for ever (seen in CI: "grantd at
 * portland stops on SIGTERM: it needed SIGKILL", the main thread in
 * zmq_send inside syncer_destroy).  The name ("gd-syncer" ...) is what
 * `top -H`, `ps -L` and /proc/PID/task/TID/comm show.
 */
#ifndef GD_THREAD_H
#define GD_THREAD_H

#include <pthread.h>

/* Start fn(arg) on *t with every signal but the synchronous ones (SEGV,
 * BUS, FPE, ILL, TRAP, ABRT) blocked, named name (at most 15 bytes).
 * The calling thread's mask is unchanged.  0, or the pthread_create
 * error number. */
int thread_start(pthread_t *t, const char *name, void *(*fn)(void *),
		 void *arg);

#endif
