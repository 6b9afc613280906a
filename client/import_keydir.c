/*
 * import_keydir.c: grantctl import gitolite-keydir DIR: users and their
 * SSH keys from a gitolite keydir (alice.pub, alice@laptop.pub, in any
 * subdirectory), named as gitolite names them (keyfile_gitolite_user).
 *
 * Like gitolite, a file holding more than one key gives none (gitolite
 * ignores it; carrying it over would let in a key gitolite never did): it
 * is named and skipped.  The node refuses a user one of whose keys another
 * user holds, naming that user, and adds nothing of it.
 */
#include <errno.h>
#include <fts.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "import.h"
#include "keyfile.h"
#include "names.h"
#include "xalloc.h"
#include "banned.h"

struct kfile {
	char user[NAME_USER_MAX + 1];
	char *path;
};

struct klist {
	struct kfile *v;
	size_t n, cap;
};

static void add_file(struct klist *l, const char *path)
{
	GD_GROW(l->v, l->cap, l->n + 1);
	memset(&l->v[l->n], 0, sizeof(l->v[0]));
	/* a name too long or not ours is skipped later, named */
	if (keyfile_gitolite_user(l->v[l->n].user, sizeof(l->v[l->n].user),
	                          path) < 0)
		l->v[l->n].user[0] = '\0';
	l->v[l->n++].path = xstrdup(path);
}

/* Every *.pub file under dir into *l; an unreadable subdirectory is
 * skipped, named.  0, or GD_EXIT_USAGE when dir itself cannot be read. */
static int walk_dir(struct import_ctx *ic, struct klist *l, const char *dir)
{
	char *roots[] = {(char *)dir, NULL};
	FTS *fts = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
	FTSENT *e;
	int rc = 0;

	if (!fts)
		goto bad;
	while (rc == 0 && (e = fts_read(fts))) {
		size_t n = e->fts_pathlen;
		if (e->fts_info == FTS_F && n > 4 &&
		    !strcmp(e->fts_path + n - 4, ".pub")) {
			add_file(l, e->fts_path);
		} else if (e->fts_info == FTS_DNR || e->fts_info == FTS_ERR ||
		           e->fts_info == FTS_NS) {
			errno = e->fts_errno;
			if (e->fts_level == 0)
				rc = GD_EXIT_USAGE;
			else
				import_skip(ic, e->fts_path, strerror(errno),
				            NULL);
		}
	}
	fts_close(fts);
	if (rc == 0)
		return 0;
bad:
	fprintf(stderr, "%s: cannot read %s: %s (want gitolite's keydir)\n",
	        ic->prog, dir, strerror(errno));
	return GD_EXIT_USAGE;
}

static int by_user(const void *a, const void *b)
{
	const struct kfile *x = a, *y = b;
	int c = strcmp(x->user, y->user);
	return c ? c : strcmp(x->path, y->path);
}

/* The keys of the cnt files at f (one user's) as one request. */
static int one_user(struct import_ctx *ic, const struct kfile *f, size_t cnt)
{
	char **args = xcalloc(2 * cnt + 2, sizeof(*args));
	size_t n = 0, skipped = 0;
	int rc = 0;

	args[n++] = xstrdup(f[0].user);
	for (size_t i = 0; i < cnt; i++) {
		const char *why = NULL;
		char *keys = NULL;
		size_t nk = 0;
		rc = keyfile_load(&keys, &nk, f[i].path, &why);
		if (rc == GD_EIO)
			why = strerror(errno);
		else if (rc == 0 && nk > 1)
			why = "more than one key in it (gitolite takes none "
			      "from such a file: one key a file, "
			      "user@host.pub)";
		if (why) {
			import_skip(ic, f[i].path, why, NULL);
			skipped++;
		} else {
			args[n++] = xstrdup("--key");
			args[n++] = keys;
			keys = NULL;
		}
		free(keys);
	}
	if (skipped == cnt) {
		for (size_t i = 0; i < n; i++)
			free(args[i]);
		free(args);
		return 0;
	}
	rc = import_user(ic, args, n);
	free(args);
	return rc;
}

int import_keydir(struct import_ctx *ic, const char *dir)
{
	struct klist l = {0};
	size_t i = 0;
	int rc = walk_dir(ic, &l, dir);

	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), by_user);
	while (rc == 0 && i < l.n) {
		size_t j = i;
		while (j < l.n && !strcmp(l.v[j].user, l.v[i].user))
			j++;
		if (!name_user_ok(l.v[i].user)) {
			for (size_t k = i; k < j; k++)
				import_skip(ic, l.v[k].path,
				            "not a grantd user name "
				            "([a-z_][a-z0-9_.-]*)",
				            NULL);
		} else {
			rc = one_user(ic, &l.v[i], j - i);
		}
		i = j;
	}
	for (size_t k = 0; k < l.n; k++)
		free(l.v[k].path);
	free(l.v);
	return rc;
}
