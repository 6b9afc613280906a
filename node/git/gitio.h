/*
 * gitio.h: what the gitrepl actor hands each stage of repository
 * replication at open (packfetch.c, packsrv.c, glsync.c, reconcile.c),
 * so that a stage never calls the actor back: how a frame leaves for a
 * peer, how a conflict mark reaches the writer (both through callbacks
 * the actor sets: its pair with the writer), where the repositories are
 * (the one open repository cached), who the peers are, and the counters
 * `grantctl status` shows, which the stages add to and the actor sends.
 *
 * Actor thread only.  It calls nobody in node/ but peer.c and repos.c.
 */
#ifndef GD_GITIO_H
#define GD_GITIO_H

#include <git2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "gitproc.h"
#include "grantd.pb-c.h"
#include "names.h"
#include "peer.h"
#include "store.h"

#define GITIO_CHUNK_MAX    (256 * 1024) /* pack bytes per PackChunk */
#define GITIO_WANTS_MAX    256 /* tips one PackReq asks for */
#define GITIO_HAVES_MAX    512 /* tips one PackReq says it has */
#define GITIO_MARKS_RECENT 64 /* conflict marks remembered as sent */
#define GITIO_MARK_HASH    16 /* BLAKE2b of a mark's key */

/* The counters gitrepl_status shows: kept on the actor, copied to the
 * writer over the pair whenever they change (a plain struct: memcpy). */
struct gitio_stats {
	uint64_t fetches, fetch_failures, bytes_in, served, bytes_out;
	uint64_t refs_moved, conflicts, pending;
	uint64_t last_fetch_ms, last_fetch_bytes;
	uint64_t refs_looked; /* refs compared with their record */
	char last_error[256];
	/* gitolite mode: admin syncs run, and those that failed */
	uint64_t gitolite_syncs, gitolite_failures;
	char gitolite_last_error[256];
};

struct gitio {
	const struct peer_self *self; /* zmq context, site, keys */
	const struct config_peer *peers; /* by index: the DEALERs' order */
	int npeers;
	const char *repo_dir;
	struct gitio_stats *st; /* the actor's */
	/* m for the peer behind rid on the sync ROUTER, which is the
	 * writer's socket: 0 or GD_EIO */
	int (*to_router)(void *arg,
	                 const struct buf *rid,
	                 const Grantd__V1__PeerMsg *m);
	/* CF_LOSERS key gets val (NULL: goes), written by the writer */
	void (*mark)(void *arg,
	             const char *key,
	             size_t klen,
	             const char *val,
	             size_t vlen);
	void *arg; /* theirs */
	/* the one open repository, cached (gitio_repo) */
	git_repository *repo;
	char repo_name[NAME_REPO_MAX + 1];
	/* the keys of the last conflict marks sent, maybe not written yet
	 * (gitio_mark_sent), hashed: a fixed size, nothing to free */
	uint8_t marked[GITIO_MARKS_RECENT][GITIO_MARK_HASH];
	unsigned nmarked;
};

/* The path of repository name into out. */
void gitio_path(const struct gitio *io, struct buf *out, const char *name);

/* The repository name, opened bare and cached; NULL when it cannot be
 * opened (yet).  Borrowed until the next call. */
git_repository *gitio_repo(struct gitio *io, const char *name);

/* The committed record of repository name (the store read only) into
 * *out, the caller's (grantd__v1__repo__free_unpacked): 0, or
 * GD_ENOTFOUND (none, or none that decodes; *out NULL). */
int gitio_repo_record(struct store *s,
                      const char *name,
                      Grantd__V1__Repo **out);

/* Drop the cached repository (stopping). */
void gitio_close(struct gitio *io);

/* Peer index of site, or -1. */
int gitio_peer_index(const struct gitio *io, const char *site);

/* The last error, for status. */
void gitio_error(struct gitio *io, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* m on one of the actor's DEALERs (sock): 0 or GD_EIO (not connected). */
int gitio_send(struct gitio *io, void *sock, const Grantd__V1__PeerMsg *m);

/* m to the peer behind rid on the sync ROUTER (io->to_router). */
int gitio_send_router(struct gitio *io,
                      const struct buf *rid,
                      const Grantd__V1__PeerMsg *m);

/* A PackErr {id, why}: on the DEALER sock, or (sock NULL) behind rid. */
void gitio_pack_err(struct gitio *io,
                    void *sock,
                    const struct buf *rid,
                    uint64_t id,
                    const char *why);

/* A conflict mark for the writer (io->mark), remembered as sent. */
void gitio_mark(struct gitio *io,
                const char *key,
                size_t klen,
                const char *val,
                size_t vlen);

/* Was a mark for this CF_LOSERS key among the last GITIO_MARKS_RECENT
 * sent?  The writer may not have written it yet: a second look at the
 * same loser meanwhile must not count it twice. */
bool gitio_mark_sent(const struct gitio *io, const char *key, size_t klen);

#endif
