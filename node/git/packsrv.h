/*
 * packsrv.h: packs served to peers, a stage of repository replication.
 *
 * A PackReq for a few commits gets a pack built in-process
 * (packbuild.h: no child; sent whole at once when the credit allows);
 * any other starts `git pack-objects --revs --thin --stdout` in the
 * repository; its output goes back in chunks of at most GITIO_CHUNK_MAX,
 * never more than the asker's credit ahead, with an empty chunk every few
 * seconds while git counts or compresses.  A stream without credit for
 * too long is dropped.  The frames go out through gitio's to_router (the
 * sync ROUTER is the writer's socket).
 *
 * The gitrepl actor owns it and calls it; it calls only gitio.c,
 * gitproc.c and packbuild.c.  Actor thread only.
 */
#ifndef GD_PACKSRV_H
#define GD_PACKSRV_H

#include <stdint.h>
#include <zmq.h>

#include "buf.h"
#include "gitio.h"
#include "grantd.pb-c.h"

#define PACKSRV_STREAMS_MAX 8 /* packs served at once */

struct packsrv;

/* A server with no stream; io is borrowed for its life.  *out is the
 * caller's (packsrv_destroy). */
void packsrv_open(struct packsrv **out, struct gitio *io);

/* Every stream closed, its child killed; NULL is fine. */
void packsrv_destroy(struct packsrv **psp);

/* A PackReq from site (behind rid on the ROUTER): start pack-objects, or
 * say why not (a PackErr). */
void packsrv_request(struct packsrv *ps,
                     const struct buf *rid,
                     const char *site,
                     const Grantd__V1__PackReq *q);

/* More credit, or the asker gave the stream up. */
void packsrv_credit(struct packsrv *ps,
                    const char *site,
                    const Grantd__V1__PackCredit *c);
void packsrv_cancel(struct packsrv *ps, const char *site, uint64_t id);

/* Put in items the pipes of the streams whose asker has credit (at most
 * PACKSRV_STREAMS_MAX); returns how many.  After zmq_poll, and before
 * anything else touches the server, packsrv_ready(items) reads them. */
int packsrv_poll(struct packsrv *ps, zmq_pollitem_t *items);
void packsrv_ready(struct packsrv *ps, const zmq_pollitem_t *items);

/* Keep-alives for streams git is slow on; streams without credit for
 * too long are dropped. */
void packsrv_tick(struct packsrv *ps, uint64_t now_ms);

#endif
