/*
 * note.h: C2SP signed notes, checkpoints and cosignatures: the text
 * formats of the push log's transparency log (issue 21, SPEC 9,
 * docs/push-log.md "Formats (C2SP)"), readable by any client of
 * c2sp.org/signed-note, tlog-checkpoint and tlog-cosignature (and by Go's
 * golang.org/x/mod/sumdb/note).
 *
 * A note is a text (lines ending in "\n") and a blank line, then
 * signature lines "— NAME BASE64(key id (4 bytes, big-endian) || sig)".
 * Two key types: NOTE_ALG_ED25519 (0x01) signs the text; NOTE_ALG_COSIG
 * (0x04, tlog-cosignature "cosignature/v1") signs
 * "cosignature/v1\ntime T\n" || text and its signature is
 * key id || T (8 bytes, big-endian) || Ed25519 signature.  A key id is
 * SHA-256(NAME || "\n" || alg || public key)[:4]; a verifier key is
 * written NAME+HEXID+BASE64(alg || public key), a signer key
 * PRIVATE+KEY+NAME+HEXID+BASE64(alg || Ed25519 seed) (Go's form).
 *
 * Everything parsed here may come from anyone: every length is bounded,
 * malformed input is an error, never a crash (tests/fuzz/fuzz_note.c).
 * Pure functions: any thread; libsodium (sodium_init() first).  Errors:
 * negative enum gd_err: GD_EINVAL malformed, GD_ETOOBIG over a limit
 * below, GD_ECRYPTO a signature by a known key that does not verify,
 * GD_ENOTFOUND no signature by a known key.
 */
#ifndef GD_NOTE_H
#define GD_NOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "tlog.h"

#define NOTE_ALG_ED25519  0x01
#define NOTE_ALG_COSIG    0x04
#define NOTE_PUB_LEN      32
#define NOTE_NAME_MAX     255 /* bytes of a key name or checkpoint origin */
#define NOTE_MAX_LEN      65536 /* bytes of a whole note */
#define NOTE_MAX_SIGS     100 /* signature lines in a note (C2SP: >= 16) */
#define NOTE_SIG_MAX      4096 /* decoded bytes of one signature (ML-DSA fits) */
#define NOTE_COSIG_HEADER "cosignature/v1\n"

struct note_vkey {
	char name[NOTE_NAME_MAX + 1]; /* NUL-terminated */
	size_t name_len;
	uint32_t id;
	uint8_t alg; /* NOTE_ALG_ED25519 or NOTE_ALG_COSIG */
	uint8_t pub[NOTE_PUB_LEN];
};

/* A secret: wipe it with note_skey_wipe(). */
struct note_skey {
	char name[NOTE_NAME_MAX + 1];
	size_t name_len;
	uint32_t id;
	uint8_t alg;
	uint8_t pub[NOTE_PUB_LEN];
	uint8_t sk[64]; /* libsodium's Ed25519 secret key: seed || pub */
};

/* A key name (or origin) C2SP allows: 1..NOTE_NAME_MAX bytes of UTF-8,
 * no Unicode space, no "+", no control character. */
bool note_name_ok(const char *name, size_t len);
uint32_t note_key_id(const char *name,
                     size_t len,
                     uint8_t alg,
                     const uint8_t pub[NOTE_PUB_LEN]);

/* A verifier key for name and pub (GD_EINVAL: bad name or alg). */
int note_vkey_init(struct note_vkey *out,
                   const char *name,
                   size_t len,
                   uint8_t alg,
                   const uint8_t pub[NOTE_PUB_LEN]);
/* Parses NAME+HEXID+BASE64 (s[0..len), untrusted); the id must be the
 * one the name and key make. */
int note_vkey_parse(struct note_vkey *out, const char *s, size_t len);
/* Appends NAME+HEXID+BASE64 to out. */
void note_vkey_format(struct buf *out, const struct note_vkey *k);

/* A signer key for name from a 32-byte Ed25519 seed; alg as above. */
int note_skey_from_seed(struct note_skey *out,
                        const char *name,
                        size_t len,
                        uint8_t alg,
                        const uint8_t seed[32]);
/* Parses PRIVATE+KEY+NAME+HEXID+BASE64; the id must match. */
int note_skey_parse(struct note_skey *out, const char *s, size_t len);
/* Appends PRIVATE+KEY+NAME+HEXID+BASE64 to out (a secret: the caller
 * wipes out). */
void note_skey_format(struct buf *out, const struct note_skey *k);
void note_skey_vkey(struct note_vkey *out, const struct note_skey *k);
void note_skey_wipe(struct note_skey *k);

/* Is text[0..len) a note text: 1..NOTE_MAX_LEN bytes of UTF-8 without
 * control characters but "\n", ending in "\n"? */
bool note_text_ok(const char *text, size_t len);

/* Appends to out the signature line of k over text (a NOTE_ALG_COSIG key
 * signs the cosignature/v1 message with time timestamp, < 2^63; an
 * NOTE_ALG_ED25519 key ignores it).  GD_EINVAL: text not a note text. */
int note_sign_line(struct buf *out,
                   const char *text,
                   size_t len,
                   const struct note_skey *k,
                   uint64_t timestamp);
/* Appends the signed note: text, a blank line, k's signature line. */
int note_sign(struct buf *out,
              const char *text,
              size_t len,
              const struct note_skey *k,
              uint64_t timestamp);
/* Appends "cosignature/v1\ntime T\n" || body: what a cosigner signs. */
void note_cosig_message(struct buf *out,
                        uint64_t timestamp,
                        const char *body,
                        size_t len);

struct note_sig {
	const char *name; /* into the message, not NUL-terminated */
	size_t name_len;
	const char *b64; /* the signature as written */
	size_t b64_len;
	uint32_t id;
	int key; /* keys[] index that verified it, -1: unknown */
	uint64_t timestamp; /* of a verified NOTE_ALG_COSIG signature */
};

/* What note_open() found; pointers into its message (borrowed). */
struct note {
	const char *text; /* the text, its final "\n" included */
	size_t text_len;
	size_t nsigs; /* signature lines, repeats left out */
	struct note_sig sigs[NOTE_MAX_SIGS];
	size_t nverified;
	int bad; /* on GD_ECRYPTO: the sigs[] index that failed */
};

/* Opens the signed note msg[0..len) (untrusted) against keys[0..nkeys):
 * a line by an unknown key (name and id) is listed with key -1 and
 * ignored; one by a known key must verify.  0 when at least one did;
 * GD_ENOTFOUND when none was by a known key (out still lists the lines);
 * GD_ECRYPTO when one by a known key fails (out->bad names it);
 * GD_EINVAL when malformed or two keys[] share a name and id and sign;
 * GD_ETOOBIG over NOTE_MAX_LEN, NOTE_MAX_SIGS or NOTE_SIG_MAX. */
int note_open(struct note *out,
              const char *msg,
              size_t len,
              const struct note_vkey *keys,
              size_t nkeys);

/* Standard padded base64 (RFC 4648 4), all of s[0..len) (untrusted),
 * into out[0..cap): the decoded length, or -1 when it is not base64 in
 * its one canonical spelling or does not fit. */
long note_b64_decode(uint8_t *out, size_t cap, const char *s, size_t len);

/* ---- tlog-checkpoint ---------------------------------------------------- */

struct note_checkpoint {
	char origin[NOTE_NAME_MAX + 1]; /* NUL-terminated */
	size_t origin_len;
	int64_t size;
	struct tlog_hash root;
	const char *ext; /* extension lines ("\n"-terminated), borrowed */
	size_t ext_len; /* 0: none */
};

/* Parses a checkpoint's note text (untrusted): origin (non-empty,
 * <= NOTE_NAME_MAX bytes), tree size (decimal, no leading zero,
 * < 2^63), root hash (base64 of 32 bytes), then non-empty extension
 * lines. */
int note_checkpoint_parse(struct note_checkpoint *out,
                          const char *text,
                          size_t len);
/* Appends the checkpoint text of origin, size and root (no extension
 * lines).  GD_EINVAL: an origin that is empty, too long or has a control
 * character, a size < 0. */
int note_checkpoint_format(struct buf *out,
                           const char *origin,
                           size_t len,
                           int64_t size,
                           const struct tlog_hash *root);

#endif
