/*
 * ops.c: the operation: open / reload / close, stamping local operations,
 * THE apply function (seq check, the body's merge, log append, vector
 * advance), skip, commit, save points, and the named calls that stand in
 * for struct ops' fields (ops.h).
 *
 * The merge rules themselves are in ops_merge.c, the vector in ops_vv.c,
 * the checks in ops_check.c; struct ops in ops_int.h.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "crashpoint.h"
#include "err.h"
#include "log.h"
#include "ops_int.h"
#include "opsig.h"
#include "recops.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

static int ops_start(struct ops *o, struct store *s, const struct config *cfg,
		     bool created);

/* key's value in b (NULL: committed), 0 when there is none */
int ops_meta_u64_in(struct store *s, struct store_batch *b, const char *key,
		    uint64_t *out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, b, CF_META, key, strlen(key), &v);

	*out = rc == 0 && v.len == 8 ? store_get_be64(v.p) : 0;
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

int ops_meta_u64(struct store *s, const char *key, uint64_t *out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, NULL, CF_META, key, strlen(key), &v);
	if (rc == 0 && v.len == 8)
		*out = store_get_be64(v.p);
	else if (rc == 0)
		rc = GD_EIO;
	buf_free(&v);
	return rc;
}

void ops_meta_put_u64(struct store_batch *b, const char *key, uint64_t val)
{
	uint8_t be[8];
	store_be64(be, val);
	store_put(b, CF_META, key, strlen(key), be, sizeof(be));
}

int ops_reload(struct ops *o)
{
	struct buf v = BUF_INIT;
	uint64_t h = 0;
	int rc;

	o->seq = 0;
	ops_count_undo(o, 0);
	o->vv_saves.len = o->vv_top = 0;
	if ((rc = ops_vv_load(o)) < 0)
		goto done;
	if ((rc = ops_meta_u64(o->store, META_EPOCH, &o->epoch)) < 0)
		goto done;
	rc = ops_meta_u64(o->store, META_SEQ, &o->seq);
	if (rc < 0 && rc != GD_ENOTFOUND)
		goto done;
	rc = ops_meta_u64(o->store, META_HLC, &h);
	if (rc < 0 && rc != GD_ENOTFOUND)
		goto done;
	hlc_observe(&o->hlc, h);
	memset(o->digest, 0, sizeof(o->digest));
	rc = store_get(o->store, NULL, CF_META, META_DIGEST,
		       strlen(META_DIGEST), &v);
	if (rc == 0 && v.len == DIGEST_LEN)
		memcpy(o->digest, v.p, DIGEST_LEN);
	rc = rc == GD_ENOTFOUND ? 0 : rc;
	memcpy(o->fam_digest, o->fam_committed, sizeof(o->fam_digest));
done:
	buf_free(&v);
	return rc;
}

/* ops_open's work on a zeroed o. */
static int ops_start(struct ops *o, struct store *s, const struct config *cfg,
		     bool created)
{
	struct store_batch *b;
	uint64_t epoch;
	int rc;

	o->store = s;
	o->cfg = cfg;
	snprintf(o->site, sizeof(o->site), "%s", cfg->site);
	if ((rc = ops_reload(o)) < 0 && rc != GD_ENOTFOUND)
		return rc;
	/* A new epoch at every start: a store restored from a backup (or
	 * one that lost its tail) can then never hand out a sequence number
	 * that peers already hold for different operations. */
	do
		randombytes_buf(&epoch, sizeof(epoch));
	while (epoch == 0);
	if (faultpoint("pushlog-drop-tail") &&
	    (rc = ops_pushlog_drop_tail(o)) < 0)
		return rc;
	store_batch_new(&b, s);
	ops_meta_put_u64(b, META_EPOCH, epoch);
	ops_meta_put_u64(b, META_SEQ, 0);
	if ((rc = ops_keyfp_open(o, b)) == 0 &&
	    (rc = ops_digest_open(o, b)) == 0)
		rc = store_commit(b, true);
	store_batch_free(&b);
	if (rc < 0)
		return rc;
	o->epoch = epoch;
	o->seq = 0;
	log_info("%s store site=%s epoch=%016llx", created ? "new" : "opened",
		 o->site, (unsigned long long)epoch);
	return 0;
}

int ops_open(struct ops **out, struct store *s, const struct config *cfg,
	     bool created)
{
	struct ops *o = xcalloc(1, sizeof(*o));
	int rc = ops_start(o, s, cfg, created);

	if (rc < 0)
		ops_destroy(&o);
	*out = o;
	return rc;
}

void ops_destroy(struct ops **op)
{
	struct ops *o = *op;

	if (!o)
		return;
	ops_outbox_clear(o);
	buf_free(&o->outbox);
	buf_free(&o->unsigned_seqs);
	oplog_cache_free(&o->logcache);
	buf_free(&o->kept_cursor);
	buf_free(&o->refs_touched);
	buf_free(&o->repos_touched);
	free(o->vv);
	buf_free(&o->vv_saves);
	for (int cf = 0; cf < CF__COUNT; cf++)
		ops_count_free(&o->counts[cf]);
	free(o->undo);
	free(o);
	*op = NULL;
}

uint64_t ops_stamp(struct ops *o)
{
	return hlc_now(&o->hlc);
}

/* Pack an LWW body as its record, stamped with its operation's (hlc,
 * origin): fields 14 and 15 of every LWW record (see Stamped). */
void ops_pack_stamped(struct buf *out, const ProtobufCMessage *body,
		      uint64_t hlc, const char *origin)
{
	const ProtobufCMessageDescriptor *d = body->descriptor;
	const ProtobufCFieldDescriptor *fh =
		protobuf_c_message_descriptor_get_field(d, 14);
	const ProtobufCFieldDescriptor *fo =
		protobuf_c_message_descriptor_get_field(d, 15);
	uint8_t *copy = xmemdup(body, d->sizeof_message);

	memcpy(copy + fh->offset, &hlc, sizeof(hlc));
	*(protobuf_c_boolean *)(copy + fh->quantifier_offset) = 1;
	memcpy(copy + fo->offset, &origin, sizeof(origin));
	records_pack(out, (const ProtobufCMessage *)copy);
	free(copy);
}

/* ops_apply; log: write the operation to the log here (false for one of
 * this site's own, which ops_commit logs once signed). */
static int apply(struct ops *o, struct store_batch *b, const Grantd__V1__Op *op,
		 bool *applied, bool log)
{
	struct ops_save sp;
	uint64_t have;
	bool made;
	int rc;

	*applied = false;
	have = ops_vv_get(o, b, op->origin, op->epoch);
	if (op->seq <= have)
		return 0;
	if (op->seq != have + 1)
		return GD_EINVAL;
	hlc_observe(&o->hlc, op->hlc);
	ops_savepoint(o, b, &sp);
	if ((rc = ops_merge_op(o, b, op, &made)) < 0) {
		/* e.g. a push whose second ref could not be read: its first
		 * ref's record and digest change go, together */
		ops_rollback(o, b, &sp);
		goto done;
	}
	/* kept with the records it made (recops.h), named by its log key:
	 * a peer's operation is logged here, a local one by ops_commit once
	 * signed, both in b */
	unsigned how = RECOPS_LOGGED | (made ? RECOPS_MADE : 0) |
		       (!log && o->signer ? RECOPS_SIGNING : 0);
	if ((rc = recops_note(o->store, b, op, NULL, 0, how)) < 0) {
		ops_rollback(o, b, &sp);
		goto done;
	}
	if (log)
		oplog_put(o->store, b, &o->logcache, op);

	ops_vv_set(o, b, op->origin, op->epoch, op->seq);

	if (!strcmp(op->origin, o->site) && op->epoch == o->epoch &&
	    op->seq > o->seq)
		o->seq = op->seq;
	ops_release(o, b);
	*applied = true;
done:
	return rc;
}

int ops_apply(struct ops *o, struct store_batch *b, const Grantd__V1__Op *op,
	      bool *applied)
{
	return apply(o, b, op, applied, true);
}

int ops_skip(struct ops *o, struct store_batch *b, const char *origin,
	     uint64_t epoch, uint64_t seq, uint64_t hlc, bool *applied)
{
	uint64_t have = ops_vv_get(o, b, origin, epoch);

	*applied = false;
	if (seq <= have)
		return 0;
	if (seq != have + 1)
		return GD_EINVAL;
	/* the clock still learns the stamp: a later visible operation of
	 * this origin is stamped after it anyway */
	hlc_observe(&o->hlc, hlc);
	ops_vv_set(o, b, origin, epoch, seq);
	*applied = true;
	return 0;
}

bool ops_mirror_visible(const Grantd__V1__Op *op)
{
	const struct records_kind *k = op ? records_by_body(op->body_case) :
					    NULL;

	return k && records_mirror_visible(k->cf);
}

int ops_local(struct ops *o, struct store_batch *b, Grantd__V1__Op *op)
{
	struct buf why = BUF_INIT;
	bool applied;
	int rc;

	op->origin = o->site;
	op->epoch = o->epoch, op->has_epoch = 1;
	op->seq = o->seq + 1, op->has_seq = 1;
	if (!op->has_hlc || !op->hlc)
		op->hlc = hlc_now(&o->hlc);
	op->has_hlc = 1;
	/* what peers would refuse is never made here: one refused operation
	 * would stop every later one of this origin at every peer */
	if ((rc = ops_check(op, &why)) < 0) {
		log_error("operation refused before it was made: %s", why.p);
		buf_free(&why);
		return GD_EINVAL;
	}
	op->sig = NULL; /* ops_commit signs it with its batch */
	rc = apply(o, b, op, &applied, false);
	if (rc == 0) {
		size_t n = grantd__v1__op__get_packed_size(op);
		uint8_t len[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16),
				   (uint8_t)(n >> 8), (uint8_t)n };
		buf_add(&o->outbox, len, sizeof(len));
		grantd__v1__op__pack(op, buf_extend(&o->outbox, n));
		buf_add(&o->unsigned_seqs, &op->seq, sizeof(op->seq));
	}
	return rc;
}

bool ops_pending(const struct ops *o, struct store_batch *b)
{
	if (store_batch_count(b) > 0)
		return true;
	for (size_t i = 0; i < o->nvv; i++)
		if (o->vv[i].dirty)
			return true;
	return false;
}

/* The outbox's operations after outbox_signed, each "4-byte length, op":
 * signed as one batch (opsig_sign_batch_logged), written to the log in
 * the compact form with the batch's record (oplog_put_batch), and put back
 * in the outbox signed whole.  Unsigned (and logged whole) without a
 * signer. */
static int sign_outbox(struct ops *o, struct store_batch *b)
{
	size_t n = o->unsigned_seqs.len / sizeof(uint64_t), at, i;
	struct buf *each, **ptrs, *logged = NULL, **lptrs = NULL;
	struct buf out = BUF_INIT, k = BUF_INIT, rec = BUF_INIT;
	uint64_t first = 0, seq;
	int rc = 0;

	if (n == 0)
		return 0;
	each = xcalloc(n, sizeof(*each));
	ptrs = xcalloc(n, sizeof(*ptrs));
	for (i = 0, at = o->outbox_signed; i < n; i++) {
		const uint8_t *l = (const uint8_t *)o->outbox.p + at;
		size_t len = (size_t)l[0] << 24 | (size_t)l[1] << 16 |
			     (size_t)l[2] << 8 | l[3];
		GD_ASSERT(at + 4 + len <= o->outbox.len);
		buf_add(&each[i], l + 4, len);
		ptrs[i] = &each[i];
		at += 4 + len;
		/* ops_local numbers them in turn and ops_rollback takes back
		 * the seqs with the operations: a batch's seqs run without a
		 * gap, which the log's compact form keys its record by */
		memcpy(&seq, o->unsigned_seqs.p + i * sizeof(seq), sizeof(seq));
		if (i == 0)
			first = seq;
		GD_ASSERT(seq == first + i);
	}
	GD_ASSERT(at == o->outbox.len);
	if (o->signer) {
		logged = xcalloc(n, sizeof(*logged));
		lptrs = xcalloc(n, sizeof(*lptrs));
		for (i = 0; i < n; i++)
			lptrs[i] = &logged[i];
		rc = opsig_sign_batch_logged(o->signer, o->sig_chain, ptrs, n,
					     lptrs, &rec);
		if (rc == 0)
			oplog_put_batch(b, o->site, o->epoch, first, lptrs, n,
					&rec);
	}
	for (i = 0; rc == 0 && i < n; i++) {
		size_t len = each[i].len;
		uint8_t hdr[4] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16),
				   (uint8_t)(len >> 8), (uint8_t)len };
		if (!o->signer) { /* unsigned: logged whole */
			records_key_oplog(&k, o->site, o->epoch, first + i);
			store_put(b, CF_OPLOG, k.p, k.len, each[i].p,
				  each[i].len);
		}
		buf_add(&out, hdr, sizeof(hdr));
		buf_add(&out, each[i].p, each[i].len);
	}
	if (rc == 0) {
		sodium_memzero(o->outbox.p + o->outbox_signed,
			       o->outbox.len - o->outbox_signed);
		o->outbox.len = o->outbox_signed;
		buf_add(&o->outbox, out.p, out.len);
		o->outbox_signed = o->outbox.len;
		buf_reset(&o->unsigned_seqs);
	}
	for (i = 0; i < n; i++) {
		sodium_memzero(each[i].p, each[i].len);
		buf_free(&each[i]);
		if (logged && logged[i].p) {
			sodium_memzero(logged[i].p, logged[i].len);
			buf_free(&logged[i]);
		}
	}
	if (out.p)
		sodium_memzero(out.p, out.len);
	buf_free(&out);
	buf_free(&k);
	buf_free(&rec);
	free(each);
	free(ptrs);
	free(logged);
	free(lptrs);
	return rc;
}

void ops_set_signer(struct ops *o, const struct opsig_signer *s)
{
	o->signer = s;
}

int ops_commit(struct ops *o, struct store_batch *b, bool sync)
{
	int rc;

	/* the cache may name this batch's writes, committed or not */
	oplog_cache_reset(&o->logcache);
	if ((rc = sign_outbox(o, b)) < 0)
		return rc;
	ops_vv_flush(o, b);
	o->vv_saves.len = o->vv_top = 0; /* store_commit drops save points */
	if (store_batch_count(b) == 0) {
		rc = store_commit(b, sync);
		if (rc == 0)
			o->nundo = 0;
		return rc;
	}
	ops_meta_put_u64(b, META_SEQ, o->seq);
	ops_meta_put_u64(b, META_HLC, o->hlc.last);
	store_put(b, CF_META, META_DIGEST, strlen(META_DIGEST), o->digest,
		  DIGEST_LEN);
	if ((rc = store_commit(b, sync)) == 0) {
		memcpy(o->fam_committed, o->fam_digest,
		       sizeof(o->fam_committed));
		o->nundo = 0;
	}
	return rc;
}

/* The header of a copy of the vector on o->vv_saves (its entries follow). */
struct ops_vv_saved {
	size_t prev; /* the enclosing copy's offset */
	size_t n;
};

void ops_savepoint(struct ops *o, struct store_batch *b, struct ops_save *sp)
{
	struct ops_vv_saved h = { .prev = o->vv_top, .n = o->nvv };

	memcpy(sp->digest, o->digest, sizeof(sp->digest));
	memcpy(sp->fam_digest, o->fam_digest, sizeof(sp->fam_digest));
	sp->seq = o->seq;
	sp->outbox_len = o->outbox.len;
	sp->unsigned_len = o->unsigned_seqs.len;
	sp->refs_len = o->refs_touched.len;
	sp->repos_len = o->repos_touched.len;
	sp->undo_len = o->nundo;
	sp->vv_at = o->vv_top = o->vv_saves.len;
	buf_add(&o->vv_saves, &h, sizeof(h));
	if (o->nvv)
		buf_add(&o->vv_saves, o->vv, o->nvv * sizeof(*o->vv));
	store_batch_savepoint(b);
}

/* Drop the innermost copy of the vector. */
static void vv_pop(struct ops *o)
{
	struct ops_vv_saved h;

	memcpy(&h, o->vv_saves.p + o->vv_top, sizeof(h));
	o->vv_saves.len = o->vv_top;
	o->vv_top = h.prev;
}

void ops_release(struct ops *o, struct store_batch *b)
{
	vv_pop(o);
	store_batch_release(b);
}

int ops_rollback(struct ops *o, struct store_batch *b,
		 const struct ops_save *sp)
{
	int rc = store_batch_rollback(b);
	struct ops_vv_saved h;

	oplog_cache_reset(&o->logcache);

	memcpy(o->digest, sp->digest, sizeof(o->digest));
	memcpy(o->fam_digest, sp->fam_digest, sizeof(o->fam_digest));
	o->seq = sp->seq;
	if (o->outbox.len > sp->outbox_len) {
		sodium_memzero(o->outbox.p + sp->outbox_len,
			       o->outbox.len - sp->outbox_len);
		o->outbox.len = sp->outbox_len;
	}
	if (o->unsigned_seqs.len > sp->unsigned_len)
		o->unsigned_seqs.len = sp->unsigned_len;
	if (o->refs_touched.len > sp->refs_len)
		o->refs_touched.len = sp->refs_len;
	if (o->repos_touched.len > sp->repos_len)
		o->repos_touched.len = sp->repos_len;
	ops_count_undo(o, sp->undo_len);
	/* the vector as it was, dirty marks included: its changes are in
	 * memory only until ops_commit */
	GD_ASSERT(sp->vv_at == o->vv_top);
	memcpy(&h, o->vv_saves.p + sp->vv_at, sizeof(h));
	GD_GROW(o->vv, o->capvv, h.n);
	if (h.n)
		memcpy(o->vv, o->vv_saves.p + sp->vv_at + sizeof(h),
		       h.n * sizeof(*o->vv));
	o->nvv = h.n;
	vv_pop(o);
	return rc;
}

void ops_outbox_clear(struct ops *o)
{
	if (o->outbox.p)
		sodium_memzero(o->outbox.p, o->outbox.len);
	buf_reset(&o->outbox);
	buf_reset(&o->unsigned_seqs);
	o->outbox_signed = 0;
	oplog_cache_reset(&o->logcache);
}

/* ---- named calls instead of fields ---- */

const char *ops_site(const struct ops *o)
{
	return o->site;
}

uint64_t ops_epoch(const struct ops *o)
{
	return o->epoch;
}

uint64_t ops_seq(const struct ops *o)
{
	return o->seq;
}

uint64_t ops_published(const struct ops *o)
{
	return o->published;
}

void ops_set_published(struct ops *o, uint64_t seq)
{
	o->published = seq;
}

const uint8_t *ops_digest(const struct ops *o)
{
	return o->digest;
}

uint64_t ops_hlc_last(const struct ops *o)
{
	return o->hlc.last;
}

struct hlc *ops_hlc(struct ops *o)
{
	return &o->hlc;
}

struct store *ops_store(const struct ops *o)
{
	return o->store;
}

const struct config *ops_config(const struct ops *o)
{
	return o->cfg;
}

size_t ops_vv_count(const struct ops *o)
{
	return o->nvv;
}

const struct ops_vv *ops_vv_at(const struct ops *o, size_t i)
{
	GD_ASSERT(i < o->nvv);
	return &o->vv[i];
}

/* Swap *from and *out; what out held is dropped (wiped when secret). */
static void swap_out(struct buf *from, struct buf *out, bool secret)
{
	struct buf t = *out;

	*out = *from;
	if (secret && t.p)
		sodium_memzero(t.p, t.len);
	buf_reset(&t);
	*from = t;
}

void ops_take_outbox(struct ops *o, struct buf *out)
{
	/* what is taken is what was committed, signed by ops_commit (a
	 * unit test may take operations it never commits: unsigned) */
	swap_out(&o->outbox, out, true);
	buf_reset(&o->unsigned_seqs);
	o->outbox_signed = 0;
}

void ops_take_refs(struct ops *o, struct buf *out)
{
	swap_out(&o->refs_touched, out, false);
}

void ops_take_repos(struct ops *o, struct buf *out)
{
	swap_out(&o->repos_touched, out, false);
}




uint64_t ops_pushlog_refused(const struct ops *o)
{
	return o->pushlog_refused;
}
