/*
 * keysock.c: the keys socket (keysock.h).
 *
 * A connection is a slot: reading until its newline, then writing its
 * answer, then closed.  The slots are a fixed array (max_conns), so the
 * poll items are at most 1 + max_conns and nothing grows with clients.
 */
#define _GNU_SOURCE        /* accept4 */
#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "keysock.h"
#include "log.h"
#include "xalloc.h"
#include "banned.h"

struct conn {
	int fd;                  /* -1: free */
	uint64_t deadline;       /* clock_mono_ms */
	uint64_t seq;            /* accept order: the oldest goes first */
	bool writing;
	size_t inlen, outoff;
	char in[KEYSOCK_MAX_LINE + 1];
	struct buf out;
};

struct keysock {
	int fd;
	char *path;
	keysock_answer_fn answer;
	void *arg;
	int max_conns;
	int64_t deadline_ms;
	uint64_t seq;
	uint64_t full_logged;    /* clock_mono_ms of the last "full" line */
	struct conn *conns;
};

static void conn_close(struct conn *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	c->fd = -1;
	c->writing = false;
	c->inlen = c->outoff = 0;
	buf_reset(&c->out);
}

int keysock_open(struct keysock **out, const struct keysock_opts *o)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct keysock *ks;

	*out = NULL;
	if (strlen(o->path) >= sizeof(sa.sun_path)) {
		log_error("keys socket path too long path=%s", o->path);
		return GD_EIO;
	}
	memcpy(sa.sun_path, o->path, strlen(o->path) + 1);
	ks = xcalloc(1, sizeof(*ks));
	ks->path = xstrdup(o->path);
	ks->answer = o->answer;
	ks->arg = o->arg;
	ks->max_conns = o->max_conns > 0 ? o->max_conns : KEYSOCK_MAX_CONNS;
	ks->deadline_ms = o->deadline_ms > 0 ? o->deadline_ms :
					       KEYSOCK_DEADLINE_MS;
	ks->conns = xcalloc((size_t)ks->max_conns, sizeof(*ks->conns));
	for (int i = 0; i < ks->max_conns; i++)
		ks->conns[i].fd = -1;
	ks->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	unlink(o->path);
	if (ks->fd < 0 || bind(ks->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(ks->fd, 128) < 0) {
		log_error("cannot bind keys socket path=%s: %s", o->path,
			  strerror(errno));
		keysock_close(&ks);
		return GD_EIO;
	}
	if (chmod(o->path, o->mode) < 0)
		log_warn("cannot chmod socket path=%s: %s", o->path,
			 strerror(errno));
	if (o->group) {
		struct group *g = getgrnam(o->group);
		if (g && chown(o->path, (uid_t)-1, g->gr_gid) < 0)
			log_warn("cannot chgrp %s socket path=%s: %s",
				 o->group, o->path, strerror(errno));
	}
	*out = ks;
	return 0;
}

void keysock_close(struct keysock **ksp)
{
	struct keysock *ks = *ksp;

	if (!ks)
		return;
	for (int i = 0; ks->conns && i < ks->max_conns; i++) {
		conn_close(&ks->conns[i]);
		buf_free(&ks->conns[i].out);
	}
	if (ks->fd >= 0) {
		close(ks->fd);
		unlink(ks->path);
	}
	free(ks->conns);
	free(ks->path);
	free(ks);
	*ksp = NULL;
}

int keysock_nitems(const struct keysock *ks)
{
	return 1 + ks->max_conns;
}

/* A free slot; when there is none, the oldest connection's (closed). */
static struct conn *slot(struct keysock *ks)
{
	struct conn *old = NULL;

	for (int i = 0; i < ks->max_conns; i++) {
		struct conn *c = &ks->conns[i];
		if (c->fd < 0)
			return c;
		if (!old || c->seq < old->seq)
			old = c;
	}
	/* at most a line a second, however fast a flood connects */
	if (clock_mono_ms() - ks->full_logged >= 1000) {
		ks->full_logged = clock_mono_ms();
		log_warn("keys socket full, oldest connection closed "
			 "conns=%d", ks->max_conns);
	}
	conn_close(old);
	return old;
}

static void accept_all(struct keysock *ks)
{
	/* a bounded round: the other sockets wait for us */
	for (int n = 0; n < ks->max_conns; n++) {
		int fd = accept4(ks->fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR && errno != ECONNABORTED)
				log_warn("keys socket accept failed: %s",
					 strerror(errno));
			return;
		}
		struct conn *c = slot(ks);
		c->fd = fd;
		c->seq = ++ks->seq;
		c->deadline = clock_mono_ms() + (uint64_t)ks->deadline_ms;
	}
}

/* The line in c->in (its newline replaced by NUL) is complete: make the
 * answer. */
static void lookup(struct keysock *ks, struct conn *c, size_t len)
{
	c->in[len] = '\0';
	if (len && c->in[len - 1] == '\r')
		c->in[--len] = '\0';
	if (strlen(c->in) != len) {
		buf_add(&c->out, "!2 a NUL byte in the line\n", 26);
		return;
	}
	if (ks->answer(ks->arg, c->in, &c->out) < 0) {
		buf_reset(&c->out);
		buf_add(&c->out, "!4 the node failed to decide\n", 29);
	}
	if (c->out.len > KEYSOCK_MAX_ANSWER) {
		buf_reset(&c->out);
		buf_add(&c->out, "!4 answer too long\n", 19);
	}
}

static void conn_write(struct conn *c)
{
	while (c->outoff < c->out.len) {
		ssize_t n = send(c->fd, c->out.p + c->outoff,
				 c->out.len - c->outoff,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				return;       /* POLLOUT will say when */
			break;
		}
		c->outoff += (size_t)n;
	}
	conn_close(c);
}

static void conn_read(struct keysock *ks, struct conn *c)
{
	size_t room = KEYSOCK_MAX_LINE - c->inlen;
	ssize_t n = recv(c->fd, c->in + c->inlen, room, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
		      errno == EINTR))
		return;
	if (n <= 0) {
		/* gone, or closed its end before a whole line */
		conn_close(c);
		return;
	}
	char *nl = memchr(c->in + c->inlen, '\n', (size_t)n);
	c->inlen += (size_t)n;
	if (nl) {
		lookup(ks, c, (size_t)(nl - c->in));
	} else if (c->inlen == KEYSOCK_MAX_LINE) {
		log_warn("keys socket line too long bytes=%zu", c->inlen);
		buf_add(&c->out, "!2 line too long\n", 17);
	} else {
		return;
	}
	c->writing = true;
	conn_write(c);
}

int keysock_items(struct keysock *ks, zmq_pollitem_t *items,
		  long *timeout_ms)
{
	uint64_t now = clock_mono_ms();
	int n = 0;

	items[n++] = (zmq_pollitem_t){ NULL, ks->fd, ZMQ_POLLIN, 0 };
	for (int i = 0; i < ks->max_conns; i++) {
		struct conn *c = &ks->conns[i];
		if (c->fd < 0)
			continue;
		if (now >= c->deadline) {
			log_warn("keys socket connection timed out "
				 "answered=%s", c->writing ? "yes" : "no");
			conn_close(c);
			continue;
		}
		long left = (long)(c->deadline - now);
		if (*timeout_ms < 0 || left < *timeout_ms)
			*timeout_ms = left;
		items[n++] = (zmq_pollitem_t){ NULL, c->fd,
			c->writing ? ZMQ_POLLOUT : ZMQ_POLLIN, 0 };
	}
	return n;
}

static struct conn *by_fd(struct keysock *ks, int fd)
{
	for (int i = 0; i < ks->max_conns; i++)
		if (ks->conns[i].fd == fd)
			return &ks->conns[i];
	return NULL;
}

void keysock_serve(struct keysock *ks, const zmq_pollitem_t *items, int n)
{
	/* connections first: accepting may close the oldest, whose fd
	 * number a new connection may then reuse */
	for (int i = 1; i < n; i++) {
		struct conn *c;
		if (!items[i].revents || !(c = by_fd(ks, items[i].fd)))
			continue;
		if (c->writing)
			conn_write(c);
		else
			conn_read(ks, c);
	}
	if (n > 0 && (items[0].revents & ZMQ_POLLIN))
		accept_all(ks);
}
