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
 * The socket helpers both threads use (reading, checking and answering
 * one request) are request.h's; the messages on the reader's pipe are
 * pipe.h's.  Called by main.c's loop only (writer thread).
 */
#ifndef GD_CONTROL_H
#define GD_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct control;
struct node;

/* Handle the requests the reader forwards on pipe (readers_pipe(); the
 * caller's, writer thread).  *out is the caller's (control_destroy).
 * Returns 0 or GD_EINVAL (a command table that breaks its rules). */
int control_open(struct control **out, struct node *node, void *pipe);
void control_destroy(struct control **cp);

/* The pipe, for the node's poll loop. */
void *control_socket(struct control *c);

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
