/*
 * test_note.c: common/note.h: C2SP signed-note keys, signing and opening,
 * tlog-checkpoint texts, tlog-cosignature cosignature/v1.
 *
 * Independent answers: the keys, notes and signatures of Go's
 * golang.org/x/mod/sumdb/note note_test.go (TestNewVerifier, TestNewSigner,
 * TestSign, TestOpen), the example of C2SP signed-note.md and the bodies of
 * tlog-cosignature.md / tlog-checkpoint.md.  Neither C2SP nor Go's note
 * package gives a cosignature with its public key, so the cosignature
 * vector (COSIG_*) was derived by hand from the tlog-cosignature text with
 * Python's hashlib and the `cryptography` package (not libsodium):
 * seed = bytes 1..32, name "witness.example/w1", key id =
 * sha256(name + b"\n" + b"\x04" + pub)[:4], time 1679315147, message =
 * b"cosignature/v1\ntime 1679315147\n" + SOFA, signature line = "— " +
 * name + " " + b64(key id + time as 8 bytes big-endian + Ed25519 sig).
 * The log key LOG_* (alg 0x01, seed bytes 33..64) likewise.
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
#include "note.h"

/* note_test.go */
#define PETER_VKEY \
	"PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
#define PETER_SKEY                                                           \
	"PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx0" \
	"9iUvxdXHKDFz"
#define ENOCH_VKEY \
	"EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
#define TEXT                                                         \
	"If you think cryptography is the answer to your problem,\n" \
	"then you don't know what your problem is.\n"
#define PETER_SIG                                                                \
	"— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1" \
	"FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
#define ENOCH_SIG                                                              \
	"— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+v" \
	"AF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"

/* signed-note.md's example */
#define FOO_VKEY       \
	"example.com/" \
	"foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
#define FOO_NOTE                                                                \
	"This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2V" \
	"YRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72"    \
	"IneyaQM=\n"
#define QUASIMODO                                                             \
	"Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di "     \
	"sole:\n\ned è subito sera.\n\n— quasimodo.example/salvatore Nnug" \
	"SzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMouFSQU0xMcX"   \
	"xj99ihAQwaqP3ZekRwNtIc=\n"

/* tlog-cosignature.md's checkpoint body, and keys and signatures derived
 * by hand (see the top) */
#define SOFA                                      \
	"example.com/behind-the-sofa\n20852163\n" \
	"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
#define COSIG_VKEY         \
	"witness.example/" \
	"w1+468d99bb+BHm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk"
#define COSIG_LINE                                                              \
	"— witness.example/w1 Ro2ZuwAAAABkGFDLQB2dbiQ7rPMIDjq/twq5Ixt42T+awj" \
	"iYS4+fxrnLnI31x5abVjZlhDVvZAcRRLyAiG4oQlhTgi4DsxiPwiDaDg==\n"
#define COSIG_TIME 1679315147
#define LOG_VKEY                                             \
	"example.com/behind-the-sofa+301296c0+AefxYqEL7FWa/" \
	"qGV5NzoS2lWjV0ssJY+tEbAaF4rF/Lw"
#define LOG_SKEY                                                              \
	"PRIVATE+KEY+example.com/behind-the-sofa+301296c0+ASEiIyQlJicoKSorLC" \
	"0uLzAxMjM0NTY3ODk6Ozw9Pj9A"
#define LOG_SIG                                                                 \
	"— example.com/behind-the-sofa MBKWwLNySUxJDFip0/UypWouC1ljW5TF7QKWq" \
	"QF/xL2oWR8h0Y9UW1S9/VVm+rgnPFgY2g9eznMnJK21IH9dIMJFrw0=\n"

static int vkey(struct note_vkey *k, const char *s)
{
	return note_vkey_parse(k, s, strlen(s));
}

static int
open_s(struct note *n, const char *msg, const struct note_vkey *k, size_t nk)
{
	return note_open(n, msg, strlen(msg), k, nk);
}

/* Go's TestNewVerifier: the key, every substring and every byte + 1. */
static void test_vkey(void **state)
{
	char b[] = PETER_VKEY;
	size_t len = strlen(b);
	struct note_vkey k;
	struct buf out = BUF_INIT;

	(void)state;
	assert_int_equal(vkey(&k, PETER_VKEY), 0);
	assert_string_equal(k.name, "PeterNeumann");
	assert_int_equal(k.id, 0xc74f20a3);
	assert_int_equal(k.alg, NOTE_ALG_ED25519);
	note_vkey_format(&out, &k);
	assert_string_equal(out.p, PETER_VKEY);
	for (size_t i = 0; i <= len; i++)
		for (size_t j = i + 1; j <= len; j++)
			if (i != 0 || j != len)
				assert_int_equal(
				        note_vkey_parse(&k, b + i, j - i),
				        GD_EINVAL);
	for (size_t i = 0; i < len; i++) {
		b[i]++;
		assert_int_equal(vkey(&k, b), GD_EINVAL);
		b[i]--;
	}
	/* wrong key length, unknown algorithm (ids adjusted: Go's) */
	assert_int_equal(vkey(&k,
	                      "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqi"
	                      "BfsVkmqq/LDE4izWy10TWBADKEY=="),
	                 GD_EINVAL);
	assert_int_equal(vkey(&k,
	                      "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqi"
	                      "BfsVkmqq/LDE4izWy10TW"),
	                 GD_EINVAL);
	/* upper-case hex is not how C2SP spells an id */
	assert_int_equal(vkey(&k,
	                      "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqi"
	                      "BfsVkmqq/LDE4izWy10TW"),
	                 GD_EINVAL);
	assert_int_equal(vkey(&k, FOO_VKEY), 0);
	assert_int_equal(vkey(&k, COSIG_VKEY), 0);
	assert_int_equal(k.alg, NOTE_ALG_COSIG);
	assert_int_equal(k.id, 0x468d99bb);
	buf_free(&out);
}

/* Go's TestNewSigner, and the signer's verifier key is Peter's. */
static void test_skey(void **state)
{
	char b[] = PETER_SKEY;
	size_t len = strlen(b);
	struct note_skey sk;
	struct note_vkey vk;
	struct buf out = BUF_INIT;

	(void)state;
	assert_int_equal(note_skey_parse(&sk, b, len), 0);
	note_skey_vkey(&vk, &sk);
	note_vkey_format(&out, &vk);
	assert_string_equal(out.p, PETER_VKEY);
	buf_reset(&out);
	note_skey_format(&out, &sk);
	assert_string_equal(out.p, PETER_SKEY);
	for (size_t i = 0; i <= len; i++)
		for (size_t j = i + 1; j <= len; j++)
			if (i != 0 || j != len)
				assert_int_equal(
				        note_skey_parse(&sk, b + i, j - i),
				        GD_EINVAL);
	for (size_t i = 0; i < len; i++) {
		b[i]++;
		assert_int_equal(note_skey_parse(&sk, b, len), GD_EINVAL);
		b[i]--;
	}
	note_skey_wipe(&sk);
	buf_free(&out);
}

/* Go's TestSign: Ed25519 is deterministic, so the line is known. */
static void test_sign(void **state)
{
	struct note_skey sk;
	struct buf out = BUF_INIT;

	(void)state;
	assert_int_equal(note_skey_parse(&sk, PETER_SKEY, strlen(PETER_SKEY)),
	                 0);
	assert_int_equal(note_sign(&out, TEXT, strlen(TEXT), &sk, 0), 0);
	assert_string_equal(out.p, TEXT "\n" PETER_SIG);
	buf_reset(&out);
	assert_int_equal(note_sign(&out, "abc", 3, &sk, 0), GD_EINVAL);
	assert_int_equal(note_sign(&out, "a\x01\n", 3, &sk, 0), GD_EINVAL);
	assert_int_equal(note_sign(&out, "\xff\n", 2, &sk, 0), GD_EINVAL);
	assert_int_equal(out.len, 0);
	assert_int_equal(note_sign_line(&out, "", 0, &sk, 0), GD_EINVAL);
	/* a name Go's note package refuses: "bad name" */
	assert_int_equal(note_skey_from_seed(&sk, "bad name", 8,
	                                     NOTE_ALG_ED25519, sk.sk),
	                 GD_EINVAL);
	note_skey_wipe(&sk);
	buf_free(&out);
}

/* Go's TestOpen, case by case. */
static void test_open_go(void **state)
{
	struct note_vkey k[3];
	struct note n;
	char *msg = malloc(101 * sizeof(PETER_SIG) + sizeof(TEXT) + 8);
	char bad[512];

	(void)state;
	assert_int_equal(vkey(&k[0], PETER_VKEY), 0);
	assert_int_equal(vkey(&k[1], ENOCH_VKEY), 0);
	k[2] = k[1];
	/* one verified, one unknown */
	assert_int_equal(open_s(&n, TEXT "\n" PETER_SIG ENOCH_SIG, k, 1), 0);
	assert_int_equal(n.text_len, strlen(TEXT));
	assert_memory_equal(n.text, TEXT, n.text_len);
	assert_int_equal(n.nsigs, 2);
	assert_int_equal(n.nverified, 1);
	assert_int_equal(n.sigs[0].key, 0);
	assert_int_equal(n.sigs[0].id, 0xc74f20a3);
	assert_int_equal(n.sigs[1].key, -1);
	assert_int_equal(n.sigs[1].id, 0xaf0cfe78);
	/* both verified */
	assert_int_equal(open_s(&n, TEXT "\n" PETER_SIG ENOCH_SIG, k, 2), 0);
	assert_int_equal(n.nverified, 2);
	/* neither known */
	assert_int_equal(open_s(&n, TEXT "\n" PETER_SIG ENOCH_SIG, k, 0),
	                 GD_ENOTFOUND);
	assert_int_equal(n.nsigs, 2);
	/* the same key twice: ambiguous when it signed, fine when not */
	assert_int_equal(open_s(&n, TEXT "\n" ENOCH_SIG, k + 1, 2), GD_EINVAL);
	assert_int_equal(open_s(&n, TEXT "\n" PETER_SIG, k, 3), 0);
	/* 101 signatures */
	{
		struct buf b = BUF_INIT;
		buf_puts(&b, TEXT "\n");
		for (int i = 0; i < 101; i++)
			buf_puts(&b, PETER_SIG);
		memcpy(msg, b.p, b.len + 1);
		buf_free(&b);
	}
	assert_int_equal(open_s(&n, msg, k, 1), GD_ETOOBIG);
	assert_int_equal(open_s(&n, msg, k, 0), GD_ETOOBIG);
	/* a bad signature by a known key */
	snprintf(bad, sizeof(bad), "%s\n%.60sABCD%s", TEXT, PETER_SIG,
	         &PETER_SIG[60]);
	assert_int_equal(open_s(&n, bad, k, 1), GD_ECRYPTO);
	assert_int_equal(n.bad, 0);
	/* repeats: Peter's counted once, Enoch's identical lines once */
	snprintf(msg, 2048, "%s\n%s%s%s%s%.60sABCD%s", TEXT, PETER_SIG,
	         PETER_SIG, ENOCH_SIG, ENOCH_SIG, ENOCH_SIG, &ENOCH_SIG[60]);
	assert_int_equal(open_s(&n, msg, k, 1), 0);
	assert_int_equal(n.nverified, 1);
	assert_int_equal(n.nsigs, 3);
	assert_int_equal(n.sigs[1].key, -1);
	assert_int_equal(n.sigs[2].key, -1);
	assert_int_not_equal(n.sigs[1].b64_len, n.sigs[2].b64_len);
	free(msg);
}

static void test_open_malformed(void **state)
{
	static const char *bad[] = {
	        TEXT,
	        TEXT "\n",
	        TEXT "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAc"
	             "ElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=",
	        "\x01" TEXT "\n" PETER_SIG,
	        "\xff" TEXT "\n" PETER_SIG,
	        TEXT "\n— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZI"
	             "nNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n",
	        TEXT "\n" PETER_SIG "Unexpected line.\n",
	        /* ours: no dash, no space, short or bad base64, CR, '+' */
	        TEXT "\n- PeterNeumann x08go/ZJ\n",
	        TEXT "\n— PeterNeumann\n",
	        TEXT "\n— PeterNeumann \n",
	        TEXT "\n— PeterNeumann AAAA\n",
	        TEXT "\n— PeterNeumann x08go/ZJkuBS9\n",
	        TEXT "\n— PeterNeumann x08go/ZJ%%%%\n",
	        TEXT "\n— Peter+Neumann x08go/ZJkuBS9UG/Sf\n",
	        TEXT "\n—  x08go/ZJkuBS9UG/Sf\n",
	        TEXT "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAc"
	             "ElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAN=\n",
	        TEXT "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAc"
	             "ElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJ\xc3\xa9"
	             "AM=\n",
	        "a\r\n\n" PETER_SIG,
	        "\n",
	        "",
	        TEXT "\n" PETER_SIG "\n",
	};
	struct note_vkey k;
	struct note n;

	(void)state;
	assert_int_equal(vkey(&k, PETER_VKEY), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (open_s(&n, bad[i], &k, 1) != GD_EINVAL)
			fail_msg("opened bad[%zu]", i);
}

/* C2SP signed-note.md's examples: one verifies; the other (no key given)
 * has a blank line inside its text, which ends at the last one. */
static void test_open_c2sp(void **state)
{
	struct note_vkey k;
	struct note n;

	(void)state;
	assert_int_equal(vkey(&k, FOO_VKEY), 0);
	assert_int_equal(open_s(&n, FOO_NOTE, &k, 1), 0);
	assert_int_equal(n.text_len, strlen("This is an example message.\n"));
	assert_int_equal(open_s(&n, QUASIMODO, &k, 1), GD_ENOTFOUND);
	assert_int_equal(n.nsigs, 1);
	assert_int_equal(n.text_len,
	                 strstr(QUASIMODO, "\n\n—") + 1 - QUASIMODO);
}

static void test_checkpoint(void **state)
{
	static const char *bad[] = {
	        "example.com/behind-the-sofa\n020852163\n"
	        "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	        "o\n-1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	        "o\n+1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	        "o\n9223372036854775808\n"
	        "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	        "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I\n",
	        "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2=\n",
	        "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2Ia\n",
	        "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I==\n",
	        "\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	        "o\n\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	        "o\n1\n",
	        "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n",
	        "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\next",
	        "o\n1 \nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	        "o\t\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	        /* bits past the hash, a non-ASCII byte (found by fuzz_note:
	         * libsodium decodes some as letters) */
	        "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2J=\n",
	        "o\n1\nCsUYapGGPo4dk\xe2\x80\x94"
	        "aUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	};
	struct note_checkpoint c;
	struct buf out = BUF_INIT;
	const char *ext = SOFA "ext one\next two\n";

	(void)state;
	assert_int_equal(note_checkpoint_parse(&c, SOFA, strlen(SOFA)), 0);
	assert_string_equal(c.origin, "example.com/behind-the-sofa");
	assert_true(c.size == 20852163);
	assert_null(c.ext);
	assert_int_equal(note_checkpoint_format(&out, c.origin, c.origin_len,
	                                        c.size, &c.root),
	                 0);
	assert_string_equal(out.p, SOFA);
	assert_int_equal(note_checkpoint_parse(&c, ext, strlen(ext)), 0);
	assert_int_equal(c.ext_len, strlen("ext one\next two\n"));
	assert_memory_equal(c.ext, "ext one\n", 8);
	assert_int_equal(
	        note_checkpoint_parse(
	                &c,
	                "o\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
	                strlen("o\n0\n47DEQpj8HBSa+/"
	                       "TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n")),
	        0);
	assert_true(c.size == 0);
	assert_int_equal(
	        note_checkpoint_parse(
	                &c,
	                "o\n9223372036854775807\n"
	                "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
	                strlen("o\n9223372036854775807\n"
	                       "CsUYapGGPo4dkMgIAUqom/"
	                       "Xajj7h2fB2MPA3j2jxq2I=\n")),
	        0);
	assert_true(c.size == INT64_MAX);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (note_checkpoint_parse(&c, bad[i], strlen(bad[i])) !=
		    GD_EINVAL)
			fail_msg("parsed bad[%zu]", i);
	buf_reset(&out);
	assert_int_equal(note_checkpoint_format(&out, "", 0, 1, &c.root),
	                 GD_EINVAL);
	assert_int_equal(note_checkpoint_format(&out, "a\nb", 3, 1, &c.root),
	                 GD_EINVAL);
	assert_int_equal(note_checkpoint_format(&out, "a", 1, -1, &c.root),
	                 GD_EINVAL);
	buf_free(&out);
}

/* The hand-derived vectors: our signatures are byte for byte the ones
 * Python made, and they open. */
static void test_cosignature_vector(void **state)
{
	struct note_skey log, wit;
	struct note_vkey k[2];
	struct note n;
	uint8_t seed[32];
	struct buf out = BUF_INIT;

	(void)state;
	for (int i = 0; i < 32; i++)
		seed[i] = (uint8_t)(i + 1);
	assert_int_equal(note_skey_from_seed(&wit, "witness.example/w1", 18,
	                                     NOTE_ALG_COSIG, seed),
	                 0);
	assert_int_equal(note_skey_parse(&log, LOG_SKEY, strlen(LOG_SKEY)), 0);
	note_skey_vkey(&k[0], &wit);
	note_vkey_format(&out, &k[0]);
	assert_string_equal(out.p, COSIG_VKEY);
	buf_reset(&out);
	assert_int_equal(note_sign(&out, SOFA, strlen(SOFA), &log, 0), 0);
	assert_int_equal(
	        note_sign_line(&out, SOFA, strlen(SOFA), &wit, COSIG_TIME), 0);
	assert_string_equal(out.p, SOFA "\n" LOG_SIG COSIG_LINE);
	buf_reset(&out);
	note_cosig_message(&out, COSIG_TIME, SOFA, strlen(SOFA));
	assert_string_equal(out.p, "cosignature/v1\ntime 1679315147\n" SOFA);

	assert_int_equal(vkey(&k[0], LOG_VKEY), 0);
	assert_int_equal(vkey(&k[1], COSIG_VKEY), 0);
	assert_int_equal(open_s(&n, SOFA "\n" LOG_SIG COSIG_LINE, k, 2), 0);
	assert_int_equal(n.nverified, 2);
	assert_int_equal(n.sigs[1].key, 1);
	assert_true(n.sigs[1].timestamp == COSIG_TIME);
	/* the cosignature alone, as a witness returns it */
	assert_int_equal(open_s(&n, SOFA "\n" COSIG_LINE, k + 1, 1), 0);
	/* the same name and id taken for a plain Ed25519 key: a 76-byte
	 * cosignature is no note signature, refused */
	k[1].alg = NOTE_ALG_ED25519;
	assert_int_equal(open_s(&n, SOFA "\n" COSIG_LINE, k + 1, 1),
	                 GD_ECRYPTO);
	note_skey_wipe(&log);
	note_skey_wipe(&wit);
	buf_free(&out);
}

/* A checkpoint signed by the log and cosigned: each flipped bit refused
 * (size, root, origin, signature, key id, time). */
static void test_flipped_bits(void **state)
{
	struct note_skey log, wit;
	struct note_vkey k[2];
	struct note n;
	struct buf out = BUF_INIT;
	uint8_t seed[32] = {7};
	char *m;
	size_t logline, cosline;

	(void)state;
	assert_int_equal(note_skey_from_seed(&log, "example.com/log", 15,
	                                     NOTE_ALG_ED25519, seed),
	                 0);
	seed[0] = 8;
	assert_int_equal(note_skey_from_seed(&wit, "example.com/wit", 15,
	                                     NOTE_ALG_COSIG, seed),
	                 0);
	note_skey_vkey(&k[0], &log);
	note_skey_vkey(&k[1], &wit);
	assert_int_equal(note_sign(&out, SOFA, strlen(SOFA), &log, 0), 0);
	cosline = out.len;
	assert_int_equal(note_sign_line(&out, SOFA, strlen(SOFA), &wit,
	                                (uint64_t)1 << 40),
	                 0);
	assert_int_equal(note_open(&n, out.p, out.len, k, 2), 0);
	assert_true(n.sigs[1].timestamp == (uint64_t)1 << 40);
	m = out.p;
	logline = strlen(SOFA) + 1;
	/* size, root: every signature fails */
	for (size_t at = 28; at < strlen(SOFA) - 1; at++) {
		if (m[at] == '\n')
			continue;
		m[at] ^= 1;
		assert_int_not_equal(note_open(&n, m, out.len, k, 2), 0);
		assert_int_not_equal(note_open(&n, m, out.len, k + 1, 1), 0);
		m[at] ^= 1;
	}
	/* a signature's base64: key id, time or signature changed */
	for (size_t at = logline + strlen("— example.com/log ");
	     at < cosline - 3; at += 5) {
		char was = m[at];
		m[at] = was == 'A' ? 'B' : 'A';
		assert_int_not_equal(note_open(&n, m, out.len, k, 1), 0);
		m[at] = was;
	}
	for (size_t at = cosline + strlen("— example.com/wit ");
	     at < out.len - 4; at += 3) {
		char was = m[at];
		m[at] = was == 'A' ? 'B' : 'A';
		assert_int_not_equal(note_open(&n, m, out.len, k + 1, 1), 0);
		m[at] = was;
	}
	/* the signer's name */
	m[logline + strlen("— ")] ^= 1;
	assert_int_equal(note_open(&n, m, out.len, k, 1), GD_ENOTFOUND);
	note_skey_wipe(&log);
	note_skey_wipe(&wit);
	buf_free(&out);
}

/* C2SP: a verifier must accept at least 16 signatures, and ignore
 * unknown ones of other sizes (an ML-DSA-44 cosignature is 2,432
 * bytes). */
static void test_limits(void **state)
{
	struct note_vkey k;
	struct note n;
	struct buf m = BUF_INIT;
	static uint8_t big[4 + 8 + 2420];
	char *b64 = malloc(sodium_base64_ENCODED_LEN(
	        sizeof(big), sodium_base64_VARIANT_ORIGINAL));

	(void)state;
	assert_int_equal(vkey(&k, PETER_VKEY), 0);
	buf_puts(&m, TEXT "\n" PETER_SIG);
	for (int i = 0; i < 20; i++) {
		big[0] = (uint8_t)i;
		sodium_bin2base64(
		        b64,
		        sodium_base64_ENCODED_LEN(
		                sizeof(big), sodium_base64_VARIANT_ORIGINAL),
		        big, sizeof(big), sodium_base64_VARIANT_ORIGINAL);
		buf_printf(&m, "— pq.example/w%d %s\n", i, b64);
	}
	assert_int_equal(note_open(&n, m.p, m.len, &k, 1), 0);
	assert_int_equal(n.nsigs, 21);
	/* a name of 256 bytes */
	buf_reset(&m);
	buf_puts(&m, TEXT "\n— ");
	for (int i = 0; i < 256; i++)
		buf_puts(&m, "a");
	buf_puts(&m, " x08go/ZJkuBS9UG/Sffc\n");
	assert_int_equal(note_open(&n, m.p, m.len, &k, 1), GD_EINVAL);
	assert_false(note_name_ok("a\xc2\xa0"
	                          "b",
	                          4)); /* U+00A0 */
	assert_false(note_name_ok("a\xe3\x80\x80"
	                          "b",
	                          5)); /* U+3000 */
	assert_true(note_name_ok("caf\xc3\xa9", 5));
	assert_false(note_name_ok("\xc0\xaf", 2)); /* overlong */
	assert_false(note_name_ok("\xed\xa0\x80", 3)); /* surrogate */
	free(b64);
	buf_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_vkey),
	        cmocka_unit_test(test_skey),
	        cmocka_unit_test(test_sign),
	        cmocka_unit_test(test_open_go),
	        cmocka_unit_test(test_open_malformed),
	        cmocka_unit_test(test_open_c2sp),
	        cmocka_unit_test(test_checkpoint),
	        cmocka_unit_test(test_cosignature_vector),
	        cmocka_unit_test(test_flipped_bits),
	        cmocka_unit_test(test_limits),
	};
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
