/*
 * ops_merge.c: every merge rule, an operation's (ops_merge_op, for
 * ops_apply) and a snapshot record's (ops_merge_record) side by side.
 *
 * Rules (SPEC 5): users, enrollments, grants, unlocks, address
 * revocations and repositories are last-writer-wins registers ordered by
 * (hlc, origin), and so are refs (one register per (repo, ref); the tip
 * that loses noted in CF_LOSERS); token-use marks merge by max (next) and
 * union (scratch codes spent); failures by union of attempt stamps per
 * (user, site), the newest kept; the push log is a set: one entry per
 * (origin, n), a second different one kept beside it as a fork.  Each rule
 * is commutative, associative and idempotent, so sites that apply the same
 * operations and records in any order end with the same records, and so
 * with the same digest.  The transparency log's leaves are the exception
 * (ops_tlog.c): an origin's tree only grows at its end, so a leaf is taken
 * at index = the tree size here and refused beyond it; each origin's
 * operations arrive in its sequence and a snapshot sends leaves in key
 * order, so an honest origin's leaves always come in order.  A second text
 * for an index held is kept beside the first, never in its place.
 * A state transfer's record that comes with the signed operations that
 * made it (recops.h) is made again from them (ops_merge_signed), never
 * from its bytes.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "names.h"
#include "ops_int.h"
#include "pushlog.h"
#include "recops.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

#define SET_STAMP(op, e, s, h)                                                 \
	((op).epoch = (e), (op).has_epoch = 1, (op).seq = (s),                 \
	 (op).has_seq = 1, (op).hlc = (h), (op).has_hlc = 1)

bool ops_stamp_after(uint64_t h1, const char *o1, uint64_t h2,
			const char *o2)
{
	if (h1 != h2)
		return h1 > h2;
	return strcmp(o1 ? o1 : "", o2 ? o2 : "") > 0;
}

/* Put val at key in place of old (empty: none), keeping the digest, the
 * live counts and the derived families in step; nothing when the bytes
 * are the same. */
static void replace_record(struct ops *o, struct store_batch *b,
			   enum store_cf cf, const void *key, size_t klen,
			   const struct buf *old, const struct buf *val)
{
	if (old->len == val->len && !memcmp(old->p, val->p, val->len))
		return;
	if (old->len)
		ops_digest_toggle(o, cf, key, klen, old->p, old->len);
	ops_digest_toggle(o, cf, key, klen, val->p, val->len);
	ops_count_record(o, o->counts, cf, old->p, old->len, -1, true);
	ops_count_record(o, o->counts, cf, val->p, val->len, 1, true);
	if (cf == CF_USERS) {
		ops_keyfp_index(b, old->p, old->len, false);
		ops_keyfp_index(b, val->p, val->len, true);
	}
	store_put(b, cf, key, klen, val->p, val->len);
}

/* Write val at key unless the record there carries a later stamp. */
static int lww_put(struct ops *o, struct store_batch *b, enum store_cf cf,
		   const void *key, size_t klen, const struct buf *val,
		   uint64_t hlc, const char *origin, bool *won)
{
	struct buf old = BUF_INIT;
	int rc;

	*won = false;
	rc = store_get(o->store, b, cf, key, klen, &old);
	if (rc == 0) {
		Grantd__V1__Stamped *st = grantd__v1__stamped__unpack(
			NULL, old.len, (const uint8_t *)old.p);
		/* a record that does not decode loses to anything */
		bool later = !st ||
			     ops_stamp_after(hlc, origin, st->hlc, st->origin);
		if (st)
			grantd__v1__stamped__free_unpacked(st, NULL);
		if (!later)
			goto done;
	} else if (rc != GD_ENOTFOUND) {
		goto done;
	} else {
		buf_reset(&old);
	}
	rc = 0;
	replace_record(o, b, cf, key, klen, &old, val);
	*won = true;
done:
	sodium_memzero(old.p, old.len);
	buf_free(&old);
	return rc;
}

static int apply_mark(struct ops *o, struct store_batch *b,
		      const Grantd__V1__Mark *m, bool *made)
{
	struct buf k = BUF_INIT, old = BUF_INIT, val = BUF_INIT;
	Grantd__V1__Mark merged = *m;
	int rc;

	/* fields of a newer protocol would make the bytes, and so the
	 * digest, depend on which copy arrived first */
	merged.base.n_unknown_fields = 0;
	merged.base.unknown_fields = NULL;

	records_key_mark(&k, m->user, m->enroll_id);
	rc = store_get(o->store, b, CF_MARKS, k.p, k.len, &old);
	if (rc == 0) {
		Grantd__V1__Mark *om = grantd__v1__mark__unpack(
			NULL, old.len, (const uint8_t *)old.p);
		if (om) {
			if (om->next > merged.next)
				merged.next = om->next;
			merged.scratch_used |= om->scratch_used;
			grantd__v1__mark__free_unpacked(om, NULL);
		}
	} else if (rc != GD_ENOTFOUND) {
		goto done;
	}
	merged.has_next = merged.has_scratch_used = 1;
	merged.has_enroll_id = 1;
	*made = merged.next == m->next && merged.scratch_used == m->scratch_used;
	records_pack(&val, &merged.base);
	rc = 0;
	replace_record(o, b, CF_MARKS, k.p, k.len, &old, &val);
done:
	buf_free(&k);
	buf_free(&old);
	buf_free(&val);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Attempts merge by union of their stamps (one stamp, one attempt: see
 * Failures in grantd.proto), the newest OPS_MAX_FAILURES_KEPT kept; the
 * newest of a union is the newest of the newest of its parts, so the bound
 * keeps the rule associative. */
static int apply_failure(struct ops *o, struct store_batch *b,
			 const Grantd__V1__Failures *f)
{
	struct buf k = BUF_INIT, old = BUF_INIT, val = BUF_INIT;
	Grantd__V1__Failures merged = GRANTD__V1__FAILURES__INIT;
	uint64_t at[2 * OPS_MAX_FAILURES_KEPT];
	size_t n = 0;
	int rc;

	records_key_fail(&k, f->user, f->site);
	rc = store_get(o->store, b, CF_FAILS, k.p, k.len, &old);
	if (rc == 0) {
		Grantd__V1__Failures *of = grantd__v1__failures__unpack(
			NULL, old.len, (const uint8_t *)old.p);
		for (size_t i = 0; of && i < of->n_hlc &&
				   n < OPS_MAX_FAILURES_KEPT; i++)
			at[n++] = of->hlc[i];
		if (of)
			grantd__v1__failures__free_unpacked(of, NULL);
	} else if (rc != GD_ENOTFOUND) {
		goto done;
	}
	for (size_t i = 0; i < f->n_hlc && i < OPS_MAX_FAILURES_KEPT; i++)
		at[n++] = f->hlc[i];
	qsort(at, n, sizeof(at[0]), cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || at[u - 1] != at[i])
			at[u++] = at[i];
	size_t first = u > OPS_MAX_FAILURES_KEPT ? u - OPS_MAX_FAILURES_KEPT : 0;
	merged.user = f->user;
	merged.site = f->site;
	merged.hlc = at + first;
	merged.n_hlc = u - first;
	records_pack(&val, &merged.base);
	rc = 0;
	replace_record(o, b, CF_FAILS, k.p, k.len, &old, &val);
done:
	buf_free(&k);
	buf_free(&old);
	buf_free(&val);
	return rc;
}

/* The body of an operation: the generated oneof is a union of pointers. */
static const ProtobufCMessage *op_body(const Grantd__V1__Op *op)
{
	return (const ProtobufCMessage *)op->user;
}

static bool oid_zero(const char *oid)
{
	return strspn(oid, "0") == 40;
}

/*
 * A push: each ref is an LWW register (repo, ref) -> tip.  When two sites
 * moved a ref from different starting points, the tip that loses is noted
 * (CF_LOSERS, local) so it can be kept as refs/grantd/conflicts/SITE/REF
 * once its objects are here; a loser that the winner descends from is no
 * conflict, which only the objects can tell, so that is decided later.
 */
static int apply_refs(struct ops *o, struct store_batch *b,
		      const Grantd__V1__Op *op)
{
	const Grantd__V1__RefUpdate *u = op->refs;
	struct buf k = BUF_INIT, val = BUF_INIT, old = BUF_INIT, lk = BUF_INIT;
	struct buf lv = BUF_INIT;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < u->n_changes; i++) {
		const Grantd__V1__RefChange *ch = u->changes[i];
		Grantd__V1__Ref rec = GRANTD__V1__REF__INIT;
		Grantd__V1__Ref *cur = NULL;
		bool won;

		rec.repo = u->repo;
		rec.ref = ch->ref;
		rec.target = oid_zero(ch->new_) ? "" : ch->new_;
		ops_pack_stamped(&val, &rec.base, op->hlc, op->origin);
		records_key_ref(&k, u->repo, ch->ref);
		rc = store_get(o->store, b, CF_REFS, k.p, k.len, &old);
		if (rc == 0)
			cur = grantd__v1__ref__unpack(NULL, old.len,
						      (const uint8_t *)old.p);
		else if (rc != GD_ENOTFOUND)
			break;
		rc = lww_put(o, b, CF_REFS, k.p, k.len, &val, op->hlc,
			     op->origin, &won);
		if (rc == 0)
			buf_add(&o->refs_touched, k.p, k.len + 1);
		if (rc == 0 && cur && cur->target && cur->origin) {
			const char *from = oid_zero(ch->old) ? "" : ch->old;
			if (won && *cur->target && strcmp(cur->target, from) &&
			    strcmp(cur->target, rec.target)) {
				records_key_loser(&lk, u->repo, ch->ref,
						  cur->origin, cur->hlc);
				records_loser_value(&lv, cur->target, false);
				store_put(b, CF_LOSERS, lk.p, lk.len, lv.p,
					  lv.len);
			} else if (!won && *rec.target &&
				   strcmp(rec.target, cur->target)) {
				records_key_loser(&lk, u->repo, ch->ref,
						  op->origin, op->hlc);
				records_loser_value(&lv, rec.target, false);
				store_put(b, CF_LOSERS, lk.p, lk.len, lv.p,
					  lv.len);
			}
		}
		if (cur)
			grantd__v1__ref__free_unpacked(cur, NULL);
	}
	if (rc == 0)
		rc = ops_push_remember(o, b, op);
	buf_free(&k);
	buf_free(&val);
	buf_free(&old);
	buf_free(&lk);
	buf_free(&lv);
	return rc;
}

/* Which of two entries for the same (origin, n) sits at origin \0 n: the
 * earlier (hlc, bytes), so that every site puts the same one there
 * whatever the order they came in; the other is kept too, under its hash
 * (records_key_pushlog_fork).  Only a forked chain (a wiped site that took
 * a push before it caught up, or a lying one) has two; `grantctl log
 * verify` names the fork and both hashes. */
static bool pushlog_keeps_old(const struct buf *old, const struct buf *val)
{
	Grantd__V1__PushLogEntry *oe = grantd__v1__push_log_entry__unpack(
		NULL, old->len, (const uint8_t *)old->p);
	Grantd__V1__PushLogEntry *ve = grantd__v1__push_log_entry__unpack(
		NULL, val->len, (const uint8_t *)val->p);
	size_t n = old->len < val->len ? old->len : val->len;
	int c = memcmp(old->p, val->p, n);
	bool keep;

	if (!oe || !ve)
		keep = ve == NULL; /* a record that does not decode loses */
	else if (oe->hlc != ve->hlc)
		keep = oe->hlc < ve->hlc;
	else
		keep = c < 0 || (c == 0 && old->len <= val->len);
	if (oe)
		grantd__v1__push_log_entry__free_unpacked(oe, NULL);
	if (ve)
		grantd__v1__push_log_entry__free_unpacked(ve, NULL);
	return keep;
}

/* Keep val (an entry of origin, n that lost its place at origin \0 n) as a
 * fork, under its hash; of two with the same hash, the earlier, as at
 * origin \0 n.  Counts a new fork (ops_pushlog_forks). */
static int pushlog_keep_fork(struct ops *o, struct store_batch *b,
			     const char *origin, uint64_t n,
			     const struct buf *val)
{
	Grantd__V1__PushLogEntry *e = grantd__v1__push_log_entry__unpack(
		NULL, val->len, (const uint8_t *)val->p);
	struct buf k = BUF_INIT, old = BUF_INIT;
	int rc = GD_EPROTO;

	if (!e || e->hash.len != OPS_PUSHLOG_HASH)
		goto done;
	records_key_pushlog_fork(&k, origin, n, e->hash.data);
	rc = store_get(o->store, b, CF_PUSHLOG, k.p, k.len, &old);
	if (rc == GD_ENOTFOUND) {
		buf_reset(&old);
		if ((rc = ops_pushlog_fork_counted(o, b)) < 0)
			goto done;
	} else if (rc < 0 || pushlog_keeps_old(&old, val)) {
		goto done;
	}
	rc = 0;
	replace_record(o, b, CF_PUSHLOG, k.p, k.len, &old, val);
done:
	if (e)
		grantd__v1__push_log_entry__free_unpacked(e, NULL);
	buf_free(&k);
	buf_free(&old);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* A push log entry: written once at origin \0 n; the head of origin's
 * chain moves with it (same batch).  An entry stamped no later than its
 * predecessor is refused: counted (pushlog_refused), logged, not kept; its
 * operation still counts as applied, so the stream goes on. */
static int apply_pushlog(struct ops *o, struct store_batch *b,
			 const Grantd__V1__PushLogEntry *e)
{
	Grantd__V1__PushLogEntry copy = *e;
	struct buf k = BUF_INIT, old = BUF_INIT, val = BUF_INIT;
	uint8_t head[OPS_PUSHLOG_HASH];
	char h1[2 * OPS_PUSHLOG_HASH + 1], h2[2 * OPS_PUSHLOG_HASH + 1];
	const struct buf *top = &val;
	uint64_t hn, before = 0;
	int rc;

	if (e->n > 1 &&
	    (rc = ops_pushlog_stamp(o, b, e->origin, e->n - 1, &before)) < 0)
		return rc;
	if (before && e->hlc <= before) {
		o->pushlog_refused++;
		log_warn("push log entry refused origin=%s n=%llu: stamped "
			 "hlc=%llu, not after entry %llu's hlc=%llu "
			 "refused=%llu", e->origin, (unsigned long long)e->n,
			 (unsigned long long)e->hlc,
			 (unsigned long long)(e->n - 1),
			 (unsigned long long)before,
			 (unsigned long long)o->pushlog_refused);
		return 0;
	}
	/* fields of a newer protocol would make the bytes depend on which
	 * copy arrived first */
	copy.base.n_unknown_fields = 0;
	copy.base.unknown_fields = NULL;
	records_pack(&val, &copy.base);
	records_key_pushlog_fork(&k, e->origin, e->n, e->hash.data);
	rc = store_get(o->store, b, CF_PUSHLOG, k.p, k.len, &old);
	if (rc == 0 && old.len == val.len && !memcmp(old.p, val.p, val.len))
		goto done; /* a fork already kept */
	if (rc < 0 && rc != GD_ENOTFOUND)
		goto done;
	records_key_pushlog(&k, e->origin, e->n);
	rc = store_get(o->store, b, CF_PUSHLOG, k.p, k.len, &old);
	if (rc == GD_ENOTFOUND) {
		buf_reset(&old);
	} else if (rc < 0) {
		goto done;
	} else if (old.len == val.len && !memcmp(old.p, val.p, val.len)) {
		goto done;
	} else {
		bool keep = pushlog_keeps_old(&old, &val);
		/* named as log verify names them: the one in place first */
		ops_pushlog_hash_hex(keep ? h1 : h2, &old);
		pushlog_hex(keep ? h2 : h1, e->hash.data, e->hash.len);
		log_warn("push log fork origin=%s n=%llu hash=%s hash=%s: two "
			 "different entries, both kept", e->origin,
			 (unsigned long long)e->n, h1, h2);
		rc = pushlog_keep_fork(o, b, e->origin, e->n,
				       keep ? &val : &old);
		if (rc < 0 || keep)
			goto done;
	}
	rc = 0;
	replace_record(o, b, CF_PUSHLOG, k.p, k.len, &old, top);
	if ((rc = ops_pushlog_head(o, b, e->origin, &hn, head)) < 0)
		goto done;
	if (e->n >= hn)
		ops_pushlog_head_put(b, e->origin, e->n, e->hash.data);
done:
	buf_free(&k);
	buf_free(&old);
	buf_free(&val);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* Effect of one operation on the state families. */
int ops_merge_op(struct ops *o, struct store_batch *b, const Grantd__V1__Op *op,
		 bool *made)
{
	const struct records_kind *f = records_by_body(op->body_case);
	struct buf k = BUF_INIT, val = BUF_INIT;
	bool won = false, unused;
	int rc;

	if (!made)
		made = &unused;
	*made = false;
	if (!f)
		return GD_EPROTO;
	switch (f->merge) {
	case RECORDS_MAX:
		return apply_mark(o, b, op->mark, made);
	case RECORDS_UNION:
		return apply_failure(o, b, op->failure);
	case RECORDS_SET:
		return apply_pushlog(o, b, op->push_log);
	case RECORDS_LEAF:
		return ops_tlog_apply(o, b, op->push_leaf);
	case RECORDS_LWW:
		break;
	default:
		return GD_EPROTO;
	}
	/* a push's records are Refs, one per ref: see apply_refs */
	if (op->body_case == GRANTD__V1__OP__BODY_REFS)
		return apply_refs(o, b, op);
	ops_pack_stamped(&val, op_body(op), op->hlc, op->origin);
	records_key_lww(&k, op);
	rc = lww_put(o, b, f->cf, k.p, k.len, &val, op->hlc, op->origin, &won);
	*made = rc == 0 && won;
	/* A repository's directory is made once the record is committed
	 * (repos_follow): a disk that refuses it cannot leave a record and
	 * its digest change half-applied, and a commit that fails leaves no
	 * repository behind.  A deleted one is moved aside then, the same
	 * way. */
	if (rc == 0 && won && op->body_case == GRANTD__V1__OP__BODY_REPO)
		buf_add(&o->repos_touched, op->repo->name,
			strlen(op->repo->name) + 1);
	sodium_memzero(val.p, val.len);
	buf_free(&k);
	buf_free(&val);
	return rc;
}

/* A peer's record stamped (hlc, origin): the checks a live operation
 * gets (repl.c apply_op), then the clock observes the stamp. */
static int trust_stamp(struct ops *o, const struct ops_trust *t, uint64_t hlc,
		       const char *origin, struct buf *why)
{
	if (t && hlc > t->max_hlc) {
		buf_printf(why, "stamped %llu ms ahead of the allowed skew "
			   "(check the clock of origin=%s)",
			   (unsigned long long)(hlc_ms(hlc) - hlc_ms(t->max_hlc)),
			   origin);
		return GD_EPROTO;
	}
	if (t && t->known && !t->known(origin, t->payload)) {
		buf_printf(why, "unknown origin site %s", origin);
		return GD_EPROTO;
	}
	hlc_observe(&o->hlc, hlc);
	return 0;
}

/* A Ref from a snapshot: the same register apply_refs writes. */
static int merge_ref(struct ops *o, struct store_batch *b, const void *val,
		     size_t vlen, const struct ops_trust *t, struct buf *why)
{
	Grantd__V1__Ref *r = grantd__v1__ref__unpack(NULL, vlen, val);
	struct buf k = BUF_INIT, v = BUF_INIT;
	char norm[NAME_REPO_MAX + 1];
	bool won;
	int rc = GD_EPROTO;

	if (!r || !r->repo || !r->ref || !r->target || !r->origin ||
	    !r->hlc || !name_site_ok(r->origin) ||
	    name_repo_norm(norm, sizeof(norm), r->repo) < 0 ||
	    strcmp(norm, r->repo) || !ops_ref_name_ok(r->ref) ||
	    (*r->target && !ops_oid_ok(r->target))) {
		buf_puts(why, "bad ref record");
		goto done;
	}
	if ((rc = trust_stamp(o, t, r->hlc, r->origin, why)) < 0)
		goto done;
	records_key_ref(&k, r->repo, r->ref);
	buf_add(&v, val, vlen);
	rc = lww_put(o, b, CF_REFS, k.p, k.len, &v, r->hlc, r->origin, &won);
	if (rc == 0 && won)
		buf_add(&o->refs_touched, k.p, k.len + 1);
done:
	if (r)
		grantd__v1__ref__free_unpacked(r, NULL);
	buf_free(&k);
	buf_free(&v);
	return rc;
}

/* A push log entry from a snapshot: the checks of a live one (its stamp
 * and origin are the entry's own), then the same set rule. */
static int merge_pushlog(struct ops *o, struct store_batch *b,
			 const void *val, size_t vlen,
			 const struct ops_trust *t, struct buf *why)
{
	Grantd__V1__PushLogEntry *e =
		grantd__v1__push_log_entry__unpack(NULL, vlen, val);
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	int rc = GD_EPROTO;

	if (!e) {
		buf_puts(why, "record does not decode");
		return rc;
	}
	op.body_case = GRANTD__V1__OP__BODY_PUSH_LOG;
	op.push_log = e;
	SET_STAMP(op, 1, 1, e->hlc);
	op.origin = e->origin ? e->origin : "";
	rc = ops_check(&op, why);
	if (rc == 0)
		rc = trust_stamp(o, t, op.hlc, op.origin, why);
	if (rc == 0)
		rc = apply_pushlog(o, b, e);
	grantd__v1__push_log_entry__free_unpacked(e, NULL);
	return rc;
}

/* A transparency log leaf from a snapshot: the checks of a live one (its
 * origin is the leaf's own; a leaf has no stamp), then the same rule.  A
 * snapshot sends each origin's leaves in key order, so index by index. */
static int merge_leaf(struct ops *o, struct store_batch *b, const void *val,
		      size_t vlen, const struct ops_trust *t, struct buf *why)
{
	Grantd__V1__PushLeaf *l = grantd__v1__push_leaf__unpack(NULL, vlen, val);
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	int rc;

	if (!l) {
		buf_puts(why, "record does not decode");
		return GD_EPROTO;
	}
	op.body_case = GRANTD__V1__OP__BODY_PUSH_LEAF;
	op.push_leaf = l;
	SET_STAMP(op, 1, 1, 1);
	op.origin = l->origin ? l->origin : "";
	rc = ops_check(&op, why);
	if (rc == 0 && t && t->known && !t->known(op.origin, t->payload)) {
		buf_printf(why, "unknown origin site %s", op.origin);
		rc = GD_EPROTO;
	}
	if (rc == 0)
		rc = ops_tlog_apply(o, b, l);
	grantd__v1__push_leaf__free_unpacked(l, NULL);
	return rc;
}

int ops_merge_record(struct ops *o, struct store_batch *b, enum store_cf cf,
		     const void *val, size_t vlen, const struct ops_trust *t,
		     struct buf *why_out)
{
	const struct records_kind *f =
		records_replicated(cf) ? records_kind(cf) : NULL;
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	struct buf why = BUF_INIT;
	ProtobufCMessage *m = NULL;
	int rc = GD_EPROTO;

	if (!f) {
		buf_puts(&why, "not a state family");
		goto done;
	}
	if (cf == CF_REFS) {
		rc = merge_ref(o, b, val, vlen, t, &why);
		goto done;
	}
	if (cf == CF_PUSHLOG) {
		rc = merge_pushlog(o, b, val, vlen, t, &why);
		goto done;
	}
	if (cf == CF_TLEAVES) {
		rc = merge_leaf(o, b, val, vlen, t, &why);
		goto done;
	}
	m = protobuf_c_message_unpack(f->desc, NULL, vlen, val);
	if (!m) {
		buf_puts(&why, "record does not decode");
		goto done;
	}
	/* a record is the body of the operation that wrote it, with that
	 * operation's stamp; merged records need none */
	op.body_case = f->body;
	memcpy(&op.user, &m, sizeof(m));
	SET_STAMP(op, 1, 1, 1);
	op.origin = o->site;
	if (f->merge == RECORDS_LWW) {
		Grantd__V1__Stamped *st = grantd__v1__stamped__unpack(NULL, vlen,
								      val);
		if (!st) {
			buf_puts(&why, "record without a stamp");
			goto done;
		}
		op.hlc = st->hlc;
		op.origin = st->origin ? st->origin : "";
		rc = ops_check(&op, &why);
		if (rc == 0)
			rc = trust_stamp(o, t, op.hlc, op.origin, &why);
		if (rc == 0)
			rc = ops_merge_op(o, b, &op, NULL);
		grantd__v1__stamped__free_unpacked(st, NULL);
	} else {
		rc = ops_check(&op, &why);
		/* failed attempts carry their own stamps: a peer's far-future
		 * one would keep the user locked, or dodge an unlock */
		if (rc == 0 && cf == CF_FAILS) {
			const Grantd__V1__Failures *fl = op.failure;
			for (size_t i = 0; rc == 0 && i < fl->n_hlc; i++)
				rc = trust_stamp(o, t, fl->hlc[i], fl->site,
						 &why);
		}
		if (rc == 0)
			rc = ops_merge_op(o, b, &op, NULL);
	}
done:
	if (why_out && why.len)
		buf_puts(why_out, why.p);
	buf_free(&why);
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
	return rc;
}

/* What a live operation must pass besides its signature (repl_apply_op):
 * its checks, its stamp (a failure's attempts' too) and its origin. */
static int check_signed(struct ops *o,
                        const Grantd__V1__Op *op,
                        const struct ops_trust *t,
                        struct buf *why)
{
	int rc = ops_check(op, why);

	if (rc == 0)
		rc = trust_stamp(o, t, op->hlc, op->origin, why);
	for (size_t i = 0;
	     rc == 0 && op->body_case == GRANTD__V1__OP__BODY_FAILURE &&
	     i < op->failure->n_hlc;
	     i++)
		rc = trust_stamp(o, t, op->failure->hlc[i], op->failure->site,
		                 why);
	return rc < 0 ? GD_EPROTO : 0;
}

int ops_merge_signed(struct ops *o,
                     struct store_batch *b,
                     Grantd__V1__Op *const *ops,
                     const ProtobufCBinaryData *packed,
                     size_t n,
                     const struct ops_trust *t,
                     struct buf *why)
{
	bool made;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = check_signed(o, ops[i], t, why);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if ((rc = ops_merge_op(o, b, ops[i], &made)) == 0)
			rc = recops_note(o->store, b, ops[i], packed[i].data,
			                 packed[i].len,
			                 made ? RECOPS_MADE : 0);
	return rc;
}
