/*
 * test_spool.c: common/spool.h, the names of grant-hook's spool, over a
 * real directory: where the spool is, which of its files are spooled
 * pushes, and whether a repository has one (found while the file is
 * there, not after it is removed; a temporary file or a directory that is
 * not a push is never one).
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

#include "buf.h"
#include "spool.h"

struct fx {
	char dir[64]; /* the git dir */
	char spool[128]; /* its spool, not made yet */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_spool.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->spool, sizeof(f->spool), "%s/grantd-spool", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

/* A file named name in the spool, with a push's line. */
static void put(const struct fx *f, const char *name)
{
	char path[256];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", f->spool, name);
	assert_non_null(fp = fopen(path, "w"));
	fprintf(fp, "%040d %040d refs/heads/master\n", 0, 1);
	fclose(fp);
}

static void rm(const struct fx *f, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", f->spool, name);
	assert_int_equal(unlink(path), 0);
}

static void test_path(void **state)
{
	struct fx *f = *state;
	struct buf p = BUF_INIT;

	spool_path(&p, "/srv/git/r.git");
	assert_string_equal(p.p, "/srv/git/r.git/grantd-spool");
	/* replaces what was there */
	spool_path(&p, f->dir);
	assert_string_equal(p.p, f->spool);
	assert_int_equal(p.len, strlen(f->spool));
	buf_free(&p);
}

static void test_is_file(void **state)
{
	(void)state;
	assert_true(spool_is_file("1701000000-1234.refs"));
	assert_true(spool_is_file("a.refs"));
	assert_false(spool_is_file(".refs")); /* a suffix alone */
	assert_false(spool_is_file("refs"));
	assert_false(spool_is_file("a.ref"));
	assert_false(spool_is_file("a.refs.tmp")); /* being written */
	assert_false(spool_is_file("a.REFS"));
	assert_false(spool_is_file(""));
	assert_false(spool_is_file("."));
	assert_false(spool_is_file(".."));
}

/* No spool at all, an empty one, one with what is not a push, one with a
 * push; the push removed: no longer pending, the spool still there. */
static void test_pending(void **state)
{
	struct fx *f = *state;
	char sub[192];

	assert_false(spool_exists(f->dir));
	assert_false(spool_pending(f->dir));
	assert_int_equal(mkdir(f->spool, 0700), 0);
	assert_true(spool_exists(f->dir));
	assert_false(spool_pending(f->dir));
	put(f, "tmp.123"); /* grant-hook's file before its rename */
	put(f, "x.refs.tmp");
	snprintf(sub, sizeof(sub), "%s/old", f->spool);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_false(spool_pending(f->dir));
	put(f, "1701000000-1.refs");
	assert_true(spool_pending(f->dir));
	put(f, "1701000000-2.refs");
	rm(f, "1701000000-1.refs");
	assert_true(spool_pending(f->dir)); /* one is left */
	rm(f, "1701000000-2.refs");
	assert_false(spool_pending(f->dir));
	assert_true(spool_exists(f->dir));
}

/* A repository that is not there, or a spool that is a file. */
static void test_odd(void **state)
{
	struct fx *f = *state;
	char gone[128];
	FILE *fp;

	snprintf(gone, sizeof(gone), "%s/nothing.git", f->dir);
	assert_false(spool_exists(gone));
	assert_false(spool_pending(gone));
	assert_non_null(fp = fopen(f->spool, "w"));
	fclose(fp);
	assert_true(spool_exists(f->dir)); /* something is in its place */
	assert_false(spool_pending(f->dir)); /* but it holds no push */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_path, setup, teardown),
	        cmocka_unit_test(test_is_file),
	        cmocka_unit_test_setup_teardown(test_pending, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_odd, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
