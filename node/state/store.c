/*
 * store.c: RocksDB behind a small interface.
 *
 * Why a WriteBatchWithIndex and not a TransactionDB: the node has exactly
 * one writer thread, which already serialises every read-modify-write, so
 * transactions would only add locking; what we need is reads that see the
 * batch being built (two requests of one batch touching the same user) and
 * one synced write per batch (group commit).  The index gives both.
 */
#include <errno.h>
#include <stdio.h>
#include <rocksdb/c.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "crashpoint.h"
#include "err.h"
#include "grantd.pb-c.h"
#include "log.h"
#include "store.h"
#include "store_int.h"
#include "xalloc.h"
#include "banned.h"

static const char *const cf_names[CF__COUNT] = {
#define STORE_CF_NAME(cf, name, body, desc, merge, sealed, snap, live, mirror)         \
	[CF_##cf] = name,
	GD_RECORD_KINDS(STORE_CF_NAME)
#undef STORE_CF_NAME
};

const char *store_cf_name(enum store_cf cf)
{
	return cf >= 0 && cf < CF__COUNT ? cf_names[cf] : "?";
}

static bool cf_sealed(enum store_cf cf)
{
	const struct records_kind *k = records_kind(cf);
	return k && k->sealed;
}

struct store {
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_options_t *cf_opts[CF__COUNT];
	rocksdb_cache_t *cache;                 /* shared by every family */
	rocksdb_block_based_table_options_t *table;
	rocksdb_column_family_handle_t *cf[CF__COUNT];
	rocksdb_readoptions_t *ropts;
	rocksdb_writeoptions_t *wsync;
	rocksdb_writeoptions_t *wnosync;
	uint8_t key[STORE_SEAL_KEY_LEN];
	/* after store_rekey: the key values on disk may still be sealed with
	 * (until the rekey's batch commits, and if it fails) */
	uint8_t old_key[STORE_SEAL_KEY_LEN];
	bool has_old_key;
	struct store_batch *rekey_batch; /* the batch holding a rekey */
	/* nonces: a random prefix per open and a counter, unique under the
	 * key without a getrandom call per sealed value */
	uint8_t nonce_prefix[crypto_secretbox_NONCEBYTES - 8];
	uint64_t nonce_ctr;
};

struct store_batch {
	struct store *s;
	rocksdb_writebatch_wi_t *wb;
	struct buf scratch;
	/* RocksDB's save points, oldest first: 1 while open, 0 once
	 * released (the C API cannot pop one, so a released point stays on
	 * RocksDB's stack and a rollback passes over it) */
	uint8_t *saves;
	size_t nsaves, capsaves;
	bool broken;   /* a rollback failed: the batch is never written */
	/* a read view (store_view_new): no wb, a snapshot, and the keys
	 * sealed values may be under, copied when it was taken */
	const rocksdb_snapshot_t *snap;
	rocksdb_readoptions_t *ropts;
	uint8_t key[STORE_SEAL_KEY_LEN];
	uint8_t old_key[STORE_SEAL_KEY_LEN];
	bool has_old_key;
	/* a view's iterator per family, idle between two store_iter_new:
	 * made once, sought again (a push check reads two prefixes) */
	rocksdb_iterator_t *idle[CF__COUNT];
};

struct store_iter {
	struct store *s;
	struct store_batch *view; /* its keys open sealed values; the
				   * rocksdb iterator goes back to its idle */
	enum store_cf cf;
	rocksdb_iterator_t *it;
	char *prefix;
	size_t plen;
	char *start;
	size_t slen;
	bool started;
};

void store_be64(uint8_t out[8], uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		out[i] = (uint8_t)v;
		v >>= 8;
	}
}

uint64_t store_get_be64(const void *p)
{
	const uint8_t *b = p;
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

/* The memory the store may hold, whatever the number of records (issue 9:
 * 1,000,000 grants in 200 MB).  RocksDB's defaults give every family its
 * own 64 MB memtables (two each, a dozen families) and the WAL no bound, so
 * a loaded node held 350 MB and replayed its whole WAL at start.  Here:
 * all memtables together at most STORE_MEMTABLES (a full one is flushed),
 * the WAL at most STORE_WAL (older families are flushed to cut it: start-up
 * replays little), one block cache for every family (the default is 8 MB
 * per family), and a Bloom filter per table so a point read of a missing
 * key seldom touches a data block.  Index and filter blocks stay with the
 * table readers, outside the cache: in a 32 MB cache they were evicted by
 * data blocks and a push check at 1,000,000 grants read them from disk
 * again (p99 277 us became 1.5 ms in bench/run-scale). */
#define STORE_MEMTABLES (64u << 20)
#define STORE_CF_MEMTABLE (16u << 20)
#define STORE_WAL (128u << 20)
#define STORE_BLOCK_CACHE (32u << 20)

static void budget(struct store *s)
{
	rocksdb_options_set_db_write_buffer_size(s->opts, STORE_MEMTABLES);
	rocksdb_options_set_max_total_wal_size(s->opts, STORE_WAL);
	s->cache = rocksdb_cache_create_lru(STORE_BLOCK_CACHE);
	s->table = rocksdb_block_based_options_create();
	rocksdb_block_based_options_set_block_cache(s->table, s->cache);
	rocksdb_block_based_options_set_filter_policy(
		s->table, rocksdb_filterpolicy_create_bloom(10));
}

int store_open(struct store **out, bool *created, const char *path,
	       const uint8_t seal_key[STORE_SEAL_KEY_LEN])
{
	struct store *s = xcalloc(1, sizeof(*s));
	char *err = NULL;
	struct stat st;

	*out = NULL;
	memcpy(s->key, seal_key, STORE_SEAL_KEY_LEN);
	randombytes_buf(s->nonce_prefix, sizeof(s->nonce_prefix));
	{
		char cur[4096];
		snprintf(cur, sizeof(cur), "%s/CURRENT", path);
		*created = stat(cur, &st) < 0;
	}
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		log_error("cannot create store dir=%s: %s", path,
			  strerror(errno));
		free(s);
		return GD_EIO;
	}
	s->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(s->opts, 1);
	rocksdb_options_set_create_missing_column_families(s->opts, 1);
	rocksdb_options_increase_parallelism(s->opts, 2);
	rocksdb_options_set_max_open_files(s->opts, 512);
	/* A flush writes a 16 MB table and syncs it at the end: that burst
	 * held up the WAL's fdatasync of the commits beside it (val p99 at
	 * 32 clients 5.5-7.0 ms).  Synced 1 MiB at a time as it is written,
	 * 4.5-4.8 ms (docs/benchmarks.md, 2026-12-05). */
	rocksdb_options_set_bytes_per_sync(s->opts, 1u << 20);
	budget(s);
	for (int i = 0; i < CF__COUNT; i++) {
		s->cf_opts[i] = rocksdb_options_create();
		rocksdb_options_set_create_if_missing(s->cf_opts[i], 1);
		rocksdb_options_set_write_buffer_size(s->cf_opts[i],
						      STORE_CF_MEMTABLE);
		rocksdb_options_set_block_based_table_factory(s->cf_opts[i],
							      s->table);
	}
	s->db = rocksdb_open_column_families(
		s->opts, path, CF__COUNT, (const char *const *)cf_names,
		(const rocksdb_options_t *const *)s->cf_opts, s->cf, &err);
	if (err) {
		log_error("cannot open store dir=%s: %s", path, err);
		rocksdb_free(err);
		s->db = NULL;
		store_destroy(&s);
		return GD_EIO;
	}
	s->ropts = rocksdb_readoptions_create();
	s->wsync = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(s->wsync, 1);
	s->wnosync = rocksdb_writeoptions_create();
	int rc = store_fmt_open(s, path, *created);
	if (rc < 0) {
		store_destroy(&s);
		return rc;
	}
	*out = s;
	return 0;
}

void store_destroy(struct store **sp)
{
	struct store *s = *sp;
	if (!s)
		return;
	for (int i = 0; i < CF__COUNT; i++)
		if (s->cf[i])
			rocksdb_column_family_handle_destroy(s->cf[i]);
	if (s->db)
		rocksdb_close(s->db);
	for (int i = 0; i < CF__COUNT; i++)
		if (s->cf_opts[i])
			rocksdb_options_destroy(s->cf_opts[i]);
	if (s->opts)
		rocksdb_options_destroy(s->opts);
	if (s->table)
		rocksdb_block_based_options_destroy(s->table);
	if (s->cache)
		rocksdb_cache_destroy(s->cache);
	if (s->ropts)
		rocksdb_readoptions_destroy(s->ropts);
	if (s->wsync)
		rocksdb_writeoptions_destroy(s->wsync);
	if (s->wnosync)
		rocksdb_writeoptions_destroy(s->wnosync);
	sodium_memzero(s->key, sizeof(s->key));
	sodium_memzero(s->old_key, sizeof(s->old_key));
	free(s);
	*sp = NULL;
}

void store_seal_key(uint8_t out[STORE_SEAL_KEY_LEN], const uint8_t sec[32])
{
	static const char dom[] = "grantd seal v1";

	crypto_generichash(out, STORE_SEAL_KEY_LEN, (const uint8_t *)dom,
			   sizeof(dom), sec, 32);
}

/* value = nonce || secretbox(plain) */
static void seal(struct store *s, struct buf *out, const void *p, size_t n)
{
	uint8_t nonce[crypto_secretbox_NONCEBYTES];
	size_t clen = n + crypto_secretbox_MACBYTES;

	memcpy(nonce, s->nonce_prefix, sizeof(s->nonce_prefix));
	store_be64(nonce + sizeof(s->nonce_prefix), ++s->nonce_ctr);
	buf_reset(out);
	buf_add(out, nonce, sizeof(nonce));
	crypto_secretbox_easy(buf_extend(out, clen), p, n, nonce, s->key);
}

static int unseal(const uint8_t *key, const uint8_t *old_key, struct buf *out,
		  const char *v, size_t n)
{
	size_t hdr = crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES;

	buf_reset(out);
	if (n < hdr)
		return GD_ECRYPTO;
	size_t plen = n - hdr;
	uint8_t *p = buf_extend(out, plen);
	const uint8_t *c = (const uint8_t *)v + crypto_secretbox_NONCEBYTES;
	if (crypto_secretbox_open_easy(p, c, n - crypto_secretbox_NONCEBYTES,
				       (const uint8_t *)v, key) != 0 &&
	    (!old_key ||
	     crypto_secretbox_open_easy(p, c, n - crypto_secretbox_NONCEBYTES,
					(const uint8_t *)v, old_key) != 0)) {
		buf_reset(out);
		return GD_ECRYPTO;
	}
	out->len = plen;
	return 0;
}

/* view: a read view, whose own copy of the keys is used (NULL: the
 * store's, writer thread) */
static int set_value(struct store *s, const struct store_batch *view,
		     enum store_cf cf, struct buf *val, const char *v, size_t n)
{
	if (cf_sealed(cf)) {
		const uint8_t *key = view ? view->key : s->key;
		bool old = view ? view->has_old_key : s->has_old_key;
		int rc = unseal(key, !old ? NULL : view ? view->old_key :
						     s->old_key,
				val, v, n);
		if (rc < 0)
			log_error("sealed value does not open cf=%s (wrong key "
				  "file?)", cf_names[cf]);
		return rc;
	}
	buf_reset(val);
	buf_add(val, v, n);
	return 0;
}

int store_get(struct store *s, struct store_batch *b, enum store_cf cf,
	      const void *key, size_t klen, struct buf *val)
{
	char *err = NULL, *v;
	size_t n = 0;
	int rc;

	if (b && b->snap)
		v = rocksdb_get_cf(s->db, b->ropts, s->cf[cf], key, klen, &n,
				   &err);
	else if (b)
		v = rocksdb_writebatch_wi_get_from_batch_and_db_cf(
			b->wb, s->db, s->ropts, s->cf[cf], key, klen, &n,
			&err);
	else
		v = rocksdb_get_cf(s->db, s->ropts, s->cf[cf], key, klen, &n,
				   &err);
	if (err) {
		log_error("store read failed cf=%s: %s", cf_names[cf], err);
		rocksdb_free(err);
		return GD_EIO;
	}
	if (cf == CF_ENROLL && faultpoint("read-enroll")) {
		rocksdb_free(v);
		log_error("store read failed cf=%s: test fault "
			  "(GRANTD_TEST_FAULT_AT)", cf_names[cf]);
		return GD_EIO;
	}
	if (!v)
		return GD_ENOTFOUND;
	rc = set_value(s, b && b->snap ? b : NULL, cf, val, v, n);
	rocksdb_free(v);
	return rc;
}

int store_batch_new(struct store_batch **out, struct store *s)
{
	struct store_batch *b = xcalloc(1, sizeof(*b));
	b->s = s;
	b->wb = rocksdb_writebatch_wi_create(0, 1);
	*out = b;
	return 0;
}

/* A batch with a rekey that never committed: seal with the old key again
 * (what is on disk). */
static void rekey_undo(struct store_batch *b)
{
	struct store *s = b->s;

	if (s->rekey_batch != b)
		return;
	memcpy(s->key, s->old_key, sizeof(s->key));
	s->rekey_batch = NULL;
	log_warn("store rekey undone: its batch was not committed");
}

void store_batch_free(struct store_batch **bp)
{
	struct store_batch *b = *bp;
	if (!b)
		return;
	if (b->snap) {
		for (int cf = 0; cf < CF__COUNT; cf++)
			if (b->idle[cf])
				rocksdb_iter_destroy(b->idle[cf]);
		rocksdb_release_snapshot(b->s->db, b->snap);
		rocksdb_readoptions_destroy(b->ropts);
		sodium_memzero(b->key, sizeof(b->key));
		sodium_memzero(b->old_key, sizeof(b->old_key));
		free(b);
		*bp = NULL;
		return;
	}
	rekey_undo(b);
	rocksdb_writebatch_wi_destroy(b->wb);
	buf_free(&b->scratch);
	free(b->saves);
	free(b);
	*bp = NULL;
}

void store_batch_clear(struct store_batch *b)
{
	if (b->snap)
		return;
	rekey_undo(b);
	rocksdb_writebatch_wi_clear(b->wb); /* and its save points */
	b->nsaves = 0;
	b->broken = false;
}

int store_view_new(struct store_batch **out, struct store *s)
{
	struct store_batch *b = xcalloc(1, sizeof(*b));

	b->s = s;
	b->snap = rocksdb_create_snapshot(s->db);
	b->ropts = rocksdb_readoptions_create();
	rocksdb_readoptions_set_snapshot(b->ropts, b->snap);
	memcpy(b->key, s->key, sizeof(b->key));
	memcpy(b->old_key, s->old_key, sizeof(b->old_key));
	b->has_old_key = s->has_old_key;
	*out = b;
	return 0;
}

bool store_batch_is_view(const struct store_batch *b)
{
	return b && b->snap;
}

/* A view is never written: a caller that tries has a bug. */
static void refuse_view(const struct store_batch *b, const char *what)
{
	if (b->snap)
		log_error("store %s on a read view (a bug)", what);
	GD_ASSERT(!b->snap);
}

void store_put(struct store_batch *b, enum store_cf cf, const void *key,
	       size_t klen, const void *val, size_t vlen)
{
	refuse_view(b, "put");
	if (cf_sealed(cf)) {
		seal(b->s, &b->scratch, val, vlen);
		val = b->scratch.p;
		vlen = b->scratch.len;
	}
	rocksdb_writebatch_wi_put_cf(b->wb, b->s->cf[cf], key, klen, val,
				     vlen);
}

void store_del(struct store_batch *b, enum store_cf cf, const void *key,
	       size_t klen)
{
	refuse_view(b, "delete");
	rocksdb_writebatch_wi_delete_cf(b->wb, b->s->cf[cf], key, klen);
}

int store_batch_count(struct store_batch *b)
{
	if (b->snap)
		return 0;
	return rocksdb_writebatch_wi_count(b->wb);
}

void store_batch_savepoint(struct store_batch *b)
{
	refuse_view(b, "save point");
	GD_GROW(b->saves, b->capsaves, b->nsaves + 1);
	rocksdb_writebatch_wi_set_save_point(b->wb);
	b->saves[b->nsaves++] = 1;
}

void store_batch_release(struct store_batch *b)
{
	for (size_t i = b->nsaves; i > 0; i--)
		if (b->saves[i - 1]) {
			b->saves[i - 1] = 0;
			return;
		}
}

int store_batch_rollback(struct store_batch *b)
{
	char *err = NULL;

	/* roll back to each released point above the open one, then to it:
	 * the writes after the open point are gone, the ones before kept */
	while (b->nsaves > 0) {
		uint8_t open = b->saves[--b->nsaves];
		rocksdb_writebatch_wi_rollback_to_save_point(b->wb, &err);
		if (err) {
			log_error("store rollback failed: %s", err);
			rocksdb_free(err);
			b->broken = true;
			return GD_EIO;
		}
		if (open)
			return 0;
	}
	log_error("store rollback without a save point");
	return GD_EINVAL;
}

int store_delete_range(struct store *s, enum store_cf cf, const void *begin,
		       size_t blen, const void *end, size_t elen)
{
	char *err = NULL;

	rocksdb_delete_range_cf(s->db, s->wnosync, s->cf[cf], begin, blen, end,
				elen, &err);
	if (err) {
		log_error("store range delete failed cf=%s: %s",
			  store_cf_name(cf), err);
		rocksdb_free(err);
		return GD_EIO;
	}
	return 0;
}

int store_commit(struct store_batch *b, bool sync)
{
	char *err = NULL;

	if (b->snap)
		return GD_EINVAL;
	if (b->broken) {
		log_error("store write refused: a rollback of this batch "
			  "failed");
		rocksdb_writebatch_wi_clear(b->wb);
		b->nsaves = 0;
		b->broken = false;
		return GD_EIO;
	}
	if (rocksdb_writebatch_wi_count(b->wb) == 0) {
		rocksdb_writebatch_wi_clear(b->wb); /* save points only */
		b->nsaves = 0;
		return 0;
	}
	rocksdb_write_writebatch_wi(b->s->db, sync ? b->s->wsync : b->s->wnosync,
				    b->wb, &err);
	rocksdb_writebatch_wi_clear(b->wb); /* and its save points */
	b->nsaves = 0;
	if (err) {
		log_error("store write failed: %s", err);
		rocksdb_free(err);
		rekey_undo(b);
		return GD_EIO;
	}
	if (b->s->rekey_batch == b)
		b->s->rekey_batch = NULL; /* the new key is the one on disk */
	return 0;
}

/* One sealed value read for store_rekey: family, key, value in the clear. */
struct resealed {
	enum store_cf cf;
	struct buf key, val;
};

static void resealed_free(struct resealed *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].val.p)
			sodium_memzero(v[i].val.p, v[i].val.len);
		buf_free(&v[i].key);
		buf_free(&v[i].val);
	}
	free(v);
}

/* Every value of the sealed families as b sees it, in the clear. */
static int read_sealed(struct store *s, struct store_batch *b,
		       struct resealed **out, size_t *nout)
{
	struct resealed *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	for (int cf = 0; cf < CF__COUNT && rc >= 0; cf++) {
		struct store_iter *it;
		const char *key;
		size_t klen;
		if (!cf_sealed((enum store_cf)cf))
			continue;
		store_iter_new(&it, s, b, (enum store_cf)cf, "", 0);
		for (;;) {
			GD_GROW(v, cap, n + 1);
			memset(&v[n], 0, sizeof(v[n]));
			rc = store_iter_next(it, &key, &klen, &v[n].val);
			if (rc <= 0) {
				buf_free(&v[n].val);
				break;
			}
			v[n].cf = (enum store_cf)cf;
			buf_add(&v[n].key, key, klen);
			n++;
		}
		store_iter_free(&it);
	}
	*out = v;
	*nout = n;
	return rc;
}

int store_rekey(struct store *s, struct store_batch *b,
		const uint8_t new_key[STORE_SEAL_KEY_LEN], size_t *count)
{
	struct resealed *v = NULL;
	size_t n = 0;
	int rc;

	*count = 0;
	if (b->snap)
		return GD_EINVAL;
	if (s->rekey_batch)
		return GD_EAGAIN; /* one rekey per batch */
	if ((rc = read_sealed(s, b, &v, &n)) < 0) {
		resealed_free(v, n);
		return rc;
	}
	memcpy(s->old_key, s->key, sizeof(s->key));
	s->has_old_key = true;
	memcpy(s->key, new_key, sizeof(s->key));
	s->rekey_batch = n ? b : NULL; /* none: nothing to undo */
	for (size_t i = 0; i < n; i++)
		store_put(b, v[i].cf, v[i].key.p, v[i].key.len, v[i].val.p,
			  v[i].val.len);
	*count = n;
	resealed_free(v, n);
	return 0;
}

int store_iter_new(struct store_iter **out, struct store *s,
		   struct store_batch *b, enum store_cf cf, const void *prefix,
		   size_t plen)
{
	struct store_iter *it = xcalloc(1, sizeof(*it));
	it->s = s;
	it->cf = cf;
	it->view = b && b->snap ? b : NULL;
	if (it->view && b->idle[cf]) {
		it->it = b->idle[cf];
		b->idle[cf] = NULL;
	} else {
		it->it = rocksdb_create_iterator_cf(
			s->db, it->view ? b->ropts : s->ropts, s->cf[cf]);
	}
	if (b && !b->snap)
		it->it = rocksdb_writebatch_wi_create_iterator_with_base_cf(
			b->wb, it->it, s->cf[cf]);
	it->prefix = xmalloc(plen ? plen : 1);
	if (plen) /* prefix may be NULL for the whole family */
		memcpy(it->prefix, prefix, plen);
	it->plen = plen;
	*out = it;
	return 0;
}

int store_iter_new_at(struct store_iter **out, struct store *s,
		      struct store_batch *b, enum store_cf cf,
		      const void *prefix, size_t plen, const void *start,
		      size_t slen)
{
	int rc = store_iter_new(out, s, b, cf, prefix, plen);
	if (rc < 0)
		return rc;
	(*out)->start = xmalloc(slen ? slen : 1);
	memcpy((*out)->start, start, slen);
	(*out)->slen = slen;
	return 0;
}

int store_iter_next(struct store_iter *it, const char **key, size_t *klen,
		    struct buf *val)
{
	size_t vlen;
	const char *v;
	char *err = NULL;

	if (!it->started) {
		it->started = true;
		if (it->start)
			rocksdb_iter_seek(it->it, it->start, it->slen);
		else if (it->plen)
			rocksdb_iter_seek(it->it, it->prefix, it->plen);
		else
			rocksdb_iter_seek_to_first(it->it);
	} else {
		rocksdb_iter_next(it->it);
	}
	if (!rocksdb_iter_valid(it->it)) {
		rocksdb_iter_get_error(it->it, &err);
		if (err) {
			log_error("store iteration failed: %s", err);
			rocksdb_free(err);
			return GD_EIO;
		}
		return 0;
	}
	*key = rocksdb_iter_key(it->it, klen);
	if (*klen < it->plen || memcmp(*key, it->prefix, it->plen))
		return 0;
	v = rocksdb_iter_value(it->it, &vlen);
	int rc = set_value(it->s, it->view, it->cf, val, v, vlen);
	return rc < 0 ? rc : 1;
}

void store_iter_seek(struct store_iter *it, const void *key, size_t klen)
{
	free(it->start);
	it->start = xmalloc(klen ? klen : 1);
	memcpy(it->start, key, klen);
	it->slen = klen;
	it->started = false;
}

void store_iter_free(struct store_iter **itp)
{
	struct store_iter *it = *itp;
	if (!it)
		return;
	char *err = NULL;
	if (it->view && !it->view->idle[it->cf])
		rocksdb_iter_get_error(it->it, &err);
	if (it->view && !it->view->idle[it->cf] && !err)
		it->view->idle[it->cf] = it->it; /* kept for the next */
	else
		rocksdb_iter_destroy(it->it);
	rocksdb_free(err);
	free(it->prefix);
	free(it->start);
	free(it);
	*itp = NULL;
}

int store_sync(struct store *s)
{
	char *err = NULL;
	rocksdb_flush_wal(s->db, 1, &err);
	if (err) {
		log_error("store sync failed: %s", err);
		rocksdb_free(err);
		return GD_EIO;
	}
	return 0;
}

int store_checkpoint(struct store *s, const char *dir)
{
	char *err = NULL;
	rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(s->db, &err);
	if (!err)
		rocksdb_checkpoint_create(cp, dir, 0, &err);
	if (cp)
		rocksdb_checkpoint_object_destroy(cp);
	if (err) {
		log_error("checkpoint failed dir=%s: %s", dir, err);
		rocksdb_free(err);
		return GD_EIO;
	}
	return 0;
}

