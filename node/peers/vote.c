/*
 * vote.c: the strict token quorum (vote.h), its first room: the rule (a
 * promise only above what this site holds), the voter answering vote_req
 * on the sync ROUTER, the promise counter, and the object's life.  The
 * origin's round is vote_round.c, the use sync that qualifies a store
 * vote_usesync.c; what they share is vote_int.h.
 *
 * Why promises are a family of their own and not marks: a mark is a
 * replicated record that says a use was accepted; a promise says only
 * that this site voted for it, and must never travel (a site's vote is
 * worth something only because it is its own).
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "crashpoint.h"
#include "err.h"
#include "log.h"
#include "otp.h"
#include "records.h"
#include "vote.h"
#include "vote_int.h"
#include "writer.h"
#include "xalloc.h"
#include "banned.h"

/* ---- the rule ------------------------------------------------------------ */

int vote_held(struct store *s,
              struct store_batch *b,
              const char *user,
              uint64_t enroll_id,
              Grantd__V1__Mark *mark,
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

int vote_use_from_req(struct vote_use *u,
                      uint64_t *pid,
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

void vote_promise_put(struct store_batch *b,
                      const struct vote_use *u,
                      const Grantd__V1__Promise *old,
                      uint64_t pid,
                      const char *site,
                      uint64_t hlc)
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
	val = xmalloc(len ? len : 1);
	grantd__v1__promise__pack(&p, val);
	records_key_promise(&k, u->user, u->enroll_id);
	store_put(b, CF_PROMISES, k.p, k.len, val, len);
	free(val);
	buf_free(&k);
}

int vote_promise(struct store *s,
                 struct store_batch *b,
                 const struct vote_use *u,
                 uint64_t pid,
                 const char *site,
                 uint64_t hlc,
                 Grantd__V1__VoteVerdict *verdict,
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
		vote_promise_put(b, u, &p, pid, site, hlc);
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

/* ---- the voter --------------------------------------------------------- */

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

bool vote_voting(const struct vote *v)
{
	return v->majority && v->voter && v->checked;
}

int vote_meta_get(struct store *s, const void *key, size_t klen, uint64_t *out)
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

void vote_meta_put(struct store_batch *b,
                   const void *key,
                   size_t klen,
                   uint64_t val)
{
	uint8_t be[8];

	store_be64(be, val);
	store_put(b, CF_META, key, klen, be, sizeof(be));
}

void vote_seen_key(struct buf *k, const char *site)
{
	buf_reset(k);
	buf_add(k, VOTE_META_SEEN, sizeof(VOTE_META_SEEN)); /* with its \0 */
	buf_add(k, site, strlen(site));
}

uint64_t vote_votes_bump(struct vote *v, struct store_batch *b)
{
	v->votes++;
	vote_meta_put(b, VOTE_META_VOTES, strlen(VOTE_META_VOTES), v->votes);
	return v->votes;
}

bool vote_seen_take(struct vote *v, struct vpeer *vp, uint64_t n)
{
	struct buf k = BUF_INIT;

	if (n < vp->seen) {
		log_error(
		        "promise counter of peer=%s went backwards (was "
		        "%llu, now %llu): a copy of an older store there? its "
		        "votes are not counted until it qualifies again",
		        vp->cfg->site, (unsigned long long)vp->seen,
		        (unsigned long long)n);
		return false;
	}
	if (n == vp->seen)
		return true;
	vp->seen = n;
	vote_seen_key(&k, vp->cfg->site);
	vote_meta_put(writer_batch(v->writer), k.p, k.len, n);
	buf_free(&k);
	return true;
}

static void send_rep(struct vote *v,
                     const void *rid,
                     size_t ridlen,
                     uint64_t pid,
                     Grantd__V1__VoteVerdict verdict,
                     uint64_t held,
                     uint64_t votes)
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
	if (!vote_voting(v)) {
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
	rc = vote_promise(v->store, writer_batch(v->writer), &u, pid, rq->site,
	                  q->has_hlc ? q->hlc : 0, &verdict, &held);
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
	uint64_t votes = vote_votes_bump(v, writer_batch(v->writer));
	if ((rc = writer_commit(v->writer, &ticket)) < 0) {
		log_error("promise not written user=%s peer=%s: %s", u.user,
		          rq->site, gd_strerror(rc));
		return;
	}
	v->promised++;
	struct held_reply *h = xcalloc(1, sizeof(*h));
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
int vote_open(struct vote **out, const struct vote_opts *o)
{
	struct vote *v = xcalloc(1, sizeof(*v));
	int rc = 0;

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
	            vote_usesync_on_req, v) < 0) {
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
	if ((rc = vote_meta_get(v->store, VOTE_META_VOTES,
	                        strlen(VOTE_META_VOTES), &v->votes)) < 0) {
		log_error("cannot read this store's promise counter: %s",
		          gd_strerror(rc));
		vote_destroy(&v);
		return GD_EIO;
	}
	v->votes_durable = v->votes;
	for (int i = 0; i < v->npeers; i++) {
		struct buf k = BUF_INIT;
		vote_seen_key(&k, v->peers[i].cfg->site);
		rc = vote_meta_get(v->store, k.p, k.len, &v->peers[i].seen);
		buf_free(&k);
		if (rc < 0) {
			vote_destroy(&v);
			return GD_EIO;
		}
	}
	vote_usesync_open(v, o->created);
	*out = v;
	return 0;
}

void vote_destroy(struct vote **vp)
{
	struct vote *v = *vp;

	if (!v)
		return;
	vote_round_end_all(v);
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
	cJSON_AddStringToObject(j, "mode",
	                        vote_majority(v) ? "majority" : "local");
	cJSON_AddBoolToObject(j, "voter", v && vote_voting(v));
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
