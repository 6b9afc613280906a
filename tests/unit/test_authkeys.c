/*
 * test_authkeys.c: common/authkeys.h, the authorized_keys lines grant-keys
 * prints for sshd.
 *
 * A security key's line (sk-ssh-ed25519@openssh.com,
 * sk-ecdsa-sha2-nistp256@openssh.com) tells grant-shell its kind in the
 * forced command, and with security_keys = pin also asks sshd for the PIN
 * (verify-required); an ordinary key's line is as it always was.  The user
 * cannot choose the line: sshd picks it by the key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "authkeys.h"
#include "err.h"

#define ED "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBx5 alice@laptop"
#define SKED "sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5 a@yk"
#define SKEC "sk-ecdsa-sha2-nistp256@openssh.com AAAAInNrLWVjZHNh bob"
#define OPTS "no-pty,no-port-forwarding,no-agent-forwarding,no-X11-forwarding"

/* What authkeys_print prints for text under sk. */
static char *print(const char *text, enum config_sk sk)
{
	char *in = strdup(text), *out = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&out, &len);

	assert_non_null(in);
	assert_non_null(fp);
	authkeys_print(fp, in, "/usr/bin/grant-shell", "/etc/g.conf", sk,
		       NULL);
	fclose(fp);
	free(in);
	return out;
}

static void test_is_sk(void **state)
{
	assert_true(authkeys_is_sk(SKED));
	assert_true(authkeys_is_sk(SKEC));
	assert_false(authkeys_is_sk(ED));
	assert_false(authkeys_is_sk("sk-ssh-ed25519@openssh.comX AAAA"));
	assert_false(authkeys_is_sk("ecdsa-sha2-nistp256 AAAA"));
}

static void test_lines(void **state)
{
	char *out = print("alice\t" ED "\nalice\t" SKED "\nbob\t" SKEC "\n",
			  CONFIG_SK_TOUCH);
	assert_string_equal(out,
		"command=\"/usr/bin/grant-shell --config /etc/g.conf alice\","
		OPTS " " ED "\n"
		"command=\"/usr/bin/grant-shell --config /etc/g.conf "
		"--key-kind sk-touch alice\"," OPTS " " SKED "\n"
		"command=\"/usr/bin/grant-shell --config /etc/g.conf "
		"--key-kind sk-touch bob\"," OPTS " " SKEC "\n");
	free(out);

	out = print("alice\t" ED "\nalice\t" SKED "\nbob\t" SKEC "\n",
		    CONFIG_SK_PIN);
	assert_string_equal(out,
		"command=\"/usr/bin/grant-shell --config /etc/g.conf alice\","
		OPTS " " ED "\n"
		"command=\"/usr/bin/grant-shell --config /etc/g.conf "
		"--key-kind sk-pin alice\"," OPTS ",verify-required " SKED "\n"
		"command=\"/usr/bin/grant-shell --config /etc/g.conf "
		"--key-kind sk-pin bob\"," OPTS ",verify-required " SKEC "\n");
	free(out);

	/* off: the node decides what the kind counts for; the line still
	 * says what the key is, and asks sshd for no PIN */
	out = print("alice\t" SKED "\n", CONFIG_SK_OFF);
	assert_string_equal(out,
		"command=\"/usr/bin/grant-shell --config /etc/g.conf "
		"--key-kind sk-touch alice\"," OPTS " " SKED "\n");
	free(out);
}

/* With the offered key's fingerprint (grant-keys ACCOUNT FP), the line
 * passes it on to grant-shell for the push log; anything that is not a
 * fingerprint is left out, never quoted into the command. */
static void test_key_fp(void **state)
{
	static const char f[] = "SHA256:ieGENRwGkZ2ZJH/wEtzcd6QlCZ434+NMQvA0N15Murs";
	char in[] = "alice\t" SKED "\n";
	char in2[] = "alice\t" ED "\n";
	char *out = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&out, &len);

	assert_true(authkeys_fp_ok(f));
	assert_false(authkeys_fp_ok("SHA256:"));
	assert_false(authkeys_fp_ok("MD5:ab"));
	assert_false(authkeys_fp_ok("SHA256:a\" b"));
	assert_false(authkeys_fp_ok("SHA256:a b"));
	assert_false(authkeys_fp_ok(NULL));
	authkeys_print(fp, in, "/usr/bin/grant-shell", NULL, CONFIG_SK_TOUCH, f);
	authkeys_print(fp, in2, "/usr/bin/grant-shell", NULL, CONFIG_SK_TOUCH,
		       "SHA256:a\",x");
	fclose(fp);
	assert_string_equal(out,
		"command=\"/usr/bin/grant-shell --key-fp "
		"SHA256:ieGENRwGkZ2ZJH/wEtzcd6QlCZ434+NMQvA0N15Murs --key-kind "
		"sk-touch alice\","
		OPTS " " SKED "\n"
		"command=\"/usr/bin/grant-shell alice\"," OPTS " " ED "\n");
	free(out);
}

/* The paths sshd's shell runs in command="...": only [A-Za-z0-9/._+-]
 * (issue 19, N13), for --shell and for --config (resolved first). */
static void test_paths(void **state)
{
	static const char *bad[] = {
		"/usr/bin/grant shell", "/usr/bin/grant\"shell",
		"/usr/bin/grant;id",    "/usr/bin/$(id)",
		"/usr/bin/`id`",        "/usr/bin/a&b",
		"/usr/bin/a|b",         "/usr/bin/it's",
		"/usr/bin/a*",          "/usr/bin/a\\b",
		"/usr/bin/a\nb",        "/usr/bin/caf\xc3\xa9",
		"relative/grant-shell", "",
	};
	struct authkeys_paths p;
	char dir[] = "/tmp/test_authkeys.XXXXXX", conf[128];
	FILE *fp;

	(void)state;
	assert_int_equal(authkeys_paths(&p, "t", "/usr/lib/grantd_1.2/"
					"grant-shell.x+y", NULL), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (authkeys_paths(&p, "t", bad[i], NULL) != GD_EXIT_USAGE)
			fail_msg("shell path '%s' accepted", bad[i]);
	/* a config path is resolved, then checked the same way */
	assert_non_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/g;id.conf", dir);
	assert_non_null(fp = fopen(conf, "w"));
	fclose(fp);
	assert_int_equal(authkeys_paths(&p, "t", "/usr/bin/grant-shell", conf),
			 GD_EXIT_USAGE);
	unlink(conf);
	snprintf(conf, sizeof(conf), "%s/grantd.conf", dir);
	assert_non_null(fp = fopen(conf, "w"));
	fclose(fp);
	assert_int_equal(authkeys_paths(&p, "t", "/usr/bin/grant-shell", conf),
			 0);
	assert_non_null(strstr(p.config, "/grantd.conf"));
	unlink(conf);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_is_sk),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_key_fp),
		cmocka_unit_test(test_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
