/*
 * records.c: the table of record kinds, their keys and their live tests.
 *
 * Why a table expanded by macros (SQLite's mkopcodeh idea, done with the
 * preprocessor): a kind of record used to be listed by hand in six places
 * (the enum, the family names, ops.c's families, ops_check, the families
 * of state transfer, status), and a place forgotten failed silently; now
 * it is one row, and the unit test checks the rows.
 */
#include <sodium.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "err.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

static const struct records_kind kinds[CF__COUNT] = {
#define RECORDS_ROW(c, n, b, d, m, s, sn, l, mi)                                     \
	[CF_##c] = { .cf = CF_##c,                                             \
		     .name = n,                                                \
		     .body = GRANTD__V1__OP__BODY_##b,                         \
		     .desc = d,                                                \
		     .merge = m,                                               \
		     .sealed = s,                                              \
		     .snap = sn,                                               \
		     .live = l,                                                \
		     .mirror = mi },
	GD_RECORD_KINDS(RECORDS_ROW)
#undef RECORDS_ROW
};

const struct records_kind *records_kind(enum store_cf cf)
{
	return (int)cf >= 0 && cf < CF__COUNT ? &kinds[cf] : NULL;
}

const struct records_kind *records_by_body(Grantd__V1__Op__BodyCase body)
{
	if (body == GRANTD__V1__OP__BODY__NOT_SET)
		return NULL;
	for (int i = 0; i < CF__COUNT; i++)
		if (kinds[i].body == body)
			return &kinds[i];
	return NULL;
}

bool records_replicated(enum store_cf cf)
{
	const struct records_kind *k = records_kind(cf);
	return k && k->merge != RECORDS_LOCAL;
}

bool records_mirror_visible(enum store_cf cf)
{
	const struct records_kind *k = records_kind(cf);
	return k && k->merge != RECORDS_LOCAL && k->mirror;
}

bool records_live_at(enum store_cf cf, const void *val, size_t vlen,
		     int64_t now)
{
	const struct records_kind *k = records_kind(cf);
	int64_t until;

	return k && k->live && k->live(val, vlen, &until) && until > now;
}

bool records_live_user(const void *val, size_t vlen, int64_t *until)
{
	Grantd__V1__User *u = grantd__v1__user__unpack(NULL, vlen, val);
	bool live = u && !u->deleted;

	*until = INT64_MAX;
	if (u)
		grantd__v1__user__free_unpacked(u, NULL);
	return live;
}

bool records_live_grant(const void *val, size_t vlen, int64_t *until)
{
	Grantd__V1__Grant *g = grantd__v1__grant__unpack(NULL, vlen, val);
	bool live = g && !g->revoked;

	*until = g ? g->expires : 0;
	if (g)
		grantd__v1__grant__free_unpacked(g, NULL);
	return live;
}

bool records_live_repo(const void *val, size_t vlen, int64_t *until)
{
	Grantd__V1__Repo *r = grantd__v1__repo__unpack(NULL, vlen, val);
	bool live = r && !r->deleted;

	*until = INT64_MAX;
	if (r)
		grantd__v1__repo__free_unpacked(r, NULL);
	return live;
}

bool records_live_ref(const void *val, size_t vlen, int64_t *until)
{
	Grantd__V1__Ref *f = grantd__v1__ref__unpack(NULL, vlen, val);
	bool live = f && f->target && *f->target;

	*until = INT64_MAX;
	if (f)
		grantd__v1__ref__free_unpacked(f, NULL);
	return live;
}

bool records_live_pushlog(const void *val, size_t vlen, int64_t *until)
{
	Grantd__V1__PushLogEntry *e =
		grantd__v1__push_log_entry__unpack(NULL, vlen, val);

	*until = INT64_MAX;
	if (!e)
		return false;
	grantd__v1__push_log_entry__free_unpacked(e, NULL);
	return true;
}

/* ---- keys ---- */

static void put_be64(struct buf *k, uint64_t v)
{
	uint8_t be[8];
	for (int i = 0; i < 8; i++)
		be[i] = (uint8_t)(v >> (56 - 8 * i));
	buf_add(k, be, sizeof(be));
}

void records_key_grant(struct buf *k, const char *user, const char *net,
		       const char *session)
{
	buf_reset(k);
	buf_add(k, user, strlen(user) + 1);
	buf_add(k, net, strlen(net) + 1);
	buf_add(k, session, strlen(session));
}

void records_key_mark(struct buf *k, const char *user, uint64_t enroll_id)
{
	buf_reset(k);
	buf_add(k, user, strlen(user) + 1);
	put_be64(k, enroll_id);
}

void records_key_promise(struct buf *k, const char *user, uint64_t enroll_id)
{
	records_key_mark(k, user, enroll_id);
}

int records_mark_parse(const void *key, size_t klen, struct records_span *user,
		       uint64_t *enroll_id)
{
	const char *p = key;
	const char *z = klen > 9 ? memchr(p, '\0', klen) : NULL;

	/* a non-empty user, its NUL, then exactly 8 bytes */
	if (!z || z == p || (size_t)(z - p) + 9 != klen)
		return GD_EPROTO;
	user->p = p;
	user->len = (size_t)(z - p);
	*enroll_id = 0;
	for (int i = 1; i <= 8; i++)
		*enroll_id = *enroll_id << 8 | (uint8_t)z[i];
	return 0;
}

void records_key_addr_revoke(struct buf *k, const char *user, const char *net)
{
	buf_reset(k);
	buf_add(k, user, strlen(user) + 1);
	if (net)
		buf_puts(k, net);
}

void records_key_fail(struct buf *k, const char *user, const char *site)
{
	buf_reset(k);
	buf_add(k, user, strlen(user) + 1);
	buf_add(k, site, strlen(site));
}

void records_key_ref(struct buf *k, const char *repo, const char *ref)
{
	buf_reset(k);
	buf_add(k, repo, strlen(repo) + 1);
	buf_puts(k, ref);
}

void records_key_loser(struct buf *k, const char *repo, const char *ref,
		       const char *origin, uint64_t hlc)
{
	buf_reset(k);
	buf_add(k, repo, strlen(repo) + 1);
	buf_add(k, ref, strlen(ref) + 1);
	buf_add(k, origin, strlen(origin) + 1);
	put_be64(k, hlc);
}

void records_key_vv(struct buf *k, const char *origin, uint64_t epoch)
{
	buf_reset(k);
	buf_add(k, origin, strlen(origin) + 1);
	put_be64(k, epoch);
}

void records_key_oplog(struct buf *k, const char *origin, uint64_t epoch,
		       uint64_t seq)
{
	records_key_vv(k, origin, epoch);
	put_be64(k, seq);
}

void records_key_oplog_past(struct buf *k, const void *key, size_t klen)
{
	buf_reset(k);
	buf_add(k, key, klen - 8);
	buf_add(k, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
	buf_add(k, "", 1);
}

static uint64_t get_be64(const char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | (uint8_t)p[i];
	return v;
}

/* origin \0 then exactly n 8-byte numbers: the origin's length, or -1 */
static ptrdiff_t origin_then(const char *p, size_t klen, size_t n)
{
	const char *z = klen > 8 * n ? memchr(p, '\0', klen) : NULL;

	if (!z || z == p || (size_t)(z - p) + 1 + 8 * n != klen)
		return -1;
	return z - p;
}

int records_vv_parse(const void *key,
                     size_t klen,
                     struct records_span *origin,
                     uint64_t *epoch)
{
	ptrdiff_t ol = origin_then(key, klen, 1);

	if (ol < 0)
		return GD_EPROTO;
	origin->p = key;
	origin->len = (size_t)ol;
	*epoch = get_be64((const char *)key + ol + 1);
	return 0;
}

int records_oplog_parse(const void *key,
                        size_t klen,
                        struct records_span *origin,
                        uint64_t *epoch,
                        uint64_t *seq)
{
	ptrdiff_t ol = origin_then(key, klen, 2);

	if (ol < 0)
		return GD_EPROTO;
	origin->p = key;
	origin->len = (size_t)ol;
	*epoch = get_be64((const char *)key + ol + 1);
	*seq = get_be64((const char *)key + ol + 9);
	return 0;
}

void records_key_lww(struct buf *k, const Grantd__V1__Op *op)
{
	if (op->body_case == GRANTD__V1__OP__BODY_GRANT) {
		const Grantd__V1__Grant *g = op->grant;
		records_key_grant(k, g->user, g->net,
				  g->session ? g->session : "");
		return;
	}
	if (op->body_case == GRANTD__V1__OP__BODY_ADDR_REVOKE) {
		records_key_addr_revoke(k, op->addr_revoke->user,
					op->addr_revoke->net);
		return;
	}
	/* the generated oneof is a union of pointers */
	const ProtobufCMessage *m = (const ProtobufCMessage *)op->user;
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field(m->descriptor, 1);
	const char *name;
	memcpy(&name, (const uint8_t *)m + f->offset, sizeof(name));
	buf_reset(k);
	buf_puts(k, name);
}

/* The next NUL-terminated part of key from *off (n parts of a key end in
 * NUL; the last may run to the end when last is set). */
static int next_part(const char *key, size_t klen, size_t *off, bool last,
		     struct records_span *out)
{
	size_t n;

	if (*off > klen)
		return GD_EPROTO;
	n = strnlen(key + *off, klen - *off);
	if (last ? *off + n != klen : *off + n >= klen)
		return GD_EPROTO;
	out->p = key + *off;
	out->len = n;
	*off += n + 1;
	return 0;
}

int records_grant_parse(const void *key, size_t klen,
			struct records_span *user, struct records_span *net,
			struct records_span *session)
{
	size_t off = 0;

	if (next_part(key, klen, &off, false, user) < 0 ||
	    next_part(key, klen, &off, false, net) < 0 ||
	    next_part(key, klen, &off, true, session) < 0 || !user->len ||
	    !net->len)
		return GD_EPROTO;
	return 0;
}

int records_ref_parse(const void *key, size_t klen, struct records_span *repo,
		      struct records_span *ref)
{
	size_t off = 0;

	if (next_part(key, klen, &off, false, repo) < 0 ||
	    next_part(key, klen, &off, true, ref) < 0 || !repo->len ||
	    !ref->len)
		return GD_EPROTO;
	return 0;
}

int records_loser_parse(const void *key, size_t klen,
			struct records_span *repo, struct records_span *ref,
			struct records_span *origin, uint64_t *hlc)
{
	const uint8_t *p = key;
	size_t off = 0;

	if (klen < 8 + 3)
		return GD_EPROTO;
	klen -= 8;
	if (next_part(key, klen, &off, false, repo) < 0 ||
	    next_part(key, klen, &off, false, ref) < 0 ||
	    next_part(key, klen, &off, false, origin) < 0 || off != klen ||
	    !repo->len || !ref->len || !origin->len)
		return GD_EPROTO;
	*hlc = 0;
	for (int i = 0; i < 8; i++)
		*hlc = *hlc << 8 | p[klen + i];
	return 0;
}

int records_loser_value_parse(const void *val, size_t vlen,
			      char tip[RECORDS_OID_HEX + 1], bool *kept)
{
	static const char suffix[] = " kept";

	if (vlen == RECORDS_OID_HEX)
		*kept = false;
	else if (vlen == RECORDS_OID_HEX + strlen(suffix) &&
		 !memcmp((const char *)val + RECORDS_OID_HEX, suffix,
			 strlen(suffix)))
		*kept = true;
	else
		return GD_EPROTO;
	memcpy(tip, val, RECORDS_OID_HEX);
	tip[RECORDS_OID_HEX] = '\0';
	return strspn(tip, "0123456789abcdef") == RECORDS_OID_HEX ? 0
								  : GD_EPROTO;
}

void records_loser_value(struct buf *v, const char *tip, bool kept)
{
	buf_reset(v);
	buf_puts(v, tip);
	if (kept)
		buf_puts(v, " kept");
}

/* ---- SSH keys by fingerprint ---- */

int records_ssh_fingerprint(char out[RECORDS_FP_MAX], const char *key)
{
	const char *b64 = strchr(key, ' '), *end;
	uint8_t blob[16384], h[crypto_hash_sha256_BYTES];
	size_t n;

	if (!b64)
		return GD_EINVAL;
	b64++;
	end = strchr(b64, ' ');
	if (!end)
		end = b64 + strlen(b64);
	if (sodium_base642bin(blob, sizeof(blob), b64, (size_t)(end - b64),
			      NULL, &n, NULL, sodium_base64_VARIANT_ORIGINAL) ||
	    n == 0)
		return GD_EINVAL;
	crypto_hash_sha256(h, blob, n);
	memcpy(out, "SHA256:", 7);
	sodium_bin2base64(out + 7, RECORDS_FP_MAX - 7, h, sizeof(h),
			  sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
	return 0;
}

void records_key_keyfp(struct buf *k, const char *fp, const char *user)
{
	buf_reset(k);
	buf_add(k, fp, strlen(fp) + 1);
	if (user)
		buf_puts(k, user);
}

int records_keyfp_parse(const void *key, size_t klen, struct records_span *fp,
			struct records_span *user)
{
	size_t off = 0;

	if (next_part(key, klen, &off, false, fp) < 0 ||
	    next_part(key, klen, &off, true, user) < 0 || !fp->len ||
	    !user->len)
		return GD_EPROTO;
	return 0;
}

void records_key_pushlog(struct buf *k, const char *origin, uint64_t n)
{
	buf_reset(k);
	buf_add(k, origin, strlen(origin) + 1);
	if (n)
		put_be64(k, n);
}

void records_key_pushlog_fork(struct buf *k, const char *origin, uint64_t n,
			      const uint8_t hash[32])
{
	records_key_pushlog(k, origin, n);
	buf_add(k, hash, 32);
}

int records_pushlog_parse(const void *key, size_t klen,
			  struct records_span *origin, uint64_t *n,
			  const uint8_t **fork)
{
	const char *p = key;
	size_t tail = fork && klen > 8 + 32 &&
			      memchr(p, '\0', klen - 8 - 32) ? 32 : 0;
	const char *nul = klen > 8 + tail ? memchr(p, '\0', klen - 8 - tail)
					  : NULL;

	if (!nul || nul == p || (size_t)(nul - p) + 1 + 8 + tail != klen)
		return GD_EPROTO;
	origin->p = p;
	origin->len = (size_t)(nul - p);
	*n = 0;
	for (int i = 0; i < 8; i++)
		*n = *n << 8 | (uint8_t)nul[1 + i];
	if (fork)
		*fork = tail ? (const uint8_t *)nul + 9 : NULL;
	return *n ? 0 : GD_EPROTO;
}

/* ---- transparency log leaves and hashes ---- */

bool records_live_tleaf(const void *val, size_t vlen, int64_t *until)
{
	Grantd__V1__PushLeaf *l = grantd__v1__push_leaf__unpack(NULL, vlen, val);

	*until = INT64_MAX;
	if (!l)
		return false;
	grantd__v1__push_leaf__free_unpacked(l, NULL);
	return true;
}

void records_key_tlog_origin(struct buf *k, const char *origin)
{
	buf_reset(k);
	buf_add(k, origin, strlen(origin) + 1);
}

void records_key_tleaf(struct buf *k, const char *origin, uint64_t index)
{
	records_key_tlog_origin(k, origin);
	put_be64(k, index);
}

void records_key_tleaf_fork(struct buf *k, const char *origin,
			    uint64_t index, const uint8_t hash[32])
{
	records_key_tleaf(k, origin, index);
	buf_add(k, hash, 32);
}

int records_tleaf_parse(const void *key, size_t klen,
			struct records_span *origin, uint64_t *index,
			const uint8_t **fork)
{
	ptrdiff_t ol = origin_then(key, klen, 1);
	size_t tail = 0;

	/* a fork key: origin \0 index hash(32), its origin without NUL */
	if (ol < 0 && klen > 8 + 32) {
		ol = origin_then(key, klen - 32, 1);
		tail = 32;
	}
	if (ol < 0)
		return GD_EPROTO;
	origin->p = key;
	origin->len = (size_t)ol;
	*index = get_be64((const char *)key + ol + 1);
	*fork = tail ? (const uint8_t *)key + ol + 9 : NULL;
	return 0;
}

void records_key_thash(struct buf *k, const char *origin, int64_t index)
{
	records_key_tlog_origin(k, origin);
	put_be64(k, (uint64_t)index);
}

void records_pack(struct buf *out, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	buf_reset(out);
	protobuf_c_message_pack(m, buf_extend(out, n));
}

/* ---- the operations of a record ---- */

void records_key_recops(struct buf *k,
                        enum store_cf cf,
                        const void *key,
                        size_t klen)
{
	uint8_t c = (uint8_t)cf;

	GD_ASSERT(records_replicated(cf));
	buf_reset(k);
	buf_add(k, &c, 1);
	buf_add(k, key, klen);
}

int records_recops_parse(const void *key,
                         size_t klen,
                         enum store_cf *cf,
                         struct records_span *rkey)
{
	const uint8_t *p = key;

	if (klen < 2 || !records_replicated((enum store_cf)p[0]))
		return GD_EPROTO;
	*cf = (enum store_cf)p[0];
	rkey->p = (const char *)p + 1;
	rkey->len = klen - 1;
	return 0;
}

int records_fail_parse(const void *key,
                       size_t klen,
                       struct records_span *user,
                       struct records_span *site)
{
	size_t off = 0;

	if (next_part(key, klen, &off, false, user) < 0 ||
	    next_part(key, klen, &off, true, site) < 0 || !user->len ||
	    !site->len)
		return GD_EPROTO;
	return 0;
}

void records_op_wipe(Grantd__V1__Op *op)
{
	if (op && op->body_case == GRANTD__V1__OP__BODY_ENROLL &&
	    op->enroll && op->enroll->secret.data)
		sodium_memzero(op->enroll->secret.data, op->enroll->secret.len);
}
