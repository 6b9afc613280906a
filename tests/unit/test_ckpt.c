/*
 * test_ckpt.c: checkpoints and their witnesses (node/peers/ckpt.h).
 *
 * An origin's tree of leaves held in memory (tlog.h's table); the origin
 * signs checkpoints of it, a witness checks and cosigns them, and the
 * cosignature is opened as any client of C2SP tlog-cosignature would
 * (note_open with the witness's cosigner key).  Then each way a checkpoint
 * must be refused: another key, a forked tree, a smaller tree than the one
 * cosigned, one not consistent with it, more leaves than the witness
 * holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "ckpt.h"
#include "err.h"

#define NAME  "git.example.org/grantd/paloalto"
#define WNAME "git.example.org/grantd/portland"

struct table {
	struct tlog_hash h[128];
	size_t n;
	int64_t leaves;
};

static int
read_tab(struct tlog_hash *out, const int64_t *idx, size_t n, void *payload)
{
	const struct table *t = payload;

	for (size_t i = 0; i < n; i++) {
		if (idx[i] < 0 || (size_t)idx[i] >= t->n)
			return GD_EINVAL;
		out[i] = t->h[idx[i]];
	}
	return 0;
}

/* Grow t to n leaves "leaf I" (fork: leaf 3 reads "forked"). */
static void grow(struct table *t, int64_t n, bool fork)
{
	struct tlog_hash leaf, add[TLOG_MAX_STORED];
	char text[32];
	size_t nadd;

	for (int64_t i = t->leaves; i < n; i++) {
		snprintf(text, sizeof(text),
		         fork && i == 3 ? "forked\n" : "leaf %d\n", (int)i);
		tlog_leaf_hash(&leaf, text, strlen(text));
		assert_int_equal(
		        tlog_stored_hashes(add, &nadd, i, &leaf, read_tab, t),
		        0);
		memcpy(t->h + t->n, add, nadd * sizeof(*add));
		t->n += nadd;
	}
	t->leaves = n;
}

static void
key(struct note_skey *k, const char *name, uint8_t alg, uint8_t seed0)
{
	uint8_t seed[32] = {seed0};

	assert_int_equal(note_skey_from_seed(k, name, strlen(name), alg, seed),
	                 0);
}

static struct ckpt_tree tree_of(struct table *t)
{
	return (struct ckpt_tree){t->leaves, read_tab, t};
}

static void test_cosign_and_grow(void **state)
{
	struct table t = {0};
	struct note_skey origin, wit;
	struct note_vkey ov, wv;
	struct note_checkpoint cp;
	struct buf note = BUF_INIT, line = BUF_INIT, all = BUF_INIT;
	struct ckpt_last last = {0};
	struct ckpt_tree tr;
	struct note n;

	(void)state;
	key(&origin, NAME, NOTE_ALG_ED25519, 1);
	key(&wit, WNAME, NOTE_ALG_COSIG, 2);
	note_skey_vkey(&ov, &origin);
	note_skey_vkey(&wv, &wit);
	grow(&t, 10, false);
	tr = tree_of(&t);
	assert_int_equal(ckpt_make(&note, &origin, &tr), 0);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &ov, &tr,
	                              &last, &wit, 1764900000),
	                 CKPT_COSIGN);
	assert_int_equal(cp.size, 10);
	/* the cosigned note opens with the witness's key alone */
	buf_add(&all, note.p, note.len);
	buf_add(&all, line.p, line.len);
	assert_int_equal(note_open(&n, all.p, all.len, &wv, 1), 0);
	assert_int_equal(n.nverified, 1);
	assert_int_equal(n.sigs[n.nsigs - 1].timestamp, 1764900000);

	/* the same one again: nothing new */
	last = (struct ckpt_last){cp.size, cp.root};
	buf_reset(&line);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &ov, &tr,
	                              &last, &wit, 1764900001),
	                 CKPT_SEEN);
	/* grown: consistent with the last, cosigned */
	grow(&t, 37, false);
	tr = tree_of(&t);
	buf_reset(&note);
	assert_int_equal(ckpt_make(&note, &origin, &tr), 0);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &ov, &tr,
	                              &last, &wit, 1764900002),
	                 CKPT_COSIGN);
	assert_int_equal(cp.size, 37);
	/* the witness holds fewer leaves than the checkpoint's size */
	tr.size = 30;
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &ov, &tr,
	                              &last, &wit, 1764900003),
	                 CKPT_WAIT);
	buf_free(&note);
	buf_free(&line);
	buf_free(&all);
	note_skey_wipe(&origin);
	note_skey_wipe(&wit);
}

static void test_refusals(void **state)
{
	struct table t = {0}, forked = {0}, small = {0};
	struct note_skey origin, other, wit;
	struct note_vkey ov;
	struct note_checkpoint cp;
	struct buf note = BUF_INIT, line = BUF_INIT;
	struct ckpt_last last = {0};
	struct ckpt_tree tr, ftr, str;

	(void)state;
	key(&origin, NAME, NOTE_ALG_ED25519, 1);
	key(&other, NAME, NOTE_ALG_ED25519, 9); /* same name, another key */
	key(&wit, WNAME, NOTE_ALG_COSIG, 2);
	note_skey_vkey(&ov, &origin);
	grow(&t, 20, false);
	grow(&forked, 20, true);
	grow(&small, 12, false);
	tr = tree_of(&t), ftr = tree_of(&forked), str = tree_of(&small);

	assert_int_equal(ckpt_make(&note, &other, &tr), 0);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &ov, &tr,
	                              &last, &wit, 1),
	                 CKPT_BAD_SIG);
	assert_int_equal(
	        ckpt_witness(&cp, &line, "junk\n", 5, &ov, &tr, &last, &wit, 1),
	        CKPT_BAD_NOTE);
	/* the origin signs the tree of a forked log: not the leaves here */
	buf_reset(&note);
	assert_int_equal(ckpt_make(&note, &origin, &ftr), 0);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &ov, &tr,
	                              &last, &wit, 1),
	                 CKPT_WRONG_ROOT);
	assert_true(ckpt_verdict_proof(CKPT_WRONG_ROOT));
	/* smaller than the one cosigned */
	buf_reset(&note);
	assert_int_equal(ckpt_make(&note, &origin, &str), 0);
	last.size = 20;
	assert_int_equal(tlog_tree_hash(&last.root, 20, read_tab, &t), 0);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &ov, &tr,
	                              &last, &wit, 1),
	                 CKPT_INCONSISTENT);
	/* the last one cosigned was of another tree (the forked one): the
	 * honest tree of 20 is not consistent with it */
	grow(&t, 25, false);
	tr = tree_of(&t);
	buf_reset(&note);
	assert_int_equal(ckpt_make(&note, &origin, &tr), 0);
	assert_int_equal(tlog_tree_hash(&last.root, 20, read_tab, &forked), 0);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &ov, &tr,
	                              &last, &wit, 1),
	                 CKPT_INCONSISTENT);
	assert_int_equal(line.len, 0); /* nothing cosigned */
	buf_free(&note);
	buf_free(&line);
	note_skey_wipe(&origin);
	note_skey_wipe(&other);
	note_skey_wipe(&wit);
}

/* log verify's check of a kept note (ckpt_check): the origin's signature,
 * the root against the leaves here, the cosignatures counted per
 * cosigner, the last cosigned consistent with it. */
static void test_check_kept(void **state)
{
	struct table t = {0}, forked = {0};
	struct note_skey origin, w1, w1b, w2;
	struct note_vkey keys[5];
	struct buf note = BUF_INIT, line = BUF_INIT;
	struct ckpt_last none = {0}, wit = {0};
	struct note_checkpoint cp;
	struct ckpt_tree tr;
	struct ckpt_check c;

	(void)state;
	key(&origin, NAME, NOTE_ALG_ED25519, 1);
	key(&w1, WNAME, NOTE_ALG_COSIG, 2);
	key(&w2, "git.example.org/grantd/montreal", NOTE_ALG_COSIG, 3);
	key(&w1b, WNAME, NOTE_ALG_COSIG, 5); /* w1's key before a rotation */
	note_skey_vkey(&keys[0], &origin);
	note_skey_vkey(&keys[1], &w1);
	note_skey_vkey(&keys[2], &w2);
	grow(&t, 20, false);
	grow(&forked, 20, true);
	tr = tree_of(&t);

	/* good, then cosigned by both witnesses (one twice: counted once) */
	assert_int_equal(ckpt_make(&note, &origin, &tr), 0);
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 3, &tr, &none),
	                 0);
	assert_int_equal(c.sig, CKPT_SIG_OK);
	assert_int_equal(c.root, CKPT_ROOT_MATCH);
	assert_int_equal(c.cosigs, 0);
	assert_int_equal(c.wit, CKPT_WIT_NONE);
	assert_false(ckpt_check_failed(&c));
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &keys[0],
	                              &tr, &none, &w1, 10),
	                 CKPT_COSIGN);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &keys[0],
	                              &tr, &none, &w2, 11),
	                 CKPT_COSIGN);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &keys[0],
	                              &tr, &none, &w1, 12),
	                 CKPT_COSIGN);
	assert_int_equal(ckpt_witness(&cp, &line, note.p, note.len, &keys[0],
	                              &tr, &none, &w1b, 13),
	                 CKPT_COSIGN);
	buf_add(&note, line.p, line.len);
	buf_reset(&line);
	note_skey_vkey(&keys[4], &w1b);
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 5, &tr, &none),
	                 0);
	assert_int_equal(c.cosigs, 2); /* w1 signed with both its keys */
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 3, &tr, &none),
	                 0);
	assert_int_equal(c.sig, CKPT_SIG_OK);
	assert_int_equal(c.cosigs, 2);
	/* a cosigner whose key is not given is not counted */
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 2, &tr, &none),
	                 0);
	assert_int_equal(c.cosigs, 1);
	/* no key of the origin: unchecked, not a failure */
	assert_int_equal(
	        ckpt_check(&c, note.p, note.len, keys + 1, 2, &tr, &none), 0);
	assert_int_equal(c.sig, CKPT_SIG_NO_KEY);
	assert_false(ckpt_check_failed(&c));
	/* the last cosigned here: a smaller tree of this log, consistent;
	 * one of the forked log, not */
	wit.size = 12;
	assert_int_equal(tlog_tree_hash(&wit.root, 12, read_tab, &t), 0);
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 3, &tr, &wit),
	                 0);
	assert_int_equal(c.wit, CKPT_WIT_CONSISTENT);
	assert_int_equal(tlog_tree_hash(&wit.root, 12, read_tab, &forked), 0);
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 3, &tr, &wit),
	                 0);
	assert_int_equal(c.wit, CKPT_WIT_INCONSISTENT);
	assert_true(ckpt_check_failed(&c));
	/* the leaves here are fewer than its size: ahead, not a failure */
	tr.size = 15;
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 3, &tr, &none),
	                 0);
	assert_int_equal(c.root, CKPT_ROOT_AHEAD);
	assert_false(ckpt_check_failed(&c));
	tr.size = 20;

	buf_free(&note);
	buf_free(&line);
	note_skey_wipe(&origin);
	note_skey_wipe(&w1);
	note_skey_wipe(&w1b);
	note_skey_wipe(&w2);
}

/* ckpt_check's failures: a wrong root, another key, a known key that is
 * not the origin's, not a note. */
static void test_check_kept_fails(void **state)
{
	struct table t = {0}, forked = {0};
	struct note_skey origin, other;
	struct note_vkey keys[2];
	struct buf note = BUF_INIT, line = BUF_INIT;
	struct ckpt_last none = {0};
	struct note_checkpoint cp;
	struct ckpt_tree tr, ftr;
	struct ckpt_check c;

	(void)state;
	key(&origin, NAME, NOTE_ALG_ED25519, 1);
	key(&other, NAME, NOTE_ALG_ED25519, 9);
	note_skey_vkey(&keys[0], &origin);
	grow(&t, 20, false);
	grow(&forked, 20, true);
	tr = tree_of(&t), ftr = tree_of(&forked);

	/* a wrong root: the origin's signature on the forked tree */
	buf_reset(&note);
	assert_int_equal(ckpt_make(&note, &origin, &ftr), 0);
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 1, &tr, &none),
	                 0);
	assert_int_equal(c.sig, CKPT_SIG_OK);
	assert_int_equal(c.root, CKPT_ROOT_MISMATCH);
	assert_true(ckpt_check_failed(&c));
	/* signed by another key of the same name */
	buf_reset(&note);
	assert_int_equal(ckpt_make(&note, &other, &tr), 0);
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 1, &tr, &none),
	                 0);
	assert_int_equal(c.sig, CKPT_SIG_BAD);
	assert_true(ckpt_check_failed(&c));
	/* a checkpoint of the origin's log signed by a witness's signing
	 * key (a known key, but not the origin's) */
	buf_reset(&note);
	key(&other, WNAME, NOTE_ALG_ED25519, 2);
	note_skey_vkey(&keys[1], &other);
	assert_int_equal(tlog_tree_hash(&cp.root, 20, read_tab, &t), 0);
	assert_int_equal(
	        note_checkpoint_format(&line, NAME, strlen(NAME), 20, &cp.root),
	        0);
	assert_int_equal(note_sign(&note, line.p, line.len, &other, 0), 0);
	assert_int_equal(ckpt_check(&c, note.p, note.len, keys, 2, &tr, &none),
	                 0);
	assert_int_equal(c.root, CKPT_ROOT_MATCH);
	assert_int_equal(c.sig, CKPT_SIG_BAD);
	/* not a note */
	assert_int_equal(ckpt_check(&c, "junk\n", 5, keys, 1, &tr, &none), 0);
	assert_int_equal(c.sig, CKPT_SIG_MALFORMED);
	assert_true(ckpt_check_failed(&c));
	buf_free(&note);
	buf_free(&line);
	note_skey_wipe(&origin);
	note_skey_wipe(&other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_cosign_and_grow),
	        cmocka_unit_test(test_refusals),
	        cmocka_unit_test(test_check_kept),
	        cmocka_unit_test(test_check_kept_fails),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
