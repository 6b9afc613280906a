/*
 * test_loghttp.c: the push log's HTTP endpoint (node/daemon/loghttp.h).
 *
 * A source holds a tree of 300 leaves built with tlog.h; what loghttp_get
 * answers is read back the way a client does (tlog_tile_read_hashes over
 * the tiles it serves, tlog_bundle_check of the entry bundles), so the
 * tiles are right by the library's own checks, not by a copy of its
 * arithmetic.  Then a real daemon on loopback answers a GET and refuses a
 * POST.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "err.h"
#include "loghttp.h"
#include "tlog.h"
#include "tlog_tile.h"
#include "xalloc.h"

#define LEAVES 300
#define NOTE \
	"example.org/grantd/pa\n300\nROOT\n\n— example.org/grantd/pa AAAA\n"

struct table {
	struct tlog_hash h[2 * LEAVES];
	size_t n;
	int fail; /* next hashes() returns GD_EIO */
};

static struct table tab;

static int
read_tab(struct tlog_hash *out, const int64_t *idx, size_t n, void *payload)
{
	const struct table *t = payload;

	for (size_t i = 0; i < n; i++) {
		assert_true(idx[i] >= 0 && (size_t)idx[i] < t->n);
		out[i] = t->h[idx[i]];
	}
	return 0;
}

static void entry_text(struct buf *out, int64_t i)
{
	buf_printf(out, "entry %lld\n", (long long)i);
}

static int
src_checkpoint(void *src, const char *site, struct buf *note, int64_t *size)
{
	(void)src;
	if (strcmp(site, "pa"))
		return GD_ENOTFOUND;
	buf_puts(note, NOTE);
	*size = LEAVES;
	return 0;
}

static int src_hashes(void *src,
                      const char *site,
                      struct tlog_hash *out,
                      const int64_t *idx,
                      size_t n)
{
	struct table *t = src;

	assert_string_equal(site, "pa");
	if (t->fail) {
		t->fail = 0;
		return GD_EIO;
	}
	return read_tab(out, idx, n, t);
}

static int
src_entry(void *src, const char *site, int64_t index, struct buf *out)
{
	(void)src;
	assert_string_equal(site, "pa");
	assert_true(index >= 0 && index < LEAVES);
	entry_text(out, index);
	return 0;
}

static const struct loghttp_source SRC = {src_checkpoint, src_hashes, src_entry,
                                          &tab};

static int setup(void **state)
{
	struct buf e = BUF_INIT;
	struct tlog_hash leaf, add[TLOG_MAX_STORED];
	size_t nadd;

	(void)state;
	memset(&tab, 0, sizeof(tab));
	for (int64_t i = 0; i < LEAVES; i++) {
		buf_reset(&e);
		entry_text(&e, i);
		tlog_leaf_hash(&leaf, e.p, e.len);
		assert_int_equal(tlog_stored_hashes(add, &nadd, i, &leaf,
		                                    read_tab, &tab),
		                 0);
		memcpy(tab.h + tab.n, add, nadd * sizeof(*add));
		tab.n += nadd;
	}
	buf_free(&e);
	return 0;
}

/* GET path: the status; body into out. */
static unsigned get(struct buf *out, const char *path, struct loghttp_answer *a)
{
	struct loghttp_answer x;

	buf_reset(out);
	loghttp_get(a ? a : &x, out, &SRC, path);
	return (a ? a : &x)->status;
}

/* tlog_tile_fetch_fn over loghttp_get, as grant-log fetches. */
static int fetch(uint8_t *out, const struct tlog_tile *t, void *payload)
{
	char path[128] = "/log/pa/";
	struct buf b = BUF_INIT;
	int rc = 0;

	(void)payload;
	assert_true(tlog_tile_path(path + strlen(path), t) > 0);
	if (get(&b, path, NULL) != 200 || b.len != (size_t)t->w * TLOG_HASH_LEN)
		rc = GD_EIO;
	else
		memcpy(out, b.p, b.len);
	buf_free(&b);
	return rc;
}

static void test_tiles_read_back(void **state)
{
	struct tlog_tile_reader r = {.size = LEAVES, .fetch = fetch};
	struct tlog_hash want, got;

	(void)state;
	assert_int_equal(tlog_tree_hash(&want, LEAVES, read_tab, &tab), 0);
	r.root = want;
	/* every hash the root needs, read out of the served tiles, each
	 * tile checked against the root */
	assert_int_equal(
	        tlog_tree_hash(&got, LEAVES, tlog_tile_read_hashes, &r), 0);
	assert_true(tlog_hash_eq(&got, &want));
}

static void test_paths(void **state)
{
	struct buf b = BUF_INIT;
	struct loghttp_answer a;

	(void)state;
	assert_int_equal(get(&b, "/log/pa/checkpoint", &a), 200);
	assert_string_equal(buf_str(&b), NOTE);
	assert_string_equal(a.cache, "no-store");
	assert_int_equal(get(&b, "/log/pa/tile/0/000", &a), 200);
	assert_int_equal(b.len, 256 * TLOG_HASH_LEN);
	assert_string_equal(a.cache, "public, max-age=31536000, immutable");
	assert_string_equal(a.type, "application/octet-stream");
	assert_int_equal(get(&b, "/log/pa/tile/0/001.p/44", &a), 200);
	assert_int_equal(b.len, 44 * TLOG_HASH_LEN);
	assert_string_equal(a.cache, "no-store");
	assert_int_equal(get(&b, "/log/pa/tile/0/001.p/43", NULL), 200);
	assert_int_equal(get(&b, "/log/pa/tile/1/000.p/1", NULL), 200);
	/* beyond the checkpoint's tree */
	assert_int_equal(get(&b, "/log/pa/tile/0/001.p/45", NULL), 404);
	assert_int_equal(get(&b, "/log/pa/tile/0/001", NULL), 404);
	assert_int_equal(get(&b, "/log/pa/tile/1/000.p/2", NULL), 404);
	assert_int_equal(get(&b, "/log/pa/tile/2/000.p/1", NULL), 404);
	assert_int_equal(get(&b, "/log/pa/tile/entries/001.p/45", NULL), 404);
	/* not paths of the layout */
	static const char *const bad[] = {
	        "/",
	        "/log",
	        "/log/",
	        "/log/pa",
	        "/log/pa/",
	        "/log//checkpoint",
	        "/log/PA/checkpoint",
	        "/log/../checkpoint",
	        "/log/pa/tile/0/0",
	        "/log/pa/tile/0/x000/000",
	        "/log/pa/tile/0/000.p/256",
	        "/log/pa/tile/0/000.p/0",
	        "/log/pa/tile/-1/000",
	        "/log/pa/tile/entries",
	        "/log/pa/checkpoint/",
	        "/log/pa/tiles/0/000",
	        "/log/mtl/checkpoint", /* no checkpoint of that site */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (get(&b, bad[i], &a) != 404)
			fail_msg("%s: %u, want 404", bad[i], a.status);
	buf_free(&b);
}

static void test_bundles(void **state)
{
	struct buf b = BUF_INIT, h = BUF_INIT;

	(void)state;
	assert_int_equal(get(&b, "/log/pa/tile/entries/000", NULL), 200);
	assert_int_equal(get(&h, "/log/pa/tile/0/000", NULL), 200);
	assert_int_equal(tlog_bundle_check(b.p, b.len, (uint8_t *)h.p, h.len),
	                 0);
	assert_int_equal(get(&b, "/log/pa/tile/entries/001.p/44", NULL), 200);
	assert_int_equal(get(&h, "/log/pa/tile/0/001.p/44", NULL), 200);
	assert_int_equal(tlog_bundle_check(b.p, b.len, (uint8_t *)h.p, h.len),
	                 0);
	buf_free(&b);
	buf_free(&h);
}

static void test_source_fails(void **state)
{
	struct buf b = BUF_INIT;

	(void)state;
	tab.fail = 1;
	assert_int_equal(get(&b, "/log/pa/tile/0/000", NULL), 500);
	assert_int_equal(get(&b, "/log/pa/tile/0/000", NULL), 200);
	buf_free(&b);
}

/* One HTTP/1.0 request on a fresh connection to 127.0.0.1:port: the
 * whole answer. */
static void http(struct buf *out, int port, const char *req)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port)};
	char chunk[4096];
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	buf_reset(out);
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		buf_add(out, chunk, (size_t)n);
	close(fd);
}

static void test_daemon(void **state)
{
	struct loghttp *l = NULL;
	struct buf b = BUF_INIT;
	char listen[64];
	int port = 20000 + (int)randombytes_uniform(20000);

	(void)state;
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	assert_int_equal(loghttp_start(&l, listen, &SRC), 0);
	http(&b, port, "GET /log/pa/checkpoint HTTP/1.0\r\n\r\n");
	if (strncmp(buf_str(&b), "HTTP/1.", 7) || strncmp(b.p + 8, " 200 ", 5))
		fail_msg("answer: %.60s", buf_str(&b));
	assert_non_null(strstr(buf_str(&b), "\r\n\r\n" NOTE));
	http(&b, port,
	     "POST /log/pa/checkpoint HTTP/1.0\r\n"
	     "Content-Length: 0\r\n\r\n");
	assert_non_null(strstr(buf_str(&b), " 405 "));
	http(&b, port, "GET /log/pa/tile/0/001 HTTP/1.0\r\n\r\n");
	assert_non_null(strstr(buf_str(&b), " 404 "));
	loghttp_stop(&l);
	assert_null(l);
	loghttp_stop(&l);
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_tiles_read_back),
	        cmocka_unit_test(test_paths),
	        cmocka_unit_test(test_bundles),
	        cmocka_unit_test(test_source_fails),
	        cmocka_unit_test(test_daemon),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, setup, NULL);
}
