/*
 * test_repos.c: node/repos.h, hosted repositories on disk.
 *
 * A repository is made whole or not at all, and one that a crash left
 * half-made is completed: a kill -9 inside git_repository_init_ext can
 * leave a directory without hooks/, config or HEAD, and before the fix its
 * hook was never installed again (review-fa65238-security finding 10).
 * Every hosted repository checks pushed objects (receive.fsckObjects).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <git2.h>

#include "buf.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "repos.h"

#define HOOK "exec '/usr/bin/grant-hook' --config '/etc/grantd/grantd.conf'"

struct fx {
	char dir[64];
};

static int setup_group(void **state)
{
	(void)state;
	if (fx_group_setup("test_repos", LOG_LVL_ERROR) < 0)
		return -1;
	/* as grantd runs it: no global, XDG or system configuration */
	return repos_git_isolate() < 0 ? -1 : 0;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_repos", false) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

static bool exists(const char *dir, const char *rel)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return stat(p, &st) == 0;
}

/* Run a shell command line (the test's own fixtures). */
static void sh(const char *cmd)
{
	if (system(cmd) != 0)
		fail_msg("failed: %s", cmd);
}

/* rm -rf dir/rel for each rel in parts (NULL-terminated). */
static void rm_parts(const char *dir, const char *const *parts)
{
	char cmd[512];

	for (size_t i = 0; parts[i]; i++) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s/%s'", dir, parts[i]);
		sh(cmd);
	}
}

/* A whole hosted repository at repo_dir/name.git: git opens it, its hook
 * runs `hook`, it checks pushed objects. */
static void assert_hosted(const char *repo_dir, const char *name)
{
	git_repository *repo = NULL;
	git_config *cfg = NULL;
	struct buf path = BUF_INIT, f = BUF_INIT;
	char have[512];
	int on = 0;

	repos_path(&path, repo_dir, name);
	if (git_repository_open_bare(&repo, path.p) < 0)
		fail_msg("%s: %s", path.p, git_error_last()->message);
	assert_true(git_repository_is_bare(repo));
	assert_int_equal(git_repository_config_snapshot(&cfg, repo), 0);
	assert_int_equal(git_config_get_bool(&on, cfg, "receive.fsckObjects"),
			 0);
	assert_true(on);
	git_config_free(cfg);
	git_repository_free(repo);

	buf_printf(&f, "%s/hooks/post-receive", path.p);
	FILE *fp = fopen(f.p, "r");
	if (!fp)
		fail_msg("no hook %s", f.p);
	size_t n = fread(have, 1, sizeof(have) - 1, fp);
	fclose(fp);
	have[n] = '\0';
	assert_non_null(strstr(have, HOOK "\n"));
	struct stat st;
	assert_int_equal(stat(f.p, &st), 0);
	assert_true(st.st_mode & S_IXUSR);
	buf_printf(&path, ".grantd-new");
	assert_false(exists(path.p, "")); /* no leftover beside it */
	buf_free(&path);
	buf_free(&f);
}

static void test_create(void **state)
{
	struct fx *f = *state;

	assert_int_equal(repos_create(f->dir, "pub/scm/linux", NULL, HOOK), 0);
	assert_hosted(f->dir, "pub/scm/linux");
	/* again: nothing to do, still whole */
	assert_int_equal(repos_create(f->dir, "pub/scm/linux", NULL, HOOK), 0);
	assert_hosted(f->dir, "pub/scm/linux");
}

/* What a kill -9 inside git_repository_init_ext leaves: the directory
 * with some of its parts.  The next repos_create (at start, or the
 * record's next operation) completes it. */
static void test_half_made(void **state)
{
	struct fx *f = *state;
	static const char *const cut1[] = { "a.git/hooks", NULL };
	static const char *const cut2[] = { "a.git/hooks", "a.git/HEAD",
					    "a.git/config", NULL };
	static const char *const cut3[] = { "a.git/refs", "a.git/hooks",
					    "a.git/config", NULL };
	static const char *const *const cuts[] = { cut1, cut2, cut3 };
	char dir[128], cmd[256];

	snprintf(dir, sizeof(dir), "%s", f->dir);
	for (size_t i = 0; i < GD_ARRAY_SIZE(cuts); i++) {
		assert_int_equal(repos_create(dir, "a", NULL, HOOK), 0);
		rm_parts(dir, cuts[i]);
		assert_int_equal(repos_create(dir, "a", NULL, HOOK), 0);
		assert_hosted(dir, "a");
	}
	/* an empty directory (killed right after mkdir) too */
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/b.git'", dir);
	sh(cmd);
	assert_int_equal(repos_create(dir, "b", NULL, HOOK), 0);
	assert_hosted(dir, "b");
}

/* A crash in the middle of a new repository leaves NAME.git.grantd-new
 * and no NAME.git; the next attempt starts over. */
static void test_leftover(void **state)
{
	struct fx *f = *state;
	char dir[128], cmd[512];

	snprintf(dir, sizeof(dir), "%s", f->dir);
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s/c.git.grantd-new/objects/pack' && "
		 "echo x >'%s/c.git.grantd-new/objects/pack/junk' && "
		 "echo y >'%s/c.git.grantd-new/HEAD'", dir, dir, dir);
	sh(cmd);
	assert_int_equal(repos_create(dir, "c", NULL, HOOK), 0);
	assert_hosted(dir, "c");
	assert_false(exists(dir, "c.git/objects/pack/junk"));
}

/* An existing repository from before receive.fsckObjects gets it. */
static void test_fsck_existing(void **state)
{
	struct fx *f = *state;
	char dir[128], cmd[512];

	snprintf(dir, sizeof(dir), "%s", f->dir);
	snprintf(cmd, sizeof(cmd),
		 "git init -q --bare '%s/old.git' && git --git-dir='%s/old.git' "
		 "config receive.fsckObjects false", dir, dir);
	sh(cmd);
	assert_int_equal(repos_create(dir, "old", NULL, HOOK), 0);
	assert_hosted(dir, "old");
}

static void test_fork(void **state)
{
	struct fx *f = *state;
	char want[256], have[256];

	assert_int_equal(repos_create(f->dir, "base", NULL, HOOK), 0);
	assert_int_equal(repos_create(f->dir, "forks/mine", "base", HOOK), 0);
	assert_hosted(f->dir, "forks/mine");
	snprintf(want, sizeof(want), "%s/base.git/objects\n", f->dir);
	snprintf(have, sizeof(have), "%s/forks/mine.git/objects/info/alternates",
		 f->dir);
	FILE *fp = fopen(have, "r");
	assert_non_null(fp);
	size_t n = fread(have, 1, sizeof(have) - 1, fp);
	fclose(fp);
	have[n] = '\0';
	assert_string_equal(have, want);
}

/* Cannot be made: an error, and nothing left where it would be. */
static void test_fails(void **state)
{
	struct fx *f = *state;
	char dir[128], cmd[256];

	snprintf(dir, sizeof(dir), "%s", f->dir);
	snprintf(cmd, sizeof(cmd), "echo >'%s/file'", dir);
	sh(cmd);
	snprintf(dir, sizeof(dir), "%s/file", f->dir);
	assert_int_equal(repos_create(dir, "x", NULL, HOOK), GD_EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_create, setup, teardown),
		cmocka_unit_test_setup_teardown(test_half_made, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_leftover, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsck_existing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fork, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fails, setup, teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
