/*
 * test_hlc.c: node/state/hlc.h, the hybrid logical clock.
 *
 * LWW merges order every change by these stamps, so the one property that
 * matters is that a clock never hands out a stamp that is not greater than
 * every stamp it gave or saw, whatever the wall clock does.  The tests
 * drive hlc_tick() with a wall clock of their own so they can step it back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "clock.h"
#include "hlc.h"

#define LOGICAL(h) ((h) & ((UINT64_C(1) << HLC_LOGICAL_BITS) - 1))
#define STAMP(ms, l) (((uint64_t)(ms) << HLC_LOGICAL_BITS) | (l))

static void test_layout(void **state)
{
	struct hlc h = { 0 };
	uint64_t t = hlc_tick(&h, 1700000000123);

	assert_int_equal(HLC_LOGICAL_BITS, 16);
	assert_int_equal(hlc_ms(t), 1700000000123);
	assert_int_equal(LOGICAL(t), 0);
	assert_int_equal(t, STAMP(1700000000123, 0));
}

static void test_same_ms_counts(void **state)
{
	struct hlc h = { 0 };

	assert_int_equal(hlc_tick(&h, 5000), STAMP(5000, 0));
	assert_int_equal(hlc_tick(&h, 5000), STAMP(5000, 1));
	assert_int_equal(hlc_tick(&h, 5000), STAMP(5000, 2));
	/* the next millisecond starts the counter again */
	assert_int_equal(hlc_tick(&h, 5001), STAMP(5001, 0));
	assert_int_equal(hlc_tick(&h, 5001), STAMP(5001, 1));
}

static void test_clock_steps_back(void **state)
{
	struct hlc h = { 0 };
	static const uint64_t wall[] = { 1000, 2000, 1500, 1500, 999, 1,
					 2000, 2001, 1000, 2002 };
	uint64_t prev = 0;

	for (size_t i = 0; i < sizeof(wall) / sizeof(wall[0]); i++) {
		uint64_t t = hlc_tick(&h, wall[i]);
		if (t <= prev)
			fail_msg("tick %zu (wall %llu) gave %llx after %llx", i,
				 (unsigned long long)wall[i],
				 (unsigned long long)t,
				 (unsigned long long)prev);
		prev = t;
	}
	/* a stepped-back clock keeps the latest time it saw and counts */
	struct hlc g = { 0 };
	assert_int_equal(hlc_tick(&g, 2000), STAMP(2000, 0));
	assert_int_equal(hlc_tick(&g, 1500), STAMP(2000, 1));
	assert_int_equal(hlc_tick(&g, 1), STAMP(2000, 2));
	assert_int_equal(hlc_tick(&g, 2001), STAMP(2001, 0));
}

static void test_observe_future(void **state)
{
	struct hlc h = { 0 };
	uint64_t remote = STAMP(9000, 5);

	hlc_tick(&h, 5000);
	hlc_observe(&h, remote);
	uint64_t t = hlc_tick(&h, 5001);
	assert_true(t > remote);
	assert_int_equal(t, STAMP(9000, 6));
	assert_true(hlc_tick(&h, 5002) > t);
	/* once the wall clock passes the remote stamp, it leads again */
	assert_int_equal(hlc_tick(&h, 9001), STAMP(9001, 0));
}

static void test_observe_past(void **state)
{
	struct hlc h = { 0 };

	uint64_t t1 = hlc_tick(&h, 5000);
	hlc_observe(&h, STAMP(100, 3));
	hlc_observe(&h, 0);
	uint64_t t2 = hlc_tick(&h, 5000);
	assert_int_equal(t2, t1 + 1);
	/* observing a stamp equal to our own still orders after it */
	hlc_observe(&h, t2);
	assert_true(hlc_tick(&h, 4000) > t2);
}

static void test_observe_then_tick_greater(void **state)
{
	/* whatever came before, a tick is greater than each observed stamp */
	struct hlc h = { 0 };
	uint64_t seen = 0, prev = 0;
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int i = 0; i < 10000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* stamps within a few seconds of each other, either way */
		uint64_t wall = 1700000000000ull + (x % 5000);
		if (x & 1) {
			uint64_t r = STAMP(1700000000000ull + ((x >> 8) % 5000),
					   (x >> 32) & 0xff);
			hlc_observe(&h, r);
			if (r > seen)
				seen = r;
		} else {
			uint64_t t = hlc_tick(&h, wall);
			if (t <= prev || t <= seen)
				fail_msg("step %d: %llx not after %llx/%llx",
					 i, (unsigned long long)t,
					 (unsigned long long)prev,
					 (unsigned long long)seen);
			prev = t;
		}
	}
}

static void test_logical_overflow(void **state)
{
	/* more than 2^16 stamps in one millisecond still grow */
	struct hlc h = { 0 };
	uint64_t prev = hlc_tick(&h, 5000);

	for (int i = 0; i < 70000; i++) {
		uint64_t t = hlc_tick(&h, 5000);
		if (t <= prev)
			fail_msg("tick %d: %llx after %llx", i,
				 (unsigned long long)t,
				 (unsigned long long)prev);
		prev = t;
	}
}

static void test_now(void **state)
{
	struct hlc h = { 0 };
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t wall = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec /
			1000000;
	uint64_t w = clock_wall_ms();
	assert_in_range(w, wall, wall + 2000);

	uint64_t prev = hlc_now(&h);
	assert_in_range(hlc_ms(prev), wall, wall + 2000);
	for (int i = 0; i < 100000; i++) {
		uint64_t t = hlc_now(&h);
		if (t <= prev)
			fail_msg("hlc_now went from %llx to %llx",
				 (unsigned long long)prev,
				 (unsigned long long)t);
		prev = t;
	}
	/* a stamp from the future is honoured by hlc_now too */
	uint64_t future = STAMP(clock_wall_ms() + 3600 * 1000, 7);
	hlc_observe(&h, future);
	assert_true(hlc_now(&h) > future);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_same_ms_counts),
		cmocka_unit_test(test_clock_steps_back),
		cmocka_unit_test(test_observe_future),
		cmocka_unit_test(test_observe_past),
		cmocka_unit_test(test_observe_then_tick_greater),
		cmocka_unit_test(test_logical_overflow),
		cmocka_unit_test(test_now),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
