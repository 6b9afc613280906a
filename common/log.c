/*
 * log.c: stderr or syslog lines.  A line is formatted into one buffer and
 * written with one write(2) so lines from several threads never interleave.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "banned.h"

static const char *log_ident = "grantd";
static bool log_syslog;
static enum log_level log_max = LOG_LVL_INFO;
/* getpid() is a system call (perf of the node under vals: 7.4 % of its
 * samples in getpid, libzmq's and one here per line, on a machine whose
 * system calls are dear): taken once, and again in a forked child (0: not
 * taken yet).  Atomic: every thread logs. */
static pid_t log_pid;

static void log_forget_pid(void)
{
	__atomic_store_n(&log_pid, 0, __ATOMIC_RELAXED);
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, log_forget_pid);
}

static pid_t log_getpid(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pid_t p = __atomic_load_n(&log_pid, __ATOMIC_RELAXED);

	if (!p) {
		pthread_once(&once, register_atfork);
		p = getpid();
		__atomic_store_n(&log_pid, p, __ATOMIC_RELAXED);
	}
	return p;
}

void log_init(const char *ident, bool use_syslog, enum log_level level)
{
	log_ident = ident;
	log_syslog = use_syslog;
	log_max = level;
	if (use_syslog)
		openlog(ident, LOG_PID, LOG_DAEMON);
}

static void log_vline(int prio, const char *tag, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static void log_vline(int prio, const char *tag, const char *fmt, va_list ap)
{
	char line[2048];
	int n = 0;

	if (log_syslog) {
		vsyslog(prio, fmt, ap);
		return;
	}
	{
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line),
			     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] %s: ",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			     tm.tm_hour, tm.tm_min, tm.tm_sec,
			     ts.tv_nsec / 1000000, log_ident, (int)log_getpid(), tag);
	}
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	static const char *tag[] = { "error", "warning", "info", "debug" };
	va_list ap;

	if (level > log_max)
		return;
	va_start(ap, fmt);
	log_vline(prio[level], tag[level], fmt, ap);
	va_end(ap);
}

void log_auth(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	openlog(log_ident, LOG_PID, LOG_AUTH);
	vsyslog(LOG_AUTH | LOG_INFO, fmt, ap);
	va_end(ap);
}

bool log_limit_pass(struct log_limit *l, uint64_t now_ms, uint64_t period_ms,
		    uint64_t *held)
{
	if (l->next_ms && now_ms < l->next_ms) {
		l->held++;
		return false;
	}
	*held = l->held;
	l->held = 0;
	l->next_ms = now_ms + period_ms;
	if (!l->next_ms) /* 0 means "never passed" */
		l->next_ms = 1;
	return true;
}
