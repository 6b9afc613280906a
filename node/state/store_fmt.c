/*
 * store_fmt.c: the store's format number, and the steps that raise an
 * older store to this build's in place (docs/upgrading.md).
 *
 * store_open calls store_fmt_open once the families are open: a new store
 * is stamped with STORE_FORMAT; a store without a stamp was made by 0.1.0
 * (format 1) and is stamped; a store of an older format goes through the
 * steps below, one format at a time, each step and its new stamp in one
 * synced batch, so a start that dies half-way resumes at the step it was
 * in; a store of a newer format is refused whole, nothing written: the
 * release that wrote it, or a backup, is what can open it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "store.h"
#include "store_int.h"
#include "version.h"
#include "xalloc.h"
#include "banned.h"

/* One step: a store of format `from` made format from + 1, its writes
 * put into b (committed by the caller with the new stamp).  Returns 0
 * or a negative gd_err (logged). */
struct fmt_step {
	uint64_t from;
	const char *what; /* for the log */
	int (*fn)(struct store *s, struct store_batch *b);
};

/* Format 2 (0.3.0): the transparency log's families, tleaves and thashes,
 * recops and keptops, each record's signed operations, and opbatch,
 * the records of the log's compact batches (records.h).
 * RocksDB makes a missing column family when the store is
 * opened, so the step itself writes nothing: the stamp is what matters,
 * for a release that cannot open those families refuses the store by its
 * stamp (0.2.0), or fails to open it (0.1.0 reads no stamp:
 * docs/upgrading.md section 4). */
static int fmt_tlog_families(struct store *s, struct store_batch *b)
{
	(void)s, (void)b;
	return 0;
}

/* Format 1 is 0.1.0's and 0.2.0's.  A change of the store's layout adds a
 * row { N, "what", fn } and raises STORE_FORMAT to N + 1. */
static const struct fmt_step steps[] = {
        {1, "new families (tleaves, thashes, recops, keptops, opbatch)",
         fmt_tlog_families},
};

static const struct fmt_step *step_from(uint64_t v)
{
	for (size_t i = 0; i < GD_ARRAY_SIZE(steps); i++)
		if (steps[i].fn && steps[i].from == v)
			return &steps[i];
	return NULL;
}

/* Put the stamp v into b and commit it, synced. */
static int stamp(struct store_batch *b, uint64_t v)
{
	uint8_t be[8];

	store_be64(be, v);
	store_put(b, CF_META, STORE_META_FORMAT, strlen(STORE_META_FORMAT), be,
	          sizeof(be));
	return store_commit(b, true);
}

int store_fmt_read(struct store *s, uint64_t *format)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, NULL, CF_META, STORE_META_FORMAT,
	                   strlen(STORE_META_FORMAT), &v);

	*format = STORE_FORMAT_UNSTAMPED;
	if (rc == 0 && v.len == 8)
		*format = store_get_be64(v.p);
	else if (rc == 0) {
		log_error("store format unreadable (%zu bytes, not 8)", v.len);
		rc = GD_EIO;
	} else if (rc == GD_ENOTFOUND)
		rc = 0;
	buf_free(&v);
	return rc;
}

/* Raise a store of format v to STORE_FORMAT, a step per batch. */
static int migrate(struct store *s, struct store_batch *b, uint64_t v)
{
	int rc = 0;

	for (; v < STORE_FORMAT && rc == 0; v++) {
		const struct fmt_step *st = step_from(v);
		GD_ASSERT(st); /* a build whose table lacks a step */
		log_info("store format migration from=%" PRIu64 " to=%" PRIu64
		         ": %s",
		         v, v + 1, st->what);
		if ((rc = st->fn(s, b)) == 0)
			rc = stamp(b, v + 1);
	}
	return rc;
}

int store_fmt_open(struct store *s, const char *path, bool created)
{
	struct store_batch *b;
	uint64_t v;
	int rc;

	if ((rc = store_fmt_read(s, &v)) < 0)
		return rc;
	if (v != STORE_FORMAT_UNSTAMPED && v > STORE_FORMAT) {
		log_error("store dir=%s has format %" PRIu64 ", newer than "
		          "format %d of this grantd (%s): this store was "
		          "written by a newer grantd; install that release "
		          "or restore a backup (docs/upgrading.md)",
		          path, v, STORE_FORMAT, GRANTD_VERSION);
		return GD_EPROTO;
	}
	if (v == STORE_FORMAT)
		return 0;
	store_batch_new(&b, s);
	if (created || v == STORE_FORMAT_UNSTAMPED) {
		if (!created)
			log_info("store dir=%s has no format (made by grantd "
			         "0.1.0): format 1, stamped",
			         path);
		rc = created ? stamp(b, STORE_FORMAT) : stamp(b, 1);
		v = created ? STORE_FORMAT : 1;
	}
	if (rc == 0)
		rc = migrate(s, b, v);
	store_batch_free(&b);
	return rc;
}
