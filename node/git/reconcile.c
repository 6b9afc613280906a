/*
 * reconcile.c: the reconciler (reconcile.h): the items, one ref brought
 * in line with its record, the losers of LWW races.  Actor thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "gitproc.h"
#include "log.h"
#include "reconcile.h"
#include "records.h"
#include "repos.h"
#include "spool.h"
#include "xalloc.h"
#include "banned.h"

#define WANTS_MAX        GITIO_WANTS_MAX
#define RETRY_MIN_MS     250
#define RETRY_MAX_MS     4000
#define WORK_MAX         256 /* refs checked per loop turn */
#define CONFLICTS_PREFIX "refs/grantd/conflicts/"

enum verdict { V_DONE, V_RETRY, V_NEED };

/* A ref to bring in line with its record: "repo \0 ref \0". */
struct item {
	char *key;
	size_t klen; /* with both NULs */
	uint64_t not_before_ms;
	uint32_t backoff_ms;
	bool waiting; /* its objects are being fetched */
	bool after_fetch; /* it needs a fetch, and waits for the one in
	                   * flight to end: looked at again once no fetch
	                   * is in flight and none is being gathered for
	                   * another repository */
	bool fetched; /* its fetch just ended: it moves after the next
	               * repository's fetch is asked */
};

struct reconcile {
	struct gitio *io;
	struct store *store;
	struct packfetch *pf;
	struct glsync *gs;
	char *hook_path, *conf_path;
	struct item *items;
	size_t nitems, capitems;
	int prefer; /* peer index from reconcile_all, or -1 */
	bool swept; /* the sweep that prefers it has had refs to do */
	/* the tips the last fetch proved connected in repository
	 * verified_repo: a ref of that repository may move onto them
	 * without another check (in another one they may not connect) */
	char verified[WANTS_MAX][OID_HEX + 1];
	size_t nverified;
	char verified_repo[NAME_REPO_MAX + 1];
	char hook_repo[NAME_REPO_MAX + 1]; /* grant-hook last run here, */
	uint64_t hook_ms; /* ... then */
	/* for the debug log: when the last fetch ended, refs_looked when
	 * this look began */
	uint64_t fetch_end_ms, looked0;
};

/* ---- the hook ------------------------------------------------------------ */

/* Has the repository's hook spooled a local push the node has not
 * recorded yet?  Then its refs are left alone, and grant-hook is run
 * (stdin empty; at most once a second) to send it: the node is back. */
static bool spooled(struct reconcile *g, const char *name)
{
	struct buf path = BUF_INIT;
	uint64_t t = clock_mono_ms();
	pid_t pid;
	bool yes;

	gitio_path(g->io, &path, name);
	yes = spool_pending(path.p);
	if (yes && (strcmp(g->hook_repo, name) || t - g->hook_ms > 1000)) {
		pid = repos_run_hook(g->hook_path, g->conf_path, path.p);
		if (pid > 0)
			gitproc_wait(pid);
		snprintf(g->hook_repo, sizeof(g->hook_repo), "%s", name);
		g->hook_ms = t;
	}
	buf_free(&path);
	return yes;
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

void reconcile_fetched(struct reconcile *g,
                       enum packfetch_verdict v,
                       uint64_t t)
{
	bool ok = v == PACKFETCH_OK;

	if (ok) {
		const char(*w)[OID_HEX + 1] =
		        packfetch_wants(g->pf, &g->nverified);
		memcpy(g->verified, w, g->nverified * sizeof(g->verified[0]));
		snprintf(g->verified_repo, sizeof(g->verified_repo), "%s",
		         packfetch_last_repo(g->pf));
	}
	g->fetch_end_ms = t;
	for (size_t i = 0; i < g->nitems; i++) {
		struct item *it = &g->items[i];
		if (it->after_fetch) {
			/* the next repository's fetch starts now, not at the
			 * next look (a rebuild's hundreds of repositories
			 * each waited 0.1 s for it); the ref stays after_fetch
			 * so that it is looked at only until one is gathered */
			it->not_before_ms = 0;
		}
		if (!it->waiting)
			continue;
		it->waiting = false;
		if (ok) {
			it->not_before_ms = 0;
			it->fetched = true;
		} else {
			back_off(it, t);
		}
	}
}

/* Is name a fork whose parent still has refs to bring in (none of them
 * failed yet)?  The fork's objects are then fetched after the parent's:
 * a fork fetched first has no parent's tips to offer as haves, so it
 * would get, and keep, the whole history its parent gets too (a rebuilt
 * site takes the records in key order, and a fork's name may sort before
 * its parent's). */
static bool parent_pending(struct reconcile *g, const char *name)
{
	Grantd__V1__Repo *r;
	bool yes = false;

	if (gitio_repo_record(g->store, name, &r) < 0)
		return false;
	for (size_t i = 0; r->fork_of && *r->fork_of && !yes && i < g->nitems;
	     i++)
		yes = !g->items[i].backoff_ms &&
		      !strcmp(g->items[i].key, r->fork_of);
	grantd__v1__repo__free_unpacked(r, NULL);
	return yes;
}

/* The verdict "fetch hex first", preferably from site origin. */
static enum verdict need_tip(struct reconcile *g,
                             const char *hex,
                             const char *origin,
                             char *need,
                             int *from)
{
	snprintf(need, OID_HEX + 1, "%s", hex);
	*from = gitio_peer_index(g->io, origin);
	return V_NEED;
}

/* May a ref point at hex?  Objects here came from pushes (checked by
 * receive-pack) or from packs whose wants were checked, but a pack may
 * carry more than its wants: a tip that was not a checked want is
 * checked now, so a ref never lands on an incomplete history. */
static bool safe_tip(struct reconcile *g, const char *name, const char *hex)
{
	char one[1][OID_HEX + 1];

	for (size_t i = 0; !strcmp(g->verified_repo, name) && i < g->nverified;
	     i++)
		if (!strcmp(g->verified[i], hex))
			return true;
	struct buf path = BUF_INIT;
	bool ok;

	snprintf(one[0], sizeof(one[0]), "%s", hex);
	gitio_path(g->io, &path, name);
	ok = gitproc_connected(path.p, NULL, (const char(*)[OID_HEX + 1]) one,
	                       1);
	buf_free(&path);
	if (ok)
		return true;
	log_warn("tip not connected here repo=%s tip=%s: fetching it again "
	         "before any ref points at it",
	         name, hex);
	gitio_error(g->io, "%s: tip %s is not connected", name, hex);
	return false;
}

/* Keep or drop the tips that lost an LWW race on this ref.  target is the
 * winner (NULL: the ref is deleted).  V_NEED with *need and *from set when
 * a loser's objects must be fetched first. */
static enum verdict losers(struct reconcile *g,
                           git_repository *repo,
                           const char *name,
                           const char *ref,
                           const git_oid *target,
                           char *need,
                           int *from)
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
		if (gitio_mark_sent(g->io, key, klen))
			continue; /* done, the writer has yet to note it */
		if (git_oid_fromstr(&tip, hex) < 0)
			continue;
		if (!git_odb_exists(odb, &tip)) {
			out = need_tip(g, hex, origin.p, need, from);
			break;
		}
		if (target &&
		    (git_oid_equal(&tip, target) ||
		     git_graph_descendant_of(repo, target, &tip) == 1)) {
			/* the winner builds on it: no conflict */
			gitio_mark(g->io, key, klen, NULL, 0);
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
			gitio_error(g->io, "cannot keep %s in %s: %s", cref.p,
			            name, gitproc_why());
			out = V_RETRY;
			break;
		}
		git_reference_free(out_ref);
		buf_reset(&v);
		records_loser_value(&v, hex, true);
		gitio_mark(g->io, key, klen, v.p, v.len);
		g->io->st->conflicts++;
		log_warn(
		        "push conflict repo=%s ref=%s: the tip %s from site=%s "
		        "lost to a later push; kept as %s",
		        name, ref, hex, origin.p, cref.p);
	}
	store_iter_free(&it);
	git_odb_free(odb);
	buf_free(&prefix);
	buf_free(&v);
	buf_free(&cref);
	return out;
}

/* Is the repository deleted (its record says so)?  Then none of its refs
 * is waited for or fetched: its directory was moved aside, or renamed
 * (repos_follow), and a cached handle on it is let go. */
static bool repo_deleted(struct reconcile *g, const char *name)
{
	Grantd__V1__Repo *r;
	bool yes = gitio_repo_record(g->store, name, &r) == 0 && r->deleted;

	if (r)
		grantd__v1__repo__free_unpacked(r, NULL);
	if (yes && !strcmp(g->io->repo_name, name))
		gitio_close(g->io);
	return yes;
}

/* Bring one ref in line with its record. */
static enum verdict reconcile_one(struct reconcile *g,
                                  const struct item *item,
                                  char *need,
                                  int *from)
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

	g->io->st->refs_looked++;
	if (repo_deleted(g, name)) {
		res = V_DONE;
		goto out;
	}
	if (spooled(g, name))
		goto out;
	rc = store_get(g->store, NULL, CF_REFS, item->key, item->klen - 1, &v);
	if (rc == GD_ENOTFOUND) {
		res = V_DONE;
		goto out;
	}
	if (rc < 0 ||
	    !(rec = grantd__v1__ref__unpack(NULL, v.len,
	                                    (const uint8_t *)v.p)) ||
	    !rec->target)
		goto out;
	if (!(repo = gitio_repo(g->io, name)))
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
			g->io->st->refs_moved++;
			glsync_moved(g->gs, repo, name, ref);
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
		    !strcmp(rec->origin, g->io->self->site) &&
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
				gitio_error(g->io, "cannot move %s in %s: %s",
				            ref, name, gitproc_why());
			goto out;
		}
		g->io->st->refs_moved++;
		log_info("ref moved repo=%s ref=%s to=%s origin=%s", name, ref,
		         rec->target, rec->origin ? rec->origin : "-");
		glsync_moved(g->gs, repo, name, ref);
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

static void
item_add(struct reconcile *g, const char *key, size_t klen, bool dedupe)
{
	if (dedupe)
		for (size_t i = 0; i < g->nitems; i++)
			if (g->items[i].klen == klen &&
			    !memcmp(g->items[i].key, key, klen)) {
				g->items[i].not_before_ms = 0;
				g->items[i].after_fetch = false;
				return;
			}
	GD_GROW(g->items, g->capitems, g->nitems + 1);
	struct item *it = &g->items[g->nitems++];
	*it = (struct item){.klen = klen};
	it->key = xmemdup(key, klen);
}

static void item_del(struct reconcile *g, size_t i)
{
	free(g->items[i].key);
	g->items[i] = g->items[--g->nitems];
}

/* "repo \0 ref \0" ... from the writer. */
static void add_changed(struct reconcile *g, const char *p, size_t len)
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

/* Is key one of the first n items? */
static bool
item_among(const struct reconcile *g, size_t n, const char *key, size_t klen)
{
	for (size_t i = 0; i < n; i++)
		if (g->items[i].klen == klen &&
		    !memcmp(g->items[i].key, key, klen))
			return true;
	return false;
}

/* Every ref record, once: the items waiting for a fetch stay (the fetch
 * ends them), the others are made again from the records.  A waiting
 * ref is not added a second time: its copy would stay for ever when its
 * objects never come (a sync's "look again" during a fetch left montreal
 * with 4 pending refs for 3 records in test_git_rogue). */
static void add_all(struct reconcile *g)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, k = BUF_INIT;
	const char *key;
	size_t klen, nwaiting;

	for (size_t i = g->nitems; i-- > 0;)
		if (!g->items[i].waiting)
			item_del(g, i);
	nwaiting = g->nitems;
	store_iter_new(&it, g->store, NULL, CF_REFS, "", 0);
	while (store_iter_next(it, &key, &klen, &v) > 0) {
		buf_reset(&k);
		buf_add(&k, key, klen);
		if (!item_among(g, nwaiting, k.p, k.len + 1))
			item_add(g, k.p, k.len + 1, false);
	}
	store_iter_free(&it);
	buf_free(&v);
	buf_free(&k);
}

/* Add need to the wants of the fetch being gathered (no twice). */
static void want(char (*wants)[OID_HEX + 1], size_t *n, const char *need)
{
	for (size_t k = 0; k < *n; k++)
		if (!strcmp(wants[k], need))
			return;
	if (*n < WANTS_MAX)
		memcpy(wants[(*n)++], need, OID_HEX + 1);
}

/* No fetch in flight: the forks put off for a parent that has no ref
 * left to bring in (its refs were done later in the same look) are due
 * now.  Returns true when there is one. */
static bool forks_due(struct reconcile *g)
{
	bool any = false;

	for (size_t i = 0; i < g->nitems; i++) {
		struct item *it = &g->items[i];
		if (it->after_fetch && !parent_pending(g, it->key)) {
			it->after_fetch = false;
			it->not_before_ms = 0;
			any = true;
		}
	}
	return any;
}

/* Start the fetch gathered in work(); the refs waiting for it wait no
 * more when it could not start or ended at once. */
static void fetch(struct reconcile *g,
                  const char *repo,
                  const char (*wants)[OID_HEX + 1],
                  size_t n,
                  int from,
                  uint64_t t)
{
	enum packfetch_verdict v;

	log_debug("pack asked repo=%s wants=%zu after_ms=%llu looked=%llu",
	          repo, n, (unsigned long long)(t - g->fetch_end_ms),
	          (unsigned long long)(g->io->st->refs_looked - g->looked0));
	v = packfetch_start(g->pf, repo, wants, n,
	                    g->prefer >= 0 ? g->prefer : from);
	if (v == PACKFETCH_OK || v == PACKFETCH_FAILED) {
		reconcile_fetched(g, v, t);
	} else if (v == PACKFETCH_UNSTARTED) {
		for (size_t i = 0; i < g->nitems; i++)
			if (g->items[i].waiting) {
				g->items[i].waiting = false;
				g->items[i].not_before_ms = t + RETRY_MAX_MS;
			}
	}
}

/* One look at the items (reconcile_work): the fetch it gathers. */
struct look {
	uint64_t t;
	const char *busy; /* the repository being fetched into, or NULL */
	char repo[NAME_REPO_MAX + 1]; /* the fetch gathered, "" none */
	char wants[WANTS_MAX][OID_HEX + 1];
	size_t nwants;
	int from;
	bool more, forks_wait, moved;
};

/* Is it left for a later look (lk->more set when that is the next)? */
static bool later(struct look *lk, struct item *it)
{
	if (it->waiting || it->not_before_ms > lk->t ||
	    (lk->busy && it->after_fetch))
		return true;
	if (it->fetched && !lk->busy) {
		/* the next repository's fetch is asked first, and this ref
		 * moved (a ref write and its fsyncs) while the peer makes
		 * that pack: in the next turn */
		it->fetched = false;
		lk->more = true;
		return true;
	}
	if (*lk->repo && strcmp(it->key, lk->repo)) {
		/* a fetch is gathered for another repository: it is asked
		 * first, and this ref looked at after (while it goes; one
		 * that needs a fetch, after it ends).  A look at every ref
		 * left before each fetch made a rebuild quadratic: 600
		 * repositories waited ~25 ms each between fetches */
		lk->more |= !it->after_fetch;
		return true;
	}
	return false;
}

/* it needs need fetched (from peer index from): into the fetch gathered,
 * or after the one in flight (or its parent's). */
static void needs(struct reconcile *g,
                  struct look *lk,
                  struct item *it,
                  char *need,
                  int from)
{
	if (!lk->busy && (!*lk->repo || !strcmp(lk->repo, it->key)) &&
	    !parent_pending(g, it->key)) {
		snprintf(lk->repo, sizeof(lk->repo), "%s", it->key);
		want(lk->wants, &lk->nwants, need);
		if (lk->from < 0)
			lk->from = from;
		it->waiting = true;
		return;
	}
	lk->forks_wait |= !lk->busy && !*lk->repo;
	it->not_before_ms = lk->t + 100;
	it->after_fetch = true;
}

bool reconcile_work(struct reconcile *g)
{
	struct look lk = {.t = clock_mono_ms(),
	                  .busy = packfetch_repo(g->pf),
	                  .from = -1};
	int done = 0;

	g->looked0 = g->io->st->refs_looked;
	for (size_t i = 0; i < g->nitems;) {
		struct item *it = &g->items[i];
		char need[OID_HEX + 1];
		int from = -1;

		if (later(&lk, it)) {
			i++;
			continue;
		}
		if (done++ == WORK_MAX) {
			lk.more = true;
			break;
		}
		if (lk.busy && !strcmp(it->key, lk.busy)) {
			i++; /* its repository is being fetched into */
			continue;
		}
		/* put off again below only if it still needs a fetch: a
		 * ref left after_fetch in a back-off would have it wiped
		 * when another repository's fetch ends */
		it->after_fetch = false;
		switch (reconcile_one(g, it, need, &from)) {
		case V_DONE:
			item_del(g, i);
			lk.moved = true;
			continue;
		case V_NEED:
			needs(g, &lk, it, need, from);
			break;
		case V_RETRY:
			back_off(it, lk.t);
			break;
		}
		i++;
	}
	if (*lk.repo)
		fetch(g, lk.repo, (const char(*)[OID_HEX + 1]) lk.wants,
		      lk.nwants, lk.from, lk.t);
	/* a fork put off while its parent's refs had yet to move (they move
	 * a turn after their fetch ends) is due once they did */
	if ((lk.forks_wait || lk.moved) && !packfetch_repo(g->pf))
		lk.more |= forks_due(g);
	/* a rebuild's sweep is over once the refs it found are done; asked
	 * of a site just started, it finds none yet: the records the state
	 * transfer brings are its refs */
	if (g->nitems)
		g->swept = true;
	else if (g->swept)
		g->prefer = -1;
	g->io->st->pending = g->nitems;
	return lk.more;
}

void reconcile_changed(struct reconcile *g, const char *p, size_t len)
{
	add_changed(g, p, len);
}

void reconcile_all(struct reconcile *g, int prefer)
{
	/* a plain look (-1: after a catch-up) leaves a rebuild's preference
	 * to the end of its sweep */
	if (prefer >= 0) {
		g->prefer = prefer;
		g->swept = false;
	}
	add_all(g);
}

void reconcile_open(struct reconcile **out, const struct reconcile_opts *o)
{
	struct reconcile *g = xcalloc(1, sizeof(*g));

	g->io = o->io;
	g->store = o->store;
	g->pf = o->fetch;
	g->gs = o->glsync;
	g->hook_path = xstrdup(o->hook_path ? o->hook_path : "");
	g->conf_path = xstrdup(o->conf_path ? o->conf_path : "");
	g->prefer = -1;
	g->fetch_end_ms = clock_mono_ms(); /* the first: since the open */
	*out = g;
}

void reconcile_destroy(struct reconcile **rcp)
{
	struct reconcile *g = *rcp;

	if (!g)
		return;
	for (size_t i = 0; i < g->nitems; i++)
		free(g->items[i].key);
	free(g->items);
	free(g->hook_path);
	free(g->conf_path);
	free(g);
	*rcp = NULL;
}
