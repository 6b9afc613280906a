/*
 * gitrepl.h: the repositories on disk follow the replicated ref records.
 *
 * A push is replicated as a RefUpdate operation (ops.c keeps one LWW
 * register per (repo, ref) in CF_REFS).  This module makes every
 * repository's refs on disk follow those records:
 *
 *  1. For each ref whose record changed, compare the record with the disk.
 *  2. If the record's tip is not in the object database, fetch it as a
 *     thin pack from a peer that has it (the record's origin first, then
 *     any other): `PackReq{wants, haves}` on the actor's own CURVE DEALER
 *     to the peer's sync endpoint, answered by `PackChunk`s of at most
 *     256 KiB under credit-based flow control.  Each chunk goes straight
 *     into libgit2's indexer (git_odb_write_pack: every object's hash is
 *     verified, thin packs are completed from local objects and
 *     alternates), so no pack is ever held in memory whole.
 *  3. Check that the new tips are connected (`git rev-list --objects
 *     --stdin --not --all`, as git's own check_connected does); a bad,
 *     truncated or unconnected pack is refused and the next peer asked.
 *  4. Move the ref with libgit2's compare-and-swap on the value just read
 *     (git_reference_create_matching); a ref that moved meanwhile is read
 *     again.
 *  5. A tip that lost an LWW race (CF_LOSERS) is fetched too; if the
 *     winner descends from it there was no conflict, otherwise it is kept
 *     as refs/grantd/conflicts/SITE/REF and reported by `grantctl status`.
 *     Either way the mark (entry dropped, or "TIP kept") goes to the
 *     writer, which stores it: the actor only reads the store.
 *
 * It also serves packs to peers: a `PackReq` arriving on the sync ROUTER
 * (peer.c) is handed here (gitrepl_serve, registered by main.c for the
 * PACK_* kinds); `git pack-objects --revs --thin --stdout` runs in the
 * repository and its output goes back in chunks, never more than the
 * asker's credit ahead (gitrepl_pump sends them).
 *
 * One thread, the actor, owns all of this: its git_repository handles,
 * its DEALERs, the pack-objects children.  The writer thread talks to it
 * only through the functions below (an inproc pair), so nothing git does
 * ever blocks token validation, and they share no memory but the
 * read-only things it was started with.  A repository whose hook has
 * spooled pushes the node has not yet recorded (grantd-spool/) is left
 * alone until the spool is sent, so a local push is never rolled back.
 * A repository whose directory is not there (yet) is looked at again,
 * backing off to every 4 s: beside gitolite, which makes the
 * repositories, its refs come in once it appears.
 *
 * Beside gitolite (gitolite_home set), a move of the branch that
 * gitolite-admin's HEAD names makes the actor run `gitolite_program
 * grantd-admin-sync` (gitolite's own post-update: checkout, compile,
 * triggers) asynchronously, with an environment of its own (HOME the
 * gitolite home); also once at start, for a move a crash left
 * uncompiled.
 *
 * Inside: gitrepl.c (the actor and its pair), reconcile.c (the items,
 * reconcile, losers), packfetch.c, packsrv.c, glsync.c (the stages),
 * gitio.c (what the stages are handed), gitproc.c (child processes).
 * Calls go one way: the actor calls the reconciler and the stages, and
 * they return verdicts (tests/structure/circles.py checks it).
 */
#ifndef GD_GITREPL_H
#define GD_GITREPL_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "buf.h"
#include "config.h"
#include "peer.h"
#include "store.h"

struct gitrepl;

/* The messages on the inproc pair between the writer and the actor, by
 * their first frame's one byte (OpenSMTPD's imsg_type).  Writer to actor:
 *   CHANGED refs      refs whose record changed ("repo \0 ref \0" ...,
 *                     in the same frame after the byte)
 *   ALL [site]        look at every ref record (site: fetch there first)
 *   SERVE rid site body  a peer's PackReq, PackCredit or PackErr
 *   KEY site \0 key  a peer's new public key (a reload): the actor's
 *                     DEALER to it is made again with it
 *   QUIT
 * Actor to writer:
 *   PEER rid body     a frame for a peer, to send on the sync ROUTER
 *   STATS stats       the counters, each time they changed
 *   MARK key val      a conflict mark: CF_LOSERS key gets val ("TIP kept")
 *   UNMARK key        a conflict mark: CF_LOSERS key goes (no conflict) */
enum gitrepl_msg {
	GITREPL_MSG_CHANGED = 'C',
	GITREPL_MSG_ALL = 'A',
	GITREPL_MSG_SERVE = 'S',
	GITREPL_MSG_KEY = 'K',
	GITREPL_MSG_QUIT = 'Q',
	GITREPL_MSG_PEER = 'P',
	GITREPL_MSG_STATS = 'T',
	GITREPL_MSG_MARK = 'L',
	GITREPL_MSG_UNMARK = 'D',
};

/* What the actor is started with.  self, peers and store are borrowed and
 * must outlive it (the actor reads them: self and the peers' sites and
 * endpoints never change, and RocksDB reads are thread-safe); the strings
 * and the peers' public keys are copied (a new key comes through
 * gitrepl_set_key). */
struct gitrepl_opts {
	const struct peer_self *self;    /* zmq context, site, key pair */
	const struct config_peer *peers; /* whom to fetch from */
	int npeers;
	const char *repo_dir;
	struct store *store;             /* read only, on the actor */
	const char *hook_path;           /* grant-hook, for spooled pushes */
	const char *conf_path;           /* ... and its config */
	/* gitolite mode: the hosting account's HOME, and the gitolite
	 * command (NULL: not gitolite mode) */
	const char *gitolite_home;
	const char *gitolite_program;
	/* metrics.h: each successful fetch's duration (NULL: none) */
	struct metrics_hist *fetch_hist;
};

/* Start the actor (libgit2 initialised).  *out is the caller's
 * (gitrepl_stop).  Returns 0 or GD_EIO (logged). */
int gitrepl_start(struct gitrepl **out, const struct gitrepl_opts *o);

/* Stop the actor: running pack-objects children are killed, a fetch in
 * progress is dropped (its temporary pack removed).  NULL is fine. */
void gitrepl_stop(struct gitrepl **gp);

/* The writer thread's end of the pair: poll it for input and call
 * gitrepl_pump() when it is readable. */
void *gitrepl_socket(struct gitrepl *g);

/* Take what the actor sent: frames for peers (pack chunks and errors) go
 * out on router, the sync ROUTER (NULL: dropped; so is a frame for a peer
 * that is gone: its stream times out); its counters are kept for
 * gitrepl_status; conflict marks are put in marks (CF_LOSERS), the
 * caller's batch to commit.  Returns how many marks were put. */
int gitrepl_pump(struct gitrepl *g, void *router, struct store_batch *marks);

/* Peer site's public key (Z85) is now key: the actor makes its DEALER to
 * site again with it (a reload, reload.h; the actor keeps its own copy of
 * the keys, never the writer's config).  Writer thread.  Returns 0,
 * GD_ENOTFOUND (no such peer), GD_EINVAL (not a key) or GD_EIO (not
 * sent). */
int gitrepl_set_key(struct gitrepl *g, const char *site, const char *key);

/* Refs whose record changed, as ops.refs_touched holds them ("repo \0 ref
 * \0" ...); refs is emptied. */
void gitrepl_changed(struct gitrepl *g, struct buf *refs);

/* Check every ref record (start-up, end of catch-up, rebuild); prefer,
 * when not NULL, is the site to fetch from first. */
void gitrepl_all(struct gitrepl *g, const char *prefer);

/* A request on the sync ROUTER that belongs here (pack_req, pack_credit,
 * pack_err): a peer_fn, payload the struct gitrepl; the frame is handed
 * to the actor. */
void gitrepl_serve(const struct peer_req *rq, void *payload);

/* Add the actor's counters to obj, as of the last gitrepl_pump: pending
 * refs, fetches, failures, bytes, packs served, refs moved, conflicts
 * kept, the last error; in gitolite mode also the admin syncs run, failed,
 * and the last failure's error. */
void gitrepl_status(struct gitrepl *g, cJSON *obj);

#endif
