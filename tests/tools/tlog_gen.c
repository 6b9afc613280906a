/*
 * tlog_gen: writes a static push log as a grantd site serves it over HTTP
 * (C2SP tlog-tiles: DIR/log/SITE/checkpoint, tile/L/N[.p/W],
 * tile/entries/N[.p/W]), for tests/integration/test_grant_log.sh to serve
 * with python3 -m http.server and check with grant-log.  Never installed.
 *
 *   tlog_gen DIR SITE N [--variant V --from K] [--signer other]
 *            [--cosigners C]
 *
 * N entries in the leaf text of docs/push-log.md; entry i moves
 * refs/heads/main of repository "linux" (i % 3 != 2) or refs/heads/next
 * of "git" to an object id made from i (and V for i >= K: a log
 * rewritten from entry K on).  The checkpoint's origin is
 * logtest.example/grantd/SITE, signed by the origin key (or, with
 * --signer other, by another key of the same name) and cosigned by the
 * first C (default 2) of two witnesses, w1 and w2.  Every key comes from
 * a fixed seed, so every run writes the same bytes.  Also writes:
 *   DIR/keys        the keys in grant-log's --keys format
 *   DIR/origin.vkey, DIR/w1.vkey, DIR/w2.vkey
 *                   the sites' keys as `grantctl log key` prints them
 *   DIR/tips        "REPO REF OID INDEX": each ref's last logged value
 * The formats come from the library the node uses (tlog.h, tlog_tile.h,
 * note.h), not from a second copy.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "err.h"
#include "note.h"
#include "tlog.h"
#include "tlog_tile.h"
#include "xalloc.h"

#define TS 1760000000ull /* the cosignatures' time */

struct table {
	struct tlog_hash *h;
	size_t n, cap;
};

static int
table_read(struct tlog_hash *out, const int64_t *idx, size_t n, void *payload)
{
	struct table *t = payload;

	for (size_t i = 0; i < n; i++) {
		if (idx[i] < 0 || (size_t)idx[i] >= t->n)
			return GD_EINVAL;
		out[i] = t->h[idx[i]];
	}
	return 0;
}

static void die(const char *what)
{
	fprintf(stderr, "tlog_gen: %s\n", what);
	exit(1);
}

static void hexid(char out[41], const char *what, long long i, int variant)
{
	uint8_t h[32];
	char in[64];

	snprintf(in, sizeof(in), "%s %lld %d", what, i, variant);
	crypto_hash_sha256(h, (const uint8_t *)in, strlen(in));
	sodium_bin2hex(out, 41, h, 20);
}

static void
write_file(const char *dir, const char *path, const void *data, size_t len)
{
	struct buf full = BUF_INIT;
	FILE *f;

	buf_printf(&full, "%s/%s", dir, path);
	for (char *p = full.p + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(full.p, 0755) != 0 && errno != EEXIST)
			die("mkdir");
		*p = '/';
	}
	if (!(f = fopen(full.p, "wb")) || fwrite(data, 1, len, f) != len ||
	    fclose(f) != 0)
		die(full.p);
	buf_free(&full);
}

static void
skey(struct note_skey *k, const char *name, uint8_t alg, const char *seedtext)
{
	uint8_t seed[32];

	crypto_hash_sha256(seed, (const uint8_t *)seedtext, strlen(seedtext));
	if (note_skey_from_seed(k, name, strlen(name), alg, seed) != 0)
		die("key");
}

struct gen {
	const char *dir, *site;
	long long n, from;
	int variant, cosigners;
	bool other_signer;
	char logdir[512];
	struct buf *entries; /* n texts */
	char main_tip[41], next_tip[41];
	long long main_at, next_at;
};

static void make_entries(struct gen *g, struct table *t)
{
	char prev_main[41], prev_next[41], oid[41];

	memset(prev_main, '0', 40), prev_main[40] = '\0';
	memcpy(prev_next, prev_main, 41);
	g->entries = xcalloc((size_t)g->n + 1, sizeof(*g->entries));
	for (long long i = 0; i < g->n; i++) {
		struct buf *e = &g->entries[i];
		bool is_linux = i % 3 != 2;
		struct tlog_hash leaf, add[TLOG_MAX_STORED];
		uint8_t addr[32];
		char b64[45];
		size_t nadd;

		hexid(oid, "commit", i, i >= g->from ? g->variant : 0);
		crypto_hash_sha256(addr, (const uint8_t *)oid, 40);
		sodium_bin2base64(b64, sizeof(b64), addr, 32,
		                  sodium_base64_VARIANT_ORIGINAL);
		buf_printf(e,
		           "grantd push v1\norigin %s\nindex %lld\ntime %lld\n"
		           "repo %s\nuser alice\nkey SHA256:%.43s\nkind plain\n"
		           "factor grant\naddr %s\nref %s %s %s\n",
		           g->site, i, 1760000000000ll + i * 1000,
		           is_linux ? "linux" : "git", b64, b64,
		           is_linux ? "refs/heads/main" : "refs/heads/next",
		           is_linux ? prev_main : prev_next, oid);
		memcpy(is_linux ? prev_main : prev_next, oid, 41);
		memcpy(is_linux ? g->main_tip : g->next_tip, oid, 41);
		*(is_linux ? &g->main_at : &g->next_at) = i;
		tlog_leaf_hash(&leaf, e->p, e->len);
		if (tlog_stored_hashes(add, &nadd, i, &leaf, table_read, t))
			die("stored hashes");
		GD_GROW(t->h, t->cap, t->n + nadd);
		memcpy(t->h + t->n, add, nadd * sizeof(*add));
		t->n += nadd;
	}
}

static int write_tile(const struct tlog_tile *tl, void *payload)
{
	void **p = payload;
	struct gen *g = p[0];
	uint8_t data[TLOG_TILE_WIDTH * TLOG_HASH_LEN];
	char path[TLOG_TILE_PATH_MAX];

	if (tlog_tile_read(data, tl, table_read, p[1]) != 0 ||
	    tlog_tile_path(path, tl) < 0)
		die("tile");
	write_file(g->logdir, path, data, (size_t)tl->w * TLOG_HASH_LEN);
	return 0;
}

static void write_bundles(struct gen *g)
{
	for (long long n = 0; n * TLOG_TILE_WIDTH < g->n; n++) {
		long long left = g->n - n * TLOG_TILE_WIDTH;
		struct tlog_tile t = {TLOG_TILE_ENTRIES, n,
		                      (int)(left < 256 ? left : 256)};
		char path[TLOG_TILE_PATH_MAX];
		struct buf b = BUF_INIT;

		for (int k = 0; k < t.w; k++) {
			const struct buf *e = &g->entries[n * 256 + k];
			if (tlog_bundle_add(&b, e->p, e->len) != 0)
				die("bundle");
		}
		if (tlog_tile_path(path, &t) < 0)
			die("bundle path");
		write_file(g->logdir, path, b.p, b.len);
		buf_free(&b);
	}
}

static void write_vkey(struct gen *g,
                       const char *file,
                       struct note_skey *k,
                       struct buf *keys,
                       const char *role)
{
	struct note_vkey v;
	struct buf b = BUF_INIT;

	note_skey_vkey(&v, k);
	note_vkey_format(&b, &v);
	buf_printf(keys, "%s %s\n", role, b.p);
	if (file) {
		/* as `grantctl log key` prints it: the type 0x01 key */
		struct note_vkey e;
		struct buf eb = BUF_INIT;

		note_vkey_init(&e, v.name, v.name_len, NOTE_ALG_ED25519, v.pub);
		note_vkey_format(&eb, &e);
		buf_puts(&eb, "\n");
		write_file(g->dir, file, eb.p, eb.len);
		buf_free(&eb);
	}
	buf_free(&b);
}

static void write_checkpoint(struct gen *g, struct table *t)
{
	struct note_skey o, w[2];
	struct buf name = BUF_INIT, text = BUF_INIT, note = BUF_INIT,
	           keys = BUF_INIT;
	struct tlog_hash root;

	buf_printf(&name, "logtest.example/grantd/%s", g->site);
	skey(&o, name.p, NOTE_ALG_ED25519,
	     g->other_signer ? "tlog_gen other" : "tlog_gen origin");
	skey(&w[0], "logtest.example/grantd/w1", NOTE_ALG_COSIG, "tlog_gen w1");
	skey(&w[1], "logtest.example/grantd/w2", NOTE_ALG_COSIG, "tlog_gen w2");
	if (tlog_tree_hash(&root, g->n, table_read, t) != 0 ||
	    note_checkpoint_format(&text, name.p, name.len, g->n, &root) != 0 ||
	    note_sign(&note, text.p, text.len, &o, 0) != 0)
		die("checkpoint");
	for (int i = 0; i < g->cosigners && i < 2; i++)
		if (note_sign_line(&note, text.p, text.len, &w[i], TS) != 0)
			die("cosignature");
	write_file(g->logdir, "checkpoint", note.p, note.len);
	if (!g->other_signer) {
		write_vkey(g, "origin.vkey", &o, &keys, "key");
		write_vkey(g, "w1.vkey", &w[0], &keys, "witness");
		write_vkey(g, "w2.vkey", &w[1], &keys, "witness");
		write_file(g->dir, "keys", keys.p, keys.len);
	}
	note_skey_wipe(&o);
	buf_free(&name), buf_free(&text), buf_free(&note), buf_free(&keys);
}

int main(int argc, char **argv)
{
	struct gen g = {0};
	struct table t = {0};
	struct buf tips = BUF_INIT;
	void *p[2] = {&g, &t};

	if (argc < 4 || sodium_init() < 0)
		die("usage: tlog_gen DIR SITE N [--variant V --from K] "
		    "[--signer other] [--cosigners C]");
	g.dir = argv[1], g.site = argv[2], g.n = atoll(argv[3]);
	g.from = g.n, g.cosigners = 2;
	for (int i = 4; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--variant"))
			g.variant = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--from"))
			g.from = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--signer"))
			g.other_signer = !strcmp(argv[i + 1], "other");
		else if (!strcmp(argv[i], "--cosigners"))
			g.cosigners = atoi(argv[i + 1]);
		else
			die(argv[i]);
	}
	snprintf(g.logdir, sizeof(g.logdir), "%s/log/%s", g.dir, g.site);
	make_entries(&g, &t);
	if (tlog_tiles_new(0, g.n, write_tile, p) != 0)
		die("tiles");
	write_bundles(&g);
	write_checkpoint(&g, &t);
	buf_printf(&tips, "linux refs/heads/main %s %lld\n", g.main_tip,
	           g.main_at);
	buf_printf(&tips, "git refs/heads/next %s %lld\n", g.next_tip,
	           g.next_at);
	write_file(g.dir, "tips", tips.p, tips.len);
	for (long long i = 0; i < g.n; i++)
		buf_free(&g.entries[i]);
	free(g.entries);
	free(t.h);
	buf_free(&tips);
	return 0;
}
