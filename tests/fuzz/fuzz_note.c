/*
 * fuzz_note.c: the transparency log's parsers (common/note.h,
 * common/tlog.h, common/tlog_tile.h) on any bytes.
 *
 * A site reads signed checkpoints and cosignatures from its peers and
 * grant-log reads them, tiles and entry bundles from any HTTP server, so
 * every parser must be safe on anything and keep its promises: note_open
 * points only into its input and says verified only with a known key's
 * line; a key, checkpoint or tile path that parses writes back as the
 * same bytes; a bundle's entries lie inside it; proof checks and reading
 * hashes out of made-up tiles end, on any sizes and hashes.  The same bytes
 * go to each.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "buf.h"
#include "err.h"
#include "note.h"
#include "tlog.h"
#include "tlog_tile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const vkeys[] = {
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop",
        "witness.example/w1+468d99bb+BHm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+"
        "DjkQutBJZk",
        "example.com/behind-the-sofa+301296c0+AefxYqEL7FWa/qGV5NzoS2lWjV0ssJY+"
        "tEbAaF4rF/Lw",
};

static bool inside(const char *p, size_t n, const uint8_t *data, size_t size)
{
	return (const uint8_t *)p >= data &&
	       (const uint8_t *)p + n <= data + size;
}

static void check_open(const uint8_t *data,
                       size_t size,
                       const struct note_vkey *k,
                       size_t nk)
{
	static struct note n;
	struct note_checkpoint c;
	size_t verified = 0;
	int err = note_open(&n, (const char *)data, size, k, nk);

	if (err && err != GD_EINVAL && err != GD_ETOOBIG && err != GD_ECRYPTO &&
	    err != GD_ENOTFOUND)
		abort();
	if (err == GD_EINVAL || err == GD_ETOOBIG)
		return;
	if (n.nsigs > NOTE_MAX_SIGS || !inside(n.text, n.text_len, data, size))
		abort();
	for (size_t i = 0; i < n.nsigs; i++) {
		const struct note_sig *s = &n.sigs[i];
		if (!inside(s->name, s->name_len, data, size) ||
		    !inside(s->b64, s->b64_len, data, size) ||
		    s->key >= (int)nk)
			abort();
		if (s->key >= 0 && (err != GD_ECRYPTO || (int)i != n.bad))
			verified++;
	}
	if (err != GD_ECRYPTO &&
	    ((err == 0) != (verified > 0) || verified != n.nverified))
		abort();
	if (!note_checkpoint_parse(&c, n.text, n.text_len) &&
	    (c.size < 0 || c.origin_len == 0))
		abort();
}

static void check_keys(const uint8_t *data, size_t size)
{
	struct note_vkey vk;
	struct note_skey sk;
	struct buf b = BUF_INIT;

	if (!note_vkey_parse(&vk, (const char *)data, size)) {
		note_vkey_format(&b, &vk);
		if (b.len != size || memcmp(b.p, data, size))
			abort();
	}
	buf_reset(&b);
	if (!note_skey_parse(&sk, (const char *)data, size)) {
		note_skey_format(&b, &sk);
		if (b.len != size || memcmp(b.p, data, size))
			abort();
		note_skey_wipe(&sk);
	}
	if (b.p)
		sodium_memzero(b.p, b.len);
	buf_free(&b);
}

static void check_checkpoint(const uint8_t *data, size_t size)
{
	struct note_checkpoint c;
	struct buf b = BUF_INIT;

	if (note_checkpoint_parse(&c, (const char *)data, size))
		return;
	if (note_checkpoint_format(&b, c.origin, c.origin_len, c.size,
	                           &c.root) ||
	    b.len + c.ext_len != size || memcmp(b.p, data, b.len))
		abort();
	buf_free(&b);
}

static void check_tiles(const uint8_t *data, size_t size)
{
	struct tlog_tile t;
	struct tlog_bundle_iter it;
	char path[TLOG_TILE_PATH_MAX];
	const uint8_t *e;
	size_t elen, total = 0;
	int r;

	if (!tlog_tile_parse_path(&t, (const char *)data, size) &&
	    ((size_t)tlog_tile_path(path, &t) != size ||
	     memcmp(path, data, size)))
		abort();
	tlog_bundle_iter_init(&it, data, size);
	while ((r = tlog_bundle_next(&it, &e, &elen)) == 1) {
		if (e < data || e + elen > data + size)
			abort();
		total += 2 + elen;
	}
	if ((r == 0) != (total == size))
		abort();
}

/* Sizes and hashes from the bytes: the proof checks end, and say yes only
 * with arguments in range. */
static void check_proofs(const uint8_t *data, size_t size)
{
	struct tlog_hash h[2 + TLOG_MAX_PROOF + 2];
	uint64_t ut = 0, un = 0;
	int64_t t, n;
	size_t nh;

	if (size < 16 + 2 * TLOG_HASH_LEN)
		return;
	for (int i = 0; i < 8; i++) {
		ut = ut << 8 | data[i];
		un = un << 8 | data[8 + i];
	}
	/* the high byte's low bits shorten the number: small trees too */
	t = (int64_t)(ut & ((uint64_t)INT64_MAX >> (data[0] & 63)));
	n = (int64_t)(un & ((uint64_t)INT64_MAX >> (data[8] & 63)));
	nh = (size - 16) / TLOG_HASH_LEN;
	if (nh > sizeof(h) / sizeof(h[0]))
		nh = sizeof(h) / sizeof(h[0]);
	memcpy(h, data + 16, nh * TLOG_HASH_LEN);
	if (!tlog_check_record(h + 2, nh - 2, t, &h[0], n, &h[1]) &&
	    !(0 <= n && n < t))
		abort();
	if (!tlog_check_tree(h + 2, nh - 2, t, &h[0], n, &h[1]) &&
	    !(1 <= n && n <= t))
		abort();
}

struct bytes {
	const uint8_t *p;
	size_t n;
};

/* A server whose tiles are the input's bytes over and over. */
static int serve_bytes(uint8_t *out, const struct tlog_tile *t, void *payload)
{
	const struct bytes *b = payload;
	size_t len = (size_t)t->w * TLOG_HASH_LEN;

	for (size_t at = 0; at < len; at += b->n)
		memcpy(out + at, b->p, len - at < b->n ? len - at : b->n);
	return 0;
}

/* Hashes read out of tiles a server made up: the checks end, on any
 * tree size and index, and never take such tiles for the root's. */
static void check_tile_reader(const uint8_t *data, size_t size)
{
	struct bytes b = {data, size};
	struct tlog_tile_reader rd = {0, {{0}}, serve_bytes, &b};
	struct tlog_hash h[2];
	int64_t idx[2];

	/* one input in eight: a read is ~50 times the rest of a run */
	if (size < 16 + TLOG_HASH_LEN || (data[8] & 7))
		return;
	rd.size = (int64_t)((uint64_t)data[0] << 16 | (uint64_t)data[1] << 8 |
	                    data[2])
	          << (data[3] & 31);
	idx[0] = (int64_t)(data[4] << 8 | data[5]) << (data[6] & 31);
	idx[1] = idx[0] + data[7];
	memcpy(rd.root.b, data + 16, TLOG_HASH_LEN);
	(void)tlog_tile_read_hashes(h, idx, 2, &rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct note_vkey k[sizeof(vkeys) / sizeof(vkeys[0])];
	static bool ready;

	if (!ready) {
		if (sodium_init() < 0)
			abort();
		for (size_t i = 0; i < sizeof(vkeys) / sizeof(vkeys[0]); i++)
			if (note_vkey_parse(&k[i], vkeys[i], strlen(vkeys[i])))
				abort();
		ready = true;
	}
	check_open(data, size, k, sizeof(k) / sizeof(k[0]));
	check_open(data, size, k, 0);
	check_keys(data, size);
	check_checkpoint(data, size);
	check_tiles(data, size);
	check_proofs(data, size);
	check_tile_reader(data, size);
	return 0;
}
