/*
 * vote_round.c: the origin's one parallel round (vote.h, "The origin"):
 * vote_req to every frontend peer at once on its DEALER, the answers
 * counted against the majority, this site's own promise counted once the
 * writer says it is durable, the deadline, and the DEALERs made again
 * after a failed handshake.  The DEALERs also carry the use sync's
 * requests; their answers go to vote_usesync.c.
 *
 * Why the origin does not wait in a loop: the writer thread also answers
 * every other request and applies the peers' operations; a proposal is a
 * struct that the answers, the writer's sync and the tick move on.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "linkmon.h"
#include "log.h"
#include "planes.h"
#include "vote.h"
#include "vote_int.h"
#include "writer.h"
#include "xalloc.h"
#include "banned.h"

static void proposal_end(struct vote *v,
                         struct proposal *p,
                         enum vote_end end,
                         const char *why)
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

void vote_round_end_all(struct vote *v)
{
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
}

int vote_pollitems(struct vote *v, zmq_pollitem_t *items, int max)
{
	int k = 0;

	for (int i = 0; v && i < v->npeers && k < max; i++)
		items[k++] =
		        (zmq_pollitem_t){v->peers[i].dealer, 0, ZMQ_POLLIN, 0};
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

int vote_propose(struct vote *v,
                 struct store_batch *b,
                 const struct vote_use *u,
                 uint64_t *pid,
                 Grantd__V1__VoteVerdict *verdict,
                 uint64_t *held)
{
	int rc;

	do
		randombytes_buf(pid, sizeof(*pid));
	while (!*pid);
	rc = vote_promise(v->store, b, u, *pid, v->self->site, clock_wall_ms(),
	                  verdict, held);
	if (rc == 0 && *verdict == GRANTD__V1__VOTE_VERDICT__VOTE_YES)
		v->self_votes = vote_votes_bump(v, b);
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
	p->self_yes = durable && vote_voting(v);
	proposal_check(v, p);
	proposals_reap(v);
}

void vote_start(struct vote *v,
                const struct vote_use *u,
                uint64_t pid,
                uint64_t ticket,
                vote_done_fn done,
                void *item)
{
	struct proposal *p = xcalloc(1, sizeof(*p));
	Grantd__V1__PeerMsg m;
	Grantd__V1__VoteReq q = GRANTD__V1__VOTE_REQ__INIT;

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
	struct self_hold *h = xcalloc(1, sizeof(*h));
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

void vote_round_on_rep(struct vote *v, int i, const Grantd__V1__VoteRep *r)
{
	struct proposal *p;
	bool yes = r->has_verdict &&
	           r->verdict == GRANTD__V1__VOTE_VERDICT__VOTE_YES;
	uint64_t t;

	/* the counter of every YES, also one that comes after its proposal
	 * was decided: a copy of an older store is caught by the highest */
	if (yes) {
		uint64_t before = v->peers[i].seen;
		yes = vote_seen_take(v, &v->peers[i],
		                     r->has_votes ? r->votes : 0);
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

void vote_handle(struct vote *v)
{
	for (int i = 0; v && i < v->npeers; i++) {
		zmq_msg_t f;
		int budget = 256;
		while (budget-- > 0 &&
		       peer_recv_frame(v->peers[i].dealer, &f)) {
			const char *why;
			Grantd__V1__PeerMsg *m = NULL;
			if (zmq_msg_more(&f))
				peer_drain(v->peers[i].dealer, &f);
			else
				m = peer_msg_decode(
				        zmq_msg_data(&f), zmq_msg_size(&f),
				        v->peers[i].cfg->site, &why);
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
				vote_round_on_rep(v, i, m->vote_rep);
			else if (
			        m->body_case ==
			                GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REP &&
			        m->use_sync_rep)
				vote_usesync_on_rep(v, i, m->use_sync_rep);
			grantd__v1__peer_msg__free_unpacked(m, NULL);
		}
	}
}

/* libzmq never retries a DEALER whose handshake failed (linkmon.h): a
 * peer that refused this node's key (a rotation not yet done there) would
 * never be asked again, and a majority could not be reached with it once
 * it takes the key.  Make the DEALER again when its monitor says so; a
 * vote asked on the old one ends at its deadline on what answered, and the
 * check-in and use sync pages are asked again at once.  A DEALER made for
 * a key the peer no longer has in the configuration (a reload: reload.h)
 * is made again at once with the new one. */
static void relink(struct vote *v, uint64_t now_ms)
{
	char what[NAME_SITE_MAX + Z85_KEY_LEN + 48];

	for (int i = 0; i < v->npeers; i++) {
		struct vpeer *vp = &v->peers[i];
		snprintf(what, sizeof(what), "peer=%s socket=vote key=%s",
		         vp->cfg->site, v->self->curve_pub);
		if (!linkmon_stale(&vp->mon, vp->cfg->public_key) &&
		    !linkmon_poll(&vp->mon, now_ms, what))
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
	vote_usesync_tick(v, now_ms);
}
