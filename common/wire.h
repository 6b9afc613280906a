/*
 * wire.h: the control-socket protocol, client side, and its limits.
 *
 * A client connects to the node's user or admin socket (a plain unix
 * stream socket: node/requests/usersock.h), sends a grantd.v1.Request and
 * reads a Reply, each framed as a 4-byte big-endian length and that many
 * bytes.  Several requests may be sent on one connection; the answers
 * come in their order.  No answer within the timeout means the node is
 * unreachable: clients then fail closed (deny, exit 3).  Only libc and
 * protobuf-c: a client of these sockets loads no ZeroMQ.
 */
#ifndef GD_WIRE_H
#define GD_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "grantd.pb-c.h"

#define GD_WIRE_VERSION 1
/* No control request or reply is larger: the node refuses a longer
 * request before protobuf sees it, and a client a longer reply. */
#define GD_CTL_MAX_REQUEST (64 * 1024)
#define GD_CTL_MAX_REPLY   (16 * 1024 * 1024)
#define GD_CTL_MAX_ARGS    1024

/* The exit codes (enum gd_exit) are in err.h. */

/* Does a process accept connections on the unix socket at path?  (A node
 * that died leaves its socket file behind.) */
bool wire_listening(const char *path);

/* Connect to the node's socket at path within timeout_ms.  Returns the
 * connected socket (the caller closes it) or GD_EUNREACH. */
int wire_connect(const char *path, int timeout_ms);

/* Send one message (len at most GD_CTL_MAX_REQUEST) framed on fd within
 * timeout_ms.  Returns 0, GD_ETOOBIG, or GD_EUNREACH. */
int wire_send(int fd, const void *msg, size_t len, int timeout_ms);

/* Read one framed message (at most GD_CTL_MAX_REPLY bytes) from fd within
 * timeout_ms into *out (the caller's: free it; *len its length).  Returns
 * 0, GD_EUNREACH (closed, nothing within the time) or GD_EPROTO (a length
 * over the limit). */
int wire_recv(int fd, uint8_t **out, size_t *len, int timeout_ms);

/*
 * Send req to the node listening on socket_path and wait up to timeout_ms
 * for the reply.  On success *out is the caller's
 * (grantd__v1__reply__free_unpacked(*out, NULL)).  Returns 0,
 * GD_EUNREACH (no socket, no answer) or GD_EPROTO (an answer that does not
 * decode).
 */
int wire_call(Grantd__V1__Reply **out,
              const char *socket_path,
              const Grantd__V1__Request *req,
              int timeout_ms);

#endif
