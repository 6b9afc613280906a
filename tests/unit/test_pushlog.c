/*
 * test_pushlog.c: common/pushlog.h, the push log's canonical bytes, hash
 * and chain walk.  The known answer was computed apart from this code
 * (python3 hashlib.blake2b(digest_size=32) over the bytes that
 * docs/push-log.md spells out).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "err.h"
#include "pushlog.h"

#define Z "0000000000000000000000000000000000000000"
#define A "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"
#define B "9f0c1d2e3b4a59687766554433221100ffeeddcc"

struct ent {
	Grantd__V1__PushLogEntry e;
	Grantd__V1__RefChange ch;
	Grantd__V1__RefChange *chp[1];
	uint8_t prev[PUSHLOG_HASH_LEN], hash[PUSHLOG_HASH_LEN];
};

/* Entry n of origin after prev (NULL: the first), hashed. */
static void make(struct ent *x, const char *origin, uint64_t n,
		 const struct ent *prev, const char *user)
{
	grantd__v1__push_log_entry__init(&x->e);
	grantd__v1__ref_change__init(&x->ch);
	x->ch.ref = "refs/heads/main";
	x->ch.old = n == 1 ? Z : A;
	x->ch.new_ = n == 1 ? A : B;
	x->chp[0] = &x->ch;
	x->e.origin = (char *)origin;
	x->e.n = n, x->e.has_n = 1;
	memset(x->prev, 0, sizeof(x->prev));
	if (prev)
		memcpy(x->prev, prev->hash, sizeof(x->prev));
	x->e.prev.data = x->prev, x->e.prev.len = PUSHLOG_HASH_LEN;
	x->e.has_prev = 1;
	x->e.user = (char *)user;
	x->e.key_fp = "SHA256:abc";
	x->e.key_kind = "plain";
	x->e.client_ip = "192.0.2.7";
	x->e.factor = "grant";
	x->e.repo = "demo";
	x->e.changes = x->chp, x->e.n_changes = 1;
	x->e.pushed_ms = 1700000000000LL, x->e.has_pushed_ms = 1;
	x->e.hlc = 42, x->e.has_hlc = 1;
	pushlog_hash(x->hash, &x->e);
	x->e.hash.data = x->hash, x->e.hash.len = PUSHLOG_HASH_LEN;
	x->e.has_hash = 1;
}

static void test_known_answer(void **state)
{
	struct ent x;
	struct buf b = BUF_INIT;
	char hex[2 * PUSHLOG_HASH_LEN + 1];

	(void)state;
	make(&x, "sitea", 1, NULL, "alice");
	pushlog_encode(&b, &x.e);
	assert_int_equal(b.len, 268);
	assert_memory_equal(b.p, "\0\0\0\x12grantd push log v1\0\0\0\x05sitea"
			    "\0\0\0\0\0\0\0\x01", 4 + 18 + 4 + 5 + 8);
	pushlog_hex(hex, x.hash, sizeof(x.hash));
	assert_string_equal(hex, "3772d5ae898ee3242f9b2d2e1044afdc"
				 "8c0a5cee9681400d863d550b2be27dfb");
	assert_true(pushlog_hash_ok(&x.e));
	/* the hash field itself is not hashed */
	x.hash[0] ^= 1;
	assert_false(pushlog_hash_ok(&x.e));
	x.hash[0] ^= 1;
	/* every field counts: an absent string is an empty one, but a
	 * changed one is another entry */
	x.e.client_ip = "192.0.2.8";
	assert_false(pushlog_hash_ok(&x.e));
	x.e.client_ip = "192.0.2.7";
	x.e.factor_detail = "";
	assert_true(pushlog_hash_ok(&x.e));
	x.e.factor_detail = NULL;
	x.ch.new_ = B;
	assert_false(pushlog_hash_ok(&x.e));
	x.ch.new_ = A;
	x.e.hlc = 43;
	assert_false(pushlog_hash_ok(&x.e));
	x.e.hlc = 42;
	/* strings are length-prefixed: moving a byte between two fields
	 * changes the hash */
	x.e.user = "alic";
	x.e.key_fp = "eSHA256:abc";
	assert_false(pushlog_hash_ok(&x.e));
	buf_free(&b);
}

static void test_chain_intact(void **state)
{
	struct ent a1, a2, a3, b1;
	struct pushlog_verify v;

	(void)state;
	make(&a1, "sitea", 1, NULL, "alice");
	make(&a2, "sitea", 2, &a1, "bob");
	make(&a3, "sitea", 3, &a2, "alice");
	make(&b1, "siteb", 1, NULL, "carol");
	pushlog_verify_init(&v);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 1, &a1.e), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 2, &a2.e), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 3, &a3.e), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_add(&v, "siteb", 1, &b1.e), PUSHLOG_OK);
	assert_int_equal(v.brk, PUSHLOG_OK);
	assert_int_equal(v.entries, 4);
	assert_int_equal(v.sites, 2);
}

/* Each kind of break is named at its site and number, and only the
 * first is kept. */
static void test_chain_breaks(void **state)
{
	static const uint8_t zero[PUSHLOG_HASH_LEN];
	struct ent a1, a2, a3, b1;
	struct pushlog_verify v;

	(void)state;
	make(&a1, "sitea", 1, NULL, "alice");
	make(&a2, "sitea", 2, &a1, "bob");
	make(&a3, "sitea", 3, &a2, "alice");
	make(&b1, "siteb", 1, NULL, "carol");

	/* a dropped entry */
	pushlog_verify_init(&v);
	pushlog_verify_add(&v, "sitea", 1, &a1.e);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 3, &a3.e),
			 PUSHLOG_MISSING);
	assert_int_equal(v.brk, PUSHLOG_MISSING);
	assert_string_equal(v.brk_site, "sitea");
	assert_int_equal(v.brk_n, 2);
	/* walks on: the next site is fine, the first break stays */
	assert_int_equal(pushlog_verify_add(&v, "siteb", 1, &b1.e), PUSHLOG_OK);
	assert_int_equal(v.brk_n, 2);
	assert_int_equal(v.entries, 3);
	assert_int_equal(v.sites, 2);

	/* a chain that starts late: entry 1 missing */
	pushlog_verify_init(&v);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 2, &a2.e),
			 PUSHLOG_MISSING);
	assert_int_equal(v.brk_n, 1);

	/* a rewritten entry, its hash left as it was */
	pushlog_verify_init(&v);
	pushlog_verify_add(&v, "sitea", 1, &a1.e);
	a2.e.user = "mallory";
	assert_int_equal(pushlog_verify_add(&v, "sitea", 2, &a2.e),
			 PUSHLOG_WRONG_HASH);
	assert_string_equal(v.brk_site, "sitea");
	assert_int_equal(v.brk_n, 2);
	/* ... rehashed too: then the next entry's prev shows it */
	pushlog_hash(a2.hash, &a2.e);
	pushlog_verify_init(&v);
	pushlog_verify_add(&v, "sitea", 1, &a1.e);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 2, &a2.e), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 3, &a3.e),
			 PUSHLOG_WRONG_PREV);
	assert_int_equal(v.brk_n, 3);
	make(&a2, "sitea", 2, &a1, "bob");

	/* the first entry must chain to zeros */
	pushlog_verify_init(&v);
	assert_int_equal(pushlog_verify_add(&v, "siteb", 1, &a2.e),
			 PUSHLOG_MISPLACED);
	a2.e.n = 1;
	a2.e.origin = "siteb";
	assert_int_equal(pushlog_verify_add(&v, "siteb", 1, &a2.e),
			 PUSHLOG_MISSING);
	pushlog_verify_init(&v);
	pushlog_hash(a2.hash, &a2.e);
	assert_int_equal(pushlog_verify_add(&v, "siteb", 1, &a2.e),
			 PUSHLOG_WRONG_PREV);

	/* the newest entries removed: only the head this site kept shows
	 * it; a head at or below the chain's end is no break */
	pushlog_verify_init(&v);
	pushlog_verify_add(&v, "sitea", 1, &a1.e);
	assert_int_equal(pushlog_verify_head(&v, "sitea", 1, a1.hash, 1,
					     a1.hash), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_head(&v, "sitea", 1, a1.hash, 0,
					     zero), PUSHLOG_OK);
	assert_int_equal(v.brk, PUSHLOG_OK);
	assert_int_equal(pushlog_verify_head(&v, "sitea", 1, a1.hash, 3,
					     a2.hash), PUSHLOG_TAIL_MISSING);
	assert_int_equal(v.brk_n, 2);
	assert_int_equal(pushlog_verify_head(&v, "siteb", 0, zero, 1, a1.hash),
			 PUSHLOG_TAIL_MISSING);
	assert_string_equal(v.brk_site, "sitea"); /* the first kept */

	/* the head's number right but not its hash: the last entry was
	 * rewritten (and rehashed) after this site applied it */
	pushlog_verify_init(&v);
	pushlog_verify_add(&v, "sitea", 1, &a1.e);
	assert_int_equal(pushlog_verify_head(&v, "sitea", 1, a1.hash, 1,
					     a2.hash), PUSHLOG_WRONG_HEAD);
	assert_int_equal(v.brk_n, 1);
	assert_true(v.brk_hashes);
	assert_memory_equal(v.brk_hash[0], a2.hash, PUSHLOG_HASH_LEN);
	assert_memory_equal(v.brk_hash[1], a1.hash, PUSHLOG_HASH_LEN);

	/* a peer's head: another hash for an entry held here is a break,
	 * one not here yet is none */
	pushlog_verify_init(&v);
	assert_int_equal(pushlog_verify_peer(&v, "sitea", 2, NULL, a2.hash),
			 PUSHLOG_OK);
	assert_int_equal(pushlog_verify_peer(&v, "sitea", 1, a1.hash,
					     a1.hash), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_peer(&v, "sitea", 1, a1.hash,
					     a2.hash), PUSHLOG_PEER_HEAD);
	assert_memory_equal(v.brk_hash[1], a2.hash, PUSHLOG_HASH_LEN);

	/* stored bytes that do not decode */
	pushlog_verify_init(&v);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 1, NULL),
			 PUSHLOG_UNDECODABLE);
	assert_string_equal(pushlog_break_text(PUSHLOG_UNDECODABLE),
			    "the stored entry does not decode");
}

/* A fork: a second entry for (sitea, 2) kept under its hash, fed right
 * after the first.  The fork is the break, naming both hashes; the next
 * entry may follow either; every fork is counted. */
static void test_chain_fork(void **state)
{
	struct ent a1, a2, a2b, a3, a3b;
	struct pushlog_verify v;

	(void)state;
	make(&a1, "sitea", 1, NULL, "alice");
	make(&a2, "sitea", 2, &a1, "bob");
	make(&a2b, "sitea", 2, &a1, "mallory");
	make(&a3, "sitea", 3, &a2, "carol");
	make(&a3b, "sitea", 3, &a2b, "carol");
	pushlog_verify_init(&v);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 1, &a1.e), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 2, &a2.e), PUSHLOG_OK);
	assert_int_equal(pushlog_verify_fork(&v, "sitea", 2, a2b.hash, &a2b.e),
			 PUSHLOG_FORK);
	assert_string_equal(v.brk_site, "sitea");
	assert_int_equal(v.brk_n, 2);
	assert_true(v.brk_hashes);
	assert_memory_equal(v.brk_hash[0], a2.hash, PUSHLOG_HASH_LEN);
	assert_memory_equal(v.brk_hash[1], a2b.hash, PUSHLOG_HASH_LEN);
	assert_int_equal(v.forks, 1);
	assert_int_equal(v.entries, 3);
	/* entry 3 after the fork's entry: no second break */
	assert_int_equal(pushlog_verify_add(&v, "sitea", 3, &a3b.e),
			 PUSHLOG_OK);
	pushlog_verify_init(&v);
	pushlog_verify_add(&v, "sitea", 1, &a1.e);
	pushlog_verify_add(&v, "sitea", 2, &a2.e);
	pushlog_verify_fork(&v, "sitea", 2, a2b.hash, &a2b.e);
	assert_int_equal(pushlog_verify_add(&v, "sitea", 3, &a3.e), PUSHLOG_OK);
	assert_int_equal(v.brk, PUSHLOG_FORK);

	/* a fork stored under another hash than its own, or not after its
	 * number's entry, is misplaced */
	pushlog_verify_init(&v);
	pushlog_verify_add(&v, "sitea", 1, &a1.e);
	assert_int_equal(pushlog_verify_fork(&v, "sitea", 1, a2b.hash, &a1.e),
			 PUSHLOG_MISPLACED);
	pushlog_verify_init(&v);
	pushlog_verify_add(&v, "sitea", 1, &a1.e);
	assert_int_equal(pushlog_verify_fork(&v, "sitea", 2, a2b.hash, &a2b.e),
			 PUSHLOG_MISPLACED);
	assert_int_equal(pushlog_verify_fork(&v, "sitea", 1, a2b.hash, NULL),
			 PUSHLOG_UNDECODABLE);
	assert_string_equal(pushlog_break_text(PUSHLOG_FORK),
			    "two different entries have its number (a fork)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answer),
		cmocka_unit_test(test_chain_intact),
		cmocka_unit_test(test_chain_breaks),
		cmocka_unit_test(test_chain_fork),
	};
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
