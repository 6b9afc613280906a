/* thread.c: helper threads that never take the main loop's signals. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <signal.h>

#include "thread.h"
#include "banned.h"

int thread_start(pthread_t *t, const char *name, void *(*fn)(void *),
		 void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	/* a fault in the thread is still reported in the thread */
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGABRT);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		pthread_setname_np(*t, name);
	return rc;
}
