/*
 * opsig.c: signed operations; the contract is opsig.h.
 */
#include <sodium.h>
#include <zmq.h>
#include <string.h>

#include "config.h"
#include "err.h"
#include "opsig.h"
#include "xalloc.h"
#include "banned.h"

static const char kdf_ctx[crypto_kdf_CONTEXTBYTES] = {'g', 'r', 'a', 'n',
                                                      't', 'd', 's', 'g'};

/* ---- keys ------------------------------------------------------------ */

static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > OPSIG_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		/* signed-note: no Unicode spaces nor '+'; we keep to ASCII */
		if (c <= ' ' || c >= 0x7f || c == '+')
			return false;
	}
	return true;
}

int opsig_key_name(char out[OPSIG_NAME_MAX + 1],
                   const char *host,
                   const char *site)
{
	const char *at = host ? strchr(host, '@') : NULL;
	const char *h = at ? at + 1 : host;
	int n;

	if (!h || !*h)
		h = "localhost";
	n = snprintf(out, OPSIG_NAME_MAX + 1, "%s/grantd/%s", h, site);
	if (n < 0 || n > OPSIG_NAME_MAX || !name_ok(out))
		return GD_EINVAL;
	return 0;
}

/* The signed-note key hash: the first 4 bytes (big-endian) of
 * SHA-256(name || "\n" || 0x01 || pub). */
static uint32_t key_id(const char *name, const uint8_t pub[OPSIG_PUB_LEN])
{
	crypto_hash_sha256_state st;
	uint8_t h[crypto_hash_sha256_BYTES];
	static const uint8_t sep[2] = {'\n', 0x01};

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const uint8_t *)name, strlen(name));
	crypto_hash_sha256_update(&st, sep, sizeof(sep));
	crypto_hash_sha256_update(&st, pub, OPSIG_PUB_LEN);
	crypto_hash_sha256_final(&st, h);
	return (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
	       (uint32_t)h[2] << 8 | h[3];
}

int opsig_signer_init(struct opsig_signer *s,
                      const uint8_t curve_sec[32],
                      const char *name)
{
	uint8_t seed[crypto_sign_SEEDBYTES];

	memset(s, 0, sizeof(*s));
	if (!name_ok(name))
		return GD_EINVAL;
	memcpy(s->name, name, strlen(name) + 1);
	crypto_kdf_derive_from_key(seed, sizeof(seed), 1, kdf_ctx, curve_sec);
	crypto_sign_seed_keypair(s->pub, s->sec, seed);
	sodium_memzero(seed, sizeof(seed));
	s->key_id = key_id(s->name, s->pub);
	return 0;
}

int opsig_signer_load(struct opsig_signer *s,
                      const char *keyfile,
                      const char *host,
                      const char *site,
                      struct buf *err)
{
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	char name[OPSIG_NAME_MAX + 1];
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

void opsig_signer_wipe(struct opsig_signer *s)
{
	sodium_memzero(s->sec, sizeof(s->sec));
}

void opsig_vkey_format(char out[OPSIG_VKEY_MAX],
                       const char *name,
                       const uint8_t pub[OPSIG_PUB_LEN])
{
	uint8_t raw[1 + OPSIG_PUB_LEN] = {0x01};
	char b64[sodium_base64_ENCODED_LEN(sizeof(raw),
	                                   sodium_base64_VARIANT_ORIGINAL)];

	memcpy(raw + 1, pub, OPSIG_PUB_LEN);
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw),
	                  sodium_base64_VARIANT_ORIGINAL);
	snprintf(out, OPSIG_VKEY_MAX, "%s+%08x+%s", name,
	         (unsigned)key_id(name, pub), b64);
}

int opsig_vkey_parse(const char *s,
                     char *name,
                     uint8_t pub[OPSIG_PUB_LEN],
                     const char **why)
{
	const char *p1 = strchr(s, '+'), *p2 = p1 ? strchr(p1 + 1, '+') : NULL;
	uint8_t raw[1 + OPSIG_PUB_LEN];
	size_t rawlen = 0, nlen;
	char hex[9];
	unsigned long id;
	char *end;

	*why = "not NAME+HEXID+BASE64 (grantctl log key prints it)";
	if (!p1 || !p2 || p2 - p1 != 9) /* the base64 may hold a + */
		return GD_EINVAL;
	nlen = (size_t)(p1 - s);
	if (nlen == 0 || nlen > OPSIG_NAME_MAX)
		return GD_EINVAL;
	memcpy(name, s, nlen);
	name[nlen] = '\0';
	if (!name_ok(name))
		return GD_EINVAL;
	memcpy(hex, p1 + 1, 8);
	hex[8] = '\0';
	id = strtoul(hex, &end, 16);
	if (*end || strspn(hex, "0123456789abcdef") != 8)
		return GD_EINVAL;
	if (sodium_base642bin(raw, sizeof(raw), p2 + 1, strlen(p2 + 1), NULL,
	                      &rawlen, NULL,
	                      sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    rawlen != sizeof(raw)) {
		*why = "its key is not 33 bytes of base64";
		return GD_EINVAL;
	}
	if (raw[0] != 0x01) {
		*why = "not an Ed25519 key (algorithm byte is not 1)";
		return GD_EINVAL;
	}
	memcpy(pub, raw + 1, OPSIG_PUB_LEN);
	if (key_id(name, pub) != id) {
		*why = "its key id does not match its name and key";
		return GD_EINVAL;
	}
	*why = NULL;
	return 0;
}

/* ---- the batch's Merkle tree (RFC 6962 section 2.1) --------------------- */

void opsig_leaf(uint8_t out[OPSIG_HASH_LEN], const void *op, size_t len)
{
	crypto_hash_sha256_state st;
	static const uint8_t zero = 0x00;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, &zero, 1);
	crypto_hash_sha256_update(&st, op, len);
	crypto_hash_sha256_final(&st, out);
}

static void node_hash(uint8_t out[OPSIG_HASH_LEN],
                      const uint8_t l[OPSIG_HASH_LEN],
                      const uint8_t r[OPSIG_HASH_LEN])
{
	crypto_hash_sha256_state st;
	static const uint8_t one = 0x01;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, &one, 1);
	crypto_hash_sha256_update(&st, l, OPSIG_HASH_LEN);
	crypto_hash_sha256_update(&st, r, OPSIG_HASH_LEN);
	crypto_hash_sha256_final(&st, out);
}

/* The largest power of two below n (n > 1). */
static size_t split(size_t n)
{
	size_t k = 1;

	while (k << 1 < n)
		k <<= 1;
	return k;
}

/* MTH(leaves[0:n]). */
static void tree_hash(uint8_t out[OPSIG_HASH_LEN],
                      const uint8_t (*leaves)[OPSIG_HASH_LEN],
                      size_t n)
{
	uint8_t l[OPSIG_HASH_LEN], r[OPSIG_HASH_LEN];
	size_t k;

	if (n == 1) {
		memcpy(out, leaves[0], OPSIG_HASH_LEN);
		return;
	}
	k = split(n);
	tree_hash(l, leaves, k);
	tree_hash(r, leaves + k, n - k);
	node_hash(out, l, r);
}

/* PATH(m, leaves[0:n]), leaf first, into path (np so far). */
static void tree_path(uint8_t (*path)[OPSIG_HASH_LEN],
                      size_t *np,
                      size_t m,
                      const uint8_t (*leaves)[OPSIG_HASH_LEN],
                      size_t n)
{
	size_t k;

	if (n == 1)
		return;
	k = split(n);
	if (m < k) {
		tree_path(path, np, m, leaves, k);
		tree_hash(path[(*np)++], leaves + k, n - k);
	} else {
		tree_path(path, np, m - k, leaves + k, n - k);
		tree_hash(path[(*np)++], leaves, k);
	}
}

/* The root that (index, count, leaf, path) make (RFC 9162 2.1.3.2);
 * false when the path has the wrong length for them. */
static bool root_from_path(uint8_t root[OPSIG_HASH_LEN],
                           uint64_t index,
                           uint64_t count,
                           const uint8_t leaf[OPSIG_HASH_LEN],
                           ProtobufCBinaryData *path,
                           size_t np)
{
	uint64_t fn = index, sn = count - 1;
	uint8_t r[OPSIG_HASH_LEN];

	memcpy(r, leaf, OPSIG_HASH_LEN);
	for (size_t i = 0; i < np; i++) {
		if (sn == 0)
			return false;
		if ((fn & 1) || fn == sn) {
			node_hash(r, path[i].data, r);
			while (!(fn & 1) && fn != 0) {
				fn >>= 1;
				sn >>= 1;
			}
		} else {
			node_hash(r, r, path[i].data);
		}
		fn >>= 1;
		sn >>= 1;
	}
	if (sn != 0)
		return false;
	memcpy(root, r, OPSIG_HASH_LEN);
	return true;
}

/* ---- signing --------------------------------------------------------- */

static void root_sign(uint8_t sig[OPSIG_SIG_LEN],
                      const struct opsig_signer *s,
                      const uint8_t root[OPSIG_HASH_LEN])
{
	uint8_t msg[sizeof(OPSIG_DOMAIN) - 1 + OPSIG_HASH_LEN];

	memcpy(msg, OPSIG_DOMAIN, sizeof(OPSIG_DOMAIN) - 1);
	memcpy(msg + sizeof(OPSIG_DOMAIN) - 1, root, OPSIG_HASH_LEN);
	crypto_sign_detached(sig, NULL, msg, sizeof(msg), s->sec);
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

int opsig_sign_batch(const struct opsig_signer *s,
                     struct buf *const *ops,
                     size_t n)
{
	uint8_t(*leaves)[OPSIG_HASH_LEN];
	uint8_t path[OPSIG_MAX_PATH][OPSIG_HASH_LEN];
	ProtobufCBinaryData pb[OPSIG_MAX_PATH];
	uint8_t root[OPSIG_HASH_LEN], sig[OPSIG_SIG_LEN];
	Grantd__V1__OpSig m = GRANTD__V1__OP_SIG__INIT;

	if (n == 0 || n > OPSIG_MAX_BATCH)
		return GD_EINVAL;
	leaves = xreallocarray(NULL, n, sizeof(*leaves));
	for (size_t i = 0; i < n; i++)
		opsig_leaf(leaves[i], ops[i]->p, ops[i]->len);
	tree_hash(root, (const uint8_t(*)[OPSIG_HASH_LEN])leaves, n);
	root_sign(sig, s, root);
	m.sig = (ProtobufCBinaryData){OPSIG_SIG_LEN, sig};
	m.has_sig = 1;
	m.count = (uint32_t)n, m.has_count = 1;
	m.has_index = 1;
	m.path = pb;
	for (size_t i = 0; i < n; i++) {
		size_t np = 0;
		tree_path(path, &np, i,
		          (const uint8_t(*)[OPSIG_HASH_LEN])leaves, n);
		for (size_t j = 0; j < np; j++)
			pb[j] = (ProtobufCBinaryData){OPSIG_HASH_LEN, path[j]};
		m.n_path = np;
		m.index = (uint32_t)i;
		append_sig(ops[i], &m);
	}
	free(leaves);
	return 0;
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

/* Does name end in "/grantd/SITE"? */
static bool names_site(const char *name, const char *site)
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
	char name[OPSIG_NAME_MAX + 1], one[OPSIG_VKEY_MAX];
	uint8_t pub[OPSIG_PUB_LEN];
	const char *s = p->verifier_key;
	size_t n;

	while (*(s += strspn(s, " \t"))) {
		n = strcspn(s, " \t");
		*why = "not NAME+HEXID+BASE64 (grantctl log key prints it)";
		if (n >= sizeof(one))
			return GD_EINVAL;
		memcpy(one, s, n);
		one[n] = '\0';
		s += n;
		if (opsig_vkey_parse(one, name, pub, why) < 0)
			return GD_EINVAL;
		*why = "it names another site (want HOST/grantd/SITE of this "
		       "[peer]: grantctl log key at that site prints it)";
		if (!names_site(name, p->site))
			return GD_EINVAL;
		*why = "it is this node's own key";
		if (!memcmp(pub, own->pub, OPSIG_PUB_LEN))
			return GD_EINVAL;
		*why = "too many keys";
		if (opsig_verifier_add(v, p->site, pub) < 0)
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
	return opsig_verifier_add(v, c->site, own->pub);
}

bool opsig_verifier_has(const struct opsig_verifier *v, const char *origin)
{
	size_t at = 0;

	return origin && key_of(v, origin, &at);
}

static bool cached(const struct opsig_verifier *v,
                   size_t key,
                   const uint8_t root[OPSIG_HASH_LEN])
{
	for (size_t i = 0; i < OPSIG_CACHE; i++)
		if (v->cache[i].used && v->cache[i].key == key &&
		    !memcmp(v->cache[i].root, root, OPSIG_HASH_LEN))
			return true;
	return false;
}

static void remember(struct opsig_verifier *v,
                     size_t key,
                     const uint8_t root[OPSIG_HASH_LEN])
{
	memcpy(v->cache[v->next].root, root, OPSIG_HASH_LEN);
	v->cache[v->next].key = key;
	v->cache[v->next].used = true;
	v->next = (v->next + 1) % OPSIG_CACHE;
}

static bool sig_shape_ok(const Grantd__V1__OpSig *m)
{
	if (!m->has_sig || m->sig.len != OPSIG_SIG_LEN || !m->has_count ||
	    !m->has_index || m->count == 0 || m->count > OPSIG_MAX_BATCH ||
	    m->index >= m->count || m->n_path > OPSIG_MAX_PATH)
		return false;
	for (size_t i = 0; i < m->n_path; i++)
		if (m->path[i].len != OPSIG_HASH_LEN)
			return false;
	return true;
}

/* The leaf hash of op packed without its signature. */
static void op_leaf(uint8_t out[OPSIG_HASH_LEN], const Grantd__V1__Op *op)
{
	Grantd__V1__Op bare = *op;
	struct buf b = BUF_INIT;
	size_t n;

	bare.sig = NULL;
	n = grantd__v1__op__get_packed_size(&bare);
	grantd__v1__op__pack(&bare, buf_extend(&b, n));
	opsig_leaf(out, b.p, b.len);
	sodium_memzero(b.p, b.len); /* an enrollment's secret */
	buf_free(&b);
}

/* Did the key at keys[at] sign root (a root checked before counts)? */
static bool root_signed(struct opsig_verifier *v,
                        size_t at,
                        const uint8_t root[OPSIG_HASH_LEN],
                        const uint8_t sig[OPSIG_SIG_LEN])
{
	uint8_t msg[sizeof(OPSIG_DOMAIN) - 1 + OPSIG_HASH_LEN];

	if (cached(v, at, root)) {
		v->cache_hits++;
		return true;
	}
	memcpy(msg, OPSIG_DOMAIN, sizeof(OPSIG_DOMAIN) - 1);
	memcpy(msg + sizeof(OPSIG_DOMAIN) - 1, root, OPSIG_HASH_LEN);
	v->verifies++;
	if (crypto_sign_verify_detached(sig, msg, sizeof(msg),
	                                v->keys[at].pub) != 0)
		return false;
	remember(v, at, root);
	return true;
}

enum opsig_verdict opsig_verify(struct opsig_verifier *v,
                                const Grantd__V1__Op *op,
                                struct buf *why)
{
	const Grantd__V1__OpSig *m = op->sig;
	uint8_t leaf[OPSIG_HASH_LEN], root[OPSIG_HASH_LEN];
	enum opsig_verdict d;
	size_t at = 0;

	if (!op->origin || !key_of(v, op->origin, &at))
		return OPSIG_NO_KEY;
	if (!m) {
		d = OPSIG_MISSING;
		goto refused;
	}
	op_leaf(leaf, op);
	if (!sig_shape_ok(m) || !root_from_path(root, m->index, m->count, leaf,
	                                        m->path, m->n_path)) {
		d = OPSIG_MALFORMED;
		goto refused;
	}
	for (; key_of(v, op->origin, &at); at++)
		if (root_signed(v, at, root, m->sig.data))
			return OPSIG_OK;
	d = OPSIG_BAD;
refused:
	if (why)
		buf_printf(why, "%s (origin %s)", opsig_verdict_text(d),
		           op->origin);
	return d;
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
