/*
 * control.h: the user socket and the admin socket.
 *
 * Both are ZeroMQ ROUTER sockets on ipc:// (user socket mode 0660 group
 * git, admin socket 0600).  Each frame is one grantd.v1.Request; the answer
 * is one grantd.v1.Reply.  The command table (cmd.h) names every command,
 * the sockets it may arrive on (like OpenSSH's monitor.c), what it needs
 * and its handler; a command that is not allowed on the socket it came in
 * on is refused.
 *
 * Requests are handled in batches by the node's one writer thread: all
 * requests waiting are read; reads (checks, lists, status) are answered at
 * once; the others are handled against a store batch (which sees the
 * batch's own writes), the batch is written, and the syncer thread makes
 * it durable with one fsync for every batch waiting (pipelined group
 * commit).  Only then are the writers answered and the operations
 * published.  So nothing is acknowledged before it is durable.
 */
#ifndef GD_CONTROL_H
#define GD_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "grantd.pb-c.h"

struct node;

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

/* Bind both sockets (removing stale socket files first) and set their
 * modes.  *out is the caller's (control_destroy). */
int control_open(struct control **out, struct node *node, void *zctx);
void control_destroy(struct control **cp);

/* The sockets, for the node's poll loop. */
void *control_user_socket(struct control *c);
void *control_admin_socket(struct control *c);

/* Read every request waiting on both sockets (at most max), answer the
 * reads, handle the rest in the writer's batch and commit it
 * (writer_commit); their replies are held by the writer until the batch is
 * durable (writer_hold).  Returns the number of requests handled or a
 * negative gd_err if the write failed (then every request in the batch
 * was answered with an error). */
int control_serve_batch(struct control *c, int max);

#endif
