/*
 * control.c: requests on the writer thread (readers.h owns the sockets
 * and answers the plain reads; the rest arrive here through its pipe;
 * request.h has the socket helpers both threads use).
 *
 * A request is decoded and checked (request_decode), looked up in the
 * command table (cmd.h: the rows of cmd_grant.c, cmd_user.c, cmd_repo.c
 * and cmd_node.c, each saying where it is allowed and what it needs),
 * admitted by its row's rules and handled in a context made for it:
 * reads at once from committed state, the others against the batch of
 * the moment.  Replies to writes are sent only after the batch is
 * committed with fsync, so an answer means "durable".
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <grp.h>
#include <zmq.h>

#include "clock.h"
#include "cmd.h"
#include "control.h"
#include "err.h"
#include "log.h"
#include "node.h"
#include "pipe.h"
#include "repl.h"
#include "request.h"
#include "wire.h"
#include "writer.h"
#include "xalloc.h"
#include "banned.h"

struct control {
	struct node *n;
	void *pipe;             /* the reader thread's requests (readers.h) */
	struct store_batch *batch;
	struct cmd_table *cmds;
	/* requests parked while the sites vote (vote.h), and those whose
	 * verdict came, to be handled again in the next batch */
	struct parked *resumed;
};

/* A request waiting for the sites' votes: its own copy. */
struct parked {
	struct control *c;
	struct req r;
	struct parked *next;
};

/* ---- dispatch ------------------------------------------------------------ */

/* The context row cmd runs in: a read sees committed state only, and no
 * handler sees the node. */
static void ctx_make(struct control *c, const struct cmd *cmd,
		     struct cmd_ctx *x, struct cmd_node *nd)
{
	struct node *n = c->n;
	bool reads = cmd->flags & CMD_READS;

	memset(x, 0, sizeof(*x));
	x->p.cfg = n->cfg;
	x->p.store = n->store;
	x->p.batch = reads ? NULL : c->batch;
	x->p.host = n->host;
	x->ops = reads ? NULL : n->ops;
	x->syncing = n->syncing;
	x->counts = &n->counts;
	x->vote = reads ? NULL : n->vote;
	x->peer_policy = reads || !n->repl ? NULL : repl_peerpolicy(n->repl);
	if (cmd->flags & CMD_NODE) {
		nd->ops = n->ops;
		nd->repl = n->repl;
		nd->gitrepl = n->gitrepl;
		nd->curve_pub = n->curve_pub;
		nd->conf_path = n->conf_path;
		x->node = nd;
	}
}

static int dispatch(struct control *c, struct req *r)
{
	const struct cmd *cmd = cmd_table_find(c->cmds, r->rq->cmd);
	struct cmd_node nd;
	struct cmd_ctx x;

	if (!cmd)
		return cmd_bad(r, "unknown command '%s'", r->rq->cmd);
	if (r->reads_only != !!(cmd->flags & CMD_READS))
		return GD_EAGAIN;
	if (cmd_admit(cmd, r, c->n->cfg, c->n->host, c->n->syncing))
		return 0;
	ctx_make(c, cmd, &x, &nd);
	return cmd->fn(&x, r);
}

/* ---- sockets and batches -------------------------------------------------- */

int control_open(struct control **out, struct node *node, void *pipe)
{
	struct control *c = xcalloc(1, sizeof(*c));

	c->n = node;
	c->pipe = pipe;
	if (cmd_table_new(&c->cmds) < 0) {
		control_destroy(&c);
		*out = NULL;
		return GD_EINVAL;
	}
	c->batch = writer_batch(node->writer); /* borrowed: THE batch */
	*out = c;
	return 0;
}

void control_destroy(struct control **cp)
{
	struct control *c = *cp;
	if (!c)
		return;
	cmd_table_free(&c->cmds);
	while (c->resumed) { /* never answered: the node goes away */
		struct parked *p = c->resumed;
		c->resumed = p->next;
		request_free(&p->r);
		free(p);
	}
	free(c);
	*cp = NULL;
}

void *control_socket(struct control *c)
{
	return c->pipe;
}

/* Replies held until their batch is durable (writer_hold). */
struct held {
	struct req *reqs;
	int n;
};

/* The writer's end of a hold: answer once durable; free either way (a
 * writer going away first drops them unanswered: the callers see the node
 * go away and fail closed). */
static void held_done(void *item, bool durable)
{
	struct held *h = item;

	for (int i = 0; i < h->n; i++) {
		if (durable)
			request_send_reply(&h->reqs[i]);
		request_free(&h->reqs[i]);
	}
	free(h->reqs);
	free(h);
}

/* Handle the writes of reqs against the batch, but those that failed
 * before.  Returns 0, or 1 + the index of the first request whose handler
 * failed (its code in *err; the ones after it are not handled). */
static int handle_writes(struct control *c, struct req *reqs, int n,
			 int *held, int *err)
{
	*held = 0;
	for (int i = 0; i < n; i++) {
		struct req *r = &reqs[i];
		if (!r->rq || r->failed)
			continue;
		uint64_t seq = ops_seq(c->n->ops);
		int rc = dispatch(c, r);
		if (rc < 0) {
			request_log_failed(r, rc);
			*err = rc;
			return i + 1;
		}
		/* a handler may hold its answer without writing (a push
		 * recorded in this very batch) */
		r->wrote = r->wrote || ops_seq(c->n->ops) != seq;
		*held += r->wrote;
	}
	return 0;
}

/* Empty the answers of the requests of a batch that will not be
 * written. */
static void answers_reset(struct req *reqs, int n)
{
	for (int i = 0; i < n; i++) {
		if (!reqs[i].rq)
			continue; /* answered when it was read */
		buf_reset(&reqs[i].out);
		buf_reset(&reqs[i].uri);
		buf_reset(&reqs[i].path);
		buf_reset(&reqs[i].err);
		reqs[i].factor = NULL;
		reqs[i].next[0] = '\0';
		reqs[i].status = GD_EXIT_OK;
		reqs[i].wrote = false;
		if (reqs[i].vote.state == CMD_VOTE_PARK)
			reqs[i].vote.state = CMD_VOTE_NONE;
	}
}

/* A parked request's verdict: handled again in the next batch
 * (control_resumed tells the loop). */
static void parked_done(void *item, enum vote_end end, const char *why)
{
	struct parked *p = item;
	struct control *c = p->c;

	if (end == VOTE_END_GONE) {
		request_free(&p->r);
		free(p);
		return;
	}
	p->r.vote.state = end == VOTE_END_YES ? CMD_VOTE_YES : CMD_VOTE_NO;
	snprintf(p->r.vote.why, sizeof(p->r.vote.why), "%s", why ? why : "");
	p->next = c->resumed;
	c->resumed = p;
}

bool control_resumed(const struct control *c)
{
	return c && c->resumed;
}

/* Park the requests that proposed a use, now that their own promise is
 * committed in ticket: the sites vote, the caller waits, others go on. */
static void park(struct control *c, struct req *reqs, int n, uint64_t ticket)
{
	for (int i = 0; i < n; i++) {
		if (!reqs[i].rq || reqs[i].vote.state != CMD_VOTE_PARK)
			continue;
		struct parked *p = xcalloc(1, sizeof(*p));
		p->c = c;
		p->r = reqs[i];
		memset(&reqs[i], 0, sizeof(reqs[i]));
		vote_start(c->n->vote, &p->r.vote.use, p->r.vote.pid, ticket,
			   parked_done, p);
	}
}

/* Nothing of the batch will be written: drop it, forget the in-memory
 * advances it made (writer_discard), and empty the answers of the
 * requests in it. */
static void batch_discard(struct control *c, struct req *reqs, int n)
{
	writer_discard(c->n->writer);
	answers_reset(reqs, n);
}

/* Answer r now (a read, or a request that cannot be handled) and free
 * it: an empty slot is a parked request to the rest of the batch. */
static void answer_now(struct req *r)
{
	request_send_reply(r);
	request_free(r);
	memset(r, 0, sizeof(*r));
}

/* One request the reader forwarded (request.h's envelope, its first byte
 * the socket: pipe.h), into r.  Returns 1 when r is a write to handle in
 * the batch, 0 when it was answered or dropped, -1 when none waits.
 * Reads are answered now, writes after the commit. */
static int read_forwarded(struct control *c, struct req *r,
			  struct buf *payload, uint64_t now_ms)
{
	struct buf why = BUF_INIT;
	int got = request_recv(c->pipe, &r->ident, payload), rc;
	enum pipe_msg type;

	if (got == 0)
		return -1;
	type = got < 0 ? PIPE_NONE : pipe_type(r->ident.p, r->ident.len);
	if (type != PIPE_REQ_USER && type != PIPE_REQ_ADMIN) {
		buf_free(&r->ident);
		return 0;
	}
	r->sock = c->pipe;
	r->admin = type == PIPE_REQ_ADMIN;
	r->now_ms = now_ms;
	r->now = (int64_t)(now_ms / 1000);
	if (request_decode(&r->rq, (const uint8_t *)payload->p,
			   payload->len, NULL, &why) < 0) {
		log_warn("bad request dropped socket=%s: %s",
			 r->admin ? "admin" : "user", why.p);
		cmd_bad(r, "bad request: %s", why.p);
		buf_free(&why);
		answer_now(r);
		return 0;
	}
	buf_free(&why);
	r->reads_only = true;
	rc = dispatch(c, r);
	r->reads_only = false;
	if (rc == GD_EAGAIN)
		return 1;
	if (rc < 0) {
		request_log_failed(r, rc);
		cmd_undecided(r, rc);
	}
	answer_now(r);
	return 0;
}

/* Fill reqs (room for max): the requests whose votes are in first, as
 * they were read, then whatever the reader forwarded.  Returns how many. */
static int gather(struct control *c, struct req *reqs, int max)
{
	struct buf payload = BUF_INIT;
	uint64_t now_ms = clock_wall_ms();
	int n = 0, got;

	while (n < max && c->resumed) {
		struct parked *p = c->resumed;
		c->resumed = p->next;
		reqs[n++] = p->r;
		free(p);
	}
	while (n < max && (got = read_forwarded(c, &reqs[n], &payload,
						now_ms)) >= 0)
		n += got;
	if (payload.p)
		sodium_memzero(payload.p, payload.cap); /* may hold a secret */
	buf_free(&payload);
	return n;
}

/* Answer the requests of a batch whose commit gave ticket (failed: the
 * commit's error): the writes once durable (writer_hold), the others
 * now; park those that wait for votes. */
static void answer_batch(struct control *c, struct req *reqs, int n,
			 int held, int failed, uint64_t ticket)
{
	struct held *h = NULL;

	for (int i = 0; i < n; i++)
		if (reqs[i].rq && reqs[i].failed)
			cmd_undecided(&reqs[i], reqs[i].failed);
	if (!failed)
		park(c, reqs, n, ticket);
	if (held) {
		h = xcalloc(1, sizeof(*h));
		h->reqs = xcalloc((size_t)held, sizeof(*h->reqs));
	}
	for (int i = 0; i < n; i++) {
		if (!reqs[i].rq)
			continue; /* parked */
		if (h && reqs[i].wrote) {
			GD_ASSERT(h->n < held);
			h->reqs[h->n++] = reqs[i];
			continue;
		}
		request_send_reply(&reqs[i]);
		request_free(&reqs[i]);
	}
	/* the batch's operations went to the writer with its ticket: they
	 * are published, then these replies sent, once it is durable */
	if (h)
		writer_hold(c->n->writer, ticket, held_done, h);
}

int control_serve_batch(struct control *c, int max)
{
	struct req *reqs = xcalloc((size_t)max, sizeof(*reqs));
	int n = gather(c, reqs, max), failed, held = 0, which, err = 0;
	uint64_t ticket;

	/* A handler that fails may leave part of its changes in the batch,
	 * which cannot be taken out alone: the batch is dropped and the
	 * others are handled again in a fresh one, without it, so that no
	 * request fails because another of its batch did.  Each round
	 * leaves one more out. */
	while ((which = handle_writes(c, reqs, n, &held, &err)) > 0) {
		reqs[which - 1].failed = err;
		batch_discard(c, reqs, n);
		log_warn("batch dropped, its other requests handled again "
			 "without the failed one cmd=%s", reqs[which - 1].rq->cmd);
	}
	/* Written now (visible to the next batch), durable when the syncer
	 * says so: only then are the writers answered. */
	failed = writer_commit(c->n->writer, &ticket);
	if (failed) {
		/* Nothing of this batch is written (the writer dropped it):
		 * say so to every caller. */
		answers_reset(reqs, n);
		held = 0;
		for (int i = 0; i < n; i++)
			if (reqs[i].rq)
				reqs[i].failed = failed;
	}
	answer_batch(c, reqs, n, held, failed, ticket);
	free(reqs);
	return failed ? failed : n;
}
