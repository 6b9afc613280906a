/*
 * test_oplog.c: node/state/oplog.h, how the operation log stores a signed
 * operation (compact, its batch's record once) and gives it back whole.
 *
 *   - a peer's signed operation is logged compact (path kept, no
 *     signature) and read back, alone or in a run, as the bytes sent;
 *   - this site's batch is logged with its index only, the paths read
 *     from the record's table;
 *   - an operation whose batch's seq already has another batch's record
 *     (a dishonest origin signed two batches over it) is logged whole;
 *   - an entry without a signature is logged and read as it is;
 *   - the retention's cut keeps the record of a batch that goes on past
 *     it, and drops it with the batch's last entry or the stream's end;
 *   - an entry whose record is gone is refused, not handed on unsigned.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "fixture.h"
#include "oplog.h"
#include "opsig.h"
#include "records.h"
#include "store.h"

struct env {
	char dir[256];
	struct store *s;
	struct opsig_signer peer;
};

static int setup(void **state)
{
	static const uint8_t seal[STORE_SEAL_KEY_LEN] = {1};
	uint8_t curve[32] = {5};
	struct env *e = calloc(1, sizeof(*e));

	if (!e || fx_mkdtemp(e->dir, sizeof(e->dir), "test_oplog", true) < 0 ||
	    fx_store_open(&e->s, NULL, e->dir, NULL, seal) < 0 ||
	    opsig_signer_init(&e->peer, curve, "localhost/grantd/peer") < 0)
		return -1;
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	fx_store_close(&e->s, NULL);
	fx_rmtree(e->dir);
	opsig_signer_wipe(&e->peer);
	free(e);
	return 0;
}

/* n users of origin "peer", seqs first.., signed as one batch by the
 * peer's key (the bytes sent, as a peer would send them) into b[0..n). */
static void peer_batch(struct env *e, struct buf *b, size_t n, uint64_t first)
{
	static uint8_t chain[OPSIG_HASH_LEN];
	struct buf **p = calloc(n, sizeof(*p));

	assert_non_null(p);
	for (size_t i = 0; i < n; i++) {
		struct fx_op t;
		char name[32];
		snprintf(name, sizeof(name), "u%llu",
		         (unsigned long long)(first + i));
		Grantd__V1__Op *op = fx_op_user(&t, "peer", first + i,
		                                FX_HLC(1000 + first + i, 0),
		                                name, NULL, false);
		b[i] = (struct buf)BUF_INIT;
		records_pack(&b[i], &op->base);
		p[i] = &b[i];
	}
	assert_int_equal(opsig_sign_batch(&e->peer, chain, p, n), 0);
	free(p);
}

static void key_of(struct buf *k, uint64_t seq)
{
	buf_reset(k);
	records_key_oplog(k, "peer", FX_EPOCH, seq);
}

/* Log the sent bytes b as the writer logs a peer's operation. */
static void put_peer(struct env *e, struct oplog_cache *c, const struct buf *b)
{
	struct store_batch *sb;
	Grantd__V1__Op *op =
	        grantd__v1__op__unpack(NULL, b->len, (const uint8_t *)b->p);
	assert_non_null(op);
	assert_int_equal(store_batch_new(&sb, e->s), 0);
	oplog_put(e->s, sb, c, op);
	assert_int_equal(store_commit(sb, false), 0);
	store_batch_free(&sb);
	grantd__v1__op__free_unpacked(op, NULL);
}

/* The raw entry at seq, and the whole one: the whole is want. */
static size_t
raw_then_whole(struct env *e, uint64_t seq, const struct buf *want)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	size_t raw;

	key_of(&k, seq);
	assert_int_equal(store_get(e->s, NULL, CF_OPLOG, k.p, k.len, &v), 0);
	raw = v.len;
	assert_int_equal(oplog_get(e->s, NULL, k.p, k.len, &v), 0);
	assert_int_equal(v.len, want->len);
	assert_memory_equal(v.p, want->p, v.len);
	buf_free(&k);
	buf_free(&v);
	return raw;
}

static bool has_record(struct env *e, uint64_t last)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	key_of(&k, last);
	rc = store_get(e->s, NULL, CF_OPBATCH, k.p, k.len, &v);
	buf_free(&k);
	buf_free(&v);
	return rc == 0;
}

static void test_peer_compact(void **state)
{
	struct env *e = *state;
	struct oplog_cache c = {BUF_INIT, BUF_INIT};
	struct buf b[5];

	peer_batch(e, b, 5, 1);
	for (size_t i = 0; i < 5; i++)
		put_peer(e, &c, &b[i]);
	assert_true(has_record(e, 5));
	for (size_t i = 0; i < 5; i++) {
		size_t raw = raw_then_whole(e, i + 1, &b[i]);
		/* the signature, prev and root are the record's */
		assert_true(raw + OPSIG_SIG_LEN + 2 * OPSIG_HASH_LEN <=
		            b[i].len);
	}
	/* a run read with one cache, as a range is served */
	struct store_iter *it;
	struct buf k = BUF_INIT, v = BUF_INIT;
	const char *key;
	size_t klen, i = 0;
	key_of(&k, 1);
	assert_int_equal(store_iter_new_at(&it, e->s, NULL, CF_OPLOG, k.p,
	                                   k.len - 8, k.p, k.len),
	                 0);
	oplog_cache_reset(&c);
	while (store_iter_next(it, &key, &klen, &v) > 0) {
		assert_int_equal(oplog_whole(e->s, NULL, &c, key, klen, &v), 0);
		assert_true(i < 5);
		assert_int_equal(v.len, b[i].len);
		assert_memory_equal(v.p, b[i].p, v.len);
		i++;
	}
	assert_int_equal(i, 5);
	store_iter_free(&it);
	buf_free(&k);
	buf_free(&v);
	for (i = 0; i < 5; i++)
		buf_free(&b[i]);
	oplog_cache_free(&c);
}

static void test_local_batch(void **state)
{
	struct env *e = *state;
	uint8_t chain[OPSIG_HASH_LEN] = {0};
	struct buf b[7], lg[7], rec = BUF_INIT;
	struct buf *p[7], *l[7];
	struct store_batch *sb;
	struct fx_op t;

	for (size_t i = 0; i < 7; i++) {
		Grantd__V1__Op *op =
		        fx_op_user(&t, "peer", 10 + i, FX_HLC(2000 + i, 0), "x",
		                   NULL, false);
		b[i] = (struct buf)BUF_INIT;
		lg[i] = (struct buf)BUF_INIT;
		records_pack(&b[i], &op->base);
		p[i] = &b[i], l[i] = &lg[i];
	}
	assert_int_equal(
	        opsig_sign_batch_logged(&e->peer, chain, p, 7, l, &rec), 0);
	assert_int_equal(store_batch_new(&sb, e->s), 0);
	oplog_put_batch(sb, "peer", FX_EPOCH, 10, l, 7, &rec);
	assert_int_equal(store_commit(sb, false), 0);
	store_batch_free(&sb);
	assert_true(has_record(e, 16));
	for (size_t i = 0; i < 7; i++) {
		size_t raw = raw_then_whole(e, 10 + i, &b[i]);
		assert_int_equal(raw, lg[i].len);
		/* no path, no signature in the entry */
		assert_true(raw + OPSIG_SIG_LEN + 3 * OPSIG_HASH_LEN <=
		            b[i].len);
		buf_free(&b[i]);
		buf_free(&lg[i]);
	}
	buf_free(&rec);
}

/* Two batches of the peer over seq 21: the second's operation is logged
 * whole, and both read back as sent. */
static void test_two_batches_one_seq(void **state)
{
	struct env *e = *state;
	struct oplog_cache c = {BUF_INIT, BUF_INIT};
	struct buf a[2], x[1];

	peer_batch(e, a, 2, 20); /* 20, 21: record at 21 */
	put_peer(e, &c, &a[0]);
	peer_batch(e, x, 1, 21); /* another batch ending at 21 */
	oplog_cache_reset(&c); /* a new store batch: read from the store */
	put_peer(e, &c, &x[0]);
	assert_int_equal(raw_then_whole(e, 20, &a[0]) < a[0].len, true);
	assert_int_equal(raw_then_whole(e, 21, &x[0]), x[0].len);
	buf_free(&a[0]), buf_free(&a[1]), buf_free(&x[0]);
	oplog_cache_free(&c);
}

static void test_unsigned(void **state)
{
	struct env *e = *state;
	struct oplog_cache c = {BUF_INIT, BUF_INIT};
	struct fx_op t;
	struct buf b = BUF_INIT;
	Grantd__V1__Op *op =
	        fx_op_user(&t, "peer", 30, FX_HLC(3000, 0), "n", NULL, false);

	records_pack(&b, &op->base);
	put_peer(e, &c, &b);
	assert_int_equal(raw_then_whole(e, 30, &b), b.len);
	buf_free(&b);
	oplog_cache_free(&c);
}

static void cut(struct env *e, uint64_t from, uint64_t to, bool stream_end)
{
	struct buf a = BUF_INIT, z = BUF_INIT;

	key_of(&a, from);
	key_of(&z, to + 1);
	assert_int_equal(oplog_cut(e->s, a.p, a.len, z.p, z.len, stream_end),
	                 0);
	buf_free(&a);
	buf_free(&z);
}

static void test_cut(void **state)
{
	struct env *e = *state;
	struct oplog_cache c = {BUF_INIT, BUF_INIT};
	struct buf b[4], k = BUF_INIT, v = BUF_INIT;

	peer_batch(e, b, 4, 40); /* 40..43: record at 43 */
	for (size_t i = 0; i < 3; i++) /* 43 not here yet */
		put_peer(e, &c, &b[i]);
	/* the run up to 41: the batch goes on, its record stays */
	cut(e, 40, 41, false);
	assert_true(has_record(e, 43));
	raw_then_whole(e, 42, &b[2]);
	/* 42 cut as its stream's last entry: the record goes too */
	cut(e, 42, 42, true);
	assert_false(has_record(e, 43));
	/* 43 arrives later: its record is written again with it */
	oplog_cache_reset(&c);
	put_peer(e, &c, &b[3]);
	assert_true(has_record(e, 43));
	raw_then_whole(e, 43, &b[3]);
	/* the batch's last entry cut: its record with it */
	cut(e, 43, 43, false);
	assert_false(has_record(e, 43));
	for (size_t i = 0; i < 4; i++)
		buf_free(&b[i]);
	buf_free(&k);
	buf_free(&v);
	oplog_cache_free(&c);
}

/* A compact entry whose record is gone is refused: never handed on
 * without its signature. */
static void test_record_missing(void **state)
{
	struct env *e = *state;
	struct oplog_cache c = {BUF_INIT, BUF_INIT};
	struct buf b[2], k = BUF_INIT, v = BUF_INIT;
	struct store_batch *sb;

	peer_batch(e, b, 2, 50);
	put_peer(e, &c, &b[0]);
	key_of(&k, 51);
	assert_int_equal(store_batch_new(&sb, e->s), 0);
	store_del(sb, CF_OPBATCH, k.p, k.len);
	assert_int_equal(store_commit(sb, false), 0);
	store_batch_free(&sb);
	key_of(&k, 50);
	assert_int_equal(oplog_get(e->s, NULL, k.p, k.len, &v), GD_EPROTO);
	buf_free(&b[0]), buf_free(&b[1]);
	buf_free(&k);
	buf_free(&v);
	oplog_cache_free(&c);
}

static int group_setup(void **state)
{
	(void)state;
	return fx_group_setup("test_oplog", LOG_LVL_ERROR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_peer_compact, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_local_batch, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_two_batches_one_seq, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_unsigned, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_cut, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_record_missing, setup,
	                                        teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, fx_group_teardown);
}
