/*
 * test_store_fmt.c: node/state/store_fmt.c, the store's format number.
 *
 * A new store is stamped with this build's format; a store without a
 * stamp (what grantd 0.1.0 made) opens and is stamped in place, its
 * records kept; a store of a newer format is refused (GD_EPROTO, what
 * makes grantd exit 2) and left as it was; a stamp that is not 8 bytes
 * is an error, never taken for a format.
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
#include "store.h"

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] = {7};

struct fx {
	char dir[128];
	char path[160];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "store_fmt", true) < 0)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/store", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	fx_rmtree(f->dir);
	free(f);
	return 0;
}

static int reopen(struct fx *f, struct store **s, bool *created)
{
	store_destroy(s);
	return store_open(s, created, f->path, seal_key);
}

/* Write meta key k = v (vlen bytes; NULL: delete it), committed. */
static void meta_set(struct store *s, const char *k, const void *v, size_t vlen)
{
	struct store_batch *b;

	assert_int_equal(store_batch_new(&b, s), 0);
	if (v)
		store_put(b, CF_META, k, strlen(k), v, vlen);
	else
		store_del(b, CF_META, k, strlen(k));
	assert_int_equal(store_commit(b, true), 0);
	store_batch_free(&b);
}

static uint64_t format_of(struct store *s)
{
	uint64_t v = 99;

	assert_int_equal(store_fmt_read(s, &v), 0);
	return v;
}

static void test_new_store_stamped(void **state)
{
	struct fx *f = *state;
	struct store *s = NULL;
	bool created = false;

	assert_int_equal(store_open(&s, &created, f->path, seal_key), 0);
	assert_true(created);
	assert_int_equal(format_of(s), STORE_FORMAT);
	assert_int_equal(reopen(f, &s, &created), 0);
	assert_false(created);
	assert_int_equal(format_of(s), STORE_FORMAT);
	store_destroy(&s);
}

/* A store of 0.1.0: records, no stamp.  It opens, is stamped, keeps
 * every record. */
static void test_unstamped_store_migrated(void **state)
{
	struct fx *f = *state;
	struct store *s = NULL;
	struct buf v = BUF_INIT;
	bool created = false;

	assert_int_equal(store_open(&s, &created, f->path, seal_key), 0);
	meta_set(s, STORE_META_FORMAT, NULL, 0);
	meta_set(s, "epoch", "\0\0\0\0\0\0\0\x2a", 8);
	assert_int_equal(format_of(s), STORE_FORMAT_UNSTAMPED);
	assert_int_equal(reopen(f, &s, &created), 0);
	assert_false(created);
	assert_int_equal(format_of(s), STORE_FORMAT);
	assert_int_equal(store_get(s, NULL, CF_META, "epoch", 5, &v), 0);
	assert_int_equal(v.len, 8);
	assert_int_equal(store_get_be64(v.p), 42);
	buf_free(&v);
	store_destroy(&s);
}

/* A newer store: refused, and left as it was (the newer release can
 * still open it). */
static void test_newer_store_refused(void **state)
{
	struct fx *f = *state;
	struct store *s = NULL;
	bool created = false;
	uint8_t be[8];

	assert_int_equal(store_open(&s, &created, f->path, seal_key), 0);
	store_be64(be, STORE_FORMAT + 1);
	meta_set(s, STORE_META_FORMAT, be, sizeof(be));
	assert_int_equal(reopen(f, &s, &created), GD_EPROTO);
	assert_null(s);
	assert_int_equal(reopen(f, &s, &created), GD_EPROTO);
	assert_null(s);
}

/* A stamp of the wrong size is not a format. */
static void test_bad_stamp_refused(void **state)
{
	struct fx *f = *state;
	struct store *s = NULL;
	bool created = false;

	assert_int_equal(store_open(&s, &created, f->path, seal_key), 0);
	meta_set(s, STORE_META_FORMAT, "\x01", 1);
	assert_int_equal(reopen(f, &s, &created), GD_EIO);
	assert_null(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_new_store_stamped, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_unstamped_store_migrated,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_newer_store_refused, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_bad_stamp_refused, setup,
	                                        teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
