/*
 * test_clock.c: common/clock.h, the node's wall and monotonic clocks.
 *
 * The wall clock in ms and in µs are the same clock; the monotonic clock
 * never steps back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "clock.h"

static void test_wall_units(void **state)
{
	uint64_t ms = clock_wall_ms(), us = clock_wall_us();
	uint64_t ms2 = clock_wall_ms();

	(void)state;
	assert_true(ms > UINT64_C(1600000000000)); /* after 2020 */
	assert_true(us / 1000 >= ms && us / 1000 <= ms2);
	assert_true((uint64_t)time(NULL) * 1000 + 2000 >= ms);
}

static void test_mono_never_back(void **state)
{
	uint64_t last = clock_mono_ms();

	(void)state;
	for (int i = 0; i < 100000; i++) {
		uint64_t t = clock_mono_ms();
		assert_true(t >= last);
		last = t;
	}
}

/* The test hook steps the wall clock, both units, and never the
 * monotonic one (the node's timers run on it: test_clock_step.sh). */
static void test_step_moves_wall_only(void **state)
{
	uint64_t w0 = clock_wall_ms(), m0 = clock_mono_ms();

	(void)state;
	assert_int_equal(clock_test_step(3600000), 3600000);
	uint64_t w1 = clock_wall_ms(), u1 = clock_wall_us();
	uint64_t m1 = clock_mono_ms();
	assert_true(w1 >= w0 + 3600000 && w1 < w0 + 3600000 + 5000);
	assert_true(u1 / 1000 >= w1 && u1 / 1000 < w1 + 5000);
	assert_true(m1 >= m0 && m1 < m0 + 5000);
	assert_int_equal(clock_test_step(-7200000), -3600000);
	uint64_t w2 = clock_wall_ms();
	assert_true(w2 + 3600000 >= w0 && w2 + 3600000 < w0 + 5000);
	assert_true(clock_mono_ms() >= m1);
	assert_int_equal(clock_test_step(3600000), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wall_units),
		cmocka_unit_test(test_mono_never_back),
		cmocka_unit_test(test_step_moves_wall_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
