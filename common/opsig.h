/*
 * opsig.h: signed operations (issue 21, SPEC 2.5 and 9, docs/security.md).
 *
 * Every operation is signed by its origin site, so that no site can make
 * an operation of another: a peer that relays, serves in a range or feeds
 * a mirror an operation "from" a site whose key it lacks is caught by
 * every receiver.
 *
 * The key.  A site's Ed25519 signing key is derived from the secret of
 * its CURVE key pair (grantctl keygen's key file) with libsodium's KDF
 * (crypto_kdf_derive_from_key, context "grantdsg", subkey 1) as the seed:
 * one secret per site to keep and back up, existing key files keep
 * working, a key rotation rotates both, and no scalar serves two
 * algorithms (the KDF output is independent of the X25519 key).  Peers
 * know it by its verifier key in the C2SP signed-note form
 * NAME+HEXID+BASE64 (note.h; [peer] verifier_key; `grantctl log key`
 * prints it), NAME being HOST/grantd/SITE, the site's log origin.
 *
 * The signature.  The writer commits operations in batches (group
 * commit); signing each one would cost the writer 25 us an operation and
 * every peer 60-90 us to check.  So one signature covers a batch: the
 * operations' bytes (each packed without its signature) are the leaves of
 * an RFC 6962 Merkle tree (tlog.h), and the origin signs
 *     "grantd op batch v2\n" || prev || root
 * once, prev being the chain value of the batch it signed before (32 zero
 * bytes for its first since it started) and a batch's chain value the
 * SHA-256 of that message.  Each operation carries OpSig: the signature,
 * prev, the root, its index, the batch's size and its inclusion proof.
 * Each operation stays checkable alone (relayed, in a range, in a
 * mirror's feed, long after), and a receiver that has checked a batch
 * checks the batch's other operations with hashes only (opsig_verifier
 * keeps the chain values it checked).  Every operation sent carries its
 * whole OpSig; the operation log keeps the parts a batch shares once
 * (below, "the log's compact form").
 *
 * The chain makes one signature check a whole run of batches: a checked
 * batch vouches for its prev, so the batch whose chain value that is
 * passes with hashes only, and so on back.  A receiver holding several
 * of an origin's operations at once (a range, a mirror's feed, the live
 * operations that queued while it was busy) checks them newest first
 * (opsig_verify_run), so that it makes one Ed25519 check per run, not one
 * per batch: catching up costs hashes, and a peer that falls behind
 * catches up for less than it fell behind by.
 *
 * The bytes signed are the packed Op without field 30; a receiver packs
 * the decoded Op again without it.  protobuf-c packs the fields it knows
 * in number order and unknown ones after them, so a field added to Op
 * later must take a number above every existing one (as Repo.renamed_from
 * did), or an older release would pack other bytes and refuse the op.
 *
 * Pure functions and caller-owned state: any thread, one caller per
 * object.  Needs sodium_init().
 */
#ifndef GD_OPSIG_H
#define GD_OPSIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"
#include "note.h"

#define OPSIG_HASH_LEN  32
#define OPSIG_PUB_LEN   NOTE_PUB_LEN
#define OPSIG_SIG_LEN   64
#define OPSIG_MAX_BATCH 65536 /* operations one signature covers */
#define OPSIG_DOMAIN    "grantd op batch v2\n"

/* This site's signing key, derived from its CURVE secret: a signed-note
 * Ed25519 key named HOST/grantd/SITE. */
struct opsig_signer {
	struct note_skey key;
};

/* The key name of site: "HOST/grantd/SITE", HOST being [node] host
 * without a "USER@" (NULL or empty: "localhost").  Returns 0, or
 * GD_EINVAL when it would not fit or is no key name (note_name_ok). */
int opsig_key_name(char out[NOTE_NAME_MAX + 1],
                   const char *host,
                   const char *site);

/* Is name (a key name) site's, HOST/grantd/SITE (opsig_key_name)? */
bool opsig_key_names_site(const char *name, const char *site);

/* Derive s from the 32-byte CURVE secret (raw, not Z85) under name.
 * Returns 0 or GD_EINVAL (a bad name). */
int opsig_signer_init(struct opsig_signer *s,
                      const uint8_t curve_sec[32],
                      const char *name);

/* The signer of the key file keyfile (grantctl keygen's) for site under
 * host ([node] host, NULL: localhost).  Returns 0, or GD_EIO/GD_EINVAL
 * with a message in err. */
int opsig_signer_load(struct opsig_signer *s,
                      const char *keyfile,
                      const char *host,
                      const char *site,
                      struct buf *err);

/* s's verifier key, NAME+HEXID+BASE64, appended to out. */
void opsig_signer_vkey(struct buf *out, const struct opsig_signer *s);

/* Wipe the secret half. */
void opsig_signer_wipe(struct opsig_signer *s);

/*
 * Sign a batch of n operations (1 <= n <= OPSIG_MAX_BATCH) and append to
 * each op's packed bytes its field 30: for i < n, ops[i] (a buf holding
 * the packed Op without a signature) gets the OpSig of index i.  chain
 * holds the chain value of the batch signed before (zeros: none) and is
 * set to this one's.  Returns 0 or GD_EINVAL (n out of range).
 */
int opsig_sign_batch(const struct opsig_signer *s,
                     uint8_t chain[OPSIG_HASH_LEN],
                     struct buf *const *ops,
                     size_t n);

/*
 * The log's compact form (node/state/oplog.h stores it).  Of a logged
 * operation's ~400 bytes at 32 clients, ~300 were its OpSig: a 64-byte
 * signature, the root and prev, and a path of 6 hashes, all but the index
 * and the path the same for every operation of its batch.  Those bytes
 * cost the writer's log its p99 (more to sync, a flush a second).  So the
 * log keeps each operation with an OpSig of its index and count only (and
 * its path, for a peer's operation: a site may hold part of another's
 * batch), and once per batch a record, local and never sent:
 *     version (1 byte, OPSIG_REC_VERSION), count (4, big-endian),
 *     sig (64), prev (32), root (32)
 * and, for a batch this site signed, the tree's table of stored hashes
 * (32 bytes x tlog_stored_count(count), tlog.h), from which any
 * operation's path is read without hashing.  opsig_expand makes the
 * whole signed operation again from the two; what a peer is sent is the
 * same as before.
 */
#define OPSIG_REC_VERSION 1
#define OPSIG_REC_HEAD    (1 + 4 + OPSIG_SIG_LEN + 2 * OPSIG_HASH_LEN)

/* opsig_sign_batch, and the log's compact form of the batch: logged[i]
 * (reset first) gets ops[i] with an OpSig of its index and count, rec
 * (reset first) the batch's record with its table.  logged and rec are
 * both NULL (then it is opsig_sign_batch) or both given. */
int opsig_sign_batch_logged(const struct opsig_signer *s,
                            uint8_t chain[OPSIG_HASH_LEN],
                            struct buf *const *ops,
                            size_t n,
                            struct buf *const *logged,
                            struct buf *rec);

/* A peer's signed op, compact for the log: packed (reset first) gets op
 * packed with an OpSig of index, count and path, rec (reset first) the
 * batch's record without a table, *last the seq of the batch's last
 * operation (its record's place).  GD_ENOTFOUND: op carries no whole
 * OpSig in bounds (it is logged as it is). */
int opsig_compact(struct buf *packed,
                  struct buf *rec,
                  uint64_t *last,
                  const Grantd__V1__Op *op);

/* Is the packed op (len bytes, sequence number seq) compact?  1 with
 * *last the seq of its batch's last operation; 0 when it is whole or
 * unsigned; GD_EPROTO when its OpSig does not decode or is out of
 * bounds. */
int opsig_compact_last(const uint8_t *op,
                       size_t len,
                       uint64_t seq,
                       uint64_t *last);

/* The whole signed op from its compact form (len bytes, sequence number
 * seq) and its batch's record (rlen bytes), appended to out.  0, or
 * GD_EPROTO when they do not fit (the op is not compact, the record is of
 * another count or version, or it has no table where the op has no
 * path). */
int opsig_expand(struct buf *out,
                 const uint8_t *op,
                 size_t len,
                 uint64_t seq,
                 const uint8_t *rec,
                 size_t rlen);

/* The keys a site checks operations with, and the chain values it has
 * checked (a direct-mapped cache: a batch's other operations, and the
 * batches a checked one vouches for, then cost hashes only). */
#define OPSIG_MAX_KEYS 64
#define OPSIG_CACHE    1024

struct opsig_key {
	char origin[65];
	uint8_t pub[OPSIG_PUB_LEN];
};

struct opsig_verifier {
	struct opsig_key keys[OPSIG_MAX_KEYS];
	size_t nkeys;
	struct {
		uint8_t chain[OPSIG_HASH_LEN];
		size_t key; /* index into keys */
		bool used;
	} cache[OPSIG_CACHE];
	uint64_t verifies; /* Ed25519 checks made */
	uint64_t cache_hits;
};

/* Empty: every origin unknown.  (Zeroing it is the same.) */
void opsig_verifier_init(struct opsig_verifier *v);

/* Add a key of origin (an origin may have several: its current key and
 * those it had before a rotation; an operation signed by any of them
 * passes).  Returns 0 (a key already there: nothing added) or GD_EINVAL
 * (full, or a bad origin). */
int opsig_verifier_add(struct opsig_verifier *v,
                       const char *origin,
                       const uint8_t pub[OPSIG_PUB_LEN]);

/* Fill v from c: every [peer]'s verifier_key (one key or several,
 * blank-separated, each named HOST/grantd/SITE of that peer's section)
 * and own, this site's key.  Returns 0, or GD_EINVAL with "PATH:LINE:
 * [peer X] verifier_key: why" in err. */
struct config;
int opsig_config_keys(struct opsig_verifier *v,
                      const struct config *c,
                      const struct opsig_signer *own,
                      struct buf *err);

/* Is there a key for origin? */
bool opsig_verifier_has(const struct opsig_verifier *v, const char *origin);

enum opsig_verdict {
	OPSIG_OK = 0, /* signed by its origin */
	OPSIG_NO_KEY, /* no key for its origin: not checked */
	OPSIG_MISSING, /* a key is known but the operation is unsigned */
	OPSIG_MALFORMED, /* OpSig out of bounds */
	OPSIG_BAD, /* the proof or the signature does not verify */
};

/* Check op's signature against its origin's keys.  The verdict; why (NULL
 * is fine) gets a few words for a refusal. */
enum opsig_verdict opsig_verify(struct opsig_verifier *v,
                                const Grantd__V1__Op *op,
                                struct buf *why);

/* Check n operations that will be applied in this order, newest first,
 * so that a checked batch vouches for the ones before it (the chain,
 * above); the verdicts go to d (n of them, in the ops' order; NULL: not
 * kept).  Applying them then calls opsig_verify again at the cost of
 * hashes, or uses d. */
void opsig_verify_run(struct opsig_verifier *v,
                      const Grantd__V1__Op *const *ops,
                      size_t n,
                      enum opsig_verdict *d);

/* "signed", "no key", "unsigned", "malformed signature", "bad
 * signature". */
const char *opsig_verdict_text(enum opsig_verdict d);

#endif
