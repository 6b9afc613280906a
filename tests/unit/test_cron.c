/*
 * test_cron.c: the periodic jobs' table (node/daemon/cron.h): a job with
 * period P runs at the first turn and then once per P, jobs run in table
 * order, period 0 runs every turn, and the loop's wait ends when the
 * earliest job is due.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cron.h"

/* What the jobs did: the order they ran in, as letters. */
struct trace {
	char ran[256];
	size_t n;
	uint64_t last_now;
};

static void note(struct trace *t, char c, uint64_t now)
{
	assert_true(t->n < sizeof(t->ran) - 1);
	t->ran[t->n++] = c;
	t->ran[t->n] = '\0';
	t->last_now = now;
}

static void job_a(void *payload, uint64_t now) { note(payload, 'a', now); }
static void job_b(void *payload, uint64_t now) { note(payload, 'b', now); }
static void job_c(void *payload, uint64_t now) { note(payload, 'c', now); }

static size_t count(const struct trace *t, char c)
{
	size_t k = 0;
	for (size_t i = 0; i < t->n; i++)
		k += t->ran[i] == c;
	return k;
}

/* A job of period P runs at the first turn, then once per P however
 * often the loop turns. */
static void test_once_per_period(void **state)
{
	struct cron_job jobs[] = { { "a", 100, job_a, 0 } };
	struct trace t = { 0 };

	(void)state;
	for (uint64_t now = 1000; now < 2000; now += 7)
		cron_run(jobs, 1, now, &t);
	/* at 1000, then at the first turn at or after each +100 */
	assert_int_equal(count(&t, 'a'), 10);
	/* never twice within a period */
	memset(&t, 0, sizeof(t));
	jobs[0].due_ms = 0;
	cron_run(jobs, 1, 5000, &t);
	cron_run(jobs, 1, 5099, &t);
	assert_int_equal(count(&t, 'a'), 1);
	cron_run(jobs, 1, 5100, &t);
	assert_int_equal(count(&t, 'a'), 2);
	assert_int_equal(t.last_now, 5100);
}

/* Jobs due at the same turn run in table order; period 0 runs every
 * turn. */
static void test_table_order(void **state)
{
	struct cron_job jobs[] = {
		{ "c", 0, job_c, 0 },
		{ "b", 50, job_b, 0 },
		{ "a", 20, job_a, 0 },
	};
	struct trace t = { 0 };

	(void)state;
	cron_run(jobs, 3, 100, &t);
	assert_string_equal(t.ran, "cba");
	cron_run(jobs, 3, 110, &t); /* none with a period due */
	assert_string_equal(t.ran, "cbac");
	cron_run(jobs, 3, 120, &t);
	assert_string_equal(t.ran, "cbacca");
	cron_run(jobs, 3, 150, &t);
	assert_string_equal(t.ran, "cbaccacba");
}

/* The wait ends when the earliest job with a period is due, never later
 * than the loop's own bound; period-0 jobs do not make it spin. */
static void test_wait_earliest_due(void **state)
{
	struct cron_job jobs[] = {
		{ "c", 0, job_c, 0 },
		{ "b", 300, job_b, 0 },
		{ "a", 40, job_a, 0 },
	};
	struct trace t = { 0 };

	(void)state;
	/* never run: due at once */
	assert_int_equal(cron_wait_ms(jobs, 3, 1000, 50), 0);
	cron_run(jobs, 3, 1000, &t);
	assert_int_equal(cron_wait_ms(jobs, 3, 1000, 50), 40);
	assert_int_equal(cron_wait_ms(jobs, 3, 1030, 50), 10);
	assert_int_equal(cron_wait_ms(jobs, 3, 1040, 50), 0);
	assert_int_equal(cron_wait_ms(jobs, 3, 1000, 25), 25);
	cron_run(jobs, 3, 1040, &t);
	/* a due at 1080, b at 1300 */
	assert_int_equal(cron_wait_ms(jobs, 3, 1050, 1000), 30);
	/* only period 0: the loop's bound */
	assert_int_equal(cron_wait_ms(jobs, 1, 1050, 50), 50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_once_per_period),
		cmocka_unit_test(test_table_order),
		cmocka_unit_test(test_wait_earliest_due),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
