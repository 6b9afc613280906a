/*
 * test_hookline.c: common/hookline.h, the "OLD NEW REF" lines of a push
 * and its id, as grant-hook and the node read them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "hookline.h"

#define Z "0000000000000000000000000000000000000000"
#define A "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"
#define ID "0000018f2a3b4c5d9e8f7a6b5c4d3e2f"

static void test_line_ok(void **state)
{
	struct hookline hl;

	assert_int_equal(hookline_parse(&hl, Z " " A " refs/heads/main"), 0);
	assert_string_equal(hl.old, Z);
	assert_string_equal(hl.new_, A);
	assert_string_equal(hl.ref, "refs/heads/main");
	/* a ref grantd does not replicate is still a well-formed line */
	assert_int_equal(hookline_parse(&hl, A " " Z " refs/grantd/x"), 0);
}

static void test_line_bad(void **state)
{
	static const char *bad[] = {
		"", "not a ref line", Z " " A, Z " " A " ", Z "  " A " r",
		Z " " A " refs/heads/a b", Z " " A " refs/heads/a\tb",
		"3B18E512DBA79E4C8300DD08AEB37F8E728B8DAD " A " r",
		Z "0 " A " r", " " Z " " A " r", Z " " A " r\r",
		"g000000000000000000000000000000000000000 " A " r",
	};
	struct hookline hl;

	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		if (hookline_parse(&hl, bad[i]) != GD_EINVAL)
			fail_msg("hookline_parse('%s') accepted", bad[i]);
}

static void test_line_long_ref(void **state)
{
	static char line[HOOKLINE_LINE_MAX + 8];
	struct hookline hl;

	snprintf(line, sizeof(line), "%s %s ", Z, A);
	size_t n = strlen(line);
	memset(line + n, 'r', HOOKLINE_REF_MAX);
	line[n + HOOKLINE_REF_MAX] = '\0';
	assert_int_equal(hookline_parse(&hl, line), 0);
	assert_int_equal(strlen(hl.ref), HOOKLINE_REF_MAX);
	line[n + HOOKLINE_REF_MAX] = 'r';
	line[n + HOOKLINE_REF_MAX + 1] = '\0';
	assert_int_equal(hookline_parse(&hl, line), GD_EINVAL);
}

static void test_lines(void **state)
{
	static const char text[] = "id " ID "\n" Z " " A " refs/heads/main\r\n"
				   "\n" A " " Z " refs/heads/old";
	struct hooklines l = { 0 };
	size_t bad = 99;

	assert_int_equal(hooklines_parse(&l, text, strlen(text), &bad), 0);
	assert_string_equal(l.id, ID);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.v[0], Z " " A " refs/heads/main");
	assert_string_equal(l.v[1], A " " Z " refs/heads/old");
	hooklines_free(&l);
	assert_null(l.v);

	/* no id: an empty one */
	assert_int_equal(hooklines_parse(&l, text + 36, strlen(text + 36),
					 &bad), 0);
	assert_string_equal(l.id, "");
	assert_int_equal(l.n, 2);
	hooklines_free(&l);
}

/* Who pushed (the push log): an optional "by" line before the ref lines,
 * kept with the push in the spool. */
static void test_by(void **state)
{
	static const char text[] = "id " ID "\nby user=alice ip=192.0.2.7 "
				   "fp=SHA256:ab+/= factor=grant\n" Z " " A
				   " refs/heads/main\n";
	static const char first[] = "by user=bob\n" Z " " A " r\n";
	static const char late[] = Z " " A " r\nby user=bob\n";
	static const char twice[] = "by user=bob\nby user=eve\n";
	static const char *bad_words[] = { "user", "user=", "=x", "User=x",
					   "user=a b=", "user=a  ip=b",
					   "user=a ", "user=\x01", "us-er=a" };
	struct hooklines l = { 0 };
	char v[HOOKLINE_BY_VALUE_MAX + 1], by[HOOKLINE_BY_MAX + 1] = "";
	size_t bad = 0;

	assert_int_equal(hooklines_parse(&l, text, strlen(text), &bad), 0);
	assert_string_equal(l.id, ID);
	assert_int_equal(l.n, 1);
	assert_true(hookline_by_get(v, l.by, "user"));
	assert_string_equal(v, "alice");
	assert_true(hookline_by_get(v, l.by, "fp"));
	assert_string_equal(v, "SHA256:ab+/=");
	assert_true(hookline_by_get(v, l.by, "factor"));
	assert_string_equal(v, "grant");
	assert_false(hookline_by_get(v, l.by, "kind"));
	assert_string_equal(v, "");
	assert_false(hookline_by_get(v, l.by, "use"));
	hooklines_free(&l);
	assert_string_equal(l.by, "");

	assert_int_equal(hooklines_parse(&l, first, strlen(first), &bad), 0);
	assert_string_equal(l.by, "user=bob");
	assert_int_equal(l.n, 1);
	hooklines_free(&l);
	assert_int_equal(hooklines_parse(&l, late, strlen(late), &bad),
			 GD_EINVAL);
	assert_int_equal(bad, 2);
	assert_int_equal(hooklines_parse(&l, twice, strlen(twice), &bad),
			 GD_EINVAL);
	assert_int_equal(bad, 2);
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad_words); i++)
		if (hookline_by_ok(bad_words[i]))
			fail_msg("by words '%s' accepted", bad_words[i]);
	assert_true(hookline_by_ok(""));

	/* what grant-hook builds: a bad value is left out, never quoted */
	assert_true(hookline_by_add(by, "user", "alice"));
	assert_false(hookline_by_add(by, "ip", "1.2.3.4 5"));
	assert_false(hookline_by_add(by, "fp", ""));
	assert_false(hookline_by_add(by, "fp", NULL));
	assert_false(hookline_by_add(by, "X", "a"));
	assert_true(hookline_by_add(by, "kind", "plain"));
	assert_string_equal(by, "user=alice kind=plain");
	assert_true(hookline_by_ok(by));
}

static void test_lines_bad(void **state)
{
	static const char second[] = Z " " A " refs/heads/main\nnot a line\n";
	static const char late_id[] = Z " " A " r\nid " ID "\n";
	static const char bad_id[] = "id 12\n";
	static const char nul[] = Z " " A " r\0x\n";
	struct hooklines l = { 0 };
	size_t bad = 0;

	assert_int_equal(hooklines_parse(&l, second, strlen(second), &bad),
			 GD_EINVAL);
	assert_int_equal(bad, 2);
	assert_null(l.v);
	assert_int_equal(l.n, 0);
	assert_int_equal(hooklines_parse(&l, late_id, strlen(late_id), &bad),
			 GD_EINVAL);
	assert_int_equal(bad, 2);
	assert_int_equal(hooklines_parse(&l, bad_id, strlen(bad_id), &bad),
			 GD_EINVAL);
	assert_int_equal(bad, 1);
	assert_int_equal(hooklines_parse(&l, nul, sizeof(nul) - 1, &bad),
			 GD_EINVAL);
	assert_int_equal(bad, 1);
}

static void test_ids(void **state)
{
	char id[HOOKLINE_ID_LEN + 1], id2[HOOKLINE_ID_LEN + 1];
	char req[HOOKLINE_REQ_ID_MAX + 1];

	assert_int_equal(hookline_id_make(id, 0x18f2a3b4c5dULL), 0);
	assert_int_equal(hookline_id_make(id2, 0x18f2a3b4c5dULL), 0);
	assert_true(hookline_id_ok(id));
	/* the clock first, so ids sort by age; then random */
	assert_memory_equal(id, "0000018f2a3b4c5d", 16);
	assert_string_not_equal(id, id2);
	hookline_req_id(req, id, 0);
	assert_true(hookline_req_id_ok(req));
	assert_int_equal(strlen(req), HOOKLINE_ID_LEN + 2);
	hookline_req_id(req, id, 4294967295U);
	assert_true(hookline_req_id_ok(req));

	assert_false(hookline_id_ok(NULL));
	assert_false(hookline_id_ok(ID "0"));
	assert_false(hookline_id_ok("0000018F2A3B4C5D9E8F7A6B5C4D3E2F"));
	assert_false(hookline_req_id_ok(NULL));
	assert_false(hookline_req_id_ok(ID));
	assert_false(hookline_req_id_ok(ID "-"));
	assert_false(hookline_req_id_ok(ID "-01"));
	assert_false(hookline_req_id_ok(ID "-1a"));
	assert_false(hookline_req_id_ok(ID "-12345678901"));
	assert_false(hookline_req_id_ok(ID "+1"));
	assert_true(hookline_req_id_ok(ID "-12"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_ok),
		cmocka_unit_test(test_line_bad),
		cmocka_unit_test(test_line_long_ref),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_lines_bad),
		cmocka_unit_test(test_by),
		cmocka_unit_test(test_ids),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
