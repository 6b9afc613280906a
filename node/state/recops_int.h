/*
 * recops_int.h: what recops.c (which operations a record keeps) and
 * recops_store.c (how they are stored: by log key, once) share; private
 * to those two files.  recops.h is the contract.
 */
#ifndef GD_RECOPS_INT_H
#define GD_RECOPS_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "grantd.pb-c.h"
#include "records.h"
#include "store.h"

/* One operation of a record's list as it is stored: its bytes (a store
 * before refs) or its log key. */
struct kept_form {
	ProtobufCBinaryData data;
	bool ref;
};

/* The operation being noted: its log key (ref), and whether the log holds
 * it (else CF_KEPTOPS must, once a record keeps it). */
struct note {
	const Grantd__V1__Op *op;
	const void *packed;
	size_t len;
	struct buf ref;
	bool logged, is_signed, stored;
};

/* The operations kept at a record, as stored (form) and decoded (ops;
 * NULL where one does not decode or its ref no longer resolves). */
struct kept {
	Grantd__V1__RecordOps *ro;
	struct kept_form *form;
	Grantd__V1__Op **ops;
	size_t n;
};

/* The RecordOps stored at the record key of cf, unpacked (*out NULL:
 * none, or it does not decode); recops_free_stored frees it (NULL is
 * fine).  Returns 0 or a store error. */
int recops_read_stored(struct store *s,
                       struct store_batch *b,
                       enum store_cf cf,
                       const void *key,
                       size_t klen,
                       Grantd__V1__RecordOps **out);
void recops_free_stored(Grantd__V1__RecordOps *ro);

/* Write the n operations of the record key of cf (as stored: bytes or
 * refs); none: the entry goes. */
void recops_put_ops(struct store_batch *b,
                    enum store_cf cf,
                    const void *key,
                    size_t klen,
                    const struct kept_form *f,
                    size_t n);

/* The noted op as a record keeps it: its ref, the op put in CF_KEPTOPS
 * first when the log does not hold it. */
struct kept_form recops_noted(struct store_batch *b, struct note *nt);

/* [the noted op] as the operations of the record key of cf. */
void recops_put_one(struct store_batch *b,
                    struct note *nt,
                    enum store_cf cf,
                    const struct buf *key);

/* The operations kept at the record key k of cf, each resolved and
 * decoded: *kp the caller's (recops_free_kept, which wipes them). */
int recops_read_kept(struct store *s,
                     struct store_batch *b,
                     enum store_cf cf,
                     const struct buf *k,
                     struct kept *kp);
void recops_free_kept(struct kept *kp);

#endif
