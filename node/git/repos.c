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
 * A deleted repository is never destroyed: moved aside after the commit,
 * or renamed to the repository a `repo rename` made of it.
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
#include <time.h>
#include <unistd.h>

#include "crashpoint.h"
#include "err.h"
#include "gitproc.h"
#include "grantd.pb-c.h"
#include "hlc.h"
#include "log.h"
#include "names.h"
#include "repos.h"
#include "banned.h"

pid_t repos_run_hook(const char *hook_path, const char *conf, const char *path)
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
	/* every allowed push check answers with it: no printf */
	buf_reset(out);
	buf_puts(out, repo_dir);
	buf_puts(out, "/");
	buf_puts(out, name);
	buf_puts(out, ".git");
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
	static const char *const files[] = {"description", "info/exclude",
	                                    "hooks/README.sample"};
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
	buf_printf(&want,
	           "#!/bin/sh\n# installed by grantd: hand this push to "
	           "the node, which replicates it to every site\n%s\n",
	           hook);
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
	static const char *const parts[] = {"HEAD", "config", "objects", "refs",
	                                    "hooks"};
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

	git_repository_init_options_init(&io,
	                                 GIT_REPOSITORY_INIT_OPTIONS_VERSION);
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
static int settle(const char *repo_dir,
                  const char *path,
                  const char *name,
                  const char *fork_of,
                  const char *hook)
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

static int
rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT;
}

/* A new repository is made beside its place and renamed into it once
 * complete, so the path holds a whole repository, hook included, or
 * nothing; a crash leaves only NAME.git.grantd-new, which the next attempt
 * removes. */
static int create_new(const char *repo_dir,
                      const char *path,
                      const char *name,
                      const char *fork_of,
                      const char *hook)
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

int repos_create(const char *repo_dir,
                 const char *name,
                 const char *fork_of,
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

int repos_adopt(const char *repo_dir,
                const char *name,
                const char *fork_of,
                const char *hook)
{
	struct buf path = BUF_INIT;
	struct stat st;
	int rc;

	repos_path(&path, repo_dir, name);
	if (stat(path.p, &st) < 0 && errno == ENOENT) {
		log_debug("repository not made here yet repo=%s: gitolite "
		          "makes it",
		          name);
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

bool repos_present(const char *repo_dir, const char *name)
{
	struct buf path = BUF_INIT;
	struct stat st;
	bool yes;

	repos_path(&path, repo_dir, name);
	yes = lstat(path.p, &st) == 0;
	buf_free(&path);
	return yes;
}

void repos_aside_path(struct buf *out,
                      const char *repo_dir,
                      const char *name,
                      uint64_t hlc)
{
	time_t t = (time_t)(hlc_ms(hlc) / 1000);
	char stamp[32] = "0";
	struct tm tm;

	if (gmtime_r(&t, &tm))
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	buf_reset(out);
	buf_printf(out, "%s/%s.git.grantd-deleted-%s", repo_dir, name, stamp);
}

/* The committed record of name into *out (the caller's): 0, GD_ENOTFOUND,
 * GD_EPROTO (does not decode) or a store error. */
static int load_repo(struct store *s, const char *name, Grantd__V1__Repo **out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, NULL, CF_REPOS, name, strlen(name), &v);

	*out = NULL;
	if (rc == 0 && !(*out = grantd__v1__repo__unpack(NULL, v.len,
	                                                 (const uint8_t *)v.p)))
		rc = GD_EPROTO;
	buf_free(&v);
	return rc;
}

/* The directories above path (a/b.git lives in repo_dir/a), made. */
static int make_parents(const char *repo_dir, const char *path)
{
	struct buf d = BUF_INIT;
	int rc = 0;

	buf_puts(&d, path);
	for (char *p = d.p + strlen(repo_dir) + 1;
	     rc == 0 && (p = strchr(p, '/')); *p++ = '/') {
		*p = '\0';
		if (mkdir(d.p, 0755) < 0 && errno != EEXIST)
			rc = -1;
	}
	buf_free(&d);
	return rc;
}

/* OLD.git becomes NEW.git: a rename keeps every object, so nothing is
 * fetched again. */
static int rename_dir(const char *repo_dir, const char *from, const char *to)
{
	struct buf a = BUF_INIT, b = BUF_INIT;
	int rc = 0;

	repos_path(&a, repo_dir, from);
	repos_path(&b, repo_dir, to);
	if (make_parents(repo_dir, b.p) < 0 || rename(a.p, b.p) < 0) {
		log_error("cannot rename repository repo=%s to=%s: %s", from,
		          to, strerror(errno));
		rc = GD_EIO;
	} else {
		log_info("repository renamed repo=%s to=%s: its directory "
		         "moved, objects kept",
		         from, to);
	}
	buf_free(&a);
	buf_free(&b);
	return rc;
}

/* A deleted repository's directory, moved aside (never destroyed). */
static int move_aside(const char *repo_dir, const Grantd__V1__Repo *r)
{
	struct buf path = BUF_INIT, aside = BUF_INIT, base = BUF_INIT;
	struct stat st;
	int rc = 0;

	repos_path(&path, repo_dir, r->name);
	repos_aside_path(&base, repo_dir, r->name, r->hlc);
	buf_puts(&aside, base.p);
	for (int i = 2; lstat(aside.p, &st) == 0 && i < 1000; i++) {
		buf_reset(&aside);
		buf_printf(&aside, "%s-%d", base.p, i);
	}
	if (rename(path.p, aside.p) < 0) {
		log_error("cannot move deleted repository aside repo=%s "
		          "dir=%s: %s",
		          r->name, aside.p, strerror(errno));
		rc = GD_EIO;
	} else {
		log_info("repository deleted repo=%s: its directory moved "
		         "aside to dir=%s (remove it when no longer needed)",
		         r->name, aside.p);
	}
	buf_free(&path);
	buf_free(&aside);
	buf_free(&base);
	return rc;
}

/* The live repository renamed from old that has no directory yet, into
 * *out (the caller's; NULL: none). */
static int rename_target(struct store *s,
                         const char *repo_dir,
                         const char *old,
                         Grantd__V1__Repo **out)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc = 0;

	*out = NULL;
	store_iter_new(&it, s, NULL, CF_REPOS, "", 0);
	while (!*out && (rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Repo *r = grantd__v1__repo__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		if (r && !r->deleted && r->renamed_from &&
		    !strcmp(r->renamed_from, old) &&
		    !repos_present(repo_dir, r->name))
			*out = r;
		else if (r)
			grantd__v1__repo__free_unpacked(r, NULL);
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

/* A deleted repository still here: renamed to the repository a rename
 * made of it (then settled as that one), or moved aside. */
static int follow_deleted(struct store *s,
                          const char *repo_dir,
                          const char *hook,
                          const Grantd__V1__Repo *r)
{
	Grantd__V1__Repo *to = NULL;
	int rc;

	if (!repos_present(repo_dir, r->name))
		return 0;
	if ((rc = rename_target(s, repo_dir, r->name, &to)) < 0)
		return GD_EIO;
	if (!to)
		return move_aside(repo_dir, r);
	rc = rename_dir(repo_dir, r->name, to->name);
	if (rc == 0)
		rc = repos_create(repo_dir, to->name, to->fork_of, hook);
	grantd__v1__repo__free_unpacked(to, NULL);
	return rc;
}

/* A live repository: made, or settled when there; one renamed from a
 * repository whose record is deleted takes its directory.  *later when
 * the rename's deletion of the old one has not come yet (its record is
 * live and older than this one). */
static int follow_live(struct store *s,
                       const char *repo_dir,
                       const char *hook,
                       const Grantd__V1__Repo *r,
                       bool *later)
{
	const char *from = r->renamed_from;
	char norm[NAME_REPO_MAX + 1];

	if (from && *from && name_repo_norm(norm, sizeof(norm), from) == 0 &&
	    !strcmp(norm, from) && !repos_present(repo_dir, r->name) &&
	    repos_present(repo_dir, from)) {
		Grantd__V1__Repo *o = NULL;
		int rc = load_repo(s, from, &o);
		bool gone = rc == 0 && o->deleted;
		*later = rc == 0 && !o->deleted && o->hlc < r->hlc;
		if (o)
			grantd__v1__repo__free_unpacked(o, NULL);
		if (*later)
			return 0;
		if (gone && rename_dir(repo_dir, from, r->name) < 0)
			return GD_EIO;
	}
	return repos_create(repo_dir, r->name, r->fork_of, hook);
}

int repos_follow(struct store *s,
                 const char *repo_dir,
                 const char *hook,
                 bool make,
                 struct buf *names,
                 struct buf *failed)
{
	int rc = 0;

	for (size_t off = 0; off < names->len;
	     off += strlen(names->p + off) + 1) {
		const char *name = names->p + off;
		Grantd__V1__Repo *r = NULL;
		bool later = false;
		if (seen(names->p, off, name))
			continue;
		int grc = load_repo(s, name, &r);
		if (grc == GD_ENOTFOUND || grc == GD_EPROTO)
			continue; /* its batch was not committed */
		if (grc == 0 && !make)
			grc = r->deleted ? 0
			                 : repos_adopt(repo_dir, name,
			                               r->fork_of, hook);
		else if (grc == 0 && r->deleted)
			grc = follow_deleted(s, repo_dir, hook, r);
		else if (grc == 0)
			grc = follow_live(s, repo_dir, hook, r, &later);
		if ((grc < 0 && grc != GD_ENOTFOUND) || later) {
			if (!seen(failed->p, failed->len, name))
				buf_add(failed, name, strlen(name) + 1);
			if (!later)
				rc = GD_EIO;
		}
		if (r)
			grantd__v1__repo__free_unpacked(r, NULL);
	}
	buf_reset(names);
	return rc;
}

int repos_follow_deleted(struct store *s,
                         const char *repo_dir,
                         const char *hook)
{
	struct buf names = BUF_INIT, failed = BUF_INIT, v = BUF_INIT;
	struct store_iter *it;
	const char *key;
	size_t klen;
	int rc;

	store_iter_new(&it, s, NULL, CF_REPOS, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0) {
		Grantd__V1__Repo *r = grantd__v1__repo__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		if (r && r->deleted && repos_present(repo_dir, r->name))
			buf_add(&names, r->name, strlen(r->name) + 1);
		if (r)
			grantd__v1__repo__free_unpacked(r, NULL);
	}
	store_iter_free(&it);
	rc = repos_follow(s, repo_dir, hook, true, &names, &failed);
	buf_free(&names);
	buf_free(&failed);
	buf_free(&v);
	return rc;
}

int repos_refs(const char *repo_dir,
               const char *name,
               struct buf *refs,
               struct buf *head,
               struct buf *why)
{
	struct buf path = BUF_INIT;
	git_repository *repo = NULL;
	git_reference_iterator *it = NULL;
	git_reference *ref = NULL;
	char hex[GIT_OID_HEXSZ + 1];
	struct stat st;
	int rc = 0, e;

	buf_reset(refs);
	buf_reset(head);
	repos_path(&path, repo_dir, name);
	if (lstat(path.p, &st) < 0) {
		rc = errno == ENOENT ? GD_ENOTFOUND : GD_EIO;
		if (rc == GD_EIO)
			buf_printf(why, "%s", strerror(errno));
		goto done;
	}
	if (!S_ISDIR(st.st_mode)) {
		buf_puts(why, "not a directory");
		rc = GD_EINVAL;
		goto done;
	}
	if (git_repository_open_bare(&repo, path.p) < 0) {
		buf_printf(why, "%s", gitproc_why());
		rc = GD_EINVAL;
		goto done;
	}
	if (git_reference_lookup(&ref, repo, "HEAD") == 0 &&
	    git_reference_type(ref) == GIT_REFERENCE_SYMBOLIC)
		buf_puts(head, git_reference_symbolic_target(ref));
	git_reference_free(ref);
	if (git_reference_iterator_new(&it, repo) < 0) {
		buf_printf(why, "%s", gitproc_why());
		rc = GD_EIO;
		goto done;
	}
	while ((e = git_reference_next(&ref, it)) == 0) {
		if (git_reference_type(ref) == GIT_REFERENCE_DIRECT) {
			git_oid_tostr(hex, sizeof(hex),
			              git_reference_target(ref));
			buf_add(refs, git_reference_name(ref),
			        strlen(git_reference_name(ref)) + 1);
			buf_add(refs, hex, strlen(hex) + 1);
		}
		git_reference_free(ref);
	}
	if (e != GIT_ITEROVER) {
		buf_printf(why, "%s", gitproc_why());
		rc = GD_EIO;
	}
done:
	git_reference_iterator_free(it);
	git_repository_free(repo);
	buf_free(&path);
	return rc;
}

/* Hosted repositories and the git programs the node runs read no global,
 * XDG or system configuration: they must not depend on the service
 * account's own (nor fail when its HOME is unreadable, as libgit2 does:
 * "failed to stat '/root/.gitconfig'").  Before any thread. */
int repos_git_isolate(void)
{
	static const int levels[] = {
	        GIT_CONFIG_LEVEL_PROGRAMDATA, GIT_CONFIG_LEVEL_SYSTEM,
	        GIT_CONFIG_LEVEL_XDG, GIT_CONFIG_LEVEL_GLOBAL};

	for (size_t i = 0; i < GD_ARRAY_SIZE(levels); i++)
		if (git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, levels[i], "") <
		    0)
			return GD_EIO;
	if (setenv("GIT_CONFIG_NOSYSTEM", "1", 1) < 0 ||
	    setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1) < 0 ||
	    setenv("GIT_ATTR_NOSYSTEM", "1", 1) < 0)
		return GD_EIO;
	return 0;
}
