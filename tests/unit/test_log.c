/*
 * test_log.c: common/log.c's limit on lines a peer can make the node
 * repeat (log_limit_pass).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "log.h"

/* The first line passes at once; the next ones within the period are held
 * back and counted; the first after it passes with that count. */
static void test_limit(void **state)
{
	struct log_limit l = { 0 };
	uint64_t held = 99;

	(void)state;
	assert_true(log_limit_pass(&l, 0, 10000, &held)); /* now 0 too */
	assert_int_equal(held, 0);
	for (int i = 0; i < 40; i++) /* 4 a second for 10 s */
		assert_false(log_limit_pass(&l, (uint64_t)i * 250, 10000,
					    &held));
	assert_true(log_limit_pass(&l, 10000, 10000, &held));
	assert_int_equal(held, 40);
	assert_false(log_limit_pass(&l, 19999, 10000, &held));
	assert_true(log_limit_pass(&l, 20000, 10000, &held));
	assert_int_equal(held, 1);
	/* quiet for a long time: the next one passes with nothing held */
	assert_true(log_limit_pass(&l, 1000000, 10000, &held));
	assert_int_equal(held, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
