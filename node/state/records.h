/*
 * records.h: the kinds of record the node keeps, in one table.
 *
 * GD_RECORD_KINDS is the one list of the store's column families, one row
 * each, in the order of enum store_cf (whose values are on disk and on
 * the wire: the digest hashes them, state transfer names them, so a new
 * row goes at the END).  Each row is
 *
 *   X(CF, name, body, desc, merge, sealed, snap, live, mirror)
 *
 *   CF      the enum store_cf member, without its CF_ prefix
 *   name    the RocksDB column family's name
 *   body    the case of the Op oneof whose operations write it, without
 *           its GRANTD__V1__OP__BODY_ prefix (_NOT_SET: no operation does)
 *   desc    the protobuf descriptor of its records (NULL: not protobuf)
 *   merge   how two copies merge (enum records_merge): RECORDS_LOCAL for
 *           this node's own bookkeeping, never replicated; every other
 *           rule makes a replicated family, which is in the digest, in
 *           the operation log and in state transfer
 *   sealed  values encrypted with the node's sealing key (store.h)
 *   snap    sent in state transfer (every replicated family is: the unit
 *           test holds them equal; a family left out of it would never
 *           reach a peer that catches up by snapshot)
 *   live    the function saying whether a record counts in `status`
 *           (records_live; NULL: the family is not counted)
 *   mirror  a read-only mirror (SPEC 9) may hold it: repositories, their
 *           settings, users' public keys and the transparency log's
 *           leaves (public texts); never secrets, token marks, promises,
 *           grants, failures or the push log's entries (client IPs)
 *
 * The table is expanded by store.h (the enum) and store.c (the names,
 * sealing), the ops rooms (ops_merge.c: the merge rule of each family;
 * ops_digest.c: the digest; ops_count.c: the live counts; ops_check.c),
 * repl_xfer.c (the families sent in state transfer) and cmd_node.c
 * (status: the live column).
 * tests/unit/test_records.c checks the rows against each other and
 * against the protobuf descriptors.
 *
 * The key of every family is built and parsed here, and nowhere else.
 * Pure functions: any thread.
 */
#ifndef GD_RECORDS_H
#define GD_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"

/* How two copies of a family's record merge (ops.c applies the rule). */
enum records_merge {
	RECORDS_LOCAL,  /* not replicated: this node's bookkeeping */
	RECORDS_LWW,    /* a register ordered by (hlc, origin): the record
			 * keeps its key in field 1 (a grant's is user, net
			 * and session) and its stamp in fields 14 (hlc) and
			 * 15 (origin), like grantd.v1.Stamped */
	RECORDS_MAX,    /* token-use marks: max (next), union (scratch) */
	RECORDS_UNION,  /* failures: union of attempt stamps */
	RECORDS_SET,    /* the push log: a set of entries that never
			 * change; a second entry for the same (origin, n)
			 * (a forked chain) is kept too, under its hash, the
			 * earlier (hlc, bytes) at origin \0 n */
	RECORDS_LEAF,   /* transparency log leaves: one per (origin,
			 * index), taken only at index = the origin's tree
			 * size here (an index beyond it is refused); a
			 * different text at an index held is a fork, kept
			 * beside the first (records_key_tleaf_fork), never
			 * in its place (ops_tlog.c ops_tlog_apply) */
};

/* clang-format off */
#define GD_RECORD_KINDS(X)                                                     \
	/* "epoch", "seq", "hlc", "digest", "push" \0 repo \0 id (ops.c) */    \
	X(META,    "default", _NOT_SET, NULL, RECORDS_LOCAL, false, false, NULL,   \
	  false)                                                               \
	/* user name -> User */                                                \
	X(USERS,   "users",   USER, &grantd__v1__user__descriptor,             \
	  RECORDS_LWW, false, true, records_live_user, true)                   \
	/* user name -> Enrollment */                                          \
	X(ENROLL,  "enroll",  ENROLL, &grantd__v1__enrollment__descriptor,     \
	  RECORDS_LWW, true, true, NULL, false)                                \
	/* user \0 net \0 session -> Grant */                                  \
	X(GRANTS,  "grants",  GRANT, &grantd__v1__grant__descriptor,           \
	  RECORDS_LWW, false, true, records_live_grant, false)                 \
	/* user \0 enroll_id(8, BE) -> Mark */                                 \
	X(MARKS,   "marks",   MARK, &grantd__v1__mark__descriptor,             \
	  RECORDS_MAX, false, true, NULL, false)                               \
	/* user \0 site -> Failures */                                         \
	X(FAILS,   "fails",   FAILURE, &grantd__v1__failures__descriptor,      \
	  RECORDS_UNION, false, true, NULL, false)                             \
	/* user -> Unlock */                                                   \
	X(UNLOCK,  "unlock",  UNLOCK, &grantd__v1__unlock__descriptor,         \
	  RECORDS_LWW, false, true, NULL, false)                               \
	/* repo name -> Repo */                                                \
	X(REPOS,   "repos",   REPO, &grantd__v1__repo__descriptor,             \
	  RECORDS_LWW, false, true, records_live_repo, true)                   \
	/* origin \0 epoch(8) seq(8) -> Op */                                  \
	X(OPLOG,   "oplog",   _NOT_SET, &grantd__v1__op__descriptor,           \
	  RECORDS_LOCAL, true, false, NULL, false)                             \
	/* origin \0 epoch(8) -> applied seq (8, BE) */                        \
	X(VV,      "vv",      _NOT_SET, NULL, RECORDS_LOCAL, false, false,    \
	  NULL, false)                                                               \
	/* repo \0 ref -> Ref (the replicated tip; a RefUpdate writes them) */ \
	X(REFS,    "refs",    REFS, &grantd__v1__ref__descriptor,              \
	  RECORDS_LWW, false, true, records_live_ref, true)                    \
	/* repo \0 ref \0 origin \0 hlc(8) -> tip that lost an LWW race:       \
	 * "TIP" as noted by the writer, "TIP kept" once gitrepl has kept it   \
	 * under refs/grantd/conflicts (no entry: it was no conflict) */       \
	X(LOSERS,  "losers",  _NOT_SET, NULL, RECORDS_LOCAL, false, false,    \
	  NULL, false)                                                               \
	/* user -> Revocation */                                               \
	X(REVOKES, "revokes", REVOKE, &grantd__v1__revocation__descriptor,     \
	  RECORDS_LWW, false, true, NULL, false)                               \
	/* SSH key fingerprint \0 user -> the key (derived from USERS by ops,  \
	 * in the user record's batch; rebuilt at open when missing) */        \
	X(KEYFP,   "keyfp",   _NOT_SET, NULL, RECORDS_LOCAL, false, false,    \
	  NULL, false)                                                         \
	/* user \0 enroll_id(8, BE) -> Promise: the highest token use this     \
	 * site promised to a proposal (token_quorum = majority, vote.h);      \
	 * local, never replicated: a promise is this site's vote */           \
	X(PROMISES, "promises", _NOT_SET, &grantd__v1__promise__descriptor,    \
	  RECORDS_LOCAL, false, false, NULL, false)                                \
	/* origin \0 n(8, BE) [hash(32): a fork] -> PushLogEntry              \
	 * (docs/push-log.md); never on a mirror: it holds client addresses */ \
	X(PUSHLOG, "pushlog", PUSH_LOG,                                         \
	  &grantd__v1__push_log_entry__descriptor, RECORDS_SET, false, true,   \
	  records_live_pushlog, false)                                         \
	/* user \0 net -> AddrRevocation: an address revoke (issue 19, N6)    \
	 * voids every grant of user for net stamped before it, wherever and  \
	 * whenever that grant arrives (policy_grant_void) */                 \
	X(ADDR_REVOKES, "addrrevokes", ADDR_REVOKE,                            \
	  &grantd__v1__addr_revocation__descriptor, RECORDS_LWW, false, true,  \
	  NULL, false)                                                         \
	/* origin \0 index(8, BE) [leaf hash(32): a fork] -> PushLeaf: each    \
	 * origin's transparency log leaves (issue 21, docs/push-log.md); on  \
	 * mirrors too: the text is public (no address, no salt) */           \
	X(TLEAVES, "tleaves", PUSH_LEAF, &grantd__v1__push_leaf__descriptor,   \
	  RECORDS_LEAF, false, true, records_live_tleaf, true)                 \
	/* origin \0 -> tree size (8, BE); origin \0 stored index(8, BE) ->   \
	 * hash (32): each origin's stored-hash table (tlog.h), derived from  \
	 * CF_TLEAVES in the leaf's batch (ops_tlog.c): local, as a function  \
	 * of the leaves the digest covers */                                 \
	X(THASHES, "thashes", _NOT_SET, NULL, RECORDS_LOCAL, false, false,     \
	  NULL, false)                                                         \
	/* store_cf(1) record key -> RecordOps: the signed operations that   \
	 * made a replicated record (recops.h), sent beside it in state      \
	 * transfer so the receiver checks their signatures; sealed as the   \
	 * log is (an enrollment's operation holds its secret) */            \
	X(RECOPS, "recops", _NOT_SET, &grantd__v1__record_ops__descriptor,     \
	  RECORDS_LOCAL, true, false, NULL, false)                             \
	/* origin \0 epoch(8) seq(8) -> Op: an operation some record's       \
	 * RecordOps names (recops.h) that the operation log does not hold:   \
	 * one a state transfer brought, or one the log's retention cut       \
	 * (ops_sweep.c); dropped once no record names it; sealed as the log  \
	 * is */                                                               \
	X(KEPTOPS, "keptops", _NOT_SET, &grantd__v1__op__descriptor,           \
	  RECORDS_LOCAL, true, false, NULL, false)                             \
	/* origin \0 epoch(8) seq(8) of a batch's last operation -> the      \
	 * batch's record (opsig.h, the log's compact form): its signature,  \
	 * prev and root once, and for a batch of this site its tree's table \
	 * of hashes; the operation log's entries of the batch hold only     \
	 * their index (oplog.h).  Hashes and a signature, no secret: not    \
	 * sealed */                                                          \
	X(OPBATCH, "opbatch", _NOT_SET, NULL, RECORDS_LOCAL, false, false,    \
	  NULL, false)
/* clang-format on */

enum store_cf {
#define RECORDS_CF_ENUM(cf, name, body, desc, merge, sealed, snap, live,     \
			mirror)                                                \
	CF_##cf,
	GD_RECORD_KINDS(RECORDS_CF_ENUM)
#undef RECORDS_CF_ENUM
	CF__COUNT,
};

/* Expansions that keep some rows: RECORDS_IF_##flag(...) keeps its
 * arguments when flag is the token true.  The families of state transfer,
 * in table order: { GD_RECORD_KINDS(RECORDS_SNAP_CF) }. */
#define RECORDS_IF_true(...) __VA_ARGS__
#define RECORDS_IF_false(...)
#define RECORDS_SNAP_CF(cf, name, body, desc, merge, sealed, snap, live, mirror) \
	RECORDS_IF_##snap(CF_##cf, )

/* One row of the table. */
struct records_kind {
	enum store_cf cf;
	const char *name;
	Grantd__V1__Op__BodyCase body;
	const ProtobufCMessageDescriptor *desc;
	enum records_merge merge;
	bool sealed;
	bool snap;
	/* Is the record (val, vlen) live, ignoring time?  *until is the
	 * unix second it stops being live by itself (INT64_MAX: never). */
	bool (*live)(const void *val, size_t vlen, int64_t *until);
	bool mirror;
};

/* The row of cf (NULL for an out-of-range value). */
const struct records_kind *records_kind(enum store_cf cf);

/* The row whose operations have this body (NULL: none). */
const struct records_kind *records_by_body(Grantd__V1__Op__BodyCase body);

/* Replicated: in the digest, the operation log and state transfer. */
bool records_replicated(enum store_cf cf);

/* May a read-only mirror hold records of cf?  false for a local family
 * and an out-of-range value. */
bool records_mirror_visible(enum store_cf cf);

/* Is the record of cf live at unix time now (status counts)?  false for
 * a family without a live test and for a record that does not decode. */
bool records_live_at(enum store_cf cf, const void *val, size_t vlen,
		     int64_t now);

bool records_live_user(const void *val, size_t vlen, int64_t *until);
bool records_live_grant(const void *val, size_t vlen, int64_t *until);
bool records_live_repo(const void *val, size_t vlen, int64_t *until);
bool records_live_ref(const void *val, size_t vlen, int64_t *until);
/* every entry that decodes (status: counts.push_log) */
bool records_live_pushlog(const void *val, size_t vlen, int64_t *until);
/* every leaf that decodes, forks included (status: counts.tleaves) */
bool records_live_tleaf(const void *val, size_t vlen, int64_t *until);

/* ---- keys (the layouts are in the table above) ---- */

/* A part of a key, borrowed from it. */
struct records_span {
	const char *p;
	size_t len;
};

void records_key_grant(struct buf *k, const char *user, const char *net,
		       const char *session);
void records_key_mark(struct buf *k, const char *user, uint64_t enroll_id);
/* A promise's key: the same layout as its mark's (user \0 enroll_id). */
void records_key_promise(struct buf *k, const char *user, uint64_t enroll_id);
/* A mark's or promise's key into its user and enrollment; 0 or
 * GD_EPROTO. */
int records_mark_parse(const void *key, size_t klen, struct records_span *user,
		       uint64_t *enroll_id);
/* An address revocation's key: user \0 net (net canonical); without net
 * (NULL), the prefix of every one of user's. */
void records_key_addr_revoke(struct buf *k, const char *user, const char *net);
void records_key_fail(struct buf *k, const char *user, const char *site);
void records_key_ref(struct buf *k, const char *repo, const char *ref);
void records_key_loser(struct buf *k, const char *repo, const char *ref,
		       const char *origin, uint64_t hlc);
void records_key_vv(struct buf *k, const char *origin, uint64_t epoch);
void records_key_oplog(struct buf *k, const char *origin, uint64_t epoch,
		       uint64_t seq);
/* The key past every seq of the (origin, epoch) of the oplog key key
 * (klen >= 8 bytes): its origin \0 epoch, eight 0xff and one 0, into k
 * (reset first). */
void records_key_oplog_past(struct buf *k, const void *key, size_t klen);
/* A version vector's key (origin \0 epoch) into its origin (non-empty,
 * borrowed) and epoch; 0 or GD_EPROTO. */
int records_vv_parse(const void *key,
                     size_t klen,
                     struct records_span *origin,
                     uint64_t *epoch);
/* An oplog key (origin \0 epoch seq) into its parts; 0 or GD_EPROTO. */
int records_oplog_parse(const void *key,
                        size_t klen,
                        struct records_span *origin,
                        uint64_t *epoch,
                        uint64_t *seq);
/* The key of the record an LWW operation writes: its field 1 (name or
 * user), for a grant user \0 net \0 session, for an address revocation
 * user \0 net. */
void records_key_lww(struct buf *k, const Grantd__V1__Op *op);

/* Parsers: 0, or GD_EPROTO for a key not of that layout. */
int records_grant_parse(const void *key, size_t klen,
			struct records_span *user, struct records_span *net,
			struct records_span *session);
int records_ref_parse(const void *key, size_t klen, struct records_span *repo,
		      struct records_span *ref);
int records_loser_parse(const void *key, size_t klen,
			struct records_span *repo, struct records_span *ref,
			struct records_span *origin, uint64_t *hlc);

/* A loser's value: the tip (40 hex digits, NUL-terminated in tip), and
 * whether gitrepl has kept it.  0 or GD_EPROTO. */
#define RECORDS_OID_HEX 40
int records_loser_value_parse(const void *val, size_t vlen,
			      char tip[RECORDS_OID_HEX + 1], bool *kept);
void records_loser_value(struct buf *v, const char *tip, bool kept);

/* ---- SSH keys by fingerprint (CF_KEYFP) ---- */

/* "SHA256:" and 43 characters of unpadded base64, as sshd prints %f. */
#define RECORDS_FP_MAX 64

/* The fingerprint of an authorized_keys key "TYPE BASE64 [COMMENT]": the
 * SHA-256 of the decoded blob.  0 or GD_EINVAL (no blob that decodes). */
int records_ssh_fingerprint(char out[RECORDS_FP_MAX], const char *key);

/* fingerprint \0 user; without user, the prefix of every user's. */
void records_key_keyfp(struct buf *k, const char *fp, const char *user);
int records_keyfp_parse(const void *key, size_t klen, struct records_span *fp,
			struct records_span *user);

/* ---- the push log (CF_PUSHLOG) ---- */

/* origin \0 n(8, BE); without n (n = 0), the prefix of origin's. */
void records_key_pushlog(struct buf *k, const char *origin, uint64_t n);
/* A fork: another entry for the same (origin, n), kept beside the one at
 * origin \0 n under origin \0 n(8, BE) hash(32), its claimed hash; it
 * sorts right after that entry and before n + 1 (docs/push-log.md). */
void records_key_pushlog_fork(struct buf *k, const char *origin, uint64_t n,
			      const uint8_t hash[32]);
/* Either key; *fork is then NULL, or the fork key's hash (in key).  With
 * fork NULL, a fork key is refused (GD_EPROTO). */
int records_pushlog_parse(const void *key, size_t klen,
			  struct records_span *origin, uint64_t *n,
			  const uint8_t **fork);

/* ---- transparency log leaves and hashes (CF_TLEAVES, CF_THASHES) ---- */

/* origin \0 index(8, BE) */
void records_key_tleaf(struct buf *k, const char *origin, uint64_t index);
/* origin \0: the prefix of every leaf of origin's, and in CF_THASHES the
 * key of its tree size */
void records_key_tlog_origin(struct buf *k, const char *origin);
/* A fork: another text for (origin, index), kept beside the leaf there
 * under its leaf hash (tlog_leaf_hash of the text); it sorts right after
 * that leaf and before index + 1. */
void records_key_tleaf_fork(struct buf *k, const char *origin,
			    uint64_t index, const uint8_t hash[32]);
/* Either key; *fork is then NULL, or the fork key's hash (in key).
 * 0 or GD_EPROTO. */
int records_tleaf_parse(const void *key, size_t klen,
			struct records_span *origin, uint64_t *index,
			const uint8_t **fork);
/* origin \0 stored index(8, BE): a stored hash's key in CF_THASHES */
void records_key_thash(struct buf *k, const char *origin, int64_t index);

/* ---- the operations of a record (CF_RECOPS) ---- */

/* cf(1 byte) key: the key of the operations kept for record key of cf. */
void records_key_recops(struct buf *k,
                        enum store_cf cf,
                        const void *key,
                        size_t klen);
/* Its family (a replicated one) and the record's key (borrowed from
 * key); 0 or GD_EPROTO. */
int records_recops_parse(const void *key,
                         size_t klen,
                         enum store_cf *cf,
                         struct records_span *rkey);
/* A failures record's key (user \0 site) into its parts; 0 or GD_EPROTO. */
int records_fail_parse(const void *key,
                       size_t klen,
                       struct records_span *user,
                       struct records_span *site);

/* m packed into out (reset first): a record's or an operation's bytes,
 * for ops and recops alike. */
void records_pack(struct buf *out, const ProtobufCMessage *m);

/* Zero the secret an unpacked operation may carry (an enrollment's),
 * before it is freed: every path that unpacks operations (ops, recops,
 * replication). */
void records_op_wipe(Grantd__V1__Op *op);

#endif
