/*
 * linkmon.h: is a CURVE client socket (peer.h) still trying, and when to
 * make it again.
 *
 * libzmq does not reconnect a connection whose CURVE handshake or ZAP
 * check failed (libzmq PR #1043; issues #2329, #4196): once a peer refused
 * this node's key (a key rotation not yet done everywhere, a key pasted
 * wrong and then fixed), the socket stays silent for good and replication
 * runs one way.  A struct linkmon watches one socket's handshake events
 * (zmq_socket_monitor) and says when the owner should close the socket and
 * make it again: after each failed handshake, with a backoff (LINKMON_
 * RETRY_MIN_MS doubling to LINKMON_RETRY_MAX_MS), and the backoff starts
 * over once a handshake succeeds.  It also remembers why the link is
 * down, for status and metrics, and the server key the socket was made
 * for: when the peer's key in the configuration changes (SIGHUP re-reads
 * it: reload.h), linkmon_stale() says so and the owner makes the socket
 * again at once with the new key (libzmq has no way to change the server
 * key of a socket, nor to reconnect it).
 *
 * Threads: a linkmon belongs to the thread that owns its socket.
 */
#ifndef GD_LINKMON_H
#define GD_LINKMON_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

#define LINKMON_RETRY_MIN_MS 500
#define LINKMON_RETRY_MAX_MS 8000

enum linkmon_state {
	LINKMON_CONNECTING, /* no handshake done yet */
	LINKMON_UP, /* the last handshake succeeded */
	LINKMON_KEY_REFUSED, /* the peer's ZAP refused our key */
	LINKMON_HANDSHAKE_FAILED, /* any other failed handshake */
};

struct linkmon {
	void *pair; /* reads the socket's events; NULL: off */
	enum linkmon_state state;
	uint64_t failures; /* failed handshakes since start */
	uint64_t retry_at_ms; /* 0: nothing to do */
	uint64_t backoff_ms;
	int code; /* the failure's ZAP status or protocol
	           * error (zmq_socket_monitor's value) */
	char key[Z85_KEY_LEN + 1]; /* the server key of its socket ("":
	                            * none made yet) */
};

/* Watch sock (a client socket of zctx, not yet connected).  Returns 0 or
 * GD_EIO (logged; the socket works, unwatched). */
int linkmon_attach(struct linkmon *m, void *zctx, void *sock);

/* Stop watching sock (before it is closed); the state, failure count and
 * backoff are kept for the socket made again. */
void linkmon_detach(struct linkmon *m, void *sock);

/* The socket is made (again) for server_key (peer_curve_client_watched
 * says so).  A key other than the last one starts the link afresh: state
 * connecting, no backoff (the failures count stays). */
void linkmon_keyed(struct linkmon *m, const char *server_key);

/* Was the socket made for a server key other than server_key (the peer's
 * key now: a reload changed it)?  Then the owner closes the socket and
 * makes it again now, whatever the backoff. */
bool linkmon_stale(const struct linkmon *m, const char *server_key);

/* Read the events that came.  Returns true when the owner should close the
 * socket and make it again now (a handshake failed, and its backoff is
 * over).  what names the link in the log (peer=SITE socket=sub). */
bool linkmon_poll(struct linkmon *m, uint64_t now_ms, const char *what);

/* "connecting", "up", "key_refused", "handshake_failed". */
const char *linkmon_state_name(enum linkmon_state s);

#endif
