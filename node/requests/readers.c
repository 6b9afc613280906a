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
#include <grp.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "cmd.h"
#include "pipe.h"
#include "err.h"
#include "hlc.h"
#include "keysock.h"
#include "log.h"
#include "readers.h"
#include "request.h"
#include "wire.h"
#include "thread.h"
#include "xalloc.h"
#include "banned.h"

struct readers {
	const struct config *cfg;
	struct store *store;
	struct cmd_table *cmds;     /* its own copy */
	char host[256];
	void *socks[2];             /* user, admin: the thread's */
	struct keysock *keys;       /* grant-keys' plain socket: the thread's */
	void *pipe;                 /* the writer's end */
	void *rpipe;                /* the thread's end */
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
	cJSON *next_status[2];      /* store, repl parts (cmd.h) */
	/* the thread's own */
	struct store_batch *view;
	bool syncing;
	cJSON *status[2];           /* the newest parts taken */
	uint64_t bad_requests;      /* refused or undecodable frames */
	struct metrics_counts *counts; /* atomic (metrics.h); NULL: none */
	struct buf ident, payload;
};

/* ---- sockets -------------------------------------------------------------- */

static void *bind_socket(void *zctx, const char *path, mode_t mode,
			 bool group_git)
{
	void *s = zmq_socket(zctx, ZMQ_ROUTER);
	/* frames up to 16 times the request limit get an error answer from
	 * request_decode; only larger ones are dropped by ZeroMQ unanswered */
	int64_t max = 16 * GD_CTL_MAX_REQUEST;
	/* answers queued for one client before the next is dropped ("reply
	 * not delivered"): ZeroMQ's default, 1000, dropped the last answer
	 * of a client that pipelined 1001 requests when its I/O thread fell
	 * behind on a loaded machine (lockout_burst: "1000 of 1001 answers
	 * came"); this bound still caps what a client that never reads can
	 * make the node hold (a few MB) */
	int hwm = 65536;
	int zero = 0, one = 1;
	char ep[4200];

	if (!s)
		return NULL;
	zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof(max));
	zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
	unlink(path);
	snprintf(ep, sizeof(ep), "ipc://%s", path);
	if (zmq_bind(s, ep) < 0) {
		log_error("cannot bind socket path=%s: %s", path,
			  zmq_strerror(errno));
		zmq_close(s);
		return NULL;
	}
	if (chmod(path, mode) < 0)
		log_warn("cannot chmod socket path=%s: %s", path,
			 strerror(errno));
	if (group_git) {
		struct group *g = getgrnam("git");
		if (g && chown(path, (uid_t)-1, g->gr_gid) < 0)
			log_warn("cannot chgrp git socket path=%s: %s", path,
				 strerror(errno));
	}
	return s;
}

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

/* ---- the thread ----------------------------------------------------------- */

/* Send frames on sock: n frames, the last without SNDMORE. */
static int send_frames(void *sock, const void *const *p, const size_t *len,
		       int n, int flags)
{
	for (int i = 0; i < n; i++)
		if (zmq_send(sock, p[i], len[i],
			     flags | (i < n - 1 ? ZMQ_SNDMORE : 0)) < 0)
			return GD_EIO;
	return 0;
}

/* The pipe message of a request from socket idx (0 user, 1 admin). */
static enum pipe_msg req_type(int idx)
{
	return idx ? PIPE_REQ_ADMIN : PIPE_REQ_USER;
}

/* The request in rd->payload, from socket idx, to the writer. */
static void forward(struct readers *rd, int idx)
{
	if (pipe_send(rd->rpipe, req_type(idx), rd->ident.p, rd->ident.len,
		      rd->payload.p, rd->payload.len, 0) < 0)
		log_error("request not handed to the writer: %s",
			  zmq_strerror(errno));
}

/* Is cmd answered here?  A read that needs nothing of the writer's. */
static bool reader_row(const struct cmd *cmd)
{
	return cmd && (cmd->flags & CMD_READS) && !(cmd->flags & CMD_NODE);
}

/* Answer r (decoded, its row cmd) from the view. */
static void answer(struct readers *rd, const struct cmd *cmd, struct req *r)
{
	struct cmd_status st = { rd->status[0], rd->status[1],
				 rd->bad_requests };
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
	x.syncing = rd->syncing;
	x.counts = rd->counts;
	if ((rc = cmd->fn(&x, r)) < 0) {
		request_log_failed(r, rc);
		cmd_undecided(r, rc);
	}
}

/* One request waiting on socket idx: answered here or forwarded.
 * Returns 1 when one was read, 0 when none was waiting. */
static int serve_one(struct readers *rd, int idx)
{
	struct req r;
	struct buf why = BUF_INIT;
	const struct cmd *cmd = NULL;
	int got = request_recv(rd->socks[idx], &rd->ident, &rd->payload);

	if (got == 0)
		return 0;
	if (got == GD_ETOOBIG) {
		/* answered and counted here */
		rd->bad_requests++;
		memset(&r, 0, sizeof(r));
		buf_add(&r.ident, rd->ident.p, rd->ident.len);
		request_refuse_oversized(&r, rd->socks[idx], idx == 1);
		return 1;
	}
	if (got < 0)
		return 1;
	memset(&r, 0, sizeof(r));
	if (request_decode(&r.rq, (const uint8_t *)rd->payload.p,
			   rd->payload.len, &why) == 0)
		cmd = cmd_table_find(rd->cmds, r.rq->cmd);
	else
		rd->bad_requests++; /* the writer answers it */
	buf_free(&why);
	if (!reader_row(cmd) || !rd->view) {
		/* the writer's, or a bad one (the writer answers and counts) */
		if (r.rq)
			grantd__v1__request__free_unpacked(r.rq, NULL);
		forward(rd, idx);
	} else {
		uint64_t now_ms = clock_wall_ms();
		buf_add(&r.ident, rd->ident.p, rd->ident.len);
		r.sock = rd->socks[idx];
		r.admin = idx == 1;
		r.now_ms = now_ms;
		r.now = (int64_t)(now_ms / 1000);
		answer(rd, cmd, &r);
		request_send_reply(&r);
		request_free(&r);
	}
	/* may hold a secret; beyond len it is zero already */
	sodium_memzero(rd->payload.p, rd->payload.len);
	return 1;
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
		store_batch_free(&rd->view);
		rd->view = v;
	}
}

/* An answer from the writer: on to the client at id on sock. */
static void send_answer(void *sock, const uint8_t *id, size_t idlen,
			zmq_msg_t *reply)
{
	/* never block on a client that does not read its answers */
	const void *p[3] = { id, "", zmq_msg_data(reply) };
	size_t len[3] = { idlen, 0, zmq_msg_size(reply) };
	if (send_frames(sock, p, len, 3, ZMQ_DONTWAIT) < 0)
		log_warn("reply not delivered: %s", zmq_strerror(errno));
	/* the reply may hold a fresh secret (enroll) */
	sodium_memzero(zmq_msg_data(reply), zmq_msg_size(reply));
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
			send_answer(rd->socks[id[0]], id + 1, idlen - 1, &m[2]);
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
	char *args[1] = { (char *)fp };
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

/* ---- the thread's loop ---------------------------------------------------- */

static void *readers_main(void *arg)
{
	struct readers *rd = arg;
	int nitems = 3 + keysock_nitems(rd->keys);
	zmq_pollitem_t *items = xcalloc((size_t)nitems, sizeof(*items));

	items[0] = (zmq_pollitem_t){ rd->rpipe, 0, ZMQ_POLLIN, 0 };
	items[1] = (zmq_pollitem_t){ rd->socks[0], 0, ZMQ_POLLIN, 0 };
	items[2] = (zmq_pollitem_t){ rd->socks[1], 0, ZMQ_POLLIN, 0 };
	for (;;) {
		long timeout = -1;
		int nk = keysock_items(rd->keys, items + 3, &timeout);
		if (zmq_poll(items, 3 + nk, timeout) < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ETERM)
				break;
			log_error("reader poll failed: %s",
				  zmq_strerror(errno));
			break;
		}
		int got;
		while ((got = from_writer(rd)) > 0)
			;
		if (got < 0)
			break;
		/* a view first (above), then the keys socket: one round of
		 * lookups, each a point read, none waiting for a client */
		keysock_serve(rd->keys, items + 3, nk);
		/* whatever waits on either socket, alternating */
		for (bool progress = true; progress;) {
			progress = false;
			for (int s = 0; s < 2; s++)
				progress |= serve_one(rd, s) > 0;
			/* answers and views first: they unblock callers */
			while ((got = from_writer(rd)) > 0)
				;
			if (got < 0)
				goto out;
		}
	}
out:
	free(items);
	return NULL;
}

/* ---- the writer's side ---------------------------------------------------- */

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
	/* a PIPE_VIEW for status alone hands over next_syncing too: it starts as
	 * the flag the node started with, never as false */
	rd->syncing = rd->next_syncing = o->syncing;
	rd->status[0] = o->status_store;
	rd->status[1] = o->status_repl;
	pthread_mutex_init(&rd->lock, NULL);
	snprintf(rd->endpoint, sizeof(rd->endpoint), "inproc://readers-%p",
		 (void *)rd);
	rd->socks[0] = bind_socket(o->zctx, o->cfg->user_socket, 0660, true);
	rd->socks[1] = bind_socket(o->zctx, o->cfg->admin_socket, 0600, false);
	const struct keysock_opts ko = {
		.path = o->cfg->keys_socket, .mode = 0660, .group = "git",
		.answer = keys_answer, .arg = rd,
	};
	rd->pipe = pipe_socket(o->zctx);
	rd->rpipe = pipe_socket(o->zctx);
	if (cmd_table_new(&rd->cmds) < 0 ||
	    keysock_open(&rd->keys, &ko) < 0 ||
	    !rd->socks[0] || !rd->socks[1] || !rd->pipe || !rd->rpipe ||
	    zmq_bind(rd->pipe, rd->endpoint) < 0 ||
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
		if (rd->socks[i]) {
			zmq_close(rd->socks[i]);
			unlink(i ? rd->cfg->admin_socket : rd->cfg->user_socket);
		}
	keysock_close(&rd->keys);
	if (rd->rpipe)
		zmq_close(rd->rpipe);
	if (rd->pipe)
		zmq_close(rd->pipe);
	store_batch_free(&rd->view);
	store_batch_free(&rd->next_view);
	for (int i = 0; i < 2; i++) {
		cJSON_Delete(rd->status[i]);
		cJSON_Delete(rd->next_status[i]);
	}
	pthread_mutex_destroy(&rd->lock);
	cmd_table_free(&rd->cmds);
	if (rd->payload.p)
		sodium_memzero(rd->payload.p, rd->payload.cap);
	buf_free(&rd->payload);
	buf_free(&rd->ident);
	free(rd);
	*rp = NULL;
}

void *readers_pipe(struct readers *rd)
{
	return rd->pipe;
}

void readers_publish(struct readers *rd, struct store_batch *view,
		     bool syncing)
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
	cJSON *part[2] = { store, repl };

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
