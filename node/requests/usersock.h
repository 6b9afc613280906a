/*
 * usersock.h: the user and admin sockets, plain unix stream sockets that
 * carry grantd.v1.Request and Reply with a length prefix (no ZeroMQ).
 *
 * Why: a push check is a lookup of a few hundred bytes; over a ZeroMQ
 * ROUTER the reader thread spent 59% of its time in the kernel waking
 * ZeroMQ's I/O thread, and every grant-shell and grant-hook paid ~1.9 ms
 * loading libzmq (issue 23 point 1: a plain unix echo did 2.2x ZeroMQ's).
 *
 * The protocol (wire.h): each message is a 4-byte big-endian length, then
 * that many bytes: the client sends a Request, the node answers a Reply.
 * A client may send several requests on one connection without waiting;
 * the answers come in the order of the requests.  A length over
 * GD_CTL_MAX_REQUEST is answered by the refusal the serve function makes
 * (request == NULL), then the connection is closed: the stream cannot be
 * followed past it.
 *
 * Input is untrusted: at most max_conns connections (one more accepted
 * closes the oldest), a connection makes progress within deadline_ms
 * (a whole request read, or answer bytes written; time the node owes an
 * answer does not count) or it is closed, at most USERSOCK_MAX_INFLIGHT
 * requests of a connection are unanswered and at most USERSOCK_MAX_OUT
 * bytes of answers wait for it (more: its input is left unread until it
 * reads).  Out of file descriptors, accepting pauses 100 ms.  Nothing
 * blocks: served from the reader thread's poll
 * (readers.c) beside the keys socket and the writer's pipe.
 *
 * Requests answered later (forwarded to the writer) carry an id
 * (USERSOCK_ID_LEN bytes: the connection's slot, its generation and the
 * request's number); usersock_answer with that id puts the answer in its
 * place.  An answer for a connection that has gone is dropped.
 *
 * Thread: all of it runs on the thread that called usersock_open.
 */
#ifndef GD_USERSOCK_H
#define GD_USERSOCK_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "buf.h"

#define USERSOCK_MAX_CONNS    512 /* bench_scale: 256 in flight */
#define USERSOCK_DEADLINE_MS  15000 /* CLI_TIMEOUT_MS: a client's wait */
#define USERSOCK_MAX_INFLIGHT 1024 /* unanswered requests a connection */
#define USERSOCK_MAX_OUT      (1 << 20) /* answer bytes waiting, then stop */
#define USERSOCK_ID_LEN       16

struct usersock;

/* One request (len bytes at request, wiped by the caller after) with its
 * id: answer it now by appending a packed Reply to reply and returning 1,
 * or return 0 and call usersock_answer(id) later.  request is NULL for
 * one over GD_CTL_MAX_REQUEST (len its announced length): append the
 * refusal and return 1. */
typedef int (*usersock_serve_fn)(void *arg,
                                 const uint8_t *id,
                                 size_t idlen,
                                 const uint8_t *request,
                                 size_t len,
                                 struct buf *reply);

struct usersock_opts {
	const char *path; /* replaced if it exists (a stale socket) */
	unsigned mode; /* 0660 user, 0600 admin */
	const char *group; /* chgrp to it when it exists; NULL: none */
	usersock_serve_fn serve;
	void *arg;
	int max_conns; /* 0: USERSOCK_MAX_CONNS */
	int64_t deadline_ms; /* 0: USERSOCK_DEADLINE_MS */
};

/* Bind and listen.  *out is the caller's (usersock_close).  Returns 0 or
 * GD_EIO (logged). */
int usersock_open(struct usersock **out, const struct usersock_opts *o);

/* Close every connection and the socket, remove its file.  NULL-safe;
 * sets *usp to NULL. */
void usersock_close(struct usersock **usp);

/* How many poll items usersock_items may fill: 1 + max_conns. */
int usersock_nitems(const struct usersock *us);

/* Close the connections past their deadline, then fill items (room for
 * usersock_nitems) with the listening socket and each connection that
 * can make progress, and lower *timeout_ms (-1: none yet) to the nearest
 * deadline.  Returns the number of items filled. */
int usersock_items(struct usersock *us,
                   zmq_pollitem_t *items,
                   long *timeout_ms);

/* Serve what the poll found: the n items usersock_items filled. */
void usersock_serve(struct usersock *us, const zmq_pollitem_t *items, int n);

/* The answer (a packed Reply, len bytes, copied) to the request id
 * (usersock_serve_fn): queued in its place and sent when those before it
 * are.  Returns 0, or GD_ENOTFOUND when its connection has gone or the id is
 * not one (dropped). */
int usersock_answer(struct usersock *us,
                    const uint8_t *id,
                    size_t idlen,
                    const uint8_t *reply,
                    size_t len);

#endif
