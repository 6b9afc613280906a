/*
 * test_repos.c: node/git/repos.h, hosted repositories on disk.
 *
 * A repository is made whole or not at all, and one that a crash left
 * half-made is completed: a kill -9 inside git_repository_init_ext can
 * leave a directory without hooks/, config or HEAD, and before the fix its
 * hook was never installed again (review-fa65238-security finding 10).
 * Every hosted repository checks pushed objects (receive.fsckObjects).
 * Beside gitolite, the node makes no repository and writes no hook: it
 * only settles the repositories gitolite made (repos_adopt).
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
#include "store.h"

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

/* Beside gitolite (repos_adopt): a repository gitolite made is settled
 * (it checks pushed objects) and keeps gitolite's hooks: no post-receive
 * is written, a link gitolite made stays as it was.  One not there is
 * not made, and that is no failure. */
static void test_adopt(void **state)
{
	struct fx *f = *state;
	char dir[64], cmd[512], link[256], have[256];
	ssize_t n;

	snprintf(dir, sizeof(dir), "%s", f->dir);
	assert_int_equal(repos_adopt(dir, "conf/later", NULL, NULL),
			 GD_ENOTFOUND);
	assert_false(exists(dir, "conf/later.git"));
	assert_false(exists(dir, "conf"));
	assert_false(exists(dir, "conf/later.git.grantd-new"));

	/* as gitolite leaves a new repository: its own hook links */
	snprintf(cmd, sizeof(cmd),
		 "git init -q --bare '%s/demo.git' && "
		 "rm -f '%s/demo.git/hooks/'*.sample && "
		 "ln -s /usr/share/grantd/gitolite/hooks/common/post-receive "
		 "'%s/demo.git/hooks/post-receive'", dir, dir, dir);
	sh(cmd);
	assert_int_equal(repos_adopt(dir, "demo", NULL, NULL), 0);
	git_repository *repo = NULL;
	git_config *cfg = NULL;
	int on = 0;
	snprintf(cmd, sizeof(cmd), "%s/demo.git", dir);
	assert_int_equal(git_repository_open_bare(&repo, cmd), 0);
	assert_int_equal(git_repository_config_snapshot(&cfg, repo), 0);
	assert_int_equal(git_config_get_bool(&on, cfg, "receive.fsckObjects"),
			 0);
	assert_true(on);
	git_config_free(cfg);
	git_repository_free(repo);
	snprintf(link, sizeof(link), "%s/demo.git/hooks/post-receive", dir);
	n = readlink(link, have, sizeof(have) - 1);
	assert_true(n > 0);
	have[n] = '\0';
	assert_string_equal(have, "/usr/share/grantd/gitolite/hooks/common/"
			    "post-receive");
	/* a repository without hooks gets none */
	snprintf(cmd, sizeof(cmd), "git init -q --bare '%s/bare.git' && "
		 "rm -rf '%s/bare.git/hooks'", dir, dir);
	sh(cmd);
	assert_int_equal(repos_adopt(dir, "bare", NULL, NULL), 0);
	assert_false(exists(dir, "bare.git/hooks"));
}

/* repos_follow beside gitolite (make false): records whose repository is
 * there are settled, one that is not is skipped without a failure (not
 * tried again: gitrepl waits for its directory), and none is made. */
static void test_follow_gitolite(void **state)
{
	static const uint8_t key[STORE_SEAL_KEY_LEN] =
		"test_repos seal key 0123456789ab";
	struct fx *f = *state;
	struct store *s = NULL;
	struct store_batch *b = NULL;
	struct buf names = BUF_INIT, failed = BUF_INIT;
	char dir[128], cmd[512];
	uint8_t packed[256];
	const char *repos[] = { "demo", "later" };

	snprintf(dir, sizeof(dir), "%s/repositories", f->dir);
	assert_int_equal(fx_store_open(&s, NULL, f->dir, NULL, key), 0);
	assert_int_equal(store_batch_new(&b, s), 0);
	for (size_t i = 0; i < GD_ARRAY_SIZE(repos); i++) {
		Grantd__V1__Repo rp = GRANTD__V1__REPO__INIT;
		rp.name = (char *)repos[i];
		rp.mode = GRANTD__V1__REPO_MODE__MODE_OFF;
		rp.has_mode = 1;
		size_t len = grantd__v1__repo__pack(&rp, packed);
		store_put(b, CF_REPOS, repos[i], strlen(repos[i]), packed,
			  len);
		buf_add(&names, repos[i], strlen(repos[i]) + 1);
	}
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
	snprintf(cmd, sizeof(cmd), "git init -q --bare '%s/demo.git' && "
		 "git --git-dir='%s/demo.git' config receive.fsckObjects false",
		 dir, dir);
	sh(cmd);

	assert_int_equal(repos_follow(s, dir, NULL, false, &names, &failed),
			 0);
	assert_int_equal(names.len, 0);
	assert_int_equal(failed.len, 0);
	assert_false(exists(dir, "later.git"));
	assert_false(exists(dir, "demo.git/hooks/post-receive"));
	snprintf(cmd, sizeof(cmd), "test \"$(git --git-dir='%s/demo.git' "
		 "config --bool receive.fsckObjects)\" = true", dir);
	sh(cmd);
	/* the same records, the node's way (make true): both made */
	buf_add(&names, "later", sizeof("later"));
	assert_int_equal(repos_follow(s, dir, HOOK, true, &names, &failed),
			 0);
	assert_hosted(dir, "later");
	buf_free(&names);
	buf_free(&failed);
	store_destroy(&s);
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
		cmocka_unit_test_setup_teardown(test_adopt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_follow_gitolite, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
