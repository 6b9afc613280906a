/*
 * test_otp.c: node/requests/otp.h, TOTP and HOTP validation against an enrollment
 * and its token-use mark, scratch codes, base32 and otpauth:// URIs.
 *
 * The RFC test values are literals (RFC 4226 Appendix D, RFC 6238
 * Appendix B, checked with oathtool on Debian 12), so the module is
 * measured against the standards and not against itself.  The window,
 * lookahead and replay tests need tokens for arbitrary steps; those come
 * from liboath's HOTP generator, which the RFC tests have just vouched for
 * (a TOTP token is the HOTP token of the time step).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <liboath/oath.h>
#include <sodium.h>

#include "buf.h"
#include "err.h"
#include "otp.h"

/* RFC 4226 Appendix D and RFC 6238 Appendix B (SHA1): ASCII digits */
#define RFC_SECRET "12345678901234567890"
#define RFC_SECRET_B32 "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"

static const char *const rfc4226[10] = {
	"755224", "287082", "359152", "969429", "338314",
	"254676", "287922", "162583", "399871", "520489",
};

static const struct {
	time_t t;
	const char *token;
} rfc6238_sha1[] = {
	{ 59, "94287082" },
	{ 1111111109, "07081804" },
	{ 1111111111, "14050471" },
	{ 1234567890, "89005924" },
	{ 2000000000, "69279037" },
	{ 20000000000LL, "65353130" },
};

static void enrollment(Grantd__V1__Enrollment *e, Grantd__V1__OtpKind kind,
		       unsigned digits)
{
	grantd__v1__enrollment__init(e);
	e->user = "alice";
	e->kind = kind, e->has_kind = 1;
	e->secret.data = (uint8_t *)RFC_SECRET;
	e->secret.len = strlen(RFC_SECRET), e->has_secret = 1;
	e->digits = digits, e->has_digits = 1;
	if (kind == GRANTD__V1__OTP_KIND__OTP_TOTP)
		e->period = 30, e->has_period = 1;
	e->id = 1, e->has_id = 1;
}

/* The HOTP token for counter (or TOTP time step) c, digits long. */
static void token_at(char out[9], uint64_t c, unsigned digits)
{
	int rc = oath_hotp_generate(RFC_SECRET, strlen(RFC_SECRET), c, digits,
				    false, OATH_HOTP_DYNAMIC_TRUNCATION, out);
	assert_int_equal(rc, OATH_OK);
}

/* otp_check that must return 0; the verdict is in out->ok */
static struct otp_result check(const Grantd__V1__Enrollment *e,
			       uint64_t mark_next, uint32_t used,
			       const char *token, time_t now, int window,
			       int lookahead)
{
	struct otp_result r;
	int rc = otp_check(&r, e, mark_next, used, token, now, window,
			   lookahead);
	if (rc != 0)
		fail_msg("otp_check('%s', mark %llu) = %d, want 0", token,
			 (unsigned long long)mark_next, rc);
	return r;
}

static int setup_group(void **state)
{
	if (sodium_init() < 0 || otp_init() < 0)
		return -1;
	return 0;
}

/* ---- RFC 4226 ------------------------------------------------------------ */

static void test_hotp_rfc4226_at_counter(void **state)
{
	Grantd__V1__Enrollment e;

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	for (uint64_t c = 0; c < 10; c++) {
		/* the mark says exactly this counter, no lookahead */
		struct otp_result r = check(&e, c, 0, rfc4226[c], 0, 0, 0);
		if (!r.ok)
			fail_msg("counter %llu: '%s' refused",
				 (unsigned long long)c, rfc4226[c]);
		assert_false(r.scratch);
		assert_int_equal(r.next, c + 1);
		assert_int_equal(r.drift, 0);

		/* the enrollment's counter as the start does the same */
		e.counter = c, e.has_counter = 1;
		r = check(&e, 0, 0, rfc4226[c], 0, 0, 0);
		assert_true(r.ok);
		assert_int_equal(r.next, c + 1);
		e.counter = 0, e.has_counter = 0;
	}
}

static void test_hotp_rfc4226_lookahead(void **state)
{
	Grantd__V1__Enrollment e;

	/* from counter 0 with lookahead 9 every value is found where it is */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	for (uint64_t c = 0; c < 10; c++) {
		struct otp_result r = check(&e, 0, 0, rfc4226[c], 0, 0, 9);
		if (!r.ok)
			fail_msg("counter %llu: '%s' refused with lookahead 9",
				 (unsigned long long)c, rfc4226[c]);
		assert_int_equal(r.next, c + 1);
		assert_int_equal(r.drift, (int)c);
	}
}

static void test_hotp_rfc4226_wrong_counter(void **state)
{
	Grantd__V1__Enrollment e;

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	/* each value is refused at every other counter, lookahead 0 */
	for (uint64_t c = 0; c < 10; c++)
		for (uint64_t m = 0; m < 10; m++) {
			if (m == c)
				continue;
			struct otp_result r = check(&e, m, 0, rfc4226[c], 0,
						    0, 0);
			if (r.ok)
				fail_msg("'%s' (counter %llu) accepted at %llu",
					 rfc4226[c], (unsigned long long)c,
					 (unsigned long long)m);
		}
}

/* ---- RFC 6238 ------------------------------------------------------------ */

static void test_totp_rfc6238_sha1(void **state)
{
	Grantd__V1__Enrollment e;

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 8);
	for (size_t i = 0; i < GD_ARRAY_SIZE(rfc6238_sha1); i++) {
		time_t t = rfc6238_sha1[i].t;
		uint64_t step = (uint64_t)t / 30;
		struct otp_result r = check(&e, 0, 0, rfc6238_sha1[i].token, t,
					    0, 0);
		if (!r.ok)
			fail_msg("t=%lld: '%s' refused", (long long)t,
				 rfc6238_sha1[i].token);
		assert_false(r.scratch);
		assert_int_equal(r.next, step + 1);
		assert_int_equal(r.drift, 0);

		/* with the mark at the step itself it is still good ... */
		r = check(&e, step, 0, rfc6238_sha1[i].token, t, 0, 0);
		assert_true(r.ok);
		assert_int_equal(r.next, step + 1);
		/* ... and once the mark is past it, a replay */
		r = check(&e, step + 1, 0, rfc6238_sha1[i].token, t, 0, 0);
		if (r.ok)
			fail_msg("t=%lld: '%s' accepted again past the mark",
				 (long long)t, rfc6238_sha1[i].token);
	}
}

static void test_totp_rfc6238_wrong_time(void **state)
{
	Grantd__V1__Enrollment e;

	/* window 0: one step later (or earlier) the value is no good */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 8);
	for (size_t i = 0; i < GD_ARRAY_SIZE(rfc6238_sha1); i++) {
		time_t t = rfc6238_sha1[i].t;
		assert_false(check(&e, 0, 0, rfc6238_sha1[i].token, t + 30, 0,
				   0).ok);
		assert_false(check(&e, 0, 0, rfc6238_sha1[i].token, t - 30, 0,
				   0).ok);
	}
	/* 8-digit values against a 6-digit enrollment: refused */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 6);
	assert_false(check(&e, 0, 0, rfc6238_sha1[0].token, 59, 0, 0).ok);
	/* and the 6-digit value at t=59 (the last six digits) is good */
	assert_true(check(&e, 0, 0, "287082", 59, 0, 0).ok);
}

/* ---- replay -------------------------------------------------------------- */

static void test_totp_replay(void **state)
{
	Grantd__V1__Enrollment e;
	const time_t now = 1111111111;
	const uint64_t T = (uint64_t)now / 30;
	char cur[9], prev[9];

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 6);
	token_at(cur, T, 6);
	token_at(prev, T - 1, 6);

	/* the same value twice: the second meets the mark the first set */
	struct otp_result r = check(&e, 0, 0, cur, now, 1, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, T + 1);
	uint64_t mark = r.next;
	assert_false(check(&e, mark, 0, cur, now, 1, 0).ok);
	assert_false(check(&e, mark, 0, cur, now + 10, 1, 0).ok);

	/* an older step after a newer one, still inside the window */
	assert_false(check(&e, mark, 0, prev, now, 1, 0).ok);

	/* the older one first is fine, and the newer one after it */
	r = check(&e, 0, 0, prev, now, 1, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, T);
	assert_int_equal(r.drift, -1);
	r = check(&e, r.next, 0, cur, now, 1, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, T + 1);
}

static void test_hotp_replay(void **state)
{
	Grantd__V1__Enrollment e;

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	struct otp_result r = check(&e, 0, 0, rfc4226[5], 0, 0, 10);
	assert_true(r.ok);
	assert_int_equal(r.next, 6);
	/* the same value again, and an older one, with a wide lookahead */
	assert_false(check(&e, r.next, 0, rfc4226[5], 0, 0, 10).ok);
	assert_false(check(&e, r.next, 0, rfc4226[3], 0, 0, 10).ok);
	/* the next one is good */
	r = check(&e, r.next, 0, rfc4226[6], 0, 0, 10);
	assert_true(r.ok);
	assert_int_equal(r.next, 7);
}

/* ---- windows --------------------------------------------------------------- */

static void test_totp_window(void **state)
{
	Grantd__V1__Enrollment e;
	const time_t now = 1234567890 - 1234567890 % 30 + 15;
	const uint64_t T = (uint64_t)now / 30;
	char tok[5][9]; /* steps T-2 .. T+2 */

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 6);
	for (int d = -2; d <= 2; d++)
		token_at(tok[d + 2], T + (uint64_t)(int64_t)d, 6);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(tok[i], tok[j]))
				skip(); /* a collision would void the test */

	for (int d = -1; d <= 1; d++) {
		struct otp_result r = check(&e, 0, 0, tok[d + 2], now, 1, 0);
		if (!r.ok)
			fail_msg("window 1: step T%+d refused", d);
		assert_int_equal(r.next, T + (uint64_t)(int64_t)d + 1);
		assert_int_equal(r.drift, d);
	}
	assert_false(check(&e, 0, 0, tok[0], now, 1, 0).ok);
	assert_false(check(&e, 0, 0, tok[4], now, 1, 0).ok);

	/* window 0 is the current step only */
	assert_true(check(&e, 0, 0, tok[2], now, 0, 0).ok);
	assert_false(check(&e, 0, 0, tok[1], now, 0, 0).ok);
	assert_false(check(&e, 0, 0, tok[3], now, 0, 0).ok);

	/* window 2 reaches the steps that window 1 refused */
	struct otp_result r = check(&e, 0, 0, tok[0], now, 2, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, T - 1);
	assert_int_equal(r.drift, -2);
	r = check(&e, 0, 0, tok[4], now, 2, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, T + 3);
	assert_int_equal(r.drift, 2);

	/* a mark inside the window cuts off the steps before it */
	assert_false(check(&e, T, 0, tok[1], now, 1, 0).ok);
	assert_true(check(&e, T, 0, tok[2], now, 1, 0).ok);
	assert_true(check(&e, T, 0, tok[3], now, 1, 0).ok);
}

static void test_totp_period(void **state)
{
	Grantd__V1__Enrollment e;
	const time_t now = 1111111111;
	char tok[9];

	/* period 60: the step is floor(t/60) */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 6);
	e.period = 60;
	token_at(tok, (uint64_t)now / 60, 6);
	struct otp_result r = check(&e, 0, 0, tok, now, 0, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, (uint64_t)now / 60 + 1);
	/* period 0 (unset) means 30 */
	e.period = 0, e.has_period = 0;
	token_at(tok, (uint64_t)now / 30, 6);
	r = check(&e, 0, 0, tok, now, 0, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, (uint64_t)now / 30 + 1);
}

static void test_hotp_lookahead(void **state)
{
	Grantd__V1__Enrollment e;
	const uint64_t start = 1000;
	char tok[9];

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	for (int la = 0; la <= 20; la += 5) {
		token_at(tok, start + (uint64_t)la, 6);
		struct otp_result r = check(&e, start, 0, tok, 0, 0, la);
		if (!r.ok)
			fail_msg("lookahead %d: start+%d refused", la, la);
		assert_int_equal(r.next, start + (uint64_t)la + 1);
		assert_int_equal(r.drift, la);

		token_at(tok, start + (uint64_t)la + 1, 6);
		if (check(&e, start, 0, tok, 0, 0, la).ok)
			fail_msg("lookahead %d: start+%d accepted", la, la + 1);
	}
	/* never backwards */
	token_at(tok, start - 1, 6);
	assert_false(check(&e, start, 0, tok, 0, 0, 20).ok);
}

static void test_hotp_start_is_max(void **state)
{
	Grantd__V1__Enrollment e;
	char tok[9];

	/* enrollment counter 50 ahead of the mark 10: start at 50 */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	e.counter = 50, e.has_counter = 1;
	token_at(tok, 49, 6);
	assert_false(check(&e, 10, 0, tok, 0, 0, 100).ok);
	token_at(tok, 20, 6);
	assert_false(check(&e, 10, 0, tok, 0, 0, 100).ok);
	token_at(tok, 50, 6);
	struct otp_result r = check(&e, 10, 0, tok, 0, 0, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, 51);
	assert_int_equal(r.drift, 0);

	/* mark 70 ahead of the enrollment counter 50: start at 70 */
	token_at(tok, 60, 6);
	assert_false(check(&e, 70, 0, tok, 0, 0, 100).ok);
	token_at(tok, 69, 6);
	assert_false(check(&e, 70, 0, tok, 0, 0, 100).ok);
	token_at(tok, 72, 6);
	r = check(&e, 70, 0, tok, 0, 0, 2);
	assert_true(r.ok);
	assert_int_equal(r.next, 73);
	assert_int_equal(r.drift, 2);
	token_at(tok, 73, 6);
	assert_false(check(&e, 70, 0, tok, 0, 0, 2).ok);
}

/* ---- scratch codes --------------------------------------------------------- */

static void scratch_enrollment(Grantd__V1__Enrollment *e,
			       Grantd__V1__OtpKind kind, unsigned digits,
			       ProtobufCBinaryData bins[OTP_SCRATCH_CODES],
			       uint8_t hashes[OTP_SCRATCH_CODES][32])
{
	enrollment(e, kind, digits);
	for (int i = 0; i < OTP_SCRATCH_CODES; i++) {
		bins[i].len = 32;
		bins[i].data = hashes[i];
	}
	e->scratch = bins;
	e->n_scratch = OTP_SCRATCH_CODES;
}

static void test_scratch_codes(void **state)
{
	/* 8-digit enrollments too: there a scratch code has the shape of
	 * a token and must be told apart by its hash alone */
	static const struct {
		Grantd__V1__OtpKind kind;
		unsigned digits;
	} kinds[] = {
		{ GRANTD__V1__OTP_KIND__OTP_TOTP, 6 },
		{ GRANTD__V1__OTP_KIND__OTP_HOTP, 6 },
		{ GRANTD__V1__OTP_KIND__OTP_TOTP, 8 },
		{ GRANTD__V1__OTP_KIND__OTP_HOTP, 8 },
	};
	char codes[OTP_SCRATCH_CODES][OTP_SCRATCH_DIGITS + 1];
	uint8_t hashes[OTP_SCRATCH_CODES][32];
	ProtobufCBinaryData bins[OTP_SCRATCH_CODES];
	Grantd__V1__Enrollment e, plain;

	for (size_t k = 0; k < GD_ARRAY_SIZE(kinds); k++) {
		otp_new_scratch(codes, hashes, (const uint8_t *)RFC_SECRET,
				strlen(RFC_SECRET));
		scratch_enrollment(&e, kinds[k].kind, kinds[k].digits, bins,
				   hashes);
		plain = e;
		plain.n_scratch = 0, plain.scratch = NULL;
		for (int i = 0; i < OTP_SCRATCH_CODES; i++) {
			assert_int_equal(strlen(codes[i]), OTP_SCRATCH_DIGITS);
			assert_true(otp_token_shape_ok(codes[i]));
			/* the hash, never the code, is what is stored */
			assert_memory_not_equal(hashes[i], codes[i],
						OTP_SCRATCH_DIGITS);
		}

		uint32_t used = 0;
		for (int i = 0; i < OTP_SCRATCH_CODES; i++) {
			struct otp_result r = check(&e, 7, used, codes[i],
						    1111111111, 1, 10);
			if (!r.ok)
				fail_msg("scratch code %d refused (used %#x)",
					 i, used);
			assert_true(r.scratch);
			assert_int_equal(r.scratch_index, i);
			/* spent: refused with its bit set, whatever else */
			r = check(&e, 7, used | (1u << i), codes[i],
				  1111111111, 1, 10);
			if (r.ok)
				fail_msg("spent scratch code %d accepted", i);
			r = check(&e, 7, 1u << i, codes[i], 1111111111, 1, 10);
			assert_false(r.ok);
			used |= 1u << i;
		}
		/* all spent: none is good any more */
		for (int i = 0; i < OTP_SCRATCH_CODES; i++)
			assert_false(check(&e, 7, used, codes[i], 1111111111,
					   1, 10).ok);
		/* a code spent does not spend the others */
		for (int i = 0; i < OTP_SCRATCH_CODES; i++) {
			struct otp_result r = check(&e, 0, used & ~(1u << i),
						    codes[i], 0, 0, 0);
			assert_true(r.ok);
			assert_int_equal(r.scratch_index, i);
		}

		/* random 8-digit codes that are none of the five */
		for (int n = 0; n < 200; n++) {
			char other[OTP_SCRATCH_DIGITS + 1];
			bool mine = false;
			snprintf(other, sizeof(other), "%08u",
				 randombytes_uniform(100000000));
			for (int i = 0; i < OTP_SCRATCH_CODES; i++)
				mine |= !strcmp(other, codes[i]);
			/* a real token for the 8-digit kinds (1 in 10^7) */
			if (mine ||
			    check(&plain, 0, 0, other, 1111111111, 1, 10).ok)
				continue;
			if (check(&e, 0, 0, other, 1111111111, 1, 10).ok)
				fail_msg("random code '%s' accepted", other);
		}
	}
}

static void test_scratch_other_secret(void **state)
{
	char codes[OTP_SCRATCH_CODES][OTP_SCRATCH_DIGITS + 1];
	uint8_t hashes[OTP_SCRATCH_CODES][32];
	ProtobufCBinaryData bins[OTP_SCRATCH_CODES];
	Grantd__V1__Enrollment e;
	static const uint8_t other[] = "another secret 12345";

	/* codes made for one secret do not open an enrollment with another:
	 * the hash is keyed by the secret */
	otp_new_scratch(codes, hashes, other, sizeof(other) - 1);
	scratch_enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 6, bins,
			   hashes);
	for (int i = 0; i < OTP_SCRATCH_CODES; i++)
		assert_false(check(&e, 0, 0, codes[i], 59, 1, 0).ok);
	/* fewer stored hashes than codes: only those count */
	otp_new_scratch(codes, hashes, (const uint8_t *)RFC_SECRET,
			strlen(RFC_SECRET));
	e.n_scratch = 2;
	assert_true(check(&e, 0, 0, codes[1], 59, 1, 0).ok);
	assert_false(check(&e, 0, 0, codes[2], 59, 1, 0).ok);
	/* no scratch codes at all */
	e.n_scratch = 0, e.scratch = NULL;
	assert_false(check(&e, 0, 0, codes[0], 59, 1, 0).ok);
}

/* ---- shapes and unusable enrollments --------------------------------------- */

static void test_token_shape(void **state)
{
	static const char *const good[] = { "123456", "1234567", "12345678",
					    "000000", "99999999" };
	static const char *const bad[] = {
		"12345", "123456789", "12a456", "", " 123456", "123456 ",
		"-12345", "+123456", "12345\n", "１２３４５６", "1234567890123",
	};

	for (size_t i = 0; i < GD_ARRAY_SIZE(good); i++)
		if (!otp_token_shape_ok(good[i]))
			fail_msg("'%s' refused by otp_token_shape_ok", good[i]);
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++)
		if (otp_token_shape_ok(bad[i]))
			fail_msg("'%s' passed otp_token_shape_ok", bad[i]);
}

static void test_bad_shapes_refused(void **state)
{
	static const char *const bad[] = { "12345", "123456789", "12a456", "",
					   "75522", "7552244", "755 224",
					   "0755224x" };
	static const Grantd__V1__OtpKind kinds[] = {
		GRANTD__V1__OTP_KIND__OTP_TOTP, GRANTD__V1__OTP_KIND__OTP_HOTP,
	};
	Grantd__V1__Enrollment e;

	for (size_t k = 0; k < GD_ARRAY_SIZE(kinds); k++) {
		enrollment(&e, kinds[k], 6);
		for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++) {
			struct otp_result r;
			memset(&r, 0xa5, sizeof(r));
			int rc = otp_check(&r, &e, 0, 0, bad[i], 59, 1, 10);
			if (rc != 0 || r.ok)
				fail_msg("kind %d token '%s': rc %d ok %d",
					 (int)kinds[k], bad[i], rc, r.ok);
			assert_false(r.scratch);
		}
	}
}

static void test_unusable_enrollment(void **state)
{
	Grantd__V1__Enrollment e;
	struct otp_result r;

	/* no secret */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	e.secret.len = 0, e.secret.data = NULL;
	assert_int_equal(otp_check(&r, &e, 0, 0, "755224", 0, 0, 0),
			 GD_EINVAL);
	assert_false(r.ok);
	/* a secret longer than any we make */
	uint8_t big[OTP_MAX_SECRET_LEN + 1] = { 0 };
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	e.secret.data = big, e.secret.len = sizeof(big);
	assert_int_equal(otp_check(&r, &e, 0, 0, "755224", 0, 0, 0),
			 GD_EINVAL);
	/* digits outside 6..8 */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 5);
	assert_int_equal(otp_check(&r, &e, 0, 0, "755224", 0, 0, 0),
			 GD_EINVAL);
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 9);
	assert_int_equal(otp_check(&r, &e, 0, 0, "755224", 0, 0, 0),
			 GD_EINVAL);
	/* no kind */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_NONE, 6);
	assert_int_equal(otp_check(&r, &e, 0, 0, "755224", 0, 0, 0),
			 GD_EINVAL);
	assert_false(r.ok);
	/* digits 0 (unset) means 6 */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 0);
	e.has_digits = 0;
	assert_true(check(&e, 0, 0, "755224", 0, 0, 0).ok);
}

static void test_digits_7(void **state)
{
	Grantd__V1__Enrollment e;
	char tok[9];

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 7);
	token_at(tok, 3, 7);
	assert_int_equal(strlen(tok), 7);
	struct otp_result r = check(&e, 3, 0, tok, 0, 0, 0);
	assert_true(r.ok);
	assert_int_equal(r.next, 4);
	/* the 6-digit value of the same counter is not a 7-digit token */
	assert_false(check(&e, 3, 0, rfc4226[3], 0, 0, 0).ok);
}

/* ---- base32 and URIs -------------------------------------------------------- */

static void test_base32_rfc_secret(void **state)
{
	struct buf b = BUF_INIT;
	uint8_t out[OTP_MAX_SECRET_LEN];
	size_t n = sizeof(out);

	assert_int_equal(otp_base32(&b, (const uint8_t *)RFC_SECRET,
				    strlen(RFC_SECRET)), 0);
	assert_string_equal(buf_str(&b), RFC_SECRET_B32);
	assert_int_equal(otp_base32_decode(out, &n, RFC_SECRET_B32), 0);
	assert_int_equal(n, strlen(RFC_SECRET));
	assert_memory_equal(out, RFC_SECRET, n);

	/* what people type: lower case and groups of four */
	n = sizeof(out);
	assert_int_equal(otp_base32_decode(out, &n,
		"gezd gnbv gy3t qojq gezd gnbv gy3t qojq"), 0);
	assert_int_equal(n, strlen(RFC_SECRET));
	assert_memory_equal(out, RFC_SECRET, n);
	buf_free(&b);
}

static void test_base32_round_trip(void **state)
{
	struct buf b = BUF_INIT;
	uint8_t secret[OTP_MAX_SECRET_LEN], out[OTP_MAX_SECRET_LEN];

	for (size_t len = 1; len <= OTP_MAX_SECRET_LEN; len++) {
		size_t n = sizeof(out);
		otp_new_secret(secret, len);
		assert_int_equal(otp_base32(&b, secret, len), 0);
		/* no padding, only the base32 alphabet */
		assert_int_equal(b.len, (len * 8 + 4) / 5);
		for (size_t i = 0; i < b.len; i++)
			if (!((b.p[i] >= 'A' && b.p[i] <= 'Z') ||
			      (b.p[i] >= '2' && b.p[i] <= '7')))
				fail_msg("len %zu: '%c' in '%s'", len, b.p[i],
					 b.p);
		int rc = otp_base32_decode(out, &n, buf_str(&b));
		if (rc != 0)
			fail_msg("len %zu: decode('%s') = %d", len, b.p, rc);
		assert_int_equal(n, len);
		assert_memory_equal(out, secret, len);
	}
	/* every secret we make has 160 bits (RFC 4226 R6: at least 128,
	 * 160 recommended): 32 base32 characters, TOTP and HOTP alike */
	otp_new_secret(secret, OTP_NEW_SECRET_LEN);
	otp_base32(&b, secret, OTP_NEW_SECRET_LEN);
	assert_int_equal(b.len, 32);
	assert_true(OTP_NEW_SECRET_LEN * 8 >= 160);
	assert_true(OTP_MIN_SECRET_LEN * 8 >= 128);
	buf_free(&b);
}

static void test_base32_decode_bad(void **state)
{
	uint8_t out[OTP_MAX_SECRET_LEN];
	size_t n;
	static const char *const bad[] = { "", "GEZD-GNBV", "GEZD\nGNBV",
					   "GEZD1GNBV", "GEZD8GNB", "!@#$" };

	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++) {
		n = sizeof(out);
		if (otp_base32_decode(out, &n, bad[i]) != GD_EINVAL)
			fail_msg("'%s' decoded", bad[i]);
	}
	/* more than the buffer holds */
	n = 10;
	assert_int_equal(otp_base32_decode(out, &n, RFC_SECRET_B32), GD_EINVAL);
	/* exactly what it holds */
	n = 20;
	assert_int_equal(otp_base32_decode(out, &n, RFC_SECRET_B32), 0);
	assert_int_equal(n, 20);
	/* a secret over OTP_MAX_SECRET_LEN, however big the buffer */
	{
		struct buf b = BUF_INIT;
		uint8_t big[OTP_MAX_SECRET_LEN + 1], dst[2 * OTP_MAX_SECRET_LEN];
		memset(big, 0x5a, sizeof(big));
		otp_base32(&b, big, sizeof(big));
		n = sizeof(dst);
		assert_int_equal(otp_base32_decode(dst, &n, buf_str(&b)),
				 GD_EINVAL);
		buf_free(&b);
	}
}

static void test_uri(void **state)
{
	Grantd__V1__Enrollment e;
	struct buf u = BUF_INIT;

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 6);
	otp_uri(&u, &e, "grantd");
	if (strncmp(buf_str(&u), "otpauth://totp/", 15) ||
	    !strstr(u.p, "secret=" RFC_SECRET_B32) ||
	    !strstr(u.p, "digits=6") || !strstr(u.p, "period=30") ||
	    !strstr(u.p, "alice") || !strstr(u.p, "issuer=grantd") ||
	    strstr(u.p, "counter="))
		fail_msg("totp uri '%s'", buf_str(&u));

	e.digits = 8, e.period = 60;
	otp_uri(&u, &e, "grantd");
	if (!strstr(u.p, "digits=8") || !strstr(u.p, "period=60") ||
	    strstr(u.p, "period=30"))
		fail_msg("totp uri '%s'", u.p);

	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_HOTP, 6);
	e.counter = 42, e.has_counter = 1;
	otp_uri(&u, &e, "grantd");
	if (strncmp(buf_str(&u), "otpauth://hotp/", 15) ||
	    !strstr(u.p, "secret=" RFC_SECRET_B32) ||
	    !strstr(u.p, "digits=6") || !strstr(u.p, "counter=42") ||
	    strstr(u.p, "period="))
		fail_msg("hotp uri '%s'", u.p);
	/* the secret is base32 without padding */
	assert_null(strstr(u.p, "%3D"));
	assert_null(strstr(u.p, "=="));

	/* the label is ISSUER:USER and the issuer a parameter, escaped */
	enrollment(&e, GRANTD__V1__OTP_KIND__OTP_TOTP, 6);
	otp_uri(&u, &e, "git.example.org");
	if (strncmp(u.p, "otpauth://totp/git.example.org:alice?", 37) ||
	    !strstr(u.p, "&issuer=git.example.org&"))
		fail_msg("uri with a host '%s'", u.p);
	/* host = git@NAME: the account is for ssh, not the issuer */
	otp_uri(&u, &e, "git@git.example.org");
	if (strncmp(u.p, "otpauth://totp/git.example.org:alice?", 37) ||
	    !strstr(u.p, "&issuer=git.example.org&"))
		fail_msg("uri with an account '%s'", u.p);
	otp_uri(&u, &e, "Git Host&Co:1");
	if (strncmp(u.p, "otpauth://totp/Git%20Host%26Co%3A1:alice?", 41) ||
	    !strstr(u.p, "&issuer=Git%20Host%26Co%3A1&"))
		fail_msg("escaped uri '%s'", u.p);
	buf_free(&u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hotp_rfc4226_at_counter),
		cmocka_unit_test(test_hotp_rfc4226_lookahead),
		cmocka_unit_test(test_hotp_rfc4226_wrong_counter),
		cmocka_unit_test(test_totp_rfc6238_sha1),
		cmocka_unit_test(test_totp_rfc6238_wrong_time),
		cmocka_unit_test(test_totp_replay),
		cmocka_unit_test(test_hotp_replay),
		cmocka_unit_test(test_totp_window),
		cmocka_unit_test(test_totp_period),
		cmocka_unit_test(test_hotp_lookahead),
		cmocka_unit_test(test_hotp_start_is_max),
		cmocka_unit_test(test_scratch_codes),
		cmocka_unit_test(test_scratch_other_secret),
		cmocka_unit_test(test_token_shape),
		cmocka_unit_test(test_bad_shapes_refused),
		cmocka_unit_test(test_unusable_enrollment),
		cmocka_unit_test(test_digits_7),
		cmocka_unit_test(test_base32_rfc_secret),
		cmocka_unit_test(test_base32_round_trip),
		cmocka_unit_test(test_base32_decode_bad),
		cmocka_unit_test(test_uri),
	};
	return cmocka_run_group_tests(tests, setup_group, NULL);
}
