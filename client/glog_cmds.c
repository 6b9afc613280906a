/*
 * glog_cmds.c: grant-log's commands after the checkpoint (glog_cmds.h).
 *
 * verify builds the tree from every entry bundle (glog_tree) and compares
 * each tile the entries make with the server's, then the root with the
 * checkpoint's; prove and tip read hashes only through
 * tlog_tile_read_hashes, so an entry is used only once its leaf hash is
 * one the checked checkpoint commits to.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "glog_cmds.h"
#include "xalloc.h"
#include "banned.h"

static const char prog[] = GLOG_CMDS_PROG;

int glog_cmds_usage(const char *what, const char *arg)
{
	fprintf(stderr, "%s: %s%s%s%s (see %s --help)\n", prog, what,
	        arg ? " '" : "", arg ? arg : "", arg ? "'" : "", prog);
	return GD_EXIT_USAGE;
}

int glog_cmds_fail(struct glog_run *r, int rc, const char *what)
{
	if (rc == GD_ECRYPTO && r->h.why.len) {
		fprintf(stderr, "%s: %s: %s\n", prog, what, r->h.why.p);
		return GD_EXIT_REFUSED;
	}
	if (rc == GD_ECRYPTO) {
		fprintf(stderr,
		        "%s: %s: the tiles under %s do not match the "
		        "checkpoint of '%s' (size %lld)\n",
		        prog, what, r->h.base, r->ck.c.origin,
		        (long long)r->ck.c.size);
		return GD_EXIT_REFUSED;
	}
	fprintf(stderr, "%s: cannot read the log: %s\n", prog,
	        r->h.why.len ? r->h.why.p : gd_strerror(rc));
	return GD_EXIT_UNREACHABLE;
}

void glog_cmds_b64(char out[GLOG_CMDS_B64_LEN], const struct tlog_hash *h)
{
	_Static_assert(
	        GLOG_CMDS_B64_LEN ==
	                sodium_base64_ENCODED_LEN(
	                        TLOG_HASH_LEN, sodium_base64_VARIANT_ORIGINAL),
	        "base64 of a hash");
	sodium_bin2base64(out, GLOG_CMDS_B64_LEN, h->b, TLOG_HASH_LEN,
	                  sodium_base64_VARIANT_ORIGINAL);
}

/* The arguments of r->cmd, checked before anything is fetched. */
int glog_cmds_args(struct glog_run *r)
{
	int want = !strcmp(r->cmd, "prove") ? 1
	           : !strcmp(r->cmd, "tip") ? 3
	                                    : 0;
	char *end;

	if (r->nargs != want)
		return glog_cmds_usage(want ? "wrong number of arguments for"
		                            : "no arguments for",
		                       r->cmd);
	if (!strcmp(r->cmd, "prove")) {
		errno = 0;
		r->index = strtoll(r->args[0], &end, 10);
		if (errno || *end || r->index < 0 || r->args[0][0] < '0' ||
		    r->args[0][0] > '9')
			return glog_cmds_usage("not an entry index",
			                       r->args[0]);
	}
	if (strcmp(r->cmd, "tip"))
		return -1;
	if (name_repo_norm(r->repo, sizeof(r->repo), r->args[0]) != 0)
		return glog_cmds_usage("not a repository name", r->args[0]);
	r->ref = r->args[1];
	if (strncmp(r->ref, "refs/", 5) || strlen(r->ref) > PUSHLEAF_REF_MAX ||
	    strpbrk(r->ref, " \t\n"))
		return glog_cmds_usage("not a full ref name (refs/heads/...)",
		                       r->ref);
	if (strlen(r->args[2]) != PUSHLEAF_OID_HEX ||
	    strspn(r->args[2], "0123456789abcdefABCDEF") != PUSHLEAF_OID_HEX)
		return glog_cmds_usage("not an object id (40 hex digits)",
		                       r->args[2]);
	for (int i = 0; i < PUSHLEAF_OID_HEX; i++)
		r->oid[i] = (char)(r->args[2][i] | 0x20); /* lower case */
	return -1;
}

/* Is entry e[0..len) an entry of the site at index i? */
static bool entry_ours(const struct glog_run *r,
                       const void *e,
                       size_t len,
                       int64_t i,
                       struct pushleaf *out)
{
	int rc = pushleaf_parse(out, e, len);

	return rc == 0 && !strcmp(out->origin, r->site) &&
	       out->index == (uint64_t)i;
}

static int not_ours(const struct glog_run *r, int64_t i)
{
	fprintf(stderr,
	        "%s: entry %lld is not a push entry of %s at index %lld\n",
	        prog, (long long)i, r->site, (long long)i);
	return GD_EXIT_REFUSED;
}

static int tile_width(int64_t size, int64_t n)
{
	int64_t left = size - n * TLOG_TILE_WIDTH;

	return (int)(left < TLOG_TILE_WIDTH ? left : TLOG_TILE_WIDTH);
}

static void tile_name(
        struct buf *out, const struct glog_run *r, int level, int64_t n, int w)
{
	struct tlog_tile t = {level, n, w};
	char path[TLOG_TILE_PATH_MAX];

	GD_ASSERT(tlog_tile_path(path, &t) > 0);
	buf_printf(out, "%s%s", r->h.base, path);
}

struct vcheck {
	struct glog_run *r;
	struct tlog_tile bad; /* the first tile that differs */
	bool have_bad;
	int64_t tiles;
};

/* glog_tile_fn: the server's tile against the one the entries make. */
static int
verify_tile(const struct tlog_tile *t, const uint8_t *data, void *payload)
{
	struct vcheck *v = payload;
	size_t len = (size_t)t->w * TLOG_HASH_LEN;
	uint8_t *got = xmalloc(len);
	int rc = glog_http_tile(got, t, &v->r->h);

	if (rc == GD_ECRYPTO || (rc == 0 && memcmp(got, data, len))) {
		if (!v->have_bad)
			v->bad = *t, v->have_bad = true;
		rc = 0;
	}
	v->tiles++;
	free(got);
	return rc;
}

/* Adds the entries of bundle n (w of them) to t; *bad_entry: the first
 * that is not the site's at its index. */
static int verify_bundle(struct glog_run *r,
                         struct glog_tree *t,
                         int64_t n,
                         int w,
                         struct vcheck *v,
                         int64_t *bad_entry)
{
	struct buf b = BUF_INIT;
	struct tlog_bundle_iter it;
	struct pushleaf e = {0};
	const uint8_t *p;
	size_t len;
	int rc = glog_http_bundle(&r->h, n, w, &b);

	if (rc != 0) {
		rc = glog_cmds_fail(r, rc, "entries");
		goto done;
	}
	tlog_bundle_iter_init(&it, b.p, b.len);
	for (int64_t i = n * TLOG_TILE_WIDTH;
	     tlog_bundle_next(&it, &p, &len) == 1; i++) {
		struct tlog_hash leaf;

		tlog_leaf_hash(&leaf, p, len);
		if ((rc = glog_tree_add(t, &leaf, verify_tile, v)) != 0) {
			rc = glog_cmds_fail(r, rc, "tiles");
			goto done;
		}
		if (!entry_ours(r, p, len, i, &e) && *bad_entry < 0)
			*bad_entry = i;
		pushleaf_free(&e);
	}
	rc = -1;
done:
	buf_free(&b);
	return rc;
}

static int verify_report(struct glog_run *r,
                         struct glog_tree *t,
                         struct vcheck *v,
                         int64_t bad_entry)
{
	struct tlog_hash root;
	struct buf what = BUF_INIT;
	char b[GLOG_CMDS_B64_LEN];
	int rc = glog_tree_root(t, &root, verify_tile, v);

	if (rc != 0)
		return glog_cmds_fail(r, rc, "tiles");
	rc = GD_EXIT_REFUSED;
	if (!tlog_hash_eq(&root, &r->ck.c.root)) {
		if (v->have_bad && v->bad.level == 0)
			tile_name(&what, r, TLOG_TILE_ENTRIES, v->bad.n,
			          v->bad.w);
		fprintf(stderr,
		        "%s: the entries of '%s' do not hash to its "
		        "checkpoint's root (size %lld)%s%s\n",
		        prog, r->ck.c.origin, (long long)r->ck.c.size,
		        what.len ? "; first difference in " : "",
		        buf_str(&what));
	} else if (v->have_bad) {
		tile_name(&what, r, v->bad.level, v->bad.n, v->bad.w);
		fprintf(stderr,
		        "%s: %s does not match the tree of the entries\n", prog,
		        what.p);
	} else if (bad_entry >= 0) {
		rc = not_ours(r, bad_entry);
	} else {
		glog_cmds_b64(b, &root);
		printf("verified %lld entries and %lld tiles of '%s': root "
		       "%s\n",
		       (long long)t->n, (long long)v->tiles, r->ck.c.origin, b);
		rc = GD_EXIT_OK;
	}
	buf_free(&what);
	return rc;
}

int glog_cmds_verify(struct glog_run *r)
{
	struct glog_tree *t = xmalloc(sizeof(*t));
	struct vcheck v = {.r = r};
	int64_t size = r->ck.c.size, bad_entry = -1;
	int rc = -1;

	glog_tree_init(t);
	for (int64_t n = 0; rc < 0 && n * TLOG_TILE_WIDTH < size; n++)
		rc = verify_bundle(r, t, n, tile_width(size, n), &v,
		                   &bad_entry);
	if (rc < 0)
		rc = verify_report(r, t, &v, bad_entry);
	free(t);
	return rc;
}

/* Entry k of bundle b. */
static bool
bundle_entry(const struct buf *b, int k, const uint8_t **p, size_t *len)
{
	struct tlog_bundle_iter it;

	tlog_bundle_iter_init(&it, b->p, b->len);
	for (int i = 0; i <= k; i++)
		if (tlog_bundle_next(&it, p, len) != 1)
			return false;
	return true;
}

static int not_in_tree(struct glog_run *r, int64_t i)
{
	struct buf what = BUF_INIT;

	tile_name(&what, r, TLOG_TILE_ENTRIES, i / TLOG_TILE_WIDTH,
	          tile_width(r->ck.c.size, i / TLOG_TILE_WIDTH));
	fprintf(stderr,
	        "%s: entry %lld in %s is not the one the checkpoint's "
	        "tree holds\n",
	        prog, (long long)i, what.p);
	buf_free(&what);
	return GD_EXIT_REFUSED;
}

int glog_cmds_prove(struct glog_run *r)
{
	const struct note_checkpoint *c = &r->ck.c;
	struct tlog_tile_reader rd = {c->size, c->root, glog_http_tile, &r->h};
	struct tlog_hash proof[TLOG_MAX_PROOF], leaf;
	int64_t n = r->index / TLOG_TILE_WIDTH;
	struct buf b = BUF_INIT;
	struct pushleaf e = {0};
	const uint8_t *p;
	size_t np, len;
	int rc;

	if (r->index >= c->size) {
		fprintf(stderr,
		        "%s: entry %lld is not in the checkpoint of "
		        "'%s' (size %lld)\n",
		        prog, (long long)r->index, c->origin,
		        (long long)c->size);
		return GD_EXIT_REFUSED;
	}
	rc = tlog_prove_record(proof, &np, c->size, r->index,
	                       tlog_tile_read_hashes, &rd);
	if (rc != 0)
		return glog_cmds_fail(r, rc, "inclusion proof");
	if ((rc = glog_http_bundle(&r->h, n, tile_width(c->size, n), &b)) !=
	    0) {
		rc = glog_cmds_fail(r, rc, "entries");
		goto done;
	}
	GD_ASSERT(
	        bundle_entry(&b, (int)(r->index % TLOG_TILE_WIDTH), &p, &len));
	tlog_leaf_hash(&leaf, p, len);
	if (tlog_check_record(proof, np, c->size, &c->root, r->index, &leaf))
		rc = not_in_tree(r, r->index);
	else if (!entry_ours(r, p, len, r->index, &e))
		rc = not_ours(r, r->index);
	else
		rc = fwrite(p, 1, len, stdout) == len ? GD_EXIT_OK
		                                      : GD_EXIT_USAGE;
done:
	pushleaf_free(&e);
	buf_free(&b);
	return rc;
}

/* What the log says of the ref: exit 0 when it is r->oid. */
static int
tip_found(const struct glog_run *r, const struct pushleaf_ref *ref, int64_t i)
{
	static const char zero[PUSHLEAF_OID_HEX + 1] =
	        "0000000000000000000000000000000000000000";

	if (!strcmp(ref->new_, r->oid)) {
		printf("%s in %s is %s: logged as %s#%lld\n", r->ref, r->repo,
		       r->oid, r->site, (long long)i);
		return GD_EXIT_OK;
	}
	if (!strcmp(ref->new_, zero))
		fprintf(stderr,
		        "%s: %s in %s is deleted in the log (%s#%lld), "
		        "not %s\n",
		        prog, r->ref, r->repo, r->site, (long long)i, r->oid);
	else
		fprintf(stderr,
		        "%s: %s in %s is %s in the log (%s#%lld), "
		        "not %s\n",
		        prog, r->ref, r->repo, ref->new_, r->site, (long long)i,
		        r->oid);
	return GD_EXIT_REFUSED;
}

/* Bundle n's entries, newest first, each checked against the tree; -1
 * when none moves the ref. */
static int tip_bundle(struct glog_run *r, int64_t n, int w)
{
	const struct note_checkpoint *c = &r->ck.c;
	struct tlog_tile_reader rd = {c->size, c->root, glog_http_tile, &r->h};
	int64_t idx[TLOG_TILE_WIDTH];
	struct tlog_hash want[TLOG_TILE_WIDTH], leaf;
	struct buf b = BUF_INIT;
	struct pushleaf e = {0};
	const struct pushleaf_ref *ref;
	const uint8_t *p;
	size_t len;
	int rc = glog_http_bundle(&r->h, n, w, &b);

	for (int k = 0; k < w; k++)
		idx[k] = tlog_stored_index(0, n * TLOG_TILE_WIDTH + k);
	if (rc != 0 ||
	    (rc = tlog_tile_read_hashes(want, idx, (size_t)w, &rd)) != 0) {
		rc = glog_cmds_fail(r, rc, "entries");
		goto done;
	}
	rc = -1;
	for (int k = w - 1; k >= 0 && rc < 0; k--) {
		int64_t i = n * TLOG_TILE_WIDTH + k;

		GD_ASSERT(bundle_entry(&b, k, &p, &len));
		tlog_leaf_hash(&leaf, p, len);
		pushleaf_free(&e);
		if (!tlog_hash_eq(&leaf, &want[k]))
			rc = not_in_tree(r, i);
		else if (!entry_ours(r, p, len, i, &e))
			rc = not_ours(r, i);
		else if ((ref = glog_entry_ref(&e, r->repo, r->ref)))
			rc = tip_found(r, ref, i);
	}
done:
	pushleaf_free(&e);
	buf_free(&b);
	return rc;
}

int glog_cmds_tip(struct glog_run *r)
{
	int64_t size = r->ck.c.size;
	int rc = -1;

	for (int64_t n = (size - 1) / TLOG_TILE_WIDTH; rc < 0 && n >= 0 && size;
	     n--)
		rc = tip_bundle(r, n, tile_width(size, n));
	if (rc >= 0)
		return rc;
	fprintf(stderr, "%s: %s in %s never logged (%s, %lld entries)\n", prog,
	        r->ref, r->repo, r->site, (long long)size);
	return GD_EXIT_REFUSED;
}
