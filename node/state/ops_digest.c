/*
 * ops_digest.c: the state digest (digest.h: the XOR of one hash per
 * record) kept per replicated family: the toggle every record change goes
 * through, the digest made again from the records at open, ops_verify
 * (`grantctl verify`), and the public digest a mirror compares.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "ops_int.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

/* The digest of every replicated family, from the committed records;
 * records and counts (the live records, ops_count) may be NULL. */
static int digest_scan(struct ops *o, uint8_t fam[CF__COUNT][DIGEST_LEN],
		       uint64_t records[CF__COUNT], struct ops_count *counts)
{
	struct buf v = BUF_INIT;
	int rc = 0;

	memset(fam, 0, CF__COUNT * DIGEST_LEN);
	for (int cf = 0; rc == 0 && cf < CF__COUNT; cf++) {
		struct store_iter *it;
		const char *key;
		size_t klen;
		if (!records_replicated(cf))
			continue;
		store_iter_new(&it, o->store, NULL, cf, "", 0);
		while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
			digest_toggle(fam[cf], cf, key, klen, v.p, v.len);
			if (records)
				records[cf]++;
			if (counts)
				ops_count_record(o, counts, cf, v.p, v.len, 1,
					     false);
		}
		store_iter_free(&it);
	}
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	return rc;
}

static void digest_total(uint8_t d[DIGEST_LEN],
			 uint8_t fam[CF__COUNT][DIGEST_LEN])
{
	memset(d, 0, DIGEST_LEN);
	for (int cf = 0; cf < CF__COUNT; cf++)
		digest_xor(d, fam[cf]);
}

/* At open the digest is made again from the records, which are what every
 * decision reads: a stored digest that differs (a bug, or a store written
 * by an older grantd that could split them) is reported and replaced, so
 * no split outlives a restart. */
int ops_digest_open(struct ops *o, struct store_batch *b)
{
	uint8_t d[DIGEST_LEN];
	int rc = digest_scan(o, o->fam_digest, NULL, o->counts);

	if (rc < 0)
		return rc;
	digest_total(d, o->fam_digest);
	if (memcmp(d, o->digest, DIGEST_LEN)) {
		static const uint8_t zero[DIGEST_LEN];
		char had[2 * DIGEST_LEN + 1], want[2 * DIGEST_LEN + 1];
		digest_hex(had, o->digest);
		digest_hex(want, d);
		if (memcmp(o->digest, zero, DIGEST_LEN))
			log_error("state digest did not match the records "
				  "stored=%s records=%s: the records win",
				  had, want);
		memcpy(o->digest, d, DIGEST_LEN);
	}
	memcpy(o->fam_committed, o->fam_digest, sizeof(o->fam_committed));
	store_put(b, CF_META, META_DIGEST, strlen(META_DIGEST), o->digest,
		  DIGEST_LEN);
	return 0;
}

/* XOR one record in or out of the digest and its family's share. */
void ops_digest_toggle(struct ops *o, enum store_cf cf, const void *key,
		       size_t klen, const void *val, size_t vlen)
{
	uint8_t h[DIGEST_LEN];

	digest_hash(h, cf, key, klen, val, vlen);
	digest_xor(o->digest, h);
	digest_xor(o->fam_digest[cf], h);
}

void ops_digest_public(const struct ops *o, uint8_t out[DIGEST_LEN])
{
	memset(out, 0, DIGEST_LEN);
	for (int cf = 0; cf < CF__COUNT; cf++)
		if (records_mirror_visible((enum store_cf)cf))
			digest_xor(out, o->fam_digest[cf]);
}

int ops_verify(struct ops *o, struct ops_verify *v)
{
	struct buf m = BUF_INIT;
	int rc;

	memset(v, 0, sizeof(*v));
	memcpy(v->live, o->digest, DIGEST_LEN);
	memcpy(v->live_fam, o->fam_digest, sizeof(v->live_fam));
	rc = store_get(o->store, NULL, CF_META, META_DIGEST,
		       strlen(META_DIGEST), &m);
	if (rc == 0 && m.len == DIGEST_LEN)
		memcpy(v->stored, m.p, DIGEST_LEN);
	buf_free(&m);
	if (rc < 0 && rc != GD_ENOTFOUND)
		return rc;
	for (int cf = 0; cf < CF__COUNT; cf++)
		v->covered[cf] = records_replicated(cf);
	struct ops_count *disk = xcalloc(CF__COUNT, sizeof(*disk));
	if ((rc = digest_scan(o, v->disk_fam, v->records, disk)) < 0)
		goto done;
	digest_total(v->disk, v->disk_fam);
	v->equal = !memcmp(v->live, v->disk, DIGEST_LEN) &&
		   !memcmp(v->stored, v->disk, DIGEST_LEN) &&
		   !memcmp(v->live_fam, v->disk_fam, sizeof(v->disk_fam));
	int64_t now = (int64_t)(clock_wall_ms() / 1000);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		v->count_kept[cf] = ops_count(o, cf, now);
		v->count_disk[cf] = ops_count_of(&disk[cf], cf, now);
		if (v->count_kept[cf] == v->count_disk[cf])
			continue;
		log_error("verify: the live count of family=%s is %lld, its "
			  "records say %lld", store_cf_name(cf),
			  (long long)v->count_kept[cf],
			  (long long)v->count_disk[cf]);
		v->equal = false;
	}
done:
	for (int cf = 0; cf < CF__COUNT; cf++)
		ops_count_free(&disk[cf]);
	free(disk);
	return rc;
}
