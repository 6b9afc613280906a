/*
 * repos.c: creating hosted repositories with libgit2.  libgit2 is
 * initialised once by main() before any thread starts, told to read no
 * global, XDG or system git configuration: a repository depends on its
 * own config only, never on the service account's.
 *
 * Creation happens after the record's commit (repos_follow), never inside
 * an apply, and is atomic: a new repository is made whole beside its
 * place, then renamed into it.  A directory that an older grantd left
 * half-made (a kill -9 inside git_repository_init_ext) is completed.
 * Beside gitolite (repos_adopt) the node makes no repository and writes no
 * hook: gitolite creates both, and links its LOCAL_CODE post-receive.
 */
#define _GNU_SOURCE /* posix_spawn_file_actions_addchdir_np */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crashpoint.h"
#include "err.h"
#include "gitproc.h"
#include "grantd.pb-c.h"
#include "log.h"
#include "repos.h"
#include "banned.h"

pid_t repos_run_hook(const char *hook_path, const char *conf,
		     const char *path)
{
	const char *argv[] = {hook_path, "--config", conf, NULL};
	struct gitproc_cmd c = GITPROC_CMD_INIT;

	/* our environment and stdout, stderr; no stdin: the spool */
	c.prog = hook_path;
	c.argv = argv;
	c.dir = path;
	c.no_stdin = true;
	if (gitproc_start(&c) < 0) {
		log_warn("cannot run grant-hook in dir=%s", path);
		return -1;
	}
	return c.pid;
}

void repos_path(struct buf *out, const char *repo_dir, const char *name)
{
	buf_reset(out);
	buf_printf(out, "%s/%s.git", repo_dir, name);
}

/* Make file hold want (mode), unless it already does: written beside it
 * and renamed over it, so a crash leaves the old or the new whole.
 * Returns 0 or -1 (errno set). */
static int write_file(const char *file, const struct buf *want, mode_t mode)
{
	struct buf tmp = BUF_INIT;
	char have[16384];
	int rc = -1;
	FILE *fp = fopen(file, "r");

	if (fp) {
		size_t n = fread(have, 1, sizeof(have), fp);
		fclose(fp);
		if (n == want->len && !memcmp(have, want->p, n))
			return 0;
	}
	buf_printf(&tmp, "%s.grantd-tmp", file);
	if ((fp = fopen(tmp.p, "w"))) {
		bool ok = fwrite(want->p, 1, want->len, fp) == want->len &&
			  fchmod(fileno(fp), mode) == 0;
		if (fclose(fp) == 0 && ok && rename(tmp.p, file) == 0) {
			rc = 0;
		} else {
			int e = errno;
			unlink(tmp.p);
			errno = e;
		}
	}
	buf_free(&tmp);
	return rc;
}

/* objects/info/alternates naming the parent's objects (a fork). */
static int write_alternates(const char *path, const char *parent)
{
	struct buf f = BUF_INIT, want = BUF_INIT;
	int rc = 0;

	buf_printf(&f, "%s/objects/info", path);
	buf_printf(&want, "%s/objects\n", parent);
	if ((mkdir(f.p, 0755) < 0 && errno != EEXIST) ||
	    (buf_puts(&f, "/alternates"), write_file(f.p, &want, 0644) < 0)) {
		log_error("cannot write alternates path=%s: %s", f.p,
			  strerror(errno));
		rc = GD_EIO;
	}
	buf_free(&f);
	buf_free(&want);
	return rc;
}

/* libgit2's built-in template writes files no hosted repository needs;
 * each costs a disk block, which is most of what a fork costs (its
 * objects live in the parent). */
static void drop_samples(const char *path)
{
	static const char *const files[] = { "description", "info/exclude",
					     "hooks/README.sample" };
	struct buf f = BUF_INIT;

	for (size_t i = 0; i < GD_ARRAY_SIZE(files); i++) {
		buf_reset(&f);
		buf_printf(&f, "%s/%s", path, files[i]);
		unlink(f.p);
	}
	buf_reset(&f);
	buf_printf(&f, "%s/info", path);
	rmdir(f.p);
	buf_free(&f);
}

/* Make hooks/post-receive of the repository at path run hook (a shell
 * command line, e.g. exec '/usr/bin/grant-hook' --config
 * '/etc/grantd/grantd.conf'), so every push is handed to the node to
 * replicate.  Rewrites it only when it differs. */
static int install_hook(const char *path, const char *name, const char *hook)
{
	struct buf file = BUF_INIT, want = BUF_INIT;
	int rc = 0;

	buf_printf(&file, "%s/hooks", path);
	buf_printf(&want, "#!/bin/sh\n# installed by grantd: hand this push to "
		   "the node, which replicates it to every site\n%s\n", hook);
	if ((mkdir(file.p, 0755) < 0 && errno != EEXIST) ||
	    (buf_puts(&file, "/post-receive"),
	     write_file(file.p, &want, 0755) < 0)) {
		log_error("cannot install post-receive hook repo=%s: %s", name,
			  strerror(errno));
		rc = GD_EIO;
	}
	buf_free(&file);
	buf_free(&want);
	return rc;
}

/* receive.fsckObjects: git-receive-pack checks every pushed object with
 * git's fsck rules (libgit2's indexer checks only hashes and the pack's
 * shape), so a malformed object is refused at the push and never served
 * to peers.  Set at every start, so existing repositories get it too;
 * per-check exceptions (receive.fsck.<id> = ignore) are the operator's. */
static int set_fsck(git_repository *repo, const char *name)
{
	git_config *cfg = NULL, *local = NULL;
	int on = 0, rc = 0;

	if (git_repository_config(&cfg, repo) < 0 ||
	    git_config_open_level(&local, cfg, GIT_CONFIG_LEVEL_LOCAL) < 0 ||
	    ((git_config_get_bool(&on, local, "receive.fsckObjects") < 0 ||
	      !on) &&
	     git_config_set_bool(local, "receive.fsckObjects", 1) < 0)) {
		const git_error *e = git_error_last();
		log_error("cannot set receive.fsckObjects repo=%s: %s", name,
			  e ? e->message : "unknown error");
		rc = GD_EIO;
	}
	git_config_free(local);
	git_config_free(cfg);
	return rc;
}

/* What a kill -9 inside git_repository_init_ext can leave out. */
static bool complete(const char *path)
{
	static const char *const parts[] = { "HEAD", "config", "objects",
					     "refs", "hooks" };
	struct buf f = BUF_INIT;
	struct stat st;
	bool ok = true;

	for (size_t i = 0; ok && i < GD_ARRAY_SIZE(parts); i++) {
		buf_reset(&f);
		buf_printf(&f, "%s/%s", path, parts[i]);
		ok = stat(f.p, &st) == 0;
	}
	buf_free(&f);
	return ok;
}

/* Make path a bare repository: a new one, or the missing parts of a
 * half-made one (libgit2 keeps what is there and adds the rest). */
static int init_repo(const char *path, const char *name)
{
	git_repository *repo = NULL;
	git_repository_init_options io;

	git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
	io.initial_head = "main"; /* what clones check out */
	if (git_repository_init_ext(&repo, path, &io) < 0) {
		const git_error *e = git_error_last();
		log_error("cannot create repository repo=%s: %s", name,
			  e ? e->message : "unknown error");
		return GD_EIO;
	}
	git_repository_free(repo);
	crashpoint("repo-init");
	drop_samples(path);
	return 0;
}

/* Our part of a hosted repository: fsck on receive, the parent's objects
 * for a fork, the hook. */
static int settle(const char *repo_dir, const char *path, const char *name,
		  const char *fork_of, const char *hook)
{
	git_repository *repo = NULL;
	struct buf parent = BUF_INIT;
	int rc = 0;

	if (git_repository_open_bare(&repo, path) < 0) {
		const git_error *e = git_error_last();
		log_error("cannot open repository repo=%s: %s", name,
			  e ? e->message : "unknown error");
		return GD_EIO;
	}
	rc = set_fsck(repo, name);
	git_repository_free(repo);
	if (rc == 0 && fork_of && *fork_of) {
		repos_path(&parent, repo_dir, fork_of);
		rc = write_alternates(path, parent.p);
	}
	if (rc == 0 && hook)
		rc = install_hook(path, name, hook);
	buf_free(&parent);
	return rc;
}

static int rm_entry(const char *p, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT;
}

/* A new repository is made beside its place and renamed into it once
 * complete, so the path holds a whole repository, hook included, or
 * nothing; a crash leaves only NAME.git.grantd-new, which the next attempt
 * removes. */
static int create_new(const char *repo_dir, const char *path,
		      const char *name, const char *fork_of, const char *hook)
{
	struct buf tmp = BUF_INIT;
	int rc = GD_EIO;

	buf_printf(&tmp, "%s.grantd-new", path);
	if (nftw(tmp.p, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 &&
	    errno != ENOENT && errno != ENOTDIR) {
		log_error("cannot remove dir=%s: %s", tmp.p, strerror(errno));
		goto done;
	}
	if ((rc = init_repo(tmp.p, name)) < 0 ||
	    (rc = settle(repo_dir, tmp.p, name, fork_of, hook)) < 0)
		goto done;
	if (rename(tmp.p, path) < 0) {
		log_error("cannot create repository repo=%s: rename: %s", name,
			  strerror(errno));
		rc = GD_EIO;
		goto done;
	}
	log_info("created repository repo=%s%s%s", name,
		 fork_of && *fork_of ? " fork_of=" : "",
		 fork_of && *fork_of ? fork_of : "");
done:
	buf_free(&tmp);
	return rc;
}

int repos_create(const char *repo_dir, const char *name, const char *fork_of,
		 const char *hook)
{
	struct buf path = BUF_INIT;
	struct stat st;
	int rc = 0;

	repos_path(&path, repo_dir, name);
	if (stat(path.p, &st) < 0) {
		rc = create_new(repo_dir, path.p, name, fork_of, hook);
		goto done;
	}
	/* an older grantd made repositories in place: one it was killed in
	 * the middle of lacks parts, its hook above all */
	if (!complete(path.p)) {
		if ((rc = init_repo(path.p, name)) < 0)
			goto done;
		log_warn("repaired a half-made repository repo=%s", name);
	}
	rc = settle(repo_dir, path.p, name, fork_of, hook);
done:
	buf_free(&path);
	return rc;
}

int repos_adopt(const char *repo_dir, const char *name, const char *fork_of,
		const char *hook)
{
	struct buf path = BUF_INIT;
	struct stat st;
	int rc;

	repos_path(&path, repo_dir, name);
	if (stat(path.p, &st) < 0 && errno == ENOENT) {
		log_debug("repository not made here yet repo=%s: gitolite "
			  "makes it", name);
		rc = GD_ENOTFOUND;
	} else {
		rc = settle(repo_dir, path.p, name, fork_of, hook);
	}
	buf_free(&path);
	return rc;
}

/* Was name (earlier in list, before end) already seen? */
static bool seen(const char *list, size_t end, const char *name)
{
	for (size_t off = 0; off < end; off += strlen(list + off) + 1)
		if (!strcmp(list + off, name))
			return true;
	return false;
}

int repos_follow(struct store *s, const char *repo_dir, const char *hook,
		 bool make, struct buf *names, struct buf *failed)
{
	struct buf v = BUF_INIT;
	int rc = 0;

	for (size_t off = 0; off < names->len;
	     off += strlen(names->p + off) + 1) {
		const char *name = names->p + off;
		Grantd__V1__Repo *r = NULL;
		if (seen(names->p, off, name))
			continue;
		int grc = store_get(s, NULL, CF_REPOS, name, strlen(name), &v);
		if (grc == GD_ENOTFOUND)
			continue; /* its batch was not committed */
		if (grc == 0)
			r = grantd__v1__repo__unpack(NULL, v.len,
						     (const uint8_t *)v.p);
		if (grc == 0 && (!r || r->deleted)) {
			if (r)
				grantd__v1__repo__free_unpacked(r, NULL);
			continue;
		}
		if (grc == 0)
			grc = make ? repos_create(repo_dir, name, r->fork_of,
						  hook) :
				     repos_adopt(repo_dir, name, r->fork_of,
						 hook);
		if (grc < 0 && grc != GD_ENOTFOUND) {
			if (!seen(failed->p, failed->len, name))
				buf_add(failed, name, strlen(name) + 1);
			rc = GD_EIO;
		}
		if (r)
			grantd__v1__repo__free_unpacked(r, NULL);
	}
	buf_reset(names);
	buf_free(&v);
	return rc;
}

/* Hosted repositories and the git programs the node runs read no global,
 * XDG or system configuration: they must not depend on the service
 * account's own (nor fail when its HOME is unreadable, as libgit2 does:
 * "failed to stat '/root/.gitconfig'").  Before any thread. */
int repos_git_isolate(void)
{
	static const int levels[] = { GIT_CONFIG_LEVEL_PROGRAMDATA,
				      GIT_CONFIG_LEVEL_SYSTEM,
				      GIT_CONFIG_LEVEL_XDG,
				      GIT_CONFIG_LEVEL_GLOBAL };

	for (size_t i = 0; i < GD_ARRAY_SIZE(levels); i++)
		if (git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, levels[i],
				     "") < 0)
			return GD_EIO;
	if (setenv("GIT_CONFIG_NOSYSTEM", "1", 1) < 0 ||
	    setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1) < 0 ||
	    setenv("GIT_ATTR_NOSYSTEM", "1", 1) < 0)
		return GD_EIO;
	return 0;
}
