/*
 * note.c: C2SP signed-note keys, signing and opening (note.h).
 *
 * Opening follows the text of c2sp.org/signed-note and, where it leaves a
 * choice, Go's golang.org/x/mod/sumdb/note (so a note one accepts the
 * other accepts): the text ends at the last blank line, at most 100
 * signature lines, repeated lines counted once, a known key's second line
 * not checked again.  Checkpoints and cosignature messages are in
 * note_ckpt.c.
 */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "note.h"
#include "xalloc.h"
#include "banned.h"

#define PRIV_PREFIX "PRIVATE+KEY+"
#define EM_DASH_SP  "\xe2\x80\x94 " /* U+2014 and a space */

/* The code point at s[0..len) and its length, or -1 for bytes that are
 * not UTF-8 (overlong, surrogate, past U+10FFFF, cut short). */
static int32_t utf8_next(const uint8_t *s, size_t len, size_t *n)
{
	static const int32_t min[4] = {0, 0x80, 0x800, 0x10000};
	int32_t c;
	size_t k;

	if (s[0] < 0x80) {
		*n = 1;
		return s[0];
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		k = 1, c = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		k = 2, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		k = 3, c = s[0] & 0x07;
	else
		return -1;
	if (len < k + 1)
		return -1;
	for (size_t i = 1; i <= k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min[k] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return -1;
	*n = k + 1;
	return c;
}

/* Go's unicode.IsSpace. */
static bool is_space(int32_t c)
{
	return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 ||
	       c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
	       c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
	       c == 0x3000;
}

bool note_name_ok(const char *name, size_t len)
{
	const uint8_t *s = (const uint8_t *)name;
	size_t n;

	if (len == 0 || len > NOTE_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i += n) {
		int32_t c = utf8_next(s + i, len - i, &n);
		if (c < 0x20 || c == 0x7f || c == '+' || is_space(c))
			return false;
	}
	return true;
}

bool note_text_ok(const char *text, size_t len)
{
	const uint8_t *s = (const uint8_t *)text;
	size_t n;

	if (len == 0 || len > NOTE_MAX_LEN || text[len - 1] != '\n')
		return false;
	for (size_t i = 0; i < len; i += n) {
		int32_t c = utf8_next(s + i, len - i, &n);
		if (c < 0 || (c < 0x20 && c != '\n'))
			return false;
	}
	return true;
}

uint32_t note_key_id(const char *name,
                     size_t len,
                     uint8_t alg,
                     const uint8_t pub[NOTE_PUB_LEN])
{
	crypto_hash_sha256_state st;
	uint8_t h[crypto_hash_sha256_BYTES], sep[2] = {'\n', alg};

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const uint8_t *)name, len);
	crypto_hash_sha256_update(&st, sep, 2);
	crypto_hash_sha256_update(&st, pub, NOTE_PUB_LEN);
	crypto_hash_sha256_final(&st, h);
	return (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
	       (uint32_t)h[2] << 8 | h[3];
}

static bool alg_ok(uint8_t alg)
{
	return alg == NOTE_ALG_ED25519 || alg == NOTE_ALG_COSIG;
}

int note_vkey_init(struct note_vkey *out,
                   const char *name,
                   size_t len,
                   uint8_t alg,
                   const uint8_t pub[NOTE_PUB_LEN])
{
	if (!note_name_ok(name, len) || !alg_ok(alg))
		return GD_EINVAL;
	memset(out, 0, sizeof(*out));
	memcpy(out->name, name, len);
	out->name_len = len;
	out->alg = alg;
	memcpy(out->pub, pub, NOTE_PUB_LEN);
	out->id = note_key_id(name, len, alg, pub);
	return 0;
}

/* Exactly 8 lowercase hex digits. */
static int parse_hexid(uint32_t *out, const char *s, size_t len)
{
	uint32_t v = 0;

	if (len != 8)
		return GD_EINVAL;
	for (size_t i = 0; i < 8; i++) {
		char c = s[i];
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint32_t)(c - 'a' + 10);
		else
			return GD_EINVAL;
	}
	*out = v;
	return 0;
}

static bool b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '+' || c == '/';
}

long note_b64_decode(uint8_t *out, size_t cap, const char *s, size_t len)
{
	size_t n, pad = 0;
	const char *end;
	char again[5]; /* 4 and the NUL bin2base64 writes */

	if (len == 0 || len % 4)
		return -1;
	while (pad < 2 && s[len - 1 - pad] == '=')
		pad++;
	/* our own check of the alphabet: libsodium's decoder takes some
	 * bytes >= 0x80 for letters */
	for (size_t i = 0; i < len - pad; i++)
		if (!b64_char(s[i]))
			return -1;
	if (sodium_base642bin(out, cap, s, len, NULL, &n, &end,
	                      sodium_base64_VARIANT_ORIGINAL) ||
	    end != s + len)
		return -1;
	/* one spelling: the bits past the last byte are zero */
	if (pad) {
		size_t last = n - (3 - pad);
		sodium_bin2base64(again, sizeof(again), out + last, 3 - pad,
		                  sodium_base64_VARIANT_ORIGINAL);
		if (memcmp(again, s + len - 4, 4 - pad))
			return -1;
	}
	return (long)n;
}

static void b64_add(struct buf *out, const uint8_t *bin, size_t len)
{
	size_t cap =
	        sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	char *at = buf_extend(out, cap);

	sodium_bin2base64(at, cap, bin, len, sodium_base64_VARIANT_ORIGINAL);
	out->len -= 1; /* the NUL it wrote stays past the end */
}

/* NAME+HEXID+BASE64 at s[0..len): the parts, the key's alg || 32 bytes
 * decoded into key[33]. */
static int split_key(const char **name,
                     size_t *nlen,
                     uint32_t *id,
                     uint8_t key[1 + NOTE_PUB_LEN],
                     const char *s,
                     size_t len)
{
	const char *p1 = memchr(s, '+', len), *p2;
	uint8_t tmp[64];

	if (!p1)
		return GD_EINVAL;
	p2 = memchr(p1 + 1, '+', len - (size_t)(p1 + 1 - s));
	if (!p2 || parse_hexid(id, p1 + 1, (size_t)(p2 - p1 - 1)))
		return GD_EINVAL;
	*name = s;
	*nlen = (size_t)(p1 - s);
	if (!note_name_ok(*name, *nlen) ||
	    note_b64_decode(tmp, sizeof(tmp), p2 + 1,
	                    len - (size_t)(p2 + 1 - s)) != 1 + NOTE_PUB_LEN ||
	    !alg_ok(tmp[0]))
		return GD_EINVAL;
	memcpy(key, tmp, 1 + NOTE_PUB_LEN);
	sodium_memzero(tmp, sizeof(tmp));
	return 0;
}

int note_vkey_parse(struct note_vkey *out, const char *s, size_t len)
{
	const char *name;
	size_t nlen;
	uint32_t id;
	uint8_t key[1 + NOTE_PUB_LEN];
	struct note_vkey k;

	if (len > 2 * NOTE_NAME_MAX ||
	    split_key(&name, &nlen, &id, key, s, len))
		return GD_EINVAL;
	if (note_vkey_init(&k, name, nlen, key[0], key + 1) || k.id != id)
		return GD_EINVAL;
	*out = k;
	return 0;
}

void note_vkey_format(struct buf *out, const struct note_vkey *k)
{
	uint8_t key[1 + NOTE_PUB_LEN];

	key[0] = k->alg;
	memcpy(key + 1, k->pub, NOTE_PUB_LEN);
	buf_printf(out, "%s+%08x+", k->name, (unsigned)k->id);
	b64_add(out, key, sizeof(key));
}

int note_skey_from_seed(struct note_skey *out,
                        const char *name,
                        size_t len,
                        uint8_t alg,
                        const uint8_t seed[32])
{
	if (!note_name_ok(name, len) || !alg_ok(alg))
		return GD_EINVAL;
	memset(out, 0, sizeof(*out));
	memcpy(out->name, name, len);
	out->name_len = len;
	out->alg = alg;
	crypto_sign_seed_keypair(out->pub, out->sk, seed);
	out->id = note_key_id(name, len, alg, out->pub);
	return 0;
}

int note_skey_parse(struct note_skey *out, const char *s, size_t len)
{
	const size_t pl = strlen(PRIV_PREFIX);
	const char *name;
	size_t nlen;
	uint32_t id;
	uint8_t key[1 + NOTE_PUB_LEN];
	int err = GD_EINVAL;

	if (len > 2 * NOTE_NAME_MAX || len < pl || memcmp(s, PRIV_PREFIX, pl))
		return GD_EINVAL;
	if (split_key(&name, &nlen, &id, key, s + pl, len - pl))
		return GD_EINVAL;
	if (!note_skey_from_seed(out, name, nlen, key[0], key + 1)) {
		if (out->id == id)
			err = 0;
		else
			note_skey_wipe(out);
	}
	sodium_memzero(key, sizeof(key));
	return err;
}

void note_skey_format(struct buf *out, const struct note_skey *k)
{
	uint8_t key[1 + NOTE_PUB_LEN];

	key[0] = k->alg;
	memcpy(key + 1, k->sk, 32); /* the seed */
	buf_printf(out, PRIV_PREFIX "%s+%08x+", k->name, (unsigned)k->id);
	b64_add(out, key, sizeof(key));
	sodium_memzero(key, sizeof(key));
}

void note_skey_vkey(struct note_vkey *out, const struct note_skey *k)
{
	int err = note_vkey_init(out, k->name, k->name_len, k->alg, k->pub);
	GD_ASSERT(err == 0);
}

void note_skey_wipe(struct note_skey *k)
{
	sodium_memzero(k, sizeof(*k));
}

static void put_be(uint8_t *out, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t get_be(const uint8_t *in, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | in[i];
	return v;
}

int note_sign_line(struct buf *out,
                   const char *text,
                   size_t len,
                   const struct note_skey *k,
                   uint64_t timestamp)
{
	struct buf msg = BUF_INIT;
	uint8_t sig[4 + 8 + crypto_sign_BYTES];
	size_t at = 4;

	if (!note_text_ok(text, len) || !alg_ok(k->alg) ||
	    (k->alg == NOTE_ALG_COSIG && timestamp > INT64_MAX))
		return GD_EINVAL;
	put_be(sig, k->id, 4);
	if (k->alg == NOTE_ALG_COSIG) {
		put_be(sig + 4, timestamp, 8);
		at += 8;
		note_cosig_message(&msg, timestamp, text, len);
	} else {
		buf_add(&msg, text, len);
	}
	crypto_sign_detached(sig + at, NULL, (const uint8_t *)msg.p, msg.len,
	                     k->sk);
	buf_free(&msg);
	buf_puts(out, EM_DASH_SP);
	buf_add(out, k->name, k->name_len);
	buf_puts(out, " ");
	b64_add(out, sig, at + crypto_sign_BYTES);
	buf_puts(out, "\n");
	return 0;
}

int note_sign(struct buf *out,
              const char *text,
              size_t len,
              const struct note_skey *k,
              uint64_t timestamp)
{
	size_t was = out->len;
	int err;

	if (!note_text_ok(text, len))
		return GD_EINVAL;
	buf_add(out, text, len);
	buf_puts(out, "\n");
	err = note_sign_line(out, text, len, k, timestamp);
	if (err)
		out->len = was;
	return err;
}

void note_cosig_message(struct buf *out,
                        uint64_t timestamp,
                        const char *body,
                        size_t len)
{
	buf_printf(out, NOTE_COSIG_HEADER "time %llu\n",
	           (unsigned long long)timestamp);
	buf_add(out, body, len);
}

/* ---- opening ------------------------------------------------------------ */

/* The one key of keys[] with this name and id: its index, -1 for none,
 * -2 for two or more. */
static int find_key(const struct note_vkey *keys,
                    size_t nkeys,
                    const char *name,
                    size_t nlen,
                    uint32_t id)
{
	int found = -1;

	for (size_t i = 0; i < nkeys; i++) {
		if (keys[i].id != id || keys[i].name_len != nlen ||
		    memcmp(keys[i].name, name, nlen))
			continue;
		if (found >= 0)
			return -2;
		found = (int)i;
	}
	return found;
}

/* Does the decoded signature sig[0..n) (id first) by k verify on text? */
static bool sig_verifies(const struct note_vkey *k,
                         const uint8_t *sig,
                         size_t n,
                         const char *text,
                         size_t tlen,
                         uint64_t *timestamp)
{
	struct buf msg = BUF_INIT;
	bool ok;

	if (k->alg == NOTE_ALG_ED25519)
		return n == 4 + crypto_sign_BYTES &&
		       !crypto_sign_verify_detached(
		               sig + 4, (const uint8_t *)text, tlen, k->pub);
	if (n != 4 + 8 + crypto_sign_BYTES || (sig[4] & 0x80))
		return false; /* not 8 + 64 bytes, or a time >= 2^63 */
	*timestamp = get_be(sig + 4, 8);
	note_cosig_message(&msg, *timestamp, text, tlen);
	ok = !crypto_sign_verify_detached(sig + 12, (const uint8_t *)msg.p,
	                                  msg.len, k->pub);
	buf_free(&msg);
	return ok;
}

static bool seen_before(const struct note *n, const struct note_sig *s)
{
	for (size_t i = 0; i < n->nsigs; i++) {
		const struct note_sig *o = &n->sigs[i];
		bool same_key = o->id == s->id && o->name_len == s->name_len &&
		                !memcmp(o->name, s->name, s->name_len);
		/* a known key counts once; an unknown line once per text */
		if (same_key &&
		    (s->key >= 0 || (o->b64_len == s->b64_len &&
		                     !memcmp(o->b64, s->b64, s->b64_len))))
			return true;
	}
	return false;
}

/* One signature line line[0..len) (its "\n" left out). */
static int open_line(struct note *out,
                     const char *line,
                     size_t len,
                     const struct note_vkey *keys,
                     size_t nkeys)
{
	static const size_t dl = sizeof(EM_DASH_SP) - 1;
	uint8_t raw[NOTE_SIG_MAX];
	struct note_sig s = {.key = -1};
	const char *sp;
	long n;

	if (len < dl || memcmp(line, EM_DASH_SP, dl))
		return GD_EINVAL;
	line += dl, len -= dl;
	sp = memchr(line, ' ', len);
	if (!sp)
		return GD_EINVAL;
	s.name = line, s.name_len = (size_t)(sp - line);
	s.b64 = sp + 1, s.b64_len = len - s.name_len - 1;
	if (s.b64_len > sodium_base64_ENCODED_LEN(
	                        NOTE_SIG_MAX, sodium_base64_VARIANT_ORIGINAL))
		return GD_ETOOBIG;
	n = note_b64_decode(raw, sizeof(raw), s.b64, s.b64_len);
	if (n < 5 || !note_name_ok(s.name, s.name_len))
		return GD_EINVAL;
	if (out->nsigs >= NOTE_MAX_SIGS)
		return GD_ETOOBIG;
	s.id = (uint32_t)get_be(raw, 4);
	s.key = find_key(keys, nkeys, s.name, s.name_len, s.id);
	if (s.key < -1)
		return GD_EINVAL; /* ambiguous: two keys[] of one name and id */
	if (seen_before(out, &s))
		return 0;
	out->sigs[out->nsigs] = s;
	if (s.key >= 0 &&
	    !sig_verifies(&keys[s.key], raw, (size_t)n, out->text,
	                  out->text_len, &out->sigs[out->nsigs].timestamp)) {
		out->bad = (int)out->nsigs++;
		return GD_ECRYPTO;
	}
	out->nverified += s.key >= 0;
	out->nsigs++;
	return 0;
}

int note_open(struct note *out,
              const char *msg,
              size_t len,
              const struct note_vkey *keys,
              size_t nkeys)
{
	size_t split = 0, lines = 0;
	const char *p, *end = msg + len;

	memset(out, 0, offsetof(struct note, sigs));
	out->bad = -1;
	out->nverified = 0;
	if (len > NOTE_MAX_LEN)
		return GD_ETOOBIG;
	if (!note_text_ok(msg, len))
		return GD_EINVAL;
	/* The text ends at the last blank line. */
	for (size_t i = len - 1; i > 0; i--)
		if (msg[i] == '\n' && msg[i - 1] == '\n') {
			split = i;
			break;
		}
	if (split == 0 || split + 1 >= len)
		return GD_EINVAL;
	out->text = msg, out->text_len = split;
	for (p = msg + split + 1; p < end; lines++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int err;
		if (lines >= NOTE_MAX_SIGS)
			return GD_ETOOBIG;
		GD_ASSERT(nl); /* note_text_ok: the message ends in "\n" */
		err = open_line(out, p, (size_t)(nl - p), keys, nkeys);
		if (err)
			return err;
		p = nl + 1;
	}
	return out->nverified ? 0 : GD_ENOTFOUND;
}
