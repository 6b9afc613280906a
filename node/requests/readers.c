/*
 * readers.c: the reader thread (readers.h).
 *
 * Why one thread with the sockets and not the writer: a push check or an
 * isval that waits behind a batch of vals and its fsync is what made
 * checks slow under load (issue 9); a read answered here costs the
 * writer nothing.  Why forward whole frames: the writer decodes them
 * again (a few microseconds) and keeps its batch logic exactly as it was.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "arena.h"
#include "clock.h"
#include "cmd.h"
#include "pipe.h"
#include "err.h"
#include "hlc.h"
#include "keysock.h"
#include "log.h"
#include "pcache.h"
#include "readers.h"
#include "request.h"
#include "wire.h"
#include "thread.h"
#include "usersock.h"
#include "xalloc.h"
#include "banned.h"

struct readers;

/* What a socket's serve function is handed: the reader and which socket. */
struct sockarg {
	struct readers *rd;
	int idx; /* 0 user, 1 admin */
};

struct readers {
	const struct config *cfg;
	struct store *store;
	struct cmd_table *cmds; /* its own copy */
	char host[256];
	struct usersock *socks[2]; /* user, admin (usersock.h): the thread's */
	struct sockarg sarg[2];
	struct keysock *keys; /* grant-keys' plain socket: the thread's */
	void *pipe; /* the writer's end */
	void *rpipe; /* the thread's end */
	pthread_t thread;
	bool started;
	char endpoint[64];
	/* the hand-over: the writer leaves the newest view and the flag
	 * here and rings (PIPE_VIEW, pipe.h); the reader takes them.  A mutex,
	 * not the pointer in the message, so that ThreadSanitizer sees the
	 * view change hands (libzmq's own ordering is invisible to it). */
	pthread_mutex_t lock;
	struct store_batch *next_view;
	bool next_syncing;
	cJSON *next_status[2]; /* store, repl parts (cmd.h) */
	/* the thread's own */
	struct store_batch *view;
	struct pcache *pcache; /* facts of view (pcache.h): dropped with it */
	bool syncing;
	cJSON *status[2]; /* the newest parts taken */
	uint64_t bad_requests; /* refused or undecodable requests */
	bool pipe_sent; /* sent on rpipe since its events were
	                 * last looked at (wait_round) */
	struct metrics_counts *counts; /* atomic (metrics.h); NULL: none */
};

/* ---- the pipe ------------------------------------------------------------ */

/* A pipe end: never drop, never block on a full queue (both ends drain
 * it all the time). */
static void *pipe_socket(void *zctx)
{
	void *s = zmq_socket(zctx, ZMQ_PAIR);
	int zero = 0;

	if (!s)
		return NULL;
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof(zero));
	return s;
}

/* ---- the thread ---------------------------------------------------------- */

/* The pipe message of a request from socket idx (0 user, 1 admin). */
static enum pipe_msg req_type(int idx)
{
	return idx ? PIPE_REQ_ADMIN : PIPE_REQ_USER;
}

/* Is cmd answered here?  A read that needs nothing of the writer's. */
static bool reader_row(const struct cmd *cmd)
{
	return cmd && (cmd->flags & CMD_READS) && !(cmd->flags & CMD_NODE);
}

/* Answer r (decoded, its row cmd) from the view. */
static void answer(struct readers *rd, const struct cmd *cmd, struct req *r)
{
	struct cmd_status st = {rd->status[0], rd->status[1], rd->bad_requests};
	struct cmd_ctx x;
	int rc;

	if (cmd_admit(cmd, r, rd->cfg, rd->host, rd->syncing))
		return;
	memset(&x, 0, sizeof(x));
	x.status = &st;
	x.p.cfg = rd->cfg;
	x.p.store = rd->store;
	x.p.batch = rd->view;
	x.p.host = rd->host;
	x.p.cache = rd->pcache;
	x.syncing = rd->syncing;
	x.counts = rd->counts;
	if ((rc = cmd->fn(&x, r)) < 0) {
		request_log_failed(r, rc);
		cmd_undecided(r, rc);
	}
}

/* r's answer, packed, onto out; r freed. */
static void pack_reply(struct req *r, struct buf *out)
{
	/* out may hold a fresh secret (enroll): usersock wipes it */
	request_pack_reply_to(r, out);
	request_free(r);
}

/* usersock's serve function (usersock.h): one request on socket
 * sarg->idx, answered here or forwarded whole to the writer with its id
 * (0: the writer's answer comes back through the pipe, from_writer). */
static int serve_request(void *arg,
                         const uint8_t *id,
                         size_t idlen,
                         const uint8_t *payload,
                         size_t len,
                         struct buf *out)
{
	struct sockarg *sa = arg;
	struct readers *rd = sa->rd;
	struct req r;
	struct buf why = BUF_INIT;
	const struct cmd *cmd = NULL;
	struct arena a; /* the request's fields: no malloc for a small one */
	ProtobufCAllocator al;
	int rc = 1;

	memset(&r, 0, sizeof(r));
	r.admin = sa->idx == 1;
	if (!payload) {
		/* answered and counted here; usersock logged it */
		rd->bad_requests++;
		cmd_bad(&r, "bad request: request too large (at most %d bytes)",
		        GD_CTL_MAX_REQUEST);
		pack_reply(&r, out);
		return 1;
	}
	arena_init(&a, &al);
	r.rq_al = &al;
	if (request_decode(&r.rq, payload, len, &al, &why) == 0)
		cmd = cmd_table_find(rd->cmds, r.rq->cmd);
	else
		rd->bad_requests++; /* the writer answers it */
	buf_free(&why);
	if (!reader_row(cmd) || !rd->view) {
		/* the writer's, or a bad one (the writer answers and counts) */
		r.rq = NULL; /* in the arena: gone at its end */
		rd->pipe_sent = true;
		if (pipe_send(rd->rpipe, req_type(sa->idx), id, idlen, payload,
		              len, 0) == 0) {
			rc = 0;
			goto done;
		}
		log_error("request not handed to the writer: %s",
		          zmq_strerror(errno));
		cmd_undecided(&r, GD_EIO);
		pack_reply(&r, out);
		goto done;
	}
	uint64_t now_ms = clock_wall_ms();
	r.now_ms = now_ms;
	r.now = (int64_t)(now_ms / 1000);
	answer(rd, cmd, &r);
	r.rq = NULL; /* in the arena: wiped whole at its end, not field by field */
	pack_reply(&r, out);
done:
	arena_end(&a);
	return rc;
}

/* PIPE_VIEW: take what waits in the hand-over slots. */
static void take_view(struct readers *rd)
{
	struct store_batch *v;
	cJSON *st[2];

	pthread_mutex_lock(&rd->lock);
	v = rd->next_view;
	rd->next_view = NULL;
	rd->syncing = rd->next_syncing;
	for (int i = 0; i < 2; i++) {
		st[i] = rd->next_status[i];
		rd->next_status[i] = NULL;
	}
	pthread_mutex_unlock(&rd->lock);
	for (int i = 0; i < 2; i++)
		if (st[i]) {
			cJSON_Delete(rd->status[i]);
			rd->status[i] = st[i];
		}
	if (v) {
		/* the cache's facts are the old view's: gone with it, before
		 * any answer from the new one (pcache.h) */
		pcache_drop(rd->pcache);
		store_batch_free(&rd->view);
		rd->view = v;
	}
}

/* One message from the writer: an answer to send on, or a view.  Returns
 * 1 handled, 0 none waiting, -1 stop. */
static int from_writer(struct readers *rd)
{
	zmq_msg_t m[3];
	int n = 0, more = 1, rc = 1;

	while (more) {
		zmq_msg_t f;
		zmq_msg_init(&f);
		if (zmq_msg_recv(&f, rd->rpipe, n ? 0 : ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&f);
			if (!n)
				return errno == EAGAIN ? 0 : -1;
			rc = -1;
			break;
		}
		more = zmq_msg_more(&f);
		if (n < 3)
			m[n++] = f;
		else
			zmq_msg_close(&f);
	}
	if (rc == 1 && n == 3) {
		const uint8_t *id = zmq_msg_data(&m[0]);
		size_t idlen = zmq_msg_size(&m[0]);
		switch (pipe_type(id, idlen)) {
		case PIPE_VIEW:
			take_view(rd);
			break;
		case PIPE_REQ_USER:
		case PIPE_REQ_ADMIN:
			/* a client gone meanwhile: the answer is dropped */
			usersock_answer(rd->socks[id[0]], id + 1, idlen - 1,
			                zmq_msg_data(&m[2]),
			                zmq_msg_size(&m[2]));
			/* the reply may hold a fresh secret (enroll) */
			sodium_memzero(zmq_msg_data(&m[2]),
			               zmq_msg_size(&m[2]));
			break;
		case PIPE_QUIT:
			rc = -1;
			break;
		default:
			break; /* not ours: dropped */
		}
	}
	for (int i = 0; i < n; i++)
		zmq_msg_close(&m[i]);
	return rc;
}

/* ---- the keys socket (keysock.h) ---------------------------------------- */

/* keysock's lookup: keys.find's own handler on the newest view, so the
 * answer is the line grant-keys got over the user socket. */
static int keys_answer(void *arg, const char *fp, struct buf *out)
{
	struct readers *rd = arg;
	const struct cmd *cmd = cmd_table_find(rd->cmds, "keys.find");
	Grantd__V1__Request rq = GRANTD__V1__REQUEST__INIT;
	char *args[1] = {(char *)fp};
	struct req r;

	if (!cmd || !rd->view)
		return GD_EIO;
	memset(&r, 0, sizeof(r));
	rq.cmd = (char *)"keys.find";
	rq.args = args;
	rq.n_args = 1;
	r.rq = &rq;
	r.now_ms = clock_wall_ms();
	r.now = (int64_t)(r.now_ms / 1000);
	answer(rd, cmd, &r);
	if (r.status == GD_EXIT_OK) {
		if (r.out.len)
			buf_add(out, r.out.p, r.out.len);
	} else {
		buf_printf(out, "!%d %.200s\n", r.status,
		           r.err.len ? buf_str(&r.err) : "refused");
	}
	buf_free(&r.out);
	buf_free(&r.err);
	buf_free(&r.uri);
	buf_free(&r.path);
	return 0;
}

/* ---- the thread's loop --------------------------------------------------- */

/* The reader's own poll(2) over the sockets' items and the pipe's ZMQ_FD,
 * not zmq_poll: zmq_poll asks libzmq twice a round for the pipe's events
 * (each a look at its mailbox: a poll of its eventfd, a getpid for the
 * fork check), which cost the push check ~17% of the thread in the
 * profile of issue 23.  ZMQ_FD only says that the pipe's state may have
 * changed (edge-triggered, as libzmq documents): the pipe is drained to
 * EAGAIN whenever it may hold a message, and ZMQ_EVENTS asked before a
 * poll only after a send on it (which may have taken the signal of a
 * message that came meanwhile): a round of push checks makes no call to
 * libzmq at all. */
static short to_poll(short zev)
{
	return (short)(((zev & ZMQ_POLLIN) ? POLLIN : 0) |
	               ((zev & ZMQ_POLLOUT) ? POLLOUT : 0));
}

/* poll's revents as zmq_poll reports them: anything but POLLIN, POLLOUT
 * and POLLPRI (a hang-up, an error) is ZMQ_POLLERR. */
static short from_poll(short rev)
{
	return (short)(((rev & POLLIN) ? ZMQ_POLLIN : 0) |
	               ((rev & POLLOUT) ? ZMQ_POLLOUT : 0) |
	               ((rev & POLLPRI) ? ZMQ_POLLPRI : 0) |
	               ((rev & ~(POLLIN | POLLOUT | POLLPRI)) ? ZMQ_POLLERR
	                                                      : 0));
}

/* Does the pipe hold a message?  -1: the pipe failed (the context ends). */
static int pipe_readable(struct readers *rd)
{
	int ev = 0;
	size_t sz = sizeof(ev);

	if (zmq_getsockopt(rd->rpipe, ZMQ_EVENTS, &ev, &sz) < 0)
		return -1;
	return (ev & ZMQ_POLLIN) != 0;
}

/* Wait for items[1..n) and the pipe (pfd[0], its ZMQ_FD); revents filled
 * as zmq_poll would.  Returns 1 the pipe may hold a message, 0 not, -1
 * stop. */
static int wait_round(struct readers *rd,
                      zmq_pollitem_t *items,
                      struct pollfd *pfd,
                      int n,
                      long timeout)
{
	int pipe_in = 0;

	if (rd->pipe_sent) {
		rd->pipe_sent = false;
		if ((pipe_in = pipe_readable(rd)) < 0)
			return -1;
	}
	for (int i = 1; i < n; i++)
		pfd[i] = (struct pollfd){items[i].fd, to_poll(items[i].events),
		                         0};
	pfd[0].revents = 0;
	if (poll(pfd, (nfds_t)n, pipe_in ? 0 : (int)timeout) < 0) {
		if (errno == EINTR)
			return pipe_in;
		log_error("reader poll failed: %s", strerror(errno));
		return -1;
	}
	for (int i = 1; i < n; i++)
		items[i].revents = from_poll(pfd[i].revents);
	return pipe_in || pfd[0].revents;
}

static void *readers_main(void *arg)
{
	struct readers *rd = arg;
	int nk_max = keysock_nitems(rd->keys);
	int nu_max[2] = {usersock_nitems(rd->socks[0]),
	                 usersock_nitems(rd->socks[1])};
	int nitems = 1 + nk_max + nu_max[0] + nu_max[1];
	zmq_pollitem_t *items = xcalloc((size_t)nitems, sizeof(*items));
	struct pollfd *pfd = xcalloc((size_t)nitems, sizeof(*pfd));
	int pipe_fd = -1;
	size_t sz = sizeof(pipe_fd);

	if (zmq_getsockopt(rd->rpipe, ZMQ_FD, &pipe_fd, &sz) < 0) {
		log_error("reader pipe has no fd: %s", zmq_strerror(errno));
		goto done;
	}
	pfd[0] = (struct pollfd){pipe_fd, POLLIN, 0};
	rd->pipe_sent = true; /* look once before the first poll */
	for (;;) {
		long timeout = -1;
		zmq_pollitem_t *ki = items + 1, *ui[2];
		int nk = keysock_items(rd->keys, ki, &timeout), nu[2];
		ui[0] = ki + nk;
		nu[0] = usersock_items(rd->socks[0], ui[0], &timeout);
		ui[1] = ui[0] + nu[0];
		nu[1] = usersock_items(rd->socks[1], ui[1], &timeout);
		int pipe_in = wait_round(rd, items, pfd, 1 + nk + nu[0] + nu[1],
		                         timeout > INT_MAX ? INT_MAX : timeout);
		if (pipe_in < 0)
			break;
		/* the pipe only when it may hold something: each look costs
		 * libzmq's command processing */
		int got = 0;
		if (pipe_in)
			while ((got = from_writer(rd)) > 0)
				;
		if (got < 0)
			break;
		/* a view first (above), then the keys socket: one round of
		 * lookups, each a point read, none waiting for a client;
		 * then what each connection of either socket sent */
		keysock_serve(rd->keys, ki, nk);
		for (int s = 0; s < 2; s++)
			usersock_serve(rd->socks[s], ui[s], nu[s]);
	}
done:
	free(pfd);
	free(items);
	return NULL;
}

/* ---- the writer's side --------------------------------------------------- */

int readers_start(struct readers **out, const struct readers_opts *o)
{
	struct readers *rd = xcalloc(1, sizeof(*rd));
	struct store_batch *view = o->view;

	*out = NULL;
	rd->cfg = o->cfg;
	rd->counts = o->counts;
	rd->store = o->store;
	snprintf(rd->host, sizeof(rd->host), "%s", o->host ? o->host : "");
	rd->view = view;
	pcache_new(&rd->pcache, 0);
	/* a PIPE_VIEW for status alone hands over next_syncing too: it starts
	 * as the flag the node started with, never as false */
	rd->syncing = rd->next_syncing = o->syncing;
	rd->status[0] = o->status_store;
	rd->status[1] = o->status_repl;
	pthread_mutex_init(&rd->lock, NULL);
	snprintf(rd->endpoint, sizeof(rd->endpoint), "inproc://readers-%p",
	         (void *)rd);
	const struct usersock_opts uo[2] = {
	        {.path = o->cfg->user_socket,
	         .mode = 0660,
	         .group = "git",
	         .serve = serve_request,
	         .arg = &rd->sarg[0]},
	        {.path = o->cfg->admin_socket,
	         .mode = 0600,
	         .serve = serve_request,
	         .arg = &rd->sarg[1]},
	};
	const struct keysock_opts ko = {
	        .path = o->cfg->keys_socket,
	        .mode = 0660,
	        .group = "git",
	        .answer = keys_answer,
	        .arg = rd,
	};
	rd->pipe = pipe_socket(o->zctx);
	rd->rpipe = pipe_socket(o->zctx);
	for (int i = 0; i < 2; i++)
		rd->sarg[i] = (struct sockarg){rd, i};
	if (cmd_table_new(&rd->cmds) < 0 || keysock_open(&rd->keys, &ko) < 0 ||
	    usersock_open(&rd->socks[0], &uo[0]) < 0 ||
	    usersock_open(&rd->socks[1], &uo[1]) < 0 || !rd->pipe ||
	    !rd->rpipe || zmq_bind(rd->pipe, rd->endpoint) < 0 ||
	    zmq_connect(rd->rpipe, rd->endpoint) < 0) {
		log_error("cannot open the control sockets");
		readers_stop(&rd);
		return GD_EIO;
	}
	/* the sockets move to the thread (pthread_create is the barrier
	 * ZeroMQ asks for): from here on only it uses them */
	if (thread_start(&rd->thread, "gd-readers", readers_main, rd) != 0) {
		log_error("cannot start the reader thread");
		readers_stop(&rd);
		return GD_EIO;
	}
	rd->started = true;
	*out = rd;
	return 0;
}

void readers_stop(struct readers **rp)
{
	struct readers *rd = *rp;

	if (!rd)
		return;
	if (rd->started) {
		pipe_send(rd->pipe, PIPE_QUIT, NULL, 0, NULL, 0, 0);
		pthread_join(rd->thread, NULL);
		/* the thread is gone: views still in the pipe are freed here
		 * (a snapshot must be released before the store closes) */
		for (int i = 0; i < 1000000 && from_writer(rd) != 0; i++)
			;
	}
	for (int i = 0; i < 2; i++)
		usersock_close(&rd->socks[i]);
	keysock_close(&rd->keys);
	if (rd->rpipe)
		zmq_close(rd->rpipe);
	if (rd->pipe)
		zmq_close(rd->pipe);
	pcache_free(&rd->pcache);
	store_batch_free(&rd->view);
	store_batch_free(&rd->next_view);
	for (int i = 0; i < 2; i++) {
		cJSON_Delete(rd->status[i]);
		cJSON_Delete(rd->next_status[i]);
	}
	pthread_mutex_destroy(&rd->lock);
	cmd_table_free(&rd->cmds);
	free(rd);
	*rp = NULL;
}

void *readers_pipe(struct readers *rd)
{
	return rd->pipe;
}

void readers_publish(struct readers *rd, struct store_batch *view, bool syncing)
{
	pthread_mutex_lock(&rd->lock);
	if (view) {
		/* one the reader has not taken yet is already older */
		store_batch_free(&rd->next_view);
		rd->next_view = view;
	}
	rd->next_syncing = syncing;
	pthread_mutex_unlock(&rd->lock);
	if (pipe_send(rd->pipe, PIPE_VIEW, NULL, 0, NULL, 0, 0) < 0)
		log_error("read view not announced to the reader: %s",
		          zmq_strerror(errno));
}

void readers_publish_status(struct readers *rd, cJSON *store, cJSON *repl)
{
	cJSON *part[2] = {store, repl};

	pthread_mutex_lock(&rd->lock);
	for (int i = 0; i < 2; i++)
		if (part[i]) {
			/* one the reader has not taken yet is already older */
			cJSON_Delete(rd->next_status[i]);
			rd->next_status[i] = part[i];
		}
	pthread_mutex_unlock(&rd->lock);
	if (pipe_send(rd->pipe, PIPE_VIEW, NULL, 0, NULL, 0, 0) < 0)
		log_error("status not announced to the reader: %s",
		          zmq_strerror(errno));
}
