/*
 * pushleaf.h: the text of a push log leaf (issue 21, SPEC 9,
 * docs/push-log.md "The transparency log's leaves").
 *
 * Every accepted push is one leaf of its origin's transparency log; the
 * leaf's bytes (hashed as RFC 6962: tlog_leaf_hash) are this text, every
 * line ending in "\n", the fields in this order, values never empty and
 * without spaces ("-": not known):
 *
 *     grantd push v1
 *     origin SITE
 *     index N                  decimal, 0-based, no leading zero
 *     time MS                  unix milliseconds (the push's own time)
 *     repo NAME                as hosted, without .git
 *     user NAME                or -
 *     key FINGERPRINT          SHA256:... as sshd prints %f, or -
 *     kind KIND                plain | sk-touch | sk-pin | -
 *     factor FACTOR            grant | security-key | mode-off |
 *                              not-required | vref | -
 *     addr COMMITMENT          base64 (standard, padded) of
 *                              pushleaf_addr_commit(), or -
 *     ref REF OLD NEW          one line or more, in the push's order;
 *                              OLD and NEW 40 lower-case hex digits
 *
 * The node formats it (the origin, in the push's batch); grant-log and
 * `grantctl log verify` parse it.  The parser is strict: what
 * pushleaf_parse accepts, pushleaf_format writes back as the same bytes.
 *
 * Pure functions of their arguments: any thread.  pushleaf_addr_commit
 * uses libsodium (call sodium_init() first).
 */
#ifndef GD_PUSHLEAF_H
#define GD_PUSHLEAF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define PUSHLEAF_HEADER "grantd push v1"
/* the salt of an address commitment; the commitment (SHA-256) */
#define PUSHLEAF_SALT_LEN   32
#define PUSHLEAF_COMMIT_LEN 32
/* the domain of an address commitment */
#define PUSHLEAF_ADDR_DOMAIN "grantd addr v1\n"

/* Bounds of each field (bytes, without the NUL). */
#define PUSHLEAF_SITE_MAX   64 /* names.h NAME_SITE_MAX */
#define PUSHLEAF_REPO_MAX   1024 /* names.h NAME_REPO_MAX */
#define PUSHLEAF_USER_MAX   64 /* names.h NAME_USER_MAX */
#define PUSHLEAF_KEY_MAX    100 /* authkeys_fp_ok */
#define PUSHLEAF_KIND_MAX   16
#define PUSHLEAF_FACTOR_MAX 16
#define PUSHLEAF_REF_MAX    255
#define PUSHLEAF_OID_HEX    40
/* ref lines in one leaf: grant-hook sends at most 512 per request (one
 * push log entry each), and 512 of the shortest fit PUSHLEAF_TEXT_MAX */
#define PUSHLEAF_MAX_REFS 512
/* the longest text: what a C2SP tlog-tiles entry bundle holds (an entry's
 * length is a uint16).  grant-hook sends at most 48 KiB of ref lines per
 * request, so its pushes' leaves stay well under it. */
#define PUSHLEAF_TEXT_MAX 65535

struct pushleaf_ref {
	char ref[PUSHLEAF_REF_MAX + 1];
	char old[PUSHLEAF_OID_HEX + 1];
	char new_[PUSHLEAF_OID_HEX + 1];
};

/* One leaf's fields.  A field the text gives as "-" is "" here (user,
 * key, kind, factor) or has_addr false. */
struct pushleaf {
	char origin[PUSHLEAF_SITE_MAX + 1];
	uint64_t index;
	int64_t time_ms; /* >= 0 */
	char repo[PUSHLEAF_REPO_MAX + 1];
	char user[PUSHLEAF_USER_MAX + 1];
	char key[PUSHLEAF_KEY_MAX + 1];
	char kind[PUSHLEAF_KIND_MAX + 1];
	char factor[PUSHLEAF_FACTOR_MAX + 1];
	bool has_addr;
	uint8_t addr[PUSHLEAF_COMMIT_LEN];
	/* 1 .. PUSHLEAF_MAX_REFS; refs is owned by the struct when
	 * pushleaf_parse filled it (pushleaf_free), the caller's when the
	 * caller did (for pushleaf_format) */
	size_t nrefs;
	struct pushleaf_ref *refs;
};

/* The text of l, appended to out (reset first).  0, or GD_EINVAL when a
 * field breaks the rules above or the text would be longer than
 * PUSHLEAF_TEXT_MAX (then out is empty): so every text written parses. */
int pushleaf_format(struct buf *out, const struct pushleaf *l);

/* The fields of the text (len bytes, no NUL needed) into *out, refs
 * allocated (pushleaf_free them, also after a failure).  0, or GD_EINVAL
 * for a text that is not exactly as pushleaf_format writes it (a field
 * missing, out of order or out of bounds, an unknown kind or factor, a
 * number with a leading zero or too large, a line without its "\n"), or
 * GD_ETOOBIG for a text over PUSHLEAF_TEXT_MAX. */
int pushleaf_parse(struct pushleaf *out, const void *text, size_t len);

/* Frees what pushleaf_parse allocated in l (refs); NULL-safe, may be
 * called again. */
void pushleaf_free(struct pushleaf *l);

/* SHA-256(PUSHLEAF_ADDR_DOMAIN || salt || addr): the commitment of a
 * client address (its text, as the push log keeps it) under salt. */
void pushleaf_addr_commit(uint8_t out[PUSHLEAF_COMMIT_LEN],
                          const uint8_t salt[PUSHLEAF_SALT_LEN],
                          const char *addr);

#endif
