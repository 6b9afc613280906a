/*
 * keysock.h: the keys socket, a plain unix stream socket that answers
 * sshd's key lookups (grant-keys ACCOUNT FINGERPRINT) without ZeroMQ.
 *
 * Why: sshd runs grant-keys on every login, and a program linking libzmq
 * spends 5-35 ms loading its 21 shared libraries before main(); the
 * client of this socket needs only libc (issue 9: p99 < 2 ms, process
 * start included).
 *
 * The protocol, one lookup per connection:
 *   client: "FINGERPRINT\n"           (sshd's %f, SHA256:...; a "\r"
 *                                      before the "\n" is allowed)
 *   node:   the answer, then it closes:
 *           ""                         no active user has that key
 *           "NAME\tKEY\n"              the user and the key line, as
 *                                      keys.find gives them
 *           "!N message\n"             refused or failed: N is the exit
 *                                      status keys.find would have
 *                                      (2 bad input, 4 failed to decide)
 * Input is untrusted: a line is at most KEYSOCK_MAX_LINE bytes (longer:
 * "!2 line too long"), a connection lives at most deadline_ms from its
 * accept (then it is closed, answered or not), and at most max_conns are
 * open (one more accepted closes the oldest).  Nothing blocks: the
 * sockets are non-blocking and served from the reader thread's poll
 * (readers.c), beside the ZeroMQ sockets, so a client that never sends
 * or never reads holds only its own slot.
 *
 * Thread: all of it runs on the thread that called keysock_open.
 */
#ifndef GD_KEYSOCK_H
#define GD_KEYSOCK_H

#include <stdint.h>
#include <zmq.h>

#include "buf.h"

#define KEYSOCK_MAX_LINE 128          /* "SHA256:" + 43 base64 + slack */
#define KEYSOCK_MAX_CONNS 64
#define KEYSOCK_DEADLINE_MS 2000
#define KEYSOCK_MAX_ANSWER 65536      /* a longer answer is cut: never */

struct keysock;

/* Look fp (one line, without its newline, at most KEYSOCK_MAX_LINE) up:
 * append the answer (format above) to out.  Returns 0, or a gd_err
 * (then keysock answers "!4 the node failed to decide"). */
typedef int (*keysock_answer_fn)(void *arg, const char *fp, struct buf *out);

struct keysock_opts {
	const char *path;        /* replaced if it exists (a stale socket) */
	unsigned mode;           /* e.g. 0660 */
	const char *group;       /* chgrp to it when it exists; NULL: none */
	keysock_answer_fn answer;
	void *arg;
	int max_conns;           /* 0: KEYSOCK_MAX_CONNS */
	int64_t deadline_ms;     /* 0: KEYSOCK_DEADLINE_MS */
};

/* Bind and listen.  *out is the caller's (keysock_close).  Returns 0 or
 * GD_EIO (logged). */
int keysock_open(struct keysock **out, const struct keysock_opts *o);

/* Close every connection and the socket, remove its file.  NULL-safe;
 * sets *ksp to NULL. */
void keysock_close(struct keysock **ksp);

/* How many poll items keysock_items may fill: 1 + max_conns. */
int keysock_nitems(const struct keysock *ks);

/* Close the connections past their deadline, then fill items (room for
 * keysock_nitems) with the listening socket and each connection, and
 * lower *timeout_ms (-1: none yet) to the nearest deadline.  Returns the
 * number of items filled. */
int keysock_items(struct keysock *ks, zmq_pollitem_t *items,
		  long *timeout_ms);

/* Serve what the poll found: the n items keysock_items filled. */
void keysock_serve(struct keysock *ks, const zmq_pollitem_t *items, int n);

#endif
