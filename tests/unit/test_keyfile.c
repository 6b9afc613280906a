/*
 * test_keyfile.c: common/keyfile.h: the keys of a .pub file (none
 * dropped) and gitolite's user of a keydir file (its ssh-authkeys rule
 * s/(\@[^.]+)?\.pub$//).
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

#include "err.h"
#include "keyfile.h"

#define K1                                                                     \
	"ssh-ed25519 "                                                         \
	"AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl" \
	" alice@laptop"
#define K2             \
	"ssh-ed25519 " \
	"AAAAC3NzaC1lZDI1NTE5AAAAIHhxZnR4dWZsa3N0dXZ3eHl6MDEyMzQ1Njc4OWFi"

static void test_parse(void **state)
{
	char *out;
	size_t n;
	const char *why;

	assert_int_equal(keyfile_parse(&out, &n, K1 "\n", &why), 0);
	assert_int_equal(n, 1);
	assert_string_equal(out, K1);
	free(out);
	/* two keys, blanks, a comment, CRLF: both kept, in order */
	assert_int_equal(
	        keyfile_parse(&out, &n, "# mine\n  " K1 "\r\n\n" K2, &why), 0);
	assert_int_equal(n, 2);
	assert_string_equal(out, K1 "\n" K2);
	free(out);
}

static void test_parse_bad(void **state)
{
	char *out = (char *)"x";
	size_t n = 9;
	const char *why = NULL;

	/* a bad line refuses the file whole: no key of it is half taken */
	assert_int_equal(keyfile_parse(&out, &n, K1 "\nnot a key\n", &why),
	                 GD_EINVAL);
	assert_null(out);
	assert_int_equal(n, 0);
	assert_non_null(why);
	assert_int_equal(keyfile_parse(&out, &n, "# nothing\n\n", &why),
	                 GD_EINVAL);
	assert_int_equal(keyfile_parse(&out, &n, "command=\"x\" " K1, &why),
	                 GD_EINVAL);
}

static void test_load(void **state)
{
	char path[] = "/tmp/test_keyfile.XXXXXX";
	int fd = mkstemp(path);
	char *out;
	size_t n;
	const char *why;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, K1 "\n" K2 "\n", strlen(K1 K2) + 2),
	                 (ssize_t)strlen(K1 K2) + 2);
	close(fd);
	assert_int_equal(keyfile_load(&out, &n, path, &why), 0);
	assert_int_equal(n, 2);
	free(out);
	unlink(path);
	assert_int_equal(keyfile_load(&out, &n, path, &why), GD_EIO);
}

static void user_is(const char *path, const char *want)
{
	char out[64];
	int rc = keyfile_gitolite_user(out, sizeof(out), path);

	if (!want) {
		if (rc != GD_EINVAL)
			fail_msg("'%s' gave user '%s'", path, out);
		return;
	}
	if (rc != 0 || strcmp(out, want))
		fail_msg("'%s': got %d '%s', want '%s'", path, rc,
		         rc ? "" : out, want);
}

static void test_gitolite_user(void **state)
{
	user_is("alice.pub", "alice");
	user_is("keydir/alice@laptop.pub", "alice");
	user_is("keydir/a/b/c/alice@work-2.pub", "alice");
	/* a '.' after the '@': an e-mail-like name, whole */
	user_is("keydir/alice@example.com.pub", "alice@example.com");
	/* the first '@' after which no '.' comes */
	user_is("bob@x@y.pub", "bob");
	user_is("bob@x.y@z.pub", "bob@x.y");
	user_is("keydir/sub.dir/carol.pub", "carol");
	user_is("alice.pub.txt", NULL);
	user_is(".pub", NULL);
	user_is("@host.pub", NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_parse),
	        cmocka_unit_test(test_parse_bad),
	        cmocka_unit_test(test_load),
	        cmocka_unit_test(test_gitolite_user),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
