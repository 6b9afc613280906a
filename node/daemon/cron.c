/*
 * cron.c: the periodic jobs' table (cron.h).
 */
#include "cron.h"
#include "banned.h"

void cron_run(struct cron_job *jobs, size_t n, uint64_t now_ms,
	      void *payload)
{
	for (size_t i = 0; i < n; i++) {
		struct cron_job *j = &jobs[i];
		if (j->period_ms && j->due_ms > now_ms)
			continue;
		j->run(payload, now_ms);
		j->due_ms = now_ms + j->period_ms;
	}
}

long cron_wait_ms(const struct cron_job *jobs, size_t n, uint64_t now_ms,
		  long max_ms)
{
	long wait = max_ms;

	for (size_t i = 0; i < n; i++) {
		if (!jobs[i].period_ms)
			continue;
		if (jobs[i].due_ms <= now_ms)
			return 0;
		if (jobs[i].due_ms - now_ms < (uint64_t)wait)
			wait = (long)(jobs[i].due_ms - now_ms);
	}
	return wait;
}
