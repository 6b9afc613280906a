/*
 * pipe.c: packing and reading the internal pipes' messages (pipe.h).
 */
#include <errno.h>
#include <string.h>
#include <zmq.h>

#include "err.h"
#include "pipe.h"
#include "banned.h"

/* The syncer pipe's stop: a ticket no writer takes. */
#define SYNC_STOP_TICKET UINT64_MAX

const char *pipe_msg_name(enum pipe_msg t)
{
#define CASE(x)                                                          \
	case x:                                                          \
		return #x
	switch (t) {
		CASE(PIPE_REQ_USER);
		CASE(PIPE_REQ_ADMIN);
		CASE(PIPE_VIEW);
		CASE(PIPE_QUIT);
		CASE(PIPE_SYNC);
		CASE(PIPE_SYNC_STOP);
		CASE(PIPE_NONE);
	}
#undef CASE
	return "PIPE_NONE";
}

int pipe_send(void *sock, enum pipe_msg type, const void *id, size_t idlen,
	      const void *body, size_t len, int flags)
{
	uint8_t head[1 + PIPE_ID_MAX];

	if (idlen > PIPE_ID_MAX || type < 0 || type > 0xff)
		return GD_EINVAL;
	head[0] = (uint8_t)type;
	if (idlen)
		memcpy(head + 1, id, idlen);
	if (zmq_send(sock, head, 1 + idlen, flags | ZMQ_SNDMORE) < 0 ||
	    zmq_send(sock, "", 0, flags | ZMQ_SNDMORE) < 0 ||
	    zmq_send(sock, len ? body : "", len, flags) < 0)
		return GD_EIO;
	return 0;
}

enum pipe_msg pipe_type(const void *frame0, size_t len)
{
	const uint8_t *p = frame0;

	if (len == 1 && p[0] == PIPE_VIEW)
		return PIPE_VIEW;
	if (len >= 1 && (p[0] == PIPE_REQ_USER || p[0] == PIPE_REQ_ADMIN))
		return (enum pipe_msg)p[0];
	if (len == 1 && p[0] == PIPE_QUIT)
		return PIPE_QUIT;
	return PIPE_NONE;
}

int pipe_send_ticket(void *sock, enum pipe_msg type, uint64_t ticket)
{
	uint64_t t = type == PIPE_SYNC_STOP ? SYNC_STOP_TICKET : ticket;

	return zmq_send(sock, &t, sizeof(t), 0) < 0 ? GD_EIO : 0;
}

int pipe_recv_ticket(void *sock, uint64_t *ticket, int flags)
{
	uint64_t t;
	int n = zmq_recv(sock, &t, sizeof(t), flags);

	if (n < 0)
		return zmq_errno() == EAGAIN ? 0 : GD_EIO;
	if (n != sizeof(t))
		return GD_EPROTO;
	if (t == SYNC_STOP_TICKET)
		return PIPE_SYNC_STOP;
	*ticket = t;
	return PIPE_SYNC;
}
