/*
 * test_dur.c: common/dur.h, the one parser and printer of durations.
 *
 * Durations come from the config ([policy]) and from users (`2fa
 * val-for-days`), so the parser must take exactly the documented forms and
 * refuse everything else, including zero, negatives, trailing junk and
 * values that would overflow once multiplied by their unit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dur.h"
#include "err.h"

static void parse_is(const char *s, int64_t want)
{
	int64_t got = -12345;
	int rc = dur_parse(&got, s);
	if (rc != 0)
		fail_msg("dur_parse('%s') = %d, want %lld", s, rc,
			 (long long)want);
	if (got != want)
		fail_msg("dur_parse('%s') gave %lld, want %lld", s,
			 (long long)got, (long long)want);
}

static void parse_bad(const char *s)
{
	int64_t got = 0;
	int rc = dur_parse(&got, s);
	if (rc != GD_EINVAL)
		fail_msg("dur_parse('%s') = %d (%lld), want GD_EINVAL", s, rc,
			 (long long)got);
}

static void format_is(int64_t seconds, const char *want)
{
	char out[64];
	dur_format(out, sizeof(out), seconds);
	if (strcmp(out, want))
		fail_msg("dur_format(%lld) = '%s', want '%s'",
			 (long long)seconds, out, want);
}

static void test_units(void **state)
{
	parse_is("90s", 90);
	parse_is("15m", 15 * 60);
	parse_is("24h", 24 * 3600);
	parse_is("30d", 30 * 86400);
	parse_is("2w", 14 * 86400);
	parse_is("1s", 1);
	parse_is("1m", 60);
	parse_is("1h", 3600);
	parse_is("1d", 86400);
	parse_is("1w", 7 * 86400);
	parse_is("8h", 8 * 3600);
}

/* A number without a unit is refused: "grant_default = 24" was taken
 * as 24 seconds by an operator who meant hours (operator trial, 7). */
static void test_bare_number_refused(void **state)
{
	int64_t ms;

	parse_bad("1");
	parse_bad("24");
	parse_bad("90");
	parse_bad("3600");
	parse_bad("86400");
	if (dur_parse_ms(&ms, "500") != GD_EINVAL)
		fail_msg("dur_parse_ms('500') accepted a number without a unit");
	if (dur_parse_ms(&ms, "500ms") != 0 || ms != 500)
		fail_msg("dur_parse_ms('500ms') refused");
}

static void test_ten_years(void **state)
{
	/* up to ten years is fine, whatever the unit */
	parse_is("3650d", 3650LL * 86400);
	parse_is("520w", 520LL * 7 * 86400);
	parse_is("87600h", 87600LL * 3600);
	parse_is("5256000m", 5256000LL * 60);
	parse_is("315360000s", 315360000LL);
	/* and well beyond it is not */
	parse_bad("3700d");
	parse_bad("530w");
	parse_bad("100000h");
	parse_bad("6000000m");
	parse_bad("400000000");
	parse_bad("400000000s");
}

static void test_overflow(void **state)
{
	parse_bad("9223372036854775807");
	parse_bad("9223372036854775807w");
	parse_bad("9223372036854775808");
	parse_bad("18446744073709551617s");
	parse_bad("99999999999999999999");
	parse_bad("999999999999999999999999999999d");
	parse_bad("1537228672809129301w"); /* * 604800 wraps to a small value */
	parse_bad("15372286728091293w");
}

static void test_bad_input(void **state)
{
	static const char *bad[] = {
		"0", "0s", "00", "0d", "-1", "-1h", "-0", "1x", "h", "s", "",
		"24h ", " 24h", "24 h", "24\th", "24h\n", "1.5h", "1h30m",
		"1hh", "24hours", "1H", "1S", "1e3", "+5", "0x10", "1_000",
		"1,5", "one", "1y", "1M",
	};

	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		parse_bad(bad[i]);
}

static void test_format(void **state)
{
	format_is(30, "30s");
	format_is(90, "1m 30s");
	format_is(15 * 60, "15m");
	format_is(3600, "1h");
	format_is(3661, "1h 1m");       /* at most two units */
	format_is(8 * 3600, "8h");
	format_is(86400, "1d");
	format_is(86400 + 2 * 3600, "1d 2h");
	format_is(90061, "1d 1h");
	format_is(86400 + 59, "1d 59s"); /* the two largest non-zero */
	format_is(14 * 86400, "14d");
	format_is(30 * 86400, "30d");
}

static void test_format_round_trip(void **state)
{
	/* a duration of one unit prints as text the parser reads back */
	static const int64_t vals[] = { 1, 59, 60, 900, 3600, 86400,
					30 * 86400, 3650LL * 86400 };
	for (size_t i = 0; i < GD_ARRAY_SIZE(vals); i++) {
		char out[64];
		int64_t back;
		dur_format(out, sizeof(out), vals[i]);
		if (dur_parse(&back, out) != 0 || back != vals[i])
			fail_msg("%lld -> '%s' does not parse back",
				 (long long)vals[i], out);
	}
}

static void test_format_small_buffer(void **state)
{
	/* a short buffer is filled and terminated, never overrun */
	char out[16];

	for (size_t len = 1; len < 8; len++) {
		memset(out, 'X', sizeof(out));
		dur_format(out, len, 86400 + 2 * 3600);
		assert_true(memchr(out, '\0', len) != NULL);
		for (size_t i = len; i < sizeof(out); i++)
			assert_int_equal(out[i], 'X');
	}
}

static void test_ms(void **state)
{
	/* token_quorum_timeout: milliseconds, or any duration */
	static const struct { const char *s; int64_t ms; } good[] = {
		{ "500ms", 500 }, { "1ms", 1 }, { "2s", 2000 },
		{ "1m", 60000 } };
	static const char *const bad[] = { "", "ms", "0ms", "-5ms", "5 ms",
		"5mss", "5.5ms", "ms5", "0", "2", "99999999999999999999ms" };
	int64_t got;

	for (size_t i = 0; i < GD_ARRAY_SIZE(good); i++) {
		got = -1;
		if (dur_parse_ms(&got, good[i].s) != 0 || got != good[i].ms)
			fail_msg("dur_parse_ms('%s') gave %lld, want %lld",
				 good[i].s, (long long)got,
				 (long long)good[i].ms);
	}
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		if (dur_parse_ms(&got, bad[i]) != GD_EINVAL)
			fail_msg("dur_parse_ms('%s') accepted", bad[i]);
	assert_int_equal(dur_parse_ms(&got, NULL), GD_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_bare_number_refused),
		cmocka_unit_test(test_ten_years),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_format_round_trip),
		cmocka_unit_test(test_format_small_buffer),
		cmocka_unit_test(test_ms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
