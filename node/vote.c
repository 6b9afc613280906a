/*
 * vote.c: the strict token quorum (vote.h): the rule, the voter on the
 * sync ROUTER, the origin's one parallel round, and the use sync that
 * qualifies a restored store.
 *
 * Why promises are a family of their own and not marks: a mark is a
 * replicated record that says a use was accepted; a promise says only
 * that this site voted for it, and must never travel (a site's vote is
 * worth something only because it is its own).  Why the origin does not
 * wait in a loop: the writer thread also answers every other request and
 * applies the peers' operations; a proposal is a struct that the answers,
 * the writer's sync and the tick move on.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "crashpoint.h"
#include "err.h"
#include "hlc.h"
#include "log.h"
#include "otp.h"
#include "records.h"
#include "vote.h"
#include "writer.h"
#include "banned.h"

#define VOTE_MAXMSG (256 * 1024)
#define SYNC_PAGE 256
#define SYNC_RETRY_MS 1000

/* ---- the rule ------------------------------------------------------------ */

int vote_held(struct store *s, struct store_batch *b, const char *user,
	      uint64_t enroll_id, Grantd__V1__Mark *mark,
	      Grantd__V1__Promise *promise)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	grantd__v1__mark__init(mark);
	grantd__v1__promise__init(promise);
	records_key_mark(&k, user, enroll_id);
	rc = store_get(s, b, CF_MARKS, k.p, k.len, &v);
	if (rc == 0) {
		Grantd__V1__Mark *m = grantd__v1__mark__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		if (!m) {
			rc = GD_EPROTO;
			goto out;
		}
		mark->next = m->next;
		mark->scratch_used = m->scratch_used;
		grantd__v1__mark__free_unpacked(m, NULL);
	} else if (rc != GD_ENOTFOUND) {
		goto out;
	}
	rc = store_get(s, b, CF_PROMISES, k.p, k.len, &v);
	if (rc == 0) {
		Grantd__V1__Promise *p = grantd__v1__promise__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		if (!p) {
			rc = GD_EPROTO;
			goto out;
		}
		promise->next = p->next;
		promise->scratch_used = p->scratch_used;
		promise->pid = p->pid;
		grantd__v1__promise__free_unpacked(p, NULL);
	} else if (rc != GD_ENOTFOUND) {
		goto out;
	}
	rc = 0;
out:
	buf_free(&k);
	buf_free(&v);
	return rc;
}

int vote_use_from_req(struct vote_use *u, uint64_t *pid,
		      const Grantd__V1__VoteReq *q)
{
	memset(u, 0, sizeof(*u));
	*pid = q && q->has_pid ? q->pid : 0;
	if (!q || !q->user || strlen(q->user) > NAME_USER_MAX ||
	    !q->has_enroll_id || !*pid)
		return GD_EPROTO;
	snprintf(u->user, sizeof(u->user), "%s", q->user);
	u->enroll_id = q->enroll_id;
	u->next = q->has_next ? q->next : 0;
	u->scratch = q->has_scratch ? q->scratch : 0;
	return 0;
}

/* Exactly one bit below OTP_SCRATCH_CODES. */
static bool one_scratch_bit(uint32_t s)
{
	return s && !(s & (s - 1)) && s < (1u << OTP_SCRATCH_CODES);
}

static void promise_put(struct store_batch *b, const struct vote_use *u,
			const Grantd__V1__Promise *old, uint64_t pid,
			const char *site, uint64_t hlc)
{
	Grantd__V1__Promise p = GRANTD__V1__PROMISE__INIT;
	struct buf k = BUF_INIT;
	uint8_t *val;
	size_t len;

	p.user = (char *)u->user;
	p.enroll_id = u->enroll_id;
	p.has_enroll_id = 1;
	p.next = u->next > old->next ? u->next : old->next;
	p.has_next = 1;
	p.scratch_used = old->scratch_used | u->scratch;
	p.has_scratch_used = 1;
	p.pid = pid;
	p.has_pid = 1;
	p.site = (char *)site;
	p.hlc = hlc;
	p.has_hlc = 1;
	len = grantd__v1__promise__get_packed_size(&p);
	val = malloc(len ? len : 1);
	if (!val)
		abort();
	grantd__v1__promise__pack(&p, val);
	records_key_promise(&k, u->user, u->enroll_id);
	store_put(b, CF_PROMISES, k.p, k.len, val, len);
	free(val);
	buf_free(&k);
}

int vote_promise(struct store *s, struct store_batch *b,
		 const struct vote_use *u, uint64_t pid, const char *site,
		 uint64_t hlc, Grantd__V1__VoteVerdict *verdict,
		 uint64_t *held)
{
	Grantd__V1__Mark m;
	Grantd__V1__Promise p;
	int rc;

	*held = 0;
	*verdict = GRANTD__V1__VOTE_VERDICT__VOTE_BAD;
	if (!name_user_ok(u->user) || !pid ||
	    (u->next ? u->scratch != 0 : !one_scratch_bit(u->scratch)))
		return 0;
	if ((rc = vote_held(s, b, u->user, u->enroll_id, &m, &p)) < 0)
		return rc;
	*held = m.next > p.next ? m.next : p.next;
	if (u->scratch) {
		if (m.scratch_used & u->scratch)
			*verdict = GRANTD__V1__VOTE_VERDICT__VOTE_USED;
		else if ((p.scratch_used & u->scratch) && p.pid != pid)
			*verdict = GRANTD__V1__VOTE_VERDICT__VOTE_PROMISED;
		else
			*verdict = GRANTD__V1__VOTE_VERDICT__VOTE_YES;
	} else {
		/* next is the lowest still acceptable after the use: the use
		 * itself (next - 1) must be at or above what is held */
		if (u->next <= m.next)
			*verdict = GRANTD__V1__VOTE_VERDICT__VOTE_USED;
		else if (u->next < p.next ||
			 (u->next == p.next && p.pid != pid))
			*verdict = GRANTD__V1__VOTE_VERDICT__VOTE_PROMISED;
		else
			*verdict = GRANTD__V1__VOTE_VERDICT__VOTE_YES;
	}
	if (*verdict == GRANTD__V1__VOTE_VERDICT__VOTE_YES)
		promise_put(b, u, &p, pid, site, hlc);
	return 0;
}

/* ---- the node's side ----------------------------------------------------- */

/* A frontend peer: where votes are asked and use records fetched. */
struct vpeer {
	const struct config_peer *cfg;
	void *dealer;
	/* use sync (qualification) */
	struct buf after;       /* the last key taken */
	bool synced;            /* every page taken */
	uint64_t asked_ms;      /* 0: no page asked for */
};

struct proposal {
	uint64_t pid;
	struct vote_use use;
	uint64_t deadline_ms;
	vote_done_fn done;
	void *item;
	bool decided;
	bool self_pending;      /* the writer has not said yet */
	bool self_yes;          /* this site's promise is durable */
	int yes;                /* peers that promised */
	uint32_t answered;      /* bit i: peer i answered (or was not sent) */
	uint32_t unreachable;   /* bit i: could not be sent to */
	int used;               /* peers that said USED or PROMISED */
	struct proposal *next;
};

struct vote {
	const struct config *cfg;
	struct store *store;
	struct writer *writer;
	const struct peer_self *self;
	struct peer_link *link;
	bool majority;
	bool voter;
	bool qualifying;        /* the use sync's last pages are being made
				 * durable */
	char qualified_path[4096];
	struct vpeer peers[CONFIG_MAX_PEERS];
	int npeers;
	struct proposal *props;
	uint64_t accepted, refused, promised, votes_refused;
};

/* A voter's YES waiting for its promise to be durable. */
struct held_reply {
	struct vote *v;
	uint64_t pid;
	uint64_t votes;
	size_t ridlen;
	uint8_t rid[256];
};

bool vote_majority(const struct vote *v)
{
	return v && v->majority;
}

static void send_rep(struct vote *v, const void *rid, size_t ridlen,
		     uint64_t pid, Grantd__V1__VoteVerdict verdict,
		     uint64_t held)
{
	Grantd__V1__PeerMsg m;
	Grantd__V1__VoteRep rep = GRANTD__V1__VOTE_REP__INIT;

	peer_msg_init(v->self, &m);
	rep.pid = pid;
	rep.has_pid = 1;
	rep.verdict = verdict;
	rep.has_verdict = 1;
	rep.next = held;
	rep.has_next = held != 0;
	rep.votes = v->promised;
	rep.has_votes = 1;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VOTE_REP;
	m.vote_rep = &rep;
	if (peer_send(peer_router(v->link), &m, rid, ridlen) < 0)
		log_warn("vote answer not delivered: %s", zmq_strerror(errno));
}

static void held_reply_done(void *item, bool durable)
{
	struct held_reply *h = item;

	if (durable)
		crashpoint("vote-promised"); /* promised, not answered */
	if (durable)
		send_rep(h->v, h->rid, h->ridlen, h->pid,
			 GRANTD__V1__VOTE_VERDICT__VOTE_YES, 0);
	free(h);
}

/* vote_req on the sync ROUTER: judge, promise durably, then answer. */
static void on_vote_req(const struct peer_req *rq, void *payload)
{
	struct vote *v = payload;
	const Grantd__V1__VoteReq *q = rq->m->vote_req;
	Grantd__V1__VoteVerdict verdict = GRANTD__V1__VOTE_VERDICT__VOTE_BAD;
	struct vote_use u;
	uint64_t held = 0, pid, ticket;
	int rc;

	if (vote_use_from_req(&u, &pid, q) < 0 || rq->ridlen > 256) {
		send_rep(v, rq->rid, rq->ridlen, pid, verdict, 0);
		return;
	}
	if (!v->majority || !v->voter) {
		send_rep(v, rq->rid, rq->ridlen, pid,
			 GRANTD__V1__VOTE_VERDICT__VOTE_NOT_VOTER, 0);
		return;
	}
	rc = vote_promise(v->store, writer_batch(v->writer), &u, pid,
			  rq->site, q->has_hlc ? q->hlc : 0, &verdict, &held);
	if (rc < 0) {
		/* no answer: the origin counts this site out at its deadline */
		log_error("vote not decided user=%s peer=%s: %s", u.user,
			  rq->site, gd_strerror(rc));
		return;
	}
	if (verdict != GRANTD__V1__VOTE_VERDICT__VOTE_YES) {
		v->votes_refused++;
		log_info("vote refused user=%s peer=%s verdict=%d", u.user,
			 rq->site, (int)verdict);
		send_rep(v, rq->rid, rq->ridlen, pid, verdict, held);
		return;
	}
	if ((rc = writer_commit(v->writer, &ticket)) < 0) {
		log_error("promise not written user=%s peer=%s: %s", u.user,
			  rq->site, gd_strerror(rc));
		return;
	}
	v->promised++;
	struct held_reply *h = calloc(1, sizeof(*h));
	if (!h)
		abort();
	h->v = v;
	h->pid = pid;
	h->ridlen = rq->ridlen;
	memcpy(h->rid, rq->rid, rq->ridlen);
	/* the answer leaves only once the promise is on disk */
	writer_hold(v->writer, ticket, held_reply_done, h);
}

/* use_sync_req: a page of use records, each the max of mark and promise,
 * in key order over the union of both families' keys. */
static void on_use_sync_req(const struct peer_req *rq, void *payload)
{
	struct vote *v = payload;
	const Grantd__V1__UseSyncReq *q = rq->m->use_sync_req;
	Grantd__V1__PeerMsg m;
	Grantd__V1__UseSyncRep rep = GRANTD__V1__USE_SYNC_REP__INIT;
	struct store_iter *it[2] = { NULL, NULL };
	const char *key[2] = { NULL, NULL };
	size_t klen[2] = { 0, 0 };
	struct buf val[2] = { BUF_INIT, BUF_INIT };
	int more[2] = { 0, 0 };
	uint32_t max = q && q->has_max ? q->max : 0;
	ProtobufCBinaryData *keys = NULL, *vals = NULL;
	size_t n = 0;
	bool done = true;

	if (max > SYNC_PAGE)
		max = SYNC_PAGE;
	peer_msg_init(v->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REP;
	m.use_sync_rep = &rep;
	rep.voter = v->voter;
	rep.has_voter = 1;
	rep.votes = v->promised;
	rep.has_votes = 1;
	if (!q || !v->majority) {
		rep.done = 0;
		rep.has_done = 1;
		peer_reply(rq, &m);
		return;
	}
	keys = calloc(max + 1, sizeof(*keys));
	vals = calloc(max + 1, sizeof(*vals));
	if (!keys || !vals)
		abort();
	static const enum store_cf cfs[2] = { CF_MARKS, CF_PROMISES };
	for (int i = 0; i < 2; i++) {
		const void *a = q->has_after ? (const void *)q->after.data : (const void *)"";
		size_t al = q->has_after ? q->after.len : 0;
		if (store_iter_new_at(&it[i], v->store, NULL, cfs[i], "", 0,
				      a, al) < 0)
			goto out;
		more[i] = store_iter_next(it[i], &key[i], &klen[i], &val[i]);
		/* strictly after: skip the key given */
		if (more[i] == 1 && q->has_after && klen[i] == al &&
		    !memcmp(key[i], a, al))
			more[i] = store_iter_next(it[i], &key[i], &klen[i],
						  &val[i]);
		if (more[i] < 0)
			goto out;
	}
	while (more[0] == 1 || more[1] == 1) {
		if (n >= max) {
			done = false;
			break;
		}
		int c;
		if (more[0] != 1)
			c = 1;
		else if (more[1] != 1)
			c = -1;
		else {
			size_t l = klen[0] < klen[1] ? klen[0] : klen[1];
			c = memcmp(key[0], key[1], l);
			if (!c)
				c = klen[0] < klen[1] ? -1 :
				    klen[0] > klen[1] ? 1 : 0;
		}
		Grantd__V1__Mark out = GRANTD__V1__MARK__INIT;
		const char *k = c <= 0 ? key[0] : key[1];
		size_t kl = c <= 0 ? klen[0] : klen[1];
		if (c <= 0) {
			Grantd__V1__Mark *mk = grantd__v1__mark__unpack(
				NULL, val[0].len, (const uint8_t *)val[0].p);
			if (mk) {
				out.next = mk->next;
				out.scratch_used = mk->scratch_used;
				grantd__v1__mark__free_unpacked(mk, NULL);
			}
		}
		if (c >= 0) {
			Grantd__V1__Promise *pr = grantd__v1__promise__unpack(
				NULL, val[1].len, (const uint8_t *)val[1].p);
			if (pr) {
				if (pr->next > out.next)
					out.next = pr->next;
				out.scratch_used |= pr->scratch_used;
				grantd__v1__promise__free_unpacked(pr, NULL);
			}
		}
		out.has_next = out.has_scratch_used = 1;
		keys[n].len = kl;
		keys[n].data = malloc(kl ? kl : 1);
		vals[n].len = grantd__v1__mark__get_packed_size(&out);
		vals[n].data = malloc(vals[n].len ? vals[n].len : 1);
		if (!keys[n].data || !vals[n].data)
			abort();
		memcpy(keys[n].data, k, kl);
		grantd__v1__mark__pack(&out, vals[n].data);
		n++;
		if (c <= 0)
			more[0] = store_iter_next(it[0], &key[0], &klen[0],
						  &val[0]);
		if (c >= 0)
			more[1] = store_iter_next(it[1], &key[1], &klen[1],
						  &val[1]);
		if (more[0] < 0 || more[1] < 0)
			goto out;
	}
	rep.keys = keys;
	rep.n_keys = n;
	rep.values = vals;
	rep.n_values = n;
	rep.done = done;
	rep.has_done = 1;
	peer_reply(rq, &m);
out:
	for (size_t i = 0; i < n; i++) {
		free(keys[i].data);
		free(vals[i].data);
	}
	free(keys);
	free(vals);
	for (int i = 0; i < 2; i++) {
		store_iter_free(&it[i]);
		buf_free(&val[i]);
	}
}

static bool qualified_file_present(const char *path)
{
	return access(path, F_OK) == 0;
}

/* The file, then its directory, on disk. */
static int qualified_file_write(const char *path, const char *dir)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	static const char text[] =
		"this store holds every token use a majority holds: it "
		"votes (token_quorum = majority)\n";

	if (fd < 0)
		return GD_EIO;
	if (write(fd, text, sizeof(text) - 1) != (ssize_t)sizeof(text) - 1 ||
	    fsync(fd) < 0) {
		close(fd);
		return GD_EIO;
	}
	close(fd);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;
}

int vote_open(struct vote **out, const struct vote_opts *o)
{
	struct vote *v = calloc(1, sizeof(*v));
	int rc = 0;

	if (!v)
		abort();
	*out = NULL;
	v->cfg = o->cfg;
	v->store = o->store;
	v->writer = o->writer;
	v->self = o->self;
	v->link = o->link;
	v->majority = o->cfg->policy.token_quorum == CONFIG_QUORUM_MAJORITY &&
		      o->cfg->role == CONFIG_ROLE_FRONTEND;
	snprintf(v->qualified_path, sizeof(v->qualified_path), "%s/%s",
		 o->data_dir, VOTE_QUALIFIED_FILE);
	if (peer_on(o->link, GRANTD__V1__PEER_MSG__BODY_VOTE_REQ, on_vote_req,
		    v) < 0 ||
	    peer_on(o->link, GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REQ,
		    on_use_sync_req, v) < 0) {
		log_error("cannot register the vote requests");
		free(v);
		return GD_EINVAL;
	}
	if (!v->majority) {
		*out = v;
		return 0;
	}
	for (int i = 0; i < o->cfg->npeers; i++) {
		const struct config_peer *p = &o->cfg->peers[i];
		if (p->role != CONFIG_ROLE_FRONTEND || !p->sync)
			continue;
		struct vpeer *vp = &v->peers[v->npeers];
		vp->cfg = p;
		vp->dealer = peer_curve_client(o->self, ZMQ_DEALER, p->sync,
					       p->public_key, VOTE_MAXMSG);
		if (!vp->dealer) {
			rc = GD_EIO;
			vote_destroy(&v);
			return rc;
		}
		v->npeers++;
	}
	v->voter = qualified_file_present(v->qualified_path);
	if (!v->voter)
		log_warn("not voting until the use records of %d other "
			 "frontend%s are fetched (store %s, no %s)",
			 config_frontends(o->cfg) - config_majority(o->cfg) + 1,
			 config_frontends(o->cfg) - config_majority(o->cfg) ?
				 "s" : "",
			 o->created ? "new" : "restored or never qualified",
			 VOTE_QUALIFIED_FILE);
	*out = v;
	return 0;
}

static void proposal_end(struct vote *v, struct proposal *p,
			 enum vote_end end, const char *why)
{
	(void)v;
	if (p->decided)
		return;
	p->decided = true;
	p->done(p->item, end, why);
}

static void proposals_reap(struct vote *v)
{
	struct proposal **pp = &v->props;

	while (*pp) {
		struct proposal *p = *pp;
		if (p->decided && !p->self_pending) {
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
}

void vote_destroy(struct vote **vp)
{
	struct vote *v = *vp;

	if (!v)
		return;
	for (struct proposal *p = v->props; p; p = p->next)
		proposal_end(v, p, VOTE_END_GONE, NULL);
	/* proposals whose promise the writer still holds are freed by its
	 * hold (writer_destroy ends it with durable=false): leak none, touch
	 * none; mark them orphaned */
	for (struct proposal *p = v->props; p; p = p->next)
		p->item = NULL;
	for (struct proposal *p = v->props, *nx; p; p = nx) {
		nx = p->next;
		if (!p->self_pending)
			free(p);
		else
			p->next = NULL, p->done = NULL;
	}
	for (int i = 0; i < v->npeers; i++)
		if (v->peers[i].dealer)
			zmq_close(v->peers[i].dealer);
	for (int i = 0; i < v->npeers; i++)
		buf_free(&v->peers[i].after);
	free(v);
	*vp = NULL;
}

int vote_pollitems(struct vote *v, zmq_pollitem_t *items, int max)
{
	int k = 0;

	for (int i = 0; v && i < v->npeers && k < max; i++)
		items[k++] = (zmq_pollitem_t){ v->peers[i].dealer, 0,
					       ZMQ_POLLIN, 0 };
	return k;
}

/* Decide p if its votes allow. */
static void proposal_check(struct vote *v, struct proposal *p)
{
	int need = config_majority(v->cfg);
	int yes = p->yes + (p->self_yes ? 1 : 0);
	int open = 0;
	char why[512];

	if (p->decided)
		return;
	if (yes >= need) {
		proposal_end(v, p, VOTE_END_YES, NULL);
		return;
	}
	for (int i = 0; i < v->npeers; i++)
		open += !(p->answered & (1u << i));
	if (yes + open + (p->self_pending ? 1 : 0) >= need)
		return;
	/* this site's own promise, still on its way to disk, is an answer */
	yes += p->self_pending ? 1 : 0;
	if (p->used)
		snprintf(why, sizeof(why),
			 "Token not accepted: another site has already used "
			 "this token or a later one (%d of %d sites agreed, "
			 "%d needed); use the next token. Existing grants "
			 "keep working; pushes are not affected.",
			 yes, config_frontends(v->cfg), need);
	else
		snprintf(why, sizeof(why),
			 "Token not accepted: only %d of %d sites answered, "
			 "%d needed (the others are unreachable or not voting "
			 "yet); try again later with the next token. Existing "
			 "grants keep working; "
			 "pushes are not affected.",
			 yes, config_frontends(v->cfg), need);
	proposal_end(v, p, VOTE_END_NO, why);
}

int vote_propose(struct vote *v, struct store_batch *b,
		 const struct vote_use *u, uint64_t *pid,
		 Grantd__V1__VoteVerdict *verdict, uint64_t *held)
{
	do
		randombytes_buf(pid, sizeof(*pid));
	while (!*pid);
	return vote_promise(v->store, b, u, *pid, v->self->site,
			    clock_wall_ms(), verdict, held);
}

/* The writer's word on this site's own promise: a hold per proposal. */
struct self_hold {
	struct vote *v;
	struct proposal *p;
};

static void self_hold_done(void *item, bool durable)
{
	struct self_hold *h = item;
	struct proposal *p = h->p;
	struct vote *v = h->v;

	free(h);
	if (!p->done) { /* its vote went away first */
		free(p);
		return;
	}
	p->self_pending = false;
	/* a store not qualified may have lost promises it gave: its own
	 * promise is kept, but it is no vote */
	p->self_yes = durable && v->voter;
	proposal_check(v, p);
	proposals_reap(v);
}

void vote_start(struct vote *v, const struct vote_use *u, uint64_t pid,
		uint64_t ticket, vote_done_fn done, void *item)
{
	struct proposal *p = calloc(1, sizeof(*p));
	Grantd__V1__PeerMsg m;
	Grantd__V1__VoteReq q = GRANTD__V1__VOTE_REQ__INIT;

	if (!p)
		abort();
	p->pid = pid;
	p->use = *u;
	p->deadline_ms = clock_mono_ms() +
			 (uint64_t)v->cfg->policy.token_quorum_timeout_ms;
	p->done = done;
	p->item = item;
	p->self_pending = true;
	p->next = v->props;
	v->props = p;
	peer_msg_init(v->self, &m);
	q.pid = pid;
	q.has_pid = 1;
	q.user = p->use.user;
	q.enroll_id = u->enroll_id;
	q.has_enroll_id = 1;
	if (u->next) {
		q.next = u->next;
		q.has_next = 1;
	} else {
		q.scratch = u->scratch;
		q.has_scratch = 1;
	}
	q.hlc = clock_wall_ms();
	q.has_hlc = 1;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VOTE_REQ;
	m.vote_req = &q;
	/* one parallel round: every frontend peer at once */
	for (int i = 0; i < v->npeers; i++) {
		if (peer_send(v->peers[i].dealer, &m, NULL, 0) < 0) {
			p->answered |= 1u << i;
			p->unreachable |= 1u << i;
		}
	}
	struct self_hold *h = calloc(1, sizeof(*h));
	if (!h)
		abort();
	h->v = v;
	h->p = p;
	writer_hold(v->writer, ticket, self_hold_done, h);
	proposals_reap(v);
}

static struct proposal *proposal_find(struct vote *v, uint64_t pid)
{
	for (struct proposal *p = v->props; p; p = p->next)
		if (p->pid == pid && !p->decided)
			return p;
	return NULL;
}

static void on_vote_rep(struct vote *v, int i, const Grantd__V1__VoteRep *r)
{
	struct proposal *p;

	if (!r->has_pid || !(p = proposal_find(v, r->pid)) ||
	    (p->answered & (1u << i)))
		return;
	p->answered |= 1u << i;
	if (r->has_verdict && r->verdict == GRANTD__V1__VOTE_VERDICT__VOTE_YES)
		p->yes++;
	else if (r->has_verdict &&
		 (r->verdict == GRANTD__V1__VOTE_VERDICT__VOTE_USED ||
		  r->verdict == GRANTD__V1__VOTE_VERDICT__VOTE_PROMISED))
		p->used++;
	proposal_check(v, p);
	proposals_reap(v);
}

/* ---- use sync ------------------------------------------------------------ */

static int sync_need(const struct vote *v)
{
	return config_frontends(v->cfg) - config_majority(v->cfg) + 1;
}

static void qualified_hold_done(void *item, bool durable)
{
	struct vote *v = item;

	if (!durable) /* the writer goes away, and v may be gone already */
		return;
	v->qualifying = false;
	if (qualified_file_write(v->qualified_path, v->cfg->data_dir) < 0) {
		log_error("cannot write %s: %s", v->qualified_path,
			  strerror(errno));
		return;
	}
	v->voter = true;
	log_info("voting: the use records of %d frontend%s are held",
		 sync_need(v), sync_need(v) > 1 ? "s" : "");
}

/* Raise this site's promises to a page of another's use records. */
static void on_use_sync_rep(struct vote *v, int i,
			    const Grantd__V1__UseSyncRep *r)
{
	struct vpeer *vp = &v->peers[i];
	struct store_batch *b = writer_batch(v->writer);
	uint64_t ticket;
	int rc = 0;

	if (v->voter || vp->synced || !vp->asked_ms)
		return;
	vp->asked_ms = 0;
	if (r->n_keys != r->n_values)
		return;
	for (size_t k = 0; k < r->n_keys && rc == 0; k++) {
		struct records_span us;
		uint64_t id;
		Grantd__V1__Mark *mk;
		if (records_mark_parse(r->keys[k].data, r->keys[k].len, &us,
				       &id) < 0 ||
		    us.len > NAME_USER_MAX)
			continue;
		mk = grantd__v1__mark__unpack(NULL, r->values[k].len,
					      r->values[k].data);
		if (!mk)
			continue;
		struct vote_use u = { .enroll_id = id };
		memcpy(u.user, us.p, us.len);
		u.user[us.len] = '\0';
		Grantd__V1__Mark m;
		Grantd__V1__Promise p;
		if (name_user_ok(u.user) &&
		    (rc = vote_held(v->store, b, u.user, id, &m, &p)) == 0 &&
		    (mk->next > p.next ||
		     (mk->scratch_used & ~p.scratch_used))) {
			u.next = mk->next;
			u.scratch = mk->scratch_used;
			promise_put(b, &u, &p, p.pid, vp->cfg->site,
				    clock_wall_ms());
		}
		grantd__v1__mark__free_unpacked(mk, NULL);
		buf_reset(&vp->after);
		buf_add(&vp->after, r->keys[k].data, r->keys[k].len);
	}
	if (rc < 0 || writer_commit(v->writer, &ticket) < 0) {
		log_error("use records of peer=%s not kept: %s", vp->cfg->site,
			  gd_strerror(rc < 0 ? rc : GD_EIO));
		return;
	}
	if (!r->has_done || !r->done)
		return;
	vp->synced = true;
	log_info("use records fetched peer=%s", vp->cfg->site);
	int have = 0;
	for (int j = 0; j < v->npeers; j++)
		have += v->peers[j].synced;
	if (have >= sync_need(v) && !v->qualifying) {
		v->qualifying = true;
		writer_hold(v->writer, ticket, qualified_hold_done, v);
	}
}

static void sync_ask(struct vote *v, uint64_t now_ms)
{
	for (int i = 0; i < v->npeers; i++) {
		struct vpeer *vp = &v->peers[i];
		if (vp->synced ||
		    (vp->asked_ms && now_ms - vp->asked_ms < SYNC_RETRY_MS))
			continue;
		Grantd__V1__PeerMsg m;
		Grantd__V1__UseSyncReq q = GRANTD__V1__USE_SYNC_REQ__INIT;
		peer_msg_init(v->self, &m);
		q.max = SYNC_PAGE;
		q.has_max = 1;
		if (vp->after.len) {
			q.after.data = (uint8_t *)vp->after.p;
			q.after.len = vp->after.len;
			q.has_after = 1;
		}
		m.body_case = GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REQ;
		m.use_sync_req = &q;
		if (peer_send(vp->dealer, &m, NULL, 0) == 0)
			vp->asked_ms = now_ms;
	}
}

void vote_handle(struct vote *v)
{
	for (int i = 0; v && i < v->npeers; i++) {
		zmq_msg_t f;
		int budget = 256;
		while (budget-- > 0 && peer_recv_frame(v->peers[i].dealer, &f)) {
			const char *why;
			Grantd__V1__PeerMsg *m = NULL;
			if (zmq_msg_more(&f))
				peer_drain(v->peers[i].dealer, &f);
			else
				m = peer_msg_decode(zmq_msg_data(&f),
						    zmq_msg_size(&f),
						    v->peers[i].cfg->site,
						    &why);
			zmq_msg_close(&f);
			if (!m)
				continue;
			if (m->body_case == GRANTD__V1__PEER_MSG__BODY_VOTE_REP &&
			    m->vote_rep)
				on_vote_rep(v, i, m->vote_rep);
			else if (m->body_case ==
					 GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REP &&
				 m->use_sync_rep)
				on_use_sync_rep(v, i, m->use_sync_rep);
			grantd__v1__peer_msg__free_unpacked(m, NULL);
		}
	}
}

void vote_tick(struct vote *v, uint64_t now_ms)
{
	if (!v || !v->majority)
		return;
	for (struct proposal *p = v->props; p; p = p->next) {
		if (p->decided || now_ms < p->deadline_ms)
			continue;
		/* what did not answer is out: decide on what did */
		for (int i = 0; i < v->npeers; i++)
			p->answered |= 1u << i;
		if (p->self_pending) {
			/* this site's own promise is not durable yet: refuse,
			 * never accept on less than a majority */
			proposal_end(v, p, VOTE_END_NO,
				     "Token not accepted: this site could not "
				     "record the use in time; try again. "
				     "Existing grants keep working; pushes are "
				     "not affected.");
			continue;
		}
		proposal_check(v, p);
	}
	proposals_reap(v);
	if (!v->voter && !v->qualifying)
		sync_ask(v, now_ms);
}

void vote_count(struct vote *v, bool accepted)
{
	if (!v)
		return;
	if (accepted)
		v->accepted++;
	else
		v->refused++;
}

cJSON *vote_status(const struct vote *v)
{
	cJSON *j = cJSON_CreateObject();
	int waiting = 0, synced = 0;

	for (const struct proposal *p = v ? v->props : NULL; p; p = p->next)
		waiting += !p->decided;
	for (int i = 0; v && i < v->npeers; i++)
		synced += v->peers[i].synced;
	cJSON_AddStringToObject(j, "mode", vote_majority(v) ? "majority" :
							      "local");
	cJSON_AddBoolToObject(j, "voter", v && v->majority && v->voter);
	cJSON_AddNumberToObject(j, "frontends",
				v ? config_frontends(v->cfg) : 0);
	cJSON_AddNumberToObject(j, "majority", v ? config_majority(v->cfg) : 0);
	cJSON_AddNumberToObject(j, "accepted", v ? (double)v->accepted : 0);
	cJSON_AddNumberToObject(j, "refused", v ? (double)v->refused : 0);
	cJSON_AddNumberToObject(j, "promised", v ? (double)v->promised : 0);
	cJSON_AddNumberToObject(j, "votes_refused",
				v ? (double)v->votes_refused : 0);
	cJSON_AddNumberToObject(j, "waiting", waiting);
	if (v && v->majority && !v->voter)
		cJSON_AddNumberToObject(j, "use_sync_peers_done", synced);
	return j;
}
