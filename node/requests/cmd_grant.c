/*
 * cmd_grant.c: tokens and grants.  The 2fa commands that validate a token
 * and add a grant (val, val-for-days, val-subnet, val-session), those
 * that look at or end grants (isval, list-val, inval), the administrator's
 * grant list and revoke, and the push decision (push.check for
 * grant-shell, check for grantctl, vref.check for gitolite's VREF/2fa).
 *
 * Where a token is validated: cmd_val() -> cmd_validate_token()
 * (cmd_val.c) -> otp_check().  Where a push is decided: cmd_push_check() ->
 * policy_push(); under gitolite, cmd_vref_check() -> policy_2fa().
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "addr.h"
#include "cmd.h"
#include "crashpoint.h"
#include "dur.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "names.h"
#include "otp.h"
#include "peerpolicy.h"
#include "policy.h"
#include "records.h"
#include "repos.h"
#include "xalloc.h"
#include "banned.h"

/* ---- shared pieces of the 2fa commands ---------------------------------- */

static void count_check(struct cmd_ctx *x, int rc, bool allowed)
{
	if (x->counts)
		metrics_inc(&x->counts->checks[rc < 0 ? METRICS_CHECK_ERROR :
					      allowed ? METRICS_CHECK_ALLOWED :
							METRICS_CHECK_REFUSED]);
}

static int add_grant(struct cmd_ctx *x, struct req *r, const char *user,
		     const struct gd_net *net, const char *session,
		     int64_t seconds)
{
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
	char netstr[ADDR_STRLEN], until[64];

	addr_format(netstr, net);
	g.user = (char *)user;
	g.net = netstr;
	g.session = (char *)(session ? session : "");
	SET(g, added, r->now);
	SET(g, expires, r->now + seconds);
	g.site = (char *)ops_site(x->ops);
	int rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_GRANT, &g);
	if (rc < 0)
		return rc;
	cmd_fmt_time(until, sizeof(until), r->now + seconds);
	if (session && *session)
		buf_printf(&r->out, "Adding IP address %s with session %s "
			   "until %s\n", netstr, session, until);
	else
		buf_printf(&r->out, "Adding IP address %s until %s\n", netstr,
			   until);
	log_info("grant added user=%s net=%s%s%s expires=%lld", user, netstr,
		 session && *session ? " session=" : "",
		 session && *session ? session : "",
		 (long long)(r->now + seconds));
	return 0;
}

/* ---- 2fa val, val-for-days, val-subnet, val-session --------------------- */

static int do_val(struct cmd_ctx *x, struct req *r, const char *token,
		  const struct gd_net *net, const char *session,
		  int64_t seconds)
{
	struct policy_user u;
	const char *how = NULL;
	bool ok;
	int rc;

	if ((rc = cmd_load_caller(x, r, &u)) < 0)
		goto done;
	if ((rc = cmd_validate_token(x, r, &u, token, &ok, &how)) < 0 || !ok)
		goto done;
	buf_printf(&r->out, "%s\n", how);
	rc = add_grant(x, r, cmd_user_of(r), net, session, seconds);
done:
	policy_user_clear(&u);
	return rc == GD_EDENIED ? 0 : rc;
}

static int cmd_val(struct cmd_ctx *x, struct req *r)
{
	return do_val(x, r, r->rq->args[0], &r->ip, NULL,
		      x->p.cfg->policy.grant_default);
}

static int cmd_val_for_days(struct cmd_ctx *x, struct req *r)
{
	const char *d = r->rq->args[0];
	int64_t max_days = x->p.cfg->policy.grant_max / 86400;
	char *end;

	errno = 0;
	long days = strtol(d, &end, 10);
	if (errno || end == d || *end || days < 1 || days > max_days)
		return cmd_bad(r, "The number of days must be a number between "
			       "1 and %lld, not '%s'", (long long)max_days, d);
	return do_val(x, r, r->rq->args[1], &r->ip, NULL, days * 86400);
}

static int cmd_val_subnet(struct cmd_ctx *x, struct req *r)
{
	const char *s = r->rq->args[0];
	int widest = r->ip.family == AF_INET ? 12 : 48;
	struct gd_net net;
	char *end;

	if (*s == '/')
		s++;
	int bits = r->ip.family == AF_INET ? 32 : 128;
	errno = 0;
	long prefix = strtol(s, &end, 10);
	/* range-check the long before anything narrows it */
	if (errno || end == s || *end || prefix < 0 || prefix > bits)
		return cmd_bad(r, "The subnet mask is invalid: '%s' (give it "
			       "as /NN, e.g. /24)", r->rq->args[0]);
	if (prefix < widest)
		return cmd_bad(r, "Largest allowed subnet is /%d", widest);
	if (addr_to_net(&net, &r->ip, (int)prefix) < 0)
		return cmd_bad(r, "The subnet mask is invalid: '%s'",
			       r->rq->args[0]);
	return do_val(x, r, r->rq->args[1], &net, NULL,
		      x->p.cfg->policy.grant_subnet);
}

static int cmd_val_session(struct cmd_ctx *x, struct req *r)
{
	if (!r->rq->session || !*r->rq->session)
		return cmd_bad(r, "val-session needs an SSH connection "
			       "(SSH_CONNECTION not set)");
	return do_val(x, r, r->rq->args[0], &r->ip, r->rq->session,
		      x->p.cfg->policy.grant_subnet);
}

/* ---- isval, list-val, inval --------------------------------------------- */

static int cmd_isval(struct cmd_ctx *x, struct req *r)
{
	bool g;
	int rc = policy_grant_covers(&g, &x->p, cmd_user_of(r), &r->ip,
				     r->rq->session, r->now);
	if (rc < 0)
		return rc;
	buf_puts(&r->out, g ? "True\n" : "False\n");
	r->status = g ? GD_EXIT_OK : GD_EXIT_REFUSED;
	/* the factors seen, on stderr: stdout stays kernel.org's answer */
	if (r->key != POLICY_KEY_UNKNOWN) {
		buf_puts(&r->err, "factors seen: ");
		policy_key_text(&r->err, x->p.cfg, r->key);
		buf_puts(&r->err, g ? "; a 2-factor grant covers this address\n"
				    : "; no 2-factor grant covers this "
				      "address\n");
	}
	return 0;
}

/* list-val and inval only work from an address that is whitelisted. */
static int require_whitelisted(struct cmd_ctx *x, struct req *r, bool *ok)
{
	int rc = policy_grant_covers(ok, &x->p, cmd_user_of(r), &r->ip,
				     r->rq->session, r->now);
	if (rc == 0 && !*ok)
		cmd_refuse(r, "This command only works from a whitelisted IP; "
			   "run: ssh %s 2fa val <token>", x->p.host);
	return rc;
}

typedef int (*grant_visit)(struct cmd_ctx *x, struct req *r,
			   Grantd__V1__Grant *g, void *payload);

/* Call fn for each grant of user (all of them when user is NULL). */
static int for_each_grant(struct cmd_ctx *x, struct req *r, const char *user,
			  grant_visit fn, void *payload)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	Grantd__V1__Grant **all = NULL;
	struct policy_revokes rv = { 0 };
	const char *key, *rv_user = NULL;
	size_t klen, n = 0, cap = 0;
	int rc;

	/* Read them all first: fn may write grants, and an iterator must not
	 * walk a batch that changes under it. */
	store_iter_new(&it, x->p.store, x->p.batch, CF_GRANTS, user ? user : "",
		       user ? strlen(user) + 1 : 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Grant *g = grantd__v1__grant__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		if (!g || !g->user)
			continue;
		GD_GROW(all, cap, n + 1);
		all[n++] = g;
	}
	store_iter_free(&it);
	buf_free(&v);
	for (size_t i = 0; rc >= 0 && i < n; i++) {
		Grantd__V1__Grant *g = all[i];
		if (!rv_user || strcmp(rv_user, g->user)) {
			policy_revokes_clear(&rv);
			rc = policy_revokes_load(&rv, &x->p, g->user);
			rv_user = g->user;
			if (rc < 0)
				break;
		}
		/* voided by a later revocation: shown and treated as
		 * revoked */
		if (policy_grant_void(g, &rv))
			g->revoked = 1;
		rc = fn(x, r, g, payload);
	}
	for (size_t i = 0; i < n; i++)
		grantd__v1__grant__free_unpacked(all[i], NULL);
	free(all);
	policy_revokes_clear(&rv);
	return rc < 0 ? rc : 0;
}

/* Void every grant of user stamped before now, at every site, including
 * grants that have not reached this one yet. */
static int emit_revocation(struct cmd_ctx *x, const char *user)
{
	Grantd__V1__Revocation rv = GRANTD__V1__REVOCATION__INIT;
	rv.user = (char *)user;
	return cmd_emit_body(x, GRANTD__V1__OP__BODY_REVOKE, &rv);
}

static const char *grant_state(const Grantd__V1__Grant *g, int64_t now)
{
	return g->revoked ? "revoked" : g->expires > now ? "live" : "expired";
}

struct list_opts {
	bool all;
	cJSON *json;
	int shown;
};

static int list_one(struct cmd_ctx *x, struct req *r, Grantd__V1__Grant *g,
		    void *payload)
{
	struct list_opts *lo = payload;
	char added[64], expires[64];
	const char *state = grant_state(g, r->now);

	if (g->purged || (!lo->all && strcmp(state, "live")))
		return 0;
	cmd_fmt_time(added, sizeof(added), g->added);
	cmd_fmt_time(expires, sizeof(expires), g->expires);
	lo->shown++;
	if (lo->json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "user", g->user);
		cJSON_AddStringToObject(o, "ip", g->net);
		cJSON_AddStringToObject(o, "session", g->session ? g->session : "");
		cJSON_AddStringToObject(o, "added", added);
		cJSON_AddStringToObject(o, "expires", expires);
		cJSON_AddStringToObject(o, "site", g->site ? g->site : "");
		cJSON_AddStringToObject(o, "state", state);
		cJSON_AddItemToArray(lo->json, o);
		return 0;
	}
	if (lo->shown == 1)
		buf_printf(&r->out, "%-12s %-20s %-24s %-24s %-10s %s\n",
			   "USER", "IP", "ADDED", "EXPIRES", "SITE", "STATE");
	buf_printf(&r->out, "%-12s %-20s %-24s %-24s %-10s %s%s%s\n", g->user,
		   g->net, added, expires, g->site ? g->site : "", state,
		   g->session && *g->session ? " session=" : "",
		   g->session && *g->session ? g->session : "");
	return 0;
}

static int cmd_list_val(struct cmd_ctx *x, struct req *r)
{
	struct list_opts lo = { 0 };
	bool ok;
	int rc;

	if (r->rq->n_args == 1 && strcmp(r->rq->args[0], "all"))
		return cmd_bad(r, "usage: 2fa list-val [all]");
	lo.all = r->rq->n_args == 1;
	if ((rc = require_whitelisted(x, r, &ok)) < 0 || !ok)
		return rc;
	rc = for_each_grant(x, r, cmd_user_of(r), list_one, &lo);
	if (!lo.all)
		buf_puts(&r->out, "Listed non-expired entries only. Run "
				  "\"list-val all\" to list all.\n");
	return rc;
}

struct inval_opts {
	const struct gd_net *match; /* NULL: all */
	bool purge;
	int expired, already, found;
};

static int inval_one(struct cmd_ctx *x, struct req *r, Grantd__V1__Grant *g,
		     void *payload)
{
	struct inval_opts *io = payload;
	struct gd_net net;
	bool live = !g->revoked && g->expires > r->now;

	if (g->purged || addr_parse(&net, g->net, true) < 0)
		return 0;
	if (io->match && !policy_net_hits(&net, io->match))
		return 0;
	io->found++;
	if (!live && !io->purge) {
		io->already++;
		return 0;
	}
	Grantd__V1__Grant ng = *g;
	ng.has_hlc = 0;
	ng.origin = NULL;
	SET(ng, revoked, 1);
	if (ng.expires > r->now - 1)
		SET(ng, expires, r->now - 1);
	if (io->purge)
		SET(ng, purged, 1);
	io->expired++;
	log_info("grant revoked user=%s net=%s%s", g->user, g->net,
		 io->purge ? " purged" : "");
	return cmd_emit_body(x, GRANTD__V1__OP__BODY_GRANT, &ng);
}

/* Void every grant of user for net (an address: every grant whose net
 * contains it, sessions included; a subnet: grants for that subnet)
 * stamped before now, at every site, including grants that have not
 * reached this one yet (policy_grant_void). */
static int emit_addr_revocation(struct cmd_ctx *x, const char *user,
				const struct gd_net *net)
{
	Grantd__V1__AddrRevocation ar = GRANTD__V1__ADDR_REVOCATION__INIT;
	char netstr[ADDR_STRLEN];

	addr_format(netstr, net);
	ar.user = (char *)user;
	ar.net = netstr;
	log_info("revocation recorded user=%s net=%s", user, netstr);
	return cmd_emit_body(x, GRANTD__V1__OP__BODY_ADDR_REVOKE, &ar);
}

static int cmd_inval(struct cmd_ctx *x, struct req *r)
{
	struct inval_opts io = { 0 };
	const char *what = r->rq->args[0];
	struct gd_net target;
	bool ok;
	int rc;

	if (r->rq->n_args == 2 &&
	    (strcmp(what, "all") || strcmp(r->rq->args[1], "purge")))
		return cmd_bad(r, "usage: 2fa inval IP|myip|all|all purge");
	if (!strcmp(what, "myip")) {
		io.match = &r->ip;
	} else if (strcmp(what, "all")) {
		if (addr_parse(&target, what, true) < 0)
			return cmd_bad(r, "'%s' is not an IP address; give "
				       "an address, a CIDR subnet, 'myip' or "
				       "'all'", what);
		io.match = &target;
	}
	io.purge = r->rq->n_args == 2;
	if ((rc = require_whitelisted(x, r, &ok)) < 0 || !ok)
		return rc;
	if ((rc = for_each_grant(x, r, cmd_user_of(r), inval_one, &io)) < 0)
		return rc;
	/* recorded whatever this site knows: a grant for it may still be on
	 * its way from another site, and loses to the record when it
	 * arrives */
	rc = io.match ? emit_addr_revocation(x, cmd_user_of(r), io.match)
		      : emit_revocation(x, cmd_user_of(r));
	if (rc < 0)
		return rc;
	if (io.purge)
		buf_puts(&r->out, "All entries purged. You can verify with "
				  "\"list-val all\".\n");
	else if (!io.found)
		return cmd_refuse(r, "Did not find %s in the list of "
				  "authorized IPs.", what);
	else if (io.expired)
		buf_printf(&r->out, "Force-expired %s (%d grant%s).\n", what,
			   io.expired, io.expired == 1 ? "" : "s");
	else
		buf_printf(&r->out, "%s was already expired.\n", what);
	return 0;
}


/* Revoke every live grant of user (cmd.h). */
int cmd_revoke_all(struct cmd_ctx *x, struct req *r, const char *user,
		   int *count)
{
	struct inval_opts io = { 0 };
	int rc = for_each_grant(x, r, user, inval_one, &io);
	if (count)
		*count = io.expired;
	return rc < 0 ? rc : emit_revocation(x, user);
}

/* ---- push check --------------------------------------------------------- */

/* May user push to repo_in from r's address?  Allowed: r's path and
 * factor set, and with tell the sentence an administrator reads (grantctl
 * check); grant-shell reads only the path and the factor. */
static int push_decision(struct cmd_ctx *x, struct req *r, const char *user,
			 const char *repo_in, bool tell)
{
	char repo[NAME_REPO_MAX + 1];
	struct buf why = BUF_INIT, hint = BUF_INIT;
	int rc;

	if (cmd_repo_arg(r, repo_in, repo, sizeof(repo)) < 0)
		return 0;
	rc = policy_push(&x->p, user, &r->ip, r->rq->session, r->key, repo,
			 r->now, &why, &hint, &r->factor);
	count_check(x, rc == GD_EDENIED || rc == GD_ENOTFOUND ? 0 : rc,
		    rc == 0);
	if (rc == 0) {
		repos_path(&r->path, x->p.cfg->repo_dir, repo);
		if (tell) {
			buf_puts(&r->out, "allowed: user ");
			buf_puts(&r->out, user);
			buf_puts(&r->out, " may push to ");
			buf_puts(&r->out, repo);
			buf_puts(&r->out, "\n");
		}
	} else if (rc == GD_EDENIED || rc == GD_ENOTFOUND) {
		cmd_refuse(r, "%s", why.p);
		if (hint.len)
			cmd_refuse(r, "%s", hint.p);
		rc = 0;
	}
	buf_free(&why);
	buf_free(&hint);
	return rc;
}

static int cmd_push_check(struct cmd_ctx *x, struct req *r)
{
	return push_decision(x, r, cmd_user_of(r), r->rq->args[0], false);
}

/* args: MODE [REPO].  gitolite's VREF/2fa (MODE required) or
 * VREF/2fa/optin (optin) for the calling user from r->ip: gitolite has
 * decided who may write; this is only the 2-factor part.  REPO, gitolite's
 * GL_REPO, names the repository in the texts and the log; a name grantd
 * refuses is left out (gitolite allows '@'), never a reason to deny. */
static int cmd_vref_check(struct cmd_ctx *x, struct req *r)
{
	const char *mode = r->rq->args[0], *user = cmd_user_of(r);
	char repo[NAME_REPO_MAX + 1] = "";
	struct buf why = BUF_INIT, hint = BUF_INIT;
	bool required;
	int rc;

	if (strcmp(mode, "required") && strcmp(mode, "optin"))
		return cmd_bad(r, "bad vref mode '%s': use required or optin",
			       mode);
	required = !strcmp(mode, "required");
	if (r->rq->n_args == 2 &&
	    name_repo_norm(repo, sizeof(repo), r->rq->args[1]) < 0)
		repo[0] = '\0';
	rc = policy_2fa(&x->p, user, &r->ip, r->rq->session, required,
			*repo ? repo : NULL, r->now, &why, &hint);
	count_check(x, rc == GD_EDENIED ? 0 : rc, rc == 0);
	if (rc == 0) {
		buf_printf(&r->out, "allowed: user %s may push%s%s\n", user,
			   *repo ? " to " : "", repo);
	} else if (rc == GD_EDENIED) {
		log_debug("vref refused user=%s repo=%s mode=%s ip=%s", user,
			  *repo ? repo : "-", mode, r->rq->client_ip);
		cmd_refuse(r, "%s", why.p);
		cmd_refuse(r, "%s", hint.p);
		rc = 0;
	}
	buf_free(&why);
	buf_free(&hint);
	return rc;
}

/* ---- admin: grants, check ----------------------------------------------- */

static int cmd_grant_list(struct cmd_ctx *x, struct req *r)
{
	struct list_opts lo = { .all = true };
	const char *user = NULL;

	for (size_t i = 0; i < r->rq->n_args; i++) {
		if (strcmp(r->rq->args[i], "--user") ||
		    i + 1 == r->rq->n_args)
			return cmd_bad(r, "usage: grantctl grant list [--user "
				       "NAME] [--json]");
		user = r->rq->args[++i];
		if (!cmd_name_arg(r, user))
			return 0;
	}
	lo.json = r->rq->json ? cJSON_CreateArray() : NULL;
	int rc = for_each_grant(x, r, user, list_one, &lo);
	if (lo.json)
		cmd_print_json(r, lo.json);
	return rc;
}

static int cmd_grant_revoke(struct cmd_ctx *x, struct req *r)
{
	struct inval_opts io = { 0 };
	const char *name = r->rq->args[0];
	char netstr[ADDR_STRLEN] = "";
	struct gd_net target;
	int rc;

	if (!cmd_name_arg(r, name))
		return 0;
	if (r->rq->n_args == 2 && strcmp(r->rq->args[1], "all")) {
		if (addr_parse(&target, r->rq->args[1], true) < 0)
			return cmd_bad(r, "'%s' is not an IP address or "
				       "subnet; give one, or 'all'",
				       r->rq->args[1]);
		io.match = &target;
		addr_format(netstr, &target);
	}
	if ((rc = for_each_grant(x, r, name, inval_one, &io)) < 0)
		return rc;
	/* Recorded whatever this site knows, so that it also voids grants
	 * made before now at sites whose operations have not arrived yet
	 * (SPEC 2.4): "all" as a revocation of the user, an address as a
	 * revocation of it (every grant whose net contains it, sessions
	 * included). */
	rc = io.match ? emit_addr_revocation(x, name, io.match)
		      : emit_revocation(x, name);
	if (rc < 0)
		return rc;
	buf_printf(&r->out, "revoked %d live grant%s of user %s%s%s; recorded, "
		   "so it also voids %s made before now at another site that "
		   "has not arrived here yet\n", io.expired,
		   io.expired == 1 ? "" : "s", name, io.match ? " for " : "",
		   netstr,
		   io.match ? "such a grant" : "every grant of the user");
	return 0;
}

static int cmd_check(struct cmd_ctx *x, struct req *r)
{
	const char *user = r->rq->args[0], *ip = r->rq->args[1];

	if (!cmd_name_arg(r, user))
		return 0;
	if (addr_parse(&r->ip, ip, false) < 0)
		return cmd_bad(r, "'%s' is not an IP address", ip);
	return push_decision(x, r, user, r->rq->args[2], true);
}

/* ---- the rows ----------------------------------------------------------- */

const struct cmd cmd_grant_rows[] = {
	CMD_2FA(VAL, CMD_TWOFA | CMD_USES_IP | CMD_BATCH, cmd_val),
	CMD_2FA(VAL_FOR_DAYS, CMD_TWOFA | CMD_USES_IP | CMD_BATCH,
		cmd_val_for_days),
	CMD_2FA(VAL_SUBNET, CMD_TWOFA | CMD_USES_IP | CMD_BATCH,
		cmd_val_subnet),
	CMD_2FA(VAL_SESSION, CMD_TWOFA | CMD_USES_IP | CMD_BATCH,
		cmd_val_session),
	CMD_2FA(ISVAL, CMD_TWOFA | CMD_USES_IP | CMD_READS, cmd_isval),
	CMD_2FA(LIST_VAL, CMD_TWOFA | CMD_USES_IP | CMD_READS, cmd_list_val),
	CMD_2FA(INVAL, CMD_TWOFA | CMD_USES_IP | CMD_BATCH, cmd_inval),
	CMD_ROW("push.check",
		CMD_ON_USER | CMD_READS | CMD_NEEDS_USER | CMD_USES_IP |
			CMD_FRONTEND,
		1, 1, cmd_push_check),
	CMD_ROW("vref.check",
		CMD_ON_USER | CMD_READS | CMD_NEEDS_USER | CMD_USES_IP |
			CMD_FRONTEND,
		1, 2, cmd_vref_check),
	CMD_ROW("grant.list", CMD_ON_ADMIN | CMD_READS | CMD_FRONTEND, 0, 2,
		cmd_grant_list),
	CMD_ROW("grant.revoke", CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND, 1, 2,
		cmd_grant_revoke),
	CMD_ROW("check", CMD_ON_ADMIN | CMD_READS | CMD_FRONTEND, 3, 3,
		cmd_check),
};
const size_t cmd_grant_nrows = GD_ARRAY_SIZE(cmd_grant_rows);
