/*
 * cmd_repoadmin.c: what moves a repository's directory at every site
 * (cmd_repo_int.h): `repo add` of a bare repository already in repo_dir
 * (adopted: its refs are recorded in the batch that makes its record, so
 * every site fetches them), `repo del` and `repo rename`.
 *
 * Each makes its records in one batch; the directories follow after the
 * commit, at every site alike (repos_follow: a deleted repository is
 * moved aside, never destroyed; a renamed one keeps its objects).  The
 * refs of a deleted repository are recorded deleted too, so a later
 * `repo add` of the name starts empty and no site waits for objects that
 * are gone.  Beside gitolite, gitolite.conf owns the list of repositories:
 * del and rename are refused there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "cmd_repo_int.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "ops.h"
#include "policy.h"
#include "records.h"
#include "repos.h"
#include "xalloc.h"
#include "banned.h"

#define REFS_PER_OP 1024 /* ref changes per RefUpdate: well under 1 MB */

static const char zeros[] = "0000000000000000000000000000000000000000";

/* ---- adopting a repository that is there ------------------------------- */

int cmd_repo_found(struct cmd_ctx *x,
                   struct req *r,
                   const char *name,
                   struct buf *refs,
                   size_t *n,
                   struct buf *head)
{
	struct buf all = BUF_INIT, why = BUF_INIT, path = BUF_INIT;
	int rc;

	*n = 0;
	buf_reset(refs);
	repos_path(&path, x->p.cfg->repo_dir, name);
	rc = repos_refs(x->p.cfg->repo_dir, name, &all, head, &why);
	if (rc == GD_ENOTFOUND) {
		rc = 0;
		goto done;
	}
	if (rc < 0) {
		cmd_refuse(r,
		           "%s exists and is not a bare git repository "
		           "grantd can read (%s): move it away or choose "
		           "another name",
		           path.p, buf_str(&why));
		rc = GD_EDENIED;
		goto done;
	}
	for (size_t off = 0; off < all.len;) {
		const char *ref = all.p + off, *hex = ref + strlen(ref) + 1;
		off = (size_t)(hex - all.p) + strlen(hex) + 1;
		if (!ops_ref_name_ok(ref)) {
			log_warn("ref not replicated repo=%s ref=%.300s: not "
			         "a name grantd replicates",
			         name, ref);
			continue;
		}
		buf_add(refs, ref, strlen(ref) + 1);
		buf_add(refs, hex, strlen(hex) + 1);
		(*n)++;
	}
	rc = 1;
done:
	buf_free(&all);
	buf_free(&why);
	buf_free(&path);
	return rc;
}

int cmd_repo_refs_emit(struct cmd_ctx *x,
                       const char *repo,
                       const struct buf *pairs,
                       bool del)
{
	Grantd__V1__RefChange *ch = xcalloc(REFS_PER_OP, sizeof(*ch));
	Grantd__V1__RefChange **chp = xcalloc(REFS_PER_OP, sizeof(*chp));
	Grantd__V1__RefUpdate u = GRANTD__V1__REF_UPDATE__INIT;
	size_t k = 0, off = 0;
	int rc = 0;

	u.repo = (char *)repo;
	u.changes = chp;
	while (rc == 0 && off < pairs->len) {
		char *ref = pairs->p + off, *hex = ref + strlen(ref) + 1;
		off = (size_t)(hex - pairs->p) + strlen(hex) + 1;
		grantd__v1__ref_change__init(&ch[k]);
		ch[k].ref = ref;
		ch[k].old = del ? hex : (char *)zeros;
		ch[k].new_ = del ? (char *)zeros : hex;
		chp[k] = &ch[k];
		if (++k == REFS_PER_OP || off >= pairs->len) {
			u.n_changes = k;
			rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_REFS, &u);
			k = 0;
		}
	}
	free(ch);
	free(chp);
	return rc;
}

/* ---- what del and rename check ------------------------------------------ */

/* The live refs recorded for repo, "ref \0 target \0" each, *n of them. */
static int
live_refs(struct cmd_ctx *x, const char *repo, struct buf *out, size_t *n)
{
	struct buf prefix = BUF_INIT, v = BUF_INIT;
	struct store_iter *it;
	const char *key;
	size_t klen;
	int rc;

	*n = 0;
	buf_add(&prefix, repo, strlen(repo) + 1);
	store_iter_new(&it, x->p.store, x->p.batch, CF_REFS, prefix.p,
	               prefix.len);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Ref *f = grantd__v1__ref__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		if (f && f->repo && !strcmp(f->repo, repo) && f->ref &&
		    ops_ref_name_ok(f->ref) && f->target &&
		    ops_oid_ok(f->target) && strcmp(f->target, zeros)) {
			buf_add(out, f->ref, strlen(f->ref) + 1);
			buf_add(out, f->target, strlen(f->target) + 1);
			(*n)++;
		}
		if (f)
			grantd__v1__ref__free_unpacked(f, NULL);
	}
	store_iter_free(&it);
	buf_free(&prefix);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

/* The live repositories that fork name ("a, b"), into out. */
static int forks_of(struct cmd_ctx *x, const char *name, struct buf *out)
{
	struct buf v = BUF_INIT;
	struct store_iter *it;
	const char *key;
	size_t klen;
	int rc;

	store_iter_new(&it, x->p.store, x->p.batch, CF_REPOS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Repo *rp = grantd__v1__repo__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		if (rp && !rp->deleted && rp->fork_of &&
		    !strcmp(rp->fork_of, name))
			buf_printf(out, "%s%s", out->len ? ", " : "", rp->name);
		if (rp)
			grantd__v1__repo__free_unpacked(rp, NULL);
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

/* Refused beside gitolite (1, r answered), or 0. */
static int gitolite_owns(struct cmd_ctx *x, struct req *r, const char *what)
{
	if (!x->p.cfg->gitolite_home)
		return 0;
	cmd_refuse(r,
	           "cannot %s a repository beside gitolite: gitolite.conf "
	           "owns the list of repositories (change it there)",
	           what);
	return 1;
}

/* The checks del and rename share: not beside gitolite, a live record
 * (into *out), no forks.  0 when they pass; 1 when r was refused. */
static int movable(struct cmd_ctx *x,
                   struct req *r,
                   const char *name,
                   const char *what,
                   Grantd__V1__Repo **out)
{
	struct buf forks = BUF_INIT;
	int rc;

	*out = NULL;
	if (gitolite_owns(x, r, what))
		return 1;
	rc = policy_repo_load(out, &x->p, name);
	if (rc == GD_ENOTFOUND) {
		cmd_refuse(r, "no such repository '%s'", name);
		return 1;
	}
	if (rc < 0)
		return rc;
	if ((rc = forks_of(x, name, &forks)) == 0 && forks.len) {
		cmd_refuse(r,
		           "cannot %s '%s': it has forks, whose objects "
		           "live in it through alternates: %s (delete them "
		           "first)",
		           what, name, forks.p);
		rc = 1;
	}
	buf_free(&forks);
	if (rc != 0) {
		grantd__v1__repo__free_unpacked(*out, NULL);
		*out = NULL;
	}
	return rc;
}

/* The record of old, deleted; its stamp into *hlc. */
static int
emit_deleted(struct cmd_ctx *x, const Grantd__V1__Repo *old, uint64_t *hlc)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Repo rp = *old;
	int rc;

	rp.has_hlc = 0, rp.hlc = 0;
	rp.origin = NULL;
	rp.renamed_from = NULL;
	SET(rp, deleted, 1);
	op.body_case = GRANTD__V1__OP__BODY_REPO;
	op.repo = &rp;
	rc = cmd_emit(x, &op);
	*hlc = op.hlc;
	return rc;
}

/* ---- repo del, repo rename ---------------------------------------------- */

/* args: NAME.  The record deleted and every ref of it, in one batch. */
int cmd_repo_del(struct cmd_ctx *x, struct req *r)
{
	char name[NAME_REPO_MAX + 1];
	struct buf refs = BUF_INIT, aside = BUF_INIT;
	Grantd__V1__Repo *old = NULL;
	uint64_t hlc = 0;
	size_t n = 0;
	int rc;

	if (cmd_repo_arg(r, r->rq->args[0], name, sizeof(name)) < 0)
		return 0;
	if ((rc = movable(x, r, name, "delete", &old)) != 0)
		return rc < 0 ? rc : 0;
	if ((rc = live_refs(x, name, &refs, &n)) < 0 ||
	    (rc = emit_deleted(x, old, &hlc)) < 0 ||
	    (rc = cmd_repo_refs_emit(x, name, &refs, true)) < 0)
		goto done;
	repos_aside_path(&aside, "", name, hlc);
	buf_printf(&r->out,
	           "deleted repository %s (%zu ref%s dropped); at "
	           "every site its directory is moved aside to %s\n",
	           name, n, n == 1 ? "" : "s", aside.p + 1);
	log_info("repository delete recorded repo=%s refs=%zu", name, n);
done:
	grantd__v1__repo__free_unpacked(old, NULL);
	buf_free(&refs);
	buf_free(&aside);
	return rc;
}

/* args: OLD NEW.  NEW with OLD's settings and refs, OLD deleted as by
 * repo del, in one batch; NEW's record names OLD (renamed_from), so every
 * site renames the directory instead of making NEW empty. */
int cmd_repo_rename(struct cmd_ctx *x, struct req *r)
{
	char from[NAME_REPO_MAX + 1], to[NAME_REPO_MAX + 1];
	Grantd__V1__Repo *old = NULL, *taken = NULL, rp;
	struct buf refs = BUF_INIT;
	uint64_t hlc;
	size_t n = 0;
	int rc;

	if (cmd_repo_arg(r, r->rq->args[0], from, sizeof(from)) < 0 ||
	    cmd_repo_arg(r, r->rq->args[1], to, sizeof(to)) < 0)
		return 0;
	if (!strcmp(from, to))
		return cmd_bad(r, "'%s' is the repository's name already",
		               from);
	if ((rc = movable(x, r, from, "rename", &old)) != 0)
		return rc < 0 ? rc : 0;
	rc = policy_repo_load(&taken, &x->p, to);
	if (rc == 0) {
		cmd_refuse(r, "repository '%s' already exists", to);
		goto done;
	}
	if (rc != GD_ENOTFOUND)
		goto done;
	rc = 0;
	if (repos_present(x->p.cfg->repo_dir, to)) {
		cmd_refuse(r,
		           "%s/%s.git exists (not a repository of "
		           "grantd's): move it away or choose another name",
		           x->p.cfg->repo_dir, to);
		goto done;
	}
	rp = *old;
	rp.name = to;
	rp.renamed_from = from;
	rp.has_hlc = 0, rp.hlc = 0;
	rp.origin = NULL;
	rp.has_deleted = 0, rp.deleted = 0;
	if ((rc = live_refs(x, from, &refs, &n)) < 0 ||
	    (rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_REPO, &rp)) < 0 ||
	    (rc = cmd_repo_refs_emit(x, to, &refs, false)) < 0 ||
	    (rc = emit_deleted(x, old, &hlc)) < 0 ||
	    (rc = cmd_repo_refs_emit(x, from, &refs, true)) < 0)
		goto done;
	buf_printf(&r->out, "renamed repository %s to %s (%zu ref%s)\n", from,
	           to, n, n == 1 ? "" : "s");
	log_info("repository rename recorded repo=%s to=%s refs=%zu", from, to,
	         n);
done:
	if (taken)
		grantd__v1__repo__free_unpacked(taken, NULL);
	grantd__v1__repo__free_unpacked(old, NULL);
	buf_free(&refs);
	return rc;
}
