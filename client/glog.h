/*
 * glog.h: what grant-log (client/grant-log.c) decides about a site's push
 * log, without the network or the disk: which keys it trusts, whether a
 * checkpoint is signed by its origin and cosigned by enough witnesses,
 * whether two checkpoints of one origin are consistent, the tree and
 * tiles recomputed from the entries, and the ref an entry moves
 * (docs/push-log.md, SPEC 9, issue 21 point 3).
 *
 * grant-log.c fetches (libcurl) and keeps state (files); everything it
 * concludes is computed here, so tests/unit/test_glog.c checks it with an
 * in-memory log.  Pure functions of their arguments and caller-owned
 * structs: any thread; libsodium (sodium_init() first).  Errors are
 * negative enum gd_err: GD_EINVAL malformed input, GD_ECRYPTO a check that
 * fails, GD_ENOTFOUND a key that is missing, GD_ETOOBIG over a limit, and
 * a fetch callback's own codes, unchanged.  Where a struct buf *why is
 * taken, a failure appends one line (no newline) saying what was wrong.
 */
#ifndef GD_GLOG_H
#define GD_GLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "note.h"
#include "pushleaf.h"
#include "tlog.h"
#include "tlog_tile.h"

#define GLOG_MAX_KEYS 64 /* keys of both kinds, together */
/* tile levels of a tree below 2^63 entries: 0..7 */
#define GLOG_TILE_LEVELS 8

/* The keys a user trusts: an origin key (NOTE_ALG_ED25519) signs the
 * checkpoints of the log whose origin line is its name; a witness key
 * (NOTE_ALG_COSIG) cosigns them. */
struct glog_keys {
	struct note_vkey key[GLOG_MAX_KEYS];
	bool witness[GLOG_MAX_KEYS];
	size_t n;
};

/* Adds the verifier key s[0..len) (NAME+HEXID+BASE64) as an origin key
 * (witness false: it must be of type 0x01) or a witness key (type 0x04;
 * a type 0x01 key, as `grantctl log key` prints it, stands for the
 * cosigning key of the same name and public key: a site cosigns with the
 * seed it signs with).  A key given twice is kept once.  GD_EINVAL: not a
 * verifier key, or of another type; GD_ETOOBIG: over GLOG_MAX_KEYS. */
int glog_keys_add(struct glog_keys *ks,
                  const char *s,
                  size_t len,
                  bool witness);
/* Adds the keys of a keys file text[0..len): lines "key VKEY" or
 * "witness VKEY", blank lines and lines starting with "#" ignored.  On
 * an error (glog_keys_add's, or GD_EINVAL for another line) *line is the
 * line number (1-based). */
int glog_keys_file(struct glog_keys *ks,
                   const char *text,
                   size_t len,
                   size_t *line);

/* A checkpoint that passed glog_ckpt_open. */
struct glog_ckpt {
	struct note_checkpoint c; /* c.ext borrowed from the message */
	size_t nwitnesses; /* distinct witness names that cosigned */
	char witnesses[GLOG_MAX_KEYS][NOTE_NAME_MAX + 1];
};

/* Opens the checkpoint msg[0..len) (untrusted) of the log of site: its
 * origin line must be "HOST/grantd/SITE" for some HOST, it must carry a
 * valid signature by an origin key named as its origin line, and valid
 * cosignatures by at least quorum witness keys of distinct names other
 * than the origin's.  A signature by any key of ks that does not verify
 * fails it.  0; GD_ENOTFOUND: ks has no origin key named as the origin
 * line; GD_EINVAL: not a checkpoint, or of another site; GD_ECRYPTO: a
 * signature missing or bad, or the quorum not met. */
int glog_ckpt_open(struct glog_ckpt *out,
                   const char *msg,
                   size_t len,
                   const struct glog_keys *ks,
                   const char *site,
                   size_t quorum,
                   struct buf *why);

/* The checkpoint text of a note we wrote ourselves (the state kept):
 * parses msg[0..len) without checking signatures. */
int glog_ckpt_parse_kept(struct note_checkpoint *out,
                         const char *msg,
                         size_t len);

enum glog_rel {
	GLOG_SAME, /* one size, one root */
	GLOG_NEWER, /* the new tree extends the old one */
	GLOG_OLDER, /* the new tree is a prefix of the old one */
	GLOG_FORK, /* neither: proof that the log was rewritten */
};

/* How the tree (new_size, new_root) relates to (old_size, old_root),
 * both from verified checkpoints: the consistency proof between them is
 * read out of the larger tree's tiles (tlog_tile_read_hashes: every tile
 * checked against that tree's root) fetched through fetch, and checked.
 * 0 and *out; GD_ECRYPTO: the tiles do not match the larger tree's root;
 * the fetch's errors. */
int glog_relate(enum glog_rel *out,
                int64_t old_size,
                const struct tlog_hash *old_root,
                int64_t new_size,
                const struct tlog_hash *new_root,
                tlog_tile_fetch_fn *fetch,
                void *payload);

/* ---- the tree and tiles, recomputed from the entries ------------------ */

/* Called with each tile (level >= 0) the entries make, and its data
 * (t->w hashes); a nonzero return stops and is returned. */
typedef int
glog_tile_fn(const struct tlog_tile *t, const uint8_t *data, void *payload);

struct glog_tree {
	int64_t n; /* leaves added */
	size_t depth;
	struct tlog_hash stack[64]; /* the compact range of [0, n) */
	int count[GLOG_TILE_LEVELS];
	uint8_t tile[GLOG_TILE_LEVELS][TLOG_TILE_WIDTH * TLOG_HASH_LEN];
};

/* t zeroed: a tree of no entries (a struct of 66 KiB: not on a small
 * stack). */
void glog_tree_init(struct glog_tree *t);
/* Appends a leaf hash; each tile that becomes full is passed to fn. */
int glog_tree_add(struct glog_tree *t,
                  const struct tlog_hash *leaf,
                  glog_tile_fn *fn,
                  void *payload);
/* The root of the tree so far into *root; the partial tiles (the
 * rightmost of each level that has any) are passed to fn, lowest level
 * first.  t is unchanged. */
int glog_tree_root(struct glog_tree *t,
                   struct tlog_hash *root,
                   glog_tile_fn *fn,
                   void *payload);

/* ---- entries ------------------------------------------------------------- */

/* An entry's text is read with pushleaf_parse (common/pushleaf.h), the
 * parser of the node that writes it.  The last ref line of e that moves
 * ref in repo, or NULL (borrowed from e). */
const struct pushleaf_ref *
glog_entry_ref(const struct pushleaf *e, const char *repo, const char *ref);

/* ---- state ------------------------------------------------------------- */

/* The file name (in the state directory) of the checkpoint kept for
 * origin: origin with every byte but [A-Za-z0-9._-] written %XX, so
 * "example.org/grantd/paloalto" is "example.org%2Fgrantd%2Fpaloalto".
 * Appended to out. */
void glog_state_name(struct buf *out, const char *origin);

#endif
