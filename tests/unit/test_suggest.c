/*
 * test_suggest.c: common/suggest.h, the "did you mean" of unknown config
 * keys: a typo gets the word it is near, anything else gets nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "suggest.h"

static const char *const keys[] = {"publish", "sync",          "public_key",
                                   "role",    "grant_default", NULL};

static void test_distance(void **state)
{
	(void)state;
	assert_int_equal(suggest_distance("", ""), 0);
	assert_int_equal(suggest_distance("abc", ""), 3);
	assert_int_equal(suggest_distance("publish", "publish"), 0);
	assert_int_equal(suggest_distance("pubilsh", "publish"), 2);
	assert_int_equal(suggest_distance("PUBLISH", "publish"), 0);
	assert_int_equal(suggest_distance("public-key", "public_key"), 0);
	assert_int_equal(suggest_distance("kitten", "sitting"), 3);
	char long_word[80];
	memset(long_word, 'a', sizeof(long_word) - 1);
	long_word[sizeof(long_word) - 1] = '\0';
	assert_true(suggest_distance(long_word, "a") == SIZE_MAX);
}

static void test_nearest(void **state)
{
	(void)state;
	assert_string_equal(suggest_nearest("pubilsh", keys), "publish");
	assert_string_equal(suggest_nearest("grant_defualt", keys),
	                    "grant_default");
	assert_string_equal(suggest_nearest("public-key", keys), "public_key");
	assert_string_equal(suggest_nearest("synk", keys), "sync");
	/* too far, or too short to tell */
	assert_null(suggest_nearest("colour", keys));
	assert_null(suggest_nearest("xy", keys));
	assert_null(suggest_nearest("r", keys));
}

static void test_in_and_join(void **state)
{
	char out[64];

	(void)state;
	assert_true(suggest_in("role", keys));
	assert_false(suggest_in("rol", keys));
	suggest_join(out, sizeof(out), keys);
	assert_string_equal(out,
	                    "publish, sync, public_key, role, grant_default");
	suggest_join(out, 10, keys); /* cut short, still a string */
	assert_int_equal(strlen(out), 9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_distance),
	        cmocka_unit_test(test_nearest),
	        cmocka_unit_test(test_in_and_join),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
