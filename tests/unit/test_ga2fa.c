/*
 * test_ga2fa.c: common/ga2fa.h, kernel.org's 2fa files as totp-cgi wrote
 * them (totpcgi/backends/file.py, contrib/gitolite/command.py): the
 * google-authenticator secrets file, the state, the validations.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ga2fa.h"

/* save_user_secret's TOTP file: no newline after the last scratch code */
static void test_secret_totp(void **state)
{
	static const char f[] = "JBSWY3DPEHPK3PXP\n\" RATE_LIMIT 3 30\n"
	                        "\" WINDOW_SIZE 17\n\" DISALLOW_REUSE\n"
	                        "\" TOTP_AUTH\n12345678\n23456789\n01234567";
	struct ga2fa_secret s;
	const char *why = NULL;

	assert_int_equal(ga2fa_parse_secret(&s, f, &why), 0);
	assert_string_equal(s.secret, "JBSWY3DPEHPK3PXP");
	assert_false(s.hotp);
	assert_int_equal(s.nscratch, 3);
	assert_string_equal(s.scratch[2], "01234567");
	ga2fa_secret_clear(&s);
	assert_int_equal(s.secret[0], 0);
}

static void test_secret_hotp(void **state)
{
	static const char f[] = "  GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ  \r\n"
	                        "\" RATE_LIMIT 3 30\n\" WINDOW_SIZE 30\n"
	                        "\" HOTP_COUNTER 42\n87654321\nabcdefgh\n\n";
	static const char bad_ctr[] = "GEZDGNBV\n\" HOTP_COUNTER x\n";
	struct ga2fa_secret s;
	const char *why;

	assert_int_equal(ga2fa_parse_secret(&s, f, &why), 0);
	assert_string_equal(s.secret, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
	assert_true(s.hotp);
	assert_int_equal(s.counter, 42);
	/* an 8-character line that is no number is no usable code */
	assert_int_equal(s.nscratch, 1);
	/* totp-cgi: a counter that is no number is 0, HOTP all the same */
	assert_int_equal(ga2fa_parse_secret(&s, bad_ctr, &why), 0);
	assert_true(s.hotp);
	assert_int_equal(s.counter, 0);
}

static void test_secret_bad(void **state)
{
	static const char *bad[] = {
	        "",
	        "\n\" TOTP_AUTH\n",
	        "not base32!\n",
	        "aes256+hmac256$c2FsdA==$Y3Q=\n\" TOTP_AUTH\n",
	};
	struct ga2fa_secret s;
	const char *why;

	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++) {
		why = NULL;
		if (ga2fa_parse_secret(&s, bad[i], &why) != GD_EINVAL || !why)
			fail_msg("secret file '%s' taken", bad[i]);
	}
	/* the PIN-encrypted kind says so */
	ga2fa_parse_secret(&s, bad[3], &why);
	assert_non_null(strstr(why, "PIN"));
}

static void test_state(void **state)
{
	static const char j[] =
	        "{\n    \"fail_timestamps\": [1400000000],\n"
	        "    \"success_timestamps\": [1400000030, 1400000090, "
	        "1400000060],\n    \"used_scratch_tokens\": [\"12345678\", "
	        "1234567],\n    \"counter\": -1\n}";
	struct ga2fa_state st;
	const char *why;

	assert_int_equal(ga2fa_parse_state(&st, j, &why), 0);
	assert_true(st.has_success);
	assert_int_equal(st.last_success, 1400000090);
	assert_int_equal(st.nused, 2);
	assert_string_equal(st.used[0], "12345678");
	/* an older totp-cgi kept the number: its leading zero comes back */
	assert_string_equal(st.used[1], "01234567");
	assert_int_equal(st.counter, -1);
	assert_int_equal(ga2fa_parse_state(&st, "{\"counter\": 7}", &why), 0);
	assert_false(st.has_success);
	assert_int_equal(st.counter, 7);
	assert_int_equal(ga2fa_parse_state(&st, "{}", &why), 0);
	assert_int_equal(st.counter, -1);
	assert_int_equal(ga2fa_parse_state(&st,
	                                   "{\"success_timestamps\": "
	                                   "[1, 2",
	                                   &why),
	                 GD_EINVAL);
	assert_int_equal(ga2fa_parse_state(&st, "[]", &why), GD_EINVAL);
	assert_int_equal(ga2fa_parse_state(&st,
	                                   "{\"success_timestamps\": "
	                                   "[\"x\"]}",
	                                   &why),
	                 GD_EINVAL);
}

static void test_time(void **state)
{
	int64_t t;

	assert_int_equal(ga2fa_parse_time(&t, "2014-05-27 17:51:29+00:00"), 0);
	assert_int_equal(t, 1401213089);
	assert_int_equal(ga2fa_parse_time(&t, "2014-05-27T19:51:29+02:00"), 0);
	assert_int_equal(t, 1401213089);
	assert_int_equal(ga2fa_parse_time(&t, "2014-05-27 17:51:29.123456Z"),
	                 0);
	assert_int_equal(t, 1401213089);
	assert_int_equal(ga2fa_parse_time(&t, "2014-05-27 17:51:29"), 0);
	assert_int_equal(t, 1401213089);
	assert_int_equal(ga2fa_parse_time(&t, "2014-05-27 12:51:29-05:00"), 0);
	assert_int_equal(t, 1401213089);
	assert_int_equal(ga2fa_parse_time(&t, "2014-13-27 17:51:29"),
	                 GD_EINVAL);
	assert_int_equal(ga2fa_parse_time(&t, "yesterday"), GD_EINVAL);
	assert_int_equal(ga2fa_parse_time(&t, "2014-05-27 17:51:29 junk"),
	                 GD_EINVAL);
}

static void test_validations(void **state)
{
	static const char j[] =
	        "{\"172.0.0.14\": {\"added\": \"2014-05-27 17:51:29+00:00\", "
	        "\"expires\": \"2014-06-26 17:51:29+00:00\", \"whois\": "
	        "\"X/US\\n\", \"geoip\": \"Portland, OR, US\"}, "
	        "\"10.1.0.0/16\": {\"added\": \"2014-05-27 17:51:29+00:00\", "
	        "\"expires\": \"2014-05-28 01:51:29+00:00\"}, "
	        "\"2001:db8::1\": {\"added\": \"2017-05-23 10:00:00+00:00\", "
	        "\"expires\": \"2017-05-23 18:00:00+00:00\", \"sessionid\": "
	        "\"42\"}}";
	struct ga2fa_val *v;
	size_t n;
	const char *why;

	assert_int_equal(ga2fa_parse_validations(&v, &n, j, &why), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0].net, "172.0.0.14");
	assert_int_equal(v[0].added, 1401213089);
	assert_int_equal(v[0].expires, 1401213089 + 30 * 86400);
	assert_false(v[0].session);
	assert_string_equal(v[1].net, "10.1.0.0/16");
	assert_string_equal(v[2].net, "2001:db8::1");
	assert_true(v[2].session);
	free(v);
	/* inval all purge leaves {} */
	assert_int_equal(ga2fa_parse_validations(&v, &n, "{}", &why), 0);
	assert_int_equal(n, 0);
	free(v);
	assert_int_equal(ga2fa_parse_validations(&v, &n,
	                                         "{\"1.2.3.4\": "
	                                         "{\"added\": \"x\"}}",
	                                         &why),
	                 GD_EINVAL);
	assert_null(v);
	assert_int_equal(ga2fa_parse_validations(&v, &n, "{\"1.2", &why),
	                 GD_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_secret_totp),
	        cmocka_unit_test(test_secret_hotp),
	        cmocka_unit_test(test_secret_bad),
	        cmocka_unit_test(test_state),
	        cmocka_unit_test(test_time),
	        cmocka_unit_test(test_validations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
