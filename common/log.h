/*
 * log.h: one line per event, to stderr or syslog.
 *
 * Messages follow Git's style: lower case, no full stop, the subject named
 * as key=value (user=alice ip=192.0.2.7 repo=linux).  Never pass a token,
 * a secret or a raw payload.  Safe to call from any thread.
 */
#ifndef GD_LOG_H
#define GD_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* ident names the program; use_syslog sends lines to syslog(3) instead. */
void log_init(const char *ident, bool use_syslog, enum log_level level);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* An audit line for the auth facility (syslog LOG_AUTH), whatever the
 * destination of ordinary lines; grant-shell records every 2fa result here. */
void log_auth(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A line that a peer or client can make the node repeat (a dropped
 * message) passes log_limit_pass at most once per period_ms: the first at
 * once, then one per period with *held, the lines held back since the last
 * one passed, for the text ("and N more like it").  One struct per call
 * site, used by one thread (zero-initialised: static is fine). */
struct log_limit {
	uint64_t next_ms;
	uint64_t held;
};
bool log_limit_pass(struct log_limit *l, uint64_t now_ms, uint64_t period_ms,
		    uint64_t *held);

/* The period of those lines in the node (ms). */
#define LOG_LIMIT_MS 10000

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
