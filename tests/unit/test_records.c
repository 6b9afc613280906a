/*
 * test_records.c: node/state/records.h, the one table of record kinds.
 *
 * The table replaced six hand-kept lists; what the lists could get wrong
 * apart, the rows must still get right together: every family has a row,
 * the values of enum store_cf (on disk, in the digest, on the wire) stay
 * put, every replicated family is sent in state transfer, sealed values
 * never travel in the clear through the log, every body of the Op oneof
 * has its family and its check, and every LWW record keeps its key in
 * field 1 and its stamp in fields 14 and 15, where ops.c reads them
 * through the descriptors.  Then the key builders against their parsers,
 * and the SSH fingerprint against ssh-keygen's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "ops.h"
#include "records.h"
#include "store.h"

/* the rows of the table, counted by expanding it */
#define COUNT_ROW(c, n, b, d, m, s, sn, l, mi) +1
static const int n_rows = 0 GD_RECORD_KINDS(COUNT_ROW);

static const enum store_cf snap[] = { GD_RECORD_KINDS(RECORDS_SNAP_CF) };

static void test_every_family_has_one_row(void **state)
{
	(void)state;
	assert_int_equal(n_rows, CF__COUNT);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		const struct records_kind *k = records_kind(cf);
		assert_non_null(k);
		assert_int_equal(k->cf, cf);
		assert_non_null(k->name);
		assert_string_equal(store_cf_name(cf), k->name);
		for (int o = 0; o < cf; o++)
			assert_string_not_equal(records_kind(o)->name, k->name);
	}
	assert_null(records_kind(CF__COUNT));
	assert_null(records_kind((enum store_cf)-1));
}

/* The values are in every digest (digest_hash hashes cf) and in state
 * transfer's requests: a row put anywhere but the end would change them. */
static void test_enum_values_stay(void **state)
{
	(void)state;
	assert_int_equal(CF_META, 0);
	assert_int_equal(CF_USERS, 1);
	assert_int_equal(CF_ENROLL, 2);
	assert_int_equal(CF_GRANTS, 3);
	assert_int_equal(CF_MARKS, 4);
	assert_int_equal(CF_FAILS, 5);
	assert_int_equal(CF_UNLOCK, 6);
	assert_int_equal(CF_REPOS, 7);
	assert_int_equal(CF_OPLOG, 8);
	assert_int_equal(CF_VV, 9);
	assert_int_equal(CF_REFS, 10);
	assert_int_equal(CF_LOSERS, 11);
	assert_int_equal(CF_REVOKES, 12);
	assert_int_equal(CF_KEYFP, 13);
	assert_int_equal(CF_PROMISES, 14);
	assert_int_equal(CF_PUSHLOG, 15);
	assert_int_equal(CF_ADDR_REVOKES, 16);
	assert_int_equal(CF_TLEAVES, 17);
	assert_int_equal(CF_THASHES, 18);
	assert_string_equal(store_cf_name(CF_META), "default");
	assert_string_equal(store_cf_name(CF_KEYFP), "keyfp");
	assert_string_equal(store_cf_name(CF_PUSHLOG), "pushlog");
}

/* State transfer sends exactly the replicated families, in table order
 * (the order peers already walk them in). */
static void test_snapshot_is_every_replicated_family(void **state)
{
	static const enum store_cf before[] = { CF_USERS, CF_ENROLL,
						CF_GRANTS, CF_MARKS,
						CF_FAILS, CF_UNLOCK,
						CF_REPOS, CF_REFS,
						CF_REVOKES, CF_PUSHLOG,
						CF_ADDR_REVOKES, CF_TLEAVES };
	size_t n = 0;

	(void)state;
	for (int cf = 0; cf < CF__COUNT; cf++) {
		const struct records_kind *k = records_kind(cf);
		assert_int_equal(k->snap, k->merge != RECORDS_LOCAL);
		assert_int_equal(records_replicated(cf),
				 k->merge != RECORDS_LOCAL);
		/* only replicated records are counted (status) */
		if (k->live)
			assert_true(k->snap && k->desc);
		if (k->snap) {
			assert_true(n < GD_ARRAY_SIZE(snap));
			assert_int_equal(snap[n], cf);
			n++;
		}
	}
	assert_int_equal(n, GD_ARRAY_SIZE(snap));
	assert_int_equal(GD_ARRAY_SIZE(before), GD_ARRAY_SIZE(snap));
	for (size_t i = 0; i < GD_ARRAY_SIZE(before); i++)
		assert_int_equal(before[i], snap[i]);
	/* the derived and local families never travel */
	assert_false(records_replicated(CF_KEYFP));
	/* a promise is this site's vote: never sent, never in a snapshot */
	assert_false(records_replicated(CF_PROMISES));
	assert_false(records_kind(CF_PROMISES)->snap);
	assert_false(records_mirror_visible(CF_PROMISES));
	assert_false(records_replicated(CF_OPLOG));
	assert_false(records_replicated(CF_META));
}

/* A sealed replicated family's values travel in operations, which the
 * log keeps: the log must be sealed as well. */
static void test_sealed(void **state)
{
	(void)state;
	assert_true(records_kind(CF_ENROLL)->sealed);
	assert_true(records_kind(CF_OPLOG)->sealed);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		const struct records_kind *k = records_kind(cf);
		if (k->sealed && k->merge != RECORDS_LOCAL)
			assert_true(records_kind(CF_OPLOG)->sealed);
		/* losers hold only commit ids: never sealed */
		if (cf == CF_LOSERS)
			assert_false(k->sealed);
	}
}

/* Every body of the Op oneof has exactly one family, and only replicated
 * families have one; the family's records are the body's message (a
 * RefUpdate writes one Ref per ref). */
static void test_every_op_body_has_a_family(void **state)
{
	const ProtobufCMessageDescriptor *op = &grantd__v1__op__descriptor;
	int bodies = 0;

	(void)state;
	for (unsigned i = 0; i < op->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &op->fields[i];
		if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
			continue;
		bodies++;
		const struct records_kind *k = records_by_body(
			(Grantd__V1__Op__BodyCase)f->id);
		assert_non_null(k);
		assert_int_not_equal(k->merge, RECORDS_LOCAL);
		assert_non_null(k->desc);
		if (k->cf == CF_REFS)
			assert_ptr_equal(f->descriptor,
					 &grantd__v1__ref_update__descriptor);
		else
			assert_ptr_equal(f->descriptor, k->desc);
	}
	int replicated = 0;
	for (int cf = 0; cf < CF__COUNT; cf++) {
		const struct records_kind *k = records_kind(cf);
		if (k->merge == RECORDS_LOCAL) {
			assert_int_equal(k->body, GRANTD__V1__OP__BODY__NOT_SET);
			continue;
		}
		replicated++;
		assert_ptr_equal(records_by_body(k->body), k);
	}
	assert_int_equal(bodies, replicated);
	assert_null(records_by_body(GRANTD__V1__OP__BODY__NOT_SET));
}

/* ops_check has a case for every body: an empty body of each kind is
 * refused for what it lacks, never as "no body". */
static void test_ops_check_knows_every_body(void **state)
{
	(void)state;
	for (int cf = 0; cf < CF__COUNT; cf++) {
		const struct records_kind *k = records_kind(cf);
		Grantd__V1__Op op = GRANTD__V1__OP__INIT;
		struct buf why = BUF_INIT;
		const ProtobufCMessageDescriptor *d;
		void *body;

		if (k->merge == RECORDS_LOCAL)
			continue;
		d = k->cf == CF_REFS ? &grantd__v1__ref_update__descriptor
				     : k->desc;
		body = calloc(1, d->sizeof_message);
		assert_non_null(body);
		protobuf_c_message_init(d, body);
		op.origin = "sitea";
		op.epoch = op.seq = op.hlc = 1;
		op.has_epoch = op.has_seq = op.has_hlc = 1;
		op.body_case = k->body;
		memcpy(&op.user, &body, sizeof(body));
		assert_int_equal(ops_check(&op, &why), GD_EPROTO);
		assert_non_null(why.p);
		assert_string_not_equal(why.p, "no body");
		buf_free(&why);
		free(body);
	}
}

/* ops.c reads an LWW record's key (field 1) and stamp (14, 15) through the
 * descriptors, and Stamped decodes any LWW record's stamp. */
static void test_lww_records_keep_key_and_stamp(void **state)
{
	const ProtobufCMessageDescriptor *st = &grantd__v1__stamped__descriptor;
	const ProtobufCFieldDescriptor *sh =
		protobuf_c_message_descriptor_get_field(st, 14);
	const ProtobufCFieldDescriptor *so =
		protobuf_c_message_descriptor_get_field(st, 15);
	int lww = 0;

	(void)state;
	assert_non_null(sh);
	assert_non_null(so);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		const struct records_kind *k = records_kind(cf);
		if (k->merge != RECORDS_LWW)
			continue;
		lww++;
		const ProtobufCFieldDescriptor *key =
			protobuf_c_message_descriptor_get_field(k->desc, 1);
		const ProtobufCFieldDescriptor *h =
			protobuf_c_message_descriptor_get_field(k->desc, 14);
		const ProtobufCFieldDescriptor *o =
			protobuf_c_message_descriptor_get_field(k->desc, 15);
		assert_non_null(key);
		assert_int_equal(key->type, PROTOBUF_C_TYPE_STRING);
		assert_int_equal(key->label, PROTOBUF_C_LABEL_OPTIONAL);
		assert_non_null(h);
		assert_string_equal(h->name, "hlc");
		assert_int_equal(h->type, sh->type);
		assert_int_equal(h->label, sh->label);
		assert_non_null(o);
		assert_string_equal(o->name, "origin");
		assert_int_equal(o->type, so->type);
		assert_int_equal(o->label, so->label);
		/* the stamp is no part of a oneof, and has a has_ flag
		 * where pack_stamped sets it */
		assert_false(h->flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
		assert_int_not_equal(h->quantifier_offset, 0);
	}
	assert_true(lww >= 7);
	/* the merged families' records have no stamp to order them */
	assert_null(protobuf_c_message_descriptor_get_field(
		records_kind(CF_MARKS)->desc, 15));
}

static void test_live(void **state)
{
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
	Grantd__V1__Ref f = GRANTD__V1__REF__INIT;
	uint8_t v[256];
	size_t n;
	int64_t until;

	(void)state;
	g.user = "alice", g.net = "192.0.2.1";
	g.expires = 1000, g.has_expires = 1;
	n = grantd__v1__grant__pack(&g, v);
	assert_true(records_live_grant(v, n, &until));
	assert_int_equal(until, 1000);
	assert_true(records_live_at(CF_GRANTS, v, n, 999));
	assert_false(records_live_at(CF_GRANTS, v, n, 1000));
	g.revoked = g.has_revoked = 1;
	n = grantd__v1__grant__pack(&g, v);
	assert_false(records_live_at(CF_GRANTS, v, n, 0));
	f.repo = "r", f.ref = "refs/heads/main", f.target = "";
	n = grantd__v1__ref__pack(&f, v);
	assert_false(records_live_at(CF_REFS, v, n, 0));
	f.target = "0123456789012345678901234567890123456789";
	n = grantd__v1__ref__pack(&f, v);
	assert_true(records_live_at(CF_REFS, v, n, 0));
	/* no live test: never counted; garbage: not live */
	assert_false(records_live_at(CF_MARKS, v, n, 0));
	assert_false(records_live_at(CF_USERS, "\xff\xff\xff", 3, 0));
}

static bool span_is(const struct records_span *s, const char *want)
{
	return s->len == strlen(want) && !memcmp(s->p, want, s->len);
}

static void test_keys_and_parsers(void **state)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	struct records_span a, b, c;
	char tip[RECORDS_OID_HEX + 1];
	const char *oid = "0123456789abcdef0123456789abcdef01234567";
	uint64_t hlc;
	bool kept;

	(void)state;
	records_key_grant(&k, "alice", "192.0.2.0/24", "s1");
	assert_int_equal(k.len, 6 + 13 + 2);
	assert_int_equal(records_grant_parse(k.p, k.len, &a, &b, &c), 0);
	assert_true(span_is(&a, "alice") && span_is(&b, "192.0.2.0/24") &&
		    span_is(&c, "s1"));
	records_key_grant(&k, "alice", "192.0.2.1", "");
	assert_int_equal(records_grant_parse(k.p, k.len, &a, &b, &c), 0);
	assert_true(span_is(&c, ""));
	assert_int_equal(records_grant_parse("alice", 5, &a, &b, &c),
			 GD_EPROTO);

	records_key_mark(&k, "bob", 0x0102030405060708ULL);
	assert_int_equal(k.len, 4 + 8);
	assert_memory_equal(k.p, "bob\0\x01\x02\x03\x04\x05\x06\x07\x08", 12);
	records_key_fail(&k, "bob", "siteb");
	assert_memory_equal(k.p, "bob\0siteb", 9);

	records_key_ref(&k, "linux", "refs/heads/main");
	assert_int_equal(records_ref_parse(k.p, k.len, &a, &b), 0);
	assert_true(span_is(&a, "linux") && span_is(&b, "refs/heads/main"));
	assert_int_equal(records_ref_parse("linux", 5, &a, &b), GD_EPROTO);

	records_key_loser(&k, "linux", "refs/heads/main", "sitea", 77);
	assert_int_equal(records_loser_parse(k.p, k.len, &a, &b, &c, &hlc), 0);
	assert_true(span_is(&a, "linux") && span_is(&b, "refs/heads/main") &&
		    span_is(&c, "sitea"));
	assert_int_equal(hlc, 77);
	assert_int_equal(records_loser_parse(k.p, k.len - 1, &a, &b, &c,
					     &hlc), GD_EPROTO);
	assert_int_equal(records_loser_parse(k.p, 8, &a, &b, &c, &hlc),
			 GD_EPROTO);

	records_loser_value(&v, oid, false);
	assert_int_equal(records_loser_value_parse(v.p, v.len, tip, &kept), 0);
	assert_string_equal(tip, oid);
	assert_false(kept);
	records_loser_value(&v, oid, true);
	assert_int_equal(v.len, 45);
	assert_int_equal(records_loser_value_parse(v.p, v.len, tip, &kept), 0);
	assert_true(kept);
	assert_int_equal(records_loser_value_parse(v.p, 44, tip, &kept),
			 GD_EPROTO);

	records_key_vv(&k, "sitea", 0x0102030405060708ULL);
	assert_int_equal(k.len, 6 + 8);
	assert_memory_equal(k.p, "sitea\0\x01\x02\x03\x04\x05\x06\x07\x08",
			    14);
	records_key_oplog(&k, "sitea", 1, 2);
	assert_int_equal(k.len, 6 + 16);
	assert_memory_equal(k.p + 6, "\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x02",
			    16);

	records_key_keyfp(&k, "SHA256:abc", "carol");
	assert_int_equal(records_keyfp_parse(k.p, k.len, &a, &b), 0);
	assert_true(span_is(&a, "SHA256:abc") && span_is(&b, "carol"));
	records_key_keyfp(&v, "SHA256:abc", NULL);
	assert_int_equal(v.len, 11);
	assert_memory_equal(k.p, v.p, v.len);

	/* the push log: origin \0 n(8, BE), so an origin's entries sort
	 * by number; without n, the origin's prefix */
	uint64_t n;
	const uint8_t *fork;
	uint8_t h[32];
	records_key_pushlog(&k, "sitea", 0x0102030405060708ULL);
	assert_int_equal(k.len, 6 + 8);
	assert_memory_equal(k.p, "sitea\0\x01\x02\x03\x04\x05\x06\x07\x08",
			    14);
	assert_int_equal(records_pushlog_parse(k.p, k.len, &a, &n, NULL), 0);
	assert_true(span_is(&a, "sitea"));
	assert_true(n == 0x0102030405060708ULL);
	assert_int_equal(records_pushlog_parse(k.p, k.len, &a, &n, &fork), 0);
	assert_null(fork);
	assert_int_equal(records_pushlog_parse(k.p, k.len - 1, &a, &n, NULL),
			 GD_EPROTO);
	records_key_pushlog(&v, "sitea", 0);
	assert_int_equal(v.len, 6);
	assert_memory_equal(k.p, v.p, v.len);
	records_key_pushlog(&k, "sitea", 0);
	store_be64((uint8_t *)buf_extend(&k, 8), 0);
	assert_int_equal(records_pushlog_parse(k.p, k.len, &a, &n, NULL),
			 GD_EPROTO);
	assert_int_equal(records_pushlog_parse("\0\0\0\0\0\0\0\0\1", 9, &a,
						&n, NULL), GD_EPROTO);
	/* a fork: the entry's hash after n, sorting after n's entry and
	 * before n + 1's; refused where the caller takes no fork */
	memset(h, 0xab, sizeof(h));
	records_key_pushlog_fork(&k, "sitea", 7, h);
	assert_int_equal(k.len, 6 + 8 + 32);
	assert_int_equal(records_pushlog_parse(k.p, k.len, &a, &n, &fork), 0);
	assert_true(span_is(&a, "sitea") && n == 7);
	assert_non_null(fork);
	assert_memory_equal(fork, h, sizeof(h));
	assert_int_equal(records_pushlog_parse(k.p, k.len, &a, &n, NULL),
			 GD_EPROTO);
	records_key_pushlog(&v, "sitea", 7);
	assert_true(memcmp(v.p, k.p, v.len) == 0);
	records_key_pushlog(&v, "sitea", 8);
	assert_true(memcmp(k.p, v.p, v.len) < 0);
	/* a long origin's plain key is no fork */
	records_key_pushlog(&k, "a-site-name-longer-than-forty-bytes-in-all", 3);
	assert_int_equal(records_pushlog_parse(k.p, k.len, &a, &n, &fork), 0);
	assert_null(fork);
	assert_true(n == 3);
	buf_free(&k);
	buf_free(&v);
}

/* issue 21: a leaf's key (origin \0 index), a fork's after it and before
 * index + 1, the origin's prefix (and tree size key in CF_THASHES), a
 * stored hash's key. */
static void test_tleaf_keys(void **state)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	struct records_span a;
	const uint8_t *fork;
	uint8_t h[32];
	uint64_t n;

	(void)state;
	records_key_tleaf(&k, "sitea", 0);
	assert_int_equal(k.len, 6 + 8);
	assert_memory_equal(k.p, "sitea\0\0\0\0\0\0\0\0\0", 14);
	assert_int_equal(records_tleaf_parse(k.p, k.len, &a, &n, &fork), 0);
	assert_true(span_is(&a, "sitea") && n == 0);
	assert_null(fork);
	records_key_tlog_origin(&v, "sitea");
	assert_int_equal(v.len, 6);
	assert_memory_equal(k.p, v.p, v.len);
	memset(h, 0x00, sizeof(h)); /* a hash with NUL bytes */
	h[31] = 1;
	records_key_tleaf_fork(&k, "sitea", 7, h);
	assert_int_equal(k.len, 6 + 8 + 32);
	assert_int_equal(records_tleaf_parse(k.p, k.len, &a, &n, &fork), 0);
	assert_true(span_is(&a, "sitea") && n == 7);
	assert_non_null(fork);
	assert_memory_equal(fork, h, sizeof(h));
	records_key_tleaf(&v, "sitea", 7);
	assert_true(memcmp(v.p, k.p, v.len) == 0);
	records_key_tleaf(&v, "sitea", 8);
	assert_true(memcmp(k.p, v.p, v.len) < 0);
	assert_int_equal(records_tleaf_parse(k.p, 6 + 8 + 31, &a, &n, &fork),
			 GD_EPROTO);
	assert_int_equal(records_tleaf_parse("\0\0\0\0\0\0\0\0\1", 9, &a,
					     &n, &fork), GD_EPROTO);
	assert_int_equal(records_tleaf_parse("sitea", 5, &a, &n, &fork),
			 GD_EPROTO);
	records_key_thash(&k, "sitea", 0x0102);
	assert_memory_equal(k.p, "sitea\0\0\0\0\0\0\0\x01\x02", 14);
	buf_free(&k);
	buf_free(&v);
}

/* The key ssh-keygen -lf prints "256 SHA256:ieGEN... alice@x (ED25519)"
 * for; sshd's %f is the same text. */
static void test_fingerprint_is_sshs(void **state)
{
	char fp[RECORDS_FP_MAX];

	(void)state;
	assert_int_equal(
		records_ssh_fingerprint(
			fp, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPz0OdImpZkZ"
			    "RFWa0DIvXMsC+wwuYm7TcnlPutvwRV5v alice@x"),
		0);
	assert_string_equal(fp,
			    "SHA256:ieGENRwGkZ2ZJH/wEtzcd6QlCZ434+NMQvA0N15Murs");
	/* the comment is no part of it */
	assert_int_equal(
		records_ssh_fingerprint(
			fp, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPz0OdImpZkZ"
			    "RFWa0DIvXMsC+wwuYm7TcnlPutvwRV5v"),
		0);
	assert_string_equal(fp,
			    "SHA256:ieGENRwGkZ2ZJH/wEtzcd6QlCZ434+NMQvA0N15Murs");
	assert_int_equal(records_ssh_fingerprint(fp, "ssh-ed25519"), GD_EINVAL);
	assert_int_equal(records_ssh_fingerprint(fp, "ssh-ed25519 !!!!"),
			 GD_EINVAL);
}

/* A promise sits under its mark's key, so use sync (vote.h) can page the
 * marks and look each promise up; the parser takes both back. */
static void test_promise_key(void **state)
{
	struct buf a = BUF_INIT, b = BUF_INIT;
	struct records_span user;
	uint64_t id;

	(void)state;
	records_key_mark(&a, "alice", 0x0102030405060708ULL);
	records_key_promise(&b, "alice", 0x0102030405060708ULL);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.p, b.p, a.len);
	assert_int_equal(records_mark_parse(b.p, b.len, &user, &id), 0);
	assert_int_equal(user.len, 5);
	assert_memory_equal(user.p, "alice", 5);
	assert_true(id == 0x0102030405060708ULL);
	/* too short, no user, a byte too many */
	assert_int_equal(records_mark_parse(b.p, b.len - 1, &user, &id),
			 GD_EPROTO);
	assert_int_equal(records_mark_parse("\0" "12345678", 9, &user, &id),
			 GD_EPROTO);
	buf_add(&b, "x", 1);
	assert_int_equal(records_mark_parse(b.p, b.len, &user, &id),
			 GD_EPROTO);
	assert_int_equal(records_mark_parse("", 0, &user, &id), GD_EPROTO);
	buf_free(&a);
	buf_free(&b);
}

/* The version vector's and the oplog's keys parse back into their parts
 * (repl and ops read them); anything else is GD_EPROTO. */
static void test_vv_and_oplog_keys(void **state)
{
	struct buf k = BUF_INIT;
	struct records_span origin;
	uint64_t epoch, seq;

	(void)state;
	/* an epoch and a seq with NULs in them: the first NUL ends origin */
	records_key_vv(&k, "site-a", 0x0100000000000200ULL);
	assert_int_equal(records_vv_parse(k.p, k.len, &origin, &epoch), 0);
	assert_int_equal(origin.len, 6);
	assert_memory_equal(origin.p, "site-a", 6);
	assert_true(epoch == 0x0100000000000200ULL);
	assert_int_equal(records_oplog_parse(k.p, k.len, &origin, &epoch, &seq),
	                 GD_EPROTO);
	assert_int_equal(records_vv_parse(k.p, k.len - 1, &origin, &epoch),
	                 GD_EPROTO);
	records_key_oplog(&k, "b", 7, 0xff00000000000001ULL);
	assert_int_equal(records_oplog_parse(k.p, k.len, &origin, &epoch, &seq),
	                 0);
	assert_true(origin.len == 1 && origin.p[0] == 'b');
	assert_true(epoch == 7 && seq == 0xff00000000000001ULL);
	assert_int_equal(records_vv_parse(k.p, k.len, &origin, &epoch),
	                 GD_EPROTO);
	buf_add(&k, "x", 1);
	assert_int_equal(records_oplog_parse(k.p, k.len, &origin, &epoch, &seq),
	                 GD_EPROTO);
	/* no origin, no NUL, nothing */
	static const char no_origin[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8 };
	assert_int_equal(records_vv_parse(no_origin, 9, &origin, &epoch),
	                 GD_EPROTO);
	assert_int_equal(records_vv_parse("abcdefghij", 10, &origin, &epoch),
	                 GD_EPROTO);
	assert_int_equal(records_oplog_parse("", 0, &origin, &epoch, &seq),
	                 GD_EPROTO);
	buf_free(&k);
}

/* SPEC 9: a mirror holds repositories, their settings and users' public
 * keys, and nothing that could validate or replay a token, nothing that
 * grants a push, and no local bookkeeping. */
static void test_mirror_rows(void **state)
{
	(void)state;
	for (int cf = 0; cf < CF__COUNT; cf++) {
		const struct records_kind *k = records_kind(cf);
		/* and the transparency log's public leaves (issue 21) */
		bool want = cf == CF_USERS || cf == CF_REPOS || cf == CF_REFS ||
		            cf == CF_TLEAVES;
		if (records_mirror_visible(cf) != want)
			fail_msg("family %s: mirror-visible is %d", k->name,
				 !want);
		if (k->sealed)
			assert_false(records_mirror_visible(cf));
	}
	assert_false(records_mirror_visible(CF_ENROLL));
	assert_false(records_mirror_visible(CF_MARKS));
	assert_false(records_mirror_visible(CF_GRANTS));
	/* the push log holds client addresses */
	assert_false(records_mirror_visible(CF_PUSHLOG));
	assert_false(records_mirror_visible(CF__COUNT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_mirror_rows),
	        cmocka_unit_test(test_promise_key),
	        cmocka_unit_test(test_vv_and_oplog_keys),
	        cmocka_unit_test(test_every_family_has_one_row),
	        cmocka_unit_test(test_enum_values_stay),
	        cmocka_unit_test(test_snapshot_is_every_replicated_family),
	        cmocka_unit_test(test_sealed),
	        cmocka_unit_test(test_every_op_body_has_a_family),
	        cmocka_unit_test(test_ops_check_knows_every_body),
	        cmocka_unit_test(test_lww_records_keep_key_and_stamp),
	        cmocka_unit_test(test_live),
	        cmocka_unit_test(test_keys_and_parsers),
	        cmocka_unit_test(test_fingerprint_is_sshs),
	        cmocka_unit_test(test_tleaf_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
