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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wall_units),
		cmocka_unit_test(test_mono_never_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
