/*
 * tlog_tile.h: C2SP tlog-tiles: the tiles and entry bundles a log serves
 * over HTTP (issue 21, SPEC 9), cut out of tlog.h's table of stored hashes.
 *
 * A tile holds up to 256 consecutive hashes of one level of tiles: level
 * 0 tiles hold leaf hashes, a level L tile the hashes of full level L-1
 * tiles (tree level 8 * L).  Tile N of a level covers hashes
 * [N * 256, N * 256 + W); a full tile has W = 256, the rightmost ones
 * of a tree are partial (1 <= W <= 255).  An entry bundle (level
 * TLOG_TILE_ENTRIES here) holds the entries of level 0 tile N, each as a
 * big-endian uint16 length and its bytes.
 *
 * Pure functions: any thread.  Errors are negative enum gd_err: GD_EINVAL
 * for malformed input or a tile that does not hold the index asked for,
 * GD_ETOOBIG for an output that does not fit, GD_ECRYPTO for a bundle
 * that does not match its tile, and the read callback's own, unchanged.
 */
#ifndef GD_TLOG_TILE_H
#define GD_TLOG_TILE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "tlog.h"

#define TLOG_TILE_HEIGHT    8
#define TLOG_TILE_WIDTH     256 /* 1 << TLOG_TILE_HEIGHT */
#define TLOG_TILE_ENTRIES   (-1) /* tile.level of an entry bundle */
#define TLOG_TILE_MAX_LEVEL 63
/* "tile/entries/x009/x223/x372/x036/x854/x775/807.p/255" and NUL fit. */
#define TLOG_TILE_PATH_MAX 64
/* An entry is at most this long in a bundle (its uint16 length). */
#define TLOG_ENTRY_MAX 65535

struct tlog_tile {
	int level; /* 0..63, or TLOG_TILE_ENTRIES */
	int64_t n; /* the tile's number within its level, >= 0 */
	int w; /* 1..256; 256 = a full tile */
};

/* The tile's path, "tile/L/N[.p/W]" or "tile/entries/N[.p/W]", N in
 * groups of three digits, all but the last with an "x" ("x001/x234/067").
 * Returns its length, or GD_EINVAL for a tile out of range. */
int tlog_tile_path(char out[TLOG_TILE_PATH_MAX], const struct tlog_tile *t);
/* Parses path[0..len) (untrusted) as tlog_tile_path() writes it; anything
 * else (leading zeros, a group too many, W = 256 spelled out) is
 * GD_EINVAL. */
int tlog_tile_parse_path(struct tlog_tile *out, const char *path, size_t len);

/* The smallest tile that holds stored hash index (>= 0), and where in its
 * data the hashes that make that hash sit: bytes [*start, *end) (a hash
 * of a level between two tile levels is the root of a run of the tile's
 * hashes).  start and end may be NULL. */
void tlog_tile_for_index(struct tlog_tile *out,
                         int64_t index,
                         size_t *start,
                         size_t *end);
/* The stored hash at index, out of tile t's data[0..len), which must hold
 * at least t->w hashes; GD_EINVAL when t does not hold index. */
int tlog_tile_hash(struct tlog_hash *out,
                   const struct tlog_tile *t,
                   const uint8_t *data,
                   size_t len,
                   int64_t index);
/* Tile t's data (t->w * 32 bytes into out, t->level >= 0) from the table
 * of stored hashes. */
int tlog_tile_read(uint8_t *out,
                   const struct tlog_tile *t,
                   tlog_read_fn *read,
                   void *payload);

/* Calls fn for every tile (levels >= 0) that a tree of new_size leaves has
 * and one of old_size leaves has not (full or with another width), level
 * by level, lowest first; 0 <= old_size <= new_size.  With old_size = 0:
 * the tiles of a tree.  A nonzero return of fn stops the walk and is
 * returned. */
typedef int tlog_tile_fn(const struct tlog_tile *t, void *payload);
int tlog_tiles_new(int64_t old_size,
                   int64_t new_size,
                   tlog_tile_fn *fn,
                   void *payload);

/* Appends entry[0..len) to an entry bundle: GD_ETOOBIG when len >
 * TLOG_ENTRY_MAX. */
int tlog_bundle_add(struct buf *b, const void *entry, size_t len);

struct tlog_bundle_iter {
	const uint8_t *p;
	size_t left;
};
void tlog_bundle_iter_init(struct tlog_bundle_iter *it,
                           const void *bundle,
                           size_t len);
/* The next entry of the bundle (untrusted): 1 and *entry, *len (pointing
 * into the bundle), 0 at its end, GD_EINVAL when it is cut short. */
int tlog_bundle_next(struct tlog_bundle_iter *it,
                     const uint8_t **entry,
                     size_t *len);
/* 0 when bundle[0..blen) holds exactly as many entries as level 0 tile
 * data[0..dlen) holds hashes, each hashing to its hash; GD_EINVAL when it
 * does not parse, GD_ECRYPTO when an entry or the count differs. */
int tlog_bundle_check(const void *bundle,
                      size_t blen,
                      const uint8_t *data,
                      size_t dlen);

/* ---- reading hashes out of tiles, checked against a tree head -------- */

/* Fetches tile t's data, t->w * 32 bytes, into out (e.g. over HTTP from
 * "tile/L/N[.p/W]"): 0, or a negative enum gd_err passed up unchanged. */
typedef int
tlog_tile_fetch_fn(uint8_t *out, const struct tlog_tile *t, void *payload);

/* The tree a client trusts (from a checkpoint whose signatures it
 * verified) and where its tiles come from. */
struct tlog_tile_reader {
	int64_t size; /* >= 1 */
	struct tlog_hash root;
	tlog_tile_fetch_fn *fetch;
	void *payload;
};

/* A tlog_read_fn (payload: a struct tlog_tile_reader *) that reads stored
 * hashes out of the tree's tiles, as Go's sumdb/tlog TileHashReader does:
 * it fetches the tiles holding the indexes, their parent tiles up to the
 * tiles of the tree's root, and checks every fetched tile against its
 * parent and the root against reader->root before it returns a hash.  So
 * tlog_tree_hash, tlog_prove_record and tlog_prove_tree can run on a
 * server's tiles, and what they return is what the tree head commits to.
 * GD_EINVAL for an index not in the tree; GD_ECRYPTO for a tile that
 * does not match; the fetch's own errors. */
int tlog_tile_read_hashes(struct tlog_hash *out,
                          const int64_t *indexes,
                          size_t n,
                          void *reader);

#endif
