/*
 * wire.h: the control-socket protocol, client side, and its limits.
 *
 * A client sends one grantd.v1.Request and reads one Reply over a ZeroMQ
 * REQ socket connected to the node's ipc:// socket (the user socket or
 * the admin socket).  No answer within the timeout means the node is
 * unreachable: clients then fail closed (deny, exit 3).
 */
#ifndef GD_WIRE_H
#define GD_WIRE_H

#include <stdbool.h>

#include "err.h"
#include "grantd.pb-c.h"

#define GD_WIRE_VERSION 1
/* No control request or reply is larger; the node's sockets drop bigger
 * frames (ZMQ_MAXMSGSIZE) before protobuf sees them. */
#define GD_CTL_MAX_REQUEST (64 * 1024)
#define GD_CTL_MAX_REPLY (16 * 1024 * 1024)
#define GD_CTL_MAX_ARGS 1024

/* The exit codes (enum gd_exit) are in err.h. */

/* Does a process accept connections on the unix socket at path?  (A node
 * that died leaves its socket file behind: ZeroMQ would wait for it.) */
bool wire_listening(const char *path);

/*
 * Send req to the node listening on socket_path and wait up to timeout_ms
 * for the reply.  On success *out is the caller's
 * (grantd__v1__reply__free_unpacked(*out, NULL)).  Returns 0,
 * GD_EUNREACH (no socket, no answer) or GD_EPROTO (an answer that does not
 * decode).
 */
int wire_call(Grantd__V1__Reply **out, const char *socket_path,
	      const Grantd__V1__Request *req, int timeout_ms);

#endif
