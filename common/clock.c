/* clock.c: wall and monotonic clocks (clock.h). */
#include <stdatomic.h>
#include <time.h>

#include "clock.h"
#include "banned.h"

/* clock_test_step's sum; 0 unless a test hook moved it. */
static _Atomic int64_t wall_offset_ms;

static uint64_t read_us(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t clock_wall_ms(void)
{
	return clock_wall_us() / 1000;
}

uint64_t clock_wall_us(void)
{
	int64_t off =
		atomic_load_explicit(&wall_offset_ms, memory_order_relaxed);

	return read_us(CLOCK_REALTIME) + (uint64_t)off * 1000;
}

uint64_t clock_mono_ms(void)
{
	return read_us(CLOCK_MONOTONIC) / 1000;
}

uint64_t clock_mono_us(void)
{
	return read_us(CLOCK_MONOTONIC);
}

int64_t clock_test_step(int64_t ms)
{
	return atomic_fetch_add(&wall_offset_ms, ms) + ms;
}
