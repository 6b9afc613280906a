/*
 * pushleaf.c: the text of a push log leaf, written and read (pushleaf.h).
 *
 * Why the writer checks its output with the reader: the text is a public,
 * signed-over format that outside programs parse; one set of rules (the
 * parser's) decides what a leaf may be, and the node can never publish a
 * leaf that grant-log would refuse.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "authkeys.h"
#include "err.h"
#include "names.h"
#include "pushleaf.h"
#include "xalloc.h"
#include "banned.h"

/* base64 (standard, padded) of PUSHLEAF_COMMIT_LEN bytes */
#define ADDR_B64_LEN 44

static const char *const kinds[] = {"plain", "sk-touch", "sk-pin"};
static const char *const factors[] = {"grant", "security-key", "mode-off",
                                      "not-required", "vref"};

/* ---- reading ------------------------------------------------------------ */

struct cursor {
	const char *p, *end;
};

struct span {
	const char *p;
	size_t len;
};

/* The next line "NAME VALUE\n": its value (everything after the space). */
static int next_line(struct span *val, struct cursor *c, const char *name)
{
	size_t nl = strlen(name);
	const char *eol;

	if ((size_t)(c->end - c->p) < nl + 1 || memcmp(c->p, name, nl) ||
	    c->p[nl] != ' ')
		return GD_EINVAL;
	eol = memchr(c->p, '\n', (size_t)(c->end - c->p));
	if (!eol)
		return GD_EINVAL;
	val->p = c->p + nl + 1;
	val->len = (size_t)(eol - val->p);
	c->p = eol + 1;
	return 0;
}

/* A value: non-empty, at most max bytes, no space, control or DEL byte. */
static bool token_ok(const struct span *v, size_t max)
{
	if (!v->len || v->len > max)
		return false;
	for (size_t i = 0; i < v->len; i++) {
		unsigned char ch = (unsigned char)v->p[i];
		if (ch <= 0x20 || ch >= 0x7f)
			return false;
	}
	return true;
}

/* The value of a string field into out (size max + 1): "-" is "" when
 * dash is set. */
static int take_str(char *out, size_t max, const struct span *v, bool dash)
{
	if (!token_ok(v, max))
		return GD_EINVAL;
	if (dash && v->len == 1 && v->p[0] == '-') {
		out[0] = '\0';
		return 1;
	}
	memcpy(out, v->p, v->len);
	out[v->len] = '\0';
	return 0;
}

/* A decimal number 0 .. INT64_MAX without a leading zero. */
static int take_u63(uint64_t *out, const struct span *v)
{
	uint64_t n = 0;

	if (!v->len || v->len > 19 || (v->len > 1 && v->p[0] == '0'))
		return GD_EINVAL;
	for (size_t i = 0; i < v->len; i++) {
		if (v->p[i] < '0' || v->p[i] > '9')
			return GD_EINVAL;
		n = n * 10 + (uint64_t)(v->p[i] - '0');
	}
	if (n > (uint64_t)INT64_MAX)
		return GD_EINVAL;
	*out = n;
	return 0;
}

static bool in_set(const char *s, const char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, set[i]))
			return true;
	return false;
}

static bool oid_ok(const char *s, size_t len)
{
	return len == PUSHLEAF_OID_HEX &&
	       strspn(s, "0123456789abcdef") >= PUSHLEAF_OID_HEX;
}

/* "REF OLD NEW" into r */
static int take_ref(struct pushleaf_ref *r, const struct span *v)
{
	const char *sp1 = memchr(v->p, ' ', v->len), *sp2;
	struct span ref, old, new_;

	if (!sp1)
		return GD_EINVAL;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(v->p + v->len - sp1 - 1));
	if (!sp2)
		return GD_EINVAL;
	ref = (struct span){v->p, (size_t)(sp1 - v->p)};
	old = (struct span){sp1 + 1, (size_t)(sp2 - sp1 - 1)};
	new_ = (struct span){sp2 + 1, (size_t)(v->p + v->len - sp2 - 1)};
	if (take_str(r->ref, PUSHLEAF_REF_MAX, &ref, false) < 0 ||
	    ref.len < 6 || strncmp(r->ref, "refs/", 5) ||
	    take_str(r->old, PUSHLEAF_OID_HEX, &old, false) < 0 ||
	    take_str(r->new_, PUSHLEAF_OID_HEX, &new_, false) < 0 ||
	    !oid_ok(r->old, old.len) || !oid_ok(r->new_, new_.len))
		return GD_EINVAL;
	return 0;
}

/* "addr": a commitment in base64, or "-" */
static int take_addr(struct pushleaf *l, const struct span *v)
{
	char b64[ADDR_B64_LEN + 1], again[ADDR_B64_LEN + 1];
	size_t n;
	int rc = take_str(b64, ADDR_B64_LEN, v, true);

	if (rc != 0) {
		l->has_addr = false;
		return rc < 0 ? rc : 0;
	}
	if (v->len != ADDR_B64_LEN ||
	    sodium_base642bin(l->addr, sizeof(l->addr), b64, v->len, NULL, &n,
	                      NULL, sodium_base64_VARIANT_ORIGINAL) ||
	    n != PUSHLEAF_COMMIT_LEN)
		return GD_EINVAL;
	/* one spelling only: no other padding bits */
	sodium_bin2base64(again, sizeof(again), l->addr, n,
	                  sodium_base64_VARIANT_ORIGINAL);
	if (strcmp(again, b64))
		return GD_EINVAL;
	l->has_addr = true;
	return 0;
}

/* The fields before the refs, in order. */
static int parse_head(struct pushleaf *l, struct cursor *c)
{
	char norm[PUSHLEAF_REPO_MAX + 1];
	struct span v;
	uint64_t t;
	int rc;

	if ((size_t)(c->end - c->p) < strlen(PUSHLEAF_HEADER "\n") ||
	    memcmp(c->p, PUSHLEAF_HEADER "\n", strlen(PUSHLEAF_HEADER "\n")))
		return GD_EINVAL;
	c->p += strlen(PUSHLEAF_HEADER "\n");
	if (next_line(&v, c, "origin") < 0 ||
	    take_str(l->origin, PUSHLEAF_SITE_MAX, &v, false) < 0 ||
	    !name_site_ok(l->origin) || next_line(&v, c, "index") < 0 ||
	    take_u63(&l->index, &v) < 0 || next_line(&v, c, "time") < 0 ||
	    take_u63(&t, &v) < 0 || next_line(&v, c, "repo") < 0 ||
	    take_str(l->repo, PUSHLEAF_REPO_MAX, &v, false) < 0 ||
	    name_repo_norm(norm, sizeof(norm), l->repo) < 0 ||
	    strcmp(norm, l->repo))
		return GD_EINVAL;
	l->time_ms = (int64_t)t;
	if (next_line(&v, c, "user") < 0 ||
	    (rc = take_str(l->user, PUSHLEAF_USER_MAX, &v, true)) < 0 ||
	    (rc == 0 && !name_user_ok(l->user)))
		return GD_EINVAL;
	if (next_line(&v, c, "key") < 0 ||
	    (rc = take_str(l->key, PUSHLEAF_KEY_MAX, &v, true)) < 0 ||
	    (rc == 0 && !authkeys_fp_ok(l->key)))
		return GD_EINVAL;
	if (next_line(&v, c, "kind") < 0 ||
	    (rc = take_str(l->kind, PUSHLEAF_KIND_MAX, &v, true)) < 0 ||
	    (rc == 0 && !in_set(l->kind, kinds, GD_ARRAY_SIZE(kinds))))
		return GD_EINVAL;
	if (next_line(&v, c, "factor") < 0 ||
	    (rc = take_str(l->factor, PUSHLEAF_FACTOR_MAX, &v, true)) < 0 ||
	    (rc == 0 && !in_set(l->factor, factors, GD_ARRAY_SIZE(factors))))
		return GD_EINVAL;
	if (next_line(&v, c, "addr") < 0 || take_addr(l, &v) < 0)
		return GD_EINVAL;
	return 0;
}

int pushleaf_parse(struct pushleaf *out, const void *text, size_t len)
{
	struct cursor c = {text, (const char *)text + len};
	struct span v;
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	if (len > PUSHLEAF_TEXT_MAX)
		return GD_ETOOBIG;
	if (parse_head(out, &c) < 0)
		return GD_EINVAL;
	while (c.p < c.end) {
		if (out->nrefs == PUSHLEAF_MAX_REFS ||
		    next_line(&v, &c, "ref") < 0)
			return GD_EINVAL;
		if (out->nrefs == cap)
			GD_GROW(out->refs, cap, out->nrefs + 1);
		if (take_ref(&out->refs[out->nrefs], &v) < 0)
			return GD_EINVAL;
		out->nrefs++;
	}
	return out->nrefs ? 0 : GD_EINVAL;
}

void pushleaf_free(struct pushleaf *l)
{
	if (!l)
		return;
	free(l->refs);
	l->refs = NULL;
	l->nrefs = 0;
}

/* ---- writing ------------------------------------------------------------ */

static const char *or_dash(const char *s)
{
	return *s ? s : "-";
}

int pushleaf_format(struct buf *out, const struct pushleaf *l)
{
	char b64[ADDR_B64_LEN + 1] = "-";
	struct pushleaf back;
	int rc;

	buf_reset(out);
	if (!l->nrefs || l->nrefs > PUSHLEAF_MAX_REFS || !l->refs ||
	    l->time_ms < 0 || l->index > (uint64_t)INT64_MAX)
		return GD_EINVAL;
	if (l->has_addr)
		sodium_bin2base64(b64, sizeof(b64), l->addr, sizeof(l->addr),
		                  sodium_base64_VARIANT_ORIGINAL);
	buf_printf(out,
	           PUSHLEAF_HEADER "\norigin %s\nindex %llu\ntime %lld\n"
	                           "repo %s\nuser %s\nkey %s\nkind %s\n"
	                           "factor %s\naddr %s\n",
	           l->origin, (unsigned long long)l->index,
	           (long long)l->time_ms, l->repo, or_dash(l->user),
	           or_dash(l->key), or_dash(l->kind), or_dash(l->factor), b64);
	for (size_t i = 0; i < l->nrefs; i++)
		buf_printf(out, "ref %s %s %s\n", l->refs[i].ref,
		           l->refs[i].old, l->refs[i].new_);
	rc = pushleaf_parse(&back, out->p, out->len);
	pushleaf_free(&back);
	if (rc < 0)
		buf_reset(out);
	return rc < 0 ? GD_EINVAL : 0;
}

void pushleaf_addr_commit(uint8_t out[PUSHLEAF_COMMIT_LEN],
                          const uint8_t salt[PUSHLEAF_SALT_LEN],
                          const char *addr)
{
	crypto_hash_sha256_state st;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const uint8_t *)PUSHLEAF_ADDR_DOMAIN,
	                          strlen(PUSHLEAF_ADDR_DOMAIN));
	crypto_hash_sha256_update(&st, salt, PUSHLEAF_SALT_LEN);
	crypto_hash_sha256_update(&st, (const uint8_t *)addr, strlen(addr));
	crypto_hash_sha256_final(&st, out);
}
