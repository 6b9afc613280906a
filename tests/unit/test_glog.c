/*
 * test_glog.c: client/glog.h, grant-log's checks without the network:
 * keys, a checkpoint's signature and cosignature quorum, consistency of
 * two checkpoints read out of tiles (an in-memory server), the tree and
 * tiles recomputed from the entries (against tlog.h's table and
 * tlog_tile_read), the entry fields and the state file names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "err.h"
#include "glog.h"
#include "note.h"
#include "tlog.h"
#include "tlog_tile.h"

/* ---- an in-memory log -----------------------------------------------------
 */

struct mlog {
	struct tlog_hash *h;
	size_t n, cap;
	int64_t leaves;
	int flip; /* >= 0: flip a bit of this stored hash in served tiles */
};

static int
mlog_read(struct tlog_hash *out, const int64_t *idx, size_t n, void *payload)
{
	struct mlog *m = payload;

	for (size_t i = 0; i < n; i++) {
		if (idx[i] < 0 || (size_t)idx[i] >= m->n)
			return GD_EINVAL;
		out[i] = m->h[idx[i]];
		if (idx[i] == m->flip)
			out[i].b[0] ^= 1;
	}
	return 0;
}

static void entry_text(char *out, size_t cap, int64_t i, int variant)
{
	snprintf(out, cap,
	         "grantd push v1\norigin paloalto\nindex %lld\ntime 1\n"
	         "repo linux\nuser -\nkey -\nkind -\nfactor -\naddr -\n"
	         "ref refs/heads/main %040d %038d%02d\n",
	         (long long)i, 0, variant, (int)(i % 100));
}

static void mlog_fill(struct mlog *m, int64_t n, int64_t from, int variant)
{
	memset(m, 0, sizeof(*m));
	m->flip = -1;
	for (int64_t i = 0; i < n; i++) {
		struct tlog_hash leaf, add[TLOG_MAX_STORED];
		char e[512];
		size_t nadd;

		entry_text(e, sizeof(e), i, i >= from ? variant : 0);
		tlog_leaf_hash(&leaf, e, strlen(e));
		assert_int_equal(
		        tlog_stored_hashes(add, &nadd, i, &leaf, mlog_read, m),
		        0);
		if (m->n + nadd > m->cap) {
			m->cap = 2 * m->cap + 64;
			m->h = realloc(m->h, m->cap * sizeof(*m->h));
		}
		memcpy(m->h + m->n, add, nadd * sizeof(*add));
		m->n += nadd;
	}
	m->leaves = n;
}

static void mlog_root(struct mlog *m, struct tlog_hash *root, int64_t n)
{
	int flip = m->flip;

	m->flip = -1;
	assert_int_equal(tlog_tree_hash(root, n, mlog_read, m), 0);
	m->flip = flip;
}

/* tlog_tile_fetch_fn: the server's tiles, cut from the table. */
static int mlog_tile(uint8_t *out, const struct tlog_tile *t, void *payload)
{
	return tlog_tile_read(out, t, mlog_read, payload);
}

/* ---- keys ---------------------------------------------------------------- */

#define ORIGIN "logtest.example/grantd/paloalto"

static void skey(struct note_skey *k, const char *name, uint8_t alg, int seed)
{
	uint8_t s[32];

	memset(s, seed, sizeof(s));
	assert_int_equal(note_skey_from_seed(k, name, strlen(name), alg, s), 0);
}

/* k's verifier key as text, of type alg (same name and public key) */
static char *vkey(const struct note_skey *k, uint8_t alg)
{
	struct note_vkey v;
	struct buf b = BUF_INIT;

	assert_int_equal(note_vkey_init(&v, k->name, k->name_len, alg, k->pub),
	                 0);
	note_vkey_format(&b, &v);
	return buf_detach(&b);
}

static void add(struct glog_keys *ks, char *s, bool witness, int want)
{
	assert_int_equal(glog_keys_add(ks, s, strlen(s), witness), want);
	free(s);
}

static void test_keys(void **state)
{
	struct glog_keys ks = {0};
	struct note_skey o, w;
	struct buf file = BUF_INIT;
	char *ov, *wv;
	size_t line;

	skey(&o, ORIGIN, NOTE_ALG_ED25519, 1);
	skey(&w, "logtest.example/grantd/w1", NOTE_ALG_COSIG, 2);
	add(&ks, vkey(&o, NOTE_ALG_ED25519), false, 0);
	add(&ks, vkey(&o, NOTE_ALG_ED25519), false, 0); /* again: once */
	assert_int_equal(ks.n, 1);
	add(&ks, vkey(&o, NOTE_ALG_COSIG), false, GD_EINVAL); /* not 0x01 */
	/* a witness given as `grantctl log key` prints it: its 0x04 key */
	add(&ks, vkey(&w, NOTE_ALG_ED25519), true, 0);
	add(&ks, vkey(&w, NOTE_ALG_COSIG), true, 0); /* the same key */
	assert_int_equal(ks.n, 2);
	assert_true(ks.witness[1]);
	assert_int_equal(ks.key[1].alg, NOTE_ALG_COSIG);
	assert_string_equal(ks.key[1].name, "logtest.example/grantd/w1");
	assert_memory_equal(ks.key[1].pub, w.pub, NOTE_PUB_LEN);
	assert_int_equal(glog_keys_add(&ks, "nonsense", 8, false), GD_EINVAL);

	/* a keys file */
	memset(&ks, 0, sizeof(ks));
	ov = vkey(&o, NOTE_ALG_ED25519), wv = vkey(&w, NOTE_ALG_COSIG);
	buf_printf(&file, "# the log of paloalto\n\nkey %s\r\n  witness %s  \n",
	           ov, wv);
	assert_int_equal(glog_keys_file(&ks, file.p, file.len, &line), 0);
	assert_int_equal(ks.n, 2);
	assert_false(ks.witness[0]);
	assert_true(ks.witness[1]);
	buf_puts(&file, "cosigner x\n");
	assert_int_equal(glog_keys_file(&ks, file.p, file.len, &line),
	                 GD_EINVAL);
	assert_int_equal(line, 5);
	buf_reset(&file);
	buf_printf(&file, "key %s\n", wv); /* a witness key as origin key */
	assert_int_equal(glog_keys_file(&ks, file.p, file.len, &line),
	                 GD_EINVAL);
	assert_int_equal(line, 1);
	free(ov), free(wv);
	buf_free(&file);
}

/* ---- checkpoints --------------------------------------------------------- */

struct ckfx {
	struct note_skey o, other, w[3];
	struct glog_keys ks;
	struct buf text;
};

static void ckfx_init(struct ckfx *f)
{
	struct tlog_hash root;

	memset(f, 0, sizeof(*f));
	skey(&f->o, ORIGIN, NOTE_ALG_ED25519, 1);
	skey(&f->other, ORIGIN, NOTE_ALG_ED25519, 9);
	skey(&f->w[0], "logtest.example/grantd/w1", NOTE_ALG_COSIG, 2);
	skey(&f->w[1], "logtest.example/grantd/w2", NOTE_ALG_COSIG, 3);
	/* the origin's own cosigning key */
	skey(&f->w[2], ORIGIN, NOTE_ALG_COSIG, 1);
	add(&f->ks, vkey(&f->o, NOTE_ALG_ED25519), false, 0);
	for (int i = 0; i < 3; i++)
		add(&f->ks, vkey(&f->w[i], NOTE_ALG_COSIG), true, 0);
	memset(root.b, 7, sizeof(root.b));
	assert_int_equal(note_checkpoint_format(&f->text, ORIGIN,
	                                        strlen(ORIGIN), 42, &root),
	                 0);
}

/* A note of f's text signed by signer and cosigned by w[which[i]]. */
static void sign(struct buf *out,
                 struct ckfx *f,
                 const struct note_skey *s,
                 const int *which,
                 size_t n)
{
	buf_reset(out);
	assert_int_equal(note_sign(out, f->text.p, f->text.len, s, 0), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(note_sign_line(out, f->text.p, f->text.len,
		                                &f->w[which[i]], 1760000000),
		                 0);
}

static int open_ck(struct glog_ckpt *c,
                   struct buf *note,
                   struct ckfx *f,
                   const char *site,
                   size_t quorum)
{
	struct buf why = BUF_INIT;
	int rc = glog_ckpt_open(c, note->p, note->len, &f->ks, site, quorum,
	                        &why);

	if (rc)
		assert_true(why.len > 0);
	else
		assert_int_equal(why.len, 0);
	buf_free(&why);
	return rc;
}

static void test_checkpoint(void **state)
{
	static const int both[] = {0, 1}, one[] = {0}, twice[] = {0, 0, 2};
	struct ckfx f;
	struct glog_ckpt c;
	struct buf note = BUF_INIT;
	struct glog_keys none = {0};
	struct buf why = BUF_INIT;

	ckfx_init(&f);
	sign(&note, &f, &f.o, both, 2);
	assert_int_equal(open_ck(&c, &note, &f, "paloalto", 2), 0);
	assert_int_equal(c.c.size, 42);
	assert_string_equal(c.c.origin, ORIGIN);
	assert_int_equal(c.nwitnesses, 2);
	assert_string_equal(c.witnesses[0], "logtest.example/grantd/w1");
	/* another site's path */
	assert_int_equal(open_ck(&c, &note, &f, "tokyo", 0), GD_EINVAL);
	/* one cosignature, quorum 2 */
	sign(&note, &f, &f.o, one, 1);
	assert_int_equal(open_ck(&c, &note, &f, "paloalto", 1), 0);
	assert_int_equal(open_ck(&c, &note, &f, "paloalto", 2), GD_ECRYPTO);
	/* one witness twice and the origin cosigning itself: still one */
	sign(&note, &f, &f.o, twice, 3);
	assert_int_equal(open_ck(&c, &note, &f, "paloalto", 1), 0);
	assert_int_equal(c.nwitnesses, 1);
	assert_int_equal(open_ck(&c, &note, &f, "paloalto", 2), GD_ECRYPTO);
	/* signed by another key of the origin's name */
	sign(&note, &f, &f.other, both, 2);
	assert_int_equal(open_ck(&c, &note, &f, "paloalto", 0), GD_ECRYPTO);
	/* a cosignature that does not verify */
	sign(&note, &f, &f.o, both, 2);
	note.p[note.len - 10] ^= 1;
	assert_int_equal(open_ck(&c, &note, &f, "paloalto", 1), GD_ECRYPTO);
	/* no origin key given */
	sign(&note, &f, &f.o, both, 2);
	assert_int_equal(glog_ckpt_open(&c, note.p, note.len, &none, "paloalto",
	                                0, &why),
	                 GD_ENOTFOUND);
	/* not a note */
	assert_int_equal(open_ck(&c, &f.text, &f, "paloalto", 0), GD_EINVAL);

	/* the state kept: parsed without keys */
	sign(&note, &f, &f.o, both, 2);
	assert_int_equal(glog_ckpt_parse_kept(&c.c, note.p, note.len), 0);
	assert_int_equal(c.c.size, 42);
	assert_int_not_equal(glog_ckpt_parse_kept(&c.c, "x", 1), 0);
	assert_non_null(strstr(why.p, "no origin key"));
	buf_free(&why);
	buf_free(&note);
	buf_free(&f.text);
}

/* ---- consistency ----------------------------------------------------------
 */

static void test_relate(void **state)
{
	struct mlog a, b;
	struct tlog_hash r[6];
	enum glog_rel rel;
	static const int64_t sizes[] = {1, 255, 256, 257, 600, 70000};

	mlog_fill(&a, 70000, 70000, 0);
	mlog_fill(&b, 70000, 300, 1); /* rewritten from entry 300 on */
	for (int i = 0; i < 6; i++)
		mlog_root(&a, &r[i], sizes[i]);
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < 6; j++) {
			assert_int_equal(glog_relate(&rel, sizes[i], &r[i],
			                             sizes[j], &r[j], mlog_tile,
			                             &a),
			                 0);
			assert_int_equal(rel, i == j  ? GLOG_SAME
			                      : i < j ? GLOG_NEWER
			                              : GLOG_OLDER);
		}
	/* the empty tree is everyone's prefix */
	assert_int_equal(glog_relate(&rel, 0, &r[0], 600, &r[4], mlog_tile, &a),
	                 0);
	assert_int_equal(rel, GLOG_NEWER);
	/* the rewritten log: consistent up to 300, a fork after */
	{
		struct tlog_hash b256, b600, b70000;

		mlog_root(&b, &b256, 256);
		mlog_root(&b, &b600, 600);
		mlog_root(&b, &b70000, 70000);
		assert_int_equal(glog_relate(&rel, 256, &r[2], 600, &b600,
		                             mlog_tile, &b),
		                 0);
		assert_int_equal(rel, GLOG_NEWER);
		assert_int_equal(glog_relate(&rel, 600, &r[4], 70000, &b70000,
		                             mlog_tile, &b),
		                 0);
		assert_int_equal(rel, GLOG_FORK);
		assert_int_equal(glog_relate(&rel, 600, &r[4], 600, &b600,
		                             mlog_tile, &b),
		                 0);
		assert_int_equal(rel, GLOG_FORK);
		/* older, from the other side */
		assert_int_equal(glog_relate(&rel, 70000, &b70000, 600, &r[4],
		                             mlog_tile, &b),
		                 0);
		assert_int_equal(rel, GLOG_FORK);
	}
	/* a tile the server changed: not a fork, the tiles are wrong */
	a.flip = (int)tlog_stored_index(0, 520);
	assert_int_equal(
	        glog_relate(&rel, 600, &r[4], 70000, &r[5], mlog_tile, &a),
	        GD_ECRYPTO);
	free(a.h);
	free(b.h);
}

/* ---- the tree from the entries ------------------------------------------ */

struct seen {
	struct mlog *m;
	int ntiles;
};

static int
check_tile(const struct tlog_tile *t, const uint8_t *data, void *payload)
{
	struct seen *s = payload;
	uint8_t want[TLOG_TILE_WIDTH * TLOG_HASH_LEN];

	assert_int_equal(tlog_tile_read(want, t, mlog_read, s->m), 0);
	assert_memory_equal(want, data, (size_t)t->w * TLOG_HASH_LEN);
	s->ntiles++;
	return 0;
}

static int count_tile(const struct tlog_tile *t, void *payload)
{
	(*(int *)payload)++;
	return 0;
}

static int
stop_tile(const struct tlog_tile *t, const uint8_t *data, void *payload)
{
	return GD_EIO;
}

static void test_tree(void **state)
{
	static const int64_t sizes[] = {0,   1,   2,    3,     255,  256,
	                                257, 511, 1000, 65536, 65537};
	struct glog_tree *t = malloc(sizeof(*t));
	struct mlog m;
	int64_t at = 0;

	mlog_fill(&m, 65537, 65537, 0);
	glog_tree_init(t);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(*sizes); k++) {
		struct seen s = {&m, 0};
		struct tlog_hash root, want;
		int ntiles = 0;

		glog_tree_init(t);
		for (at = 0; at < sizes[k]; at++) {
			char e[512];
			struct tlog_hash leaf;

			entry_text(e, sizeof(e), at, 0);
			tlog_leaf_hash(&leaf, e, strlen(e));
			assert_int_equal(
			        glog_tree_add(t, &leaf, check_tile, &s), 0);
		}
		assert_int_equal(glog_tree_root(t, &root, check_tile, &s), 0);
		mlog_root(&m, &want, sizes[k]);
		assert_true(tlog_hash_eq(&root, &want));
		/* every tile of the tree, once */
		assert_int_equal(
		        tlog_tiles_new(0, sizes[k], count_tile, &ntiles), 0);
		assert_int_equal(s.ntiles, ntiles);
	}
	/* a callback's error stops it */
	{
		struct tlog_hash leaf = {{0}};

		glog_tree_init(t);
		for (int i = 0; i < 255; i++)
			assert_int_equal(
			        glog_tree_add(t, &leaf, stop_tile, NULL), 0);
		assert_int_equal(glog_tree_add(t, &leaf, stop_tile, NULL),
		                 GD_EIO);
	}
	free(m.h);
	free(t);
}

/* ---- entries and state names ----------------------------------------------
 */

static const char good[] =
        "grantd push v1\norigin paloalto\nindex 12\ntime 1760000000000\n"
        "repo linux\nuser alice\nkey SHA256:abc\nkind plain\nfactor grant\n"
        "addr -\n"
        "ref refs/heads/main 0000000000000000000000000000000000000000 "
        "1111111111111111111111111111111111111111\n"
        "ref refs/heads/next 2222222222222222222222222222222222222222 "
        "3333333333333333333333333333333333333333\n"
        "ref refs/heads/main 1111111111111111111111111111111111111111 "
        "4444444444444444444444444444444444444444\n";

static void test_entry(void **state)
{
	struct pushleaf e;
	const struct pushleaf_ref *r;

	/* read with the node's own parser */
	assert_int_equal(pushleaf_parse(&e, good, strlen(good)), 0);
	assert_int_equal(e.nrefs, 3);
	r = glog_entry_ref(&e, "linux", "refs/heads/main");
	assert_non_null(r);
	/* the last line that moves it */
	assert_string_equal(r->new_,
	                    "4444444444444444444444444444444444444444");
	r = glog_entry_ref(&e, "linux", "refs/heads/next");
	assert_non_null(r);
	assert_string_equal(r->old, "2222222222222222222222222222222222222222");
	assert_null(glog_entry_ref(&e, "git", "refs/heads/main"));
	assert_null(glog_entry_ref(&e, "linux", "refs/heads/other"));
	assert_null(glog_entry_ref(&e, "linux", "refs/heads/mai"));
	pushleaf_free(&e);
}

static void test_state_name(void **state)
{
	struct buf b = BUF_INIT;

	glog_state_name(&b, "example.org/grantd/paloalto");
	assert_string_equal(b.p, "example.org%2Fgrantd%2Fpaloalto");
	buf_reset(&b);
	glog_state_name(&b, "../x y%");
	assert_string_equal(b.p, "%2E.%2Fx%20y%25");
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_keys),
	        cmocka_unit_test(test_checkpoint),
	        cmocka_unit_test(test_relate),
	        cmocka_unit_test(test_tree),
	        cmocka_unit_test(test_entry),
	        cmocka_unit_test(test_state_name),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
