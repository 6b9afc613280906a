/*
 * crashpoint.c: the GRANTD_TEST_CRASH_AT, GRANTD_TEST_FAULT_AT and
 * GRANTD_TEST_CLOCK_STEP_MS test hooks (crashpoint.h).  Their variables
 * are written by crashpoint_init() before any thread starts and only read
 * afterwards; the SIGUSR2 handler only counts.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "crashpoint.h"
#include "log.h"
#include "banned.h"

static char crash_at[32], fault_at[32];
static int64_t clock_step_ms; /* 0: the clock hook is off */
static bool clock_unblocked;
static volatile sig_atomic_t clock_steps; /* SIGUSR2s: the handler's */
static sig_atomic_t clock_taken; /* the main loop's */

static void on_usr2(int sig)
{
	(void)sig;
	clock_steps++;
}

/* GRANTD_TEST_CLOCK_STEP_MS: SIGUSR2 counted, and blocked until the main
 * loop unblocks it for itself (no other thread sees an EINTR). */
static void arm_clock(void)
{
	const char *e = getenv("GRANTD_TEST_CLOCK_STEP_MS");
	struct sigaction sa;
	sigset_t set;
	char *end;
	long long v;

	if (!e || !*e)
		return;
	errno = 0;
	v = strtoll(e, &end, 10);
	if (errno || *end || v == 0 || v > INT32_MAX || v < -INT32_MAX) {
		log_warn("test hook ignored: GRANTD_TEST_CLOCK_STEP_MS=%s is "
			 "not a step in ms", e);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr2;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	if (sigaction(SIGUSR2, &sa, NULL) < 0 ||
	    pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) {
		log_warn("test hook ignored: no SIGUSR2 handler: %s",
			 strerror(errno));
		return;
	}
	clock_step_ms = v;
	log_warn("test hook armed: SIGUSR2 steps the wall clock step_ms=%lld "
		 "(GRANTD_TEST_CLOCK_STEP_MS; never set it in production)", v);
}

static void arm(char point[32], const char *var, const char *what)
{
	const char *e = getenv(var);

	if (!e || !*e || strlen(e) >= 32)
		return;
	snprintf(point, 32, "%s", e);
	log_warn("test hook armed: %s at point=%s (%s; never set it in "
		 "production)", what, point, var);
}

static uint64_t sync_grace_ms; /* 0: the hook is off */

/* GRANTD_TEST_SYNC_GRACE_MS: how long a starting node waits for silent
 * peers before it serves alone (repl.c's SYNC_GRACE_MS, 5 s) */
static void arm_sync_grace(void)
{
	const char *e = getenv("GRANTD_TEST_SYNC_GRACE_MS");
	char *end;
	long long v;

	if (!e || !*e)
		return;
	errno = 0;
	v = strtoll(e, &end, 10);
	if (errno || *end || v <= 0 || v > 3600 * 1000) {
		log_warn("test hook ignored: GRANTD_TEST_SYNC_GRACE_MS=%s is "
			 "not a time in ms", e);
		return;
	}
	sync_grace_ms = (uint64_t)v;
	log_warn("test hook armed: a starting node waits for silent peers "
		 "grace_ms=%lld (GRANTD_TEST_SYNC_GRACE_MS; never set it in "
		 "production)", v);
}

uint64_t crashpoint_sync_grace_ms(uint64_t dflt)
{
	return sync_grace_ms ? sync_grace_ms : dflt;
}

void crashpoint_init(void)
{
	arm(crash_at, "GRANTD_TEST_CRASH_AT", "the node kills itself");
	arm(fault_at, "GRANTD_TEST_FAULT_AT", "an operation fails");
	arm_clock();
	arm_sync_grace();
}

void crashpoint_clock(void)
{
	sigset_t set;

	if (!clock_step_ms)
		return;
	if (!clock_unblocked) {
		sigemptyset(&set);
		sigaddset(&set, SIGUSR2);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
		clock_unblocked = true;
	}
	while (clock_taken != clock_steps) {
		clock_taken++;
		int64_t off = clock_test_step(clock_step_ms);
		log_warn("test hook: wall clock stepped step_ms=%" PRId64
			 " offset_ms=%" PRId64, clock_step_ms, off);
	}
}

void crashpoint(const char *name)
{
	if (!crash_at[0] || strcmp(crash_at, name))
		return;
	log_warn("test hook: killed at point=%s", name);
	raise(SIGKILL);
}

bool faultpoint(const char *name)
{
	return fault_at[0] && !strcmp(fault_at, name);
}
