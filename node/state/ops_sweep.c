/*
 * ops_sweep.c: housekeeping through the batch: grants expired past their
 * grace forgotten (ops_sweep_grants, the digest and counts kept in step),
 * old operation log entries cut by range (ops_truncate_log), each one a
 * record still names copied to CF_KEPTOPS first (recops.h), and the kept
 * operations no record names any more dropped (ops_sweep_kept).
 */
#include <sodium.h>
#include <string.h>

#include "err.h"
#include "names.h"
#include "ops_int.h"
#include "recops.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

int ops_sweep_grants(struct ops *o, struct store_batch *b, int64_t now, int max)
{
	struct store_iter *it;
	struct ops_save sp;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc = 0, n = 0;

	ops_savepoint(o, b, &sp);
	store_iter_new(&it, o->store, NULL, CF_GRANTS, "", 0);
	while (n < max && (rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Grant *g = grantd__v1__grant__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		bool old = g && g->expires + OPS_GRANT_GRACE_S < now;
		if (g)
			grantd__v1__grant__free_unpacked(g, NULL);
		if (!old)
			continue;
		ops_digest_toggle(o, CF_GRANTS, key, klen, v.p, v.len);
		ops_count_record(o, o->counts, CF_GRANTS, v.p, v.len, -1, true);
		store_del(b, CF_GRANTS, key, klen);
		recops_drop(b, CF_GRANTS, key, klen);
		n++;
	}
	store_iter_free(&it);
	buf_free(&v);
	/* a scan that failed half-way takes back its deletions and their
	 * digest changes together */
	if (rc < 0) {
		ops_rollback(o, b, &sp);
		return rc;
	}
	ops_release(o, b);
	return n;
}

/* Each (origin, epoch) stream's run of old entries goes as one range
 * delete (store_delete_range): key-by-key tombstones made every later
 * truncation (each 30 s, or keep/2) and every range served step over all
 * that were ever cut, until compaction: a store that had cut 2.2 million
 * entries spent seconds per scan on the writer thread. */
static int cut_run(struct ops *o,
                   const struct buf *first,
                   uint64_t last_seq,
                   bool stream_end)
{
	uint8_t end[NAME_SITE_MAX + 1 + 16];

	if (first->len < 16 || first->len > sizeof(end))
		return 0; /* no run (a key is origin \0 epoch seq) */
	memcpy(end, first->p, first->len - 8);
	store_be64(end + first->len - 8, last_seq + 1);
	return oplog_cut(o->store, first->p, first->len, end, first->len,
	                 stream_end);
}

/* An old entry (key, its bytes v, decoded op) about to be cut: into kb
 * (CF_KEPTOPS) when a record still names it. */
static int keep_named(struct ops *o,
                      struct store_batch *kb,
                      struct oplog_cache *c,
                      const Grantd__V1__Op *op,
                      const char *key,
                      size_t klen,
                      const struct buf *v)
{
	struct buf whole = BUF_INIT;
	bool named;
	int rc = recops_refers(o->store, NULL, op, key, klen, &named);

	/* kept whole: the batch's record goes with the cut.  An entry that
	 * cannot be made whole (its record lost: logged by oplog_whole) has
	 * no proof to keep and is cut like the others, so that one damaged
	 * entry does not stop the retention for good. */
	if (rc == 0 && named) {
		buf_add(&whole, v->p, v->len);
		rc = oplog_whole(o->store, NULL, c, key, klen, &whole);
		if (rc == 0)
			store_put(kb, CF_KEPTOPS, key, klen, whole.p, whole.len);
		else if (rc == GD_EPROTO)
			rc = 0;
	}
	if (whole.p)
		sodium_memzero(whole.p, whole.len);
	buf_free(&whole);
	return rc;
}

/* The run's named entries kept (kb committed: the WAL has them before
 * the range delete), then the run cut. */
static int cut_kept(struct ops *o,
                    struct store_batch *kb,
                    const struct buf *first,
                    uint64_t last_seq,
                    bool stream_end)
{
	int rc = store_batch_count(kb) ? store_commit(kb, false) : 0;

	return rc < 0 ? rc : cut_run(o, first, last_seq, stream_end);
}

int ops_truncate_log(struct ops *o, uint64_t cutoff_ms, int max)
{
	struct store_iter *it;
	struct store_batch *kb;
	struct buf v = BUF_INIT, skip = BUF_INIT, first = BUF_INIT;
	struct oplog_cache cache = {BUF_INIT, BUF_INIT};
	const char *key;
	size_t klen;
	uint64_t last_seq = 0;
	int rc = 0, n = 0;

	store_batch_new(&kb, o->store);
	store_iter_new(&it, o->store, NULL, CF_OPLOG, "", 0);
	while (n < max && (rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Op *op = grantd__v1__op__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		bool old = op && hlc_ms(op->hlc) < cutoff_ms;
		if (old && klen > 16)
			rc = keep_named(o, kb, &cache, op, key, klen, &v);
		if (op) {
			records_op_wipe(op);
			grantd__v1__op__free_unpacked(op, NULL);
		}
		if (rc < 0)
			break;
		if (klen <= 16)
			continue;
		/* a new stream: cut the last one's run (what it still names
		 * kept first: the copies are in the WAL before the cut) */
		if (first.len &&
		    (klen != first.len || memcmp(key, first.p, klen - 8))) {
			/* the run went to its stream's end */
			if ((rc = cut_kept(o, kb, &first, last_seq, true)) < 0)
				break;
			buf_reset(&first);
		}
		if (old) {
			if (!first.len)
				buf_add(&first, key, klen);
			last_seq = store_get_be64(key + klen - 8);
			n++;
			continue;
		}
		/* within one stream stamps grow with seq: once one is
		 * recent, cut the run before it and skip the rest of the
		 * stream (seek past origin \0 epoch, all-ones seq) */
		if ((rc = cut_kept(o, kb, &first, last_seq, false)) < 0)
			break;
		buf_reset(&first);
		records_key_oplog_past(&skip, key, klen);
		store_iter_seek(it, skip.p, skip.len);
	}
	store_iter_free(&it);
	/* rc 0: the log's end, so the last run went to its stream's end */
	if (rc >= 0)
		rc = cut_kept(o, kb, &first, last_seq, rc == 0);
	store_batch_free(&kb);
	oplog_cache_free(&cache);
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	buf_free(&skip);
	buf_free(&first);
	return rc < 0 ? rc : n;
}

int ops_sweep_kept(struct ops *o, int max)
{
	struct store_iter *it;
	struct store_batch *b;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc = 0, n = 0, seen = 0;

	store_batch_new(&b, o->store);
	if (o->kept_cursor.len)
		store_iter_new_at(&it, o->store, NULL, CF_KEPTOPS, "", 0,
		                  o->kept_cursor.p, o->kept_cursor.len);
	else
		store_iter_new(&it, o->store, NULL, CF_KEPTOPS, "", 0);
	while (seen < max && (rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		/* the last call's last: looked at already */
		if (!seen && o->kept_cursor.len && klen == o->kept_cursor.len &&
		    !memcmp(key, o->kept_cursor.p, klen))
			continue;
		Grantd__V1__Op *op = grantd__v1__op__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		bool named = false;
		seen++;
		buf_reset(&o->kept_cursor);
		buf_add(&o->kept_cursor, key, klen);
		/* one that does not decode names nothing a record could use */
		if (op)
			rc = recops_refers(o->store, NULL, op, key, klen,
			                   &named);
		if (op) {
			records_op_wipe(op);
			grantd__v1__op__free_unpacked(op, NULL);
		}
		if (rc < 0)
			break;
		if (!named) {
			store_del(b, CF_KEPTOPS, key, klen);
			n++;
		}
	}
	store_iter_free(&it);
	if (rc == 0) /* the end: from the start next time */
		buf_reset(&o->kept_cursor);
	if (rc >= 0 && n)
		rc = store_commit(b, false);
	store_batch_free(&b);
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	return rc < 0 ? rc : n;
}
