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
#include "linkmon.h"
#include "log.h"
#include "otp.h"
#include "planes.h"
#include "records.h"
#include "vote.h"
#include "writer.h"
#include "banned.h"

#define VOTE_MAXMSG (256 * 1024)
/* CF_META: this store's promise counter, durable with each promise (8,
 * BE), and the highest counter each peer showed ("votes_seen" \0 site) */
#define META_VOTES "votes"
#define META_SEEN "votes_seen"
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

/* The enrollment of (user, id) as this site holds it: *kind, *counter
 * (HOTP) and *period (TOTP); *found false when there is none (not
 * replicated here yet, deleted or replaced).  The secret is wiped. */
static int enroll_held(struct store *s,
                       struct store_batch *b,
                       const char *user,
                       uint64_t id,
                       bool *found,
                       Grantd__V1__OtpKind *kind,
                       uint64_t *counter,
                       unsigned *period)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, b, CF_ENROLL, user, strlen(user), &v);

	*found = false;
	if (rc == GD_ENOTFOUND) {
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto out;
	Grantd__V1__Enrollment *e = grantd__v1__enrollment__unpack(
	        NULL, v.len, (const uint8_t *)v.p);
	if (!e) {
		rc = GD_EPROTO;
		goto out;
	}
	if (!e->deleted && e->id == id) {
		*found = true;
		*kind = e->kind;
		*counter = e->counter;
		*period = e->period ? e->period : 30;
	}
	if (e->secret.data)
		sodium_memzero(e->secret.data, e->secret.len);
	grantd__v1__enrollment__free_unpacked(e, NULL);
out:
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	return rc;
}

int vote_in_reach(struct store *s,
                  struct store_batch *b,
                  const struct vote_use *u,
                  int64_t now,
                  int totp_window,
                  int hotp_lookahead,
                  bool *ok,
                  uint64_t *reach)
{
	Grantd__V1__Mark m;
	Grantd__V1__Promise p;
	Grantd__V1__OtpKind kind = GRANTD__V1__OTP_KIND__OTP_TOTP;
	uint64_t counter = 0, held;
	unsigned period = VOTE_PERIOD_MIN;
	bool found;
	int rc;

	*ok = true;
	*reach = 0;
	if (!u->next) /* one scratch bit: vote_promise bounds it */
		return 0;
	if ((rc = vote_held(s, b, u->user, u->enroll_id, &m, &p)) < 0 ||
	    (rc = enroll_held(s, b, u->user, u->enroll_id, &found, &kind,
	                      &counter, &period)) < 0)
		return rc;
	held = m.next > p.next ? m.next : p.next;
	if (found && kind == GRANTD__V1__OTP_KIND__OTP_HOTP) {
		/* otp_check: next = max(counter, mark) + drift + 1 */
		uint64_t start = counter > held ? counter : held;
		*reach = start + (uint64_t)hotp_lookahead + 1;
	} else {
		/* TOTP (or an enrollment not here yet, bounded by the
		 * shortest step): next = step + 1, step at most now's plus
		 * the window, with the proposer's clock up to
		 * VOTE_SKEW_S ahead of ours */
		int64_t t = now + VOTE_SKEW_S;
		*reach = (uint64_t)(t > 0 ? t : 0) / period +
		         (uint64_t)totp_window + 1;
	}
	*ok = u->next <= *reach;
	return 0;
}

/* ---- the node's side ----------------------------------------------------- */

/* A frontend peer: where votes are asked and use records fetched. */
struct vpeer {
	const struct config_peer *cfg;
	void *dealer;
	struct linkmon mon; /* its handshakes: made again after one
	                     * failed (linkmon.h) */
	/* use sync (qualification) */
	struct buf after;       /* the last key taken */
	bool synced;            /* every page taken, from a voter */
	bool unqualified_logged;
	uint64_t seen;          /* the highest promise counter it showed
				 * (durable: META_SEEN) */
	uint64_t checkin_ms;    /* last check-in asked (use_sync_req, max 0) */
	bool checked_in;        /* it answered one since this start */
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
	uint64_t votes;         /* this store's counter with its promise */
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
	bool checked;           /* a peer confirmed, since this start, that
				 * this store's promise counter is not behind
				 * what it saw (a voter votes only then) */
	uint64_t votes;         /* promises made by this store, ever
				 * (META_VOTES; the last maybe not durable) */
	uint64_t votes_durable;
	uint64_t votes_floor;   /* the highest counter a peer says it saw of
				 * this store */
	uint64_t self_votes;    /* the counter of the last vote_propose */
	char qualified_path[4096];
	struct vpeer peers[CONFIG_MAX_PEERS];
	int npeers;
	struct proposal *props;
	uint64_t accepted, refused, promised, votes_refused;
	bool relinked; /* a DEALER was made again (vote_relinked) */
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

/* Does this store vote now: qualified, and its counter confirmed? */
static bool voting(const struct vote *v)
{
	return v->majority && v->voter && v->checked;
}

static int meta_get_u64(struct store *s, const void *key, size_t klen,
			uint64_t *out)
{
	struct buf v = BUF_INIT;
	int rc = store_get(s, NULL, CF_META, key, klen, &v);

	*out = 0;
	if (rc == 0 && v.len == 8)
		*out = store_get_be64(v.p);
	else if (rc == 0)
		rc = GD_EPROTO;
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

static void meta_put_u64(struct store_batch *b, const void *key, size_t klen,
			 uint64_t val)
{
	uint8_t be[8];

	store_be64(be, val);
	store_put(b, CF_META, key, klen, be, sizeof(be));
}

static void seen_key(struct buf *k, const char *site)
{
	buf_reset(k);
	buf_add(k, META_SEEN, sizeof(META_SEEN)); /* with its \0 */
	buf_add(k, site, strlen(site));
}

/* One more promise of this store, in b with it. */
static uint64_t votes_bump(struct vote *v, struct store_batch *b)
{
	v->votes++;
	meta_put_u64(b, META_VOTES, strlen(META_VOTES), v->votes);
	return v->votes;
}

/* Peer vp showed counter n: remember the highest (durable with the next
 * commit).  Returns false when n is below what it showed before: a copy
 * of an older store of that site (review N7), whose word is not counted. */
static bool seen_take(struct vote *v, struct vpeer *vp, uint64_t n)
{
	struct buf k = BUF_INIT;

	if (n < vp->seen) {
		log_error("promise counter of peer=%s went backwards (was "
			  "%llu, now %llu): a copy of an older store there? its "
			  "votes are not counted until it qualifies again",
			  vp->cfg->site, (unsigned long long)vp->seen,
			  (unsigned long long)n);
		return false;
	}
	if (n == vp->seen)
		return true;
	vp->seen = n;
	seen_key(&k, vp->cfg->site);
	meta_put_u64(writer_batch(v->writer), k.p, k.len, n);
	buf_free(&k);
	return true;
}

static struct vpeer *vpeer_of(struct vote *v, const char *site)
{
	for (int i = 0; site && i < v->npeers; i++)
		if (!strcmp(v->peers[i].cfg->site, site))
			return &v->peers[i];
	return NULL;
}

static void send_rep(struct vote *v, const void *rid, size_t ridlen,
		     uint64_t pid, Grantd__V1__VoteVerdict verdict,
		     uint64_t held, uint64_t votes)
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
	/* on a YES, this store's promise counter with this promise (durable
	 * now): the origin remembers it (review N7) */
	rep.votes = votes;
	rep.has_votes = votes != 0;
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
	if (durable && h->votes > h->v->votes_durable)
		h->v->votes_durable = h->votes;
	if (durable)
		send_rep(h->v, h->rid, h->ridlen, h->pid,
			 GRANTD__V1__VOTE_VERDICT__VOTE_YES, 0, h->votes);
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
		send_rep(v, rq->rid, rq->ridlen, pid, verdict, 0, 0);
		return;
	}
	if (!voting(v)) {
		send_rep(v, rq->rid, rq->ridlen, pid,
			 GRANTD__V1__VOTE_VERDICT__VOTE_NOT_VOTER, 0, 0);
		return;
	}
	bool ok;
	uint64_t reach;
	rc = vote_in_reach(v->store, writer_batch(v->writer), &u,
	                   (int64_t)clock_wall_ms() / 1000,
	                   v->cfg->policy.totp_window,
	                   v->cfg->policy.hotp_lookahead, &ok, &reach);
	if (rc < 0) {
		log_error("vote not decided user=%s peer=%s: %s", u.user,
		          rq->site, gd_strerror(rc));
		return;
	}
	if (!ok) {
		/* no token the proposer could have checked leaves this next:
		 * promising it would refuse every valid token after it */
		v->votes_refused++;
		log_warn("vote refused user=%s peer=%s: next=%llu beyond "
		         "reach=%llu (look-ahead or window)",
		         u.user, rq->site, (unsigned long long)u.next,
		         (unsigned long long)reach);
		send_rep(v, rq->rid, rq->ridlen, pid,
			 GRANTD__V1__VOTE_VERDICT__VOTE_BAD, 0, 0);
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
		send_rep(v, rq->rid, rq->ridlen, pid, verdict, held, 0);
		return;
	}
	uint64_t votes = votes_bump(v, writer_batch(v->writer));
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
	h->votes = votes;
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
	rep.voter = voting(v);
	rep.has_voter = 1;
	rep.votes = v->votes_durable;
	rep.has_votes = 1;
	/* what this site saw of the asker's counter: a copy of an older store
	 * learns here that it is behind (review N7) */
	struct vpeer *asker = vpeer_of(v, rq->site);
	rep.seen_your_votes = asker ? asker->seen : 0;
	rep.has_seen_your_votes = asker != NULL;
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
		vp->dealer = peer_curve_client_watched(o->self, ZMQ_DEALER,
		                                       p->sync, p->public_key,
		                                       VOTE_MAXMSG, &vp->mon);
		if (!vp->dealer) {
			rc = GD_EIO;
			vote_destroy(&v);
			return rc;
		}
		v->npeers++;
	}
	if ((rc = meta_get_u64(v->store, META_VOTES, strlen(META_VOTES),
			       &v->votes)) < 0) {
		log_error("cannot read this store's promise counter: %s",
			  gd_strerror(rc));
		vote_destroy(&v);
		return GD_EIO;
	}
	v->votes_durable = v->votes;
	for (int i = 0; i < v->npeers; i++) {
		struct buf k = BUF_INIT;
		seen_key(&k, v->peers[i].cfg->site);
		rc = meta_get_u64(v->store, k.p, k.len, &v->peers[i].seen);
		buf_free(&k);
		if (rc < 0) {
			vote_destroy(&v);
			return GD_EIO;
		}
	}
	v->voter = qualified_file_present(v->qualified_path);
	if (v->voter)
		log_info("voting once a peer confirms this store's promise "
			 "counter votes=%llu", (unsigned long long)v->votes);
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
		if (v->peers[i].dealer) {
			linkmon_detach(&v->peers[i].mon, v->peers[i].dealer);
			zmq_close(v->peers[i].dealer);
		}
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
	int rc;

	do
		randombytes_buf(pid, sizeof(*pid));
	while (!*pid);
	rc = vote_promise(v->store, b, u, *pid, v->self->site, clock_wall_ms(),
			  verdict, held);
	if (rc == 0 && *verdict == GRANTD__V1__VOTE_VERDICT__VOTE_YES)
		v->self_votes = votes_bump(v, b);
	return rc;
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
	if (durable && p->votes > v->votes_durable)
		v->votes_durable = p->votes;
	/* a store not qualified may have lost promises it gave: its own
	 * promise is kept, but it is no vote */
	p->self_yes = durable && voting(v);
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
	p->votes = v->self_votes;
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
	bool yes = r->has_verdict &&
		   r->verdict == GRANTD__V1__VOTE_VERDICT__VOTE_YES;
	uint64_t t;

	/* the counter of every YES, also one that comes after its proposal
	 * was decided: a copy of an older store is caught by the highest */
	if (yes) {
		uint64_t before = v->peers[i].seen;
		yes = seen_take(v, &v->peers[i], r->has_votes ? r->votes : 0);
		if (v->peers[i].seen != before &&
		    writer_commit(v->writer, &t) < 0)
			log_error("promise counter of peer=%s not kept",
				  v->peers[i].cfg->site);
	}
	if (!r->has_pid || !(p = proposal_find(v, r->pid)) ||
	    (p->answered & (1u << i)))
		return;
	p->answered |= 1u << i;
	if (yes)
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
	v->checked = true; /* it just heard enough voters */
	v->votes_durable = v->votes;
	log_info("voting: the use records of %d frontend%s are held",
		 sync_need(v), sync_need(v) > 1 ? "s" : "");
}

/* This store is a copy of an older one (a VM snapshot, `cp -a` of
 * data_dir): it may have lost promises it gave, so it stops voting and
 * qualifies again from the others' use records (review N7). */
static void unqualify(struct vote *v, const char *site, uint64_t seen)
{
	log_error("not voting: peer=%s saw this store make %llu promises, it "
		  "holds %llu (a copy of an older data_dir?); fetching the use "
		  "records of %d other frontends first", site,
		  (unsigned long long)seen, (unsigned long long)v->votes,
		  sync_need(v));
	if (unlink(v->qualified_path) < 0 && errno != ENOENT)
		log_error("cannot remove %s: %s", v->qualified_path,
			  strerror(errno));
	v->voter = false;
	v->checked = false;
	for (int j = 0; j < v->npeers; j++) {
		v->peers[j].synced = false;
		v->peers[j].asked_ms = 0;
		buf_reset(&v->peers[j].after);
	}
}

/* The counters of a use_sync_rep: what vp saw of this store's, and its
 * own. */
static void counters_check(struct vote *v, struct vpeer *vp,
			   const Grantd__V1__UseSyncRep *r)
{
	uint64_t t;

	if (r->has_seen_your_votes && r->seen_your_votes > v->votes) {
		if (r->seen_your_votes > v->votes_floor)
			v->votes_floor = r->seen_your_votes;
		if (v->voter && !v->qualifying)
			unqualify(v, vp->cfg->site, r->seen_your_votes);
	} else if (r->has_seen_your_votes && v->voter && !v->checked) {
		v->checked = true;
		log_info("voting: peer=%s confirms this store's promise "
			 "counter votes=%llu seen=%llu", vp->cfg->site,
			 (unsigned long long)v->votes,
			 (unsigned long long)r->seen_your_votes);
	}
	if (r->has_votes && r->votes > vp->seen && seen_take(v, vp, r->votes) &&
	    writer_commit(v->writer, &t) < 0)
		log_error("promise counter of peer=%s not kept", vp->cfg->site);
}

/* Raise this site's promises to a page of another's use records. */
static void on_use_sync_rep(struct vote *v, int i,
			    const Grantd__V1__UseSyncRep *r)
{
	struct vpeer *vp = &v->peers[i];
	struct store_batch *b = writer_batch(v->writer);
	uint64_t ticket;
	int rc = 0;

	vp->checked_in = true;
	counters_check(v, vp, r);
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
	/* a peer not qualified counts only when neither it nor this site
	 * knows of any promise it ever made (a new cluster) */
	bool counts = (r->has_voter && r->voter) ||
		      ((!r->has_votes || r->votes == 0) && vp->seen == 0);
	if (!counts) {
		/* its records are kept (a promise raised is never wrong), but
		 * a store not qualified may itself have lost promises: it does
		 * not count toward the peers this one must hold (review N3);
		 * asked again from the start until it votes */
		buf_reset(&vp->after);
		if (!vp->unqualified_logged)
			log_warn("use records of peer=%s not counted: it is not "
				 "a voter (restored, or not qualified yet)",
				 vp->cfg->site);
		vp->unqualified_logged = true;
		return;
	}
	vp->synced = true;
	log_info("use records fetched peer=%s", vp->cfg->site);
	int have = 0;
	for (int j = 0; j < v->npeers; j++)
		have += v->peers[j].synced;
	if (have >= sync_need(v) && !v->qualifying) {
		/* above what any peer saw of this store, before it votes */
		if (v->votes_floor > v->votes) {
			v->votes = v->votes_floor;
			meta_put_u64(writer_batch(v->writer), META_VOTES,
				     strlen(META_VOTES), v->votes);
			if (writer_commit(v->writer, &ticket) < 0) {
				log_error("promise counter not raised");
				return;
			}
		}
		v->qualifying = true;
		writer_hold(v->writer, ticket, qualified_hold_done, v);
	}
}

/* Once per start, each peer's word on this store's promise counter (a
 * use_sync_req for no record): a voter votes only once one confirmed it. */
static void checkin_ask(struct vote *v, uint64_t now_ms)
{
	for (int i = 0; i < v->npeers; i++) {
		struct vpeer *vp = &v->peers[i];
		if (vp->checked_in ||
		    (vp->checkin_ms && now_ms - vp->checkin_ms < SYNC_RETRY_MS))
			continue;
		Grantd__V1__PeerMsg m;
		Grantd__V1__UseSyncReq q = GRANTD__V1__USE_SYNC_REQ__INIT;
		peer_msg_init(v->self, &m);
		q.max = 0;
		q.has_max = 1;
		m.body_case = GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REQ;
		m.use_sync_req = &q;
		if (peer_send(vp->dealer, &m, NULL, 0) == 0)
			vp->checkin_ms = now_ms;
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
			if (planes_answer((int)m->body_case, PLANE_DEALER,
			                  PLANE_FRONTEND) != PLANE_TAKE)
				log_warn("vote answer dropped peer=%s kind=%d: "
				         "not an answer",
				         v->peers[i].cfg->site,
				         (int)m->body_case);
			else if (m->body_case ==
			                 GRANTD__V1__PEER_MSG__BODY_VOTE_REP &&
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

/* libzmq never retries a DEALER whose handshake failed (linkmon.h): a
 * peer that refused this node's key (a rotation not yet done there) would
 * never be asked again, and a majority could not be reached with it once
 * it takes the key.  Make the DEALER again when its monitor says so; a
 * vote asked on the old one ends at its deadline on what answered, and the
 * check-in and use sync pages are asked again at once. */
static void relink(struct vote *v, uint64_t now_ms)
{
	char what[NAME_SITE_MAX + Z85_KEY_LEN + 48];

	for (int i = 0; i < v->npeers; i++) {
		struct vpeer *vp = &v->peers[i];
		snprintf(what, sizeof(what), "peer=%s socket=vote key=%s",
		         vp->cfg->site, v->self->curve_pub);
		if (!linkmon_poll(&vp->mon, now_ms, what))
			continue;
		linkmon_detach(&vp->mon, vp->dealer);
		vp->mon.retry_at_ms = 0;
		void *s = peer_curve_client_watched(
		        v->self, ZMQ_DEALER, vp->cfg->sync, vp->cfg->public_key,
		        VOTE_MAXMSG, &vp->mon);
		if (!s) /* logged; the old one stays, tried again later */
			continue;
		zmq_close(vp->dealer);
		vp->dealer = s;
		vp->checkin_ms = 0;
		vp->asked_ms = 0;
		v->relinked = true;
		log_debug("peer socket made again peer=%s socket=vote",
		          vp->cfg->site);
	}
}

bool vote_relinked(struct vote *v)
{
	bool was = v && v->relinked;

	if (v)
		v->relinked = false;
	return was;
}

void vote_tick(struct vote *v, uint64_t now_ms)
{
	if (!v || !v->majority)
		return;
	relink(v, now_ms);
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
	checkin_ask(v, now_ms);
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
	cJSON_AddBoolToObject(j, "voter", v && voting(v));
	cJSON_AddNumberToObject(j, "votes", v ? (double)v->votes_durable : 0);
	cJSON *seen = cJSON_AddObjectToObject(j, "votes_seen");
	for (int i = 0; v && i < v->npeers; i++)
		cJSON_AddNumberToObject(seen, v->peers[i].cfg->site,
					(double)v->peers[i].seen);
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
