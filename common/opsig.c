/*
 * opsig.c: signed operations; the contract is opsig.h.
 */
#include <sodium.h>
#include <zmq.h>
#include <string.h>

#include "config.h"
#include "err.h"
#include "opsig.h"
#include "tlog.h"
#include "xalloc.h"
#include "banned.h"

static const char kdf_ctx[crypto_kdf_CONTEXTBYTES] = {'g', 'r', 'a', 'n',
                                                      't', 'd', 's', 'g'};

/* ---- keys ------------------------------------------------------------ */

int opsig_key_name(char out[NOTE_NAME_MAX + 1],
                   const char *host,
                   const char *site)
{
	const char *at = host ? strchr(host, '@') : NULL;
	const char *h = at ? at + 1 : host;
	int n;

	if (!h || !*h)
		h = "localhost";
	n = snprintf(out, NOTE_NAME_MAX + 1, "%s/grantd/%s", h, site);
	if (n < 0 || n > NOTE_NAME_MAX || !note_name_ok(out, (size_t)n))
		return GD_EINVAL;
	return 0;
}

int opsig_signer_init(struct opsig_signer *s,
                      const uint8_t curve_sec[32],
                      const char *name)
{
	uint8_t seed[crypto_sign_SEEDBYTES];
	int rc;

	crypto_kdf_derive_from_key(seed, sizeof(seed), 1, kdf_ctx, curve_sec);
	rc = note_skey_from_seed(&s->key, name, strlen(name), NOTE_ALG_ED25519,
	                         seed);
	sodium_memzero(seed, sizeof(seed));
	return rc < 0 ? GD_EINVAL : 0;
}

int opsig_signer_load(struct opsig_signer *s,
                      const char *keyfile,
                      const char *host,
                      const char *site,
                      struct buf *err)
{
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	char name[NOTE_NAME_MAX + 1];
	uint8_t raw[32];
	int rc;

	if ((rc = config_read_keyfile(keyfile, pub, sec, err)) < 0)
		return rc;
	rc = GD_EINVAL;
	if (!zmq_z85_decode(raw, sec))
		buf_printf(err, "%s: not a key file from 'grantctl keygen'",
		           keyfile);
	else if (opsig_key_name(name, host, site) < 0)
		buf_printf(err,
		           "no key name can be made of host '%s' and "
		           "site '%s'",
		           host ? host : "", site);
	else
		rc = opsig_signer_init(s, raw, name);
	sodium_memzero(sec, sizeof(sec));
	sodium_memzero(raw, sizeof(raw));
	return rc;
}

void opsig_signer_vkey(struct buf *out, const struct opsig_signer *s)
{
	struct note_vkey v;

	note_skey_vkey(&v, &s->key);
	note_vkey_format(out, &v);
}

void opsig_signer_wipe(struct opsig_signer *s)
{
	note_skey_wipe(&s->key);
}

/* ---- signing --------------------------------------------------------- */

/* The batch's tree, held whole: tlog's table of stored hashes. */
struct table {
	struct tlog_hash *h;
	size_t n, cap;
};

static int
table_read(struct tlog_hash *out, const int64_t *idx, size_t n, void *payload)
{
	const struct table *t = payload;

	for (size_t i = 0; i < n; i++) {
		GD_ASSERT(idx[i] >= 0 && (size_t)idx[i] < t->n);
		out[i] = t->h[idx[i]];
	}
	return 0;
}

#define MSG_LEN (sizeof(OPSIG_DOMAIN) - 1 + 2 * OPSIG_HASH_LEN)

/* The signed message: the domain, the chain value before, the root. */
static void batch_msg(uint8_t msg[MSG_LEN],
                      const uint8_t prev[OPSIG_HASH_LEN],
                      const struct tlog_hash *root)
{
	memcpy(msg, OPSIG_DOMAIN, sizeof(OPSIG_DOMAIN) - 1);
	memcpy(msg + sizeof(OPSIG_DOMAIN) - 1, prev, OPSIG_HASH_LEN);
	memcpy(msg + sizeof(OPSIG_DOMAIN) - 1 + OPSIG_HASH_LEN, root->b,
	       OPSIG_HASH_LEN);
}

static void put_varint(struct buf *b, uint64_t v)
{
	uint8_t c;

	do {
		c = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			c |= 0x80;
		buf_add(b, &c, 1);
	} while (v);
}

/* Append field 30 (OpSig, length-delimited) to a packed Op. */
static void append_sig(struct buf *op, const Grantd__V1__OpSig *m)
{
	size_t n = grantd__v1__op_sig__get_packed_size(m);

	put_varint(op, (uint64_t)30 << 3 | 2);
	put_varint(op, n);
	grantd__v1__op_sig__pack(m, buf_extend(op, n));
}

/* The batch's table of stored hashes, and its root. */
static void build_tree(struct table *t,
                       struct tlog_hash *root,
                       struct buf *const *ops,
                       size_t n)
{
	struct tlog_hash leaf, add[TLOG_MAX_STORED];
	size_t nadd;
	int rc;

	for (size_t i = 0; i < n; i++) {
		tlog_leaf_hash(&leaf, ops[i]->p, ops[i]->len);
		rc = tlog_stored_hashes(add, &nadd, (int64_t)i, &leaf,
		                        table_read, t);
		GD_ASSERT(rc == 0);
		GD_GROW(t->h, t->cap, t->n + nadd);
		memcpy(t->h + t->n, add, nadd * sizeof(*add));
		t->n += nadd;
	}
	rc = tlog_tree_hash(root, (int64_t)n, table_read, t);
	GD_ASSERT(rc == 0);
}

/* Where the parts of a record's fixed head sit (opsig.h): version (1),
 * count (4, big-endian), sig, prev, root. */
#define REC_COUNT 1
#define REC_SIG   (REC_COUNT + 4)
#define REC_PREV  (REC_SIG + OPSIG_SIG_LEN)
#define REC_ROOT  (REC_PREV + OPSIG_HASH_LEN)

static void put_rec_head(struct buf *rec,
                         uint32_t count,
                         const uint8_t *sig,
                         const uint8_t *prev,
                         const uint8_t *root)
{
	uint8_t h[OPSIG_REC_HEAD];

	h[0] = OPSIG_REC_VERSION;
	h[REC_COUNT] = (uint8_t)(count >> 24);
	h[REC_COUNT + 1] = (uint8_t)(count >> 16);
	h[REC_COUNT + 2] = (uint8_t)(count >> 8);
	h[REC_COUNT + 3] = (uint8_t)count;
	memcpy(h + REC_SIG, sig, OPSIG_SIG_LEN);
	memcpy(h + REC_PREV, prev, OPSIG_HASH_LEN);
	memcpy(h + REC_ROOT, root, OPSIG_HASH_LEN);
	buf_reset(rec);
	buf_add(rec, h, sizeof(h));
}

int opsig_sign_batch_logged(const struct opsig_signer *s,
                            uint8_t chain[OPSIG_HASH_LEN],
                            struct buf *const *ops,
                            size_t n,
                            struct buf *const *logged,
                            struct buf *rec)
{
	struct table t = {0};
	struct tlog_hash root, proof[TLOG_MAX_PROOF];
	ProtobufCBinaryData pb[TLOG_MAX_PROOF];
	uint8_t msg[MSG_LEN], prev[OPSIG_HASH_LEN];
	uint8_t sig[OPSIG_SIG_LEN];
	Grantd__V1__OpSig m = GRANTD__V1__OP_SIG__INIT;
	Grantd__V1__OpSig c = GRANTD__V1__OP_SIG__INIT;

	if (n == 0 || n > OPSIG_MAX_BATCH || (!logged != !rec))
		return GD_EINVAL;
	build_tree(&t, &root, ops, n);
	memcpy(prev, chain, OPSIG_HASH_LEN);
	batch_msg(msg, prev, &root);
	crypto_sign_detached(sig, NULL, msg, sizeof(msg), s->key.sk);
	crypto_hash_sha256(chain, msg, sizeof(msg));
	m.sig = (ProtobufCBinaryData){OPSIG_SIG_LEN, sig};
	m.has_sig = 1;
	m.prev = (ProtobufCBinaryData){OPSIG_HASH_LEN, prev};
	m.has_prev = 1;
	m.root = (ProtobufCBinaryData){OPSIG_HASH_LEN, root.b};
	m.has_root = 1;
	m.count = (uint32_t)n, m.has_count = 1;
	m.has_index = 1;
	m.path = pb;
	c.count = (uint32_t)n, c.has_count = 1;
	c.has_index = 1;
	for (size_t i = 0; i < n; i++) {
		size_t np = 0;
		int rc = tlog_prove_record(proof, &np, (int64_t)n, (int64_t)i,
		                           table_read, &t);
		GD_ASSERT(rc == 0);
		for (size_t j = 0; j < np; j++)
			pb[j] = (ProtobufCBinaryData){OPSIG_HASH_LEN,
			                              proof[j].b};
		m.n_path = np;
		m.index = (uint32_t)i;
		if (logged) {
			/* the compact form: the path is read from the
			 * record's table (opsig_expand) */
			c.index = (uint32_t)i;
			buf_reset(logged[i]);
			buf_add(logged[i], ops[i]->p, ops[i]->len);
			append_sig(logged[i], &c);
		}
		append_sig(ops[i], &m);
	}
	if (rec) {
		put_rec_head(rec, (uint32_t)n, sig, prev, root.b);
		GD_ASSERT((int64_t)t.n == tlog_stored_count((int64_t)n));
		buf_add(rec, t.h, t.n * sizeof(*t.h));
	}
	free(t.h);
	return 0;
}

int opsig_sign_batch(const struct opsig_signer *s,
                     uint8_t chain[OPSIG_HASH_LEN],
                     struct buf *const *ops,
                     size_t n)
{
	return opsig_sign_batch_logged(s, chain, ops, n, NULL, NULL);
}

/* ---- the log's compact form -------------------------------------------- */

static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t c = *(*p)++;
		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return true;
	}
	return false;
}

/* Field 30 of a packed Op: its whole span [*at, *at + *span) and its
 * payload.  0, GD_ENOTFOUND (none), or GD_EPROTO (the bytes do not walk,
 * or field 30 twice: the log never holds that). */
static int sig_field(const uint8_t *op,
                     size_t len,
                     size_t *at,
                     size_t *span,
                     const uint8_t **pay,
                     size_t *plen)
{
	const uint8_t *p = op, *end = op + len;
	bool found = false;

	while (p < end) {
		const uint8_t *start = p;
		uint64_t tag, v;
		if (!get_varint(&p, end, &tag))
			return GD_EPROTO;
		switch (tag & 7) {
		case 0:
			if (!get_varint(&p, end, &v))
				return GD_EPROTO;
			break;
		case 1:
		case 5:
			v = (tag & 7) == 1 ? 8 : 4;
			if ((size_t)(end - p) < v)
				return GD_EPROTO;
			p += v;
			break;
		case 2:
			if (!get_varint(&p, end, &v) || (uint64_t)(end - p) < v)
				return GD_EPROTO;
			if (tag >> 3 == 30) {
				if (found)
					return GD_EPROTO;
				found = true;
				*at = (size_t)(start - op);
				*span = (size_t)(p + v - start);
				*pay = p;
				*plen = (size_t)v;
			}
			p += v;
			break;
		default: /* groups: never in an Op */
			return GD_EPROTO;
		}
	}
	return found ? 0 : GD_ENOTFOUND;
}

/* The OpSig of a packed Op, decoded (*out NULL: none).  0 or GD_EPROTO. */
static int op_sig(const uint8_t *op,
                  size_t len,
                  Grantd__V1__OpSig **out,
                  size_t *at,
                  size_t *span)
{
	const uint8_t *pay;
	size_t plen;
	int rc = sig_field(op, len, at, span, &pay, &plen);

	*out = NULL;
	if (rc == GD_ENOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	*out = grantd__v1__op_sig__unpack(NULL, plen, pay);
	return *out ? 0 : GD_EPROTO;
}

/* Is m a compact OpSig in bounds?  Sets *last from the op's seq. */
static bool compact_ok(const Grantd__V1__OpSig *m, uint64_t seq, uint64_t *last)
{
	if (m->has_sig || m->has_prev || m->has_root || !m->has_index ||
	    !m->has_count || m->count == 0 || m->count > OPSIG_MAX_BATCH ||
	    m->index >= m->count || seq < m->index ||
	    seq - m->index > UINT64_MAX - (m->count - 1))
		return false;
	*last = seq - m->index + (m->count - 1);
	return true;
}

int opsig_compact(struct buf *packed,
                  struct buf *rec,
                  uint64_t *last,
                  const Grantd__V1__Op *op)
{
	const Grantd__V1__OpSig *m = op->sig;
	Grantd__V1__OpSig c;
	Grantd__V1__Op o;

	if (!m || !m->has_sig || m->sig.len != OPSIG_SIG_LEN || !m->has_prev ||
	    m->prev.len != OPSIG_HASH_LEN || !m->has_root ||
	    m->root.len != OPSIG_HASH_LEN)
		return GD_ENOTFOUND;
	c = *m;
	c.has_sig = c.has_prev = c.has_root = 0;
	if (!compact_ok(&c, op->seq, last))
		return GD_ENOTFOUND;
	o = *op;
	o.sig = &c;
	buf_reset(packed);
	grantd__v1__op__pack(
	        &o, buf_extend(packed, grantd__v1__op__get_packed_size(&o)));
	put_rec_head(rec, m->count, m->sig.data, m->prev.data, m->root.data);
	return 0;
}

int opsig_compact_last(const uint8_t *op,
                       size_t len,
                       uint64_t seq,
                       uint64_t *last)
{
	Grantd__V1__OpSig *m;
	size_t at, span;
	int rc = op_sig(op, len, &m, &at, &span);

	if (rc < 0 || !m)
		return rc;
	rc = m->has_sig ? 0 : compact_ok(m, seq, last) ? 1 : GD_EPROTO;
	grantd__v1__op_sig__free_unpacked(m, NULL);
	return rc;
}

/* The record's table of stored hashes, read by tlog. */
struct rec_table {
	const uint8_t *h;
	int64_t n;
};

static int
rec_read(struct tlog_hash *out, const int64_t *idx, size_t n, void *payload)
{
	const struct rec_table *t = payload;

	for (size_t i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] >= t->n)
			return GD_EPROTO;
		memcpy(out[i].b, t->h + idx[i] * OPSIG_HASH_LEN,
		       OPSIG_HASH_LEN);
	}
	return 0;
}

int opsig_expand(struct buf *out,
                 const uint8_t *op,
                 size_t len,
                 uint64_t seq,
                 const uint8_t *rec,
                 size_t rlen)
{
	struct tlog_hash proof[TLOG_MAX_PROOF];
	ProtobufCBinaryData pb[TLOG_MAX_PROOF];
	Grantd__V1__OpSig *m, full;
	size_t at, span;
	uint64_t last;
	int rc = op_sig(op, len, &m, &at, &span);

	if (rc < 0 || !m)
		return GD_EPROTO;
	rc = GD_EPROTO;
	if (!compact_ok(m, seq, &last) || rlen < OPSIG_REC_HEAD ||
	    rec[0] != OPSIG_REC_VERSION ||
	    ((uint32_t)rec[REC_COUNT] << 24 |
	     (uint32_t)rec[REC_COUNT + 1] << 16 |
	     (uint32_t)rec[REC_COUNT + 2] << 8 | rec[REC_COUNT + 3]) !=
	            m->count)
		goto out;
	full = *m;
	full.sig =
	        (ProtobufCBinaryData){OPSIG_SIG_LEN, (uint8_t *)rec + REC_SIG};
	full.prev = (ProtobufCBinaryData){OPSIG_HASH_LEN,
	                                  (uint8_t *)rec + REC_PREV};
	full.root = (ProtobufCBinaryData){OPSIG_HASH_LEN,
	                                  (uint8_t *)rec + REC_ROOT};
	full.has_sig = full.has_prev = full.has_root = 1;
	if (!m->n_path && m->count > 1) {
		/* a batch this site signed: its path is in the table */
		struct rec_table t = {rec + OPSIG_REC_HEAD,
		                      tlog_stored_count(m->count)};
		size_t np = 0;
		if (rlen != OPSIG_REC_HEAD + (size_t)t.n * OPSIG_HASH_LEN ||
		    tlog_prove_record(proof, &np, m->count, m->index, rec_read,
		                      &t) < 0)
			goto out;
		for (size_t j = 0; j < np; j++)
			pb[j] = (ProtobufCBinaryData){OPSIG_HASH_LEN,
			                              proof[j].b};
		full.path = pb;
		full.n_path = np;
	}
	buf_add(out, op, at);
	buf_add(out, op + at + span, len - at - span);
	append_sig(out, &full);
	rc = 0;
out:
	grantd__v1__op_sig__free_unpacked(m, NULL);
	return rc;
}

/* ---- checking -------------------------------------------------------- */

void opsig_verifier_init(struct opsig_verifier *v)
{
	memset(v, 0, sizeof(*v));
}

/* The first key of origin at or after *at (then *at is its index). */
static const struct opsig_key *
key_of(const struct opsig_verifier *v, const char *origin, size_t *at)
{
	for (size_t i = *at; i < v->nkeys; i++)
		if (!strcmp(v->keys[i].origin, origin)) {
			*at = i;
			return &v->keys[i];
		}
	return NULL;
}

int opsig_verifier_add(struct opsig_verifier *v,
                       const char *origin,
                       const uint8_t pub[OPSIG_PUB_LEN])
{
	const struct opsig_key *k;
	size_t at = 0;

	if (!origin || strlen(origin) >= sizeof(v->keys[0].origin))
		return GD_EINVAL;
	for (; (k = key_of(v, origin, &at)); at++)
		if (!memcmp(k->pub, pub, OPSIG_PUB_LEN))
			return 0;
	if (v->nkeys == OPSIG_MAX_KEYS)
		return GD_EINVAL;
	memcpy(v->keys[v->nkeys].origin, origin, strlen(origin) + 1);
	memcpy(v->keys[v->nkeys].pub, pub, OPSIG_PUB_LEN);
	v->nkeys++;
	return 0;
}

bool opsig_key_names_site(const char *name, const char *site)
{
	size_t n = strlen(name), m = strlen(site), t = strlen("/grantd/");

	return n > m + t && !strcmp(name + n - m, site) &&
	       !strncmp(name + n - m - t, "/grantd/", t);
}

/* Add every key of p's verifier_key (one or more, blank-separated: the
 * current one, then old ones kept after a rotation).  Returns 0 or
 * GD_EINVAL with *why. */
static int peer_keys(struct opsig_verifier *v,
                     const struct config_peer *p,
                     const struct opsig_signer *own,
                     const char **why)
{
	struct note_vkey k;
	const char *s = p->verifier_key;
	size_t n;

	while (*(s += strspn(s, " \t"))) {
		n = strcspn(s, " \t");
		*why = "not NAME+HEXID+BASE64 (grantctl log key prints it)";
		if (note_vkey_parse(&k, s, n) < 0)
			return GD_EINVAL;
		s += n;
		*why = "not an Ed25519 signing key (algorithm 1)";
		if (k.alg != NOTE_ALG_ED25519)
			return GD_EINVAL;
		*why = "it names another site (want HOST/grantd/SITE of this "
		       "[peer]: grantctl log key at that site prints it)";
		if (!opsig_key_names_site(k.name, p->site))
			return GD_EINVAL;
		*why = "it is this node's own key";
		if (!memcmp(k.pub, own->key.pub, OPSIG_PUB_LEN))
			return GD_EINVAL;
		*why = "too many keys";
		if (opsig_verifier_add(v, p->site, k.pub) < 0)
			return GD_EINVAL;
	}
	return 0;
}

int opsig_config_keys(struct opsig_verifier *v,
                      const struct config *c,
                      const struct opsig_signer *own,
                      struct buf *err)
{
	const char *why = NULL;

	opsig_verifier_init(v);
	for (int i = 0; i < c->npeers; i++) {
		const struct config_peer *p = &c->peers[i];
		if (p->verifier_key && peer_keys(v, p, own, &why) < 0) {
			buf_printf(err, "%s:%d: [peer %s] verifier_key: %s",
			           c->path, p->vkey_line, p->site, why);
			return GD_EINVAL;
		}
	}
	return opsig_verifier_add(v, c->site, own->key.pub);
}

bool opsig_verifier_has(const struct opsig_verifier *v, const char *origin)
{
	size_t at = 0;

	return origin && key_of(v, origin, &at);
}

/* The cache slot of (key, chain): direct-mapped, a collision replaces. */
static size_t slot(size_t key, const uint8_t chain[OPSIG_HASH_LEN])
{
	uint32_t h;

	memcpy(&h, chain, sizeof(h)); /* a hash already: any 4 bytes do */
	return (h ^ (uint32_t)key * 0x9e3779b1u) % OPSIG_CACHE;
}

static bool cached(const struct opsig_verifier *v,
                   size_t key,
                   const uint8_t chain[OPSIG_HASH_LEN])
{
	size_t i = slot(key, chain);

	return v->cache[i].used && v->cache[i].key == key &&
	       !memcmp(v->cache[i].chain, chain, OPSIG_HASH_LEN);
}

/* Remember that keys[key] vouched for chain (a batch it signed, or the
 * prev of one).  Zeros are no batch's chain value: never kept. */
static void remember(struct opsig_verifier *v,
                     size_t key,
                     const uint8_t chain[OPSIG_HASH_LEN])
{
	static const uint8_t zero[OPSIG_HASH_LEN];
	size_t i = slot(key, chain);

	if (!memcmp(chain, zero, OPSIG_HASH_LEN))
		return;
	memcpy(v->cache[i].chain, chain, OPSIG_HASH_LEN);
	v->cache[i].key = key;
	v->cache[i].used = true;
}

static bool sig_shape_ok(const Grantd__V1__OpSig *m)
{
	if (!m->has_sig || m->sig.len != OPSIG_SIG_LEN || !m->has_root ||
	    m->root.len != OPSIG_HASH_LEN || !m->has_prev ||
	    m->prev.len != OPSIG_HASH_LEN || !m->has_count || !m->has_index ||
	    m->count == 0 || m->count > OPSIG_MAX_BATCH ||
	    m->index >= m->count || m->n_path > TLOG_MAX_PROOF)
		return false;
	for (size_t i = 0; i < m->n_path; i++)
		if (m->path[i].len != OPSIG_HASH_LEN)
			return false;
	return true;
}

/* The leaf hash of op packed without its signature. */
static void op_leaf(struct tlog_hash *out, const Grantd__V1__Op *op)
{
	Grantd__V1__Op bare = *op;
	struct buf b = BUF_INIT;
	size_t n;

	bare.sig = NULL;
	n = grantd__v1__op__get_packed_size(&bare);
	grantd__v1__op__pack(&bare, buf_extend(&b, n));
	tlog_leaf_hash(out, b.p, b.len);
	sodium_memzero(b.p, b.len); /* an enrollment's secret */
	buf_free(&b);
}

/* Does m's proof put leaf at m->index of the tree m->root? */
static bool proof_ok(const Grantd__V1__OpSig *m,
                     const struct tlog_hash *leaf,
                     const struct tlog_hash *root)
{
	struct tlog_hash proof[TLOG_MAX_PROOF];

	for (size_t i = 0; i < m->n_path; i++)
		memcpy(proof[i].b, m->path[i].data, OPSIG_HASH_LEN);
	return tlog_check_record(proof, m->n_path, m->count, root, m->index,
	                         leaf) == 0;
}

/* Did the key at keys[at] sign the batch (prev, root)?  A batch checked
 * before, or vouched for as the prev of a checked one, passes with a
 * hash; a batch that passes vouches for its own prev. */
static bool batch_signed(struct opsig_verifier *v,
                         size_t at,
                         const uint8_t prev[OPSIG_HASH_LEN],
                         const struct tlog_hash *root,
                         const uint8_t sig[OPSIG_SIG_LEN])
{
	uint8_t msg[MSG_LEN], chain[OPSIG_HASH_LEN];

	batch_msg(msg, prev, root);
	crypto_hash_sha256(chain, msg, sizeof(msg));
	if (cached(v, at, chain)) {
		v->cache_hits++;
	} else {
		v->verifies++;
		if (crypto_sign_verify_detached(sig, msg, sizeof(msg),
		                                v->keys[at].pub) != 0)
			return false;
		remember(v, at, chain);
	}
	remember(v, at, prev);
	return true;
}

enum opsig_verdict opsig_verify(struct opsig_verifier *v,
                                const Grantd__V1__Op *op,
                                struct buf *why)
{
	const Grantd__V1__OpSig *m = op->sig;
	struct tlog_hash leaf, root;
	enum opsig_verdict d;
	size_t at = 0;

	if (!op->origin || !key_of(v, op->origin, &at))
		return OPSIG_NO_KEY;
	if (!m) {
		d = OPSIG_MISSING;
		goto refused;
	}
	if (!sig_shape_ok(m)) {
		d = OPSIG_MALFORMED;
		goto refused;
	}
	op_leaf(&leaf, op);
	memcpy(root.b, m->root.data, OPSIG_HASH_LEN);
	d = OPSIG_BAD;
	if (!proof_ok(m, &leaf, &root))
		goto refused;
	for (; key_of(v, op->origin, &at); at++)
		if (batch_signed(v, at, m->prev.data, &root, m->sig.data))
			return OPSIG_OK;
refused:
	if (why)
		buf_printf(why, "%s (origin %s)", opsig_verdict_text(d),
		           op->origin);
	return d;
}

void opsig_verify_run(struct opsig_verifier *v,
                      const Grantd__V1__Op *const *ops,
                      size_t n,
                      enum opsig_verdict *d)
{
	for (size_t i = n; i-- > 0;) {
		enum opsig_verdict x = opsig_verify(v, ops[i], NULL);
		if (d)
			d[i] = x;
	}
}

const char *opsig_verdict_text(enum opsig_verdict d)
{
	switch (d) {
	case OPSIG_OK:
		return "signed";
	case OPSIG_NO_KEY:
		return "no key";
	case OPSIG_MISSING:
		return "unsigned";
	case OPSIG_MALFORMED:
		return "malformed signature";
	case OPSIG_BAD:
		return "bad signature";
	}
	return "?";
}
