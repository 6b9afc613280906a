/*
 * policy.c: decisions over the stored state.  Reads only; every write
 * happens in the command handlers (cmd_*.c) through ops_local().  The
 * key kinds are policy_key.c's, the lockout policy_lock.c's; the reader's
 * cache of a decision's facts is pcache.c.
 */
#include <sodium.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "err.h"
#include "ops.h"
#include "pcache.h"
#include "policy.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

/* ---- a decision's records ---------------------------------------------- */

/* The user record of name into out->user (NULL: none, or deleted).
 * Returns 0 or a negative gd_err (out->user left NULL). */
static int user_read(struct policy_user *out,
                     const struct policy_ctx *pc,
                     const char *name,
                     ProtobufCAllocator *al)
{
	struct buf v = BUF_INIT;
	int rc;

	rc = store_get(pc->store, pc->batch, CF_USERS, name, strlen(name), &v);
	if (rc == 0) {
		out->user = grantd__v1__user__unpack(al, v.len,
		                                     (const uint8_t *)v.p);
		if (out->user && out->user->deleted) {
			grantd__v1__user__free_unpacked(out->user, al);
			out->user = NULL;
		}
	}
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* The enrollment of name into out->enroll and out->enrolled: a sealed
 * record, opened (store.h), so read only where the answer needs it.
 * Returns 0 or a negative gd_err (nothing set). */
static int enroll_read(struct policy_user *out,
                       const struct policy_ctx *pc,
                       const char *name,
                       ProtobufCAllocator *al)
{
	struct buf v = BUF_INIT;
	int rc;

	rc = store_get(pc->store, pc->batch, CF_ENROLL, name, strlen(name), &v);
	if (rc == 0) {
		out->enroll = grantd__v1__enrollment__unpack(
		        al, v.len, (const uint8_t *)v.p);
		if (out->enroll && out->enroll->deleted) {
			sodium_memzero(out->enroll->secret.data,
			               out->enroll->secret.len);
			grantd__v1__enrollment__free_unpacked(out->enroll, al);
			out->enroll = NULL;
		}
		out->enrolled = out->enroll && out->enroll->active;
	}
	sodium_memzero(v.p, v.len);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

int policy_user_load(struct policy_user *out,
                     const struct policy_ctx *pc,
                     const char *name)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = user_read(out, pc, name, NULL)) < 0 ||
	    (rc = enroll_read(out, pc, name, NULL)) < 0)
		policy_user_clear(out); /* nothing is the caller's on failure */
	return rc;
}

/* policy_user_clear for records unpacked with al (NULL: malloc). */
static void user_clear(struct policy_user *u, ProtobufCAllocator *al)
{
	if (u->user)
		grantd__v1__user__free_unpacked(u->user, al);
	if (u->enroll) {
		sodium_memzero(u->enroll->secret.data, u->enroll->secret.len);
		grantd__v1__enrollment__free_unpacked(u->enroll, al);
	}
	memset(u, 0, sizeof(*u));
}

void policy_user_clear(struct policy_user *u)
{
	user_clear(u, NULL);
}

/* A cache is only ever read with the view it was filled from (pcache.h). */
static struct pcache *cache_of(const struct policy_ctx *pc)
{
	GD_ASSERT(!pc->cache || store_batch_is_view(pc->batch));
	return pc->cache;
}

/* The facts of user name a decision reads (enroll: its enrollment's too)
 * into *out: pc's cache's entry (borrowed: valid until the next
 * pcache_user of another name) or, without a cache, local (zeroed by the
 * caller, kept between calls), each fact read from the store only when
 * not yet known (the enrollment unsealed into al, wiped at arena_end; only
 * "exists" and "active" are kept).  Returns 0 or a negative gd_err. */
static int user_facts(const struct pcache_user **out,
                      struct pcache_user *local,
                      const struct policy_ctx *pc,
                      const char *name,
                      bool enroll,
                      ProtobufCAllocator *al)
{
	struct pcache *c = cache_of(pc);
	struct pcache_user *e = c ? pcache_user(c, name) : local;
	struct policy_user u = {0};
	int rc = 0;

	*out = e;
	if (!e->user_known) {
		if ((rc = user_read(&u, pc, name, al)) < 0)
			goto done;
		e->live = u.user != NULL;
		e->user_known = true;
	}
	if (enroll && !e->enroll_known) {
		if ((rc = enroll_read(&u, pc, name, al)) < 0)
			goto done;
		e->enroll = u.enroll != NULL;
		e->enrolled = u.enrolled;
		e->enroll_known = true;
	}
done:
	user_clear(&u, al);
	return rc;
}

bool policy_net_hits(const struct gd_net *net, const struct gd_net *target)
{
	if (target->prefix == (target->family == AF_INET ? 32 : 128))
		return addr_contains(net, target);
	return !memcmp(net, target, sizeof(*net));
}

/* Whether a revocation stamped (hlc, origin) of target (NULL: of the
 * user, every net) voids grant g of net (NULL: g's net is unknown, so only
 * the user's revocation can void it). */
static bool voided_by(const Grantd__V1__Grant *g,
                      const struct gd_net *net,
                      const struct gd_net *target,
                      uint64_t hlc,
                      const char *origin)
{
	if (target && (!net || !policy_net_hits(net, target)))
		return false;
	return !ops_stamp_after(g->hlc, g->origin, hlc, origin);
}

/* g's net into *net; NULL when it has none that parses. */
static const struct gd_net *grant_net(struct gd_net *net,
                                      const Grantd__V1__Grant *g)
{
	return g->net && addr_parse(net, g->net, true) == 0 ? net : NULL;
}

bool policy_grant_void(const Grantd__V1__Grant *g,
                       const struct policy_revokes *rv)
{
	struct gd_net n, target;
	const struct gd_net *net;

	if (g->revoked || g->purged)
		return true;
	if (!rv)
		return false;
	if (rv->user &&
	    voided_by(g, NULL, NULL, rv->user->hlc, rv->user->origin))
		return true;
	if (!(net = grant_net(&n, g)))
		return false;
	for (size_t i = 0; i < rv->n_addr; i++) {
		const Grantd__V1__AddrRevocation *ar = rv->addr[i];
		if (addr_parse(&target, ar->net, true) == 0 &&
		    voided_by(g, net, &target, ar->hlc, ar->origin))
			return true;
	}
	return false;
}

/* policy_grant_void over a user's revocations as facts (pcache.h). */
static bool grant_void_facts(const Grantd__V1__Grant *g,
                             const struct pcache_revokes *rv)
{
	struct gd_net n;
	const struct gd_net *net;

	if (g->revoked || g->purged)
		return true;
	if (rv->user && voided_by(g, NULL, NULL, rv->user_hlc, rv->user_origin))
		return true;
	if (!(net = grant_net(&n, g)))
		return false;
	for (size_t i = 0; i < rv->n_addr; i++)
		if (voided_by(g, net, &rv->addr[i].net, rv->addr[i].hlc,
		              rv->addr[i].origin))
			return true;
	return false;
}

/* policy_revokes_load, the records unpacked with al (NULL: malloc). */
static int revokes_load(struct policy_revokes *out,
                        const struct policy_ctx *pc,
                        const char *user,
                        ProtobufCAllocator *al)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, k = BUF_INIT;
	const char *key;
	size_t klen, cap = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = store_get(pc->store, pc->batch, CF_REVOKES, user, strlen(user),
	               &v);
	if (rc == 0)
		out->user = grantd__v1__revocation__unpack(
		        al, v.len, (const uint8_t *)v.p);
	else if (rc != GD_ENOTFOUND)
		goto done;
	records_key_addr_revoke(&k, user, NULL);
	store_iter_new(&it, pc->store, pc->batch, CF_ADDR_REVOKES, k.p, k.len);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__AddrRevocation *ar =
		        grantd__v1__addr_revocation__unpack(
		                al, v.len, (const uint8_t *)v.p);
		if (!ar)
			continue;
		if (!ar->net) {
			grantd__v1__addr_revocation__free_unpacked(ar, al);
			continue;
		}
		GD_GROW(out->addr, cap, out->n_addr + 1);
		out->addr[out->n_addr++] = ar;
	}
	store_iter_free(&it);
done:
	buf_free(&v);
	buf_free(&k);
	return rc < 0 && rc != GD_ENOTFOUND ? rc : 0;
}

int policy_revokes_load(struct policy_revokes *out,
                        const struct policy_ctx *pc,
                        const char *user)
{
	return revokes_load(out, pc, user, NULL);
}

static void revokes_clear(struct policy_revokes *rv, ProtobufCAllocator *al)
{
	if (rv->user)
		grantd__v1__revocation__free_unpacked(rv->user, al);
	for (size_t i = 0; i < rv->n_addr; i++)
		grantd__v1__addr_revocation__free_unpacked(rv->addr[i], al);
	free(rv->addr);
	memset(rv, 0, sizeof(*rv));
}

void policy_revokes_clear(struct policy_revokes *rv)
{
	revokes_clear(rv, NULL);
}

/* The revocations of user as facts into *out: pc's cache's (borrowed, as
 * user_facts') or, without a cache, local (zeroed by the caller, who
 * clears it: pcache_revokes_clear), read when not yet known.  Returns 0
 * or a negative gd_err. */
static int revokes_facts(const struct pcache_revokes **out,
                         struct pcache_revokes *local,
                         const struct policy_ctx *pc,
                         const char *user,
                         ProtobufCAllocator *al)
{
	struct pcache *c = cache_of(pc);
	struct pcache_user *e = c ? pcache_user(c, user) : NULL;
	struct pcache_revokes *f = e ? &e->rv : local;
	struct policy_revokes rv;
	struct gd_net net;
	int rc;

	*out = f;
	if (e && e->revokes_known)
		return 0;
	if ((rc = revokes_load(&rv, pc, user, al)) == 0) {
		if (rv.user) {
			f->user = true;
			f->user_hlc = rv.user->hlc;
			f->user_origin = rv.user->origin
			                         ? xstrdup(rv.user->origin)
			                         : NULL;
		}
		/* a net that does not parse never hits (policy_grant_void) */
		for (size_t i = 0; i < rv.n_addr; i++)
			if (addr_parse(&net, rv.addr[i]->net, true) == 0)
				pcache_revokes_add(f, &net, rv.addr[i]->hlc,
				                   rv.addr[i]->origin);
		if (e)
			e->revokes_known = true;
	}
	revokes_clear(&rv, al);
	return rc;
}

/* Hand each of user's grants that may allow (not voided by rv, a net
 * that parses), unpacked with al, to fn with its net: fn takes *g (sets it
 * to NULL) or leaves it to be freed, and returns false to stop.  Returns 0
 * or a negative gd_err. */
typedef bool (*grant_fn)(Grantd__V1__Grant **g,
                         const struct gd_net *net,
                         void *payload);
static int each_live_grant(const struct policy_ctx *pc,
                           const char *user,
                           const struct pcache_revokes *rv,
                           ProtobufCAllocator *al,
                           grant_fn fn,
                           void *payload)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	store_iter_new(&it, pc->store, pc->batch, CF_GRANTS, user,
	               strlen(user) + 1);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Grant *g = grantd__v1__grant__unpack(
		        al, v.len, (const uint8_t *)v.p);
		struct gd_net net;
		bool more = true;
		if (g && !grant_void_facts(g, rv) && g->net &&
		    addr_parse(&net, g->net, true) == 0)
			more = fn(&g, &net, payload);
		if (g)
			grantd__v1__grant__free_unpacked(g, al);
		if (!more) {
			rc = 0;
			break;
		}
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

/* find_grant's search: the grant covering ip (and session) at now that
 * expires last. */
struct best_grant {
	const struct gd_net *ip;
	const char *session;
	int64_t now;
	ProtobufCAllocator *al;
	Grantd__V1__Grant *best;
};

static bool
best_grant(Grantd__V1__Grant **g, const struct gd_net *net, void *payload)
{
	struct best_grant *b = payload;
	bool ok = pcache_grant_allows(net, (*g)->expires, (*g)->session, b->ip,
	                              b->session, b->now);

	if (ok && (!b->best || (*g)->expires > b->best->expires)) {
		if (b->best)
			grantd__v1__grant__free_unpacked(b->best, b->al);
		b->best = *g;
		*g = NULL;
	}
	return true;
}

/* policy_find_grant, the records unpacked with al (NULL: malloc; *out
 * then freed with al). */
static int find_grant(Grantd__V1__Grant **out,
                      const struct policy_ctx *pc,
                      const char *user,
                      const struct gd_net *ip,
                      const char *session,
                      int64_t now,
                      ProtobufCAllocator *al)
{
	struct pcache_revokes local = {0};
	const struct pcache_revokes *rv;
	struct best_grant b = {ip, session, now, al, NULL};
	int rc;

	*out = NULL;
	if ((rc = revokes_facts(&rv, &local, pc, user, al)) == 0)
		rc = each_live_grant(pc, user, rv, al, best_grant, &b);
	pcache_revokes_clear(&local);
	if (rc < 0 && b.best) {
		grantd__v1__grant__free_unpacked(b.best, al);
		b.best = NULL;
	}
	*out = b.best;
	return rc;
}

/* grants_facts' keeping: false (stop) once the entry is full. */
static bool
keep_grant(Grantd__V1__Grant **g, const struct gd_net *net, void *payload)
{
	return pcache_grants_add(payload, net, (*g)->expires, (*g)->session);
}

/* Fill e (pc's cache's entry of user) with user's grants that may
 * allow (pcache.h: not void, a net that parses; expired or not, the clock
 * is the decision's); e's grants_known then set, or grants_over when
 * there are too many to keep. */
static int grants_facts(struct pcache_user *e,
                        const struct policy_ctx *pc,
                        const char *user,
                        ProtobufCAllocator *al)
{
	struct pcache_revokes local = {0}; /* stays empty: e's are used */
	const struct pcache_revokes *rv;
	int rc;

	/* e's own revocations: pcache_user of the same name */
	rc = revokes_facts(&rv, &local, pc, user, al);
	pcache_revokes_clear(&local);
	if (rc == 0)
		rc = each_live_grant(pc, user, rv, al, keep_grant, e);
	if (rc < 0) {
		pcache_grants_clear(e);
		return rc;
	}
	e->grants_known = !e->grants_over;
	return 0;
}

/* Does one of user's grants allow ip (in session) at now: from pc's
 * cache when it has one and the user's grants fit in it, else read. */
static int grant_covers(bool *covered,
                        const struct policy_ctx *pc,
                        const char *user,
                        const struct gd_net *ip,
                        const char *session,
                        int64_t now,
                        ProtobufCAllocator *al)
{
	struct pcache *c = cache_of(pc);
	struct pcache_user *e = c ? pcache_user(c, user) : NULL;
	Grantd__V1__Grant *g;
	int rc;

	if (e && !e->grants_known && !e->grants_over &&
	    (rc = grants_facts(e, pc, user, al)) < 0)
		return rc;
	if (e && e->grants_known) {
		*covered = pcache_grants_cover(e, ip, session, now);
		return 0;
	}
	if ((rc = find_grant(&g, pc, user, ip, session, now, al)) < 0)
		return rc;
	*covered = g != NULL;
	if (g)
		grantd__v1__grant__free_unpacked(g, al);
	return 0;
}

int policy_grant_covers(bool *covered,
                        const struct policy_ctx *pc,
                        const char *user,
                        const struct gd_net *ip,
                        const char *session,
                        int64_t now)
{
	return grant_covers(covered, pc, user, ip, session, now, NULL);
}

int policy_find_grant(Grantd__V1__Grant **out,
                      const struct policy_ctx *pc,
                      const char *user,
                      const struct gd_net *ip,
                      const char *session,
                      int64_t now)
{
	return find_grant(out, pc, user, ip, session, now, NULL);
}

/* policy_repo_load, the record unpacked with al (NULL: malloc). */
static int repo_load(Grantd__V1__Repo **out,
                     const struct policy_ctx *pc,
                     const char *name,
                     ProtobufCAllocator *al)
{
	struct buf v = BUF_INIT;
	int rc;

	*out = NULL;
	rc = store_get(pc->store, pc->batch, CF_REPOS, name, strlen(name), &v);
	if (rc == 0) {
		*out = grantd__v1__repo__unpack(al, v.len,
		                                (const uint8_t *)v.p);
		if (*out && (*out)->deleted) {
			grantd__v1__repo__free_unpacked(*out, al);
			*out = NULL;
		}
		rc = *out ? 0 : GD_ENOTFOUND;
	}
	buf_free(&v);
	return rc;
}

int policy_repo_load(Grantd__V1__Repo **out,
                     const struct policy_ctx *pc,
                     const char *name)
{
	return repo_load(out, pc, name, NULL);
}

/* The facts of repository name into *out: pc's cache's entry (borrowed:
 * valid until the next pcache_repo of another name) or, without a cache,
 * local (zeroed by the caller, who clears it: pcache_repo_clear), read
 * when not yet known.  Returns 0 or a negative gd_err (not GD_ENOTFOUND:
 * that is exists false). */
static int repo_facts(const struct pcache_repo **out,
                      struct pcache_repo *local,
                      const struct policy_ctx *pc,
                      const char *name,
                      ProtobufCAllocator *al)
{
	struct pcache *c = cache_of(pc);
	struct pcache_repo *e = c ? pcache_repo(c, name) : local;
	Grantd__V1__Repo *r = NULL;
	int rc;

	*out = e;
	if (e->known)
		return 0;
	if ((rc = repo_load(&r, pc, name, al)) < 0 && rc != GD_ENOTFOUND)
		return rc;
	if (r) {
		pcache_repo_set(e, true, (int)r->mode, r->writers,
		                r->n_writers);
		grantd__v1__repo__free_unpacked(r, al);
	} else {
		pcache_repo_set(e, false, 0, NULL, 0);
	}
	return 0;
}

/* The factors seen, on a line of its own after why: the key, and what
 * there was of the token (missing says what was missing). */
static void factors_seen(struct buf *why,
                         const struct policy_ctx *pc,
                         enum policy_key key,
                         const char *missing)
{
	if (key == POLICY_KEY_UNKNOWN)
		return;
	buf_puts(why, "\nfactors seen: ");
	policy_key_text(why, pc->cfg, key);
	buf_printf(why, "; %s", missing);
}

/* The 2-factor part of a decision for user u (policy_2fa): required, or
 * only for an enrolled user (opt-in); a key that counts as two factors
 * (a security key) allows either.  repo names the repository in the texts
 * (NULL: "this repository"). */
static int decide_2fa(const struct policy_ctx *pc,
                      const char *user,
                      const struct pcache_user *u,
                      const struct gd_net *ip,
                      const char *session,
                      enum policy_key key,
                      bool required,
                      const char *repo,
                      int64_t now,
                      struct buf *why,
                      struct buf *hint,
                      const char **factor,
                      ProtobufCAllocator *al)
{
	bool covered;
	char ipstr[ADDR_STRLEN];
	/* no user record: never enrolled (gitolite users enroll themselves) */
	bool enrolled = u->live && u->enrolled;
	int rc;

	if (policy_key_2fa(pc->cfg, key)) {
		*factor = "security-key";
		return 0;
	}
	if (!required && !enrolled) {
		*factor = "not-required";
		return 0;
	}
	if (!enrolled) {
		if (repo)
			buf_printf(why,
			           "user '%s' is not enrolled with "
			           "2-factor authentication, which '%s' "
			           "requires",
			           user, repo);
		else
			buf_printf(why,
			           "user '%s' is not enrolled with "
			           "2-factor authentication, which this "
			           "repository requires",
			           user);
		factors_seen(why, pc, key, "no 2-factor token enrolled");
		if (u->live && u->enroll)
			buf_printf(hint,
			           "finish enrolling: ssh %s 2fa val "
			           "<token>",
			           pc->host);
		else
			buf_printf(hint,
			           "enroll first: ssh %s 2fa enroll "
			           "totp (or yubikey), then ssh %s 2fa val "
			           "<token>",
			           pc->host, pc->host);
		return GD_EDENIED;
	}
	if ((rc = grant_covers(&covered, pc, user, ip, session, now, al)) < 0)
		return rc;
	if (!covered) {
		addr_format(ipstr, ip);
		buf_printf(why,
		           "IP address %s has not been validated for "
		           "user '%s'",
		           ipstr, user);
		factors_seen(why, pc, key,
		             "no 2-factor grant covers this "
		             "address");
		buf_printf(hint,
		           "get your 2-factor token and run: ssh %s 2fa "
		           "val <token>",
		           pc->host);
		return GD_EDENIED;
	}
	*factor = "grant";
	return 0;
}

int policy_2fa(const struct policy_ctx *pc,
               const char *user,
               const struct gd_net *ip,
               const char *session,
               bool required,
               const char *repo,
               int64_t now,
               struct buf *why,
               struct buf *hint)
{
	struct pcache_user local = {0};
	const struct pcache_user *u;
	const char *factor;
	struct arena a;
	ProtobufCAllocator al;
	int rc;

	arena_init(&a, &al);
	if ((rc = user_facts(&u, &local, pc, user, true, &al)) == 0)
		rc = decide_2fa(pc, user, u, ip, session, POLICY_KEY_UNKNOWN,
		                required, repo, now, why, hint, &factor, &al);
	arena_end(&a);
	return rc;
}

int policy_push(const struct policy_ctx *pc,
                const char *user,
                const struct gd_net *ip,
                const char *session,
                enum policy_key key,
                const char *repo,
                int64_t now,
                struct buf *why,
                struct buf *hint,
                const char **factor)
{
	struct pcache_repo local_r = {0};
	struct pcache_user local_u = {0};
	const struct pcache_repo *r;
	const struct pcache_user *u;
	const char *f = "mode-off";
	struct arena a;
	ProtobufCAllocator al;
	int rc;

	if (factor)
		*factor = NULL;
	arena_init(&a, &al);
	if ((rc = repo_facts(&r, &local_r, pc, repo, &al)) < 0)
		goto done;
	if (!r->exists) {
		rc = GD_ENOTFOUND;
		buf_printf(why, "repository '%s' does not exist", repo);
		goto done;
	}
	/* the user record alone: its enrollment (sealed) only when the
	 * repository's mode and the key leave the answer to it */
	if ((rc = user_facts(&u, &local_u, pc, user, false, &al)) < 0)
		goto done;
	rc = GD_EDENIED;
	if (!u->live) {
		buf_printf(why, "unknown user '%s'", user);
		goto done;
	}
	if (!pcache_repo_writer(r, user)) {
		buf_printf(why, "user '%s' may not write to '%s'", user, repo);
		buf_printf(hint,
		           "ask an administrator: grantctl repo writers "
		           "%s ... %s",
		           repo, user);
		goto done;
	}
	rc = 0;
	if (r->mode != GRANTD__V1__REPO_MODE__MODE_OFF &&
	    !policy_key_2fa(pc->cfg, key) &&
	    (rc = user_facts(&u, &local_u, pc, user, true, &al)) < 0)
		goto done;
	/* u and r stay valid: find_grant's pcache_user is of the same user,
	 * and nothing asks for another repository */
	if (r->mode != GRANTD__V1__REPO_MODE__MODE_OFF)
		rc = decide_2fa(pc, user, u, ip, session, key,
		                r->mode == GRANTD__V1__REPO_MODE__MODE_REQUIRED,
		                repo, now, why, hint, &f, &al);
	if (rc == 0 && factor)
		*factor = f;
done:
	pcache_repo_clear(&local_r);
	arena_end(&a);
	return rc;
}

/* ---- who holds a key (keys.find, the keys socket) ------------------------ */

/* policy_key_owners from the store: owner and line always filled. */
static int key_owners_read(const struct policy_ctx *pc,
                           const char *fp,
                           int *n,
                           struct buf *owner,
                           struct buf *line)
{
	struct records_span sf, su;
	struct store_iter *it;
	struct buf k = BUF_INIT, v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc = 0;

	records_key_keyfp(&k, fp, NULL);
	store_iter_new(&it, pc->store, pc->batch, CF_KEYFP, k.p, k.len);
	while (*n < 2 && (rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		if (records_keyfp_parse(key, klen, &sf, &su) < 0)
			continue;
		if (!(*n)++) {
			buf_add(owner, su.p, su.len);
			buf_add(line, v.p, v.len);
		}
	}
	if (*n == 2)
		rc = 0;
	store_iter_free(&it);
	buf_free(&k);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

int policy_key_owners(const struct policy_ctx *pc,
                      const char *fp,
                      int *n,
                      struct buf *owner,
                      struct buf *line)
{
	struct pcache_key *e = pc->cache ? pcache_key(pc->cache, fp) : NULL;
	struct buf o = BUF_INIT, l = BUF_INIT; /* when the caller wants none */
	struct buf *ob = owner ? owner : &o, *lb = line ? line : &l;
	int rc = 0;

	*n = 0;
	buf_reset(ob);
	buf_reset(lb);
	if (e && e->known) {
		*n = e->owners;
		if (e->owners) {
			buf_puts(ob, e->owner);
			buf_puts(lb, e->line);
		}
	} else if ((rc = key_owners_read(pc, fp, n, ob, lb)) == 0 && e) {
		pcache_key_set(e, *n, buf_str(ob), buf_str(lb));
	}
	buf_free(&o);
	buf_free(&l);
	return rc;
}
