/*
 * usersock.c: the user and admin sockets (usersock.h).
 *
 * A connection is a slot, as on the keys socket (keysock.c): a fixed
 * array, so the poll items are at most 1 + max_conns.  Each slot keeps
 * what it read and not yet used (in), the answers written to it and not
 * yet sent (out), and a ring of its unanswered requests in their order:
 * an answer found at once and one that comes back from the writer later
 * take their turn alike, so a client that sends several requests gets
 * its answers in order.  Buffers that may hold a secret (an enroll's
 * argument or answer) are wiped before they are freed or moved, never
 * handed to realloc.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <grp.h>
#include <sodium.h>
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
#include "log.h"
#include "usersock.h"
#include "wire.h"
#include "xalloc.h"
#include "banned.h"

#define IN_FIRST 4096 /* a connection's first input buffer */
#define IN_MAX   (4 + GD_CTL_MAX_REQUEST)

struct entry {
	bool done;
	uint8_t *reply; /* a packed Reply (done), the slot's */
	size_t len;
};

/* A byte buffer that never goes through realloc (it may hold a secret). */
struct bytes {
	uint8_t *p;
	size_t len, cap, off; /* off: the first byte not yet used */
};

struct conn {
	int fd; /* -1: free */
	uint64_t gen; /* which connection this slot holds */
	uint64_t deadline; /* clock_mono_ms */
	bool eof; /* the client closed its end */
	bool closing; /* close once out is sent */
	uint32_t head, tail; /* request numbers: oldest unsent, next */
	struct entry
	        *ring; /* ringcap entries, grown up to USERSOCK_MAX_INFLIGHT */
	uint32_t ringcap; /* a power of two */
	struct bytes in, out;
};

struct usersock {
	int fd;
	char *path;
	usersock_serve_fn serve;
	void *arg;
	int max_conns;
	int hi; /* one past the highest slot that may hold a connection:
	         * a round looks at these, not at all max_conns */
	int64_t deadline_ms;
	uint64_t gen;
	uint64_t full_logged; /* clock_mono_ms of the last "full" line */
	uint64_t accept_after; /* out of fds: no accept before (mono ms) */
	uint64_t now; /* clock_mono_ms when this round's serving began
	               * (usersock_serve, usersock_answer): a connection's
	               * time runs from there, with no clock read a request */
	struct conn *conns;
	int *item_slot; /* the slot of each poll item usersock_items made */
	struct buf scratch; /* the serve function's answer, wiped after use */
};

/* ---- buffers ---------------------------------------------------------- */

static void bytes_wipe_free(struct bytes *b)
{
	if (b->p) {
		sodium_memzero(b->p, b->cap);
		free(b->p);
	}
	memset(b, 0, sizeof(*b));
}

/* Room for n more bytes after len: used bytes dropped, the rest moved to
 * the front, or a larger buffer (the old one wiped). */
static void bytes_room(struct bytes *b, size_t n)
{
	if (b->off) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		sodium_memzero(b->p + b->len, b->off);
		b->off = 0;
	}
	if (b->cap - b->len >= n)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < n)
		cap *= 2;
	uint8_t *p = xmalloc(cap);
	if (b->p) {
		memcpy(p, b->p, b->len);
		sodium_memzero(b->p, b->cap);
		free(b->p);
	}
	b->p = p;
	b->cap = cap;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* ---- connections ------------------------------------------------------ */

static void entry_clear(struct entry *e)
{
	if (e->reply) {
		sodium_memzero(e->reply, e->len);
		free(e->reply);
	}
	memset(e, 0, sizeof(*e));
}

static void conn_close(struct conn *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	c->fd = -1;
	for (uint32_t n = c->head; n != c->tail; n++)
		entry_clear(&c->ring[n % c->ringcap]);
	c->head = c->tail = 0;
	free(c->ring);
	c->ring = NULL;
	c->ringcap = 0;
	c->eof = c->closing = false;
	/* an idle slot keeps no input or answers: both may be secret */
	bytes_wipe_free(&c->in);
	bytes_wipe_free(&c->out);
}

static bool out_pending(const struct conn *c)
{
	return c->out.off < c->out.len;
}

/* Closed by the client and nothing more to answer? */
static bool conn_finished(const struct conn *c)
{
	return c->eof && c->head == c->tail && !out_pending(c) &&
	       c->in.len - c->in.off < 4;
}

static void conn_write(struct usersock *us, struct conn *c)
{
	while (out_pending(c)) {
		ssize_t n = send(c->fd, c->out.p + c->out.off,
		                 c->out.len - c->out.off,
		                 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				return; /* POLLOUT will say when */
			conn_close(c); /* gone */
			return;
		}
		c->out.off += (size_t)n;
		c->deadline = us->now + (uint64_t)us->deadline_ms;
	}
	sodium_memzero(c->out.p, c->out.len);
	c->out.off = c->out.len = 0;
	if ((c->closing && c->head == c->tail) || conn_finished(c))
		conn_close(c);
}

/* The answers at the head of the ring that are done, in order, to out. */
static void conn_flush(struct conn *c)
{
	while (c->head != c->tail) {
		struct entry *e = &c->ring[c->head % c->ringcap];
		if (!e->done)
			break;
		bytes_room(&c->out, 4 + e->len);
		put_be32(c->out.p + c->out.len, (uint32_t)e->len);
		memcpy(c->out.p + c->out.len + 4, e->reply, e->len);
		c->out.len += 4 + e->len;
		entry_clear(e);
		c->head++;
	}
}

static void
make_id(uint8_t id[USERSOCK_ID_LEN], uint32_t slot, uint64_t gen, uint32_t num)
{
	put_be32(id, slot);
	put_be32(id + 4, (uint32_t)(gen >> 32));
	put_be32(id + 8, (uint32_t)gen);
	put_be32(id + 12, num);
}

/* Twice the room in c's ring (its bound is checked before: at most
 * USERSOCK_MAX_INFLIGHT), each entry at its number's new place. */
static void ring_grow(struct conn *c)
{
	uint32_t cap = c->ringcap ? 2 * c->ringcap : 16;
	struct entry *r = xcalloc(cap, sizeof(*r));

	GD_ASSERT(cap <= USERSOCK_MAX_INFLIGHT);
	for (uint32_t n = c->head; n != c->tail; n++)
		r[n % cap] = c->ring[n % c->ringcap];
	free(c->ring);
	c->ring = r;
	c->ringcap = cap;
}

/* One request (NULL: one too large, len announced) of c: a turn in the
 * ring, answered now or later.  An answer found at once with nothing
 * before it unanswered goes straight to out (the common case: one
 * request at a time). */
static void
conn_request(struct usersock *us, struct conn *c, const uint8_t *rq, size_t len)
{
	uint8_t id[USERSOCK_ID_LEN];
	uint32_t num = c->tail;
	struct buf *reply = &us->scratch;

	make_id(id, (uint32_t)(c - us->conns), c->gen, num);
	int now = us->serve(us->arg, id, sizeof(id), rq, len, reply);
	if (now > 0 && c->head == c->tail) {
		bytes_room(&c->out, 4 + reply->len);
		put_be32(c->out.p + c->out.len, (uint32_t)reply->len);
		memcpy(c->out.p + c->out.len + 4, reply->p, reply->len);
		c->out.len += 4 + reply->len;
		c->head++;
		c->tail++;
	} else {
		/* the answer (now or from the writer) waits for its turn */
		if (c->tail - c->head == c->ringcap)
			ring_grow(c);
		struct entry *e = &c->ring[num % c->ringcap];
		c->tail++;
		if (now > 0) {
			e->done = true;
			e->len = reply->len;
			e->reply = xmalloc(reply->len ? reply->len : 1);
			memcpy(e->reply, reply->p, reply->len);
		}
	}
	/* may hold a fresh secret (enroll); kept for the next, empty */
	if (reply->p)
		sodium_memzero(reply->p, reply->len);
	buf_reset(reply);
}

/* Can c take another request now?  Not past its bounds (usersock.h). */
static bool conn_open_for_more(const struct conn *c)
{
	return !c->closing && c->tail - c->head < USERSOCK_MAX_INFLIGHT &&
	       c->out.len - c->out.off < USERSOCK_MAX_OUT;
}

/* Use the whole requests waiting in c->in, as far as the bounds allow. */
/* A whole request (or a length over the limit) waits in c->in? */
static bool conn_has_request(const struct conn *c)
{
	if (c->in.len - c->in.off < 4)
		return false;
	uint32_t len = get_be32(c->in.p + c->in.off);
	return len > GD_CTL_MAX_REQUEST ||
	       c->in.len - c->in.off >= 4 + (size_t)len;
}

/* Take the whole requests waiting in c->in while the bounds allow;
 * returns how many. */
static int conn_take(struct usersock *us, struct conn *c)
{
	int n = 0;

	while (conn_open_for_more(c) && conn_has_request(c)) {
		uint8_t *p = c->in.p + c->in.off;
		uint32_t len = get_be32(p);
		n++;
		if (len > GD_CTL_MAX_REQUEST) {
			log_warn("bad request dropped path=%s: %u bytes, at "
			         "most %d",
			         us->path, len, GD_CTL_MAX_REQUEST);
			conn_request(us, c, NULL, len);
			c->closing = true;
			break;
		}
		conn_request(us, c, p + 4, len);
		/* may hold a secret */
		sodium_memzero(p, 4 + (size_t)len);
		c->in.off += 4 + (size_t)len;
		c->deadline = us->now + (uint64_t)us->deadline_ms;
	}
	if (c->in.off == c->in.len)
		c->in.off = c->in.len = 0;
	return n;
}

/* The answers ready go out, and the requests waiting in c->in are taken
 * as the bounds allow, until neither moves: a request left in c->in
 * while the bounds were reached has no poll event to wake it later. */
static void conn_parse(struct usersock *us, struct conn *c)
{
	for (;;) {
		conn_flush(c);
		bool was_open = conn_open_for_more(c);
		int took = conn_take(us, c);
		conn_flush(c);
		conn_write(us, c);
		if (c->fd < 0 || !conn_open_for_more(c) ||
		    !conn_has_request(c) || (!took && was_open))
			return;
	}
}

static bool conn_wants_input(const struct conn *c)
{
	return !c->eof && conn_open_for_more(c);
}

static void conn_read(struct usersock *us, struct conn *c)
{
	size_t have = c->in.len - c->in.off, want = IN_FIRST;

	if (have >= 4) {
		/* room for the message under way, whole */
		uint32_t len = get_be32(c->in.p + c->in.off);
		if (len <= GD_CTL_MAX_REQUEST)
			want = 4 + (size_t)len;
	}
	bytes_room(&c->in, want > have + 512 ? want - have : 512);
	ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len,
	                 MSG_DONTWAIT);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		/* closed its end: answer what it asked, then close */
		c->eof = true;
		if (conn_finished(c))
			conn_close(c);
		return;
	}
	c->in.len += (size_t)n;
	conn_parse(us, c);
}

/* ---- the socket ------------------------------------------------------- */

int usersock_open(struct usersock **out, const struct usersock_opts *o)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct usersock *us;

	*out = NULL;
	if (strlen(o->path) >= sizeof(sa.sun_path)) {
		log_error("socket path too long path=%s", o->path);
		return GD_EIO;
	}
	memcpy(sa.sun_path, o->path, strlen(o->path) + 1);
	us = xcalloc(1, sizeof(*us));
	us->path = xstrdup(o->path);
	us->serve = o->serve;
	us->arg = o->arg;
	us->max_conns = o->max_conns > 0 ? o->max_conns : USERSOCK_MAX_CONNS;
	us->deadline_ms =
	        o->deadline_ms > 0 ? o->deadline_ms : USERSOCK_DEADLINE_MS;
	us->conns = xcalloc((size_t)us->max_conns, sizeof(*us->conns));
	us->item_slot =
	        xcalloc((size_t)us->max_conns + 1, sizeof(*us->item_slot));
	for (int i = 0; i < us->max_conns; i++)
		us->conns[i].fd = -1;
	us->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	unlink(o->path);
	if (us->fd < 0 || bind(us->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(us->fd, 128) < 0) {
		log_error("cannot bind socket path=%s: %s", o->path,
		          strerror(errno));
		usersock_close(&us);
		return GD_EIO;
	}
	if (chmod(o->path, o->mode) < 0)
		log_warn("cannot chmod socket path=%s: %s", o->path,
		         strerror(errno));
	if (o->group) {
		struct group *g = getgrnam(o->group);
		if (g && chown(o->path, (uid_t)-1, g->gr_gid) < 0)
			log_warn("cannot chgrp %s socket path=%s: %s", o->group,
			         o->path, strerror(errno));
	}
	*out = us;
	return 0;
}

void usersock_close(struct usersock **usp)
{
	struct usersock *us = *usp;

	if (!us)
		return;
	for (int i = 0; us->conns && i < us->max_conns; i++) {
		conn_close(&us->conns[i]);
	}
	if (us->fd >= 0) {
		close(us->fd);
		unlink(us->path);
	}
	free(us->conns);
	free(us->item_slot);
	buf_free(&us->scratch);
	free(us->path);
	free(us);
	*usp = NULL;
}

int usersock_nitems(const struct usersock *us)
{
	return 1 + us->max_conns;
}

/* A free slot; when there is none, the oldest connection's (closed). */
static struct conn *slot(struct usersock *us)
{
	struct conn *old = NULL;

	for (int i = 0; i < us->max_conns; i++) {
		struct conn *c = &us->conns[i];
		if (c->fd < 0) {
			if (i >= us->hi)
				us->hi = i + 1;
			return c;
		}
		if (!old || c->gen < old->gen)
			old = c;
	}
	/* at most a line a second, however fast a flood connects */
	if (clock_mono_ms() - us->full_logged >= 1000) {
		us->full_logged = clock_mono_ms();
		log_warn("socket full, oldest connection closed path=%s "
		         "conns=%d",
		         us->path, us->max_conns);
	}
	conn_close(old);
	return old;
}

static void accept_all(struct usersock *us)
{
	/* a bounded round: the other sockets wait for us */
	for (int n = 0; n < us->max_conns; n++) {
		int fd = accept4(us->fd, NULL, NULL,
		                 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* the listener stays readable: without a pause
				 * the poll would spin until an fd frees */
				us->accept_after = clock_mono_ms() + 100;
				if (clock_mono_ms() - us->full_logged >= 1000) {
					us->full_logged = clock_mono_ms();
					log_warn("accept failed path=%s: %s",
					         us->path, strerror(errno));
				}
			} else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			           errno != EINTR && errno != ECONNABORTED) {
				log_warn("accept failed path=%s: %s", us->path,
				         strerror(errno));
			}
			return;
		}
		struct conn *c = slot(us);
		c->fd = fd;
		c->gen = ++us->gen;
		c->deadline = us->now + (uint64_t)us->deadline_ms;
	}
}

int usersock_items(struct usersock *us, zmq_pollitem_t *items, long *timeout_ms)
{
	uint64_t now = clock_mono_ms();
	int n = 0;

	/* out of fds a moment ago: the listener waits (events 0) */
	bool accepting = now >= us->accept_after;
	items[n++] =
	        (zmq_pollitem_t){NULL, us->fd, accepting ? ZMQ_POLLIN : 0, 0};
	if (!accepting) {
		long left = (long)(us->accept_after - now);
		if (*timeout_ms < 0 || left < *timeout_ms)
			*timeout_ms = left;
	}
	while (us->hi > 0 && us->conns[us->hi - 1].fd < 0)
		us->hi--;
	for (int i = 0; i < us->hi; i++) {
		struct conn *c = &us->conns[i];
		if (c->fd < 0)
			continue;
		/* the node owes it an answer: its time does not run */
		bool owed = c->head != c->tail && !out_pending(c);
		if (!owed && now >= c->deadline) {
			log_warn("connection timed out path=%s unanswered=%u",
			         us->path, c->tail - c->head);
			conn_close(c);
			continue;
		}
		short ev = (short)((conn_wants_input(c) ? ZMQ_POLLIN : 0) |
		                   (out_pending(c) ? ZMQ_POLLOUT : 0));
		if (!owed) {
			long left = (long)(c->deadline - now);
			if (*timeout_ms < 0 || left < *timeout_ms)
				*timeout_ms = left;
		}
		if (ev) {
			us->item_slot[n] = i;
			items[n++] = (zmq_pollitem_t){NULL, c->fd, ev, 0};
		}
	}
	return n;
}

void usersock_serve(struct usersock *us, const zmq_pollitem_t *items, int n)
{
	us->now = clock_mono_ms();
	/* connections first: accepting may close the oldest, whose fd
	 * number a new connection may then reuse */
	for (int i = 1; i < n; i++) {
		struct conn *c = &us->conns[us->item_slot[i]];
		if (!items[i].revents || c->fd != items[i].fd)
			continue;
		if (items[i].revents & ZMQ_POLLOUT) {
			conn_write(us, c);
			/* room again: what waits in its input */
			if (c->fd >= 0)
				conn_parse(us, c);
		}
		if (c->fd >= 0 &&
		    (items[i].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
			conn_read(us, c);
	}
	if (n > 0 && (items[0].revents & ZMQ_POLLIN))
		accept_all(us);
}

int usersock_answer(struct usersock *us,
                    const uint8_t *id,
                    size_t idlen,
                    const uint8_t *reply,
                    size_t len)
{
	if (idlen != USERSOCK_ID_LEN)
		return GD_ENOTFOUND;
	uint32_t slot_i = get_be32(id);
	uint64_t gen = (uint64_t)get_be32(id + 4) << 32 | get_be32(id + 8);
	uint32_t num = get_be32(id + 12);
	if (slot_i >= (uint32_t)us->max_conns)
		return GD_ENOTFOUND;
	struct conn *c = &us->conns[slot_i];
	if (c->fd < 0 || c->gen != gen || num - c->head >= c->tail - c->head)
		return GD_ENOTFOUND;
	struct entry *e = &c->ring[num % c->ringcap];
	if (e->done)
		return GD_ENOTFOUND;
	e->done = true;
	e->len = len;
	e->reply = xmalloc(len ? len : 1);
	memcpy(e->reply, reply, len);
	us->now = clock_mono_ms();
	if (num == c->head)
		conn_parse(us, c); /* flush, send, then what waits */
	return 0;
}
