/*
 * recops.c: which signed operations each replicated record keeps (recops.h
 * says which, and why), by its family's rule; recops_store.c stores them
 * (by log key, once).
 *
 * A record's operations are one RecordOps value at cf(1) key in CF_RECOPS,
 * sealed (an enrollment's operation holds its secret).  LWW, SET and LEAF
 * records keep one operation, written over; a mark or failures record
 * keeps a few, so its list is read, pruned and written again.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "pushlog.h"
#include "recops.h"
#include "recops_int.h"
#include "tlog.h"
#include "xalloc.h"
#include "banned.h"

/* Does the LWW record at key of cf carry op's stamp?  *out false when
 * there is none. */
static int stamped_by(struct store *s,
                      struct store_batch *b,
                      enum store_cf cf,
                      const struct buf *key,
                      const Grantd__V1__Op *op,
                      bool *out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, b, cf, key->p, key->len, &v);

	*out = false;
	if (rc == 0) {
		Grantd__V1__Stamped *st = grantd__v1__stamped__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		*out = st && st->hlc == op->hlc && st->origin &&
		       !strcmp(st->origin, op->origin);
		if (st)
			grantd__v1__stamped__free_unpacked(st, NULL);
	}
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* Does the record at key of cf hold exactly val? */
static int holds(struct store *s,
                 struct store_batch *b,
                 enum store_cf cf,
                 const struct buf *key,
                 const struct buf *val,
                 bool *out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, b, cf, key->p, key->len, &v);

	*out = rc == 0 && v.len == val->len && !memcmp(v.p, val->p, v.len);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* The record key of a non-push LWW, MAX or UNION operation. */
static void record_key(struct buf *k, const Grantd__V1__Op *op)
{
	if (op->body_case == GRANTD__V1__OP__BODY_MARK)
		records_key_mark(k, op->mark->user, op->mark->enroll_id);
	else if (op->body_case == GRANTD__V1__OP__BODY_FAILURE)
		records_key_fail(k, op->failure->user, op->failure->site);
	else
		records_key_lww(k, op);
}

static int note_lww(struct store *s,
                    struct store_batch *b,
                    const struct records_kind *f,
                    struct note *nt)
{
	const Grantd__V1__Op *op = nt->op;
	struct buf k = BUF_INIT;
	bool won = false;
	int rc = 0;

	if (op->body_case != GRANTD__V1__OP__BODY_REFS) {
		record_key(&k, op);
		if ((rc = stamped_by(s, b, f->cf, &k, op, &won)) == 0 && won)
			recops_put_one(b, nt, f->cf, &k);
	}
	for (size_t i = 0; op->body_case == GRANTD__V1__OP__BODY_REFS &&
	                   rc == 0 && i < op->refs->n_changes;
	     i++) {
		records_key_ref(&k, op->refs->repo, op->refs->changes[i]->ref);
		if ((rc = stamped_by(s, b, CF_REFS, &k, op, &won)) == 0 && won)
			recops_put_one(b, nt, CF_REFS, &k);
	}
	buf_free(&k);
	return rc;
}

/* A push log entry or a leaf: packed as its merge rule packs it, kept at
 * its place or, a fork, under its hash; [op] with the one holding it. */
static int note_entry(struct store *s,
                      struct store_batch *b,
                      const struct records_kind *f,
                      struct note *nt)
{
	const Grantd__V1__Op *op = nt->op;
	struct buf k = BUF_INIT, val = BUF_INIT;
	bool held = false;
	int rc;

	if (f->merge == RECORDS_SET) {
		Grantd__V1__PushLogEntry e = *op->push_log;
		e.base.n_unknown_fields = 0;
		e.base.unknown_fields = NULL;
		records_pack(&val, &e.base);
		records_key_pushlog(&k, e.origin, e.n);
		if ((rc = holds(s, b, f->cf, &k, &val, &held)) == 0 && !held &&
		    e.hash.len == PUSHLOG_HASH_LEN) {
			records_key_pushlog_fork(&k, e.origin, e.n,
			                         e.hash.data);
			rc = holds(s, b, f->cf, &k, &val, &held);
		}
	} else {
		Grantd__V1__PushLeaf l = *op->push_leaf;
		struct tlog_hash h;
		l.base.n_unknown_fields = 0;
		l.base.unknown_fields = NULL;
		records_pack(&val, &l.base);
		records_key_tleaf(&k, l.origin, l.index);
		if ((rc = holds(s, b, f->cf, &k, &val, &held)) == 0 && !held) {
			tlog_leaf_hash(&h, l.text.data, l.text.len);
			records_key_tleaf_fork(&k, l.origin, l.index, h.b);
			rc = holds(s, b, f->cf, &k, &val, &held);
		}
	}
	if (rc == 0 && held)
		recops_put_one(b, nt, f->cf, &k);
	buf_free(&k);
	buf_free(&val);
	return rc;
}

/* Does mark a dominate mark m: next as high, every scratch code m spent? */
static bool dominates(const Grantd__V1__Op *a, const Grantd__V1__Op *m)
{
	const Grantd__V1__Mark *x = a->mark, *y = m->mark;

	return x->next >= y->next &&
	       (x->scratch_used & y->scratch_used) == y->scratch_used;
}

/* Does the failures record (val) still keep one of op's stamps? */
static bool keeps_a_stamp(const Grantd__V1__Failures *rec,
                          const Grantd__V1__Op *op)
{
	for (size_t i = 0; rec && i < op->failure->n_hlc; i++)
		for (size_t j = 0; j < rec->n_hlc; j++)
			if (rec->hlc[j] == op->failure->hlc[i])
				return true;
	return false;
}

/* Does failures op a hold every attempt stamp of q (a re-issue of the
 * record, attest.h, holds them all)? */
static bool holds_all(const Grantd__V1__Op *a, const Grantd__V1__Op *q)
{
	for (size_t i = 0; i < q->failure->n_hlc; i++) {
		size_t j = 0;
		while (j < a->failure->n_hlc &&
		       a->failure->hlc[j] != q->failure->hlc[i])
			j++;
		if (j == a->failure->n_hlc)
			return false;
	}
	return true;
}

/* Does kept op k make op add nothing: it dominates op (a mark) or holds
 * every stamp of op's (failures), unless op is signed (op_signed: or
 * signed at commit, RECOPS_SIGNING), k is not, and op covers k as well:
 * then op takes k's place (a record a peer of an older release made,
 * re-issued signed by attest.h). */
static bool covers(const struct records_kind *f,
                   const Grantd__V1__Op *k,
                   const Grantd__V1__Op *op,
                   bool op_signed)
{
	bool ko = f->merge == RECORDS_MAX ? dominates(k, op) : holds_all(k, op);
	bool ok = f->merge == RECORDS_MAX ? dominates(op, k) : holds_all(op, k);

	return ko && (!ok || k->sig || !op_signed);
}

/* Are a and b one operation (origin, epoch, seq)? */
static bool same_op(const Grantd__V1__Op *a, const Grantd__V1__Op *b)
{
	return a->epoch == b->epoch && a->seq == b->seq && a->origin &&
	       b->origin && !strcmp(a->origin, b->origin);
}

/* Does the mark record at key k of cf hold exactly op's values (next and
 * scratch codes)?  Then op alone makes it: every kept op is below the
 * record, so op dominates each. */
static int mark_is(struct store *s,
                   struct store_batch *b,
                   enum store_cf cf,
                   const struct buf *k,
                   const Grantd__V1__Op *op,
                   bool *out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, b, cf, k->p, k->len, &v);

	*out = false;
	if (rc == 0) {
		Grantd__V1__Mark *m =
		        grantd__v1__mark__unpack(NULL, v.len, (uint8_t *)v.p);
		*out = m && m->next == op->mark->next &&
		       m->scratch_used == op->mark->scratch_used;
		if (m)
			grantd__v1__mark__free_unpacked(m, NULL);
	}
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* A mark (MAX) or failures (UNION): the kept operations and op, pruned by
 * the family's rule. */
static int note_many(struct store *s,
                     struct store_batch *b,
                     const struct records_kind *f,
                     struct note *nt)
{
	const Grantd__V1__Op *op = nt->op;
	struct buf k = BUF_INIT, v = BUF_INIT;
	struct kept kp = {0};
	Grantd__V1__Failures *rec = NULL;
	struct kept_form *keep;
	size_t n = 0;
	bool add = true;
	int rc;

	record_key(&k, op);
	if (f->merge == RECORDS_MAX) {
		/* the usual case, a token use that moved the mark: [op],
		 * without reading the kept ones */
		bool alone;
		if ((rc = mark_is(s, b, f->cf, &k, op, &alone)) < 0)
			goto out;
		if (alone) {
			recops_put_one(b, nt, f->cf, &k);
			goto out;
		}
	}
	if ((rc = recops_read_kept(s, b, f->cf, &k, &kp)) < 0)
		goto done;
	if (f->merge == RECORDS_UNION) {
		rc = store_get(s, b, f->cf, k.p, k.len, &v);
		if (rc < 0 && rc != GD_ENOTFOUND)
			goto done;
		rc = 0;
		rec = v.len ? grantd__v1__failures__unpack(NULL, v.len,
		                                           (uint8_t *)v.p)
		            : NULL;
		add = keeps_a_stamp(rec, op);
	}
	/* a mark a kept one dominates, or failures whose every stamp a kept
	 * one holds, add nothing: the list stays (covers) */
	for (size_t i = 0; i < kp.n; i++)
		if (kp.ops[i] && kp.ops[i]->body_case == op->body_case &&
		    covers(f, kp.ops[i], op, nt->is_signed))
			goto done;
	keep = xcalloc(kp.n + 1, sizeof(*keep));
	for (size_t i = 0; i < kp.n; i++) {
		const Grantd__V1__Op *q = kp.ops[i];
		bool mine = q && q->body_case == op->body_case;
		if (mine && same_op(q, op))
			add = false; /* kept already (a transfer brings it
			                again) */
		if (!mine || (f->merge == RECORDS_MAX && dominates(op, q)) ||
		    (f->merge == RECORDS_UNION &&
		     (!keeps_a_stamp(rec, q) || holds_all(op, q))))
			continue;
		keep[n++] = kp.form[i];
	}
	if (add)
		keep[n++] = recops_noted(b, nt);
	if (add || n != kp.n)
		recops_put_ops(b, f->cf, k.p, k.len, keep, n);
	free(keep);
done:
	if (rec)
		grantd__v1__failures__free_unpacked(rec, NULL);
	recops_free_kept(&kp);
out:
	buf_free(&k);
	buf_free(&v);
	return rc;
}

int recops_note(struct store *s,
                struct store_batch *b,
                const Grantd__V1__Op *op,
                const void *packed,
                size_t len,
                unsigned flags)
{
	const struct records_kind *f = records_by_body(op->body_case);
	struct note nt = {op,
	                  packed,
	                  len,
	                  BUF_INIT,
	                  flags & RECOPS_LOGGED,
	                  op->sig || (flags & RECOPS_SIGNING),
	                  false};
	struct buf k = BUF_INIT;
	int rc;

	if (!f || !op->origin)
		return GD_EPROTO;
	records_key_oplog(&nt.ref, op->origin, op->epoch, op->seq);
	/* the merge said op alone makes its one record: [op], no read */
	if ((flags & RECOPS_MADE) &&
	    op->body_case != GRANTD__V1__OP__BODY_REFS &&
	    (f->merge == RECORDS_LWW || f->merge == RECORDS_MAX)) {
		record_key(&k, op);
		recops_put_one(b, &nt, f->cf, &k);
		buf_free(&k);
		buf_free(&nt.ref);
		return 0;
	}
	switch (f->merge) {
	case RECORDS_LWW:
		rc = note_lww(s, b, f, &nt);
		break;
	case RECORDS_SET:
	case RECORDS_LEAF:
		rc = note_entry(s, b, f, &nt);
		break;
	case RECORDS_MAX:
	case RECORDS_UNION:
		rc = note_many(s, b, f, &nt);
		break;
	default:
		rc = GD_EPROTO;
	}
	buf_free(&nt.ref);
	return rc;
}

/* Each record key op may be kept at, by its family's rule: the record it
 * writes, each ref of a push, an entry's place and its fork key; fn stops
 * the walk by returning non-zero. */
static int each_key(const Grantd__V1__Op *op,
                    const struct records_kind *f,
                    int (*fn)(enum store_cf cf, const struct buf *k, void *),
                    void *arg)
{
	struct buf k = BUF_INIT;
	int rc = 0;

	if (f->merge == RECORDS_SET) {
		const Grantd__V1__PushLogEntry *e = op->push_log;
		records_key_pushlog(&k, e->origin, e->n);
		rc = fn(f->cf, &k, arg);
		if (rc == 0 && e->hash.len == PUSHLOG_HASH_LEN) {
			records_key_pushlog_fork(&k, e->origin, e->n,
			                         e->hash.data);
			rc = fn(f->cf, &k, arg);
		}
	} else if (f->merge == RECORDS_LEAF) {
		const Grantd__V1__PushLeaf *l = op->push_leaf;
		struct tlog_hash h;
		records_key_tleaf(&k, l->origin, l->index);
		rc = fn(f->cf, &k, arg);
		tlog_leaf_hash(&h, l->text.data, l->text.len);
		records_key_tleaf_fork(&k, l->origin, l->index, h.b);
		if (rc == 0)
			rc = fn(f->cf, &k, arg);
	} else if (op->body_case == GRANTD__V1__OP__BODY_REFS) {
		for (size_t i = 0; rc == 0 && i < op->refs->n_changes; i++) {
			records_key_ref(&k, op->refs->repo,
			                op->refs->changes[i]->ref);
			rc = fn(CF_REFS, &k, arg);
		}
	} else {
		record_key(&k, op);
		rc = fn(f->cf, &k, arg);
	}
	buf_free(&k);
	return rc;
}

struct refers {
	struct store *s;
	struct store_batch *b;
	const void *ref;
	size_t rlen;
	bool found;
};

/* each_key's step: does the record at k name the op?  1 stops the walk. */
static int names_it(enum store_cf cf, const struct buf *k, void *arg)
{
	struct refers *rf = arg;
	Grantd__V1__RecordOps *ro;
	int rc = recops_read_stored(rf->s, rf->b, cf, k->p, k->len, &ro);

	for (size_t i = 0; rc == 0 && ro && !rf->found && i < ro->n_refs; i++)
		rf->found = ro->refs[i].len == rf->rlen &&
		            !memcmp(ro->refs[i].data, rf->ref, rf->rlen);
	recops_free_stored(ro);
	return rc < 0 ? rc : rf->found;
}

int recops_refers(struct store *s,
                  struct store_batch *b,
                  const Grantd__V1__Op *op,
                  const void *ref,
                  size_t rlen,
                  bool *out)
{
	const struct records_kind *f = records_by_body(op->body_case);
	struct refers rf = {s, b, ref, rlen, false};
	int rc;

	*out = false;
	if (!f || (f->merge == RECORDS_SET && !op->push_log) ||
	    (f->merge == RECORDS_LEAF && !op->push_leaf))
		return 0;
	rc = each_key(op, f, names_it, &rf);
	*out = rf.found;
	return rc < 0 ? rc : 0;
}

bool recops_makes(const Grantd__V1__Op *op,
                  enum store_cf cf,
                  const void *key,
                  size_t klen)
{
	const struct records_kind *f = records_by_body(op->body_case);
	struct records_span origin;
	const uint8_t *fork;
	struct buf k = BUF_INIT;
	uint64_t n;
	bool same = false;

	if (!f || f->cf != cf)
		return false;
	switch (f->merge) {
	case RECORDS_SET:
		return records_pushlog_parse(key, klen, &origin, &n, &fork) ==
		               0 &&
		       origin.len == strlen(op->push_log->origin) &&
		       !memcmp(origin.p, op->push_log->origin, origin.len) &&
		       n == op->push_log->n;
	case RECORDS_LEAF:
		return records_tleaf_parse(key, klen, &origin, &n, &fork) ==
		               0 &&
		       origin.len == strlen(op->push_leaf->origin) &&
		       !memcmp(origin.p, op->push_leaf->origin, origin.len) &&
		       n == op->push_leaf->index;
	default:
		break;
	}
	if (op->body_case != GRANTD__V1__OP__BODY_REFS) {
		record_key(&k, op);
		same = k.len == klen && !memcmp(k.p, key, klen);
	}
	for (size_t i = 0; op->body_case == GRANTD__V1__OP__BODY_REFS &&
	                   !same && i < op->refs->n_changes;
	     i++) {
		records_key_ref(&k, op->refs->repo, op->refs->changes[i]->ref);
		same = k.len == klen && !memcmp(k.p, key, klen);
	}
	buf_free(&k);
	return same;
}

/* span -> out (65 bytes); GD_EPROTO when too long or empty */
static int span_site(char out[65], const struct records_span *s)
{
	if (!s->len || s->len > 64)
		return GD_EPROTO;
	memcpy(out, s->p, s->len);
	out[s->len] = '\0';
	return 0;
}

int recops_record_origin(char out[65],
                         bool *any,
                         enum store_cf cf,
                         const void *key,
                         size_t klen,
                         const void *val,
                         size_t vlen)
{
	const struct records_kind *f = records_kind(cf);
	struct records_span a, c;
	const uint8_t *fork;
	uint64_t n;
	int rc = GD_EPROTO;

	out[0] = '\0';
	*any = false;
	if (!f)
		return GD_EPROTO;
	switch (f->merge) {
	case RECORDS_LWW: {
		Grantd__V1__Stamped *st =
		        grantd__v1__stamped__unpack(NULL, vlen, val);
		if (st && st->origin && strlen(st->origin) <= 64) {
			snprintf(out, 65, "%s", st->origin);
			rc = *out ? 0 : GD_EPROTO;
		}
		if (st)
			grantd__v1__stamped__free_unpacked(st, NULL);
		return rc;
	}
	case RECORDS_SET:
		if (records_pushlog_parse(key, klen, &a, &n, &fork) < 0)
			return GD_EPROTO;
		return span_site(out, &a);
	case RECORDS_LEAF:
		if (records_tleaf_parse(key, klen, &a, &n, &fork) < 0)
			return GD_EPROTO;
		return span_site(out, &a);
	case RECORDS_UNION:
		if (records_fail_parse(key, klen, &a, &c) < 0)
			return GD_EPROTO;
		return span_site(out, &c);
	case RECORDS_MAX:
		*any = true;
		return 0;
	default:
		return GD_EPROTO;
	}
}
