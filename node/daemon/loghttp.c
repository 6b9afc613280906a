/*
 * loghttp.c: the public push log over HTTP (loghttp.h).
 */
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "httpd.h"
#include "log.h"
#include "loghttp.h"
#include "names.h"
#include "tlog_tile.h"
#include "xalloc.h"
#include "banned.h"

#define TEXT      "text/plain; charset=utf-8"
#define BINARY    "application/octet-stream"
#define IMMUTABLE "public, max-age=31536000, immutable"
#define NO_STORE  "no-store"

struct loghttp {
	struct MHD_Daemon *d;
	struct loghttp_source src;
};

/* tlog_read_fn over one site's hashes. */
struct site_read {
	const struct loghttp_source *src;
	const char *site;
};

static int site_hashes(struct tlog_hash *out,
                       const int64_t *indexes,
                       size_t n,
                       void *payload)
{
	const struct site_read *r = payload;

	return r->src->hashes(r->src->src, r->site, out, indexes, n);
}

static void answer_text(struct loghttp_answer *a,
                        struct buf *out,
                        unsigned status,
                        const char *text)
{
	a->status = status;
	a->type = TEXT;
	a->cache = NO_STORE;
	buf_reset(out);
	buf_puts(out, text);
}

/* Does the tree of size leaves hold all of tile t? */
static bool tile_in_tree(const struct tlog_tile *t, int64_t size)
{
	int level = t->level == TLOG_TILE_ENTRIES ? 0 : t->level;
	int64_t have, from;

	if (level * TLOG_TILE_HEIGHT >= 63)
		return false;
	have = size >> (level * TLOG_TILE_HEIGHT); /* hashes of that level */
	if (t->n > (INT64_MAX - TLOG_TILE_WIDTH) / TLOG_TILE_WIDTH)
		return false;
	from = t->n * TLOG_TILE_WIDTH;
	return from + t->w <= have;
}

/* Tile t (hashes or entries) of site into out: 0 or an error. */
static int tile_body(struct buf *out,
                     const struct loghttp_source *src,
                     const char *site,
                     const struct tlog_tile *t)
{
	struct site_read r = {src, site};
	struct buf e = BUF_INIT;
	int rc = 0;

	if (t->level != TLOG_TILE_ENTRIES)
		return tlog_tile_read(
		        (uint8_t *)buf_extend(out,
		                              (size_t)t->w * TLOG_HASH_LEN),
		        t, site_hashes, &r);
	for (int i = 0; rc == 0 && i < t->w; i++) {
		buf_reset(&e);
		rc = src->entry(src->src, site, t->n * TLOG_TILE_WIDTH + i, &e);
		if (rc == 0)
			rc = tlog_bundle_add(out, e.p, e.len);
	}
	buf_free(&e);
	return rc;
}

/* "/log/SITE/REST": SITE into site, REST's offset in path; false when
 * path is not of that shape. */
static bool split_path(const char *path, char site[65], size_t *rest)
{
	const char *s, *slash;

	if (strncmp(path, "/log/", 5))
		return false;
	s = path + 5;
	slash = strchr(s, '/');
	if (!slash || slash == s || (size_t)(slash - s) >= 65)
		return false;
	memcpy(site, s, (size_t)(slash - s));
	site[slash - s] = '\0';
	*rest = (size_t)(slash + 1 - path);
	return name_site_ok(site);
}

void loghttp_get(struct loghttp_answer *a,
                 struct buf *out,
                 const struct loghttp_source *src,
                 const char *path)
{
	struct buf note = BUF_INIT;
	struct tlog_tile t;
	char site[65];
	int64_t size = 0;
	size_t rest;
	int rc;

	if (!split_path(path, site, &rest)) {
		answer_text(a, out, MHD_HTTP_NOT_FOUND,
		            "not found: the logs are at /log/SITE/checkpoint "
		            "and /log/SITE/tile/...\n");
		return;
	}
	rc = src->checkpoint(src->src, site, &note, &size);
	if (rc == GD_ENOTFOUND) {
		answer_text(a, out, MHD_HTTP_NOT_FOUND,
		            "not found: no checkpoint of that site here\n");
	} else if (rc < 0) {
		answer_text(a, out, MHD_HTTP_INTERNAL_SERVER_ERROR,
		            "the log could not be read (see the node's log)\n");
	} else if (!strcmp(path + rest, "checkpoint")) {
		*a = (struct loghttp_answer){MHD_HTTP_OK, TEXT, NO_STORE};
		buf_reset(out);
		buf_add(out, note.p, note.len);
	} else if (strncmp(path + rest, "tile/", 5) ||
	           tlog_tile_parse_path(&t, path + rest, strlen(path + rest)) <
	                   0) {
		answer_text(a, out, MHD_HTTP_NOT_FOUND,
		            "not found: not a tile path (tile/L/N[.p/W] or "
		            "tile/entries/N[.p/W])\n");
	} else if (!tile_in_tree(&t, size)) {
		answer_text(a, out, MHD_HTTP_NOT_FOUND,
		            "not found: the checkpoint's tree does not hold "
		            "that tile\n");
	} else {
		buf_reset(out);
		if ((rc = tile_body(out, src, site, &t)) < 0) {
			log_error("push log endpoint: cannot read site=%s "
			          "path=%s: %s",
			          site, path + rest, gd_strerror(rc));
			answer_text(a, out, MHD_HTTP_INTERNAL_SERVER_ERROR,
			            "the log could not be read (see the "
			            "node's log)\n");
		} else {
			*a = (struct loghttp_answer){
			        MHD_HTTP_OK, BINARY,
			        t.w == TLOG_TILE_WIDTH ? IMMUTABLE : NO_STORE};
		}
	}
	buf_free(&note);
}

static enum MHD_Result answer(void *cls,
                              struct MHD_Connection *conn,
                              const char *url,
                              const char *method,
                              const char *version,
                              const char *upload,
                              size_t *upload_size,
                              void **con_cls)
{
	struct loghttp *l = cls;
	struct loghttp_answer a;
	struct buf body = BUF_INIT;
	enum MHD_Result ret;

	(void)version, (void)upload, (void)con_cls;
	if (!httpd_get_only(conn, method, upload_size, &ret))
		return ret;
	loghttp_get(&a, &body, &l->src, url);
	ret = httpd_reply(conn, a.status, a.type, a.cache, &body);
	buf_free(&body);
	return ret;
}

int loghttp_start(struct loghttp **out,
                  const char *listen,
                  const struct loghttp_source *src)
{
	struct loghttp *l = xcalloc(1, sizeof(*l));
	int rc;

	*out = NULL;
	l->src = *src;
	if ((rc = httpd_start(&l->d, listen, "push log", answer, l)) < 0) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

void loghttp_stop(struct loghttp **lp)
{
	struct loghttp *l = *lp;

	if (!l)
		return;
	httpd_stop(&l->d);
	free(l);
	*lp = NULL;
}
