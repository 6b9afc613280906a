/*
 * tlogwit_verify.c: `grantctl log verify`'s check of the kept checkpoints
 * (tlogwit.h, tlogwit_verify_kept): what grant-log checks over HTTP,
 * checked here from the local store.
 *
 * Per origin, the note kept in "tlog/ckpt/SITE" is opened again against
 * the keys of the config (not the ones the witness had when it kept it:
 * a key removed since no longer vouches for it), its root held against
 * the leaves stored here, and the last checkpoint this site cosigned
 * ("tlog/wit/SITE") proved consistent with it from the stored hashes
 * (ckpt_check).  Every kept proof is a checkpoint its origin signed that
 * was not its log here: a fork, always a failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "err.h"
#include "pushlog.h"
#include "tlogstore.h"
#include "tlogwit.h"
#include "xalloc.h"
#include "banned.h"

/* The keys of the config: each site's signing keys and, for a frontend
 * (a cosigner), the same keys as cosigner keys. */
struct keys {
	struct note_vkey *k;
	size_t n, cap;
};

static void keys_add(struct keys *ks, const struct note_vkey *v, bool cosigns)
{
	GD_GROW(ks->k, ks->cap, ks->n + 2);
	ks->k[ks->n++] = *v;
	if (cosigns && note_vkey_init(&ks->k[ks->n], v->name, v->name_len,
	                              NOTE_ALG_COSIG, v->pub) == 0)
		ks->n++;
}

/* Every key of a [peer] verifier_key (blank-separated); how many. */
static int keys_add_list(struct keys *ks, const char *list, bool cosigns)
{
	struct note_vkey v;
	int n = 0;

	while (list && *list) {
		size_t len;
		list += strspn(list, " \t");
		len = strcspn(list, " \t");
		if (len && note_vkey_parse(&v, list, len) == 0) {
			keys_add(ks, &v, cosigns);
			n++;
		}
		list += len;
	}
	return n;
}

struct run {
	struct store *s;
	const struct keys *keys;
	cJSON *checkpoints, *proofs; /* NULL: no JSON */
	struct buf *text, *why;
	int failures;
};

/* A failure (of a kept checkpoint, or a kept proof): the first one's
 * words go to why. */
static void
fail(struct run *r, bool proof, const char *what, const char *site, long long n)
{
	if (r->failures++ == 0) {
		buf_reset(r->why);
		buf_printf(r->why, "%s of site %s kept (size %lld): %s",
		           proof ? "fork proof" : "checkpoint", site, n, what);
	}
}

static void hex(char out[2 * TLOG_HASH_LEN + 1], const struct tlog_hash *h)
{
	pushlog_hex(out, h->b, TLOG_HASH_LEN);
}

/* Check note against site's leaves and last cosigned here. */
static int check_note(struct ckpt_check *c,
                      struct run *r,
                      const char *site,
                      const struct buf *note,
                      uint64_t *leaves)
{
	struct tlogstore_table t = {r->s, NULL, site};
	struct ckpt_tree tree = {0, tlogstore_read, &t};
	struct ckpt_last wit;
	int rc;

	if ((rc = tlogstore_size(r->s, NULL, site, leaves)) < 0)
		return rc;
	tree.size = (int64_t)*leaves;
	tlogwit_kept_last(r->s, site, &wit);
	return ckpt_check(c, note->p, note->len, r->keys->k, r->keys->n, &tree,
	                  &wit);
}

static void text_line(struct run *r,
                      const char *site,
                      const struct ckpt_check *c,
                      int cosigners,
                      uint64_t leaves)
{
	char h[2 * TLOG_HASH_LEN + 1];

	buf_printf(r->text, "tlog %s: checkpoint size=%lld ", site,
	           (long long)c->cp.size);
	if (c->sig == CKPT_SIG_OK)
		buf_puts(r->text, "signed ok");
	else if (c->sig == CKPT_SIG_NO_KEY)
		buf_puts(r->text, "signature unchecked (no key)");
	else if (c->sig == CKPT_SIG_BAD)
		buf_puts(r->text, "bad signature (not the origin's key)");
	else
		buf_puts(r->text, "not a signed checkpoint");
	buf_printf(r->text, ", cosignatures %d/%d", c->cosigs, cosigners);
	if (c->root == CKPT_ROOT_MATCH) {
		buf_puts(r->text, ", root matches");
	} else if (c->root == CKPT_ROOT_MISMATCH) {
		hex(h, &c->here);
		buf_printf(r->text, ", root mismatch (here %s)", h);
	} else {
		buf_printf(r->text, ", ahead of the %llu leaves here",
		           (unsigned long long)leaves);
	}
	if (c->wit != CKPT_WIT_NONE)
		buf_printf(r->text, ", last cosigned here %s",
		           c->wit == CKPT_WIT_AHEAD ? "unchecked (ahead)"
		                                    : ckpt_wit_text(c->wit));
	buf_puts(r->text, "\n");
}

static void json_entry(struct run *r,
                       const char *site,
                       const struct ckpt_check *c,
                       int cosigners,
                       uint64_t leaves)
{
	cJSON *o = cJSON_CreateObject();
	char h[2 * TLOG_HASH_LEN + 1];

	cJSON_AddStringToObject(o, "site", site);
	cJSON_AddNumberToObject(o, "size", (double)c->cp.size);
	cJSON_AddNumberToObject(o, "leaves", (double)leaves);
	cJSON_AddStringToObject(o, "signature", ckpt_sig_text(c->sig));
	cJSON_AddNumberToObject(o, "cosignatures", c->cosigs);
	cJSON_AddNumberToObject(o, "cosigners", cosigners);
	cJSON_AddStringToObject(o, "root", ckpt_root_text(c->root));
	hex(h, &c->cp.root);
	cJSON_AddStringToObject(o, "signed_root", h);
	cJSON_AddStringToObject(o, "witness", ckpt_wit_text(c->wit));
	cJSON_AddItemToArray(r->checkpoints, o);
}

/* One origin's kept checkpoint; cosigners: the frontends but it with a
 * key here. */
static int verify_site(struct run *r, const char *site, int cosigners)
{
	struct buf note = BUF_INIT;
	struct ckpt_check c;
	uint64_t leaves = 0;
	int rc = tlogwit_kept_note(r->s, site, &note);

	if (rc == GD_ENOTFOUND) {
		rc = tlogstore_size(r->s, NULL, site, &leaves);
		if (rc == 0 && leaves && r->text)
			buf_printf(
			        r->text,
			        "tlog %s: no checkpoint kept (%llu leaves)\n",
			        site, (unsigned long long)leaves);
		goto done;
	}
	if (rc < 0 || (rc = check_note(&c, r, site, &note, &leaves)) < 0)
		goto done;
	if (r->text)
		text_line(r, site, &c, cosigners, leaves);
	if (r->checkpoints)
		json_entry(r, site, &c, cosigners, leaves);
	if (c.sig == CKPT_SIG_BAD || c.sig == CKPT_SIG_MALFORMED)
		fail(r, false, "not signed by its origin's key", site,
		     (long long)c.cp.size);
	else if (c.root == CKPT_ROOT_MISMATCH)
		fail(r, false, "its root is not the root of the leaves here",
		     site, (long long)c.cp.size);
	else if (c.wit == CKPT_WIT_INCONSISTENT)
		fail(r, false, "not consistent with the last one cosigned here",
		     site, (long long)c.cp.size);
done:
	buf_free(&note);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* A kept proof: a fork its origin signed. */
static int proof_one(const char *site, const char *p, size_t len, void *arg)
{
	struct run *r = arg;
	struct buf note = BUF_INIT;
	struct ckpt_check c;
	char h0[2 * TLOG_HASH_LEN + 1], h1[2 * TLOG_HASH_LEN + 1] = "";
	uint64_t leaves = 0;
	int rc;

	buf_add(&note, p, len);
	if ((rc = check_note(&c, r, site, &note, &leaves)) < 0)
		goto done;
	hex(h0, &c.cp.root);
	if (c.root != CKPT_ROOT_AHEAD)
		hex(h1, &c.here);
	fail(r, true, "its origin signed a tree that is not its log here", site,
	     (long long)c.cp.size);
	if (r->text)
		buf_printf(r->text,
		           "tlog %s: fork proof size=%lld signature %s, "
		           "signed root %s, root here %s\n",
		           site, (long long)c.cp.size, ckpt_sig_text(c.sig), h0,
		           *h1 ? h1 : "unknown (fewer leaves)");
	if (r->proofs) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "site", site);
		cJSON_AddNumberToObject(o, "size", (double)c.cp.size);
		cJSON_AddStringToObject(o, "signature", ckpt_sig_text(c.sig));
		cJSON_AddStringToObject(o, "root", h0);
		if (*h1)
			cJSON_AddStringToObject(o, "root_here", h1);
		cJSON_AddItemToArray(r->proofs, o);
	}
done:
	buf_free(&note);
	return rc;
}

int tlogwit_verify_kept(struct buf *why,
                        cJSON *json,
                        struct buf *text,
                        struct store *s,
                        const struct config *cfg,
                        const struct note_vkey *own)
{
	struct keys ks = {0};
	struct run r = {s, &ks, NULL, NULL, text, why, 0};
	bool own_cosigns = cfg->role != CONFIG_ROLE_MIRROR;
	int *has = xcalloc((size_t)cfg->npeers + 1, sizeof(*has));
	int frontends = 0, rc;

	/* has[0]: this site; has[i + 1]: peer i (a cosigner with a key) */
	if (own) {
		keys_add(&ks, own, own_cosigns);
		has[0] = own_cosigns;
	}
	for (int i = 0; i < cfg->npeers; i++) {
		const struct config_peer *p = &cfg->peers[i];
		bool cosigns = p->role != CONFIG_ROLE_MIRROR;
		has[i + 1] = keys_add_list(&ks, p->verifier_key, cosigns) > 0 &&
		             cosigns;
	}
	for (int i = 0; i <= cfg->npeers; i++)
		frontends += has[i];
	if (json) {
		r.checkpoints = cJSON_AddArrayToObject(json, "checkpoints");
		r.proofs = cJSON_AddArrayToObject(json, "proofs");
	}
	rc = verify_site(&r, cfg->site, frontends - has[0]);
	for (int i = 0; rc >= 0 && i < cfg->npeers; i++)
		rc = verify_site(&r, cfg->peers[i].site,
		                 frontends - has[i + 1]);
	if (rc >= 0)
		rc = tlogwit_kept_proofs(s, proof_one, &r);
	if (json)
		cJSON_AddBoolToObject(json, "checkpoints_ok", r.failures == 0);
	free(ks.k);
	free(has);
	return rc < 0 ? rc : r.failures;
}
