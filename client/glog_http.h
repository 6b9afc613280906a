/*
 * glog_http.h: grant-log's reads of a site's HTTP log (libcurl): the
 * checkpoint, tiles and entry bundles under URL/log/SITE/ (C2SP
 * tlog-tiles paths), for client/grant-log.c.
 *
 * Nothing read here is trusted: the caller checks the checkpoint's
 * signatures (glog.h) and reads hashes only through
 * tlog_tile_read_hashes with glog_http_tile as its fetch.  One struct
 * glog_http per thread (a curl handle, kept open so that requests reuse
 * the connection).  Errors: GD_ENOTFOUND (HTTP 404), GD_EUNREACH (no
 * answer, another status, an answer over the size asked for), GD_ECRYPTO
 * (a tile of the wrong length); the line saying why is in h->why.
 */
#ifndef GD_GLOG_HTTP_H
#define GD_GLOG_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "tlog_tile.h"

#define GLOG_HTTP_CACHE 64 /* tiles kept in memory */

struct glog_http {
	void *curl;
	char *base; /* URL/log/SITE/ */
	struct buf *out;
	size_t max;
	bool over;
	char errbuf[256]; /* CURL_ERROR_SIZE */
	/* tiles read already (a tile of a given width never changes) */
	struct tlog_tile ctile[GLOG_HTTP_CACHE];
	uint8_t *cdata[GLOG_HTTP_CACHE];
	size_t ncache;
	struct buf why; /* the last failure, one line */
};

/* Opens h for the log of site at url (http:// or https://; trailing
 * slashes dropped).  curl_global_init() first.  0 or GD_ENOMEM. */
int glog_http_init(struct glog_http *h, const char *url, const char *site);
/* NULL-safe on a zeroed h. */
void glog_http_free(struct glog_http *h);

/* GET base + path, at most max bytes, into out (reset first). */
int glog_http_get(struct glog_http *h,
                  const char *path,
                  size_t max,
                  struct buf *out);

/* A tlog_tile_fetch_fn (payload: the struct glog_http *): tile t's data,
 * t->w hashes, from the partial tile or, when the server has dropped it,
 * the full one (C2SP tlog-tiles allows that); cached. */
int glog_http_tile(uint8_t *out, const struct tlog_tile *t, void *payload);

/* Entry bundle n of a tree whose tile n holds w entries, into out (reset
 * first) as a bundle of exactly those w entries (the first w of the full
 * bundle when the partial one is gone): 0, or GD_ECRYPTO (h->why) when
 * it does not hold w entries. */
int glog_http_bundle(struct glog_http *h, int64_t n, int w, struct buf *out);

#endif
