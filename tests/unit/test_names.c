/*
 * test_names.c: common/names.h, the checks on user, site and repository
 * names (SPEC 3.6).
 *
 * Repository names come straight from SSH_ORIGINAL_COMMAND and become paths
 * under repo_dir, so the cases that matter most are the ones that would
 * reach outside it: "..", hidden parts, empty parts.  A leading "/" is not
 * one of them: "/etc/passwd" names repo_dir/etc/passwd.git, as ssh:// URLs
 * send a leading slash for every repository.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "names.h"

static void repo_is(const char *in, const char *want)
{
	char out[NAME_REPO_MAX + 1];
	int rc = name_repo_norm(out, sizeof(out), in);
	if (rc != 0)
		fail_msg("name_repo_norm('%s') = %d, want '%s'", in, rc, want);
	if (strcmp(out, want))
		fail_msg("name_repo_norm('%s') gave '%s', want '%s'", in, out,
			 want);
}

static void repo_bad(const char *in)
{
	char out[NAME_REPO_MAX + 1] = "";
	int rc = name_repo_norm(out, sizeof(out), in);
	if (rc != GD_EINVAL)
		fail_msg("name_repo_norm('%s') = %d ('%s'), want GD_EINVAL",
			 in, rc, out);
}

static void test_user_ok(void **state)
{
	static const char *ok[] = {
		"alice", "a", "_", "_svc", "a0", "a.b-c_d", "bob-2",
		"x_.-09", "torvalds",
	};
	char longest[NAME_USER_MAX + 1];

	for (size_t i = 0; i < GD_ARRAY_SIZE(ok); i++)
		if (!name_user_ok(ok[i]))
			fail_msg("user name '%s' refused", ok[i]);
	memset(longest, 'a', NAME_USER_MAX);
	longest[NAME_USER_MAX] = '\0';
	assert_int_equal(NAME_USER_MAX, 64);
	assert_true(name_user_ok(longest)); /* 1 + 63 */
}

static void test_user_bad(void **state)
{
	static const char *bad[] = {
		"", "Alice", "aliCe", "0abc", "9", "-a", ".a", "a b", "a/b",
		"a@b", "a:b", "a\n", "a\tb", "al\xc3\xa9", "a;b", "a$b",
		"../a", "a,b", "a+b", " a", "a ",
	};
	char toolong[NAME_USER_MAX + 2];

	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		if (name_user_ok(bad[i]))
			fail_msg("user name '%s' accepted", bad[i]);
	memset(toolong, 'a', NAME_USER_MAX + 1);
	toolong[NAME_USER_MAX + 1] = '\0';
	assert_false(name_user_ok(toolong));
}

static void test_site(void **state)
{
	static const char *ok[] = { "paloalto", "portland", "site-1", "1",
				    "a", "eu-west-2" };
	static const char *bad[] = { "", "Paloalto", "palo_alto",
				     "palo.alto", "a b", "a/b", "site\n" };
	char s[NAME_SITE_MAX + 2];

	for (size_t i = 0; i < GD_ARRAY_SIZE(ok); i++)
		if (!name_site_ok(ok[i]))
			fail_msg("site name '%s' refused", ok[i]);
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		if (name_site_ok(bad[i]))
			fail_msg("site name '%s' accepted", bad[i]);
	memset(s, 'a', NAME_SITE_MAX);
	s[NAME_SITE_MAX] = '\0';
	assert_true(name_site_ok(s));
	s[NAME_SITE_MAX] = 'a';
	s[NAME_SITE_MAX + 1] = '\0';
	assert_false(name_site_ok(s));
}

static void test_repo_ok(void **state)
{
	repo_is("foo", "foo");
	repo_is("foo.git", "foo");
	repo_is("/foo", "foo");
	repo_is("/foo.git", "foo");
	repo_is("~/foo", "foo");
	repo_is("~/foo.git", "foo");
	repo_is("pub/scm/linux/kernel/git/torvalds/linux",
		"pub/scm/linux/kernel/git/torvalds/linux");
	repo_is("/pub/scm/linux/kernel/git/torvalds/linux.git",
		"pub/scm/linux/kernel/git/torvalds/linux");
	repo_is("Foo_Bar+baz-1.2", "Foo_Bar+baz-1.2");
	repo_is("a.b/c", "a.b/c");
	repo_is("a/b.git", "a/b");
	repo_is("a..b", "a..b");          /* dots inside a part are fine */
	/* only one .git is dropped, and a name must be its own normal form:
	 * "foo.git.git" would become "foo.git", which is "foo" next time */
	repo_is("foo.gitx", "foo.gitx");
}

static void test_repo_leading_slash(void **state)
{
	/* One leading "/" is how ssh:// URLs send every name; it is dropped
	 * and what is left is a name under repo_dir, not a path. */
	repo_is("/etc/passwd", "etc/passwd");
	repo_is("/srv/git/foo.git", "srv/git/foo");
	/* only one is dropped: the rest must still be a clean name */
	repo_bad("foo.git.git");
	repo_bad("//foo");
	repo_bad("~//foo");
	repo_bad("/~/foo");
	repo_bad("~/~/foo");
	repo_bad("~foo");
	repo_bad("~");
	repo_bad("/");
	repo_bad("~/");
}

static void test_repo_bad(void **state)
{
	static const char *bad[] = {
		"", "..", ".", "../foo", "./foo", "foo/..", "a/../b", "a/./b",
		"/..", "/../etc/passwd", "~/../foo", ".hidden", "a/.hidden",
		".git", "/.git", "~/.git", "foo/.git", "a//b", "a/", "a/b/",
		"/a/", "foo.git/", "a b", "a\tb", "a\nb", "a\\b", "a:b",
		"a;b", "a'b", "a\"b", "a$b", "a*b", "a?b", "a~b",
		"repo\xc3\xa9", "foo.git ", " foo",
	};

	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		repo_bad(bad[i]);
}

static void test_repo_nested(void **state)
{
	/* A repository lives at repo_dir/NAME.git: a name whose earlier part
	 * ends in ".git" would sit inside another repository's git dir
	 * ("r0.git/refs/heads/x" became repo_dir/r0.git/refs/heads/x.git,
	 * a broken ref of r0).  Only the last part may end in ".git". */
	static const char *bad[] = {
		"r0.git/refs/heads/x", "r0.git/x", "/r0.git/x", "~/r0.git/x",
		"a/r0.git/x", "a/b.git/c.git", "r0.git/objects/pack/p",
		"x.git/y.git",
	};

	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		repo_bad(bad[i]);
	/* ".git" inside a part, or a part that only starts like it, is fine */
	repo_is("a.gitx/b", "a.gitx/b");
	repo_is("a.git-mirror/b", "a.git-mirror/b");
	repo_is("git/b.git", "git/b");
	repo_is("a/r0.git", "a/r0");
}

static void test_repo_length(void **state)
{
	static char in[NAME_REPO_MAX + 8];
	char out[NAME_REPO_MAX + 1];

	/* NAME_REPO_MAX characters fit, with or without .git */
	memset(in, 'a', NAME_REPO_MAX);
	in[NAME_REPO_MAX] = '\0';
	assert_int_equal(name_repo_norm(out, sizeof(out), in), 0);
	assert_int_equal(strlen(out), NAME_REPO_MAX);
	memcpy(in + NAME_REPO_MAX, ".git", 5);
	assert_int_equal(name_repo_norm(out, sizeof(out), in), 0);
	assert_int_equal(strlen(out), NAME_REPO_MAX);
	/* one more does not */
	memset(in, 'a', NAME_REPO_MAX + 1);
	in[NAME_REPO_MAX + 1] = '\0';
	assert_int_equal(name_repo_norm(out, sizeof(out), in), GD_EINVAL);
}

static void test_repo_small_out(void **state)
{
	/* a name that does not fit the caller's buffer is refused, and the
	 * bytes past the buffer are not touched */
	char out[16];

	memset(out, 'X', sizeof(out));
	assert_int_equal(name_repo_norm(out, 4, "abcdef"), GD_EINVAL);
	for (size_t i = 4; i < sizeof(out); i++)
		assert_int_equal(out[i], 'X');
	assert_int_equal(name_repo_norm(out, 4, "abcd"), GD_EINVAL);
	assert_int_equal(name_repo_norm(out, 4, "abc"), 0);
	assert_string_equal(out, "abc");
	assert_int_equal(name_repo_norm(out, 4, "/abc.git"), 0);
	assert_string_equal(out, "abc");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user_ok),
		cmocka_unit_test(test_user_bad),
		cmocka_unit_test(test_site),
		cmocka_unit_test(test_repo_ok),
		cmocka_unit_test(test_repo_leading_slash),
		cmocka_unit_test(test_repo_bad),
		cmocka_unit_test(test_repo_nested),
		cmocka_unit_test(test_repo_length),
		cmocka_unit_test(test_repo_small_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
