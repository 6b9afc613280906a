/*
 * crashpoint.c: the GRANTD_TEST_CRASH_AT test hook (crashpoint.h).  Its
 * one variable is written by crashpoint_init() before any thread starts
 * and only read afterwards.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crashpoint.h"
#include "log.h"
#include "banned.h"

static char crash_at[32];

void crashpoint_init(void)
{
	const char *e = getenv("GRANTD_TEST_CRASH_AT");

	if (!e || !*e || strlen(e) >= sizeof(crash_at))
		return;
	snprintf(crash_at, sizeof(crash_at), "%s", e);
	log_warn("test hook armed: the node kills itself at point=%s "
		 "(GRANTD_TEST_CRASH_AT; never set it in production)",
		 crash_at);
}

void crashpoint(const char *name)
{
	if (!crash_at[0] || strcmp(crash_at, name))
		return;
	log_warn("test hook: killed at point=%s", name);
	raise(SIGKILL);
}
