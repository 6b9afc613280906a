/*
 * peer.h: the peer link, below repl and gitrepl.
 *
 * Everything two sites say to each other is one PeerMsg per frame
 * (grantd.proto) over CurveZMQ.  This module is that link and nothing of
 * what is said on it:
 *
 *  - Framing.  peer_msg_init() stamps a message with our protocol version,
 *    our site and the send time; peer_send() packs and sends it (the packed
 *    copy is wiped: operations carry secrets); peer_msg_decode() unpacks a
 *    frame and refuses one not of our version or not from the site of the
 *    link it came on.
 *  - Sockets.  CURVE clients (a SUB or DEALER with this node's key pair,
 *    for a peer's server key) and CURVE servers (PUB, the sync ROUTER) that
 *    admit only the configured peers' keys, through the ZAP handler a
 *    struct peer_link binds first: a CURVE server without a ZAP handler
 *    admits any key, so a server socket is only made through the link.
 *  - Dispatch.  The link reads the sync ROUTER; each request, decoded and
 *    checked, is first put to the planes table (planes.h: may this kind
 *    come from this sender's role?), then goes to the handler registered
 *    for its kind (peer_on), as
 *    zloop or ae.c register a reader: repl registers ranges, snapshots and
 *    vectors, main.c registers gitrepl for packs, and neither includes the
 *    other.  A frame nobody takes is dropped and counted.
 *
 * Threads: a struct peer_link, its ZAP socket and its ROUTER belong to
 * one thread (the node's main loop).  The free functions (peer_msg_*,
 * peer_send, peer_curve_client) keep no state and may be used by any
 * thread on sockets it owns (the gitrepl actor uses them for its DEALERs).
 */
#ifndef GD_PEER_H
#define GD_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "config.h"
#include "grantd.pb-c.h"

#define GD_PEER_VERSION 2

/* Who this node is on the link.  Borrowed by everything opened with it:
 * it must outlive them (main.c keeps it for the node's life). */
struct peer_self {
	void *zctx;
	const char *site;
	const char *curve_pub; /* Z85_KEY_LEN characters */
	const char *curve_sec;
};

/* ---- framing ------------------------------------------------------------ */

/* A PeerMsg from self: cleared, with version, sender and send time set;
 * the caller sets the body. */
void peer_msg_init(const struct peer_self *self, Grantd__V1__PeerMsg *m);

/* Pack m and send it on sock without waiting, behind routing id when id
 * is not NULL.  Returns 0 or GD_EIO (not sent: no peer, or its queue is
 * full; errno says which). */
int peer_send(void *sock,
              const Grantd__V1__PeerMsg *m,
              const void *id,
              size_t idlen);

/* Why m (NULL: it did not decode) cannot be taken on site's link, or NULL
 * when it can. */
const char *peer_msg_problem(const Grantd__V1__PeerMsg *m, const char *site);

/* Unpack a frame that came on site's link.  Returns the message (the
 * caller's: grantd__v1__peer_msg__free_unpacked) or NULL with *why set
 * when it does not decode or peer_msg_problem refuses it: static text, or
 * for a sender that does not match, this thread's buffer naming the site
 * the sender says it is (valid until the thread's next call). */
Grantd__V1__PeerMsg *
peer_msg_decode(const void *p, size_t len, const char *site, const char **why);

/* ---- sockets ------------------------------------------------------------ */

/* A CURVE client socket of the given type (ZMQ_SUB subscribes to
 * everything, ZMQ_DEALER queues only for a connected peer) connected to
 * endpoint as self, for a server with server_key; frames over maxmsg are
 * refused.  NULL on failure (logged).  The caller closes it. */
void *peer_curve_client(const struct peer_self *self,
                        int type,
                        const char *endpoint,
                        const char *server_key,
                        int64_t maxmsg);

struct linkmon;

/* peer_curve_client, with mon (linkmon.h; NULL: none) watching the socket's
 * handshakes from before it connects. */
void *peer_curve_client_watched(const struct peer_self *self,
                                int type,
                                const char *endpoint,
                                const char *server_key,
                                int64_t maxmsg,
                                struct linkmon *mon);

/* Receive one frame without waiting: 1 with *msg filled (the caller
 * closes it), 0 when nothing is waiting (*msg closed). */
int peer_recv_frame(void *sock, zmq_msg_t *msg);

/* Skip the rest of a multi-frame message after last (left open). */
void peer_drain(void *sock, zmq_msg_t *last);

/* ---- the link: admission and the sync ROUTER ---------------------------- */

struct peer_link;

struct peer_link_opts {
	const struct peer_self *self;
	const struct config_peer *peers; /* admitted by key, named by site */
	int npeers;
	const char *sync; /* the ROUTER's endpoint; NULL: no ROUTER */
	int64_t maxmsg; /* larger ROUTER frames are refused */
	uint64_t *dropped; /* bumped for every frame refused (NULL:
	                    * the link's own, peer_dropped()) */
};

/* Bind the ZAP handler (one per zmq context), then the sync ROUTER when
 * o->sync is set.  peers and self are borrowed.  *out is the caller's
 * (peer_close).  Returns 0, GD_EINVAL (a bad public key) or GD_EIO
 * (logged). */
int peer_open(struct peer_link **out, const struct peer_link_opts *o);
void peer_close(struct peer_link **lp);

/* Admit key (Z85) for peer site from now on, and no longer the key it had
 * (a reload: reload.h).  Connections the old key made stay until they
 * drop.  Returns 0, GD_EINVAL (not a Z85 key) or GD_ENOTFOUND (no such
 * peer: a reload never adds one). */
int peer_set_key(struct peer_link *l, const char *site, const char *key);

/* A CURVE server of the given type bound to endpoint, admitting only the
 * link's peers; NULL on failure (logged).  The caller closes it. */
void *peer_server(struct peer_link *l,
                  int type,
                  const char *endpoint,
                  int64_t maxmsg);

/* A request that came on the sync ROUTER, decoded and checked.  All of it
 * is borrowed for the handler's call only. */
struct peer_req {
	struct peer_link *link;
	const void *rid; /* the asker's routing id */
	size_t ridlen;
	const char *site; /* the asker, from its CURVE key */
	const Grantd__V1__PeerMsg *m;
	const void *frame; /* m as received */
	size_t len;
};

typedef void (*peer_fn)(const struct peer_req *rq, void *payload);

/* Hand every request of kind (a Grantd__V1__PeerMsg__BodyCase) to fn.
 * Returns 0, or GD_EINVAL for a kind out of range or already taken. */
int peer_on(struct peer_link *l, int kind, peer_fn fn, void *payload);

/* Answer rq's asker with m on the ROUTER.  Returns peer_send's code. */
int peer_reply(const struct peer_req *rq, const Grantd__V1__PeerMsg *m);

/* The sockets to poll (ZAP, then the ROUTER if any); returns how many
 * were written (at most max). */
int peer_pollitems(struct peer_link *l, zmq_pollitem_t *items, int max);

/* Answer one waiting ZAP request, if any. */
void peer_zap_handle(struct peer_link *l);

/* Read one message on the ROUTER and dispatch it.  Returns 1 when one was
 * read (taken or dropped), 0 when none was waiting. */
int peer_route(struct peer_link *l);

/* The sync ROUTER (NULL when the link has none), for frames other
 * threads prepared (gitrepl_pump). */
void *peer_router(struct peer_link *l);

/* Connections refused by ZAP so far. */
uint64_t peer_refused(struct peer_link *l);

/* The public key (Z85) of the last connection refused, with its address
 * in *addr; NULL when none was. */
const char *peer_last_refused(struct peer_link *l, const char **addr);

/* Requests on the ROUTER the planes table (planes.h) did not take from
 * their sender's role so far (also counted in opts.dropped). */
uint64_t peer_planes_refused(struct peer_link *l);

/* Frames the link refused so far (opts.dropped's count). */
uint64_t peer_dropped(const struct peer_link *l);

#endif
