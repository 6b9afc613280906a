/*
 * oplog.c: the operation log's entries and their batches' records; the
 * contract is oplog.h, the compact form is opsig.h's.
 */
#include <sodium.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "opsig.h"
#include "oplog.h"
#include "records.h"
#include "banned.h"

void oplog_cache_reset(struct oplog_cache *c)
{
	buf_reset(&c->key);
	buf_reset(&c->rec);
}

void oplog_cache_free(struct oplog_cache *c)
{
	buf_free(&c->key);
	buf_free(&c->rec);
}

static bool cached(const struct oplog_cache *c, const struct buf *key)
{
	return c->key.len && c->key.len == key->len &&
	       !memcmp(c->key.p, key->p, key->len);
}

static void remember(struct oplog_cache *c,
                     const struct buf *key,
                     const void *rec,
                     size_t len)
{
	buf_reset(&c->key);
	buf_add(&c->key, key->p, key->len);
	buf_reset(&c->rec);
	buf_add(&c->rec, rec, len);
}

/* The same batch: the heads (version, count, sig, prev, root) agree; a
 * record may carry a table beside its head. */
static bool same_head(const struct buf *a, const struct buf *b)
{
	return a->len >= OPSIG_REC_HEAD && b->len >= OPSIG_REC_HEAD &&
	       !memcmp(a->p, b->p, OPSIG_REC_HEAD);
}

/* Is rec the record at rkey (writing it when there is none)?  False when
 * another batch's record is there. */
static bool record_is(struct store *s,
                      struct store_batch *b,
                      struct oplog_cache *c,
                      const struct buf *rkey,
                      const struct buf *rec)
{
	struct buf have = BUF_INIT;
	bool same;

	if (cached(c, rkey))
		return same_head(&c->rec, rec);
	int rc = store_get(s, b, CF_OPBATCH, rkey->p, rkey->len, &have);
	if (rc == GD_ENOTFOUND) {
		store_put(b, CF_OPBATCH, rkey->p, rkey->len, rec->p, rec->len);
		remember(c, rkey, rec->p, rec->len);
		same = true;
	} else {
		same = rc == 0 && same_head(&have, rec);
		if (same)
			remember(c, rkey, have.p, have.len);
	}
	buf_free(&have);
	return same;
}

void oplog_put(struct store *s,
               struct store_batch *b,
               struct oplog_cache *c,
               const Grantd__V1__Op *op)
{
	struct buf k = BUF_INIT, rk = BUF_INIT, v = BUF_INIT, rec = BUF_INIT;
	uint64_t last;

	records_key_oplog(&k, op->origin, op->epoch, op->seq);
	if (opsig_compact(&v, &rec, &last, op) == 0) {
		records_key_oplog(&rk, op->origin, op->epoch, last);
		if (!record_is(s, b, c, &rk, &rec)) {
			log_warn("operation %s:%llu:%llu: its batch's record "
			         "differs from the one logged (its origin "
			         "signed "
			         "two batches over one seq); logged whole",
			         op->origin, (unsigned long long)op->epoch,
			         (unsigned long long)op->seq);
			buf_reset(&v);
		}
	}
	if (!v.len)
		records_pack(&v, &op->base);
	store_put(b, CF_OPLOG, k.p, k.len, v.p, v.len);
	sodium_memzero(v.p, v.len);
	buf_free(&k);
	buf_free(&rk);
	buf_free(&v);
	buf_free(&rec);
}

void oplog_put_batch(struct store_batch *b,
                     const char *origin,
                     uint64_t epoch,
                     uint64_t first,
                     struct buf *const *logged,
                     size_t n,
                     const struct buf *rec)
{
	struct buf k = BUF_INIT;

	for (size_t i = 0; i < n; i++) {
		records_key_oplog(&k, origin, epoch, first + i);
		store_put(b, CF_OPLOG, k.p, k.len, logged[i]->p,
		          logged[i]->len);
	}
	records_key_oplog(&k, origin, epoch, first + n - 1);
	store_put(b, CF_OPBATCH, k.p, k.len, rec->p, rec->len);
	buf_free(&k);
}

int oplog_whole(struct store *s,
                struct store_batch *b,
                struct oplog_cache *c,
                const char *key,
                size_t klen,
                struct buf *v)
{
	struct records_span origin;
	struct buf rk = BUF_INIT, out = BUF_INIT;
	uint64_t epoch, seq, last;
	int rc;

	if (records_oplog_parse(key, klen, &origin, &epoch, &seq) < 0)
		return GD_EPROTO;
	rc = opsig_compact_last((const uint8_t *)v->p, v->len, seq, &last);
	if (rc <= 0)
		goto done; /* whole, or GD_EPROTO */
	/* the record key: the entry's own key with the batch's last seq */
	buf_add(&rk, key, klen - 8);
	store_be64((uint8_t *)buf_extend(&rk, 8), last);
	if (!cached(c, &rk)) {
		struct buf rec = BUF_INIT;
		rc = store_get(s, b, CF_OPBATCH, rk.p, rk.len, &rec);
		if (rc == 0)
			remember(c, &rk, rec.p, rec.len);
		buf_free(&rec);
		if (rc < 0)
			goto done;
	}
	rc = opsig_expand(&out, (const uint8_t *)v->p, v->len, seq,
	                  (const uint8_t *)c->rec.p, c->rec.len);
	if (rc == 0) {
		sodium_memzero(v->p, v->len);
		buf_reset(v);
		buf_add(v, out.p, out.len);
	}
done:
	if (rc < 0)
		log_error(
		        "operation log entry %.*s:%llu:%llu not read whole: %s",
		        (int)origin.len, origin.p, (unsigned long long)epoch,
		        (unsigned long long)seq,
		        rc == GD_ENOTFOUND ? "its batch's record is missing"
		                           : gd_strerror(rc));
	sodium_memzero(out.p, out.len);
	buf_free(&out);
	buf_free(&rk);
	return rc == GD_ENOTFOUND ? GD_EPROTO : rc < 0 ? rc : 0;
}

int oplog_get(struct store *s,
              struct store_batch *b,
              const void *key,
              size_t klen,
              struct buf *out)
{
	struct oplog_cache c = {BUF_INIT, BUF_INIT};
	int rc = store_get(s, b, CF_OPLOG, key, klen, out);

	if (rc == 0)
		rc = oplog_whole(s, b, &c, key, klen, out);
	oplog_cache_free(&c);
	return rc;
}

int oplog_cut(struct store *s,
              const void *begin,
              size_t blen,
              const void *end,
              size_t elen,
              bool stream_end)
{
	struct buf rend = BUF_INIT;
	int rc = store_delete_range(s, CF_OPLOG, begin, blen, end, elen);

	if (rc < 0 || elen < 8)
		return rc;
	if (stream_end)
		records_key_oplog_past(&rend, end, elen);
	else
		buf_add(&rend, end, elen);
	rc = store_delete_range(s, CF_OPBATCH, begin, blen, rend.p, rend.len);
	buf_free(&rend);
	return rc;
}
