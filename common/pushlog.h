/*
 * pushlog.h: the push log's chain (issue 12, SPEC 9, docs/push-log.md).
 *
 * Every accepted push is a PushLogEntry, numbered n = 1, 2, 3 ... per
 * origin site.  Entry n carries prev, the hash of entry n - 1 (32 zero
 * bytes for n = 1), and hash, BLAKE2b-256 over the canonical bytes of its
 * fields (pushlog_encode; docs/push-log.md spells them out).  So a site
 * that drops or rewrites one of its entries breaks its chain where it did,
 * and pushlog_verify names the first break.
 *
 * Pure functions of their arguments: any thread.  Uses libsodium (call
 * sodium_init() first, as every program here does).
 */
#ifndef GD_PUSHLOG_H
#define GD_PUSHLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"

#define PUSHLOG_HASH_LEN 32
/* What the canonical bytes begin with (a version: other bytes, other
 * hashes). */
#define PUSHLOG_DOMAIN "grantd push log v1"

/* The canonical bytes of e's fields, every field but hash, appended to
 * out (reset first). */
void pushlog_encode(struct buf *out, const Grantd__V1__PushLogEntry *e);

/* BLAKE2b-256 of pushlog_encode(e). */
void pushlog_hash(uint8_t out[PUSHLOG_HASH_LEN],
		  const Grantd__V1__PushLogEntry *e);

/* Does e's hash match its contents? */
bool pushlog_hash_ok(const Grantd__V1__PushLogEntry *e);

/* The walk over every origin's chain.  Feed the entries in key order
 * (origin, then n: CF_PUSHLOG's order) to pushlog_verify_add; the first
 * break is kept, later entries are still counted. */
enum pushlog_break {
	PUSHLOG_OK = 0,
	PUSHLOG_UNDECODABLE,  /* the stored bytes are no PushLogEntry */
	PUSHLOG_MISPLACED,    /* its origin or n differ from its key */
	PUSHLOG_MISSING,      /* entry `at` is missing (the chain skips it) */
	PUSHLOG_WRONG_PREV,   /* prev is not the hash of entry at - 1 */
	PUSHLOG_WRONG_HASH,   /* hash does not match the contents */
	PUSHLOG_TAIL_MISSING, /* entries from `at` on are missing: the site
			       * had recorded a later head */
	PUSHLOG_FORK,         /* two different entries `at` (hashes: both) */
	PUSHLOG_WRONG_HEAD,   /* the head the site recorded has another hash
			       * than the entry there (hashes: head, entry) */
	PUSHLOG_PEER_HEAD,    /* a peer's head `at` has another hash than
			       * the entry here (hashes: here, the peer's) */
	PUSHLOG__COUNT
};

struct pushlog_verify {
	uint64_t entries;     /* entries fed */
	unsigned sites;       /* origins seen */
	/* the chain being walked */
	char origin[65];
	uint64_t last;        /* its last n (0: none yet) */
	uint8_t prev[PUSHLOG_HASH_LEN];
	uint8_t alt_prev[PUSHLOG_HASH_LEN]; /* a fork's, at last */
	bool has_alt;
	uint64_t forks;       /* forks met (every one, not only the first) */
	uint64_t nbrk[PUSHLOG__COUNT]; /* every break met, by kind */
	/* the first break: what, where, and the two hashes it names (a fork,
	 * a head: brk_hashes says so) */
	enum pushlog_break brk;
	char brk_site[65];
	uint64_t brk_n;
	bool brk_hashes;
	uint8_t brk_hash[2][PUSHLOG_HASH_LEN];
};

void pushlog_verify_init(struct pushlog_verify *v);

/* One stored entry: its key's origin and n, and the entry (NULL: it did
 * not decode).  Returns the break this entry shows (PUSHLOG_OK: none);
 * the first one is kept in v. */
enum pushlog_break pushlog_verify_add(struct pushlog_verify *v,
				      const char *key_origin, uint64_t key_n,
				      const Grantd__V1__PushLogEntry *e);

/* A second entry e for the same (origin, n), stored under its hash
 * (fork): fed right after the entry it forks.  A fork is a break
 * (PUSHLOG_FORK, both hashes); the next entry may follow either. */
enum pushlog_break pushlog_verify_fork(struct pushlog_verify *v,
				       const char *key_origin, uint64_t key_n,
				       const uint8_t fork[PUSHLOG_HASH_LEN],
				       const Grantd__V1__PushLogEntry *e);

/* After the walk: the site recorded origin's head at head_n with
 * head_hash, and the walk ended that origin's chain at last (0: no entry)
 * whose hash is last_hash.  A head beyond the chain means its newest
 * entries were removed; a head of another hash, that the entry there was
 * rewritten.  Returns the break, kept in v if it is the first. */
enum pushlog_break pushlog_verify_head(
	struct pushlog_verify *v, const char *origin, uint64_t last,
	const uint8_t last_hash[PUSHLOG_HASH_LEN], uint64_t head_n,
	const uint8_t head_hash[PUSHLOG_HASH_LEN]);

/* A peer reports origin's head as (n, hash); here entry n has the hash
 * mine (NULL: not here yet, which is no break: this site is behind).
 * Another hash is a break (PUSHLOG_PEER_HEAD). */
enum pushlog_break pushlog_verify_peer(struct pushlog_verify *v,
				       const char *origin, uint64_t n,
				       const uint8_t *mine,
				       const uint8_t peer[PUSHLOG_HASH_LEN]);

/* "entry 3 is missing", ... for a break (of entry n). */
const char *pushlog_break_text(enum pushlog_break b);
/* "missing", "wrong_prev", ...: a break's name (JSON keys). */
const char *pushlog_break_name(enum pushlog_break b);

/* The hash as 64 lower-case hex digits. */
void pushlog_hex(char out[2 * PUSHLOG_HASH_LEN + 1], const uint8_t *h,
		 size_t len);

#endif
