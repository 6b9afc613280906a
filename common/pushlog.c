/*
 * pushlog.c: the push log's canonical bytes, hash and chain walk.
 *
 * The bytes hashed are ours, not protobuf's: protobuf's encoding is not
 * canonical (field order, unknown fields, packed or not), and the chain
 * must be checkable by anyone with the fields, in any language, from
 * docs/push-log.md alone.
 */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "pushlog.h"
#include "banned.h"

static void put_u32(struct buf *b, uint32_t v)
{
	uint8_t be[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16),
			  (uint8_t)(v >> 8), (uint8_t)v };
	buf_add(b, be, sizeof(be));
}

static void put_u64(struct buf *b, uint64_t v)
{
	uint8_t be[8];
	for (int i = 0; i < 8; i++)
		be[i] = (uint8_t)(v >> (56 - 8 * i));
	buf_add(b, be, sizeof(be));
}

/* A string: its length (4 bytes, big-endian) and its bytes; an absent
 * string is an empty one. */
static void put_str(struct buf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	put_u32(b, (uint32_t)n);
	buf_add(b, s ? s : "", n);
}

void pushlog_encode(struct buf *out, const Grantd__V1__PushLogEntry *e)
{
	uint8_t zero[PUSHLOG_HASH_LEN] = { 0 };

	buf_reset(out);
	put_str(out, PUSHLOG_DOMAIN);
	put_str(out, e->origin);
	put_u64(out, e->n);
	/* prev: always 32 bytes (ops_check refuses other lengths) */
	buf_add(out, e->prev.len == PUSHLOG_HASH_LEN ? e->prev.data : zero,
		PUSHLOG_HASH_LEN);
	put_str(out, e->user);
	put_str(out, e->key_fp);
	put_str(out, e->key_kind);
	put_str(out, e->client_ip);
	put_str(out, e->factor);
	put_str(out, e->factor_detail);
	put_str(out, e->repo);
	put_u32(out, (uint32_t)e->n_changes);
	for (size_t i = 0; i < e->n_changes; i++) {
		put_str(out, e->changes[i]->ref);
		put_str(out, e->changes[i]->old);
		put_str(out, e->changes[i]->new_);
	}
	put_str(out, e->push_id);
	put_u64(out, (uint64_t)e->pushed_ms);
	put_u64(out, e->hlc);
}

void pushlog_hash(uint8_t out[PUSHLOG_HASH_LEN],
		  const Grantd__V1__PushLogEntry *e)
{
	struct buf b = BUF_INIT;

	pushlog_encode(&b, e);
	crypto_generichash(out, PUSHLOG_HASH_LEN, (const uint8_t *)b.p, b.len,
			   NULL, 0);
	buf_free(&b);
}

bool pushlog_hash_ok(const Grantd__V1__PushLogEntry *e)
{
	uint8_t h[PUSHLOG_HASH_LEN];

	if (e->hash.len != PUSHLOG_HASH_LEN)
		return false;
	pushlog_hash(h, e);
	return sodium_memcmp(h, e->hash.data, PUSHLOG_HASH_LEN) == 0;
}

void pushlog_verify_init(struct pushlog_verify *v)
{
	memset(v, 0, sizeof(*v));
}

static enum pushlog_break found2(struct pushlog_verify *v,
				 enum pushlog_break b, const char *site,
				 uint64_t n, const uint8_t *h0,
				 const uint8_t *h1)
{
	if (b > PUSHLOG_OK && b < PUSHLOG__COUNT)
		v->nbrk[b]++;
	if (v->brk == PUSHLOG_OK) {
		v->brk = b;
		snprintf(v->brk_site, sizeof(v->brk_site), "%s", site);
		v->brk_n = n;
		v->brk_hashes = h0 && h1;
		if (v->brk_hashes) {
			memcpy(v->brk_hash[0], h0, PUSHLOG_HASH_LEN);
			memcpy(v->brk_hash[1], h1, PUSHLOG_HASH_LEN);
		}
	}
	return b;
}

static enum pushlog_break found(struct pushlog_verify *v,
				enum pushlog_break b, const char *site,
				uint64_t n)
{
	return found2(v, b, site, n, NULL, NULL);
}

enum pushlog_break pushlog_verify_add(struct pushlog_verify *v,
				      const char *key_origin, uint64_t key_n,
				      const Grantd__V1__PushLogEntry *e)
{
	uint8_t zero[PUSHLOG_HASH_LEN] = { 0 };
	enum pushlog_break b = PUSHLOG_OK;

	v->entries++;
	if (v->sites == 0 || strcmp(v->origin, key_origin)) {
		v->sites++;
		snprintf(v->origin, sizeof(v->origin), "%s", key_origin);
		v->last = 0;
		memset(v->prev, 0, sizeof(v->prev));
		v->has_alt = false;
	}
	if (key_n != v->last + 1)
		/* the first number the chain lacks */
		b = found(v, PUSHLOG_MISSING, key_origin, v->last + 1);
	else if (!e)
		b = found(v, PUSHLOG_UNDECODABLE, key_origin, key_n);
	else if (!e->origin || strcmp(e->origin, key_origin) || e->n != key_n)
		b = found(v, PUSHLOG_MISPLACED, key_origin, key_n);
	else if (e->prev.len != PUSHLOG_HASH_LEN ||
		 (memcmp(e->prev.data, key_n == 1 ? zero : v->prev,
			 PUSHLOG_HASH_LEN) &&
		  (key_n == 1 || !v->has_alt ||
		   memcmp(e->prev.data, v->alt_prev, PUSHLOG_HASH_LEN))))
		b = found(v, PUSHLOG_WRONG_PREV, key_origin, key_n);
	else if (!pushlog_hash_ok(e))
		b = found(v, PUSHLOG_WRONG_HASH, key_origin, key_n);
	/* walk on from what is there, so one break is named once */
	v->last = key_n;
	v->has_alt = false;
	if (e && e->hash.len == PUSHLOG_HASH_LEN)
		memcpy(v->prev, e->hash.data, PUSHLOG_HASH_LEN);
	else
		memset(v->prev, 0xff, sizeof(v->prev));
	return b;
}

enum pushlog_break pushlog_verify_fork(struct pushlog_verify *v,
				       const char *key_origin, uint64_t key_n,
				       const uint8_t fork[PUSHLOG_HASH_LEN],
				       const Grantd__V1__PushLogEntry *e)
{
	v->entries++;
	if (v->sites == 0 || strcmp(v->origin, key_origin) ||
	    v->last != key_n || !e || !e->origin ||
	    strcmp(e->origin, key_origin) || e->n != key_n ||
	    e->hash.len != PUSHLOG_HASH_LEN ||
	    memcmp(e->hash.data, fork, PUSHLOG_HASH_LEN))
		return found(v, e ? PUSHLOG_MISPLACED : PUSHLOG_UNDECODABLE,
			     key_origin, key_n);
	v->forks++;
	memcpy(v->alt_prev, fork, PUSHLOG_HASH_LEN);
	v->has_alt = true;
	return found2(v, PUSHLOG_FORK, key_origin, key_n, v->prev, fork);
}

enum pushlog_break pushlog_verify_head(
	struct pushlog_verify *v, const char *origin, uint64_t last,
	const uint8_t last_hash[PUSHLOG_HASH_LEN], uint64_t head_n,
	const uint8_t head_hash[PUSHLOG_HASH_LEN])
{
	if (head_n > last)
		return found(v, PUSHLOG_TAIL_MISSING, origin, last + 1);
	if (head_n == last && head_n &&
	    memcmp(last_hash, head_hash, PUSHLOG_HASH_LEN))
		return found2(v, PUSHLOG_WRONG_HEAD, origin, head_n, head_hash,
			      last_hash);
	return PUSHLOG_OK;
}

enum pushlog_break pushlog_verify_peer(struct pushlog_verify *v,
				       const char *origin, uint64_t n,
				       const uint8_t *mine,
				       const uint8_t peer[PUSHLOG_HASH_LEN])
{
	if (!mine || !memcmp(mine, peer, PUSHLOG_HASH_LEN))
		return PUSHLOG_OK;
	return found2(v, PUSHLOG_PEER_HEAD, origin, n, mine, peer);
}

const char *pushlog_break_text(enum pushlog_break b)
{
	switch (b) {
	case PUSHLOG_OK:
		return "intact";
	case PUSHLOG_UNDECODABLE:
		return "the stored entry does not decode";
	case PUSHLOG_MISPLACED:
		return "the entry names another site or number than its key";
	case PUSHLOG_MISSING:
		return "the entry is missing (the chain skips it)";
	case PUSHLOG_WRONG_PREV:
		return "prev is not the hash of the entry before it";
	case PUSHLOG_WRONG_HASH:
		return "its hash does not match its contents (rewritten)";
	case PUSHLOG_TAIL_MISSING:
		return "it and the entries after it are missing (this site "
		       "had recorded them)";
	case PUSHLOG_FORK:
		return "two different entries have its number (a fork)";
	case PUSHLOG_WRONG_HEAD:
		return "the head this site recorded has another hash "
		       "(rewritten)";
	case PUSHLOG_PEER_HEAD:
		return "a peer holds another entry there";
	case PUSHLOG__COUNT:
		break;
	}
	return "?";
}

const char *pushlog_break_name(enum pushlog_break b)
{
	static const char *const names[PUSHLOG__COUNT] = {
		"ok", "undecodable", "misplaced", "missing", "wrong_prev",
		"wrong_hash", "tail_missing", "fork", "wrong_head",
		"peer_head",
	};
	return b >= 0 && b < PUSHLOG__COUNT ? names[b] : "?";
}

void pushlog_hex(char out[2 * PUSHLOG_HASH_LEN + 1], const uint8_t *h,
		 size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = len > PUSHLOG_HASH_LEN ? PUSHLOG_HASH_LEN : len;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[h[i] >> 4];
		out[2 * i + 1] = hex[h[i] & 15];
	}
	out[2 * n] = '\0';
}
