/*
 * connect.c: the check that a fetched pack connects, in-process
 * (connect.h): each object of the pack read (but blobs, which link to
 * nothing), its links looked up.  Any thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connect.h"
#include "err.h"
#include "xalloc.h"
#include "banned.h"

struct ids {
	git_oid *v;
	size_t n, cap;
};

static int collect(const git_oid *id, void *payload)
{
	struct ids *ids = payload;

	GD_GROW(ids->v, ids->cap, ids->n + 1);
	git_oid_cpy(&ids->v[ids->n++], id);
	return 0;
}

/* from links to id: there, or GD_EPROTO saying which lacks what. */
static int link_ok(git_odb *all,
                   const git_oid *from,
                   const char *kind,
                   const git_oid *id,
                   char *why,
                   size_t n)
{
	char a[OID_HEX + 1], b[OID_HEX + 1];

	if (git_odb_exists(all, id))
		return 0;
	git_oid_tostr(a, sizeof(a), from);
	git_oid_tostr(b, sizeof(b), id);
	snprintf(why, n, "%s %s links to %s, in neither pack nor repository",
	         kind, a, b);
	return GD_EPROTO;
}

/* The links of object o (of the pack) all there. */
static int links_ok(git_odb *all, git_object *o, char *why, size_t n)
{
	const git_oid *id = git_object_id(o);
	int rc = 0;

	switch (git_object_type(o)) {
	case GIT_OBJECT_COMMIT: {
		const git_commit *c = (const git_commit *)o;
		rc = link_ok(all, id, "commit", git_commit_tree_id(c), why, n);
		for (unsigned k = 0; rc == 0 && k < git_commit_parentcount(c);
		     k++)
			rc = link_ok(all, id, "commit",
			             git_commit_parent_id(c, k), why, n);
		break;
	}
	case GIT_OBJECT_TREE: {
		const git_tree *t = (const git_tree *)o;
		for (size_t k = 0; rc == 0 && k < git_tree_entrycount(t); k++) {
			const git_tree_entry *e = git_tree_entry_byindex(t, k);
			/* a submodule's commit lives in another repository */
			if (git_tree_entry_filemode(e) != GIT_FILEMODE_COMMIT)
				rc = link_ok(all, id, "tree",
				             git_tree_entry_id(e), why, n);
		}
		break;
	}
	case GIT_OBJECT_TAG:
		rc = link_ok(all, id, "tag",
		             git_tag_target_id((const git_tag *)o), why, n);
		break;
	default:
		break;
	}
	return rc;
}

int connect_pack(git_odb *all,
                 git_odb_backend *q,
                 const char (*wants)[OID_HEX + 1],
                 size_t nwants,
                 char *why,
                 size_t n)
{
	struct ids ids = {0};
	git_repository *repo = NULL;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < nwants; i++) {
		git_oid id;
		if (git_oid_fromstr(&id, wants[i]) < 0 ||
		    !git_odb_exists(all, &id)) {
			snprintf(why, n,
			         "tip %s in neither pack nor repository",
			         wants[i]);
			rc = GD_EPROTO;
		}
	}
	if (rc == 0 && (q->foreach (q, collect, &ids) < 0 ||
	                git_repository_wrap_odb(&repo, all) < 0)) {
		snprintf(why, n, "%s", gitproc_why());
		rc = GD_EIO;
	}
	for (size_t i = 0; rc == 0 && i < ids.n; i++) {
		size_t len;
		git_object_t type;
		git_object *o;
		if (git_odb_read_header(&len, &type, all, &ids.v[i]) < 0 ||
		    (type != GIT_OBJECT_BLOB &&
		     git_object_lookup(&o, repo, &ids.v[i], type) < 0)) {
			snprintf(why, n, "%s", gitproc_why());
			rc = GD_EIO;
		} else if (type != GIT_OBJECT_BLOB) {
			rc = links_ok(all, o, why, n);
			git_object_free(o);
		}
	}
	git_repository_free(repo);
	free(ids.v);
	return rc;
}
