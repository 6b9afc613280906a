/*
 * test_tlogwit_verify.c: `grantctl log verify`'s check of the kept
 * checkpoints (node/peers/tlogwit_verify.c, tlogwit_verify_kept), over a
 * real store holding two origins' leaves and the notes a frontend keeps
 * (CF_META "tlog/ckpt/SITE", "tlog/wit/SITE", "tlog/proof/SITE/SIZE"):
 * a good checkpoint with its two cosignatures; a note whose root is not
 * the leaves'; one signed by another key; one of a site without a key
 * (unchecked, not a failure); a last cosigned of another log; a kept fork
 * proof (a failure, named).
 */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckpt.h"
#include "config.h"
#include "err.h"
#include "fixture.h"
#include "opsig.h"
#include "records.h"
#include "store.h"
#include "tlogstore.h"
#include "tlogwit.h"

#define HOST "git.example.org"

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] = {7};
static const char *const sites[] = {"paloalto", "portland", "montreal"};

struct fixture {
	char dir[256];
	struct store *s;
	struct config cfg;
	struct note_skey sign[3], cosign[3], other;
	struct note_vkey own;
	char vkey[3][512];
	struct buf text, why;
	cJSON *json;
};

static void skey(struct note_skey *k, const char *site, uint8_t alg, int n)
{
	char name[NOTE_NAME_MAX + 1];
	uint8_t seed[32] = {(uint8_t)n};

	assert_int_equal(opsig_key_name(name, HOST, site), 0);
	assert_int_equal(note_skey_from_seed(k, name, strlen(name), alg, seed),
	                 0);
}

/* n leaves of site; fork: leaf 3 another text. */
static void leaves(struct fixture *f, const char *site, int n, bool fork)
{
	struct store_batch *b;
	char text[64];

	assert_int_equal(store_batch_new(&b, f->s), 0);
	for (int i = 0; i < n; i++) {
		snprintf(text, sizeof(text), "%s leaf %d%s\n", site, i,
		         fork && i == 3 ? " forked" : "");
		assert_int_equal(tlogstore_append(f->s, b, site, (uint64_t)i,
		                                  text, strlen(text)),
		                 0);
	}
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
}

static void
meta_put(struct fixture *f, const char *key, const void *v, size_t n)
{
	struct store_batch *b;

	assert_int_equal(store_batch_new(&b, f->s), 0);
	store_put(b, CF_META, key, strlen(key), v, n);
	assert_int_equal(store_commit(b, false), 0);
	store_batch_free(&b);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct note_vkey v;
	struct buf b = BUF_INIT;

	if (!f ||
	    fx_mkdtemp(f->dir, sizeof(f->dir), "test_tlogwit_verify", true) < 0)
		return -1;
	f->cfg.site = (char *)sites[0];
	f->cfg.host = (char *)HOST;
	f->cfg.repo_dir = f->dir;
	if (fx_store_open(&f->s, NULL, f->dir, &f->cfg, seal_key) < 0)
		return -1;
	for (int i = 0; i < 3; i++) {
		skey(&f->sign[i], sites[i], NOTE_ALG_ED25519, i + 1);
		skey(&f->cosign[i], sites[i], NOTE_ALG_COSIG, i + 1);
		note_skey_vkey(&v, &f->sign[i]);
		buf_reset(&b);
		note_vkey_format(&b, &v);
		snprintf(f->vkey[i], sizeof(f->vkey[i]), "%s", b.p);
	}
	skey(&f->other, sites[1], NOTE_ALG_ED25519, 9);
	note_skey_vkey(&f->own, &f->sign[0]);
	f->cfg.npeers = 2;
	for (int i = 1; i < 3; i++) {
		f->cfg.peers[i - 1].site = (char *)sites[i];
		f->cfg.peers[i - 1].verifier_key = f->vkey[i];
	}
	buf_free(&b);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	fx_store_close(&f->s, NULL);
	for (int i = 0; i < 3; i++) {
		note_skey_wipe(&f->sign[i]);
		note_skey_wipe(&f->cosign[i]);
	}
	note_skey_wipe(&f->other);
	buf_free(&f->text);
	buf_free(&f->why);
	cJSON_Delete(f->json);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

/* A checkpoint of site's tree of size n here, signed by k, cosigned by
 * the sites in cosigners (indexes into sites, -1 ends). */
static void ckpt_note(struct fixture *f,
                      struct buf *out,
                      const char *site,
                      int64_t n,
                      const struct note_skey *k,
                      const int *cosigners)
{
	struct tlogstore_table t = {f->s, NULL, site};
	struct ckpt_tree tree = {n, tlogstore_read, &t};
	struct buf text = BUF_INIT;
	const char *end;

	buf_reset(out);
	assert_int_equal(ckpt_make(out, k, &tree), 0);
	end = memmem(out->p, out->len, "\n\n", 2);
	assert_non_null(end);
	buf_add(&text, out->p, (size_t)(end - out->p) + 1);
	for (; cosigners && *cosigners >= 0; cosigners++)
		assert_int_equal(note_sign_line(out, text.p, text.len,
		                                &f->cosign[*cosigners],
		                                1764900000),
		                 0);
	buf_free(&text);
}

/* Run the check: failures, with the text and JSON kept in f. */
static int verify(struct fixture *f)
{
	buf_reset(&f->text);
	cJSON_Delete(f->json);
	f->json = cJSON_CreateObject();
	return tlogwit_verify_kept(&f->why, f->json, &f->text, f->s, &f->cfg,
	                           &f->own);
}

static bool has(const struct buf *b, const char *s)
{
	if (b->len && strstr(b->p, s))
		return true;
	fprintf(stderr, "want '%s' in:\n%.*s\n", s, (int)b->len, b->p);
	return false;
}

static void test_good(void **state)
{
	struct fixture *f = *state;
	static const int both[] = {1, 2, -1};
	struct buf note = BUF_INIT;
	cJSON *c;

	leaves(f, "paloalto", 10, false);
	ckpt_note(f, &note, "paloalto", 10, &f->sign[0], both);
	meta_put(f, "tlog/ckpt/paloalto", note.p, note.len);
	assert_int_equal(verify(f), 0);
	assert_true(has(&f->text, "tlog paloalto: checkpoint size=10 signed "
	                          "ok, cosignatures 2/2, root matches\n"));
	c = cJSON_GetArrayItem(cJSON_GetObjectItem(f->json, "checkpoints"), 0);
	assert_int_equal(cJSON_GetObjectItem(c, "cosignatures")->valueint, 2);
	assert_int_equal(cJSON_GetObjectItem(c, "cosigners")->valueint, 2);
	assert_string_equal(cJSON_GetObjectItem(c, "signature")->valuestring,
	                    "ok");
	assert_true(
	        cJSON_IsTrue(cJSON_GetObjectItem(f->json, "checkpoints_ok")));
	/* one cosignature only, and a size below the tree here */
	leaves(f, "paloalto", 14, false);
	ckpt_note(f, &note, "paloalto", 12, &f->sign[0], both + 1);
	meta_put(f, "tlog/ckpt/paloalto", note.p, note.len);
	assert_int_equal(verify(f), 0);
	assert_true(has(&f->text, "tlog paloalto: checkpoint size=12 signed "
	                          "ok, cosignatures 1/2, root matches\n"));
	/* a site without a key: its checkpoint unchecked, not a failure */
	f->cfg.peers[1].verifier_key = NULL;
	leaves(f, "montreal", 4, false);
	ckpt_note(f, &note, "montreal", 4, &f->sign[2], NULL);
	meta_put(f, "tlog/ckpt/montreal", note.p, note.len);
	assert_int_equal(verify(f), 0);
	assert_true(has(&f->text, "tlog montreal: checkpoint size=4 signature "
	                          "unchecked (no key), cosignatures 0/2"));
	/* montreal's cosignature no longer counts, nor montreal */
	assert_true(has(&f->text, "tlog paloalto: checkpoint size=12 signed "
	                          "ok, cosignatures 0/1, root matches\n"));
	buf_free(&note);
}

static void test_wrong_root_and_key(void **state)
{
	struct fixture *f = *state;
	struct buf note = BUF_INIT;

	/* portland signed the tree of leaves that are not the ones here */
	leaves(f, "portland", 8, true);
	ckpt_note(f, &note, "portland", 8, &f->sign[1], NULL);
	fx_store_close(&f->s, NULL);
	assert_int_equal(fx_rmtree(f->dir), 0);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_tlogwit_verify", true),
	        0);
	assert_int_equal(fx_store_open(&f->s, NULL, f->dir, &f->cfg, seal_key),
	                 0);
	leaves(f, "portland", 8, false);
	meta_put(f, "tlog/ckpt/portland", note.p, note.len);
	assert_int_equal(verify(f), 1);
	assert_true(has(&f->text,
	                "tlog portland: checkpoint size=8 signed "
	                "ok, cosignatures 0/2, root mismatch (here "));
	assert_true(has(&f->why,
	                "checkpoint of site portland kept (size 8): "
	                "its root is not the root of the leaves here"));
	assert_false(
	        cJSON_IsTrue(cJSON_GetObjectItem(f->json, "checkpoints_ok")));
	/* the right tree, signed by a key of portland's name that is not
	 * the configured one */
	ckpt_note(f, &note, "portland", 8, &f->other, NULL);
	meta_put(f, "tlog/ckpt/portland", note.p, note.len);
	assert_int_equal(verify(f), 1);
	assert_true(has(&f->text, "tlog portland: checkpoint size=8 bad "
	                          "signature (not the origin's key), "
	                          "cosignatures 0/2, root matches\n"));
	assert_true(has(&f->why, "not signed by its origin's key"));
	/* the right key again: clean */
	ckpt_note(f, &note, "portland", 8, &f->sign[1], NULL);
	meta_put(f, "tlog/ckpt/portland", note.p, note.len);
	assert_int_equal(verify(f), 0);
	buf_free(&note);
}

static void test_wit_and_proof(void **state)
{
	struct fixture *f = *state;
	static const int mine[] = {0, -1};
	struct buf note = BUF_INIT, forked = BUF_INIT;
	struct tlogstore_table t = {NULL, NULL, "portland"};
	uint8_t wit[8 + TLOG_HASH_LEN] = {0};
	struct tlog_hash root;

	/* the forked tree's note, made while the store held it */
	leaves(f, "portland", 9, true);
	ckpt_note(f, &forked, "portland", 9, &f->sign[1], NULL);
	t.s = f->s;
	assert_int_equal(tlog_tree_hash(&root, 6, tlogstore_read, &t), 0);
	fx_store_close(&f->s, NULL);
	assert_int_equal(fx_rmtree(f->dir), 0);
	assert_int_equal(
	        fx_mkdtemp(f->dir, sizeof(f->dir), "test_tlogwit_verify", true),
	        0);
	assert_int_equal(fx_store_open(&f->s, NULL, f->dir, &f->cfg, seal_key),
	                 0);
	leaves(f, "portland", 9, false);
	ckpt_note(f, &note, "portland", 9, &f->sign[1], mine);
	meta_put(f, "tlog/ckpt/portland", note.p, note.len);
	assert_int_equal(verify(f), 0);
	/* this site cosigned portland's tree of 6 of another log */
	wit[7] = 6;
	memcpy(wit + 8, root.b, TLOG_HASH_LEN);
	meta_put(f, "tlog/wit/portland", wit, sizeof(wit));
	assert_int_equal(verify(f), 1);
	assert_true(has(&f->text, "last cosigned here inconsistent"));
	assert_true(has(&f->why, "not consistent with the last one cosigned"));
	/* ... of this log: consistent */
	t.s = f->s;
	assert_int_equal(tlog_tree_hash(&root, 6, tlogstore_read, &t), 0);
	memcpy(wit + 8, root.b, TLOG_HASH_LEN);
	meta_put(f, "tlog/wit/portland", wit, sizeof(wit));
	assert_int_equal(verify(f), 0);
	assert_true(has(&f->text, "cosignatures 1/2, root matches, last "
	                          "cosigned here consistent\n"));
	/* the forked checkpoint, refused and kept as proof: a failure */
	meta_put(f, "tlog/proof/portland/9", forked.p, forked.len);
	assert_int_equal(verify(f), 1);
	assert_true(has(&f->text, "tlog portland: fork proof size=9 signature "
	                          "ok, signed root "));
	assert_true(has(&f->why, "fork proof of site portland kept (size 9)"));
	assert_int_equal(
	        cJSON_GetArraySize(cJSON_GetObjectItem(f->json, "proofs")), 1);
	buf_free(&note);
	buf_free(&forked);
}

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_tlogwit_verify", LOG_LVL_ERROR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_good, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_wrong_root_and_key, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_wit_and_proof, setup,
	                                        teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
