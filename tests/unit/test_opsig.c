/*
 * test_opsig.c: signed operations (common/opsig.h).
 *
 * The key's verifier form is checked against Go's signed-note package
 * (golang.org/x/mod/sumdb/note, note_test.go: the key pair of
 * "PeterNeumann", whose private form holds the Ed25519 seed): the same
 * seed must give the same NAME+HEXID+BASE64.  Batches of 1 to 40
 * operations are signed, and each operation checked alone; every part of
 * a signature that is wrong, missing or out of bounds is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "err.h"
#include "opsig.h"
#include "tlog.h"

/* The verifier key of a site, as grantctl log key prints it: a signed-note
 * key (note.h, whose tests hold Go's vectors) that note_vkey_parse takes,
 * named HOST/grantd/SITE, with the key the signer signs with. */
static void test_vkey(void **state)
{
	struct opsig_signer s;
	struct note_vkey k;
	struct buf out = BUF_INIT;
	uint8_t curve[32] = {9};

	(void)state;
	assert_int_equal(
	        opsig_signer_init(&s, curve, "git.example.org/grantd/pdx"), 0);
	opsig_signer_vkey(&out, &s);
	assert_int_equal(note_vkey_parse(&k, out.p, out.len), 0);
	assert_string_equal(k.name, "git.example.org/grantd/pdx");
	assert_int_equal(k.alg, NOTE_ALG_ED25519);
	assert_memory_equal(k.pub, s.key.pub, OPSIG_PUB_LEN);
	/* the same secret, the same key; another, another */
	struct opsig_signer t;
	assert_int_equal(
	        opsig_signer_init(&t, curve, "git.example.org/grantd/pdx"), 0);
	assert_memory_equal(t.key.pub, s.key.pub, OPSIG_PUB_LEN);
	curve[0] = 10;
	assert_int_equal(
	        opsig_signer_init(&t, curve, "git.example.org/grantd/pdx"), 0);
	assert_memory_not_equal(t.key.pub, s.key.pub, OPSIG_PUB_LEN);
	assert_int_equal(opsig_signer_init(&t, curve, "a b"), GD_EINVAL);
	opsig_signer_wipe(&s);
	opsig_signer_wipe(&t);
	buf_free(&out);
}

static void test_key_name(void **state)
{
	char name[NOTE_NAME_MAX + 1];

	(void)state;
	assert_int_equal(opsig_key_name(name, "git.example.org", "paloalto"),
	                 0);
	assert_string_equal(name, "git.example.org/grantd/paloalto");
	assert_int_equal(opsig_key_name(name, "git@git.example.org", "pdx"), 0);
	assert_string_equal(name, "git.example.org/grantd/pdx");
	assert_int_equal(opsig_key_name(name, NULL, "mtl"), 0);
	assert_string_equal(name, "localhost/grantd/mtl");
	assert_int_equal(opsig_key_name(name, "a b", "mtl"), GD_EINVAL);
}

/* A signer from a fixed CURVE secret. */
static void signer(struct opsig_signer *s, uint8_t fill, const char *site)
{
	uint8_t curve[32];
	char name[NOTE_NAME_MAX + 1];

	memset(curve, fill, sizeof(curve));
	assert_int_equal(opsig_key_name(name, "git.example.org", site), 0);
	assert_int_equal(opsig_signer_init(s, curve, name), 0);
}

/* n packed operations of origin, seq 1..n, each a User "uI". */
static struct buf *make_ops(const char *origin, size_t n)
{
	struct buf *b = calloc(n, sizeof(*b));

	assert_non_null(b);
	for (size_t i = 0; i < n; i++) {
		Grantd__V1__Op op = GRANTD__V1__OP__INIT;
		Grantd__V1__User u = GRANTD__V1__USER__INIT;
		char name[32];
		size_t len;

		snprintf(name, sizeof(name), "u%zu", i);
		u.name = name;
		op.origin = (char *)origin;
		op.epoch = 7, op.has_epoch = 1;
		op.seq = i + 1, op.has_seq = 1;
		op.hlc = 1000 + i, op.has_hlc = 1;
		op.body_case = GRANTD__V1__OP__BODY_USER;
		op.user = &u;
		len = grantd__v1__op__get_packed_size(&op);
		grantd__v1__op__pack(&op, buf_extend(&b[i], len));
	}
	return b;
}

static void free_ops(struct buf *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf_free(&b[i]);
	free(b);
}

static Grantd__V1__Op *decode(const struct buf *b)
{
	Grantd__V1__Op *op =
	        grantd__v1__op__unpack(NULL, b->len, (const uint8_t *)b->p);

	assert_non_null(op);
	return op;
}

static enum opsig_verdict check(struct opsig_verifier *v, const struct buf *b)
{
	Grantd__V1__Op *op = decode(b);
	enum opsig_verdict d = opsig_verify(v, op, NULL);

	grantd__v1__op__free_unpacked(op, NULL);
	return d;
}

/* Sign b[0..n) as one batch after the batch whose chain value is chain
 * (set to this one's). */
static void sign_after(const struct opsig_signer *s,
                       uint8_t chain[OPSIG_HASH_LEN],
                       struct buf *b,
                       size_t n)
{
	struct buf **p = calloc(n, sizeof(*p));

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = &b[i];
	assert_int_equal(opsig_sign_batch(s, chain, p, n), 0);
	free(p);
}

/* Sign b[0..n) as a signer's first batch. */
static void sign_all(const struct opsig_signer *s, struct buf *b, size_t n)
{
	uint8_t chain[OPSIG_HASH_LEN] = {0};

	sign_after(s, chain, b, n);
}

static void test_batches(void **state)
{
	struct opsig_signer pa;
	struct opsig_verifier v;

	(void)state;
	signer(&pa, 1, "paloalto");
	for (size_t n = 1; n <= 40; n++) {
		struct buf *b = make_ops("paloalto", n);
		opsig_verifier_init(&v);
		assert_int_equal(opsig_verifier_add(&v, "paloalto", pa.key.pub),
		                 0);
		sign_all(&pa, b, n);
		for (size_t i = 0; i < n; i++) {
			/* decoding and packing again gives the bytes signed */
			Grantd__V1__Op *op = decode(&b[i]);
			uint8_t again[4096];
			size_t len = grantd__v1__op__pack(op, again);
			assert_int_equal(len, b[i].len);
			assert_memory_equal(again, b[i].p, len);
			assert_int_equal(op->sig->count, n);
			assert_int_equal(op->sig->index, i);
			grantd__v1__op__free_unpacked(op, NULL);
			assert_int_equal(check(&v, &b[i]), OPSIG_OK);
		}
		/* one Ed25519 check per batch: the others hit the cache */
		assert_int_equal(v.verifies, 1);
		assert_int_equal(v.cache_hits, n - 1);
		free_ops(b, n);
	}
	opsig_signer_wipe(&pa);
}

/* Ops b (one decoded each) of k batches, checked as one run. */
static void check_run(struct opsig_verifier *v,
                      const struct buf *b,
                      size_t n,
                      enum opsig_verdict *d)
{
	Grantd__V1__Op **ops = calloc(n, sizeof(*ops));

	assert_non_null(ops);
	for (size_t i = 0; i < n; i++)
		ops[i] = decode(&b[i]);
	opsig_verify_run(v, (const Grantd__V1__Op *const *)ops, n, d);
	for (size_t i = 0; i < n; i++)
		grantd__v1__op__free_unpacked(ops[i], NULL);
	free(ops);
}

/* The chain: 30 batches of 3 signed one after the other, checked newest
 * first, cost one Ed25519 check; checked oldest first, one per batch.  A
 * batch not in the chain (signed after a restart, or another origin's
 * prev) is checked on its own; a forged batch whose chain value is no
 * checked batch's prev is refused. */
static void test_chain(void **state)
{
	enum { BATCHES = 30, PER = 3, N = BATCHES * PER };
	struct opsig_signer pa, mtl;
	struct opsig_verifier v;
	uint8_t chain[OPSIG_HASH_LEN] = {0}, other[OPSIG_HASH_LEN] = {0};
	struct buf *b = make_ops("paloalto", N), *f = make_ops("paloalto", 1);
	enum opsig_verdict d[N];

	(void)state;
	signer(&pa, 1, "paloalto");
	signer(&mtl, 2, "montreal");
	for (size_t k = 0; k < BATCHES; k++)
		sign_after(&pa, chain, b + k * PER, PER);
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "paloalto", pa.key.pub), 0);
	check_run(&v, b, N, d);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(d[i], OPSIG_OK);
	assert_int_equal(v.verifies, 1);
	assert_int_equal(v.cache_hits, N - 1);
	/* applied in order afterwards: hashes only */
	for (size_t i = 0; i < N; i++)
		assert_int_equal(check(&v, &b[i]), OPSIG_OK);
	assert_int_equal(v.verifies, 1);

	/* oldest first: each batch on its own */
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "paloalto", pa.key.pub), 0);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(check(&v, &b[i]), OPSIG_OK);
	assert_int_equal(v.verifies, BATCHES);

	/* montreal signs a batch "of paloalto" whose prev is paloalto's
	 * real chain value: refused, however the chain vouches for prev */
	sign_after(&mtl, other, f, 1);
	assert_int_equal(check(&v, &f[0]), OPSIG_BAD);
	/* a batch signed by paloalto after a restart (prev zeros) is not in
	 * the chain but checks on its own */
	free_ops(f, 1);
	f = make_ops("paloalto", 1);
	memset(other, 0, sizeof(other));
	sign_after(&pa, other, f, 1);
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "paloalto", pa.key.pub), 0);
	assert_int_equal(check(&v, &f[0]), OPSIG_OK);
	assert_int_equal(v.verifies, 1);
	free_ops(f, 1);
	free_ops(b, N);
	opsig_signer_wipe(&pa);
	opsig_signer_wipe(&mtl);
}

/* Every byte of a signed operation flipped in turn: refused, or (a byte
 * of the signature the protobuf framing no longer finds) undecodable. */
static void test_every_byte(void **state)
{
	struct opsig_signer pa;
	struct opsig_verifier v;
	struct buf *b = make_ops("paloalto", 5);

	(void)state;
	signer(&pa, 1, "paloalto");
	sign_all(&pa, b, 5);
	for (size_t at = 0; at < b[3].len; at++) {
		Grantd__V1__Op *op;
		b[3].p[at] ^= 0x01;
		op = grantd__v1__op__unpack(NULL, b[3].len,
		                            (const uint8_t *)b[3].p);
		if (op) {
			opsig_verifier_init(&v);
			assert_int_equal(
			        opsig_verifier_add(&v, "paloalto", pa.key.pub),
			        0);
			/* a flipped origin has no key here: not checked */
			if (opsig_verify(&v, op, NULL) == OPSIG_OK)
				fail_msg("byte %zu flipped: still signed", at);
			grantd__v1__op__free_unpacked(op, NULL);
		}
		b[3].p[at] ^= 0x01;
	}
	free_ops(b, 5);
	opsig_signer_wipe(&pa);
}

/* op with its signature changed by edit, checked. */
static enum opsig_verdict edited(struct opsig_verifier *v,
                                 const struct buf *b,
                                 void (*edit)(Grantd__V1__OpSig *m))
{
	Grantd__V1__Op *op = decode(b);
	size_t np = op->sig->n_path;
	enum opsig_verdict d;

	edit(op->sig);
	d = opsig_verify(v, op, NULL);
	op->sig->n_path = np; /* what protobuf-c frees */
	grantd__v1__op__free_unpacked(op, NULL);
	return d;
}

static void index_past(Grantd__V1__OpSig *m)
{
	m->index = m->count;
}
static void count_zero(Grantd__V1__OpSig *m)
{
	m->count = 0;
}
static void count_big(Grantd__V1__OpSig *m)
{
	m->count = OPSIG_MAX_BATCH + 1;
}
static void path_short(Grantd__V1__OpSig *m)
{
	m->n_path--;
}
static void no_root(Grantd__V1__OpSig *m)
{
	m->has_root = 0;
}
static void root_flip(Grantd__V1__OpSig *m)
{
	m->root.data[3] ^= 4;
}
static void hash_short(Grantd__V1__OpSig *m)
{
	m->path[0].len--;
}
static void sig_short(Grantd__V1__OpSig *m)
{
	m->sig.len--;
}
static void no_index(Grantd__V1__OpSig *m)
{
	m->has_index = 0;
}
static void other_index(Grantd__V1__OpSig *m)
{
	m->index ^= 1;
}
static void sig_flip(Grantd__V1__OpSig *m)
{
	m->sig.data[5] ^= 0x20;
}
static void path_flip(Grantd__V1__OpSig *m)
{
	m->path[1].data[0] ^= 1;
}
static void no_prev(Grantd__V1__OpSig *m)
{
	m->has_prev = 0;
}
static void prev_flip(Grantd__V1__OpSig *m)
{
	m->prev.data[7] ^= 1;
}

static void test_refusals(void **state)
{
	static const struct {
		void (*edit)(Grantd__V1__OpSig *m);
		enum opsig_verdict want;
		const char *what;
	} edits[] = {
	        {index_past, OPSIG_MALFORMED, "index at count"},
	        {count_zero, OPSIG_MALFORMED, "count 0"},
	        {count_big, OPSIG_MALFORMED, "count over the limit"},
	        {path_short, OPSIG_BAD, "a hash of the path missing"},
	        {no_root, OPSIG_MALFORMED, "no root"},
	        {root_flip, OPSIG_BAD, "a bit of the root"},
	        {hash_short, OPSIG_MALFORMED, "a path hash of 31 bytes"},
	        {sig_short, OPSIG_MALFORMED, "a signature of 63 bytes"},
	        {no_index, OPSIG_MALFORMED, "no index"},
	        {other_index, OPSIG_BAD, "another index (another root)"},
	        {sig_flip, OPSIG_BAD, "a bit of the signature"},
	        {path_flip, OPSIG_BAD, "a bit of the path"},
	        {no_prev, OPSIG_MALFORMED, "no prev"},
	        {prev_flip, OPSIG_BAD, "a bit of prev"},
	};
	struct opsig_signer pa, mtl;
	struct opsig_verifier v;
	struct buf *b = make_ops("paloalto", 5), *m = make_ops("paloalto", 2);
	struct buf *u = make_ops("paloalto", 1), *x = make_ops("seattle", 1);
	struct buf why = BUF_INIT;
	Grantd__V1__Op *op;

	(void)state;
	signer(&pa, 1, "paloalto");
	signer(&mtl, 2, "montreal");
	sign_all(&pa, b, 5);
	sign_all(&mtl, m, 2); /* montreal signs operations of paloalto */
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "paloalto", pa.key.pub), 0);
	assert_int_equal(opsig_verifier_add(&v, "montreal", mtl.key.pub), 0);

	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		/* a fresh verifier: no root of this batch remembered */
		struct opsig_verifier w = v;
		memset(w.cache, 0, sizeof(w.cache));
		enum opsig_verdict d = edited(&w, &b[2], edits[i].edit);
		if (d != edits[i].want)
			fail_msg("%s: %s, want %s", edits[i].what,
			         opsig_verdict_text(d),
			         opsig_verdict_text(edits[i].want));
	}
	assert_int_equal(check(&v, &m[0]), OPSIG_BAD);
	assert_int_equal(check(&v, &m[1]), OPSIG_BAD);
	assert_int_equal(check(&v, &u[0]), OPSIG_MISSING);
	assert_int_equal(check(&v, &x[0]), OPSIG_NO_KEY);
	assert_false(opsig_verifier_has(&v, "seattle"));
	assert_true(opsig_verifier_has(&v, "montreal"));

	op = decode(&m[0]);
	assert_int_equal(opsig_verify(&v, op, &why), OPSIG_BAD);
	assert_string_equal(why.p, "bad signature (origin paloalto)");
	grantd__v1__op__free_unpacked(op, NULL);
	/* a batch checked once is not taken for another key's */
	assert_int_equal(check(&v, &b[0]), OPSIG_OK);
	buf_free(&why);
	free_ops(b, 5);
	free_ops(m, 2);
	free_ops(u, 1);
	free_ops(x, 1);
	opsig_signer_wipe(&pa);
	opsig_signer_wipe(&mtl);
}

/* After a rotation a peer lists its new key and its old one: operations
 * signed by either pass, by a third key not. */
static void test_keys_rotated(void **state)
{
	struct opsig_signer old, cur, third;
	struct opsig_verifier v;
	/* batches of other sizes, so other roots (a root checked once is
	 * taken again without its signature: its content is proved) */
	struct buf *a = make_ops("paloalto", 2), *b = make_ops("paloalto", 3);
	struct buf *c = make_ops("paloalto", 4);

	(void)state;
	signer(&old, 1, "paloalto");
	signer(&cur, 3, "paloalto");
	signer(&third, 4, "paloalto");
	sign_all(&old, a, 2);
	sign_all(&cur, b, 3);
	sign_all(&third, c, 4);
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "paloalto", cur.key.pub), 0);
	assert_int_equal(opsig_verifier_add(&v, "paloalto", old.key.pub), 0);
	assert_int_equal(opsig_verifier_add(&v, "paloalto", old.key.pub), 0);
	assert_int_equal(v.nkeys, 2); /* the same key twice is one */
	assert_int_equal(check(&v, &a[1]), OPSIG_OK);
	assert_int_equal(check(&v, &b[0]), OPSIG_OK);
	assert_int_equal(check(&v, &c[0]), OPSIG_BAD);
	free_ops(a, 2);
	free_ops(b, 3);
	free_ops(c, 4);
	opsig_signer_wipe(&old);
	opsig_signer_wipe(&cur);
	opsig_signer_wipe(&third);
}

/* The log's compact form: for batches of 1 to 40, each operation logged
 * compact (index and count; the path read from the record's table) and a
 * peer's operation compacted (its path kept, no table) expand to the very
 * bytes sent, which verify; a record of another batch, or one without a
 * table for an op without a path, is refused. */
static void test_compact(void **state)
{
	struct opsig_signer pa;
	struct opsig_verifier v;
	uint8_t chain[OPSIG_HASH_LEN] = {0};

	(void)state;
	signer(&pa, 1, "paloalto");
	opsig_verifier_init(&v);
	assert_int_equal(opsig_verifier_add(&v, "paloalto", pa.key.pub), 0);
	for (size_t n = 1; n <= 40; n++) {
		struct buf *b = make_ops("paloalto", n);
		struct buf *lg = calloc(n, sizeof(*lg));
		struct buf **p = calloc(n, sizeof(*p)), **l = calloc(n, sizeof(*l));
		struct buf rec = BUF_INIT, other = BUF_INIT, out = BUF_INIT;
		struct buf packed = BUF_INIT, prec = BUF_INIT;
		uint64_t last;

		assert_true(lg && p && l);
		for (size_t i = 0; i < n; i++)
			p[i] = &b[i], l[i] = &lg[i];
		assert_int_equal(opsig_sign_batch_logged(&pa, chain, p, n, l,
		                                         &rec),
		                 0);
		assert_int_equal(rec.len,
		                 OPSIG_REC_HEAD + 32 * (size_t)tlog_stored_count(
		                                               (int64_t)n));
		for (size_t i = 0; i < n; i++) {
			uint64_t seq = i + 1; /* make_ops' */
			/* whole: not compact */
			assert_int_equal(opsig_compact_last((uint8_t *)b[i].p,
			                                    b[i].len, seq, &last),
			                 0);
			assert_int_equal(opsig_compact_last((uint8_t *)lg[i].p,
			                                    lg[i].len, seq, &last),
			                 1);
			assert_int_equal(last, n);
			assert_true(lg[i].len < b[i].len);
			buf_reset(&out);
			assert_int_equal(opsig_expand(&out, (uint8_t *)lg[i].p,
			                              lg[i].len, seq,
			                              (uint8_t *)rec.p, rec.len),
			                 0);
			assert_int_equal(out.len, b[i].len);
			assert_memory_equal(out.p, b[i].p, out.len);
			assert_int_equal(check(&v, &out), OPSIG_OK);

			/* as a peer logs it: path kept, a record of the
			 * head only */
			Grantd__V1__Op *op = decode(&b[i]);
			assert_int_equal(opsig_compact(&packed, &prec, &last, op),
			                 0);
			assert_int_equal(last, n);
			assert_int_equal(prec.len, OPSIG_REC_HEAD);
			assert_memory_equal(prec.p, rec.p, OPSIG_REC_HEAD);
			buf_reset(&out);
			assert_int_equal(opsig_expand(&out, (uint8_t *)packed.p,
			                              packed.len, seq,
			                              (uint8_t *)prec.p,
			                              prec.len),
			                 0);
			assert_int_equal(out.len, b[i].len);
			assert_memory_equal(out.p, b[i].p, out.len);
			grantd__v1__op__free_unpacked(op, NULL);

			/* refused: the op whole, a record of another count,
			 * no table for an op without a path */
			assert_int_equal(opsig_expand(&out, (uint8_t *)b[i].p,
			                              b[i].len, seq,
			                              (uint8_t *)rec.p, rec.len),
			                 GD_EPROTO);
			buf_reset(&other);
			buf_add(&other, rec.p, rec.len);
			other.p[4] ^= 1;
			assert_int_equal(opsig_expand(&out, (uint8_t *)lg[i].p,
			                              lg[i].len, seq,
			                              (uint8_t *)other.p,
			                              other.len),
			                 GD_EPROTO);
			if (n > 1)
				assert_int_equal(
				        opsig_expand(&out, (uint8_t *)lg[i].p,
				                     lg[i].len, seq,
				                     (uint8_t *)prec.p, prec.len),
				        GD_EPROTO);
		}
		for (size_t i = 0; i < n; i++)
			buf_free(&lg[i]);
		free(lg), free(p), free(l);
		buf_free(&rec), buf_free(&other), buf_free(&out);
		buf_free(&packed), buf_free(&prec);
		free_ops(b, n);
	}
	opsig_signer_wipe(&pa);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_vkey),
	        cmocka_unit_test(test_key_name),
	        cmocka_unit_test(test_batches),
	        cmocka_unit_test(test_compact),
	        cmocka_unit_test(test_chain),
	        cmocka_unit_test(test_every_byte),
	        cmocka_unit_test(test_refusals),
	        cmocka_unit_test(test_keys_rotated),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
