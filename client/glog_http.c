/*
 * glog_http.c: the log's files over HTTP with libcurl (glog_http.h).
 *
 * One easy handle, reused: a check reads one file per tile, and
 * keep-alive makes that one connection.  No redirects (a log is served
 * where it is), http and https only, a timeout per request, and every
 * answer bounded by what the file can hold (a checkpoint 64 KiB, a tile
 * 8 KiB, a bundle 16 MiB), so a hostile server can make us wait or fail,
 * never grow without bound.
 */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "err.h"
#include "glog_http.h"
#include "version.h"
#include "xalloc.h"
#include "banned.h"

#define CONNECT_TIMEOUT_S 10
#define REQUEST_TIMEOUT_S 60
#define TILE_BYTES        (TLOG_TILE_WIDTH * TLOG_HASH_LEN)
#define BUNDLE_MAX        ((size_t)TLOG_TILE_WIDTH * (2 + TLOG_ENTRY_MAX))

_Static_assert(CURL_ERROR_SIZE <= sizeof(((struct glog_http *)0)->errbuf),
               "errbuf holds a curl error");

static size_t http_write(char *p, size_t size, size_t n, void *payload)
{
	struct glog_http *h = payload;

	if (h->out->len + n > h->max) {
		h->over = true;
		return 0;
	}
	buf_add(h->out, p, n);
	return n;
}

int glog_http_init(struct glog_http *h, const char *url, const char *site)
{
	size_t n = strlen(url);
	struct buf b = BUF_INIT;
	CURL *c;

	memset(h, 0, sizeof(*h));
	while (n && url[n - 1] == '/')
		n--;
	buf_printf(&b, "%.*s/log/%s/", (int)n, url, site);
	h->base = buf_detach(&b);
	if (!(h->curl = c = curl_easy_init()))
		return GD_ENOMEM;
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)REQUEST_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "grant-log/" GRANTD_VERSION);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
	return 0;
}

void glog_http_free(struct glog_http *h)
{
	for (size_t i = 0; i < h->ncache; i++)
		free(h->cdata[i]);
	h->ncache = 0;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	h->curl = NULL;
	free(h->base);
	h->base = NULL;
	buf_free(&h->why);
}

int glog_http_get(struct glog_http *h,
                  const char *path,
                  size_t max,
                  struct buf *out)
{
	struct buf url = BUF_INIT;
	long status = 0;
	CURLcode cc;
	int rc = 0;

	buf_reset(out);
	buf_reset(&h->why);
	buf_printf(&url, "%s%s", h->base, path);
	h->out = out, h->max = max, h->over = false, h->errbuf[0] = '\0';
	curl_easy_setopt(h->curl, CURLOPT_URL, url.p);
	cc = curl_easy_perform(h->curl);
	if (cc == CURLE_OK)
		curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
	if (h->over) {
		buf_printf(&h->why, "%s: more than %zu bytes", url.p, max);
		rc = GD_EUNREACH;
	} else if (cc != CURLE_OK) {
		buf_printf(&h->why, "%s: %s", url.p,
		           h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc));
		rc = GD_EUNREACH;
	} else if (status != 200) {
		buf_printf(&h->why, "%s: HTTP status %ld", url.p, status);
		rc = status == 404 ? GD_ENOTFOUND : GD_EUNREACH;
	}
	buf_free(&url);
	return rc;
}

/* Tile or bundle t into out: the partial one, else the full one. */
static int get_tile(struct glog_http *h,
                    const struct tlog_tile *t,
                    size_t max,
                    struct buf *out)
{
	char path[TLOG_TILE_PATH_MAX];
	struct tlog_tile full = *t;
	struct buf why = BUF_INIT;
	int rc;

	GD_ASSERT(tlog_tile_path(path, t) > 0);
	rc = glog_http_get(h, path, max, out);
	if (rc != GD_ENOTFOUND || t->w == TLOG_TILE_WIDTH)
		return rc;
	buf_puts(&why, h->why.p);
	full.w = TLOG_TILE_WIDTH;
	GD_ASSERT(tlog_tile_path(path, &full) > 0);
	if (glog_http_get(h, path, max, out) != 0) {
		/* name the partial one: the one the tree asks for */
		buf_reset(&h->why);
		buf_puts(&h->why, why.p);
	} else {
		rc = 0;
	}
	buf_free(&why);
	return rc;
}

int glog_http_tile(uint8_t *out, const struct tlog_tile *t, void *payload)
{
	struct glog_http *h = payload;
	size_t want = (size_t)t->w * TLOG_HASH_LEN;
	char path[TLOG_TILE_PATH_MAX];
	struct buf b = BUF_INIT;
	int rc;

	for (size_t i = 0; i < h->ncache; i++)
		if (h->ctile[i].level == t->level && h->ctile[i].n == t->n &&
		    h->ctile[i].w == t->w) {
			memcpy(out, h->cdata[i], want);
			return 0;
		}
	if ((rc = get_tile(h, t, TILE_BYTES, &b)) != 0)
		goto done;
	if (b.len != want && b.len != TILE_BYTES) {
		GD_ASSERT(tlog_tile_path(path, t) > 0);
		buf_printf(&h->why, "%s%s: %zu bytes, not %zu", h->base, path,
		           b.len, want);
		rc = GD_ECRYPTO;
		goto done;
	}
	memcpy(out, b.p, want);
	if (h->ncache < GLOG_HTTP_CACHE) {
		h->ctile[h->ncache] = *t;
		h->cdata[h->ncache] = xmalloc(want);
		memcpy(h->cdata[h->ncache++], out, want);
	}
done:
	buf_free(&b);
	return rc;
}

int glog_http_bundle(struct glog_http *h, int64_t n, int w, struct buf *out)
{
	struct tlog_tile t = {TLOG_TILE_ENTRIES, n, w};
	char path[TLOG_TILE_PATH_MAX];
	struct tlog_bundle_iter it;
	const uint8_t *e;
	size_t len;
	int rc = get_tile(h, &t, BUNDLE_MAX, out), k = 0;

	if (rc != 0)
		return rc;
	tlog_bundle_iter_init(&it, out->p, out->len);
	while (k < w && tlog_bundle_next(&it, &e, &len) == 1)
		k++;
	/* a partial bundle ends after its w entries; a full one read
	 * instead goes on, and its first w are the tree's */
	if (k == w && (it.left == 0 || w < TLOG_TILE_WIDTH)) {
		out->len -= it.left;
		out->p[out->len] = '\0';
		return 0;
	}
	GD_ASSERT(tlog_tile_path(path, &t) > 0);
	buf_reset(&h->why);
	buf_printf(&h->why, "%s%s: not a bundle of %d entries", h->base, path,
	           w);
	return GD_ECRYPTO;
}
