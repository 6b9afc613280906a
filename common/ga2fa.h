/*
 * ga2fa.h: the files kernel.org's 2fa (totp-cgi's gitolite command) keeps
 * per user under $GL_ADMIN_BASE/2fa, read for `grantctl import
 * gitolite-2fa` (client/import_2fa.c; docs/migrating.md):
 *
 *   secrets/USER.totp      google-authenticator's format: the base32
 *                          secret, option lines (" HOTP_COUNTER N,
 *                          " TOTP_AUTH, " WINDOW_SIZE, ...), then the
 *                          8-digit scratch codes, one a line
 *   state/USER.json        {"success_timestamps": [...],
 *                          "used_scratch_tokens": [...], "counter": N,
 *                          "fail_timestamps": [...]}
 *   validations/USER.js    {"NET": {"added": T, "expires": T,
 *                          "sessionid": ..., ...}, ...}, T as
 *                          "2014-05-27 17:51:29+00:00"
 *
 * Pure parsers of a file's text (the caller reads it), any thread.  Each
 * returns 0, or GD_EINVAL with *why (static text) saying what is wrong.
 * A secret is only ever in struct ga2fa_secret: ga2fa_secret_clear wipes
 * it.
 */
#ifndef GD_GA2FA_H
#define GD_GA2FA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GA2FA_SECRET_MAX  128 /* base32 characters */
#define GA2FA_MAX_SCRATCH 16 /* what an enrollment holds */
#define GA2FA_SCRATCH_LEN 8

struct ga2fa_secret {
	char secret[GA2FA_SECRET_MAX + 1]; /* base32, as in the file */
	bool hotp; /* a " HOTP_COUNTER" line */
	uint64_t counter; /* its N */
	char scratch[GA2FA_MAX_SCRATCH][GA2FA_SCRATCH_LEN + 1];
	size_t nscratch;
};

int ga2fa_parse_secret(struct ga2fa_secret *out,
                       const char *text,
                       const char **why);
void ga2fa_secret_clear(struct ga2fa_secret *s);

#define GA2FA_MAX_USED 64

struct ga2fa_state {
	bool has_success;
	int64_t last_success; /* the newest of success_timestamps */
	char used[GA2FA_MAX_USED][GA2FA_SCRATCH_LEN + 1]; /* scratch spent */
	size_t nused;
	int64_t counter; /* HOTP: the next counter; -1: none */
};

int ga2fa_parse_state(struct ga2fa_state *out,
                      const char *json,
                      const char **why);

struct ga2fa_val {
	char net[64]; /* the key: an address or a CIDR */
	int64_t added, expires; /* unix seconds */
	bool session; /* bound to an XDG session (val-session) */
};

/* *out is the caller's (free), *n entries. */
int ga2fa_parse_validations(struct ga2fa_val **out,
                            size_t *n,
                            const char *json,
                            const char **why);

/* "YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM|Z]" (or 'T' for the space; no
 * offset: UTC) into unix seconds; 0 or GD_EINVAL. */
int ga2fa_parse_time(int64_t *out, const char *s);

#endif
