/*
 * wire.c: one request, one reply, over the node's plain unix socket
 * (wire.h).  Non-blocking with poll, so that one deadline covers the
 * connect, the request and the answer.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "wire.h"
#include "xalloc.h"
#include "banned.h"

bool wire_listening(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until deadline (now_ms).  Returns 0 or
 * GD_EUNREACH (time out, or an error). */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return GD_EUNREACH;
		int n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return GD_EUNREACH;
	}
}

int wire_connect(const char *path, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int64_t deadline = now_ms() + timeout_ms;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return GD_EUNREACH;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return GD_EUNREACH;
	/* a full backlog answers EAGAIN on a unix socket: try again until
	 * the deadline; a missing or dead socket is refused at once */
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if ((errno != EAGAIN && errno != EINTR) ||
		    now_ms() >= deadline) {
			close(fd);
			return GD_EUNREACH;
		}
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return fd;
}

/* Write all of p within deadline. */
static int write_all(int fd, const uint8_t *p, size_t len, int64_t deadline)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return GD_EUNREACH;
			if (wait_fd(fd, POLLOUT, deadline) < 0)
				return GD_EUNREACH;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read exactly len bytes to p within deadline. */
static int read_all(int fd, uint8_t *p, size_t len, int64_t deadline)
{
	while (len) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		if (n == 0)
			return GD_EUNREACH; /* the node closed it */
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return GD_EUNREACH;
			if (wait_fd(fd, POLLIN, deadline) < 0)
				return GD_EUNREACH;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int wire_send(int fd, const void *msg, size_t len, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	uint8_t hdr[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16),
	                  (uint8_t)(len >> 8), (uint8_t)len};
	struct iovec iov[2] = {{hdr, 4}, {(void *)msg, len}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	ssize_t n;

	if (len > GD_CTL_MAX_REQUEST)
		return GD_ETOOBIG;
	/* the length and the message in one send, so that the node wakes
	 * once for a whole request; what a full socket leaves goes on as
	 * write_all does */
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return GD_EUNREACH;
		n = 0;
	}
	size_t sent = (size_t)n;
	if (sent < 4 && write_all(fd, hdr + sent, 4 - sent, deadline) < 0)
		return GD_EUNREACH;
	sent = sent < 4 ? 0 : sent - 4;
	if (write_all(fd, (const uint8_t *)msg + sent, len - sent, deadline) <
	    0)
		return GD_EUNREACH;
	return 0;
}

int wire_recv(int fd, uint8_t **out, size_t *len, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	uint8_t hdr[4];
	uint8_t *p;
	size_t n;

	*out = NULL;
	*len = 0;
	/* the answer is seldom there the moment the request went: wait
	 * first rather than try a read that says EAGAIN */
	if (wait_fd(fd, POLLIN, deadline) < 0 ||
	    read_all(fd, hdr, 4, deadline) < 0)
		return GD_EUNREACH;
	n = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 |
	    hdr[3];
	if (n > GD_CTL_MAX_REPLY)
		return GD_EPROTO;
	p = xmalloc(n ? n : 1);
	if (read_all(fd, p, n, deadline) < 0) {
		explicit_bzero(p, n ? n : 1);
		free(p);
		return GD_EUNREACH;
	}
	*out = p;
	*len = n;
	return 0;
}

int wire_call(Grantd__V1__Reply **out,
              const char *socket_path,
              const Grantd__V1__Request *req,
              int timeout_ms)
{
	uint8_t *frame = NULL, *ans = NULL;
	size_t anslen = 0;
	int rc, fd;
	struct stat st;

	*out = NULL;
	if (stat(socket_path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return GD_EUNREACH;
	size_t len = grantd__v1__request__get_packed_size(req);
	if (len > GD_CTL_MAX_REQUEST)
		return GD_ETOOBIG;
	if ((fd = wire_connect(socket_path, timeout_ms)) < 0)
		return GD_EUNREACH;
	frame = xmalloc(len ? len : 1);
	grantd__v1__request__pack(req, frame);
	rc = wire_send(fd, frame, len, timeout_ms);
	if (rc == 0)
		rc = wire_recv(fd, &ans, &anslen, timeout_ms);
	if (rc == 0) {
		*out = grantd__v1__reply__unpack(NULL, anslen, ans);
		rc = *out ? 0 : GD_EPROTO;
	}
	close(fd);
	/* the request may carry a secret (grantctl enroll), the answer too */
	explicit_bzero(frame, len ? len : 1);
	free(frame);
	if (ans) {
		explicit_bzero(ans, anslen ? anslen : 1);
		free(ans);
	}
	return rc == GD_ETOOBIG ? GD_ETOOBIG : rc;
}
