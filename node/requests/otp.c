/*
 * otp.c: liboath behind our replay marks.  We use the _callback variants
 * only, so the token comparison is constant time (sodium_memcmp) instead
 * of liboath's strcmp.
 */
#include <ctype.h>
#include <liboath/oath.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "otp.h"
#include "banned.h"

int otp_init(void)
{
	return oath_init() == OATH_OK ? 0 : GD_ECRYPTO;
}

bool otp_token_shape_ok(const char *t)
{
	size_t n = strnlen(t, 9);
	if (n < 6 || n > 8)
		return false;
	for (size_t i = 0; i < n; i++)
		if (t[i] < '0' || t[i] > '9')
			return false;
	return true;
}

static int ct_cmp(void *handle, const char *test_otp)
{
	const char *token = handle;
	size_t n = strlen(token);
	if (strlen(test_otp) != n)
		return 1;
	return sodium_memcmp(token, test_otp, n) != 0;
}

void otp_scratch_hash(uint8_t out[32], const uint8_t *secret, size_t slen,
		      const char *code)
{
	crypto_generichash_state st;
	static const char dom[] = "grantd scratch v1";

	crypto_generichash_init(&st, NULL, 0, 32);
	crypto_generichash_update(&st, (const uint8_t *)dom, sizeof(dom));
	crypto_generichash_update(&st, secret, slen);
	crypto_generichash_update(&st, (const uint8_t *)code, strlen(code));
	crypto_generichash_final(&st, out, 32);
}

static bool check_scratch(struct otp_result *out,
			  const Grantd__V1__Enrollment *e,
			  uint32_t scratch_used, const char *token)
{
	uint8_t h[32];

	if (strlen(token) != OTP_SCRATCH_DIGITS)
		return false;
	otp_scratch_hash(h, e->secret.data, e->secret.len, token);
	for (size_t i = 0; i < e->n_scratch && i < 32; i++) {
		if (e->scratch[i].len != 32 ||
		    sodium_memcmp(h, e->scratch[i].data, 32) != 0)
			continue;
		if (scratch_used & (1u << i))
			return false; /* spent */
		out->ok = out->scratch = true;
		out->scratch_index = (int)i;
		return true;
	}
	return false;
}

int otp_check(struct otp_result *out, const Grantd__V1__Enrollment *e,
	      uint64_t mark_next, uint32_t scratch_used, const char *token,
	      time_t now, int totp_window, int hotp_lookahead)
{
	char tok[9];
	unsigned digits = e->digits ? e->digits : 6;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!e->secret.len || e->secret.len > OTP_MAX_SECRET_LEN ||
	    digits < 6 || digits > 8 ||
	    (e->kind != GRANTD__V1__OTP_KIND__OTP_TOTP &&
	     e->kind != GRANTD__V1__OTP_KIND__OTP_HOTP))
		return GD_EINVAL;
	if (!otp_token_shape_ok(token))
		return 0;
	memcpy(tok, token, strlen(token) + 1);
	if (check_scratch(out, e, scratch_used, tok))
		goto done;
	if (strlen(tok) != digits)
		goto done;
	if (e->kind == GRANTD__V1__OTP_KIND__OTP_TOTP) {
		int pos = 0;
		uint64_t step = 0;
		unsigned period = e->period ? e->period : 30;
		rc = oath_totp_validate4_callback(
			(const char *)e->secret.data, e->secret.len, now,
			period, 0, digits, (size_t)totp_window, &pos, &step,
			0, ct_cmp, tok);
		if (rc >= 0 && step >= mark_next) {
			out->ok = true;
			out->next = step + 1;
			out->drift = pos;
		}
	} else if (e->kind == GRANTD__V1__OTP_KIND__OTP_HOTP) {
		uint64_t start = e->counter > mark_next ? e->counter : mark_next;
		rc = oath_hotp_validate_callback(
			(const char *)e->secret.data, e->secret.len, start,
			(size_t)hotp_lookahead, digits, ct_cmp, tok);
		if (rc >= 0) {
			out->ok = true;
			out->next = start + (uint64_t)rc + 1;
			out->drift = rc;
		}
	} else {
		return GD_EINVAL;
	}
done:
	sodium_memzero(tok, sizeof(tok));
	return 0;
}

void otp_new_secret(uint8_t *out, size_t len)
{
	randombytes_buf(out, len);
}

void otp_new_scratch(char codes[OTP_SCRATCH_CODES][OTP_SCRATCH_DIGITS + 1],
		     uint8_t hashes[OTP_SCRATCH_CODES][32],
		     const uint8_t *secret, size_t slen)
{
	for (int i = 0; i < OTP_SCRATCH_CODES; i++) {
		uint32_t v = randombytes_uniform(90000000) + 10000000;
		snprintf(codes[i], OTP_SCRATCH_DIGITS + 1, "%08u", v);
		otp_scratch_hash(hashes[i], secret, slen, codes[i]);
	}
}

int otp_base32(struct buf *out, const uint8_t *secret, size_t len)
{
	char *b32 = NULL;
	size_t n = 0;

	if (oath_base32_encode((const char *)secret, len, &b32, &n) != OATH_OK)
		return GD_ENOMEM;
	while (n && b32[n - 1] == '=')
		n--;
	buf_reset(out);
	buf_add(out, b32, n);
	sodium_memzero(b32, n);
	free(b32);
	return 0;
}

int otp_base32_decode(uint8_t *out, size_t *outlen, const char *in)
{
	char *bin = NULL;
	size_t n = 0;

	if (!*in || strlen(in) > 256)
		return GD_EINVAL;
	if (oath_base32_decode(in, strlen(in), &bin, &n) != OATH_OK)
		return GD_EINVAL;
	if (n == 0 || n > *outlen || n > OTP_MAX_SECRET_LEN) {
		sodium_memzero(bin, n);
		free(bin);
		return GD_EINVAL;
	}
	memcpy(out, bin, n);
	*outlen = n;
	sodium_memzero(bin, n);
	free(bin);
	return 0;
}

/* s percent-encoded (RFC 3986: all but the unreserved characters), for a
 * URI's path or query. */
static void url_escape(struct buf *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || strchr("-._~", c))
			buf_printf(out, "%c", c);
		else
			buf_printf(out, "%%%02X", c);
	}
}

void otp_uri(struct buf *out, const Grantd__V1__Enrollment *e,
	     const char *issuer)
{
	struct buf b32 = BUF_INIT;
	bool totp = e->kind == GRANTD__V1__OTP_KIND__OTP_TOTP;
	const char *at = strchr(issuer, '@');

	if (at) /* [node] host = git@NAME: the issuer is the machine */
		issuer = at + 1;
	otp_base32(&b32, e->secret.data, e->secret.len);
	buf_reset(out);
	/* the label is ISSUER:USER, each part escaped, the colon not (as
	 * Google's Key URI format writes it) */
	buf_printf(out, "otpauth://%s/", totp ? "totp" : "hotp");
	url_escape(out, issuer);
	buf_puts(out, ":");
	url_escape(out, e->user);
	buf_printf(out, "?secret=%s&issuer=", buf_str(&b32));
	url_escape(out, issuer);
	buf_printf(out, "&algorithm=SHA1&digits=%u",
		   e->digits ? e->digits : 6);
	if (totp)
		buf_printf(out, "&period=%u", e->period ? e->period : 30);
	else
		buf_printf(out, "&counter=%llu",
			   (unsigned long long)e->counter);
	sodium_memzero(b32.p, b32.len);
	buf_free(&b32);
}
