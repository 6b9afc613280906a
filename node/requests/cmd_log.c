/*
 * cmd_log.c: the push log (docs/push-log.md): `grantctl log` (log.page,
 * one page of entries, newest first) and `grantctl log verify`
 * (log.verify, every origin's chain walked, and every origin's
 * transparency log tree recomputed from its leaves: tlogstore.h).
 *
 * Both read committed state on a reader thread (CMD_READS): the log is
 * never written here, only by the push that made an entry (cmd_repo.c)
 * and by replication (ops.c).
 *
 * Entries are kept by origin and number (origin \0 n), not by time, so a
 * page is found by a walk over the family: the matching entries' (hlc,
 * key) are collected and sorted, and only the page's entries are read
 * again and shown.  That is O(entries) per page; an index by time would
 * make it O(page), when logs grow to need it.
 */
#define _GNU_SOURCE /* strptime, timegm */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "dur.h"
#include "err.h"
#include "hlc.h"
#include "log.h"
#include "names.h"
#include "opsig.h"
#include "plheads.h"
#include "pushleaf.h"
#include "pushlog.h"
#include "records.h"
#include "store.h"
#include "tlogstore.h"
#include "tlogwit.h"
#include "xalloc.h"
#include "banned.h"

#define LOG_PAGE_DEFAULT 100
#define LOG_PAGE_MAX 1000

/* A matching entry: its order and its key. */
struct hit {
	uint64_t hlc;
	uint64_t n;
	char origin[65];
	bool fork;
	uint8_t fh[PUSHLOG_HASH_LEN];
};

/* Newest first: (hlc, origin, n) descending. */
static int hit_cmp(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	int c;

	if (x->hlc != y->hlc)
		return x->hlc < y->hlc ? 1 : -1;
	if ((c = strcmp(x->origin, y->origin)))
		return -c;
	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;
}

/* Is hit a older than the cursor c (in the order of hit_cmp, after it)? */
static bool after_cursor(const struct hit *a, const struct hit *c)
{
	return hit_cmp(a, c) > 0;
}

/* "HLC-N-ORIGIN" */
static int cursor_parse(struct hit *c, const char *s)
{
	unsigned long long h, n;
	int used = 0;

	if (sscanf(s, "%llu-%llu-%n", &h, &n, &used) != 2 || !used ||
	    !name_site_ok(s + used))
		return GD_EINVAL;
	c->hlc = h, c->n = n;
	snprintf(c->origin, sizeof(c->origin), "%s", s + used);
	return 0;
}

/* --since T: unix seconds, a date (YYYY-MM-DD, or with THH:MM[:SS], UTC)
 * or a duration before now ("2h", "7d"); into unix ms. */
static int since_parse(int64_t *out_ms, const char *s, uint64_t now_ms)
{
	struct tm tm;
	int64_t d;
	const char *end;

	if (*s && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 12) {
		unsigned long long v;
		if (cmd_parse_uint(s, 999999999999ULL, &v) < 0)
			return GD_EINVAL;
		*out_ms = (int64_t)v * 1000;
		return 0;
	}
	if (dur_parse_ms(&d, s) == 0) {
		*out_ms = (int64_t)now_ms - d;
		return 0;
	}
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%d", &tm);
	if (end && *end == 'T')
		end = strptime(end + 1, "%H:%M", &tm);
	if (end && *end == ':')
		end = strptime(end + 1, "%S", &tm);
	if (!end || *end)
		return GD_EINVAL;
	*out_ms = (int64_t)timegm(&tm) * 1000;
	return 0;
}

struct filter {
	const char *repo;   /* normalised, or NULL */
	const char *user;
	int64_t since_ms;   /* INT64_MIN: none */
	bool before;
	struct hit cursor;
	unsigned long long max;
};

static bool matches(const struct filter *f, const Grantd__V1__PushLogEntry *e)
{
	if (f->repo && (!e->repo || strcmp(f->repo, e->repo)))
		return false;
	if (f->user && (!e->user || strcmp(f->user, e->user)))
		return false;
	if ((int64_t)hlc_ms(e->hlc) < f->since_ms)
		return false;
	return true;
}

static void hash_hex(char out[2 * PUSHLOG_HASH_LEN + 1],
		     const ProtobufCBinaryData *h)
{
	pushlog_hex(out, h->data, h->len);
}

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

static cJSON *entry_json(const Grantd__V1__PushLogEntry *e)
{
	cJSON *o = cJSON_CreateObject(), *refs;
	char t[64], h[2 * PUSHLOG_HASH_LEN + 1];

	cmd_fmt_time(t, sizeof(t), (int64_t)(hlc_ms(e->hlc) / 1000));
	cJSON_AddStringToObject(o, "site", e->origin);
	cJSON_AddNumberToObject(o, "n", (double)e->n);
	cJSON_AddStringToObject(o, "time", t);
	/* as text: an HLC stamp is beyond a double's 53 bits */
	snprintf(t, sizeof(t), "%llu", (unsigned long long)e->hlc);
	cJSON_AddStringToObject(o, "hlc", t);
	cJSON_AddNumberToObject(o, "pushed_ms", (double)e->pushed_ms);
	cJSON_AddStringToObject(o, "user", e->user ? e->user : "");
	cJSON_AddStringToObject(o, "key_fp", e->key_fp ? e->key_fp : "");
	cJSON_AddStringToObject(o, "key_kind", e->key_kind ? e->key_kind : "");
	cJSON_AddStringToObject(o, "client_ip",
				e->client_ip ? e->client_ip : "");
	cJSON_AddStringToObject(o, "factor", e->factor ? e->factor : "");
	cJSON_AddStringToObject(o, "repo", e->repo ? e->repo : "");
	cJSON_AddStringToObject(o, "push_id", e->push_id ? e->push_id : "");
	refs = cJSON_AddArrayToObject(o, "refs");
	for (size_t i = 0; i < e->n_changes; i++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "ref", e->changes[i]->ref);
		cJSON_AddStringToObject(c, "old", e->changes[i]->old);
		cJSON_AddStringToObject(c, "new", e->changes[i]->new_);
		cJSON_AddItemToArray(refs, c);
	}
	hash_hex(h, &e->prev);
	cJSON_AddStringToObject(o, "prev", h);
	hash_hex(h, &e->hash);
	cJSON_AddStringToObject(o, "hash", h);
	/* its transparency log leaf (origin#leaf_index), when it has one,
	 * and the salt of the leaf's address commitment: with client_ip, what
	 * an admin shows to prove the leaf's address (pushleaf.h) */
	if (e->has_leaf_index)
		cJSON_AddNumberToObject(o, "leaf_index", (double)e->leaf_index);
	if (e->addr_salt.len == PUSHLEAF_SALT_LEN) {
		pushlog_hex(h, e->addr_salt.data, e->addr_salt.len);
		cJSON_AddStringToObject(o, "addr_salt", h);
	}
	return o;
}

static void entry_text(struct buf *out, const Grantd__V1__PushLogEntry *e,
		       bool fork)
{
	char t[64];

	cmd_fmt_time(t, sizeof(t), (int64_t)(hlc_ms(e->hlc) / 1000));
	buf_printf(out, "%s  site=%s n=%llu repo=%s user=%s ip=%s key=%s "
		   "kind=%s factor=%s", t, e->origin,
		   (unsigned long long)e->n, or_dash(e->repo),
		   or_dash(e->user), or_dash(e->client_ip), or_dash(e->key_fp),
		   or_dash(e->key_kind), or_dash(e->factor));
	if (e->has_leaf_index)
		buf_printf(out, " leaf=%llu",
			   (unsigned long long)e->leaf_index);
	buf_printf(out, "%s\n", fork ? " fork" : "");
	for (size_t i = 0; i < e->n_changes; i++)
		buf_printf(out, "    %s %s -> %s\n", e->changes[i]->ref,
			   e->changes[i]->old, e->changes[i]->new_);
}

/* args: [--repo R] [--user U] [--since T] [--before CURSOR] [--max N] */
static int parse_args(struct cmd_ctx *x, struct req *r, struct filter *f,
		      char *repo, size_t rlen)
{
	(void)x;
	f->since_ms = INT64_MIN;
	f->max = LOG_PAGE_DEFAULT;
	for (size_t i = 0; i < r->rq->n_args; i += 2) {
		const char *o = r->rq->args[i];
		const char *v = i + 1 < r->rq->n_args ? r->rq->args[i + 1]
						      : NULL;
		if (!v)
			return cmd_bad(r, "%s needs a value (see grantctl "
				       "--help)", o), GD_EINVAL;
		if (!strcmp(o, "--repo")) {
			if (cmd_repo_arg(r, v, repo, rlen) < 0)
				return GD_EINVAL;
			f->repo = repo;
		} else if (!strcmp(o, "--user")) {
			if (!cmd_name_arg(r, v))
				return GD_EINVAL;
			f->user = v;
		} else if (!strcmp(o, "--since")) {
			if (since_parse(&f->since_ms, v, r->now_ms) < 0)
				return cmd_bad(r, "bad --since '%.64s': unix "
					       "seconds, YYYY-MM-DD[THH:MM"
					       "[:SS]] (UTC) or a duration "
					       "ago (2h, 7d)", v), GD_EINVAL;
		} else if (!strcmp(o, "--before")) {
			if (cursor_parse(&f->cursor, v) < 0)
				return cmd_bad(r, "bad --before cursor "
					       "'%.64s'", v), GD_EINVAL;
			f->before = true;
		} else if (!strcmp(o, "--max")) {
			if (cmd_parse_uint(v, LOG_PAGE_MAX, &f->max) < 0 ||
			    !f->max)
				return cmd_bad(r, "bad --max '%.32s' (1 to %d)",
					       v, LOG_PAGE_MAX), GD_EINVAL;
		} else {
			return cmd_bad(r, "unknown option '%.64s' for log "
				       "(see grantctl --help)", o), GD_EINVAL;
		}
	}
	return 0;
}

/* One stored entry of the walk over CF_PUSHLOG (key order: origin, n, its
 * forks): origin NULL for a key of no entry, fork NULL for the entry at
 * origin \0 n, e NULL when the bytes do not decode. */
typedef int (*walk_fn)(void *arg, const char *origin, uint64_t n,
		       const uint8_t *fork, const Grantd__V1__PushLogEntry *e);

static int walk(struct store *s, walk_fn fn, void *arg)
{
	struct store_iter *it = NULL;
	struct buf v = BUF_INIT;
	char origin[65];
	const char *key;
	size_t klen;
	int rc;

	if ((rc = store_iter_new(&it, s, NULL, CF_PUSHLOG, "", 0)) < 0)
		return rc;
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		struct records_span o;
		const uint8_t *fork;
		uint64_t num;
		Grantd__V1__PushLogEntry *e;
		if (records_pushlog_parse(key, klen, &o, &num, &fork) < 0 ||
		    o.len >= sizeof(origin)) {
			if ((rc = fn(arg, NULL, 0, NULL, NULL)) < 0)
				break;
			continue;
		}
		memcpy(origin, o.p, o.len);
		origin[o.len] = '\0';
		e = grantd__v1__push_log_entry__unpack(NULL, v.len,
						       (const uint8_t *)v.p);
		rc = fn(arg, origin, num, fork, e);
		if (e)
			grantd__v1__push_log_entry__free_unpacked(e, NULL);
		if (rc < 0)
			break;
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

struct page {
	struct filter *f;
	struct hit *hits;
	size_t n, cap;
};

static int page_one(void *arg, const char *origin, uint64_t num,
		    const uint8_t *fork, const Grantd__V1__PushLogEntry *e)
{
	struct page *pg = arg;
	struct hit h = { .n = num };

	if (!origin || !e || !matches(pg->f, e))
		return 0; /* log verify names what does not decode */
	h.hlc = e->hlc;
	snprintf(h.origin, sizeof(h.origin), "%s", origin);
	if (fork) {
		h.fork = true;
		memcpy(h.fh, fork, PUSHLOG_HASH_LEN);
	}
	if (pg->f->before && !after_cursor(&h, &pg->f->cursor))
		return 0;
	GD_GROW(pg->hits, pg->cap, pg->n + 1);
	pg->hits[pg->n++] = h;
	return 0;
}

static int cmd_log_page(struct cmd_ctx *x, struct req *r)
{
	struct filter f = { 0 };
	struct page pg = { .f = &f };
	char repo[NAME_REPO_MAX + 1];
	struct buf v = BUF_INIT, k = BUF_INIT;
	size_t shown = 0;
	int rc;

	if (parse_args(x, r, &f, repo, sizeof(repo)) < 0)
		return 0;
	if ((rc = walk(x->p.store, page_one, &pg)) < 0)
		goto done;
	if (pg.n)
		qsort(pg.hits, pg.n, sizeof(*pg.hits), hit_cmp);
	for (size_t i = 0; i < pg.n && shown < f.max; i++) {
		const struct hit *h = &pg.hits[i];
		Grantd__V1__PushLogEntry *e;
		if (h->fork)
			records_key_pushlog_fork(&k, h->origin, h->n, h->fh);
		else
			records_key_pushlog(&k, h->origin, h->n);
		if ((rc = store_get(x->p.store, NULL, CF_PUSHLOG, k.p, k.len,
				    &v)) < 0)
			goto done;
		e = grantd__v1__push_log_entry__unpack(NULL, v.len,
						       (const uint8_t *)v.p);
		if (!e)
			continue;
		if (r->rq->json) {
			cJSON *j = entry_json(e);
			if (h->fork)
				cJSON_AddBoolToObject(j, "fork", true);
			cmd_print_json(r, j);
		} else {
			entry_text(&r->out, e, h->fork);
		}
		grantd__v1__push_log_entry__free_unpacked(e, NULL);
		shown++;
		if (shown == f.max && i + 1 < pg.n)
			snprintf(r->next, sizeof(r->next), "%llu-%llu-%s",
				 (unsigned long long)h->hlc,
				 (unsigned long long)h->n, h->origin);
	}
done:
	free(pg.hits);
	buf_free(&v);
	buf_free(&k);
	return rc;
}

/* The walk of log.verify: the chains, and each chain's end (number and
 * hash) as the walk met them. */
struct check {
	struct pushlog_verify pv;
	struct ops_pushlog_head *v; /* n and hash of each origin's end */
	size_t n, cap;
};

static int check_one(void *arg, const char *origin, uint64_t num,
		     const uint8_t *fork, const Grantd__V1__PushLogEntry *e)
{
	struct check *c = arg;
	struct ops_pushlog_head *end;

	if (!origin) {
		/* a key of no entry: as an undecodable entry */
		pushlog_verify_add(&c->pv, "?", 1, NULL);
		return 0;
	}
	if (fork) {
		pushlog_verify_fork(&c->pv, origin, num, fork, e);
		return 0;
	}
	pushlog_verify_add(&c->pv, origin, num, e);
	if (!c->n || strcmp(c->v[c->n - 1].origin, origin)) {
		GD_GROW(c->v, c->cap, c->n + 1);
		snprintf(c->v[c->n].origin, sizeof(c->v[c->n].origin), "%s",
			 origin);
		c->n++;
	}
	end = &c->v[c->n - 1];
	end->n = num;
	memcpy(end->hash, c->pv.prev, PUSHLOG_HASH_LEN);
	return 0;
}

static const struct ops_pushlog_head *end_of(const struct check *c,
					     const char *origin)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->v[i].origin, origin))
			return &c->v[i];
	return NULL;
}

/* Hold each head a peer reported (plheads.h) against this site's entry of
 * that number: another hash is a break (a peer's entry of the same number
 * kept here as a fork is one already), an entry not here yet none.  The
 * peer of the first such break goes to peer; *n counts the heads held. */
static int check_peers(struct store *s, struct pushlog_verify *pv,
		       char peer[65], int *n)
{
	struct plheads_peer *h = NULL;
	struct buf k = BUF_INIT, v = BUF_INIT;
	int nh = plheads_list(s, &h), rc = 0;

	*n = 0;
	for (int i = 0; i < nh; i++) {
		Grantd__V1__PushLogEntry *e;
		enum pushlog_break was = pv->brk;
		records_key_pushlog(&k, h[i].origin, h[i].n);
		rc = store_get(s, NULL, CF_PUSHLOG, k.p, k.len, &v);
		if (rc == GD_ENOTFOUND)
			continue; /* this site is behind */
		if (rc < 0)
			break;
		e = grantd__v1__push_log_entry__unpack(NULL, v.len,
						       (const uint8_t *)v.p);
		if (!e)
			continue; /* the walk named it */
		(*n)++;
		records_key_pushlog_fork(&k, h[i].origin, h[i].n, h[i].hash);
		if (e->hash.len == PUSHLOG_HASH_LEN &&
		    store_get(s, NULL, CF_PUSHLOG, k.p, k.len, &v) ==
			    GD_ENOTFOUND &&
		    pushlog_verify_peer(pv, h[i].origin, h[i].n, e->hash.data,
					h[i].hash) != PUSHLOG_OK &&
		    was == PUSHLOG_OK)
			snprintf(peer, 65, "%s", h[i].peer);
		grantd__v1__push_log_entry__free_unpacked(e, NULL);
		rc = 0;
	}
	free(h);
	buf_free(&k);
	buf_free(&v);
	return nh < 0 ? nh : rc == GD_ENOTFOUND ? 0 : rc;
}

/* The chains' part of log.verify's JSON: counts, breaks by kind, the
 * first break (its peer, its two hashes h0 and h1). */
static cJSON *chains_json(const struct pushlog_verify *pv,
                          int npeer,
                          const char *peer,
                          const char *h0,
                          const char *h1)
{
	cJSON *j = cJSON_CreateObject();

	cJSON_AddNumberToObject(j, "entries", (double)pv->entries);
	cJSON_AddNumberToObject(j, "sites", pv->sites);
	cJSON_AddNumberToObject(j, "forks", (double)pv->forks);
	cJSON_AddNumberToObject(j, "peer_heads", npeer);
	cJSON_AddBoolToObject(j, "intact", pv->brk == PUSHLOG_OK);
	cJSON *all = cJSON_AddObjectToObject(j, "breaks");
	for (int i = PUSHLOG_OK + 1; i < PUSHLOG__COUNT; i++)
		if (pv->nbrk[i])
			cJSON_AddNumberToObject(all, pushlog_break_name(i),
			                        (double)pv->nbrk[i]);
	if (pv->brk != PUSHLOG_OK) {
		cJSON *b = cJSON_AddObjectToObject(j, "break");
		cJSON_AddStringToObject(b, "site", pv->brk_site);
		cJSON_AddNumberToObject(b, "n", (double)pv->brk_n);
		cJSON_AddStringToObject(b, "what", pushlog_break_text(pv->brk));
		if (*peer)
			cJSON_AddStringToObject(b, "peer", peer);
		if (pv->brk_hashes) {
			cJSON *hs = cJSON_AddArrayToObject(b, "hashes");
			cJSON_AddItemToArray(hs, cJSON_CreateString(h0));
			cJSON_AddItemToArray(hs, cJSON_CreateString(h1));
		}
	}
	return j;
}

/* The transparency log's part of log.verify's JSON: leaves, forks, each
 * origin's tree (size, root recomputed from its leaves), the break. */
static void tlog_json(cJSON *j, const struct tlogstore_verify *tv)
{
	cJSON *o = cJSON_AddObjectToObject(j, "tlog");
	cJSON *trees = cJSON_AddArrayToObject(o, "trees");
	char hex[2 * TLOG_HASH_LEN + 1];

	cJSON_AddNumberToObject(o, "leaves", (double)tv->leaves);
	cJSON_AddNumberToObject(o, "forks", (double)tv->forks);
	cJSON_AddBoolToObject(o, "intact", tv->brk == TLOGSTORE_OK);
	for (size_t i = 0; i < tv->ntrees; i++) {
		const struct tlogstore_tree *t = &tv->trees[i];
		cJSON *to = cJSON_CreateObject();
		cJSON_AddStringToObject(to, "site", t->origin);
		cJSON_AddNumberToObject(to, "size", (double)t->size);
		cJSON_AddNumberToObject(to, "forks", (double)t->forks);
		pushlog_hex(hex, t->root.b, TLOG_HASH_LEN);
		cJSON_AddStringToObject(to, "root", hex);
		cJSON_AddItemToArray(trees, to);
	}
	if (tv->brk != TLOGSTORE_OK) {
		cJSON *b = cJSON_AddObjectToObject(o, "break");
		cJSON_AddStringToObject(b, "site", tv->brk_site);
		cJSON_AddNumberToObject(b, "index", (double)tv->brk_at);
		cJSON_AddStringToObject(b, "what",
					tlogstore_break_text(tv->brk));
	}
}

/* The answer's tree part: refused (1) at the first break; an intact log
 * adds nothing to the text answer (scripts read its one line), its trees
 * are in the JSON one (tlog_json). */
static int tlog_answer(struct req *r, const struct tlogstore_verify *tv)
{
	if (tv->brk != TLOGSTORE_OK) {
		log_warn("transparency log broken site=%s index=%llu: %s",
			 tv->brk_site, (unsigned long long)tv->brk_at,
			 tlogstore_break_text(tv->brk));
		cmd_refuse(r, "transparency log: tree of site %s broken at "
			   "leaf %llu: %s (%llu leaves from %zu site%s "
			   "walked)", tv->brk_site,
			   (unsigned long long)tv->brk_at,
			   tlogstore_break_text(tv->brk),
			   (unsigned long long)tv->leaves, tv->ntrees,
			   tv->ntrees == 1 ? "" : "s");
		return 1;
	}
	return 0;
}

/* The kept checkpoints (tlogwit_verify_kept), against this site's own
 * verifier key (from its key file, as `grantctl log key` makes it; its
 * secret wiped at once) and the peers' keys: refused (1) at the first
 * failure, after the lines of every origin. */
static int kept_answer(struct cmd_ctx *x, struct req *r, cJSON *tlog)
{
	const struct config *cfg = x->p.cfg;
	struct opsig_signer sg;
	struct note_vkey own;
	struct buf why = BUF_INIT, err = BUF_INIT;
	bool have = opsig_signer_load(&sg, cfg->secret_key, cfg->host,
	                              cfg->site, &err) == 0;
	int n;

	if (have) {
		note_skey_vkey(&own, &sg.key);
		opsig_signer_wipe(&sg);
	}
	n = tlogwit_verify_kept(&why, tlog, tlog ? NULL : &r->out, x->p.store,
	                        cfg, have ? &own : NULL);
	if (n > 0) {
		log_warn("transparency log: %s", why.p);
		cmd_refuse(r, "transparency log: %s (%d failure%s)", why.p, n,
		           n == 1 ? "" : "s");
	}
	buf_free(&why);
	buf_free(&err);
	return n < 0 ? n : 0;
}

/* Walk every chain, then hold each origin's end against the head this
 * site recorded (ops_pushlog_heads): entries removed from the end of a
 * chain leave no gap, but a head beyond it; an end rewritten, a head of
 * another hash. */
static int cmd_log_verify(struct cmd_ctx *x, struct req *r)
{
	static const uint8_t none[PUSHLOG_HASH_LEN];
	struct check c = { 0 };
	struct pushlog_verify *pv = &c.pv;
	struct ops_pushlog_head *heads = NULL;
	struct tlogstore_verify tv;
	char h0[2 * PUSHLOG_HASH_LEN + 1], h1[2 * PUSHLOG_HASH_LEN + 1];
	char peer[65] = "", ptxt[80] = "";
	int rc, nheads = 0, npeer = 0;

	pushlog_verify_init(pv);
	if ((rc = tlogstore_verify(&tv, x->p.store)) < 0)
		goto done;
	rc = walk(x->p.store, check_one, &c);
	if (rc >= 0 && (nheads = ops_pushlog_heads(&heads, x->p.store)) < 0)
		rc = nheads;
	for (int i = 0; rc >= 0 && i < nheads; i++) {
		const struct ops_pushlog_head *end = end_of(&c, heads[i].origin);
		pushlog_verify_head(pv, heads[i].origin, end ? end->n : 0,
				    end ? end->hash : none, heads[i].n,
				    heads[i].hash);
	}
	free(heads);
	free(c.v);
	if (rc >= 0)
		rc = check_peers(x->p.store, pv, peer, &npeer);
	if (rc < 0)
		goto done;
	if (pv->brk_hashes) {
		pushlog_hex(h0, pv->brk_hash[0], PUSHLOG_HASH_LEN);
		pushlog_hex(h1, pv->brk_hash[1], PUSHLOG_HASH_LEN);
	}
	if (r->rq->json) {
		cJSON *j = chains_json(pv, npeer, peer, h0, h1);
		tlog_json(j, &tv);
		if ((rc = kept_answer(x, r, cJSON_GetObjectItem(j, "tlog"))) <
		    0) {
			cJSON_Delete(j);
			goto done;
		}
		cmd_print_json(r, j);
	}
	if (*peer)
		snprintf(ptxt, sizeof(ptxt), " (peer %s)", peer);
	if (pv->brk != PUSHLOG_OK) {
		log_warn("push log chain broken site=%s n=%llu: %s%s%s%s%s%s",
			 pv->brk_site, (unsigned long long)pv->brk_n,
			 pushlog_break_text(pv->brk), ptxt,
			 pv->brk_hashes ? " hash=" : "",
			 pv->brk_hashes ? h0 : "",
			 pv->brk_hashes ? " hash=" : "",
			 pv->brk_hashes ? h1 : "");
		rc = cmd_refuse(r, "push log: chain of site %s broken at "
				  "entry %llu: %s%s%s%s%s%s (%llu entries from "
				  "%u site%s walked, %llu fork%s)",
				  pv->brk_site, (unsigned long long)pv->brk_n,
				  pushlog_break_text(pv->brk), ptxt,
				  pv->brk_hashes ? "; hashes " : "",
				  pv->brk_hashes ? h0 : "",
				  pv->brk_hashes ? " and " : "",
				  pv->brk_hashes ? h1 : "",
				  (unsigned long long)pv->entries, pv->sites,
				  pv->sites == 1 ? "" : "s",
				  (unsigned long long)pv->forks,
				  pv->forks == 1 ? "" : "s");
		goto done;
	}
	if (!r->rq->json)
		buf_printf(&r->out, "push log: %llu entries from %u site%s, "
			   "all chains intact\n",
			   (unsigned long long)pv->entries, pv->sites,
			   pv->sites == 1 ? "" : "s");
	tlog_answer(r, &tv);
	rc = r->rq->json ? 0 : kept_answer(x, r, NULL);
done:
	tlogstore_verify_free(&tv);
	return rc;
}

const struct cmd cmd_log_rows[] = {
	CMD_ROW("log.page", CMD_ON_ADMIN | CMD_READS | CMD_FRONTEND, 0, 10,
		cmd_log_page),
	/* a mirror too: it holds the transparency log's leaves (no entry) */
	CMD_ROW("log.verify", CMD_ON_ADMIN | CMD_READS, 0, 0,
		cmd_log_verify),
};
const size_t cmd_log_nrows = GD_ARRAY_SIZE(cmd_log_rows);
