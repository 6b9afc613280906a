/*
 * request.h: one request on a socket, as both threads handle it.
 *
 * The reader thread (readers.c) reads requests off the user and admin
 * sockets, the writer thread (control.c) off the reader's pipe; both read,
 * check and answer them with these helpers, each on its own sockets only.
 * A request is [id][""][payload frames]: REQ clients send one payload
 * frame (a grantd.v1.Request); a few more are tolerated, and their total
 * is GD_CTL_MAX_REQUEST.  The answer is [id][""][grantd.v1.Reply].
 */
#ifndef GD_REQUEST_H
#define GD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"

struct req;

/* The most frames a request may have, envelope included. */
#define REQUEST_MAX_FRAMES 16

/*
 * Decode and check one request frame: size, protocol version, command name
 * present and printable, argument count and lengths, user and client_ip
 * shapes, unpacked with al (NULL: malloc; arena.h: the reader's).  On
 * success *out is the caller's (grantd__v1__request__free_unpacked(*out,
 * al); a struct req names al in rq_al for request_free).  Returns 0 or
 * GD_EPROTO / GD_ETOOBIG with a one-line reason in err.  Safe on any input.
 */
int request_decode(Grantd__V1__Request **out, const uint8_t *data,
		   size_t len, ProtobufCAllocator *al, struct buf *err);

/*
 * Read one [id][""][payload] message from sock; 1 read, 0 none waiting,
 * <0 error: GD_ETOOBIG for more than REQUEST_MAX_FRAMES frames or a
 * payload over GD_CTL_MAX_REQUEST (the rest of it is read and dropped as
 * it comes, never kept; ident is kept, to answer), GD_EPROTO for a bad
 * envelope.  Frames are wiped once copied: a request may carry a secret.
 * payload never grows past GD_CTL_MAX_REQUEST + 1, so it is never moved
 * by realloc with a copy left behind; the caller wipes it.
 */
int request_recv(void *sock, struct buf *ident, struct buf *payload);

/* r's answer, a packed grantd.v1.Reply of *len bytes: the caller's
 * (wipe it, then free: it may hold a fresh secret). */
uint8_t *request_pack_reply(const struct req *r, size_t *len);

/* The same packed onto out (the reader's answers: no copy of its own;
 * out is the caller's to wipe, as the frame above). */
void request_pack_reply_to(const struct req *r, struct buf *out);

/* Send r's answer [r->ident][""][Reply] on r->sock, never blocking. */
void request_send_reply(struct req *r);

/* Free what r holds (wiping what may be secret); r may then be reused
 * after a memset. */
void request_free(struct req *r);

/* Answer a request over the bounds (logged; the caller counts it). */
void request_refuse_oversized(struct req *r, void *sock, bool admin);

/* Log that r failed: the command and who asked, never its arguments. */
void request_log_failed(const struct req *r, int err);

#endif
