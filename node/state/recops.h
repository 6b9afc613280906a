/*
 * recops.h: per replicated record, the signed operations that made it
 * (CF_RECOPS, records.h; issue 21, docs/security.md "Signed operations").
 *
 * Operations are signed by their origin (common/opsig.h), records are not:
 * a state transfer sends records, so without more a peer serving one could
 * put records "from" another site into the receiver.  So the store keeps,
 * beside each replicated record, the operations (packed exactly as in the
 * log, OpSig included) that the record is the merge of, and a state
 * transfer sends them with it (SnapRep.ops): the receiver checks each
 * against its origin's key and applies the operations, never the record.
 *
 * Which operations a record keeps (recops_note, after the op's merge,
 * reading the record as merged in the batch):
 *   LWW    the record's stamp (hlc, origin) is the op's: [op]; else the
 *          op lost and nothing changes.  A push (RefUpdate) writes one
 *          Ref per ref: each that now carries its stamp gets [op].
 *   SET    the push log entry at the op's (origin, n), or its fork key,
 *   LEAF   as the transparency log leaf at (origin, index) or its fork
 *          key: the record that holds exactly the op's body gets [op].
 *   MAX    a mark: the merged record holds exactly op's values (the
 *          usual case: a token use moved it): [op], the kept ops unread
 *          (each is below the record, so op dominates it; an equal one
 *          is replaced).  Else op is added unless a kept op dominates it
 *          (next >= and scratch_used a superset); the kept ops it
 *          dominates go.
 *   UNION  failures: the kept ops and op that hold at least one stamp the
 *          merged record still keeps; the others go; op is not added when
 *          a kept op holds every stamp of op's, and a kept op whose every
 *          stamp op holds goes.
 *          For both (a mark below the record): of two equal ones, a
 *          signed op takes the place of an unsigned kept one (made by a
 *          release that did not sign, then re-issued signed: attest.h);
 *          else the kept one stays.
 * Merged again, the kept operations make the record (the rules of
 * ops_merge.c are commutative, associative and idempotent).
 *
 * Stored once: a record names each operation by its log key, and the log
 * holds it, or CF_KEPTOPS does (a state transfer's operation; one the
 * log's retention cut while a record still named it: recops_refers).
 *
 * Callers: ops.c (an operation's apply, a peer's or a local one: named by
 * its log key, the signature is not needed yet), ops_merge.c (ops_merge_signed: a state transfer's
 * operations), ops_sweep.c (the log's retention, CF_KEPTOPS's sweep:
 * recops_refers), repl_xfer.c (serve: recops_get; receive:
 * recops_record_origin, recops_makes).  A leaf below ops: the store and
 * the record table only.  Writer thread (b is its batch); recops_get from
 * any thread with b NULL.
 */
#ifndef GD_RECOPS_H
#define GD_RECOPS_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "grantd.pb-c.h"
#include "records.h"
#include "store.h"

/* How recops_note takes an operation (flags, or'ed). */
enum {
	/* the log holds op in b (the caller puts it there; a local one's at
	 * commit, once signed): packed and len are unused */
	RECOPS_LOGGED = 1,
	/* the merge said op alone makes its one record (ops_merge_op):
	 * [op] is written without reading the record */
	RECOPS_MADE = 2,
	/* op is this site's, signed at commit (ops_commit): it counts as
	 * signed (an equal unsigned kept one gives way, above) */
	RECOPS_SIGNING = 4,
};

/* After op's merge into b (of s): keep op (packed, len: its bytes, its
 * signature included) with each record it made, by the rule above, named
 * by its operation log key; without RECOPS_LOGGED, op is put in
 * CF_KEPTOPS once a record keeps it (a state transfer's).  Returns 0, or
 * a store error (GD_EIO, GD_ECRYPTO) or GD_EPROTO (a body of no
 * replicated family). */
int recops_note(struct store *s,
                struct store_batch *b,
                const Grantd__V1__Op *op,
                const void *packed,
                size_t len,
                unsigned flags);

/* Does a record still keep op, whose log key is ref (rlen bytes)?  For
 * the log's retention (ops_sweep.c): an operation a record names is
 * copied to CF_KEPTOPS before the log drops it, and a kept one no record
 * names any more goes.  *out false when none does.  Returns 0 or a store
 * error. */
int recops_refers(struct store *s,
                  struct store_batch *b,
                  const Grantd__V1__Op *op,
                  const void *ref,
                  size_t rlen,
                  bool *out);

/* The record key of cf is gone (a grant swept, ops_sweep.c): its
 * operations go with it, in b. */
void recops_drop(struct store_batch *b,
                 enum store_cf cf,
                 const void *key,
                 size_t klen);

/* The operations kept for the record key of cf, in b (NULL: committed),
 * as a packed RecordOps in out (reset; empty when none are kept), each
 * one's bytes in ops (as a state transfer sends them; refs resolved, one
 * neither the log nor CF_KEPTOPS holds left out).  Returns 0 or a store
 * error. */
int recops_get(struct store *s,
               struct store_batch *b,
               enum store_cf cf,
               const void *key,
               size_t klen,
               struct buf *out);

/* Does op write the record key of cf (its family and its key)? */
bool recops_makes(const Grantd__V1__Op *op,
                  enum store_cf cf,
                  const void *key,
                  size_t klen);

/* The site whose key a record (key, val of cf) sent without operations
 * must have been made with, in out: an LWW record's stamp origin, a push
 * log entry's or leaf's key origin, failures' site; *any (marks, whose
 * key names no site): every site with a key (out empty).  Returns 0, or
 * GD_EPROTO when the record does not say (ops_merge_record refuses it). */
int recops_record_origin(char out[65],
                         bool *any,
                         enum store_cf cf,
                         const void *key,
                         size_t klen,
                         const void *val,
                         size_t vlen);

#endif
