/*
 * recops_store.c: how the operations a record keeps are stored (recops.h
 * says which are kept, recops.c decides).  Each is named by its operation
 * log key (RecordOps.refs), never copied: the log holds it, or CF_KEPTOPS
 * does (one a state transfer brought, written there when a record first
 * keeps it; one the log's retention cut, copied there first by
 * ops_sweep.c).  So an operation is stored once however many records it
 * made: a push of 2,000 refs kept its whole RefUpdate in each ref's list,
 * 416 MB, and every local operation was written twice.  RecordOps.ops
 * (an operation's bytes) is still read, as stores of format 2 before refs
 * wrote it.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "oplog.h"
#include "recops.h"
#include "recops_int.h"
#include "xalloc.h"
#include "banned.h"

/* The bytes of the operation named ref (an operation log key): the
 * log's, else CF_KEPTOPS's; GD_ENOTFOUND when neither holds it. */
static int resolve(struct store *s,
                   struct store_batch *b,
                   const ProtobufCBinaryData *ref,
                   struct buf *out)
{
	int rc = oplog_get(s, b, ref->data, ref->len, out);

	if (rc == GD_ENOTFOUND)
		rc = store_get(s, b, CF_KEPTOPS, ref->data, ref->len, out);
	return rc;
}

/* The RecordOps stored at the record key of cf, unpacked (*out NULL:
 * none, or it does not decode). */
int recops_read_stored(struct store *s,
                       struct store_batch *b,
                       enum store_cf cf,
                       const void *key,
                       size_t klen,
                       Grantd__V1__RecordOps **out)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	*out = NULL;
	records_key_recops(&k, cf, key, klen);
	rc = store_get(s, b, CF_RECOPS, k.p, k.len, &v);
	if (rc == 0)
		*out = grantd__v1__record_ops__unpack(NULL, v.len,
		                                      (const uint8_t *)v.p);
	sodium_memzero(v.p, v.len);
	buf_free(&k);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

void recops_free_stored(Grantd__V1__RecordOps *ro)
{
	for (size_t i = 0; ro && i < ro->n_ops; i++)
		sodium_memzero(ro->ops[i].data, ro->ops[i].len);
	if (ro)
		grantd__v1__record_ops__free_unpacked(ro, NULL);
}

int recops_get(struct store *s,
               struct store_batch *b,
               enum store_cf cf,
               const void *key,
               size_t klen,
               struct buf *out)
{
	Grantd__V1__RecordOps *ro, sent = GRANTD__V1__RECORD_OPS__INIT;
	struct buf *each = NULL;
	int rc = recops_read_stored(s, b, cf, key, klen, &ro);

	buf_reset(out);
	if (rc < 0 || !ro)
		return rc;
	/* the ops as stored, then each ref resolved: ops only are sent */
	sent.ops = xcalloc(ro->n_ops + ro->n_refs + 1, sizeof(*sent.ops));
	each = xcalloc(ro->n_refs + 1, sizeof(*each));
	for (size_t i = 0; i < ro->n_ops; i++)
		sent.ops[sent.n_ops++] = ro->ops[i];
	for (size_t i = 0; rc >= 0 && i < ro->n_refs; i++) {
		rc = resolve(s, b, &ro->refs[i], &each[i]);
		if (rc == 0)
			sent.ops[sent.n_ops++] = (ProtobufCBinaryData){
			        each[i].len, (uint8_t *)each[i].p};
		else if (rc == GD_ENOTFOUND)
			rc = 0; /* counted out: the receiver refuses the
			           record, and says so */
	}
	if (rc >= 0 && sent.n_ops)
		records_pack(out, &sent.base);
	for (size_t i = 0; i < ro->n_refs; i++) {
		sodium_memzero(each[i].p, each[i].len);
		buf_free(&each[i]);
	}
	free(each);
	free(sent.ops);
	recops_free_stored(ro);
	return rc < 0 ? rc : 0;
}

/* Write the operations of the record key of cf; none: the entry goes. */
void recops_put_ops(struct store_batch *b,
                    enum store_cf cf,
                    const void *key,
                    size_t klen,
                    const struct kept_form *f,
                    size_t n)
{
	Grantd__V1__RecordOps ro = GRANTD__V1__RECORD_OPS__INIT;
	struct buf k = BUF_INIT, v = BUF_INIT;

	records_key_recops(&k, cf, key, klen);
	if (n == 0) {
		store_del(b, CF_RECOPS, k.p, k.len);
	} else {
		ro.ops = xcalloc(n, sizeof(*ro.ops));
		ro.refs = xcalloc(n, sizeof(*ro.refs));
		for (size_t i = 0; i < n; i++)
			if (f[i].ref)
				ro.refs[ro.n_refs++] = f[i].data;
			else
				ro.ops[ro.n_ops++] = f[i].data;
		records_pack(&v, &ro.base);
		store_put(b, CF_RECOPS, k.p, k.len, v.p, v.len);
		sodium_memzero(v.p, v.len);
		free(ro.ops);
		free(ro.refs);
	}
	buf_free(&k);
	buf_free(&v);
}

void recops_drop(struct store_batch *b,
                 enum store_cf cf,
                 const void *key,
                 size_t klen)
{
	recops_put_ops(b, cf, key, klen, NULL, 0);
}

/* The noted op as a record keeps it: its ref, the op put in CF_KEPTOPS
 * first when the log does not hold it. */
struct kept_form recops_noted(struct store_batch *b, struct note *nt)
{
	if (!nt->logged && !nt->stored) {
		store_put(b, CF_KEPTOPS, nt->ref.p, nt->ref.len, nt->packed,
		          nt->len);
		nt->stored = true;
	}
	return (struct kept_form){{nt->ref.len, (uint8_t *)nt->ref.p}, true};
}

/* [the noted op] as the operations of the record key of cf. */
void recops_put_one(struct store_batch *b,
                    struct note *nt,
                    enum store_cf cf,
                    const struct buf *key)
{
	struct kept_form one = recops_noted(b, nt);

	recops_put_ops(b, cf, key->p, key->len, &one, 1);
}

/* The operations kept at the record key k of cf: *kp the caller's
 * (free_kept). */
int recops_read_kept(struct store *s,
                     struct store_batch *b,
                     enum store_cf cf,
                     const struct buf *k,
                     struct kept *kp)
{
	struct buf v = BUF_INIT;
	int rc = recops_read_stored(s, b, cf, k->p, k->len, &kp->ro);
	const Grantd__V1__RecordOps *ro = kp->ro;
	size_t n = ro ? ro->n_ops + ro->n_refs : 0;

	kp->n = 0;
	kp->form = xcalloc(n + 1, sizeof(*kp->form));
	kp->ops = xcalloc(n + 1, sizeof(*kp->ops));
	for (size_t i = 0; ro && i < ro->n_ops; i++) {
		kp->form[kp->n] = (struct kept_form){ro->ops[i], false};
		kp->ops[kp->n++] = grantd__v1__op__unpack(NULL, ro->ops[i].len,
		                                          ro->ops[i].data);
	}
	for (size_t i = 0; rc == 0 && ro && i < ro->n_refs; i++) {
		kp->form[kp->n] = (struct kept_form){ro->refs[i], true};
		rc = resolve(s, b, &ro->refs[i], &v);
		kp->ops[kp->n++] =
		        rc == 0 ? grantd__v1__op__unpack(NULL, v.len,
		                                         (const uint8_t *)v.p)
		                : NULL;
		if (rc == GD_ENOTFOUND)
			rc = 0; /* dropped when the list is written again */
		sodium_memzero(v.p, v.len);
	}
	buf_free(&v);
	return rc;
}

/* read_kept's, freed: an enrollment's secret wiped first, unpacked and
 * packed. */
void recops_free_kept(struct kept *kp)
{
	for (size_t i = 0; i < kp->n; i++)
		if (kp->ops[i]) {
			records_op_wipe(kp->ops[i]);
			grantd__v1__op__free_unpacked(kp->ops[i], NULL);
		}
	free(kp->ops);
	free(kp->form);
	recops_free_stored(kp->ro);
	*kp = (struct kept){0};
}
