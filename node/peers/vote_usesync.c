/*
 * vote_usesync.c: the use sync (vote.h, "Qualification" and "The promise
 * counter").  A store restored from an empty disk or a backup may have
 * lost promises it gave: it votes only once it holds the use records
 * (max of mark and promise) of enough frontends that any majority it may
 * have been part of meets them, and VOTE_QUALIFIED_FILE says so.  Here:
 * the pages served on the sync ROUTER (use_sync_req), the pages asked and
 * taken on the DEALERs (use_sync_rep), the file, and the check-in by
 * which each peer confirms, once per start, that this store's promise
 * counter is not behind what it saw.
 *
 * Why pages are merged from both families: a site that promised a use
 * but never saw its mark holds it only as a promise, and a site whose
 * promise was overtaken by a replicated mark only as a mark; either one
 * may be what a majority relied on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "records.h"
#include "vote.h"
#include "vote_int.h"
#include "writer.h"
#include "xalloc.h"
#include "banned.h"

/* ---- the pages served -----------------------------------------------------
 */

/* One family's cursor over a page: key and val hold a record while
 * more is 1 (0 at the end, < 0 an error). */
struct cursor {
	struct store_iter *it;
	const char *key;
	size_t klen;
	struct buf val;
	int more;
};

static int cursor_next(struct cursor *c)
{
	c->more = store_iter_next(c->it, &c->key, &c->klen, &c->val);
	return c->more < 0 ? c->more : 0;
}

/* c over family cf, at the first key strictly after *after. */
static int cursor_open(struct cursor *c,
                       struct store *s,
                       enum store_cf cf,
                       const ProtobufCBinaryData *after)
{
	const void *a = after && after->data ? (const void *)after->data
	                                     : (const void *)"";
	size_t al = after ? after->len : 0;
	int rc;

	if ((rc = store_iter_new_at(&c->it, s, NULL, cf, "", 0, a, al)) < 0)
		return rc;
	if ((rc = cursor_next(c)) < 0)
		return rc;
	/* strictly after: skip the key given */
	if (c->more == 1 && after && c->klen == al && !memcmp(c->key, a, al))
		return cursor_next(c);
	return 0;
}

/* Which comes first: < 0 the mark, > 0 the promise, 0 the same key. */
static int cursor_cmp(const struct cursor *m, const struct cursor *p)
{
	size_t l = m->klen < p->klen ? m->klen : p->klen;
	int c;

	if (m->more != 1)
		return 1;
	if (p->more != 1)
		return -1;
	if ((c = memcmp(m->key, p->key, l)))
		return c;
	return m->klen < p->klen ? -1 : m->klen > p->klen ? 1 : 0;
}

/* Add key k with the max of mark m and promise p (either NULL; one that
 * does not decode counts as none) to pg. */
static void page_add(struct vote_page *pg,
                     const char *k,
                     size_t kl,
                     const struct buf *m,
                     const struct buf *p)
{
	Grantd__V1__Mark out = GRANTD__V1__MARK__INIT;
	ProtobufCBinaryData *key = &pg->keys[pg->n], *val = &pg->vals[pg->n];

	if (m) {
		Grantd__V1__Mark *mk = grantd__v1__mark__unpack(
		        NULL, m->len, (const uint8_t *)m->p);
		if (mk) {
			out.next = mk->next;
			out.scratch_used = mk->scratch_used;
			grantd__v1__mark__free_unpacked(mk, NULL);
		}
	}
	if (p) {
		Grantd__V1__Promise *pr = grantd__v1__promise__unpack(
		        NULL, p->len, (const uint8_t *)p->p);
		if (pr) {
			if (pr->next > out.next)
				out.next = pr->next;
			out.scratch_used |= pr->scratch_used;
			grantd__v1__promise__free_unpacked(pr, NULL);
		}
	}
	out.has_next = out.has_scratch_used = 1;
	key->len = kl;
	key->data = xmemdup(kl ? k : "", kl ? kl : 1);
	val->len = grantd__v1__mark__get_packed_size(&out);
	val->data = xmalloc(val->len ? val->len : 1);
	grantd__v1__mark__pack(&out, val->data);
	pg->n++;
}

int vote_usesync_page(struct vote_page *out,
                      struct store *s,
                      const ProtobufCBinaryData *after,
                      uint32_t max)
{
	static const enum store_cf cfs[2] = {CF_MARKS, CF_PROMISES};
	struct cursor c[2] = {{.val = BUF_INIT}, {.val = BUF_INIT}};
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->done = true;
	out->keys = xcalloc((size_t)max + 1, sizeof(*out->keys));
	out->vals = xcalloc((size_t)max + 1, sizeof(*out->vals));
	for (int i = 0; i < 2 && rc == 0; i++)
		rc = cursor_open(&c[i], s, cfs[i], after);
	while (rc == 0 && (c[0].more == 1 || c[1].more == 1)) {
		if (out->n >= max) {
			out->done = false;
			break;
		}
		int cmp = cursor_cmp(&c[0], &c[1]);
		const struct cursor *first = cmp <= 0 ? &c[0] : &c[1];
		page_add(out, first->key, first->klen,
		         cmp <= 0 ? &c[0].val : NULL,
		         cmp >= 0 ? &c[1].val : NULL);
		if (cmp <= 0)
			rc = cursor_next(&c[0]);
		if (rc == 0 && cmp >= 0)
			rc = cursor_next(&c[1]);
	}
	for (int i = 0; i < 2; i++) {
		store_iter_free(&c[i].it);
		buf_free(&c[i].val);
	}
	return rc;
}

void vote_usesync_page_free(struct vote_page *pg)
{
	for (size_t i = 0; i < pg->n; i++) {
		free(pg->keys[i].data);
		free(pg->vals[i].data);
	}
	free(pg->keys);
	free(pg->vals);
	memset(pg, 0, sizeof(*pg));
}

static struct vpeer *vpeer_of(struct vote *v, const char *site)
{
	for (int i = 0; site && i < v->npeers; i++)
		if (!strcmp(v->peers[i].cfg->site, site))
			return &v->peers[i];
	return NULL;
}

/* use_sync_req: a page of use records, each the max of mark and promise,
 * in key order over the union of both families' keys. */
void vote_usesync_on_req(const struct peer_req *rq, void *payload)
{
	struct vote *v = payload;
	const Grantd__V1__UseSyncReq *q = rq->m->use_sync_req;
	Grantd__V1__PeerMsg m;
	Grantd__V1__UseSyncRep rep = GRANTD__V1__USE_SYNC_REP__INIT;
	struct vote_page pg;
	uint32_t max = q && q->has_max ? q->max : 0;
	int rc;

	if (max > VOTE_SYNC_PAGE)
		max = VOTE_SYNC_PAGE;
	peer_msg_init(v->self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REP;
	m.use_sync_rep = &rep;
	rep.voter = vote_voting(v);
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
	rc = vote_usesync_page(&pg, v->store, q->has_after ? &q->after : NULL,
	                       max);
	if (rc == 0) {
		rep.keys = pg.keys;
		rep.n_keys = pg.n;
		rep.values = pg.vals;
		rep.n_values = pg.n;
		rep.done = pg.done;
		rep.has_done = 1;
		peer_reply(rq, &m);
	} else {
		/* no answer: the asker asks again */
		log_error("use records not served peer=%s: %s", rq->site,
		          gd_strerror(rc));
	}
	vote_usesync_page_free(&pg);
}

/* ---- qualification ------------------------------------------------------- */

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
	          "records of %d other frontends first",
	          site, (unsigned long long)seen, (unsigned long long)v->votes,
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
static void counters_check(struct vote *v,
                           struct vpeer *vp,
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
		         "counter votes=%llu seen=%llu",
		         vp->cfg->site, (unsigned long long)v->votes,
		         (unsigned long long)r->seen_your_votes);
	}
	if (r->has_votes && r->votes > vp->seen &&
	    vote_seen_take(v, vp, r->votes) && writer_commit(v->writer, &t) < 0)
		log_error("promise counter of peer=%s not kept", vp->cfg->site);
}

/* Raise this site's promises to a page of another's use records. */

/* ---- the pages taken ---------------------------------------------------- */

/* Raise the promise of (us, id) in b to mk, the use record site sent. */
static int take_one(struct store *s,
                    struct store_batch *b,
                    const char *site,
                    const struct records_span *us,
                    uint64_t id,
                    const Grantd__V1__Mark *mk)
{
	struct vote_use u = {.enroll_id = id};
	Grantd__V1__Mark m;
	Grantd__V1__Promise p;
	int rc;

	memcpy(u.user, us->p, us->len);
	u.user[us->len] = '\0';
	if (!name_user_ok(u.user))
		return 0;
	if ((rc = vote_held(s, b, u.user, id, &m, &p)) < 0)
		return rc;
	if (mk->next > p.next || (mk->scratch_used & ~p.scratch_used)) {
		u.next = mk->next;
		u.scratch = mk->scratch_used;
		vote_promise_put(b, &u, &p, p.pid, site, clock_wall_ms());
	}
	return 0;
}

int vote_usesync_take(struct store *s,
                      struct store_batch *b,
                      const char *site,
                      const Grantd__V1__UseSyncRep *r,
                      struct buf *after)
{
	int rc = 0;

	for (size_t k = 0; k < r->n_keys && k < r->n_values && rc == 0; k++) {
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
		rc = take_one(s, b, site, &us, id, mk);
		grantd__v1__mark__free_unpacked(mk, NULL);
		buf_reset(after);
		buf_add(after, r->keys[k].data, r->keys[k].len);
	}
	return rc;
}

/* Does vp's last page count toward the peers this store must hold?  A
 * peer not qualified counts only when neither it nor this site knows of
 * any promise it ever made (a new cluster). */
static bool page_counts(struct vpeer *vp, const Grantd__V1__UseSyncRep *r)
{
	if ((r->has_voter && r->voter) ||
	    ((!r->has_votes || r->votes == 0) && vp->seen == 0))
		return true;
	/* its records are kept (a promise raised is never wrong), but a store
	 * not qualified may itself have lost promises: it does not count
	 * toward the peers this one must hold (review N3); asked again from
	 * the start until it votes */
	buf_reset(&vp->after);
	if (!vp->unqualified_logged)
		log_warn("use records of peer=%s not counted: it is not "
		         "a voter (restored, or not qualified yet)",
		         vp->cfg->site);
	vp->unqualified_logged = true;
	return false;
}

/* Enough peers synced: raise the counter above what any peer saw of this
 * store, and write the file once ticket (the last page) is durable. */
static void qualify(struct vote *v, uint64_t ticket)
{
	int have = 0;

	for (int j = 0; j < v->npeers; j++)
		have += v->peers[j].synced;
	if (have < sync_need(v) || v->qualifying)
		return;
	/* above what any peer saw of this store, before it votes */
	if (v->votes_floor > v->votes) {
		v->votes = v->votes_floor;
		vote_meta_put(writer_batch(v->writer), VOTE_META_VOTES,
		              strlen(VOTE_META_VOTES), v->votes);
		if (writer_commit(v->writer, &ticket) < 0) {
			log_error("promise counter not raised");
			return;
		}
	}
	v->qualifying = true;
	writer_hold(v->writer, ticket, qualified_hold_done, v);
}

void vote_usesync_on_rep(struct vote *v, int i, const Grantd__V1__UseSyncRep *r)
{
	struct vpeer *vp = &v->peers[i];
	uint64_t ticket;
	int rc;

	vp->checked_in = true;
	counters_check(v, vp, r);
	if (v->voter || vp->synced || !vp->asked_ms)
		return;
	vp->asked_ms = 0;
	if (r->n_keys != r->n_values)
		return;
	rc = vote_usesync_take(v->store, writer_batch(v->writer), vp->cfg->site,
	                       r, &vp->after);
	if (rc < 0 || writer_commit(v->writer, &ticket) < 0) {
		log_error("use records of peer=%s not kept: %s", vp->cfg->site,
		          gd_strerror(rc < 0 ? rc : GD_EIO));
		return;
	}
	if (!r->has_done || !r->done || !page_counts(vp, r))
		return;
	vp->synced = true;
	log_info("use records fetched peer=%s", vp->cfg->site);
	qualify(v, ticket);
}

static void checkin_ask(struct vote *v, uint64_t now_ms)
{
	for (int i = 0; i < v->npeers; i++) {
		struct vpeer *vp = &v->peers[i];
		if (vp->checked_in ||
		    (vp->checkin_ms &&
		     now_ms - vp->checkin_ms < VOTE_SYNC_RETRY_MS))
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
		if (vp->synced || (vp->asked_ms &&
		                   now_ms - vp->asked_ms < VOTE_SYNC_RETRY_MS))
			continue;
		Grantd__V1__PeerMsg m;
		Grantd__V1__UseSyncReq q = GRANTD__V1__USE_SYNC_REQ__INIT;
		peer_msg_init(v->self, &m);
		q.max = VOTE_SYNC_PAGE;
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

void vote_usesync_tick(struct vote *v, uint64_t now_ms)
{
	checkin_ask(v, now_ms);
	if (!v->voter && !v->qualifying)
		sync_ask(v, now_ms);
}

void vote_usesync_open(struct vote *v, bool created)
{
	v->voter = qualified_file_present(v->qualified_path);
	if (v->voter)
		log_info("voting once a peer confirms this store's promise "
		         "counter votes=%llu",
		         (unsigned long long)v->votes);
	if (!v->voter)
		log_warn("not voting until the use records of %d other "
		         "frontend%s are fetched (store %s, no %s)",
		         sync_need(v), sync_need(v) > 1 ? "s" : "",
		         created ? "new" : "restored or never qualified",
		         VOTE_QUALIFIED_FILE);
}
