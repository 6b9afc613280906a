/*
 * otp.h: one-time passwords with liboath: TOTP (RFC 6238) and HOTP
 * (RFC 4226) validation against an enrollment and its token-use mark,
 * scratch codes, secrets and otpauth:// URIs.
 *
 * liboath keeps no state; replay protection is the mark: `next` is the
 * lowest counter (HOTP) or time step (TOTP) still acceptable, and a token
 * is good only if it matches at or after it.  The caller stores the new
 * mark (otp_result.next) in the same batch as the grant it allows.
 * Comparisons are constant time.  Pure functions: any thread, after
 * otp_init().
 */
#ifndef GD_OTP_H
#define GD_OTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"
#include "grantd.pb-c.h"

#define OTP_SCRATCH_CODES 5
#define OTP_SCRATCH_DIGITS 8
/* Every secret we make has 160 bits (RFC 4226 R6 recommends it; a YubiKey
 * OATH slot holds it): 32 base32 characters.  One given by an operator
 * needs 128 bits (R6's minimum), or 80 (kernel.org's totp-cgi made those)
 * with --allow-short-secret for a migrated token. */
#define OTP_NEW_SECRET_LEN 20
#define OTP_MIN_SECRET_LEN 16
#define OTP_MIN_SHORT_SECRET_LEN 10
#define OTP_MAX_SECRET_LEN 64

struct otp_result {
	bool ok;
	bool scratch;        /* a scratch code was used */
	int scratch_index;
	uint64_t next;       /* the new mark when ok and !scratch */
	int drift;           /* TOTP: steps from now; HOTP: counters skipped */
};

int otp_init(void);

/* 6 to 8 decimal digits. */
bool otp_token_shape_ok(const char *token);

/*
 * Check token against enrollment e (secret in the clear) whose mark is
 * (mark_next, scratch_used).  Returns 0 with out->ok telling the verdict,
 * or GD_EINVAL when the enrollment itself is unusable.
 */
int otp_check(struct otp_result *out, const Grantd__V1__Enrollment *e,
	      uint64_t mark_next, uint32_t scratch_used, const char *token,
	      time_t now, int totp_window, int hotp_lookahead);

/* Random secret of len bytes. */
void otp_new_secret(uint8_t *out, size_t len);

/* Make OTP_SCRATCH_CODES fresh codes: the text in codes, their hashes in
 * hashes (as stored in the enrollment). */
void otp_new_scratch(char codes[OTP_SCRATCH_CODES][OTP_SCRATCH_DIGITS + 1],
		     uint8_t hashes[OTP_SCRATCH_CODES][32],
		     const uint8_t *secret, size_t slen);

/* The hash of scratch code (OTP_SCRATCH_DIGITS digits) as an enrollment
 * with secret stores it: one of a code given out before (an imported
 * enrollment's, grantctl import gitolite-2fa). */
void otp_scratch_hash(uint8_t out[32], const uint8_t *secret, size_t slen,
		      const char *code);

/* Base32 without padding, as authenticator apps want it. */
int otp_base32(struct buf *out, const uint8_t *secret, size_t len);
/* Decode user-given base32 (spaces and lower case allowed). */
int otp_base32_decode(uint8_t *out, size_t *outlen, const char *in);

/* otpauth://totp/ISSUER:USER?... or otpauth://hotp/... for e; issuer (the
 * name users ssh to, [node] host) is the label's first part and the
 * issuer parameter, both percent-encoded. */
void otp_uri(struct buf *out, const Grantd__V1__Enrollment *e,
	     const char *issuer);

#endif
