/*
 * attest.c: this site's records made before signing, re-issued as signed
 * operations of its own (attest.h says which and why).
 *
 * Each chunk scans the committed records of one family at a time from
 * the job's cursor (the family and the last key seen), kept in CF_META
 * with the chunk (ATTEST_AT), so a restart goes on where the last
 * committed chunk stopped.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "attest.h"
#include "err.h"
#include "log.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

#define OID0 "0000000000000000000000000000000000000000"

int attest_needed(struct store *s, bool *need)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, NULL, CF_META, ATTEST_META, strlen(ATTEST_META),
	                   &v);

	*need = rc == GD_ENOTFOUND;
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

int attest_init(struct attest_job *j, struct store *s)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, NULL, CF_META, ATTEST_AT, strlen(ATTEST_AT), &v);

	memset(j, 0, sizeof(*j));
	j->after = (struct buf)BUF_INIT;
	if (rc == 0 && v.len >= 1) { /* a run stopped there: on from it */
		j->cf = (uint8_t)v.p[0];
		buf_add(&j->after, v.p + 1, v.len - 1);
	}
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

void attest_free(struct attest_job *j)
{
	buf_free(&j->after);
}

/* The operation being made and what its body points into. */
struct att {
	Grantd__V1__Op op;
	Grantd__V1__RefUpdate u;
	Grantd__V1__RefChange ch, *chp;
	void *copy; /* a shallow copy of the record (free) */
};

/* A shallow copy of m as an operation's body: no fields of a newer
 * protocol (ops_merge drops them too). */
static void *body_copy(struct att *a, const ProtobufCMessage *m)
{
	ProtobufCMessage *c = xmemdup(m, m->descriptor->sizeof_message);

	c->n_unknown_fields = 0;
	c->unknown_fields = NULL;
	a->copy = c;
	return c;
}

/* An LWW record (not a ref) of this site: the body is the record without
 * its stamp (fields 14 and 15: ops_pack_stamped puts them back), the
 * operation stamped with the record's hlc. */
static bool own_lww(struct att *a,
                    const char *site,
                    const struct records_kind *f,
                    const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = f->desc;
	const ProtobufCFieldDescriptor *fh =
	        protobuf_c_message_descriptor_get_field(d, 14);
	const ProtobufCFieldDescriptor *fo =
	        protobuf_c_message_descriptor_get_field(d, 15);
	const uint8_t *r = (const uint8_t *)m;
	const char *origin;
	uint64_t hlc;
	uint8_t *c;

	GD_ASSERT(fh && fo);
	memcpy(&hlc, r + fh->offset, sizeof(hlc));
	memcpy(&origin, r + fo->offset, sizeof(origin));
	if (!hlc || !origin || strcmp(origin, site))
		return false;
	c = body_copy(a, m);
	memset(c + fh->offset, 0, sizeof(hlc));
	*(protobuf_c_boolean *)(c + fh->quantifier_offset) = 0;
	memset(c + fo->offset, 0, sizeof(origin));
	a->op.body_case = f->body;
	memcpy(&a->op.user, &c, sizeof(c));
	a->op.hlc = hlc, a->op.has_hlc = 1;
	return true;
}

/* A ref of this site's: a push of that one ref to its target, with the
 * ref's stamp (old = new: no loser where the record is the same). */
static bool own_ref(struct att *a, const char *site, const Grantd__V1__Ref *r)
{
	if (!r->origin || strcmp(r->origin, site) || !r->hlc || !r->repo ||
	    !r->ref || !r->target)
		return false;
	grantd__v1__ref_change__init(&a->ch);
	a->ch.ref = r->ref;
	a->ch.new_ = *r->target ? r->target : (char *)OID0;
	a->ch.old = a->ch.new_;
	a->chp = &a->ch;
	grantd__v1__ref_update__init(&a->u);
	a->u.repo = r->repo;
	a->u.changes = &a->chp, a->u.n_changes = 1;
	a->op.body_case = GRANTD__V1__OP__BODY_REFS;
	a->op.refs = &a->u;
	a->op.hlc = r->hlc, a->op.has_hlc = 1;
	return true;
}

/* Is the span site? */
static bool span_is(const struct records_span *s, const char *site)
{
	return s->len == strlen(site) && !memcmp(s->p, site, s->len);
}

/* The operation for record (key, m) of f if this site attests it:
 * a->op's body and stamp (hlc 0: a fresh one). */
static bool build(struct att *a,
                  const char *site,
                  const struct records_kind *f,
                  const char *key,
                  size_t klen,
                  const ProtobufCMessage *m)
{
	struct records_span s1, s2;
	const uint8_t *fork;
	uint64_t n;

	switch (f->merge) {
	case RECORDS_LWW:
		if (f->cf == CF_REFS)
			return own_ref(a, site, (const Grantd__V1__Ref *)m);
		return own_lww(a, site, f, m);
	case RECORDS_UNION: /* failures: this site's */
		if (records_fail_parse(key, klen, &s1, &s2) < 0 ||
		    !span_is(&s2, site))
			return false;
		a->op.failure = body_copy(a, m);
		break;
	case RECORDS_MAX: /* marks: every one */
		a->op.mark = body_copy(a, m);
		break;
	case RECORDS_SET: /* push log entries: this site's, as stamped */
		if (records_pushlog_parse(key, klen, &s1, &n, &fork) < 0 ||
		    !span_is(&s1, site))
			return false;
		a->op.push_log = body_copy(a, m);
		a->op.hlc = a->op.push_log->hlc, a->op.has_hlc = 1;
		break;
	default: /* leaves: made signed (only by this release) */
		return false;
	}
	a->op.body_case = f->body;
	return true;
}

/* Attest record (key, v) of f if it is this site's to attest. */
static int attest_one(struct attest_job *j,
                      struct ops *o,
                      struct store_batch *b,
                      const struct records_kind *f,
                      const char *key,
                      size_t klen,
                      const struct buf *v)
{
	ProtobufCMessage *m;
	struct att a = {.copy = NULL};
	int rc = 0;

	m = protobuf_c_message_unpack(f->desc, NULL, v->len,
	                              (const uint8_t *)v->p);
	if (!m) {
		j->skipped++;
		return 0;
	}
	grantd__v1__op__init(&a.op);
	if (build(&a, ops_site(o), f, key, klen, m)) {
		rc = ops_local(o, b, &a.op);
		if (rc == 0) {
			j->made++;
		} else if (rc == GD_EINVAL) { /* does not check: logged */
			log_warn("record made before signing not attested "
			         "cf=%s: it does not check",
			         f->name);
			j->skipped++;
			rc = 0;
		}
		if (f->cf == CF_ENROLL)
			records_op_wipe(&a.op);
	}
	free(a.copy);
	protobuf_c_message_free_unpacked(m, NULL);
	return rc;
}

/* Does the job take records of cf? */
static bool wanted(enum store_cf cf)
{
	return records_replicated(cf) && cf != CF_TLEAVES;
}

/* Scan j->cf on from j->after; at its end, the next family. */
static int scan(struct attest_job *j,
                struct ops *o,
                struct store_batch *b,
                size_t max,
                size_t *looked)
{
	const struct records_kind *f = records_kind((enum store_cf)j->cf);
	struct store_iter *it = NULL;
	struct buf start = BUF_INIT, v = BUF_INIT;
	uint64_t made0 = j->made;
	const char *key;
	size_t klen;
	int rc, more;

	/* the first key after the last one seen: it with a 0 byte added */
	if (j->after.len) {
		buf_add(&start, j->after.p, j->after.len);
		buf_add(&start, "", 1);
	}
	rc = start.len ? store_iter_new_at(&it, ops_store(o), NULL, f->cf, "",
	                                   0, start.p, start.len)
	               : store_iter_new(&it, ops_store(o), NULL, f->cf, "", 0);
	more = rc < 0 ? rc : 1;
	while (more > 0 && j->made - made0 < max && *looked < 16 * max &&
	       (more = store_iter_next(it, &key, &klen, &v)) > 0) {
		(*looked)++;
		buf_reset(&j->after);
		buf_add(&j->after, key, klen);
		if ((rc = attest_one(j, o, b, f, key, klen, &v)) < 0)
			more = rc;
		sodium_memzero(v.p, v.len);
	}
	rc = more < 0 ? more : 0;
	if (more == 0) { /* the family's end */
		j->cf++;
		buf_reset(&j->after);
	}
	store_iter_free(&it);
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	buf_free(&start);
	return rc < 0 ? rc : 0;
}

int attest_step(struct attest_job *j,
                struct ops *o,
                struct store_batch *b,
                size_t max)
{
	uint64_t made0 = j->made;
	size_t looked = 0;
	struct buf at = BUF_INIT;
	uint8_t cf;
	int rc = 0;

	while (!j->done && rc == 0 && j->made - made0 < max &&
	       looked < 16 * max) {
		if (j->cf >= CF__COUNT) {
			uint8_t be[8];
			store_be64(be, j->made);
			store_put(b, CF_META, ATTEST_META, strlen(ATTEST_META),
			          be, sizeof(be));
			store_del(b, CF_META, ATTEST_AT, strlen(ATTEST_AT));
			j->done = true;
		} else if (!wanted((enum store_cf)j->cf)) {
			j->cf++;
		} else {
			rc = scan(j, o, b, max - (size_t)(j->made - made0),
			          &looked);
		}
	}
	if (rc == 0 && !j->done) { /* where a restart goes on from */
		cf = (uint8_t)j->cf;
		buf_add(&at, &cf, 1);
		buf_add(&at, j->after.p, j->after.len);
		store_put(b, CF_META, ATTEST_AT, strlen(ATTEST_AT), at.p,
		          at.len);
	}
	buf_free(&at);
	return rc < 0 ? rc : (int)(j->made - made0);
}
