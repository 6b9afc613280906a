/*
 * control.h: requests to the node, and their batches.
 *
 * The user and admin sockets are ZeroMQ ROUTER sockets on ipc:// (user
 * socket mode 0660 group git, admin socket 0600), owned by the reader
 * thread (readers.h).  Each frame is one grantd.v1.Request; the answer is
 * one grantd.v1.Reply.  The command table (cmd.h) names every command,
 * the sockets it may arrive on (like OpenSSH's monitor.c), what it needs
 * and its handler; a command that is not allowed on the socket it came in
 * on is refused.
 *
 * The reader answers the reads that need nothing of the writer's and
 * forwards every other request to the writer thread, which handles them
 * here in batches: all requests waiting are read; the reads left (status,
 * verify) are answered at once; the others are handled against the
 * writer's batch (which sees the batch's own writes), the batch is written
 * (writer_commit), and the syncer thread makes it durable with one fsync
 * for every batch waiting (pipelined group commit).  Only then are the
 * writers answered and the operations published.  So nothing is
 * acknowledged before it is durable.
 *
 * The socket helpers below are shared by both threads; each calls them on
 * its own sockets only.
 */
#ifndef GD_CONTROL_H
#define GD_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"

struct node;
struct req;

/*
 * Decode and check one request frame: size, protocol version, command name
 * present and printable, argument count and lengths, user and client_ip
 * shapes.  On success *out is the caller's
 * (grantd__v1__request__free_unpacked(*out, NULL)).  Returns 0 or
 * GD_EPROTO / GD_ETOOBIG with a one-line reason in err.  Safe on any input.
 */
int control_decode(Grantd__V1__Request **out, const uint8_t *data,
		   size_t len, struct buf *err);

struct control;

/* Handle the requests the reader forwards on pipe (readers_pipe(); the
 * caller's, writer thread).  *out is the caller's (control_destroy).
 * Returns 0 or GD_EINVAL (a command table that breaks its rules). */
int control_open(struct control **out, struct node *node, void *pipe);
void control_destroy(struct control **cp);

/* The pipe, for the node's poll loop. */
void *control_socket(struct control *c);

/* ---- shared by the reader and the writer --------------------------------- */

/* A request is [id][""][payload frames]: REQ clients send one payload
 * frame; a few more are tolerated, and their total is GD_CTL_MAX_REQUEST. */
#define CTL_MAX_FRAMES 16

/*
 * Read one [id][""][payload] message from sock; 1 read, 0 none waiting,
 * <0 error: GD_ETOOBIG for more than CTL_MAX_FRAMES frames or a payload
 * over GD_CTL_MAX_REQUEST (the rest of it is read and dropped as it comes,
 * never kept; ident is kept, to answer), GD_EPROTO for a bad envelope.
 * Frames are wiped once copied: a request may carry a secret.  payload
 * never grows past GD_CTL_MAX_REQUEST + 1, so it is never moved by realloc
 * with a copy left behind; the caller wipes it.
 */
int control_recv(void *sock, struct buf *ident, struct buf *payload);

/* Send r's answer [r->ident][""][Reply] on r->sock, never blocking. */
void control_send_reply(struct req *r);

/* Free what r holds (wiping what may be secret); r may then be reused
 * after a memset. */
void control_req_free(struct req *r);

/* Answer a request over the bounds (logged; the caller counts it). */
void control_refuse_oversized(struct req *r, void *sock, bool admin);

/* Log that r failed: the command and who asked, never its arguments. */
void control_log_failed(const struct req *r, int err);

/* Read every request waiting on both sockets (at most max), answer the
 * reads, handle the rest in the writer's batch and commit it
 * (writer_commit); their replies are held by the writer until the batch is
 * durable (writer_hold).  Returns the number of requests handled or a
 * negative gd_err if the write failed (then every request in the batch
 * was answered with an error). */
int control_serve_batch(struct control *c, int max);

/* Are requests whose votes came in waiting to be handled again
 * (control_serve_batch takes them first)? */
bool control_resumed(const struct control *c);

#endif
