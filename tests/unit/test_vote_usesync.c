/*
 * test_vote_usesync.c: node/peers/vote_usesync.c's two halves on real
 * stores in temporary directories: the pages a voter serves
 * (vote_usesync_page: the max of mark and promise over the union of both
 * families' keys, in key order, strictly after the key given, at most max
 * per page) and what a store not qualified takes from them
 * (vote_usesync_take: its promises raised, never lowered, a record that
 * does not parse skipped).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "fixture.h"
#include "records.h"
#include "store.h"
#include "vote.h"
#include "vote_int.h"

static const uint8_t seal[STORE_SEAL_KEY_LEN] = {7};

struct fx {
	char dir[2][256];
	struct store *s[2]; /* the voter, the store taking its pages */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	for (int i = 0; i < 2; i++)
		if (fx_mkdtemp(f->dir[i], sizeof(f->dir[i]),
		               "test_vote_usesync", false) < 0 ||
		    fx_store_open(&f->s[i], NULL, f->dir[i], NULL, seal) < 0)
			return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	for (int i = 0; i < 2; i++) {
		fx_store_close(&f->s[i], NULL);
		fx_rmtree(f->dir[i]);
	}
	free(f);
	return 0;
}

/* A mark, as a replicated MARK operation would leave it. */
static void put_mark(struct store *s,
                     const char *user,
                     uint64_t id,
                     uint64_t next,
                     uint32_t scratch)
{
	Grantd__V1__Mark m = GRANTD__V1__MARK__INIT;
	struct store_batch *b;
	struct buf k = BUF_INIT;
	uint8_t v[64];

	m.user = (char *)user;
	m.enroll_id = id;
	m.has_enroll_id = 1;
	m.next = next;
	m.has_next = 1;
	m.scratch_used = scratch;
	m.has_scratch_used = 1;
	size_t len = grantd__v1__mark__pack(&m, v);
	records_key_mark(&k, user, id);
	assert_int_equal(store_batch_new(&b, s), 0);
	store_put(b, CF_MARKS, k.p, k.len, v, len);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	buf_free(&k);
}

/* A promise this site gave (vote_promise said YES). */
static void put_promise(struct store *s,
                        const char *user,
                        uint64_t id,
                        uint64_t next,
                        uint32_t scratch,
                        uint64_t pid)
{
	struct vote_use u = {.enroll_id = id, .next = next, .scratch = scratch};
	Grantd__V1__VoteVerdict verdict;
	struct store_batch *b;
	uint64_t held;

	snprintf(u.user, sizeof(u.user), "%s", user);
	assert_int_equal(store_batch_new(&b, s), 0);
	assert_int_equal(
	        vote_promise(s, b, &u, pid, "sitea", 1, &verdict, &held), 0);
	assert_int_equal(verdict, GRANTD__V1__VOTE_VERDICT__VOTE_YES);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
}

/* Record i of pg: its user, enrollment, next and scratch bits. */
static void page_rec(const struct vote_page *pg,
                     size_t i,
                     char *user,
                     size_t usz,
                     uint64_t *id,
                     uint64_t *next,
                     uint32_t *scratch)
{
	struct records_span us;
	Grantd__V1__Mark *m;

	assert_true(i < pg->n);
	assert_int_equal(
	        records_mark_parse(pg->keys[i].data, pg->keys[i].len, &us, id),
	        0);
	assert_true(us.len < usz);
	memcpy(user, us.p, us.len);
	user[us.len] = '\0';
	m = grantd__v1__mark__unpack(NULL, pg->vals[i].len, pg->vals[i].data);
	assert_non_null(m);
	*next = m->next;
	*scratch = m->scratch_used;
	grantd__v1__mark__free_unpacked(m, NULL);
}

static void test_page_is_max_of_mark_and_promise(void **state)
{
	struct fx *f = *state;
	struct vote_page pg;
	char user[64];
	uint64_t id, next;
	uint32_t scratch;

	put_mark(f->s[0], "kim", 1, 5, 1u << 0);
	put_promise(f->s[0], "kim", 1, 7, 0, 11);
	put_promise(f->s[0], "kim", 1, 0, 1u << 2, 12);
	put_mark(f->s[0], "lena", 2, 3, 0); /* a mark only */
	put_promise(f->s[0], "abe", 4, 9, 0, 13); /* a promise only */
	put_promise(f->s[0], "mo", 3, 8, 0, 14);
	put_mark(f->s[0], "mo", 3, 20, 0); /* a mark above its promise */
	assert_int_equal(vote_usesync_page(&pg, f->s[0], NULL, VOTE_SYNC_PAGE),
	                 0);
	assert_int_equal(pg.n, 4);
	assert_true(pg.done);
	page_rec(&pg, 0, user, sizeof(user), &id, &next, &scratch);
	assert_string_equal(user, "abe");
	assert_true(id == 4 && next == 9 && scratch == 0);
	page_rec(&pg, 1, user, sizeof(user), &id, &next, &scratch);
	assert_string_equal(user, "kim");
	assert_true(id == 1 && next == 7 && scratch == ((1u << 0) | (1u << 2)));
	page_rec(&pg, 2, user, sizeof(user), &id, &next, &scratch);
	assert_string_equal(user, "lena");
	assert_true(id == 2 && next == 3 && scratch == 0);
	page_rec(&pg, 3, user, sizeof(user), &id, &next, &scratch);
	assert_string_equal(user, "mo");
	assert_true(id == 3 && next == 20);
	vote_usesync_page_free(&pg);
}

static void test_pages_follow_on(void **state)
{
	struct fx *f = *state;
	static const char *users[] = {"u1", "u2", "u3", "u4", "u5"};
	struct vote_page pg;
	struct buf after = BUF_INIT;
	size_t seen = 0;
	int pages = 0;

	/* an empty store: one page, done; a check-in (max 0) too */
	assert_int_equal(vote_usesync_page(&pg, f->s[0], NULL, 0), 0);
	assert_true(pg.n == 0 && pg.done);
	vote_usesync_page_free(&pg);
	for (int i = 0; i < 5; i++)
		if (i % 2)
			put_mark(f->s[0], users[i], 1, 10 + i, 0);
		else
			put_promise(f->s[0], users[i], 1, 10 + i, 0, 50 + i);
	/* a check-in on a store with records: none, and not done */
	assert_int_equal(vote_usesync_page(&pg, f->s[0], NULL, 0), 0);
	assert_true(pg.n == 0 && !pg.done);
	vote_usesync_page_free(&pg);
	for (;;) {
		ProtobufCBinaryData a = {after.len, (uint8_t *)after.p};
		char user[64];
		uint64_t id, next;
		uint32_t scratch;
		assert_int_equal(
		        vote_usesync_page(&pg, f->s[0], pages ? &a : NULL, 2),
		        0);
		pages++;
		assert_true(pg.n <= 2);
		for (size_t i = 0; i < pg.n; i++, seen++) {
			page_rec(&pg, i, user, sizeof(user), &id, &next,
			         &scratch);
			assert_string_equal(user, users[seen]);
			assert_true(next == 10 + seen);
		}
		if (pg.n) {
			buf_reset(&after);
			buf_add(&after, pg.keys[pg.n - 1].data,
			        pg.keys[pg.n - 1].len);
		}
		bool done = pg.done;
		vote_usesync_page_free(&pg);
		if (done)
			break;
		assert_true(pages < 10);
	}
	assert_int_equal(seen, 5);
	assert_int_equal(pages, 3);
	buf_free(&after);
}

/* Page of s[0] taken into s[1] in one batch, committed. */
static void take_all(struct fx *f, struct buf *after)
{
	Grantd__V1__UseSyncRep r = GRANTD__V1__USE_SYNC_REP__INIT;
	struct vote_page pg;
	struct store_batch *b;

	assert_int_equal(vote_usesync_page(&pg, f->s[0], NULL, VOTE_SYNC_PAGE),
	                 0);
	r.keys = pg.keys;
	r.n_keys = pg.n;
	r.values = pg.vals;
	r.n_values = pg.n;
	assert_int_equal(store_batch_new(&b, f->s[1]), 0);
	assert_int_equal(vote_usesync_take(f->s[1], b, "siteb", &r, after), 0);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	vote_usesync_page_free(&pg);
}

static void test_take_raises_never_lowers(void **state)
{
	struct fx *f = *state;
	struct buf after = BUF_INIT, k = BUF_INIT;
	Grantd__V1__Mark m;
	Grantd__V1__Promise p;

	put_mark(f->s[0], "kim", 1, 5, 1u << 1);
	put_promise(f->s[0], "lena", 2, 8, 0, 21);
	put_mark(f->s[0], "mo", 3, 4, 0);
	put_promise(f->s[1], "mo", 3, 30, 0, 22); /* held higher */
	put_promise(f->s[1], "mo", 3, 0, 1u << 3, 22);
	take_all(f, &after);
	assert_int_equal(vote_held(f->s[1], NULL, "kim", 1, &m, &p), 0);
	assert_true(m.next == 0 && p.next == 5 && p.scratch_used == 1u << 1);
	assert_int_equal(vote_held(f->s[1], NULL, "lena", 2, &m, &p), 0);
	assert_true(p.next == 8);
	assert_int_equal(vote_held(f->s[1], NULL, "mo", 3, &m, &p), 0);
	assert_true(p.next == 30 && p.scratch_used == 1u << 3 && p.pid == 22);
	/* the last key taken */
	records_key_mark(&k, "mo", 3);
	assert_true(after.len == k.len && !memcmp(after.p, k.p, k.len));
	/* what was raised is a promise: the taker refuses the same use */
	struct vote_use u = {.user = "lena", .enroll_id = 2, .next = 8};
	Grantd__V1__VoteVerdict verdict;
	uint64_t held;
	struct store_batch *b;
	assert_int_equal(store_batch_new(&b, f->s[1]), 0);
	assert_int_equal(
	        vote_promise(f->s[1], b, &u, 99, "sitec", 1, &verdict, &held),
	        0);
	assert_int_equal(verdict, GRANTD__V1__VOTE_VERDICT__VOTE_PROMISED);
	store_batch_free(&b);
	buf_free(&after);
	buf_free(&k);
}

static void test_take_skips_bad_records(void **state)
{
	struct fx *f = *state;
	Grantd__V1__UseSyncRep r = GRANTD__V1__USE_SYNC_REP__INIT;
	ProtobufCBinaryData keys[3], vals[3];
	struct buf k0 = BUF_INIT, k2 = BUF_INIT, after = BUF_INIT;
	Grantd__V1__Mark mk = GRANTD__V1__MARK__INIT;
	uint8_t good[32], junk[] = {0xff, 0xff, 0xff};
	struct store_batch *b;
	Grantd__V1__Mark m;
	Grantd__V1__Promise p;

	mk.next = 6;
	mk.has_next = 1;
	size_t glen = grantd__v1__mark__pack(&mk, good);
	records_key_mark(&k0, "kim", 1);
	records_key_mark(&k2, "lena", 2);
	keys[0] = (ProtobufCBinaryData){k0.len, (uint8_t *)k0.p};
	vals[0] = (ProtobufCBinaryData){sizeof(junk), junk}; /* no Mark */
	keys[1] = (ProtobufCBinaryData){3, (uint8_t *)"abc"}; /* no key */
	vals[1] = (ProtobufCBinaryData){glen, good};
	keys[2] = (ProtobufCBinaryData){k2.len, (uint8_t *)k2.p};
	vals[2] = (ProtobufCBinaryData){glen, good};
	r.keys = keys;
	r.n_keys = 3;
	r.values = vals;
	r.n_values = 3;
	assert_int_equal(store_batch_new(&b, f->s[1]), 0);
	assert_int_equal(vote_usesync_take(f->s[1], b, "siteb", &r, &after), 0);
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
	assert_int_equal(vote_held(f->s[1], NULL, "kim", 1, &m, &p), 0);
	assert_true(p.next == 0);
	assert_int_equal(vote_held(f->s[1], NULL, "lena", 2, &m, &p), 0);
	assert_true(p.next == 6);
	assert_true(after.len == k2.len && !memcmp(after.p, k2.p, k2.len));
	buf_free(&k0);
	buf_free(&k2);
	buf_free(&after);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(
	                test_page_is_max_of_mark_and_promise, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_pages_follow_on, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_take_raises_never_lowers,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_take_skips_bad_records,
	                                        setup, teardown),
	};
	if (fx_group_setup("test_vote_usesync", LOG_LVL_WARN) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
