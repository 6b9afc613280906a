/*
 * packbuild.c: a small pack built in-process (packbuild.h): a bounded
 * walk of the new commits from the wants down to the haves, the objects
 * of each new commit's tree that its parents' trees lack (compared path
 * by path, as git's sparse pack-objects does), libgit2's packbuilder to
 * write them.  Any thread.
 *
 * Why a commit's objects that its parents lack are enough: a parent is
 * either new (its own objects are in the pack, or in its parents', down
 * to a have) or a have, whose whole tree the asker has.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "packbuild.h"
#include "xalloc.h"
#include "banned.h"

#define TAG_CHAIN_MAX 8 /* a tag of a tag of ... a commit */

struct walk {
	git_repository *repo;
	git_odb *odb;
	git_packbuilder *pb;
	git_oid *haves; /* and the commits tag haves peel to */
	size_t nhaves;
	git_oid commits[PACKBUILD_COMMITS_MAX]; /* the new ones, found */
	size_t ncommits;
	size_t bytes; /* of the objects inserted, uncompressed */
};

static bool in(const git_oid *set, size_t n, const git_oid *id)
{
	for (size_t i = 0; i < n; i++)
		if (git_oid_equal(&set[i], id))
			return true;
	return false;
}

/* Put id in the pack, counting its size.  0, GD_ETOOBIG or GD_EIO. */
static int add(struct walk *w, const git_oid *id, const char *name)
{
	size_t len;
	git_object_t type;

	if (git_odb_read_header(&len, &type, w->odb, id) < 0)
		return GD_EIO;
	w->bytes += len;
	if (w->bytes > PACKBUILD_BYTES_MAX)
		return GD_ETOOBIG;
	if (git_packbuilder_insert(w->pb, id, name) < 0)
		return GD_EIO;
	return git_packbuilder_object_count(w->pb) > PACKBUILD_OBJECTS_MAX
	               ? GD_ETOOBIG
	               : 0;
}

/* A commit to walk from, unless it is a have or already found. */
static int queue(struct walk *w, const git_oid *id)
{
	if (in(w->haves, w->nhaves, id) || in(w->commits, w->ncommits, id))
		return 0;
	if (w->ncommits == PACKBUILD_COMMITS_MAX)
		return GD_ETOOBIG;
	git_oid_cpy(&w->commits[w->ncommits++], id);
	return 0;
}

/* A want: a commit is queued; a tag goes in the pack, and what it tags
 * is looked at in turn. */
static int want(struct walk *w, const git_oid *id)
{
	git_oid at = *id;

	for (int i = 0; i < TAG_CHAIN_MAX; i++) {
		git_object *o;
		int rc;
		if (git_object_lookup(&o, w->repo, &at, GIT_OBJECT_ANY) < 0)
			return GD_EIO;
		switch (git_object_type(o)) {
		case GIT_OBJECT_COMMIT:
			rc = queue(w, &at);
			break;
		case GIT_OBJECT_TAG:
			rc = add(w, &at, NULL);
			git_oid_cpy(&at, git_tag_target_id((git_tag *)o));
			if (rc == 0 && !in(w->haves, w->nhaves, &at)) {
				git_object_free(o);
				continue;
			}
			break;
		default:
			rc = GD_ETOOBIG; /* a tree or blob tagged: rare */
		}
		git_object_free(o);
		return rc;
	}
	return GD_ETOOBIG;
}

/* The haves, and the commit each tag among them peels to (a tip under
 * refs/tags/ is mostly a tag): what the walk stops at. */
static void haves_peeled(struct walk *w, const git_oid *haves, size_t n)
{
	w->haves = xcalloc(2 * n + 1, sizeof(*w->haves));
	for (size_t i = 0; i < n; i++) {
		size_t len;
		git_object_t type;
		git_object *o, *c;
		git_oid_cpy(&w->haves[w->nhaves++], &haves[i]);
		if (git_odb_read_header(&len, &type, w->odb, &haves[i]) < 0 ||
		    type != GIT_OBJECT_TAG ||
		    git_object_lookup(&o, w->repo, &haves[i], type) < 0)
			continue;
		if (git_object_peel(&c, o, GIT_OBJECT_COMMIT) == 0) {
			git_oid_cpy(&w->haves[w->nhaves++], git_object_id(c));
			git_object_free(c);
		}
		git_object_free(o);
	}
}

/* The new commits: from the wants down to the haves, breadth first,
 * commits[] the queue. */
static int walk_commits(struct walk *w)
{
	for (size_t i = 0; i < w->ncommits; i++) {
		git_commit *c;
		int rc = 0;
		if (git_commit_lookup(&c, w->repo, &w->commits[i]) < 0)
			return GD_EIO;
		for (unsigned k = 0; rc == 0 && k < git_commit_parentcount(c);
		     k++)
			rc = queue(w, git_commit_parent_id(c, k));
		git_commit_free(c);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int tree_new(struct walk *w,
                    const git_tree *t,
                    const char *name,
                    git_tree *const *olds,
                    size_t nold);

/* Entry e of a new tree, which olds (the trees at the same path in the
 * parents, NULL where none) may hold already. */
static int entry_new(struct walk *w,
                     const git_tree_entry *e,
                     git_tree *const *olds,
                     size_t nold)
{
	const char *name = git_tree_entry_name(e);
	const git_oid *id = git_tree_entry_id(e);
	git_tree **subs = xcalloc(nold ? nold : 1, sizeof(*subs));
	git_tree *t = NULL;
	int rc = 0;

	for (size_t k = 0; rc == 0 && k < nold; k++) {
		const git_tree_entry *oe =
		        olds[k] ? git_tree_entry_byname(olds[k], name) : NULL;
		if (!oe)
			continue;
		if (git_oid_equal(git_tree_entry_id(oe), id))
			goto out; /* the parent's: the asker has it */
		if (git_tree_entry_type(oe) == GIT_OBJECT_TREE &&
		    git_tree_lookup(&subs[k], w->repo, git_tree_entry_id(oe)))
			rc = GD_EIO;
	}
	if (rc < 0)
		goto out;
	if (git_tree_entry_type(e) == GIT_OBJECT_BLOB)
		rc = add(w, id, name);
	else if (git_tree_entry_type(e) != GIT_OBJECT_TREE)
		rc = 0; /* a submodule's commit: not in this repository */
	else if (git_tree_lookup(&t, w->repo, id) < 0)
		rc = GD_EIO;
	else
		rc = tree_new(w, t, name, subs, nold);
out:
	for (size_t k = 0; k < nold; k++)
		git_tree_free(subs[k]);
	free(subs);
	git_tree_free(t);
	return rc;
}

/* Tree t, new, and what it holds that the olds lack. */
static int tree_new(struct walk *w,
                    const git_tree *t,
                    const char *name,
                    git_tree *const *olds,
                    size_t nold)
{
	int rc = add(w, git_tree_id(t), name);

	for (size_t i = 0; rc == 0 && i < git_tree_entrycount(t); i++)
		rc = entry_new(w, git_tree_entry_byindex(t, i), olds, nold);
	return rc;
}

/* New commit id and the objects of its tree its parents lack. */
static int commit_new(struct walk *w, const git_oid *id)
{
	git_commit *c = NULL, *p;
	git_tree *tree = NULL, **olds = NULL;
	unsigned n = 0;
	bool same = false;
	int rc;

	if ((rc = add(w, id, NULL)) < 0)
		return rc;
	if (git_commit_lookup(&c, w->repo, id) < 0 ||
	    git_commit_tree(&tree, c) < 0) {
		rc = GD_EIO;
		goto out;
	}
	n = git_commit_parentcount(c);
	olds = xcalloc(n ? n : 1, sizeof(*olds));
	for (unsigned k = 0; rc == 0 && k < n; k++) {
		if (git_commit_parent(&p, c, k) < 0) {
			rc = GD_EIO;
			break;
		}
		if (git_commit_tree(&olds[k], p) < 0)
			rc = GD_EIO;
		else
			same |= git_oid_equal(git_tree_id(olds[k]),
			                      git_tree_id(tree));
		git_commit_free(p);
	}
	if (rc == 0 && !same)
		rc = tree_new(w, tree, NULL, olds, n);
out:
	for (unsigned k = 0; olds && k < n; k++)
		git_tree_free(olds[k]);
	free(olds);
	git_tree_free(tree);
	git_commit_free(c);
	return rc;
}

int packbuild_small(struct buf *out,
                    git_repository *repo,
                    const git_oid *wants,
                    size_t nwants,
                    const git_oid *haves,
                    size_t nhaves)
{
	struct walk *w = xcalloc(1, sizeof(*w));
	git_buf pack = {0};
	int rc = 0;

	buf_reset(out);
	w->repo = repo;
	if (git_repository_odb(&w->odb, repo) < 0 ||
	    git_packbuilder_new(&w->pb, repo) < 0) {
		rc = GD_EIO;
		goto out;
	}
	haves_peeled(w, haves, nhaves);
	for (size_t i = 0; rc == 0 && i < nwants; i++)
		rc = want(w, &wants[i]);
	if (rc == 0)
		rc = walk_commits(w);
	for (size_t i = 0; rc == 0 && i < w->ncommits; i++)
		rc = commit_new(w, &w->commits[i]);
	if (rc == 0 && git_packbuilder_write_buf(&pack, w->pb) < 0)
		rc = GD_EIO;
	if (rc == 0)
		buf_add(out, pack.ptr, pack.size);
out:
	git_buf_dispose(&pack);
	git_packbuilder_free(w->pb);
	git_odb_free(w->odb);
	free(w->haves);
	free(w);
	return rc;
}
