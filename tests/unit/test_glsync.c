/*
 * test_glsync.c: node/git/glsync.h, gitolite mode's admin sync, driven
 * as the actor drives it (glsync_tick, its output polled) over a real
 * gitolite-admin bare repository and a stand-in gitolite that is a real
 * executable script the stage spawns: the child handling is what is
 * tested.
 *  - outside gitolite mode every call takes NULL and does nothing;
 *  - once at start, with an environment of its own and HOME as its
 *    directory, and not again until a move;
 *  - only a move of the branch gitolite-admin's HEAD names asks for a
 *    run (not another branch, not another repository);
 *  - one run at a time: moves during a run give one more run after it;
 *  - a run that fails (an exit status, a signal, no program at all) is
 *    counted with its first error line, or its last line;
 *  - a run whose output ended but which has not exited is "ending";
 *  - stopping waits for a run in progress, which is then counted.
 */
#include <poll.h>
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
#include "clock.h"
#include "fixture.h"
#include "gitfx.h"
#include "gitio.h"
#include "glsync.h"
#include "repos.h"

#define ADMIN   "gitolite-admin"
#define MASTER  "refs/heads/master"
#define WAIT_MS GITFX_WAIT_MS

struct fx {
	char dir[64];
	char repo_dir[128], home[128], prog[128], marker[128], conf[128];
	struct gitio_stats st;
	struct gitio io;
	struct glsync *gs;
	git_repository *admin, *other;
	git_oid c1;
};

/* A root commit of text; master moves to it, whatever it was. */
static void commit(git_repository *repo, git_oid *out, const char *text)
{
	gitfx_commit_text(repo, out, text, NULL);
	gitfx_set_ref(repo, MASTER, out);
}

/* The stand-in gitolite: notes each run, its arguments, directory,
 * environment and the admin master in the marker; its behaviour is
 * chosen by files in its home (its working directory): a run goes on
 * while "hold" is there, or with its output closed while "close" is. */
static void write_program(struct fx *f)
{
	FILE *fp;

	assert_non_null(fp = fopen(f->prog, "w"));
	fprintf(fp,
	        "#!/bin/sh\n"
	        "{ echo \"run $# $*\"; echo \"pwd $(pwd)\"; env | sort | "
	        "sed 's/^/env /'; echo \"master $(git --git-dir='%s/" ADMIN
	        ".git' rev-parse -q --verify " MASTER ")\"; } >>'%s'\n"
	        "echo 'Initialized empty Git repository in /x/demo.git/'\n"
	        "echo 'WARNING: something said on stderr' >&2\n"
	        "[ -e slow ] && sleep 1\n"
	        "while [ -e hold ]; do sleep 0.02; done\n"
	        "[ -e close ] && { exec >&- 2>&-; "
	        "while [ -e close ]; do sleep 0.02; done; }\n"
	        "[ -e kill ] && kill -9 $$\n"
	        "[ -e ctl ] && { printf 'error:\\tbad\\n'; exit 5; }\n"
	        "[ -e quiet ] && { echo 'just this'; exit 4; }\n"
	        "[ -e fail ] && { echo 'FATAL: the test says no' >&2; "
	        "echo 'last words'; exit 3; }\n"
	        "echo done >>'%s'\n"
	        "exit 0\n",
	        f->repo_dir, f->marker, f->marker);
	fclose(fp);
	assert_int_equal(chmod(f->prog, 0755), 0);
}

static void open_gs(struct fx *f, const char *program)
{
	glsync_open(&f->gs, &(struct glsync_opts){.io = &f->io,
	                                          .home = f->home,
	                                          .program = program,
	                                          .conf_path = f->conf});
	assert_non_null(f->gs);
}

static int setup_repos(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	git_repository_init_options io;
	struct buf p = BUF_INIT;
	git_oid x;

	assert_non_null(f);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_glsync", false), 0);
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	snprintf(f->home, sizeof(f->home), "%s/home", f->dir);
	snprintf(f->prog, sizeof(f->prog), "%s/gitolite.sh", f->dir);
	snprintf(f->marker, sizeof(f->marker), "%s/runs", f->dir);
	snprintf(f->conf, sizeof(f->conf), "%s/grantd.conf", f->dir);
	assert_int_equal(mkdir(f->home, 0755), 0);
	write_program(f);
	/* gitolite's admin repository, HEAD at master as 3.6 makes it */
	git_repository_init_options_init(&io,
	                                 GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
	io.initial_head = "master";
	repos_path(&p, f->repo_dir, ADMIN);
	assert_int_equal(git_repository_init_ext(&f->admin, p.p, &io), 0);
	commit(f->admin, &f->c1, "conf 1");
	repos_path(&p, f->repo_dir, "r");
	assert_int_equal(git_repository_init_ext(&f->other, p.p, &io), 0);
	commit(f->other, &x, "r 1");
	buf_free(&p);
	f->io = (struct gitio){.repo_dir = f->repo_dir, .st = &f->st};
	*state = f;
	return 0;
}

static int setup(void **state)
{
	setup_repos(state);
	open_gs(*state, ((struct fx *)*state)->prog);
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	glsync_destroy(&f->gs);
	gitio_close(&f->io);
	git_repository_free(f->admin);
	git_repository_free(f->other);
	assert_int_equal(fx_rmtree(f->dir), 0);
	free(f);
	return 0;
}

/* The loop's part: wait on the run's output, tick. */
static void turn(struct fx *f)
{
	int fd = glsync_fd(f->gs);

	if (fd >= 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		poll(&p, 1, 20);
	} else {
		usleep(5000);
	}
	glsync_tick(f->gs, clock_mono_ms());
}

/* Tick until n runs ended (counted). */
static bool wait_syncs(struct fx *f, uint64_t n)
{
	for (uint64_t end = clock_mono_ms() + WAIT_MS; clock_mono_ms() < end;
	     turn(f))
		if (f->st.gitolite_syncs >= n)
			return true;
	return false;
}

/* Runs started so far (from the marker), runs ended well, and the last
 * master they saw. */
static int runs(struct fx *f, int *done, char *master, size_t mlen)
{
	char line[1024];
	int n = 0, d = 0;
	FILE *fp = fopen(f->marker, "r");

	if (master)
		*master = '\0';
	if (!fp)
		return 0;
	while (fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = '\0';
		n += !strncmp(line, "run ", 4);
		d += !strcmp(line, "done");
		if (master && !strncmp(line, "master ", 7))
			snprintf(master, mlen, "%.*s", (int)(mlen - 1),
			         line + 7);
	}
	fclose(fp);
	if (done)
		*done = d;
	return n;
}

static bool marker_has(struct fx *f, const char *want, bool prefix)
{
	char line[1024];
	bool found = false;
	FILE *fp = fopen(f->marker, "r");

	assert_non_null(fp);
	while (!found && fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = '\0';
		found = prefix ? !strncmp(line, want, strlen(want))
		               : !strcmp(line, want);
	}
	fclose(fp);
	return found;
}

/* A file in gitolite's home, which the stand-in looks at. */
static void home_file(struct fx *f, const char *name, bool on)
{
	char path[256];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", f->home, name);
	if (on) {
		assert_non_null(fp = fopen(path, "w"));
		fclose(fp);
	} else {
		assert_int_equal(unlink(path), 0);
	}
}

/* Tick for ms: time enough for a run to start, had one been due. */
static void idle(struct fx *f, int ms)
{
	for (uint64_t end = clock_mono_ms() + ms; clock_mono_ms() < end;)
		turn(f);
}

static void test_not_gitolite(void **state)
{
	struct fx *f = *state;
	struct glsync *gs = (struct glsync *)f; /* overwritten */

	glsync_open(&gs,
	            &(struct glsync_opts){.io = &f->io, .program = f->prog});
	assert_null(gs);
	glsync_moved(gs, f->admin, ADMIN, MASTER);
	glsync_tick(gs, clock_mono_ms());
	assert_int_equal(glsync_fd(gs), -1);
	assert_false(glsync_ending(gs));
	glsync_destroy(&gs);
	assert_null(gs);
	assert_int_equal(runs(f, NULL, NULL, 0), 0);
	assert_int_equal(f->st.gitolite_syncs, 0);
}

/* Once at start (a move a crash left uncompiled), as after a push to
 * the admin repository; then nothing until a move. */
static void test_start(void **state)
{
	struct fx *f = *state;
	char want[512], master[64], hex[GIT_OID_HEXSZ + 1];
	int done = 0;

	assert_int_equal(glsync_fd(f->gs), -1); /* nothing before a tick */
	glsync_tick(f->gs, clock_mono_ms());
	assert_true(glsync_fd(f->gs) >= 0); /* started: its output */
	assert_true(wait_syncs(f, 1));
	assert_int_equal(glsync_fd(f->gs), -1);
	assert_false(glsync_ending(f->gs));
	assert_int_equal(runs(f, &done, master, sizeof(master)), 1);
	assert_int_equal(done, 1);
	git_oid_tostr(hex, sizeof(hex), &f->c1);
	assert_string_equal(master, hex);
	assert_true(marker_has(f, "run 1 grantd-admin-sync", false));
	snprintf(want, sizeof(want), "pwd %s", f->home);
	assert_true(marker_has(f, want, false));
	snprintf(want, sizeof(want), "env HOME=%s", f->home);
	assert_true(marker_has(f, want, false));
	assert_true(
	        marker_has(f, "env PATH=/usr/local/bin:/usr/bin:/bin", false));
	snprintf(want, sizeof(want), "env GRANTD_CONFIG=%s", f->conf);
	assert_true(marker_has(f, want, false));
	assert_true(marker_has(f, "env USER=", true));
	assert_true(marker_has(f, "env LOGNAME=", true));
	/* none of the node's own environment */
	assert_false(marker_has(f, "env GIT_CONFIG_GLOBAL=", true));
	assert_false(marker_has(f, "env GD_TEST_NODE_ONLY=", true));
	assert_int_equal(f->st.gitolite_failures, 0);
	assert_string_equal(f->st.gitolite_last_error, "");
	idle(f, 300);
	assert_int_equal(runs(f, NULL, NULL, 0), 1);
	assert_int_equal(f->st.gitolite_syncs, 1);
}

/* Only a move of the branch HEAD names in gitolite-admin. */
static void test_moved(void **state)
{
	struct fx *f = *state;
	git_reference *head = NULL;

	assert_true(wait_syncs(f, 1));
	glsync_moved(f->gs, f->other, "r", MASTER);
	glsync_moved(f->gs, f->admin, ADMIN, "refs/heads/other");
	glsync_moved(f->gs, f->admin, ADMIN, "HEAD");
	idle(f, 300);
	assert_int_equal(runs(f, NULL, NULL, 0), 1);
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	assert_true(wait_syncs(f, 2));
	assert_int_equal(runs(f, NULL, NULL, 0), 2);
	/* upstream gitolite compiles HEAD's branch, whatever its name */
	assert_int_equal(git_reference_symbolic_create(&head, f->admin, "HEAD",
	                                               "refs/heads/main", 1,
	                                               NULL),
	                 0);
	git_reference_free(head);
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	idle(f, 300);
	assert_int_equal(runs(f, NULL, NULL, 0), 2);
	glsync_moved(f->gs, f->admin, ADMIN, "refs/heads/main");
	assert_true(wait_syncs(f, 3));
	assert_int_equal(runs(f, NULL, NULL, 0), 3);
	assert_int_equal(f->st.gitolite_failures, 0);
}

/* Moves while a run is in progress: one run after it, never two at
 * once, of the newest commit. */
static void test_coalesced(void **state)
{
	struct fx *f = *state;
	char master[64], hex[GIT_OID_HEXSZ + 1];
	git_oid c2;
	int done = 0;

	assert_true(wait_syncs(f, 1));
	home_file(f, "hold", true); /* the next run waits while it is */
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	glsync_tick(f->gs, clock_mono_ms());
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     runs(f, NULL, NULL, 0) < 2 && clock_mono_ms() < end;)
		turn(f);
	assert_int_equal(runs(f, &done, NULL, 0), 2);
	assert_int_equal(done, 1); /* the second is held */
	commit(f->admin, &c2, "conf 2");
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	idle(f, 200);
	assert_int_equal(runs(f, NULL, NULL, 0), 2); /* one at a time */
	home_file(f, "hold", false);
	assert_true(wait_syncs(f, 3));
	idle(f, 300);
	assert_int_equal(runs(f, &done, master, sizeof(master)), 3);
	assert_int_equal(done, 3);
	assert_int_equal(f->st.gitolite_syncs, 3);
	git_oid_tostr(hex, sizeof(hex), &c2);
	assert_string_equal(master, hex);
}

/* A run that fails: counted, with the first line that says error (not
 * the last, not the warning before it) and its status; the next move is
 * run all the same and a success leaves the count alone. */
static void test_fails(void **state)
{
	struct fx *f = *state;
	const char *err = f->st.gitolite_last_error;
	char hex[GIT_OID_HEXSZ + 1];

	home_file(f, "fail", true);
	assert_true(wait_syncs(f, 1));
	assert_int_equal(f->st.gitolite_failures, 1);
	git_oid_tostr(hex, sizeof(hex), &f->c1);
	assert_non_null(strstr(err, hex));
	assert_non_null(strstr(err, "rc=3"));
	assert_non_null(strstr(err, "FATAL: the test says no"));
	assert_null(strstr(err, "last words"));
	assert_null(strstr(err, "WARNING"));

	/* no line says error: the last line */
	home_file(f, "fail", false);
	home_file(f, "quiet", true);
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	assert_true(wait_syncs(f, 2));
	assert_int_equal(f->st.gitolite_failures, 2);
	assert_non_null(strstr(err, "rc=4"));
	assert_non_null(strstr(err, "just this"));

	/* control characters are not passed on */
	home_file(f, "quiet", false);
	home_file(f, "ctl", true);
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	assert_true(wait_syncs(f, 3));
	assert_int_equal(f->st.gitolite_failures, 3);
	assert_non_null(strstr(err, "rc=5"));
	assert_non_null(strstr(err, "error:?bad"));

	/* killed: 128 + the signal */
	home_file(f, "ctl", false);
	home_file(f, "kill", true);
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	assert_true(wait_syncs(f, 4));
	assert_int_equal(f->st.gitolite_failures, 4);
	assert_non_null(strstr(err, "rc=137"));

	home_file(f, "kill", false);
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	assert_true(wait_syncs(f, 5));
	assert_int_equal(f->st.gitolite_failures, 4);
}

/* No such program, or one that cannot be run: a failure with its reason,
 * and the next move is tried again. */
static void test_no_program(void **state)
{
	struct fx *f = *state;
	char missing[192];

	setup_repos(state);
	f = *state;
	snprintf(missing, sizeof(missing), "%s/no-such-gitolite", f->dir);
	open_gs(f, missing);
	glsync_tick(f->gs, clock_mono_ms());
	assert_int_equal(f->st.gitolite_syncs, 1); /* at once */
	assert_int_equal(f->st.gitolite_failures, 1);
	assert_int_equal(glsync_fd(f->gs), -1);
	assert_non_null(strstr(f->st.gitolite_last_error, "cannot run "));
	assert_non_null(strstr(f->st.gitolite_last_error, missing));
	glsync_tick(f->gs, clock_mono_ms()); /* not due again by itself */
	assert_int_equal(f->st.gitolite_syncs, 1);
	glsync_moved(f->gs, f->admin, ADMIN, MASTER);
	glsync_tick(f->gs, clock_mono_ms());
	assert_int_equal(f->st.gitolite_failures, 2);
	assert_int_equal(runs(f, NULL, NULL, 0), 0);
}

/* Its output closed, the run not over: ending, then counted. */
static void test_ending(void **state)
{
	struct fx *f = *state;

	home_file(f, "close", true);
	assert_false(glsync_ending(f->gs));
	glsync_tick(f->gs, clock_mono_ms());
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     glsync_fd(f->gs) >= 0 && clock_mono_ms() < end;)
		turn(f);
	assert_int_equal(glsync_fd(f->gs), -1);
	assert_true(glsync_ending(f->gs));
	idle(f, 100);
	assert_true(glsync_ending(f->gs)); /* while it runs */
	assert_int_equal(f->st.gitolite_syncs, 0);
	home_file(f, "close", false); /* now it ends */
	assert_true(wait_syncs(f, 1));
	assert_false(glsync_ending(f->gs));
	assert_int_equal(f->st.gitolite_failures, 0);
}

/* Stopping waits for the run in progress (a second here). */
static void test_destroy_waits(void **state)
{
	struct fx *f = *state;
	int done = 0;

	home_file(f, "slow", true);
	glsync_tick(f->gs, clock_mono_ms());
	assert_true(glsync_fd(f->gs) >= 0);
	glsync_destroy(&f->gs);
	assert_null(f->gs);
	assert_int_equal(f->st.gitolite_syncs, 1);
	assert_int_equal(f->st.gitolite_failures, 0);
	assert_int_equal(runs(f, &done, NULL, 0), 1);
	assert_int_equal(done, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_not_gitolite, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_start, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_moved, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_coalesced, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_fails, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_no_program, NULL,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_ending, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_destroy_waits, setup,
	                                        teardown),
	};
	if (fx_group_setup("test_glsync", LOG_LVL_ERROR) < 0)
		return 1;
	/* what the node sets (repos_git_isolate) and the sync must not pass
	 * on to gitolite; and one of the node's own */
	if (repos_git_isolate() < 0)
		return 1;
	setenv("GD_TEST_NODE_ONLY", "1", 1);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	git_libgit2_shutdown();
	return rc;
}
