/*
 * control.c: requests on the writer thread, and the socket helpers the
 * reader thread shares (readers.h owns the sockets and answers the plain
 * reads; the rest arrive here through its pipe).
 *
 * A request is decoded and checked (control_decode), looked up in the
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

#include "addr.h"
#include "clock.h"
#include "cmd.h"
#include "control.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "node.h"
#include "repl.h"
#include "wire.h"
#include "writer.h"
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

/* ---- replies ------------------------------------------------------------ */

/* Where a request failed: the command and who asked, never its
 * arguments (they may hold a secret). */
static void log_failed(const struct req *r, int err)
{
	log_error("request failed cmd=%s socket=%s%s%s: %s", r->rq->cmd,
		  r->admin ? "admin" : "user", r->rq->user ? " user=" : "",
		  r->rq->user ? r->rq->user : "", gd_strerror(err));
}

/* ---- decoding ----------------------------------------------------------- */

static bool printable(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);
	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

int control_decode(Grantd__V1__Request **out, const uint8_t *data,
		   size_t len, struct buf *err)
{
	Grantd__V1__Request *rq;
	const char *why = NULL;

	*out = NULL;
	if (len > GD_CTL_MAX_REQUEST) {
		buf_puts(err, "request too large");
		return GD_ETOOBIG;
	}
	rq = grantd__v1__request__unpack(NULL, len, data);
	if (!rq) {
		buf_puts(err, "request does not decode");
		return GD_EPROTO;
	}
	if (!rq->has_version || rq->version != GD_WIRE_VERSION)
		why = "unsupported protocol version (client and node differ?)";
	else if (!rq->cmd || !*rq->cmd || !printable(rq->cmd, 32))
		why = "missing or bad command name";
	else if (rq->n_args > GD_CTL_MAX_ARGS)
		why = "too many arguments";
	else if (rq->user && !name_user_ok(rq->user))
		why = "bad user name";
	else if (rq->client_ip && !printable(rq->client_ip, ADDR_STRLEN))
		why = "bad client address";
	else if (rq->session && !printable(rq->session, 128))
		why = "bad session id";
	else if (rq->key_kind && !printable(rq->key_kind, 16))
		why = "bad key kind";
	for (size_t i = 0; !why && i < rq->n_args; i++)
		if (!rq->args[i] || !printable(rq->args[i], 16384))
			why = "bad argument (too long or control characters)";
	if (why) {
		buf_puts(err, why);
		grantd__v1__request__free_unpacked(rq, NULL);
		return GD_EPROTO;
	}
	*out = rq;
	return 0;
}

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
	struct control *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
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
		control_req_free(&p->r);
		free(p);
	}
	free(c);
	*cp = NULL;
}

void *control_socket(struct control *c)
{
	return c->pipe;
}

void control_log_failed(const struct req *r, int err)
{
	log_failed(r, err);
}

int control_recv(void *sock, struct buf *ident, struct buf *payload)
{
	int frame = 0, more = 1, rc = 1;

	buf_reset(ident);
	/* only what the last request wrote: the rest is still zero (the
	 * whole capacity each time cost a 64 KiB memset a request) */
	if (payload->p)
		sodium_memzero(payload->p, payload->len);
	buf_reset(payload);
	if (payload->cap < GD_CTL_MAX_REQUEST + 1) {
		buf_extend(payload, GD_CTL_MAX_REQUEST);
		buf_reset(payload);
	}
	while (more) {
		zmq_msg_t m;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, sock, frame ? 0 : ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return frame ? GD_EIO : 0;
		}
		size_t len = zmq_msg_size(&m);
		if (frame == 1 && len != 0)
			rc = GD_EPROTO;
		else if (frame >= CTL_MAX_FRAMES ||
			 (frame >= 2 && len > GD_CTL_MAX_REQUEST - payload->len))
			rc = rc == 1 ? GD_ETOOBIG : rc;
		if (frame == 0 && len <= 256)
			buf_add(ident, zmq_msg_data(&m), len);
		else if (frame >= 2 && rc == 1)
			buf_add(payload, zmq_msg_data(&m), len);
		more = zmq_msg_more(&m);
		if (frame >= 2)
			sodium_memzero(zmq_msg_data(&m), len);
		zmq_msg_close(&m);
		frame++;
	}
	if (rc == 1 && frame < 3)
		rc = GD_EPROTO;
	if (rc < 0)
		sodium_memzero(payload->p, payload->len);
	return rc;
}

void control_send_reply(struct req *r)
{
	Grantd__V1__Reply rep = GRANTD__V1__REPLY__INIT;
	uint8_t *frame;
	size_t len;

	SET(rep, status, r->status);
	rep.out = r->out.len ? r->out.p : NULL;
	rep.err = r->err.len ? r->err.p : NULL;
	rep.otpauth_uri = r->uri.len ? r->uri.p : NULL;
	rep.path = r->path.len ? r->path.p : NULL;
	rep.factor = (char *)r->factor;
	rep.next = r->next[0] ? r->next : NULL;
	len = grantd__v1__reply__get_packed_size(&rep);
	frame = malloc(len ? len : 1);
	if (!frame)
		abort();
	grantd__v1__reply__pack(&rep, frame);
	/* never block the node on a client that does not read its answers */
	if (zmq_send(r->sock, r->ident.p, r->ident.len,
		     ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(r->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(r->sock, frame, len, ZMQ_DONTWAIT) < 0)
		log_warn("reply not delivered: %s", zmq_strerror(errno));
	/* the reply may hold a fresh secret (enroll) */
	sodium_memzero(frame, len);
	free(frame);
}

void control_req_free(struct req *r)
{
	/* arguments may carry a secret (grantctl enroll --secret) */
	for (size_t i = 0; r->rq && i < r->rq->n_args; i++)
		sodium_memzero(r->rq->args[i], strlen(r->rq->args[i]));
	if (r->rq)
		grantd__v1__request__free_unpacked(r->rq, NULL);
	if (r->out.p)
		sodium_memzero(r->out.p, r->out.len);
	if (r->uri.p)
		sodium_memzero(r->uri.p, r->uri.len);
	buf_free(&r->out);
	buf_free(&r->err);
	buf_free(&r->uri);
	buf_free(&r->path);
	buf_free(&r->ident);
}

void control_refuse_oversized(struct req *r, void *sock, bool admin)
{
	log_warn("bad request dropped socket=%s: more than %d frames or %d "
		 "bytes", admin ? "admin" : "user", CTL_MAX_FRAMES,
		 GD_CTL_MAX_REQUEST);
	r->sock = sock;
	cmd_bad(r, "bad request: request too large (at most %d bytes in %d "
	    "frames)", GD_CTL_MAX_REQUEST, CTL_MAX_FRAMES - 2);
	control_send_reply(r);
	control_req_free(r);
	memset(r, 0, sizeof(*r));
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
			control_send_reply(&h->reqs[i]);
		control_req_free(&h->reqs[i]);
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
			log_failed(r, rc);
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
		control_req_free(&p->r);
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
		struct parked *p = calloc(1, sizeof(*p));
		if (!p)
			abort();
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

int control_serve_batch(struct control *c, int max)
{
	struct req *reqs = calloc((size_t)max, sizeof(*reqs));
	struct buf payload = BUF_INIT;
	int n = 0, failed = 0, held = 0;
	uint64_t now_ms = clock_wall_ms();

	if (!reqs)
		abort();
	/* Requests whose votes are in go first, as they were read. */
	while (n < max && c->resumed) {
		struct parked *p = c->resumed;
		c->resumed = p->next;
		reqs[n++] = p->r;
		free(p);
	}
	/* Read whatever the reader forwarded: [socket, routing id][""]
	 * [request], answered the same way (readers.h). */
	while (n < max) {
		struct req *r = &reqs[n];
		int got = control_recv(c->pipe, &r->ident, &payload);
		if (got == 0)
			break;
		if (got < 0 || r->ident.len < 1 ||
		    (uint8_t)r->ident.p[0] > 1) {
			buf_free(&r->ident);
			continue;
		}
		r->sock = c->pipe;
		r->admin = r->ident.p[0] == 1;
		r->now_ms = now_ms;
		r->now = (int64_t)(now_ms / 1000);
		struct buf why = BUF_INIT;
		if (control_decode(&r->rq, (const uint8_t *)payload.p,
				   payload.len, &why) < 0) {
			log_warn("bad request dropped socket=%s: %s",
				 r->admin ? "admin" : "user", why.p);
			cmd_bad(r, "bad request: %s", why.p);
			/* answered now: a request without rq is a parked
			 * one to the rest of the batch */
			control_send_reply(r);
			control_req_free(r);
			memset(r, 0, sizeof(*r));
			buf_free(&why);
			continue;
		} else {
			/* reads are answered now, writes after the
			 * commit */
			r->reads_only = true;
			int drc = dispatch(c, r);
			r->reads_only = false;
			if (drc != GD_EAGAIN) {
				if (drc < 0) {
					log_failed(r, drc);
					cmd_undecided(r, drc);
				}
				control_send_reply(r);
				control_req_free(r);
				memset(r, 0, sizeof(*r));
				buf_free(&why);
				continue;
			}
		}
		buf_free(&why);
		n++;
	}
	if (payload.p)
		sodium_memzero(payload.p, payload.cap); /* may hold a secret */
	buf_free(&payload);
	/* A handler that fails may leave part of its changes in the batch,
	 * which cannot be taken out alone: the batch is dropped and the
	 * others are handled again in a fresh one, without it, so that no
	 * request fails because another of its batch did.  Each round
	 * leaves one more out. */
	int which, err = 0;
	while ((which = handle_writes(c, reqs, n, &held, &err)) > 0) {
		reqs[which - 1].failed = err;
		batch_discard(c, reqs, n);
		log_warn("batch dropped, its other requests handled again "
			 "without the failed one cmd=%s", reqs[which - 1].rq->cmd);
	}
	/* Written now (visible to the next batch), durable when the syncer
	 * says so: only then are the writers answered. */
	uint64_t ticket;
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
	for (int i = 0; i < n; i++)
		if (reqs[i].rq && reqs[i].failed)
			cmd_undecided(&reqs[i], reqs[i].failed);
	if (!failed)
		park(c, reqs, n, ticket);
	struct held *h = NULL;
	if (held) {
		h = calloc(1, sizeof(*h));
		if (!h || !(h->reqs = calloc((size_t)held, sizeof(*h->reqs))))
			abort();
	}
	for (int i = 0; i < n; i++) {
		if (!reqs[i].rq)
			continue; /* parked */
		if (h && reqs[i].wrote) {
			h->reqs[h->n++] = reqs[i];
			continue;
		}
		control_send_reply(&reqs[i]);
		control_req_free(&reqs[i]);
	}
	/* the batch's operations went to the writer with its ticket: they
	 * are published, then these replies sent, once it is durable */
	if (h)
		writer_hold(c->n->writer, ticket, held_done, h);
	free(reqs);
	return failed ? failed : n;
}
