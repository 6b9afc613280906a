/*
 * tlogwit.c: checkpoints between frontends (tlogwit.h).
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "ckpt.h"
#include "clock.h"
#include "err.h"
#include "log.h"
#include "records.h"
#include "tlogstore.h"
#include "tlogwit.h"
#include "xalloc.h"
#include "banned.h"

#define MAX_SITES (CONFIG_MAX_PEERS + 1)

/* One origin's log as this site sees it. */
struct origin {
	char site[65];
	bool has_key; /* a verifier key is configured */
	struct ckpt_last last; /* the last checkpoint cosigned here */
	struct buf pending; /* a checkpoint waiting for its leaves */
	int64_t ckpt; /* the kept checkpoint's size (0: none) */
	int sigs; /* its signatures that verify here */
	uint64_t refused, proofs, unchecked;
};

struct tlogwit {
	struct store *store;
	const struct config *cfg;
	const struct peer_self *self;
	void *pub;
	const struct opsig_signer *signer;
	struct note_skey cosigner; /* this site's key, type 0x04 */
	/* every site's signing key (0x01) then cosigner key (0x04) */
	struct note_vkey keys[2 * MAX_SITES];
	size_t nkeys;
	struct origin o[MAX_SITES]; /* [0]: this site */
	size_t n;
	int64_t made_size; /* this site's newest checkpoint */
	uint64_t made_ms, published_ms, ticked_ms;
};

/* ---- the store: CF_META "tlog/..." ------------------------------------- */

static void meta_key(struct buf *k, const char *what, const char *site)
{
	buf_reset(k);
	buf_printf(k, "tlog/%s/%s", what, site);
}

/* Put key = val and sync: what a cosignature or a checkpoint stands on. */
static int
meta_put_sync(struct store *s, const struct buf *k, const void *val, size_t len)
{
	struct store_batch *b;
	int rc;

	if ((rc = store_batch_new(&b, s)) < 0)
		return rc;
	store_put(b, CF_META, k->p, k->len, val, len);
	rc = store_commit(b, true);
	store_batch_free(&b);
	return rc;
}

int tlogwit_kept_note(struct store *s, const char *site, struct buf *note)
{
	struct buf k = BUF_INIT;
	int rc;

	meta_key(&k, "ckpt", site);
	buf_reset(note);
	rc = store_get(s, NULL, CF_META, k.p, k.len, note);
	buf_free(&k);
	return rc;
}

static int note_put(struct store *s, const char *site, const struct buf *n)
{
	struct buf k = BUF_INIT;
	int rc;

	meta_key(&k, "ckpt", site);
	rc = meta_put_sync(s, &k, n->p, n->len);
	buf_free(&k);
	return rc;
}

/* The checkpoint (size, root) of a stored note's text. */
static int note_tree(const struct buf *note, struct note_checkpoint *cp)
{
	const char *end =
	        note->len ? memmem(note->p, note->len, "\n\n", 2) : NULL;

	if (!end)
		return GD_EPROTO;
	return note_checkpoint_parse(cp, note->p, (size_t)(end - note->p) + 1);
}

/* ---- signatures -------------------------------------------------------- */

/* out = note's text and every signature line that verifies against w's
 * keys (repeats dropped by note_open); how many, or a negative error
 * (GD_ECRYPTO: a line by a known key fails: nothing kept). */
static int
keep_verified(struct tlogwit *w, struct buf *out, const char *note, size_t len)
{
	struct note *n = xmalloc(sizeof(*n));
	int rc = note_open(n, note, len, w->keys, w->nkeys), kept = 0;

	if (rc == 0) {
		buf_reset(out);
		buf_add(out, n->text, n->text_len);
		buf_puts(out, "\n");
		for (size_t i = 0; i < n->nsigs; i++) {
			if (n->sigs[i].key < 0)
				continue;
			buf_puts(out, "\xe2\x80\x94 "); /* U+2014, a space */
			buf_add(out, n->sigs[i].name, n->sigs[i].name_len);
			buf_puts(out, " ");
			buf_add(out, n->sigs[i].b64, n->sigs[i].b64_len);
			buf_puts(out, "\n");
			kept++;
		}
		rc = kept;
	}
	free(n);
	return rc;
}

static void keys_add(struct tlogwit *w,
                     const char *name,
                     size_t len,
                     const uint8_t pub[NOTE_PUB_LEN])
{
	if (w->nkeys + 2 > GD_ARRAY_SIZE(w->keys) ||
	    note_vkey_init(&w->keys[w->nkeys], name, len, NOTE_ALG_ED25519,
	                   pub) < 0 ||
	    note_vkey_init(&w->keys[w->nkeys + 1], name, len, NOTE_ALG_COSIG,
	                   pub) < 0)
		return;
	w->nkeys += 2;
}

/* The signing key (0x01) of site; NULL when none is configured. */
static const struct note_vkey *key_of(const struct tlogwit *w, const char *site)
{
	for (size_t i = 0; i < w->nkeys; i += 2)
		if (opsig_key_names_site(w->keys[i].name, site))
			return &w->keys[i];
	return NULL;
}

static struct origin *origin_of(struct tlogwit *w, const char *site)
{
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->o[i].site, site))
			return &w->o[i];
	return NULL;
}

/* ---- open ------------------------------------------------------------- */

void tlogwit_kept_last(struct store *s, const char *site, struct ckpt_last *out)
{
	struct buf k = BUF_INIT, v = BUF_INIT;

	*out = (struct ckpt_last){0};
	meta_key(&k, "wit", site);
	if (store_get(s, NULL, CF_META, k.p, k.len, &v) == 0 &&
	    v.len == 8 + TLOG_HASH_LEN) {
		const uint8_t *p = (const uint8_t *)v.p;
		uint64_t size = 0;
		for (int i = 0; i < 8; i++)
			size = size << 8 | p[i];
		out->size = (int64_t)size;
		memcpy(out->root.b, p + 8, TLOG_HASH_LEN);
	}
	buf_free(&k);
	buf_free(&v);
}

int tlogwit_kept_proofs(struct store *s, tlogwit_proof_fn *fn, void *payload)
{
	static const char prefix[] = "tlog/proof/";
	struct store_iter *it = NULL;
	struct buf v = BUF_INIT;
	const char *key, *slash;
	char site[65];
	size_t klen;
	int rc;

	if ((rc = store_iter_new(&it, s, NULL, CF_META, prefix,
	                         sizeof(prefix) - 1)) < 0)
		return rc;
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		key += sizeof(prefix) - 1, klen -= sizeof(prefix) - 1;
		slash = memchr(key, '/', klen);
		if (!slash || (size_t)(slash - key) >= sizeof(site))
			continue;
		memcpy(site, key, (size_t)(slash - key));
		site[slash - key] = '\0';
		if ((rc = fn(site, v.p, v.len, payload)) < 0)
			break;
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

int tlogwit_open(struct tlogwit **out, const struct tlogwit_opts *o)
{
	struct tlogwit *w = xcalloc(1, sizeof(*w));
	const struct note_skey *sk = &o->signer->key;
	struct note_checkpoint cp;
	struct note_vkey v;
	struct buf note = BUF_INIT;

	*out = NULL;
	w->store = o->store, w->cfg = o->cfg, w->self = o->self;
	w->pub = o->pub, w->signer = o->signer;
	/* the same seed, type 0x04: C2SP allows one key for both when the
	 * key ids differ (they do: the type is hashed in) */
	if (note_skey_from_seed(&w->cosigner, sk->name, sk->name_len,
	                        NOTE_ALG_COSIG, sk->sk) < 0) {
		free(w);
		return GD_EINVAL;
	}
	keys_add(w, sk->name, sk->name_len, sk->pub);
	snprintf(w->o[w->n++].site, sizeof(w->o[0].site), "%s", o->cfg->site);
	w->o[0].has_key = true;
	for (int i = 0; i < o->cfg->npeers; i++) {
		const struct config_peer *p = &o->cfg->peers[i];
		struct origin *org = &w->o[w->n++];
		snprintf(org->site, sizeof(org->site), "%s", p->site);
		if (!p->verifier_key)
			continue;
		size_t len = strcspn(p->verifier_key, " \t");
		if (note_vkey_parse(&v, p->verifier_key, len) == 0) {
			keys_add(w, v.name, v.name_len, v.pub);
			org->has_key = true;
		}
	}
	for (size_t i = 0; i < w->n; i++) {
		struct origin *org = &w->o[i];
		struct buf kept = BUF_INIT;
		tlogwit_kept_last(w->store, org->site, &org->last);
		buf_reset(&note);
		if (tlogwit_kept_note(w->store, org->site, &note) == 0 &&
		    note_tree(&note, &cp) == 0) {
			org->ckpt = cp.size;
			org->sigs = keep_verified(w, &kept, note.p, note.len);
		}
		buf_free(&kept);
	}
	w->made_size = w->o[0].ckpt;
	buf_free(&note);
	*out = w;
	return 0;
}

void tlogwit_destroy(struct tlogwit **wp)
{
	struct tlogwit *w = *wp;

	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		buf_free(&w->o[i].pending);
	note_skey_wipe(&w->cosigner);
	free(w);
	*wp = NULL;
}

/* ---- the origin ------------------------------------------------------- */

static void publish_note(struct tlogwit *w, const struct buf *note)
{
	Grantd__V1__Checkpoint c = GRANTD__V1__CHECKPOINT__INIT;
	Grantd__V1__PeerMsg m;

	if (!w->pub)
		return;
	c.note = (ProtobufCBinaryData){note->len, (uint8_t *)note->p};
	c.has_note = 1;
	peer_msg_init(w->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_CHECKPOINT;
	m.checkpoint = &c;
	peer_send(w->pub, &m, NULL, 0);
}

/* A new checkpoint of this site's tree, when it grew. */
static void make_own(struct tlogwit *w, uint64_t now_ms)
{
	struct tlogstore_table t = {w->store, NULL, w->cfg->site};
	struct ckpt_tree tree = {0, tlogstore_read, &t};
	struct buf note = BUF_INIT;
	uint64_t size;
	int rc;

	if (tlogstore_size(w->store, NULL, w->cfg->site, &size) < 0 ||
	    (int64_t)size <= w->made_size)
		return;
	tree.size = (int64_t)size;
	if ((rc = ckpt_make(&note, &w->signer->key, &tree)) < 0 ||
	    (rc = note_put(w->store, w->cfg->site, &note)) < 0) {
		log_error("push log checkpoint not made size=%llu: %s",
		          (unsigned long long)size, gd_strerror(rc));
	} else {
		w->made_size = w->o[0].ckpt = tree.size;
		w->o[0].sigs = 1;
		w->made_ms = w->published_ms = now_ms;
		publish_note(w, &note);
	}
	buf_free(&note);
}

/* ---- the witness ------------------------------------------------------ */

static void publish_cosig(struct tlogwit *w,
                          const char *origin,
                          int64_t size,
                          const struct buf *line)
{
	Grantd__V1__Cosig c = GRANTD__V1__COSIG__INIT;
	Grantd__V1__PeerMsg m;

	if (!w->pub)
		return;
	c.origin = (char *)origin;
	c.size = size, c.has_size = 1;
	c.line = (ProtobufCBinaryData){line->len, (uint8_t *)line->p};
	c.has_line = 1;
	peer_msg_init(w->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_COSIG;
	m.cosig = &c;
	peer_send(w->pub, &m, NULL, 0);
}

/* Keep a signed checkpoint that is not o's log here, as proof. */
static void keep_proof(struct tlogwit *w,
                       struct origin *o,
                       const char *note,
                       size_t len,
                       const struct note_checkpoint *cp,
                       enum ckpt_verdict v)
{
	struct buf k = BUF_INIT;
	char what[80];

	snprintf(what, sizeof(what), "proof/%s", o->site);
	meta_key(&k, what, "");
	buf_printf(&k, "%lld", (long long)cp->size);
	if (meta_put_sync(w->store, &k, note, len) < 0)
		log_error("push log proof not kept origin=%s", o->site);
	o->proofs++;
	log_error("push log checkpoint refused origin=%s size=%lld: %s; kept "
	          "as proof (grantctl status: tlog)",
	          o->site, (long long)cp->size, ckpt_verdict_text(v));
	buf_free(&k);
}

/* Record (size, root) as o's last cosigned, synced. */
static int
put_last(struct tlogwit *w, struct origin *o, const struct note_checkpoint *cp)
{
	uint8_t v[8 + TLOG_HASH_LEN];
	struct buf k = BUF_INIT;
	int rc;

	for (int i = 0; i < 8; i++)
		v[i] = (uint8_t)((uint64_t)cp->size >> (56 - 8 * i));
	memcpy(v + 8, cp->root.b, TLOG_HASH_LEN);
	meta_key(&k, "wit", o->site);
	rc = meta_put_sync(w->store, &k, v, sizeof(v));
	buf_free(&k);
	if (rc == 0)
		o->last = (struct ckpt_last){cp->size, cp->root};
	return rc;
}

/* Store note (its verified lines) as o's newest when it is not older
 * than the one kept. */
static void
keep_newest(struct tlogwit *w, struct origin *o, const char *note, size_t len)
{
	struct buf mine = BUF_INIT, kept = BUF_INIT;
	struct note_checkpoint a, b;

	int n;

	/* what is kept already (a mirror asks every second): nothing to
	 * check again */
	if (tlogwit_kept_note(w->store, o->site, &mine) == 0 &&
	    mine.len == len && !memcmp(mine.p, note, len))
		goto out;
	if ((n = keep_verified(w, &kept, note, len)) <= 0 ||
	    note_tree(&kept, &a) < 0)
		goto out;
	if (mine.len && note_tree(&mine, &b) == 0 &&
	    (b.size > a.size || (b.size == a.size && o->sigs >= n)))
		goto out;
	if (note_put(w->store, o->site, &kept) < 0) {
		log_error("push log checkpoint not kept origin=%s", o->site);
		goto out;
	}
	o->ckpt = a.size;
	o->sigs = n;
out:
	buf_free(&mine);
	buf_free(&kept);
}

/* Check note from o's origin as a witness; true when done with it (not
 * waiting for leaves). */
static bool
witness(struct tlogwit *w, struct origin *o, const char *note, size_t len)
{
	struct tlogstore_table t = {w->store, NULL, o->site};
	struct ckpt_tree tree = {0, tlogstore_read, &t};
	const struct note_vkey *key = key_of(w, o->site);
	struct note_checkpoint cp;
	struct buf line = BUF_INIT, signed_ = BUF_INIT;
	enum ckpt_verdict v;
	uint64_t size = 0;

	if (tlogstore_size(w->store, NULL, o->site, &size) < 0)
		return false;
	tree.size = (int64_t)size;
	v = ckpt_witness(&cp, &line, note, len, key, &tree, &o->last,
	                 &w->cosigner, (uint64_t)(clock_wall_ms() / 1000));
	if (v == CKPT_WAIT)
		return false;
	if (v == CKPT_COSIGN && put_last(w, o, &cp) == 0) {
		publish_cosig(w, o->site, cp.size, &line);
		buf_add(&signed_, note, len);
		buf_add(&signed_, line.p, line.len);
		keep_newest(w, o, signed_.p, signed_.len);
	} else if (v == CKPT_SEEN) {
		keep_newest(w, o, note, len); /* more cosignatures, maybe */
	} else if (ckpt_verdict_proof(v)) {
		keep_proof(w, o, note, len, &cp, v);
	} else if (v != CKPT_COSIGN) {
		o->refused++;
		log_error("push log checkpoint refused origin=%s: %s", o->site,
		          ckpt_verdict_text(v));
	}
	buf_free(&line);
	buf_free(&signed_);
	return true;
}

void tlogwit_take_checkpoint(struct tlogwit *w,
                             const char *from,
                             const Grantd__V1__Checkpoint *c)
{
	struct origin *o = origin_of(w, from);

	if (!o || o == &w->o[0] || !c->has_note)
		return;
	if (!o->has_key || w->cfg->role == CONFIG_ROLE_MIRROR) {
		o->unchecked++;
		return;
	}
	if (!witness(w, o, (const char *)c->note.data, c->note.len)) {
		buf_reset(&o->pending);
		buf_add(&o->pending, c->note.data, c->note.len);
	} else {
		buf_reset(&o->pending);
	}
}

void tlogwit_take_cosig(struct tlogwit *w,
                        const char *from,
                        const Grantd__V1__Cosig *c)
{
	struct origin *o = c->origin ? origin_of(w, c->origin) : NULL;
	struct buf mine = BUF_INIT;
	struct note_checkpoint cp;

	(void)from; /* the line says whose it is; only keys known here count */
	if (!o || !c->has_line || !c->has_size ||
	    tlogwit_kept_note(w->store, o->site, &mine) < 0 ||
	    note_tree(&mine, &cp) < 0 || cp.size != c->size) {
		buf_free(&mine);
		return;
	}
	buf_add(&mine, c->line.data, c->line.len);
	keep_newest(w, o, mine.p, mine.len);
	buf_free(&mine);
}

void tlogwit_tick(struct tlogwit *w, uint64_t now_ms)
{
	struct buf note = BUF_INIT;

	if (w->cfg->role == CONFIG_ROLE_MIRROR ||
	    now_ms - w->ticked_ms < TLOGWIT_TICK_MS)
		return;
	w->ticked_ms = now_ms;
	if (now_ms - w->made_ms >= TLOGWIT_EVERY_MS)
		make_own(w, now_ms);
	if (w->made_size > 0 &&
	    now_ms - w->published_ms >= TLOGWIT_REPUBLISH_MS) {
		w->published_ms = now_ms;
		if (tlogwit_kept_note(w->store, w->cfg->site, &note) == 0)
			publish_note(w, &note);
	}
	for (size_t i = 1; i < w->n; i++)
		if (w->o[i].pending.len &&
		    witness(w, &w->o[i], w->o[i].pending.p,
		            w->o[i].pending.len))
			buf_reset(&w->o[i].pending);
	buf_free(&note);
}

/* ---- mirrors ---------------------------------------------------------- */

void tlogwit_on_req(const struct peer_req *rq, void *payload)
{
	struct tlogwit *w = payload;
	Grantd__V1__CkptRep rep = GRANTD__V1__CKPT_REP__INIT;
	ProtobufCBinaryData notes[MAX_SITES];
	struct buf b[MAX_SITES];
	Grantd__V1__PeerMsg m;

	for (size_t i = 0; i < w->n; i++) {
		b[i] = (struct buf)BUF_INIT;
		if (w->o[i].ckpt > 0 &&
		    tlogwit_kept_note(w->store, w->o[i].site, &b[i]) == 0)
			notes[rep.n_notes++] = (ProtobufCBinaryData){
			        b[i].len, (uint8_t *)b[i].p};
	}
	rep.notes = notes;
	peer_msg_init(w->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_CKPT_REP;
	m.ckpt_rep = &rep;
	peer_reply(rq, &m);
	for (size_t i = 0; i < w->n; i++)
		buf_free(&b[i]);
}

void tlogwit_ask(struct tlogwit *w, void *dealer)
{
	Grantd__V1__PeerMsg m;

	peer_msg_init(w->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_CKPT_REQ;
	m.ckpt_req = 1;
	peer_send(dealer, &m, NULL, 0);
}

void tlogwit_take_notes(struct tlogwit *w, const Grantd__V1__CkptRep *rep)
{
	for (size_t i = 0; i < rep->n_notes && i < MAX_SITES; i++) {
		struct buf note = BUF_INIT;
		struct note_checkpoint cp;
		const struct note_vkey *k;
		buf_add(&note, rep->notes[i].data, rep->notes[i].len);
		/* whose log: the origin line names the key, which names the
		 * site (HOST/grantd/SITE) */
		if (note_tree(&note, &cp) == 0) {
			for (size_t j = 0; j < w->n; j++) {
				k = key_of(w, w->o[j].site);
				if (k && k->name_len == cp.origin_len &&
				    !memcmp(k->name, cp.origin, cp.origin_len))
					keep_newest(w, &w->o[j], note.p,
					            note.len);
			}
		}
		buf_free(&note);
	}
}

/* ---- status ----------------------------------------------------------- */

void tlogwit_status(struct tlogwit *w, cJSON *status)
{
	cJSON *arr = cJSON_AddArrayToObject(status, "tlog");

	for (size_t i = 0; i < w->n; i++) {
		const struct origin *o = &w->o[i];
		cJSON *e = cJSON_CreateObject();
		uint64_t size = 0;
		cJSON_AddStringToObject(e, "origin", o->site);
		if (tlogstore_size(w->store, NULL, o->site, &size) == 0)
			cJSON_AddNumberToObject(e, "leaves", (double)size);
		cJSON_AddNumberToObject(e, "checkpoint", (double)o->ckpt);
		cJSON_AddNumberToObject(e, "signatures",
		                        o->sigs > 0 ? o->sigs : 0);
		cJSON_AddNumberToObject(e, "cosigned", (double)o->last.size);
		cJSON_AddNumberToObject(e, "refused", (double)o->refused);
		cJSON_AddNumberToObject(e, "proofs", (double)o->proofs);
		cJSON_AddNumberToObject(e, "unchecked", (double)o->unchecked);
		cJSON_AddItemToArray(arr, e);
	}
}

/* ---- the HTTP endpoint's source --------------------------------------- */

static int
src_checkpoint(void *src, const char *site, struct buf *note, int64_t *size)
{
	struct note_checkpoint cp;
	int rc = tlogwit_kept_note(src, site, note);

	if (rc < 0)
		return rc;
	if (note_tree(note, &cp) < 0)
		return GD_EPROTO;
	*size = cp.size;
	return 0;
}

static int src_hashes(void *src,
                      const char *site,
                      struct tlog_hash *out,
                      const int64_t *indexes,
                      size_t n)
{
	struct tlogstore_table t = {src, NULL, site};

	return tlogstore_read(out, indexes, n, &t);
}

static int
src_entry(void *src, const char *site, int64_t index, struct buf *out)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	Grantd__V1__PushLeaf *leaf = NULL;
	int rc;

	records_key_tleaf(&k, site, (uint64_t)index);
	rc = store_get(src, NULL, CF_TLEAVES, k.p, k.len, &v);
	if (rc == 0 && !(leaf = grantd__v1__push_leaf__unpack(
	                         NULL, v.len, (const uint8_t *)v.p)))
		rc = GD_EPROTO;
	if (rc == 0)
		buf_add(out, leaf->text.data, leaf->text.len);
	grantd__v1__push_leaf__free_unpacked(leaf, NULL);
	buf_free(&k);
	buf_free(&v);
	return rc;
}

void tlogwit_source(struct loghttp_source *out, struct store *s)
{
	*out = (struct loghttp_source){src_checkpoint, src_hashes, src_entry,
	                               s};
}
