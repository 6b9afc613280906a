/*
 * sdnotify.c: READY=1, STATUS= and WATCHDOG=1 to systemd through
 * libsystemd's sd_notify (the protocol is a datagram on $NOTIFY_SOCKET;
 * libsystemd knows its corners: abstract sockets, credentials).  The
 * environment is left as it is: git and grant-hook children inherit
 * NOTIFY_SOCKET, and the unit's NotifyAccess=main makes systemd ignore
 * anything they might send.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "sdnotify.h"
#include "xalloc.h"
#include "banned.h"

struct sdnotify {
	bool ready;             /* READY=1 sent */
	bool failed;            /* a send failed (logged once) */
	uint64_t ping_ms;       /* WATCHDOG=1 every ping_ms; 0 = none */
	uint64_t pinged_ms;     /* monotonic time of the last one */
	char status[128];       /* the last STATUS= text sent */
};

/* sd_notify's answer: > 0 sent, 0 no NOTIFY_SOCKET, < 0 failed. */
static int send_state(struct sdnotify *s, const char *text)
{
	int rc = sd_notify(0, text);

	if (rc < 0 && !s->failed) {
		s->failed = true;
		log_error("cannot notify systemd (NOTIFY_SOCKET): %s",
			  strerror(-rc));
	}
	return rc;
}

int sdnotify_open(struct sdnotify **out)
{
	struct sdnotify *s = xcalloc(1, sizeof(*s));
	uint64_t usec = 0;

	*out = NULL;
	/* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID (if set)
	 * names this process */
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
		s->ping_ms = usec / 2000 ? usec / 2000 : 1;
		log_info("systemd watchdog on interval_ms=%llu ping_ms=%llu",
			 (unsigned long long)(usec / 1000),
			 (unsigned long long)s->ping_ms);
	}
	*out = s;
	return 0;
}

void sdnotify_update(struct sdnotify *s, const struct sdnotify_state *st)
{
	char text[sizeof(s->status)];
	bool ready_now = !s->ready && !st->syncing;

	snprintf(text, sizeof(text), "%s; peers %d/%d; syncing %s",
		 ready_now || s->ready ? "serving" : "starting", st->peers_up,
		 st->npeers, st->syncing ? "yes" : "no");
	if (ready_now) {
		char msg[sizeof(text) + 32];
		snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", text);
		s->ready = true;
		log_info("serving%s", send_state(s, msg) > 0 ?
			 ": told systemd READY=1" : "");
	} else if (!strcmp(text, s->status)) {
		return;
	} else {
		char msg[sizeof(text) + 16];
		snprintf(msg, sizeof(msg), "STATUS=%s", text);
		(void)send_state(s, msg);
	}
	snprintf(s->status, sizeof(s->status), "%s", text);
}

void sdnotify_tick(struct sdnotify *s)
{
	uint64_t now;

	if (!s->ping_ms)
		return;
	now = clock_mono_ms();
	if (s->pinged_ms && now - s->pinged_ms < s->ping_ms)
		return;
	(void)send_state(s, "WATCHDOG=1");
	s->pinged_ms = now;
}

void sdnotify_stopping(struct sdnotify *s)
{
	(void)send_state(s, "STOPPING=1\nSTATUS=stopping");
}

void sdnotify_destroy(struct sdnotify **sp)
{
	free(*sp);
	*sp = NULL;
}
