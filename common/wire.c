/*
 * wire.c: one request, one reply, over ZeroMQ REQ on ipc://.  A fresh
 * context per call: clients make one call and exit, so nothing is gained
 * by keeping one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include "err.h"
#include "wire.h"
#include "xalloc.h"
#include "banned.h"

bool wire_listening(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	bool ok;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

int wire_call(Grantd__V1__Reply **out, const char *socket_path,
	      const Grantd__V1__Request *req, int timeout_ms)
{
	void *ctx = NULL, *sock = NULL;
	uint8_t *frame = NULL;
	int rc = GD_EUNREACH, zero = 0;
	struct stat st;
	zmq_msg_t msg;
	char endpoint[4096];

	*out = NULL;
	/* zmq_connect() to a missing or dead ipc path would wait for the
	 * whole timeout: probe it first, a refused connect answers at once */
	if (stat(socket_path, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    !wire_listening(socket_path))
		return GD_EUNREACH;
	if (strlen(socket_path) + 7 > sizeof(endpoint))
		return GD_EINVAL;
	memcpy(endpoint, "ipc://", 6);
	memcpy(endpoint + 6, socket_path, strlen(socket_path) + 1);

	size_t len = grantd__v1__request__get_packed_size(req);
	if (len > GD_CTL_MAX_REQUEST)
		return GD_ETOOBIG;
	frame = xmalloc(len ? len : 1);
	grantd__v1__request__pack(req, frame);

	ctx = zmq_ctx_new();
	if (!ctx)
		goto done;
	sock = zmq_socket(ctx, ZMQ_REQ);
	if (!sock)
		goto done;
	int64_t max = GD_CTL_MAX_REPLY;
	zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof(max));
	zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
	zmq_setsockopt(sock, ZMQ_SNDTIMEO, &timeout_ms, sizeof(timeout_ms));
	if (zmq_connect(sock, endpoint) < 0)
		goto done;
	if (zmq_send(sock, frame, len, 0) < 0)
		goto done;
	zmq_msg_init(&msg);
	if (zmq_msg_recv(&msg, sock, 0) < 0) {
		zmq_msg_close(&msg);
		goto done;
	}
	*out = grantd__v1__reply__unpack(NULL, zmq_msg_size(&msg),
					 zmq_msg_data(&msg));
	zmq_msg_close(&msg);
	rc = *out ? 0 : GD_EPROTO;
done:
	/* the request may carry a secret (grantctl enroll) */
	explicit_bzero(frame, len ? len : 1);
	free(frame);
	if (sock)
		zmq_close(sock);
	if (ctx)
		zmq_ctx_term(ctx);
	return rc;
}
