/*
 * test_sshcmd.c: common/sshcmd.h, grant-shell's reading of
 * SSH_ORIGINAL_COMMAND (git's quoting, the command kinds) and of
 * SSH_CONNECTION / XDG_SESSION_ID (the val-session key).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "sshcmd.h"

static struct sshcmd c;

static void test_git_quoting(void **state)
{
	(void)state;
	assert_int_equal(sshcmd_parse(&c, "git-receive-pack 'pub/scm/x.git'"),
	                 0);
	assert_int_equal(c.kind, SSHCMD_PUSH);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.repo, "pub/scm/x.git");
	assert_int_equal(c.nargs, 1);
	assert_string_equal(c.args[0], "pub/scm/x.git");
	/* git quotes ' as '\'' */
	assert_int_equal(sshcmd_parse(&c, "git-upload-pack 'it'\\''s'"), 0);
	assert_int_equal(c.kind, SSHCMD_FETCH);
	assert_string_equal(c.repo, "it's");
	assert_int_equal(sshcmd_parse(&c, "a \"b c\" d\\ e\t f"), 0);
	assert_int_equal(c.kind, SSHCMD_UNKNOWN);
	assert_int_equal(c.n, 4);
	assert_string_equal(c.words[1], "b c");
	assert_string_equal(c.words[2], "d e");
	assert_string_equal(c.words[3], "f");
}

static void test_2fa(void **state)
{
	(void)state;
	assert_int_equal(sshcmd_parse(&c, "2fa val-for-days 7 123456"), 0);
	assert_int_equal(c.kind, SSHCMD_2FA);
	assert_string_equal(c.sub, "val-for-days");
	assert_int_equal(c.nargs, 2);
	assert_string_equal(c.args[0], "7");
	assert_string_equal(c.args[1], "123456");
	assert_null(c.repo);
	assert_int_equal(sshcmd_parse(&c, "2fa"), 0);
	assert_int_equal(c.kind, SSHCMD_2FA);
	assert_null(c.sub);
	assert_int_equal(c.nargs, 0);
	assert_int_equal(sshcmd_parse(&c, "help"), 0);
	assert_int_equal(c.kind, SSHCMD_HELP);
}

static void test_empty_and_bad(void **state)
{
	char big[SSHCMD_MAX_LEN + 2];

	(void)state;
	assert_int_equal(sshcmd_parse(&c, NULL), 0);
	assert_int_equal(c.kind, SSHCMD_EMPTY);
	assert_int_equal(sshcmd_parse(&c, " \t "), 0);
	assert_int_equal(c.kind, SSHCMD_EMPTY);
	assert_int_equal(c.n, 0);
	assert_int_equal(sshcmd_parse(&c, "git-upload-pack 'x"), GD_EINVAL);
	assert_int_equal(sshcmd_parse(&c, "2fa \"val"), GD_EINVAL);
	assert_int_equal(sshcmd_parse(&c, "1 2 3 4 5 6 7 8"), 0);
	assert_int_equal(sshcmd_parse(&c, "1 2 3 4 5 6 7 8 9"), GD_EINVAL);
	/* a push with no or two repositories names none */
	assert_int_equal(sshcmd_parse(&c, "git-receive-pack"), 0);
	assert_null(c.repo);
	assert_int_equal(sshcmd_parse(&c, "git-receive-pack a b"), 0);
	assert_null(c.repo);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(sshcmd_parse(&c, big), GD_ETOOBIG);
	big[SSHCMD_MAX_LEN] = '\0';
	assert_int_equal(sshcmd_parse(&c, big), 0);
	assert_int_equal(c.n, 1);
}

static void session_is(const char *conn, const char *xdg, const char *want)
{
	char out[SSHCMD_SESSION_MAX + 1];
	int rc = sshcmd_session(out, sizeof(out), conn, xdg);
	if (!want) {
		if (rc != GD_EINVAL || out[0])
			fail_msg("sshcmd_session('%s', '%s') = %d '%s', want "
			         "GD_EINVAL",
			         conn, xdg ? xdg : "(null)", rc, out);
		return;
	}
	if (rc != 0 || strcmp(out, want))
		fail_msg("sshcmd_session('%s', '%s') = %d '%s', want '%s'",
		         conn, xdg ? xdg : "(null)", rc, out, want);
}

static void test_session(void **state)
{
	(void)state;
	/* the whole connection: both addresses and both ports */
	session_is("192.0.2.7 40022 192.0.2.1 22", NULL,
	           "192.0.2.7 40022 192.0.2.1 22");
	session_is("192.0.2.7 40022 192.0.2.1 22", "",
	           "192.0.2.7 40022 192.0.2.1 22");
	session_is("192.0.2.7 40022 192.0.2.1 22", "c42",
	           "192.0.2.7 40022 192.0.2.1 22/c42");
	/* the longest: two IPv6 addresses and ports, the longest XDG */
	session_is("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255 65535 "
	           "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255 65535",
	           "abcdefghijklmnopqrstuvwx",
	           "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255 65535 "
	           "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255 65535/"
	           "abcdefghijklmnopqrstuvwx");
	session_is("192.0.2.7 40022 192.0.2.1 22", "abcdefghijklmnopqrstuvwxy",
	           NULL);
	session_is("192.0.2.7 40022 192.0.2.1 22", "a b", NULL);
	session_is("192.0.2.7 40022 192.0.2.1 22", "a/b", NULL);
	session_is("192.0.2.7 40022", NULL, NULL);
	session_is("192.0.2.7 40022 192.0.2.1", NULL, NULL);
	session_is("192.0.2.7 40022 192.0.2.1 22 x", NULL, NULL);
	session_is("192.0.2.7 0 192.0.2.1 22", NULL, NULL);
	session_is("192.0.2.7 65536 192.0.2.1 22", NULL, NULL);
	session_is("192.0.2.7 +22 192.0.2.1 22", NULL, NULL);
	session_is("192.0.2.7 22 host.example 22", NULL, NULL);
	session_is("", NULL, NULL);
	session_is(NULL, NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_git_quoting),
	        cmocka_unit_test(test_2fa),
	        cmocka_unit_test(test_empty_and_bad),
	        cmocka_unit_test(test_session),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
