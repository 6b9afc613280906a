/*
 * loghttp.h: the public push log over HTTP ([node] log_http, SPEC 9,
 * docs/push-log.md), as C2SP tlog-tiles: for each origin SITE whose log
 * this site holds, under /log/SITE/:
 *     checkpoint                 the newest checkpoint (a signed note,
 *                                cosignatures included)
 *     tile/L/N[.p/W]             W hashes of level L (tlog_tile.h)
 *     tile/entries/N[.p/W]       the entries of level 0 tile N, as a bundle
 * Every site serves every origin's log, mirrors included: what it serves
 * is public (leaves hold the client address only as a salted commitment),
 * and a client (grant-log) checks everything against the checkpoint's
 * signatures, so it need not trust the site that serves it.
 *
 * Where the data comes from is the source's business (the store, or a
 * unit test's table); the source is called on the endpoint's thread, so it
 * must be safe to call from any thread (RocksDB reads are).  A tile is
 * served only when the checkpoint's tree holds all of it: a full tile is
 * then immutable and marked so (Cache-Control: immutable); the checkpoint
 * and partial tiles are not cached.
 */
#ifndef GD_LOGHTTP_H
#define GD_LOGHTTP_H

#include <stdint.h>

#include "buf.h"
#include "tlog.h"

struct loghttp_source {
	/* site's newest checkpoint note (appended to note) and the size of
	 * its tree; GD_ENOTFOUND when this site holds no checkpoint of it */
	int (*checkpoint)(void *src,
	                  const char *site,
	                  struct buf *note,
	                  int64_t *size);
	/* the stored hashes indexes[0..n) of site's tree (tlog_read_fn's
	 * contract) */
	int (*hashes)(void *src,
	              const char *site,
	              struct tlog_hash *out,
	              const int64_t *indexes,
	              size_t n);
	/* site's entry index (its leaf text), appended to out */
	int (*entry)(void *src,
	             const char *site,
	             int64_t index,
	             struct buf *out);
	void *src;
};

struct loghttp;

/* Serve src's logs on listen (HOST:PORT).  src must outlive the endpoint.
 * Returns 0 with *out the caller's (loghttp_stop), or GD_EINVAL / GD_EIO,
 * logged. */
int loghttp_start(struct loghttp **out,
                  const char *listen,
                  const struct loghttp_source *src);

/* Stop and free *lp; NULL-safe, sets *lp NULL. */
void loghttp_stop(struct loghttp **lp);

/* What GET path (without the query) answers: the status (200, 404, 400,
 * 500), the content type and cache header, and the body appended to out.
 * The endpoint's answer function; exposed so that it can be tested
 * without sockets. */
struct loghttp_answer {
	unsigned status;
	const char *type;
	const char *cache;
};
void loghttp_get(struct loghttp_answer *a,
                 struct buf *out,
                 const struct loghttp_source *src,
                 const char *path);

#endif
