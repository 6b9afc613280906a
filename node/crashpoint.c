/*
 * crashpoint.c: the GRANTD_TEST_CRASH_AT and GRANTD_TEST_FAULT_AT test
 * hooks (crashpoint.h).  Their variables are written by crashpoint_init() before any thread starts
 * and only read afterwards.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crashpoint.h"
#include "log.h"
#include "banned.h"

static char crash_at[32], fault_at[32];

static void arm(char point[32], const char *var, const char *what)
{
	const char *e = getenv(var);

	if (!e || !*e || strlen(e) >= 32)
		return;
	snprintf(point, 32, "%s", e);
	log_warn("test hook armed: %s at point=%s (%s; never set it in "
		 "production)", what, point, var);
}

void crashpoint_init(void)
{
	arm(crash_at, "GRANTD_TEST_CRASH_AT", "the node kills itself");
	arm(fault_at, "GRANTD_TEST_FAULT_AT", "an operation fails");
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
