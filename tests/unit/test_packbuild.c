/*
 * test_packbuild.c: node/git/packbuild.h, a small pack built in-process,
 * on histories the real git makes (subdirectories, an annotated tag, a
 * merge, a submodule's commit), each pack read back with the real `git
 * index-pack` and `git show-index`, and checked connected by `git
 * rev-list --objects` in a copy that has only the haves:
 *  - a pack holds exactly what `git rev-list --objects WANTS --not HAVES`
 *    lists: no more (nothing of the haves, nor of a branch not asked),
 *    no less (the asker's copy is connected after it);
 *  - a tag asked for comes with what it tags; a submodule's commit is
 *    not looked for;
 *  - past the limits (commits, blob bytes), or a want that is a tree,
 *    it says GD_ETOOBIG and builds nothing.
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
#include "err.h"
#include "fixture.h"
#include "packbuild.h"

struct fx {
	char dir[64], w[128], dst[128];
	git_repository *repo; /* w's .git */
};

/* Run a shell command in dir (fails the test unless it succeeds). */
static void sh(struct fx *f, const char *cmd)
{
	struct buf c = BUF_INIT;

	buf_printf(&c, "cd '%s' && (%s) >/dev/null", f->dir, cmd);
	assert_int_equal(system(c.p), 0);
	buf_free(&c);
}

/* The one line a command prints. */
static void line(struct fx *f, const char *cmd, char *out, size_t n)
{
	struct buf c = BUF_INIT;
	FILE *p;

	buf_printf(&c, "cd '%s' && %s", f->dir, cmd);
	assert_non_null(p = popen(c.p, "r"));
	assert_non_null(fgets(out, (int)n, p));
	out[strcspn(out, "\n")] = '\0';
	assert_int_equal(pclose(p), 0);
	buf_free(&c);
}

static void oid(struct fx *f, const char *rev, git_oid *out)
{
	char cmd[256], hex[64];

	snprintf(cmd, sizeof(cmd), "git -C w rev-parse '%s'", rev);
	line(f, cmd, hex, sizeof(hex));
	assert_int_equal(git_oid_fromstr(out, hex), 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char path[192];

	assert_non_null(f);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_packbuild", false), 0);
	snprintf(f->w, sizeof(f->w), "%s/w", f->dir);
	snprintf(f->dst, sizeof(f->dst), "%s/dst.git", f->dir);
	/* base: a/b/f, c/g, t; two changes a/b/f (tagged v1); side adds
	 * c/s; merge joins them; sub adds a submodule's commit */
	sh(f, "git init -q -b master w && cd w && git config user.email t@e"
	      " && git config user.name t && mkdir -p a/b c && seq 1 300 >a/b/f"
	      " && echo x >c/g && echo top >t && git add . &&"
	      " git commit -qm one && git tag base &&"
	      " echo change >>a/b/f && git commit -qam two &&"
	      " git tag -a -m v1 v1 && git checkout -q -b side base &&"
	      " echo s >c/s && git add c/s && git commit -qm side &&"
	      " git checkout -q master && git merge -q --no-edit side &&"
	      " git update-index --add --cacheinfo"
	      " 160000,1234567890123456789012345678901234567890,sub &&"
	      " git commit -qm sub && git branch sub");
	snprintf(path, sizeof(path), "%s/.git", f->w);
	assert_int_equal(git_repository_open(&f->repo, path), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	git_repository_free(f->repo);
	assert_int_equal(fx_rmtree(f->dir), 0);
	free(f);
	return 0;
}

/* The objects of pack (non-thin: indexed on its own) into set, sorted,
 * one per line; and into dst (a fresh copy holding haves, a rev list),
 * where `rev-list --objects want` must then find everything. */
static void check(struct fx *f,
                  const struct buf *pack,
                  const char *haves,
                  const char *want,
                  struct buf *set)
{
	char file[192], cmd[1024], l[128];
	FILE *fp;

	snprintf(file, sizeof(file), "%s/p.pack", f->dir);
	assert_non_null(fp = fopen(file, "w"));
	assert_int_equal(fwrite(pack->p, 1, pack->len, fp), pack->len);
	fclose(fp);
	sh(f, "rm -rf dst.git && git init -q --bare dst.git && git index-pack"
	      " p.pack");
	snprintf(cmd, sizeof(cmd),
	         "git show-index <p.idx | cut -d' ' -f2 | sort");
	buf_reset(set);
	struct buf c = BUF_INIT;
	buf_printf(&c, "cd '%s' && %s", f->dir, cmd);
	assert_non_null(fp = popen(c.p, "r"));
	while (fgets(l, sizeof(l), fp))
		buf_puts(set, l);
	assert_int_equal(pclose(fp), 0);
	buf_free(&c);
	/* the asker's copy: the haves' objects, then the pack */
	if (*haves) {
		snprintf(cmd, sizeof(cmd),
		         "git -C w rev-list --objects %s | cut -d' ' -f1 |"
		         " git -C w pack-objects -q --stdout |"
		         " git --git-dir=dst.git index-pack --stdin",
		         haves);
		sh(f, cmd);
	}
	sh(f, "git --git-dir=dst.git index-pack --stdin <p.pack");
	snprintf(cmd, sizeof(cmd),
	         "git --git-dir=dst.git rev-list --objects %s", want);
	sh(f, cmd);
}

/* What git says the pack should hold, sorted. */
static void expected(struct fx *f, const char *revs, struct buf *set)
{
	char cmd[512], l[128];
	struct buf c = BUF_INIT;
	FILE *fp;

	snprintf(cmd, sizeof(cmd),
	         "git -C w rev-list --objects %s | cut -d' ' -f1 | sort", revs);
	buf_printf(&c, "cd '%s' && %s", f->dir, cmd);
	buf_reset(set);
	assert_non_null(fp = popen(c.p, "r"));
	while (fgets(l, sizeof(l), fp))
		buf_puts(set, l);
	assert_int_equal(pclose(fp), 0);
	buf_free(&c);
}

/* wants and haves as rev names (NULL-ended): the pack, exactly git's
 * set, connected in a copy that has the haves. */
static void exact(struct fx *f,
                  const char *const *wants,
                  const char *const *haves,
                  int objects)
{
	git_oid w[4], h[4];
	size_t nw = 0, nh = 0;
	struct buf pack = BUF_INIT, got = BUF_INIT, want = BUF_INIT;
	struct buf revs = BUF_INIT, hv = BUF_INIT;

	for (; wants[nw]; nw++) {
		oid(f, wants[nw], &w[nw]);
		buf_printf(&revs, "%s ", wants[nw]);
	}
	for (; haves && haves[nh]; nh++) {
		oid(f, haves[nh], &h[nh]);
		buf_printf(&revs, "^%s ", haves[nh]);
		buf_printf(&hv, "%s ", haves[nh]);
	}
	assert_int_equal(packbuild_small(&pack, f->repo, w, nw, h, nh), 0);
	expected(f, revs.p, &want);
	char hex[GIT_OID_HEXSZ + 1];
	git_oid_tostr(hex, sizeof(hex), &w[0]);
	check(f, &pack, hv.len ? hv.p : "", hex, &got);
	assert_string_equal(got.p, want.p);
	int n = 0;
	for (const char *p = got.p; *p; p++)
		n += *p == '\n';
	assert_int_equal(n, objects);
	buf_free(&pack);
	buf_free(&got);
	buf_free(&want);
	buf_free(&revs);
	buf_free(&hv);
}

/* One commit on a have, deep in subdirectories: the commit, the trees
 * on the path, the blob; nothing else. */
static void test_one_commit(void **state)
{
	const char *w[] = {"master~2", NULL}, *h[] = {"base", NULL};
	exact(*state, w, h, 5);
}

/* No haves: the whole history. */
static void test_no_haves(void **state)
{
	const char *w[] = {"master~2", NULL};
	exact(*state, w, NULL, 13);
}

/* A tag: the tag and what it tags. */
static void test_tag(void **state)
{
	const char *w[] = {"v1", NULL}, *h[] = {"base", NULL};
	exact(*state, w, h, 6);
}

/* A merge of two new histories onto base; and onto one of them, known
 * by its tag (a have that is a tag stops the walk at what it tags). */
static void test_merge(void **state)
{
	const char *w[] = {"master~1", NULL}, *h[] = {"base", NULL};
	const char *h2[] = {"v1", "base", NULL};
	exact(*state, w, h, 11);
	exact(*state, w, h2, 6);
}

/* A submodule's commit in a tree: not in this repository, not asked. */
static void test_gitlink(void **state)
{
	const char *w[] = {"sub", NULL}, *h[] = {"master~1", NULL};
	exact(*state, w, h, 2);
}

/* Past the limits, or a tree as want: GD_ETOOBIG, no pack. */
static void test_too_big(void **state)
{
	struct fx *f = *state;
	struct buf pack = BUF_INIT;
	git_oid w, h;
	char cmd[256];

	oid(f, "base", &h);
	oid(f, "master^{tree}", &w);
	assert_int_equal(packbuild_small(&pack, f->repo, &w, 1, &h, 1),
	                 GD_ETOOBIG);
	assert_int_equal(pack.len, 0);
	/* a blob of more bytes than a small pack may hold */
	snprintf(cmd, sizeof(cmd),
	         "cd w && head -c %d /dev/urandom >big && git add big &&"
	         " git commit -qm big",
	         PACKBUILD_BYTES_MAX + 1);
	sh(f, cmd);
	oid(f, "master", &w);
	oid(f, "master~1", &h);
	assert_int_equal(packbuild_small(&pack, f->repo, &w, 1, &h, 1),
	                 GD_ETOOBIG);
	assert_int_equal(pack.len, 0);
	/* more commits than a small pack may hold */
	snprintf(cmd, sizeof(cmd),
	         "cd w && for i in $(seq %d); do git commit -q --allow-empty"
	         " -m $i; done",
	         PACKBUILD_COMMITS_MAX + 1);
	sh(f, cmd);
	oid(f, "master", &w);
	oid(f, "base", &h);
	assert_int_equal(packbuild_small(&pack, f->repo, &w, 1, &h, 1),
	                 GD_ETOOBIG);
	/* ... which from a nearer have is small again */
	oid(f, "master~1", &h);
	assert_int_equal(packbuild_small(&pack, f->repo, &w, 1, &h, 1), 0);
	assert_true(pack.len > 12);
	buf_free(&pack);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_one_commit, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_no_haves, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_tag, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_merge, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_gitlink, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_too_big, setup, teardown),
	};

	git_libgit2_init();
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
