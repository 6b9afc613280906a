/*
 * gitrepl.c: the actor that makes repositories on disk follow the ref
 * records: its pair with the writer, the items (refs whose record
 * changed), reconcile and losers.  Fetching packs is packfetch.c, serving
 * them packsrv.c, git's child processes gitproc.c (gitrepl_int.h).  The
 * contract is in gitrepl.h; the design in docs/git-replication.md.
 *
 * Everything below "actor" runs on the actor thread only; the functions
 * at the end (gitrepl_*) run on the writer thread and only touch the
 * writer's end of the pair and the counters the actor copied there.
 *
 * Actor to writer, over the pair (first frame a tag):
 *   P rid body   a frame for a peer, to send on the sync ROUTER
 *   T stats      the counters, each time they changed
 *   L key val    a conflict mark: CF_LOSERS key gets val ("TIP kept")
 *   D key        a conflict mark: CF_LOSERS key goes (no conflict)
 * Writer to actor: C refs (changed), A [site] (look at all), S rid site
 * body (a peer's pack request, credit or error), Q (quit).
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "clock.h"
#include "err.h"
#include "gitrepl_int.h"
#include "log.h"
#include "records.h"
#include "repos.h"
#include "thread.h"
#include "banned.h"

void gitrepl_error(struct gitrepl *g, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g->st.last_error, sizeof(g->st.last_error), fmt, ap);
	va_end(ap);
}

int gitrepl_peer_index(const struct gitrepl *g, const char *site)
{
	for (int i = 0; site && i < g->npeers; i++)
		if (!strcmp(g->peers[i].site, site))
			return i;
	return -1;
}

void gitrepl_path(const struct gitrepl *g, struct buf *out, const char *name)
{
	repos_path(out, g->repo_dir, name);
}

/* ---- messages ----------------------------------------------------------- */

int gitrepl_send(struct gitrepl *g, void *sock, const struct buf *rid,
		 const Grantd__V1__PeerMsg *m)
{
	if (!rid)
		return peer_send(sock, m, NULL, 0);
	/* through the writer, whose ROUTER it is */
	if (zmq_send(g->pair, "P", 1, ZMQ_SNDMORE) < 0)
		return GD_EIO;
	return peer_send(g->pair, m, rid->p, rid->len);
}

void gitrepl_pack_err(struct gitrepl *g, void *sock, const struct buf *rid,
		      uint64_t id, const char *why)
{
	Grantd__V1__PeerMsg m;
	peer_msg_init(g->self, &m);
	Grantd__V1__PackErr e = GRANTD__V1__PACK_ERR__INIT;
	e.has_id = true;
	e.id = id;
	e.why = (char *)why;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_PACK_ERR;
	m.pack_err = &e;
	gitrepl_send(g, sock, rid, &m);
}

/* The counters to the writer, when they changed. */
static void send_stats(struct gitrepl *g)
{
	uint8_t m[1 + sizeof(struct stats)];

	if (!memcmp(&g->st, &g->st_sent, sizeof(g->st)))
		return;
	g->st_sent = g->st;
	m[0] = 'T';
	memcpy(m + 1, &g->st, sizeof(g->st));
	zmq_send(g->pair, m, sizeof(m), 0);
}

/* Was a mark for this CF_LOSERS key sent lately (the writer may not have
 * written it yet)? */
static bool mark_sent(const struct gitrepl *g, const char *key, size_t klen)
{
	for (unsigned i = 0; i < MARKS_RECENT; i++)
		if (g->marked[i].len == klen &&
		    !memcmp(g->marked[i].p, key, klen))
			return true;
	return false;
}

/* Ask the writer to store val (NULL: delete) under CF_LOSERS key: the
 * actor never writes the store. */
static void send_mark(struct gitrepl *g, const char *key, size_t klen,
		      const char *val, size_t vlen)
{
	struct buf *slot = &g->marked[g->nmarked++ % MARKS_RECENT];

	zmq_send(g->pair, val ? "L" : "D", 1, ZMQ_SNDMORE);
	zmq_send(g->pair, key, klen, val ? ZMQ_SNDMORE : 0);
	if (val)
		zmq_send(g->pair, val, vlen, 0);
	buf_reset(slot);
	buf_add(slot, key, klen);
}

/* ---- repositories ------------------------------------------------------- */

git_repository *gitrepl_repo(struct gitrepl *g, const char *name)
{
	struct buf path = BUF_INIT;

	if (g->repo && !strcmp(g->repo_name, name))
		return g->repo;
	git_repository_free(g->repo);
	g->repo = NULL;
	gitrepl_path(g, &path, name);
	if (git_repository_open_bare(&g->repo, path.p) < 0) {
		g->repo = NULL;
		log_debug("repository not openable (yet) repo=%s: %s", name,
			  gitproc_why());
	} else {
		snprintf(g->repo_name, sizeof(g->repo_name), "%s", name);
	}
	buf_free(&path);
	return g->repo;
}

/* The repository's hook kept pushes the node has not recorded yet. */
static bool spool_pending(struct gitrepl *g, const char *name)
{
	struct buf path = BUF_INIT;
	struct dirent *de;
	bool any = false;
	DIR *d;

	gitrepl_path(g, &path, name);
	buf_puts(&path, "/grantd-spool");
	if ((d = opendir(path.p))) {
		while (!any && (de = readdir(d)))
			any = strlen(de->d_name) > 5 &&
			      !strcmp(de->d_name + strlen(de->d_name) - 5,
				      ".refs");
		closedir(d);
	}
	buf_free(&path);
	return any;
}

/* Run grant-hook (stdin empty) in the repository: it sends what earlier
 * hooks spooled while the node could not be reached. */
static void run_hook(struct gitrepl *g, const char *name)
{
	struct buf path = BUF_INIT;
	pid_t pid;

	gitrepl_path(g, &path, name);
	if ((pid = repos_run_hook(g->hook_path, g->conf_path, path.p)) > 0)
		gitproc_wait(pid);
	buf_free(&path);
}

/* ---- making the disk follow the records --------------------------------- */

/* Look at it again later: 0.25 s, doubling to 4 s. */
static void back_off(struct item *it, uint64_t t)
{
	it->backoff_ms = it->backoff_ms ? it->backoff_ms * 2 : RETRY_MIN_MS;
	if (it->backoff_ms > RETRY_MAX_MS)
		it->backoff_ms = RETRY_MAX_MS;
	it->not_before_ms = t + it->backoff_ms;
}


void gitrepl_fetched(struct gitrepl *g, bool ok, uint64_t t)
{
	for (size_t i = 0; i < g->nitems; i++) {
		struct item *it = &g->items[i];
		if (!it->waiting)
			continue;
		it->waiting = false;
		if (ok) {
			it->not_before_ms = 0;
		} else {
			back_off(it, t);
		}
	}
}

/* The verdict "fetch hex first", preferably from site origin. */
static enum verdict need_tip(struct gitrepl *g, const char *hex,
			     const char *origin, char *need, int *from)
{
	snprintf(need, OID_HEX + 1, "%s", hex);
	*from = gitrepl_peer_index(g, origin);
	return V_NEED;
}

/* May a ref point at hex?  Objects here came from pushes (checked by
 * receive-pack) or from packs whose wants were checked, but a pack may
 * carry more than its wants: a tip that was not a checked want is
 * checked now, so a ref never lands on an incomplete history. */
static bool safe_tip(struct gitrepl *g, const char *name, const char *hex)
{
	char one[1][OID_HEX + 1];

	for (size_t i = 0; !strcmp(g->verified_repo, name) &&
			   i < g->nverified; i++)
		if (!strcmp(g->verified[i], hex))
			return true;
	struct buf path = BUF_INIT;
	bool ok;

	snprintf(one[0], sizeof(one[0]), "%s", hex);
	gitrepl_path(g, &path, name);
	ok = gitproc_connected(path.p, NULL,
			       (const char (*)[OID_HEX + 1])one, 1);
	buf_free(&path);
	if (ok)
		return true;
	log_warn("tip not connected here repo=%s tip=%s: fetching it again "
		 "before any ref points at it", name, hex);
	gitrepl_error(g, "%s: tip %s is not connected", name, hex);
	return false;
}

/* Keep or drop the tips that lost an LWW race on this ref.  target is the
 * winner (NULL: the ref is deleted).  V_NEED with *need and *from set when
 * a loser's objects must be fetched first. */
static enum verdict losers(struct gitrepl *g, git_repository *repo,
			   const char *name, const char *ref,
			   const git_oid *target, char *need, int *from)
{
	struct store_iter *it;
	struct buf prefix = BUF_INIT, v = BUF_INIT, cref = BUF_INIT;
	enum verdict out = V_DONE;
	const char *key;
	size_t klen;
	git_odb *odb = NULL;

	buf_add(&prefix, name, strlen(name) + 1);
	buf_add(&prefix, ref, strlen(ref) + 1);
	if (git_repository_odb(&odb, repo) < 0) {
		buf_free(&prefix);
		return V_RETRY;
	}
	store_iter_new(&it, g->store, NULL, CF_LOSERS, prefix.p, prefix.len);
	while (out == V_DONE && store_iter_next(it, &key, &klen, &v) > 0) {
		struct records_span lrepo, lref, origin;
		uint64_t hlc;
		char hex[OID_HEX + 1];
		bool kept;
		git_oid tip;
		git_reference *out_ref = NULL;

		if (records_loser_parse(key, klen, &lrepo, &lref, &origin,
					&hlc) < 0 ||
		    records_loser_value_parse(v.p, v.len, hex, &kept) < 0)
			continue;
		if (kept)
			continue; /* done before */
		if (mark_sent(g, key, klen))
			continue; /* done, the writer has yet to note it */
		if (git_oid_fromstr(&tip, hex) < 0)
			continue;
		if (!git_odb_exists(odb, &tip)) {
			out = need_tip(g, hex, origin.p, need, from);
			break;
		}
		if (target && (git_oid_equal(&tip, target) ||
			       git_graph_descendant_of(repo, target, &tip) == 1)) {
			/* the winner builds on it: no conflict */
			send_mark(g, key, klen, NULL, 0);
			continue;
		}
		if (!safe_tip(g, name, hex)) {
			out = need_tip(g, hex, origin.p, need, from);
			break;
		}
		buf_reset(&cref);
		buf_printf(&cref, CONFLICTS_PREFIX "%s/%s", origin.p, ref);
		if (git_reference_create(&out_ref, repo, cref.p, &tip, 1,
					 "grantd: losing tip of a concurrent "
					 "push") < 0) {
			gitrepl_error(g, "cannot keep %s in %s: %s", cref.p,
				      name, gitproc_why());
			out = V_RETRY;
			break;
		}
		git_reference_free(out_ref);
		buf_reset(&v);
		records_loser_value(&v, hex, true);
		send_mark(g, key, klen, v.p, v.len);
		g->st.conflicts++;
		log_warn("push conflict repo=%s ref=%s: the tip %s from site=%s "
			 "lost to a later push; kept as %s", name, ref, hex,
			 origin.p, cref.p);
	}
	store_iter_free(&it);
	git_odb_free(odb);
	buf_free(&prefix);
	buf_free(&v);
	buf_free(&cref);
	return out;
}

/* Bring one ref in line with its record. */
static enum verdict reconcile(struct gitrepl *g, const struct item *item,
			      char *need, int *from)
{
	const char *name = item->key, *ref = item->key + strlen(name) + 1;
	Grantd__V1__Ref *rec = NULL;
	struct buf v = BUF_INIT;
	git_repository *repo;
	git_reference *out = NULL;
	git_oid disk, target;
	git_odb *odb = NULL;
	enum verdict res = V_RETRY;
	bool have;
	int rc;

	if (spool_pending(g, name)) {
		/* a local push the node has not recorded yet: leave the refs
		 * alone, and have the hook send it (the node is back) */
		uint64_t t = clock_mono_ms();
		if (strcmp(g->hook_repo, name) || t - g->hook_ms > 1000) {
			run_hook(g, name);
			snprintf(g->hook_repo, sizeof(g->hook_repo), "%s",
				 name);
			g->hook_ms = t;
		}
		goto out;
	}
	rc = store_get(g->store, NULL, CF_REFS, item->key, item->klen - 1,
		       &v);
	if (rc == GD_ENOTFOUND) {
		res = V_DONE;
		goto out;
	}
	if (rc < 0 || !(rec = grantd__v1__ref__unpack(
				NULL, v.len, (const uint8_t *)v.p)) ||
	    !rec->target)
		goto out;
	if (!(repo = gitrepl_repo(g, name)))
		goto out; /* not created here yet: its Repo op comes first */
	rc = git_reference_name_to_id(&disk, repo, ref);
	if (rc < 0 && rc != GIT_ENOTFOUND)
		goto out;
	have = rc == 0;
	if (!*rec->target) {
		if (have) {
			if (git_reference_lookup(&out, repo, ref) < 0 ||
			    !git_reference_target(out) ||
			    !git_oid_equal(git_reference_target(out), &disk) ||
			    git_reference_delete(out) < 0)
				goto out; /* moved meanwhile: read again */
			log_info("ref deleted repo=%s ref=%s origin=%s", name,
				 ref, rec->origin ? rec->origin : "-");
			g->st.refs_moved++;
			glsync_moved(g, repo, name, ref);
		}
		res = losers(g, repo, name, ref, NULL, need, from);
		goto out;
	}
	if (git_oid_fromstr(&target, rec->target) < 0)
		goto out;
	if (!have || !git_oid_equal(&disk, &target)) {
		if (git_repository_odb(&odb, repo) < 0)
			goto out;
		if (!git_odb_exists(odb, &target)) {
			res = need_tip(g, rec->target, rec->origin, need, from);
			goto out;
		}
		if (have && rec->origin &&
		    !strcmp(rec->origin, g->self->site) &&
		    git_graph_descendant_of(repo, &disk, &target) == 1) {
			/* a push here went on from this site's own record:
			 * its hook is recording it; never step back */
			res = V_DONE;
			goto out;
		}
		if (!safe_tip(g, name, rec->target)) {
			/* fetch it again: the pack brings what is missing */
			res = need_tip(g, rec->target, rec->origin, need, from);
			goto out;
		}
		rc = git_reference_create_matching(&out, repo, ref, &target,
						   have, have ? &disk : NULL,
						   "grantd: replicated");
		if (rc < 0) {
			if (rc != GIT_EMODIFIED && rc != GIT_EEXISTS &&
			    rc != GIT_ENOTFOUND && rc != GIT_ELOCKED)
				gitrepl_error(g, "cannot move %s in %s: %s",
					      ref, name, gitproc_why());
			goto out;
		}
		g->st.refs_moved++;
		log_info("ref moved repo=%s ref=%s to=%s origin=%s", name, ref,
			 rec->target, rec->origin ? rec->origin : "-");
		glsync_moved(g, repo, name, ref);
	}
	res = losers(g, repo, name, ref, &target, need, from);
out:
	git_reference_free(out);
	git_odb_free(odb);
	if (rec)
		grantd__v1__ref__free_unpacked(rec, NULL);
	buf_free(&v);
	return res;
}

static void item_add(struct gitrepl *g, const char *key, size_t klen,
		     bool dedupe)
{
	if (dedupe)
		for (size_t i = 0; i < g->nitems; i++)
			if (g->items[i].klen == klen &&
			    !memcmp(g->items[i].key, key, klen)) {
				g->items[i].not_before_ms = 0;
				return;
			}
	if (g->nitems == g->capitems) {
		g->capitems = g->capitems ? 2 * g->capitems : 64;
		g->items = realloc(g->items, g->capitems * sizeof(*g->items));
		if (!g->items)
			abort();
	}
	struct item *it = &g->items[g->nitems++];
	*it = (struct item){ .klen = klen };
	if (!(it->key = malloc(klen)))
		abort();
	memcpy(it->key, key, klen);
}

static void item_del(struct gitrepl *g, size_t i)
{
	free(g->items[i].key);
	g->items[i] = g->items[--g->nitems];
}

/* "repo \0 ref \0" ... from the writer. */
static void add_changed(struct gitrepl *g, const char *p, size_t len)
{
	/* small lists are merged; a flood (a catch-up) is taken as is, and
	 * a ref listed twice only costs a second look */
	bool dedupe = g->nitems < 4096;
	size_t off = 0;

	while (off < len) {
		size_t a = strnlen(p + off, len - off);
		if (off + a + 1 >= len)
			break;
		size_t b = strnlen(p + off + a + 1, len - off - a - 1);
		if (off + a + 1 + b + 1 > len)
			break;
		item_add(g, p + off, a + 1 + b + 1, dedupe);
		off += a + 1 + b + 1;
	}
}

static void add_all(struct gitrepl *g)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, k = BUF_INIT;
	const char *key;
	size_t klen;

	for (size_t i = g->nitems; i-- > 0;)
		if (!g->items[i].waiting)
			item_del(g, i);
	store_iter_new(&it, g->store, NULL, CF_REFS, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0) {
		buf_reset(&k);
		buf_add(&k, key, klen);
		item_add(g, k.p, k.len + 1, false);
	}
	store_iter_free(&it);
	buf_free(&v);
	buf_free(&k);
}

/* Check the refs that are due; collect the objects one repository lacks
 * into one fetch.  Returns true when more are due right away. */
static bool work(struct gitrepl *g)
{
	uint64_t t = clock_mono_ms();
	char fetch_repo[NAME_REPO_MAX + 1] = "";
	int fetch_from = -1, done = 0;
	bool more = false;

	for (size_t i = 0; i < g->nitems;) {
		struct item *it = &g->items[i];
		char need[OID_HEX + 1];
		int from = -1;

		if (it->waiting || it->not_before_ms > t) {
			i++;
			continue;
		}
		if (done++ == WORK_MAX) {
			more = true;
			break;
		}
		if (g->f.active && !strcmp(it->key, g->f.repo)) {
			i++; /* its repository is being fetched into */
			continue;
		}
		switch (reconcile(g, it, need, &from)) {
		case V_DONE:
			item_del(g, i);
			continue;
		case V_NEED:
			if (!g->f.active && (!*fetch_repo ||
					     !strcmp(fetch_repo, it->key))) {
				struct fetch *f = &g->f;
				bool dup = false;
				snprintf(fetch_repo, sizeof(fetch_repo), "%s",
					 it->key);
				for (size_t k = 0; k < f->nwants; k++)
					dup |= !strcmp(f->wants[k], need);
				if (!dup && f->nwants < WANTS_MAX)
					memcpy(f->wants[f->nwants++], need,
					       OID_HEX + 1);
				if (fetch_from < 0)
					fetch_from = from;
				it->waiting = true;
				break;
			}
			it->not_before_ms = t + 100; /* after this fetch */
			break;
		case V_RETRY:
			back_off(it, t);
			break;
		}
		i++;
	}
	if (*fetch_repo) {
		packfetch_start(g, fetch_repo, fetch_from);
		if (!g->f.active) /* could not even start */
			for (size_t i = 0; i < g->nitems; i++)
				if (g->items[i].waiting) {
					g->items[i].waiting = false;
					g->items[i].not_before_ms = t +
								    RETRY_MAX_MS;
				}
		g->f.nwants = g->f.active ? g->f.nwants : 0;
	}
	if (!g->nitems)
		g->prefer = -1; /* a rebuild's sweep is over */
	g->st.pending = g->nitems;
	return more;
}

/* ---- the actor's loop --------------------------------------------------- */

/* A peer's pack request, credit or error (S rid site body), which
 * peer.c checked already: decoded again here, where the actor owns what
 * it points into, and handed to the pack server. */
static void pair_serve(struct gitrepl *g, zmq_msg_t *parts)
{
	struct buf rid = BUF_INIT;
	char site[NAME_SITE_MAX + 1];
	size_t sl = zmq_msg_size(&parts[2]);
	const char *why;

	if (sl > NAME_SITE_MAX)
		return;
	memcpy(site, zmq_msg_data(&parts[2]), sl);
	site[sl] = '\0';
	buf_add(&rid, zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]));
	Grantd__V1__PeerMsg *m = peer_msg_decode(
		zmq_msg_data(&parts[3]), zmq_msg_size(&parts[3]), site, &why);
	if (!m)
		log_warn("git peer message dropped peer=%s: %s", site, why);
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_REQ)
		packsrv_request(g, &rid, site, m->pack_req);
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_CREDIT)
		packsrv_credit(g, site, m->pack_credit);
	else if (m->body_case == GRANTD__V1__PEER_MSG__BODY_PACK_ERR)
		packsrv_cancel(g, site, m->pack_err->id);
	if (m)
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	buf_free(&rid);
}

/* One message from the writer. */
static void pair_msg(struct gitrepl *g, uint8_t *chunk)
{
	zmq_msg_t parts[4];
	int n = 0;

	(void)chunk;
	do {
		zmq_msg_init(&parts[n]);
		if (zmq_msg_recv(&parts[n], g->pair, 0) < 0) {
			zmq_msg_close(&parts[n]);
			goto out;
		}
		n++;
	} while (n < 4 && zmq_msg_more(&parts[n - 1]));
	const char *tag = zmq_msg_data(&parts[0]);
	size_t tlen = zmq_msg_size(&parts[0]);
	if (!tlen)
		goto out;
	switch (tag[0]) {
	case 'C':
		add_changed(g, tag + 1, tlen - 1);
		break;
	case 'A': {
		char site[NAME_SITE_MAX + 1] = "";
		if (tlen > 1 && tlen - 1 <= NAME_SITE_MAX)
			memcpy(site, tag + 1, tlen - 1);
		g->prefer = *site ? gitrepl_peer_index(g, site) : -1;
		add_all(g);
		break;
	}
	case 'S':
		if (n == 4)
			pair_serve(g, parts);
		break;
	case 'Q':
		g->quit = true;
		break;
	}
out:
	for (int i = 0; i < n; i++)
		zmq_msg_close(&parts[i]);
}

/* libzmq never retries a DEALER whose handshake failed (linkmon.h): make
 * it again when its monitor says so.  A fetch asked on the old one times
 * out (packfetch_tick) and is asked again. */
static void relink(struct gitrepl *g, uint64_t now_ms)
{
	char what[NAME_SITE_MAX + Z85_KEY_LEN + 48];

	for (int i = 0; i < g->npeers; i++) {
		snprintf(what, sizeof(what), "peer=%s socket=git key=%s",
			 g->peers[i].site, g->self->curve_pub);
		if (!linkmon_poll(&g->mon[i], now_ms, what))
			continue;
		void *s = NULL;
		linkmon_detach(&g->mon[i], g->dealer[i]);
		g->mon[i].retry_at_ms = 0;
		s = peer_curve_client_watched(g->self, ZMQ_DEALER,
					      g->peers[i].sync,
					      g->peers[i].public_key,
					      DEALER_MSG_MAX, &g->mon[i]);
		if (!s) /* logged; the old one stays, tried again later */
			continue;
		zmq_close(g->dealer[i]);
		g->dealer[i] = s;
	}
}

static void *actor(void *arg)
{
	struct gitrepl *g = arg;
	zmq_pollitem_t items[1 + CONFIG_MAX_PEERS + STREAMS_MAX + 1];
	struct stream *polled[STREAMS_MAX];
	uint8_t *chunk = malloc(CHUNK_MAX);
	bool more = false;

	if (!chunk)
		abort();
	while (!g->quit) {
		int k = 0, ns = 0;
		items[k++] = (zmq_pollitem_t){ g->pair, 0, ZMQ_POLLIN, 0 };
		for (int i = 0; i < g->npeers; i++)
			items[k++] = (zmq_pollitem_t){ g->dealer[i], 0,
						       ZMQ_POLLIN, 0 };
		for (int i = 0; i < g->nstreams; i++)
			if (g->streams[i].credit > 0) {
				polled[ns++] = &g->streams[i];
				items[k++] = (zmq_pollitem_t){
					NULL, g->streams[i].fd, ZMQ_POLLIN, 0 };
			}
		/* the admin sync's output (read in glsync_tick) */
		if (g->admin.fd >= 0)
			items[k++] = (zmq_pollitem_t){ NULL, g->admin.fd,
						       ZMQ_POLLIN, 0 };
		/* a sync whose output ended is about to exit: reap it soon,
		 * so that its ms says how long the compile took */
		int wait_ms = more ? 0 :
			      g->admin.pid > 0 && g->admin.fd < 0 ? 5 : 100;
		if (zmq_poll(items, k, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			log_error("gitrepl poll failed: %s",
				  zmq_strerror(errno));
			break;
		}
		/* streams first: polled[] points into g->streams, which
		 * pair_msg may reorder by closing one; closing one here
		 * reorders too, so go from the end */
		for (int i = ns; i-- > 0;)
			if (items[1 + g->npeers + i].revents)
				packsrv_read(g, polled[i], chunk);
		if (items[0].revents)
			for (int b = 0; b < 64 && !g->quit; b++) {
				int ev = 0;
				size_t el = sizeof(ev);
				pair_msg(g, chunk);
				if (zmq_getsockopt(g->pair, ZMQ_EVENTS, &ev,
						   &el) < 0 ||
				    !(ev & ZMQ_POLLIN))
					break;
			}
		for (int i = 0; i < g->npeers; i++) {
			zmq_msg_t msg;
			for (int b = 0; b < 64; b++) {
				zmq_msg_init(&msg);
				if (zmq_msg_recv(&msg, g->dealer[i],
						 ZMQ_DONTWAIT) < 0) {
					zmq_msg_close(&msg);
					break;
				}
				if (!zmq_msg_more(&msg))
					packfetch_dealer(g, i, &msg);
				zmq_msg_close(&msg);
			}
		}
		uint64_t t = clock_mono_ms();
		packsrv_tick(g, t);
		packfetch_tick(g, t);
		relink(g, t);
		more = work(g);
		glsync_tick(g, t);
		send_stats(g);
	}
	glsync_stop(g);
	packsrv_close_all(g);
	packfetch_abort(g);
	git_repository_free(g->repo);
	g->repo = NULL;
	free(chunk);
	return NULL;
}

/* ---- the writer's side -------------------------------------------------- */

static void pair_opts(void *s)
{
	int zero = 0;
	zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
}

static char *copy(const char *s)
{
	char *c = strdup(s ? s : "");
	if (!c)
		abort();
	return c;
}

int gitrepl_start(struct gitrepl **out, const struct gitrepl_opts *o)
{
	struct gitrepl *g = calloc(1, sizeof(*g));

	if (!g)
		abort();
	*out = NULL;
	g->self = o->self;
	g->peers = o->peers;
	g->store = o->store;
	g->fetch_hist = o->fetch_hist;
	g->repo_dir = copy(o->repo_dir);
	g->hook_path = copy(o->hook_path);
	g->conf_path = copy(o->conf_path);
	if (o->gitolite_home) {
		g->gl_home = copy(o->gitolite_home);
		g->gl_program = copy(o->gitolite_program ?
				     o->gitolite_program : "gitolite");
		/* a move of the admin repository that a crash left
		 * uncompiled: compile once at start */
		g->admin.dirty = true;
	}
	g->admin.fd = -1;
	g->prefer = -1;
	/* stream ids unlike those of an earlier run of this node, whose
	 * streams a peer may still hold */
	randombytes_buf(&g->next_id, sizeof(g->next_id));
	g->next_id >>= 1;
	for (int i = 0; i < STREAMS_MAX; i++)
		g->streams[i].fd = -1;
	/* fsync objects and refs before a ref points at them */
	git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, 1);
	snprintf(g->endpoint, sizeof(g->endpoint), "inproc://gitrepl-%p",
		 (void *)g);
	g->main_pair = zmq_socket(o->self->zctx, ZMQ_PAIR);
	g->pair = zmq_socket(o->self->zctx, ZMQ_PAIR);
	if (!g->main_pair || !g->pair)
		goto fail;
	pair_opts(g->main_pair);
	pair_opts(g->pair);
	if (zmq_bind(g->main_pair, g->endpoint) < 0 ||
	    zmq_connect(g->pair, g->endpoint) < 0)
		goto fail;
	for (int i = 0; i < o->npeers && i < CONFIG_MAX_PEERS; i++) {
		const struct config_peer *p = &o->peers[i];
		g->dealer[i] = peer_curve_client_watched(o->self, ZMQ_DEALER,
							 p->sync, p->public_key,
							 DEALER_MSG_MAX,
							 &g->mon[i]);
		if (!g->dealer[i])
			goto fail;
		g->npeers++;
	}
	/* the sockets are handed to the actor: it alone uses them now */
	if (thread_start(&g->thread, "gd-gitrepl", actor, g) != 0)
		goto fail;
	g->started = true;
	*out = g;
	return 0;
fail:
	log_error("cannot start repository replication: %s",
		  zmq_strerror(errno));
	gitrepl_stop(&g);
	return GD_EIO;
}

void gitrepl_stop(struct gitrepl **gp)
{
	struct gitrepl *g = *gp;
	if (!g)
		return;
	if (g->started) {
		zmq_send(g->main_pair, "Q", 1, 0);
		pthread_join(g->thread, NULL);
	}
	for (int i = 0; i < g->npeers; i++) {
		linkmon_detach(&g->mon[i], g->dealer[i]);
		zmq_close(g->dealer[i]);
	}
	if (g->pair)
		zmq_close(g->pair);
	if (g->main_pair)
		zmq_close(g->main_pair);
	for (size_t i = 0; i < g->nitems; i++)
		free(g->items[i].key);
	free(g->items);
	for (unsigned i = 0; i < MARKS_RECENT; i++)
		buf_free(&g->marked[i]);
	buf_free(&g->f.qdir);
	free(g->repo_dir);
	free(g->hook_path);
	free(g->conf_path);
	free(g->gl_home);
	free(g->gl_program);
	buf_free(&g->admin.line);
	free(g);
	*gp = NULL;
}

void *gitrepl_socket(struct gitrepl *g) { return g->main_pair; }

/* One message from the actor (n parts in f) for the writer. */
static int take(struct gitrepl *g, zmq_msg_t *f, int n, void *router,
		struct store_batch *marks)
{
	const char *tag = zmq_msg_data(&f[0]);

	if (zmq_msg_size(&f[0]) < 1)
		return 0;
	switch (tag[0]) {
	case 'P':
		/* ROUTER_MANDATORY: a peer gone means EHOSTUNREACH; a full
		 * queue EAGAIN.  Either way the frame is dropped and the
		 * stream times out at the asker, who asks again. */
		if (n == 3 && router &&
		    (zmq_msg_send(&f[1], router,
				  ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
		     zmq_msg_send(&f[2], router, ZMQ_DONTWAIT) < 0))
			log_debug("pack frame for a peer dropped: %s",
				  zmq_strerror(errno));
		return 0;
	case 'T':
		if (zmq_msg_size(&f[0]) == 1 + sizeof(g->seen))
			memcpy(&g->seen, tag + 1, sizeof(g->seen));
		return 0;
	case 'L':
		if (n != 3)
			return 0;
		store_put(marks, CF_LOSERS, zmq_msg_data(&f[1]),
			  zmq_msg_size(&f[1]), zmq_msg_data(&f[2]),
			  zmq_msg_size(&f[2]));
		return 1;
	case 'D':
		if (n != 2)
			return 0;
		store_del(marks, CF_LOSERS, zmq_msg_data(&f[1]),
			  zmq_msg_size(&f[1]));
		return 1;
	}
	return 0;
}

int gitrepl_pump(struct gitrepl *g, void *router, struct store_batch *marks)
{
	int k = 0;

	for (int b = 0; b < 256; b++) {
		zmq_msg_t f[3];
		int n = 0;
		zmq_msg_init(&f[0]);
		if (zmq_msg_recv(&f[0], g->main_pair, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&f[0]);
			break;
		}
		n = 1;
		/* the rest of a message is there once its first part is */
		while (n < 3 && zmq_msg_more(&f[n - 1])) {
			zmq_msg_init(&f[n]);
			if (zmq_msg_recv(&f[n], g->main_pair, 0) < 0) {
				zmq_msg_close(&f[n]);
				break;
			}
			n++;
		}
		if (zmq_msg_more(&f[n - 1]))
			peer_drain(g->main_pair, &f[n - 1]); /* not ours */
		else
			k += take(g, f, n, router, marks);
		for (int i = 0; i < n; i++)
			zmq_msg_close(&f[i]);
	}
	return k;
}

void gitrepl_changed(struct gitrepl *g, struct buf *refs)
{
	if (!refs->len)
		return;
	uint8_t *p = malloc(refs->len + 1);
	if (!p)
		abort();
	p[0] = 'C';
	memcpy(p + 1, refs->p, refs->len);
	zmq_send(g->main_pair, p, refs->len + 1, 0);
	free(p);
	buf_reset(refs);
}

void gitrepl_all(struct gitrepl *g, const char *prefer)
{
	char m[1 + NAME_SITE_MAX + 1];
	int k = snprintf(m, sizeof(m), "A%s", prefer ? prefer : "");
	zmq_send(g->main_pair, m, (size_t)k, 0);
}

void gitrepl_serve(const struct peer_req *rq, void *payload)
{
	struct gitrepl *g = payload;

	zmq_send(g->main_pair, "S", 1, ZMQ_SNDMORE);
	zmq_send(g->main_pair, rq->rid, rq->ridlen, ZMQ_SNDMORE);
	zmq_send(g->main_pair, rq->site, strlen(rq->site), ZMQ_SNDMORE);
	zmq_send(g->main_pair, rq->frame, rq->len, 0);
}

void gitrepl_status(struct gitrepl *g, cJSON *obj)
{
	const struct stats *st = &g->seen;

	cJSON_AddNumberToObject(obj, "pending_refs", (double)st->pending);
	cJSON_AddNumberToObject(obj, "packs_fetched", (double)st->fetches);
	cJSON_AddNumberToObject(obj, "fetch_failures",
				(double)st->fetch_failures);
	cJSON_AddNumberToObject(obj, "bytes_fetched", (double)st->bytes_in);
	cJSON_AddNumberToObject(obj, "packs_served", (double)st->served);
	cJSON_AddNumberToObject(obj, "bytes_served", (double)st->bytes_out);
	cJSON_AddNumberToObject(obj, "refs_moved", (double)st->refs_moved);
	cJSON_AddNumberToObject(obj, "conflicts_kept", (double)st->conflicts);
	cJSON_AddNumberToObject(obj, "last_fetch_ms",
				(double)st->last_fetch_ms);
	cJSON_AddNumberToObject(obj, "last_fetch_bytes",
				(double)st->last_fetch_bytes);
	cJSON_AddStringToObject(obj, "last_error", st->last_error);
	if (g->gl_program) {
		cJSON_AddNumberToObject(obj, "gitolite_syncs",
					(double)st->gitolite_syncs);
		cJSON_AddNumberToObject(obj, "gitolite_sync_failures",
					(double)st->gitolite_failures);
		cJSON_AddStringToObject(obj, "gitolite_last_error",
					st->gitolite_last_error);
	}
}
