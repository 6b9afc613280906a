/*
 * test_connect.c: node/git/connect.h, the check that a fetched pack
 * connects, in-process, on packs of exactly the objects the test lists
 * (the real `git pack-objects` and `git index-pack` make them) in a
 * quarantine whose alternate is a repository holding a base history:
 *  - a pack of a commit and all it brings, onto a repository that has
 *    its parent: connected;
 *  - a pack lacking a blob, a tree, or whose commit's parent the
 *    repository lacks, a tag without what it tags, a tip in neither:
 *    not connected, naming the object that lacks one;
 *  - a submodule's commit in a tree is not looked for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <git2.h>

#include "buf.h"
#include "connect.h"
#include "err.h"
#include "fixture.h"

struct fx {
	char dir[64];
	git_odb *odb; /* the quarantine q, the repository as alternate */
	git_odb_backend *q;
	char why[512];
};

static void sh(struct fx *f, const char *cmd)
{
	struct buf c = BUF_INIT;

	buf_printf(&c, "cd '%s' && (%s) >/dev/null", f->dir, cmd);
	assert_int_equal(system(c.p), 0);
	buf_free(&c);
}

static void hex(struct fx *f, const char *rev, char out[OID_HEX + 1])
{
	char cmd[256];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "cd '%s' && git -C w rev-parse '%s'", f->dir,
	         rev);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(out, OID_HEX + 1, p));
	assert_int_equal(pclose(p), 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_connect", false), 0);
	/* base: a/f, t; two changes a/f (tagged v1); sub adds a
	 * submodule's commit; repo.git holds base only */
	sh(f, "git init -q -b master w && cd w && git config user.email t@e"
	      " && git config user.name t && mkdir a && seq 1 300 >a/f &&"
	      " echo top >t && git add . && git commit -qm one &&"
	      " git tag base && echo change >>a/f && git commit -qam two &&"
	      " git tag -a -m v1 v1 && git update-index --add --cacheinfo"
	      " 160000,1234567890123456789012345678901234567890,sub &&"
	      " git commit -qm sub && cd .. && git init -q --bare repo.git &&"
	      " git -C w rev-list --objects base | cut -d' ' -f1 |"
	      " git -C w pack-objects -q --stdout |"
	      " git --git-dir=repo.git index-pack --stdin &&"
	      " git init -q --bare empty.git");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	git_odb_free(f->odb);
	assert_int_equal(fx_rmtree(f->dir), 0);
	free(f);
	return 0;
}

/* A quarantine holding a pack of exactly the objects objs (a shell
 * pipeline printing ids, run in w), repo (repo.git or empty.git) its
 * alternate; then the check of want. */
static int
check(struct fx *f, const char *objs, const char *repo, const char *want)
{
	char cmd[1024], w[1][OID_HEX + 1];
	struct buf q = BUF_INIT, alt = BUF_INIT;

	snprintf(cmd, sizeof(cmd),
	         "rm -rf q && mkdir -p q/pack && (cd w && %s) |"
	         " git -C w pack-objects -q --stdout >q/pack/p.pack &&"
	         " git index-pack q/pack/p.pack",
	         objs);
	sh(f, cmd);
	buf_printf(&q, "%s/q", f->dir);
	buf_printf(&alt, "%s/%s/objects", f->dir, repo);
	git_odb_free(f->odb);
	assert_int_equal(git_odb_new(&f->odb), 0);
	assert_int_equal(git_odb_backend_pack(&f->q, q.p), 0);
	assert_int_equal(git_odb_add_backend(f->odb, f->q, 2), 0);
	assert_int_equal(git_odb_add_disk_alternate(f->odb, alt.p), 0);
	hex(f, want, w[0]);
	f->why[0] = '\0';
	int rc = connect_pack(f->odb, f->q, (const char(*)[OID_HEX + 1]) w, 1,
	                      f->why, sizeof(f->why));
	buf_free(&q);
	buf_free(&alt);
	return rc;
}

#define NEW "git rev-list --objects master~1 ^base | cut -d' ' -f1"

static void test_connected(void **state)
{
	struct fx *f = *state;

	assert_int_equal(check(f, NEW, "repo.git", "master~1"), 0);
	/* the submodule's commit is nobody's here */
	assert_int_equal(check(f,
	                       "git rev-list --objects master ^base |"
	                       " cut -d' ' -f1",
	                       "repo.git", "master"),
	                 0);
}

/* The object that lacks one is named, and what it lacks. */
static void lacks(struct fx *f, const char *of, const char *what)
{
	char a[OID_HEX + 1], b[OID_HEX + 1];

	hex(f, of, a);
	hex(f, what, b);
	assert_non_null(strstr(f->why, a));
	assert_non_null(strstr(f->why, b));
	assert_non_null(strstr(f->why, "in neither pack nor repository"));
}

static void test_missing_blob(void **state)
{
	struct fx *f = *state;

	assert_int_equal(check(f,
	                       NEW " | grep -v $(git rev-parse master~1:a/f)",
	                       "repo.git", "master~1"),
	                 GD_EPROTO);
	lacks(f, "master~1:a", "master~1:a/f");
}

static void test_missing_tree(void **state)
{
	struct fx *f = *state;

	assert_int_equal(
	        check(f, "git rev-parse master~1", "repo.git", "master~1"),
	        GD_EPROTO);
	lacks(f, "master~1", "master~1^{tree}");
}

static void test_missing_parent(void **state)
{
	struct fx *f = *state;

	assert_int_equal(check(f, NEW, "empty.git", "master~1"), GD_EPROTO);
	lacks(f, "master~1", "base");
}

static void test_missing_tagged(void **state)
{
	struct fx *f = *state;

	assert_int_equal(check(f, "git rev-parse v1", "repo.git", "v1"),
	                 GD_EPROTO);
	lacks(f, "v1", "master~1");
}

/* The tip itself in neither (the pack is whole and connected). */
static void test_missing_tip(void **state)
{
	struct fx *f = *state;

	assert_int_equal(check(f, NEW, "repo.git", "master"), GD_EPROTO);
	char m[OID_HEX + 1];
	hex(f, "master", m);
	assert_non_null(strstr(f->why, m));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_connected, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_missing_blob, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_missing_tree, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_missing_parent, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_missing_tagged, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_missing_tip, setup,
	                                        teardown),
	};

	git_libgit2_init();
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
