/*
 * control.c: the user and admin sockets, and every command's handler.
 *
 * A request is decoded and checked (control_decode), looked up in the
 * dispatch table (which says on which socket it is allowed), and handled
 * against the batch of the moment.  A handler validates all its input
 * first, then makes its changes as operations with ops_local(); it never
 * writes to the store directly.  Replies are sent only after the batch is
 * committed with fsync, so an answer means "durable".
 *
 * Where a token is validated: cmd_val() -> validate_token() -> otp_check().
 * Where a push is decided: cmd_push_check() -> policy_push().
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>
#include <sys/socket.h>
#include <zmq.h>

#include "addr.h"
#include "control.h"
#include "gitrepl.h"
#include "dur.h"
#include "err.h"
#include "hookline.h"
#include "log.h"
#include "names.h"
#include "node.h"
#include "otp.h"
#include "policy.h"
#include "repl.h"
#include "repos.h"
#include "syncer.h"
#include "wire.h"
#include "writer.h"
#include "banned.h"

#define SET(m, f, v) ((m).f = (v), (m).has_##f = 1)

/* Where a command may arrive, and READS for commands that change nothing:
 * those are answered at once from committed state, without waiting for
 * the batch's fsync (so a push check never queues behind a val). */
enum { ON_USER = 1, ON_ADMIN = 2, READS = 4 };

struct req;
static void req_free(struct req *r);

/* Replies held until the syncer says their batch is on disk. */
struct pending {
	uint64_t ticket;
	struct req *reqs;
	int n;
	struct buf ops;         /* their operations, as in ops.outbox */
	struct pending *next;
};

struct control {
	struct node *n;
	void *user_sock;
	void *admin_sock;
	struct store_batch *batch;
	struct pending *head, *tail;
};

struct req {
	Grantd__V1__Request *rq;
	bool admin;
	int status;
	struct buf out, err, uri, path;
	struct gd_net ip;       /* client_ip, when the command uses it */
	int64_t now;            /* unix seconds */
	uint64_t now_ms;
	struct buf ident;       /* ROUTER routing id */
	void *sock;
	bool reads_only;        /* dispatch only READS commands (1st pass) */
	bool wrote;             /* made operations: answer once durable */
	bool done;              /* answered */
	int failed;             /* its handler failed (a gd_err): left out
				 * when its batch is handled again */
};

typedef int (*cmd_fn)(struct control *c, struct req *r);

struct cmd {
	const char *name;
	unsigned where;
	bool uses_ip;           /* client_ip must be present and valid */
	int min_args, max_args;
	cmd_fn fn;
};

/* ---- replies ------------------------------------------------------------ */

static void vreply(struct req *r, int status, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static void vreply(struct req *r, int status, const char *fmt, va_list ap)
{
	char line[2048];

	r->status = status;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (r->err.len && r->err.p[r->err.len - 1] != '\n')
		buf_puts(&r->err, "\n");
	buf_puts(&r->err, line);
}

#define REPLY_FN(name, status)                                                 \
	static int name(struct req *r, const char *fmt, ...)                   \
		__attribute__((format(printf, 2, 3)));                         \
	static int name(struct req *r, const char *fmt, ...)                   \
	{                                                                      \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		vreply(r, status, fmt, ap);                                    \
		va_end(ap);                                                    \
		return 0;                                                      \
	}

/* bad(): the input was wrong (exit 2); refuse(): a refusal (exit 1).  Both
 * return 0: the request was handled. */
REPLY_FN(bad, GD_EXIT_USAGE)
REPLY_FN(refuse, GD_EXIT_REFUSED)

/* The node failed to decide r (a handler's store or crypto error, a batch
 * that did not commit): exit 4, never a refusal (SPEC 3), and nothing of
 * what the handler had answered so far.  The caller logs the cause. */
static void undecided(struct req *r, int err)
{
	buf_reset(&r->out);
	buf_reset(&r->uri);
	buf_reset(&r->path);
	buf_reset(&r->err);
	r->status = GD_EXIT_INTERNAL;
	buf_printf(&r->err, "the node failed to decide: internal error (%s); "
		   "nothing was changed; the cause is in the node's log",
		   gd_strerror(err));
}

/* Where a request failed: the command and who asked, never its
 * arguments (they may hold a secret). */
static void log_failed(const struct req *r, int err)
{
	log_error("request failed cmd=%s socket=%s%s%s: %s", r->rq->cmd,
		  r->admin ? "admin" : "user", r->rq->user ? " user=" : "",
		  r->rq->user ? r->rq->user : "", gd_strerror(err));
}

static void fmt_time(char *out, size_t len, int64_t t)
{
	struct tm tm;
	time_t tt = (time_t)t;
	gmtime_r(&tt, &tm);
	strftime(out, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

static void print_json(struct req *r, cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);
	if (s) {
		buf_puts(&r->out, s);
		buf_puts(&r->out, "\n");
		free(s);
	}
	cJSON_Delete(j);
}

/* ---- decoding ----------------------------------------------------------- */

static bool printable(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);
	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

int control_decode(Grantd__V1__Request **out, const uint8_t *data,
		   size_t len, struct buf *err)
{
	Grantd__V1__Request *rq;
	const char *why = NULL;

	*out = NULL;
	if (len > GD_CTL_MAX_REQUEST) {
		buf_puts(err, "request too large");
		return GD_ETOOBIG;
	}
	rq = grantd__v1__request__unpack(NULL, len, data);
	if (!rq) {
		buf_puts(err, "request does not decode");
		return GD_EPROTO;
	}
	if (!rq->has_version || rq->version != GD_WIRE_VERSION)
		why = "unsupported protocol version (client and node differ?)";
	else if (!rq->cmd || !*rq->cmd || !printable(rq->cmd, 32))
		why = "missing or bad command name";
	else if (rq->n_args > GD_CTL_MAX_ARGS)
		why = "too many arguments";
	else if (rq->user && !name_user_ok(rq->user))
		why = "bad user name";
	else if (rq->client_ip && !printable(rq->client_ip, ADDR_STRLEN))
		why = "bad client address";
	else if (rq->session && !printable(rq->session, 128))
		why = "bad session id";
	for (size_t i = 0; !why && i < rq->n_args; i++)
		if (!rq->args[i] || !printable(rq->args[i], 16384))
			why = "bad argument (too long or control characters)";
	if (why) {
		buf_puts(err, why);
		grantd__v1__request__free_unpacked(rq, NULL);
		return GD_EPROTO;
	}
	*out = rq;
	return 0;
}

/* ---- operations --------------------------------------------------------- */

static int emit(struct control *c, Grantd__V1__Op *op)
{
	return ops_local(&c->n->ops, c->batch, op);
}

/* Make one operation of body (a User, Grant, ... as which says).  The
 * generated oneof is a union of pointers, so any body goes in through one
 * member. */
static int emit_body(struct control *c, Grantd__V1__Op__BodyCase which,
		     void *body)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	op.body_case = which;
	op.user = body;
	return emit(c, &op);
}

/* ---- shared pieces of the 2fa commands ---------------------------------- */

static const char *user_of(struct req *r)
{
	return r->rq->user;
}

/* Resolve the calling user; refuse when unknown. */
static int load_caller(struct control *c, struct req *r,
		       struct policy_user *u)
{
	int rc = policy_user_load(u, c->n, c->batch, user_of(r));
	if (rc < 0)
		return rc;
	if (!u->user)
		return refuse(r, "unknown user '%s'", user_of(r)), GD_EDENIED;
	return 0;
}

static int load_mark(struct control *c, const char *user, uint64_t id,
		     uint64_t *next, uint32_t *used)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	*next = 0;
	*used = 0;
	ops_key_mark(&k, user, id);
	rc = store_get(c->n->store, c->batch, CF_MARKS, k.p, k.len, &v);
	if (rc == 0) {
		Grantd__V1__Mark *m = grantd__v1__mark__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		if (m) {
			*next = m->next;
			*used = m->scratch_used;
			grantd__v1__mark__free_unpacked(m, NULL);
		}
	}
	buf_free(&k);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/*
 * Check token for the enrolled (or enrolling) user u.  On success the mark
 * (and, for a pending enrollment, its activation) are emitted and *how says
 * which kind of token it was; on failure a failure is emitted and the
 * request refused.  Returns 0 with *ok set, or a negative gd_err.
 */
static int validate_token(struct control *c, struct req *r,
			  struct policy_user *u, const char *token, bool *ok,
			  const char **how)
{
	struct node *n = c->n;
	const struct config_policy *p = &n->cfg->policy;
	struct otp_result res;
	uint64_t next, until;
	uint32_t used;
	int fails, rc;

	*ok = false;
	if (!otp_token_shape_ok(token))
		return bad(r, "'%s' is not a token: give the 6 or 8 digits "
			   "your token shows, or an 8-digit scratch code",
			   strnlen(token, 9) > 8 ? "(too long)" : token);
	if ((rc = policy_lock_state(n, c->batch, user_of(r), r->now_ms, &fails,
				    &until)) < 0)
		return rc;
	if (until) {
		char d[32];
		dur_format(d, sizeof(d), (int64_t)(until - r->now_ms) / 1000 + 1);
		log_warn("locked out user=%s ip=%s failures=%d",
			 user_of(r), r->rq->client_ip ? r->rq->client_ip : "-",
			 fails);
		return refuse(r, "Rate-limit reached: %d failed attempts; try "
			      "again in %s, or ask an administrator to run "
			      "'grantctl unlock %s'", fails, d, user_of(r));
	}
	if (!u->enroll)
		return refuse(r, "User %s is not enrolled with 2-factor "
			      "authentication; enroll with: ssh %s 2fa enroll "
			      "totp (or yubikey)", user_of(r), n->host);
	if ((rc = load_mark(c, user_of(r), u->enroll->id, &next, &used)) < 0)
		return rc;
	if ((rc = otp_check(&res, u->enroll, next, used, token, r->now,
			    p->totp_window, p->hotp_lookahead)) < 0) {
		/* a damaged record is the node failing to decide (exit 4,
		 * logged by the dispatcher), never a refusal */
		log_error("unusable enrollment user=%s", user_of(r));
		return rc;
	}
	if (!res.ok) {
		/* the attempt is named by its operation's stamp, unique here
		 * even when the whole batch shares r->now_ms */
		Grantd__V1__Op op = GRANTD__V1__OP__INIT;
		Grantd__V1__Failures f = GRANTD__V1__FAILURES__INIT;
		uint64_t at = ops_stamp(&n->ops);
		f.user = (char *)user_of(r);
		f.site = n->ops.site;
		f.hlc = &at;
		f.n_hlc = 1;
		op.body_case = GRANTD__V1__OP__BODY_FAILURE;
		op.failure = &f;
		SET(op, hlc, at);
		if ((rc = emit(c, &op)) < 0)
			return rc;
		return refuse(r, "Failed to validate token.\nIf using a phone "
			      "app, please wait for token to change before "
			      "trying again.");
	}
	{
		Grantd__V1__Mark m = GRANTD__V1__MARK__INIT;
		m.user = (char *)user_of(r);
		SET(m, enroll_id, u->enroll->id);
		SET(m, next, res.scratch ? next : res.next);
		SET(m, scratch_used,
		    used | (res.scratch ? 1u << res.scratch_index : 0));
		if ((rc = emit_body(c, GRANTD__V1__OP__BODY_MARK, &m)) < 0)
			return rc;
	}
	if (!u->enroll->active) {
		Grantd__V1__Enrollment e = *u->enroll;
		SET(e, active, 1);
		e.has_hlc = 0;
		e.origin = NULL;
		if ((rc = emit_body(c, GRANTD__V1__OP__BODY_ENROLL, &e)) < 0)
			return rc;
		u->enroll->active = 1;
		u->enrolled = true;
		log_info("enrollment active user=%s", user_of(r));
	}
	*how = res.scratch ? "Scratch-token used" :
	       u->enroll->kind == GRANTD__V1__OTP_KIND__OTP_TOTP ?
				"Valid TOTP token used" :
				"Valid HOTP token used";
	*ok = true;
	return 0;
}

static int add_grant(struct control *c, struct req *r, const char *user,
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
	g.site = c->n->ops.site;
	int rc = emit_body(c, GRANTD__V1__OP__BODY_GRANT, &g);
	if (rc < 0)
		return rc;
	fmt_time(until, sizeof(until), r->now + seconds);
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

/* ---- 2fa val, val-for-days, val-subnet, val-session ---------------------- */

static int do_val(struct control *c, struct req *r, const char *token,
		  const struct gd_net *net, const char *session,
		  int64_t seconds)
{
	struct policy_user u;
	const char *how = NULL;
	bool ok;
	int rc;

	if ((rc = load_caller(c, r, &u)) < 0)
		goto done;
	if ((rc = validate_token(c, r, &u, token, &ok, &how)) < 0 || !ok)
		goto done;
	buf_printf(&r->out, "%s\n", how);
	rc = add_grant(c, r, user_of(r), net, session, seconds);
done:
	policy_user_clear(&u);
	return rc == GD_EDENIED ? 0 : rc;
}

static int cmd_val(struct control *c, struct req *r)
{
	return do_val(c, r, r->rq->args[0], &r->ip, NULL,
		      c->n->cfg->policy.grant_default);
}

static int cmd_val_for_days(struct control *c, struct req *r)
{
	const char *d = r->rq->args[0];
	int64_t max_days = c->n->cfg->policy.grant_max / 86400;
	char *end;

	errno = 0;
	long days = strtol(d, &end, 10);
	if (errno || end == d || *end || days < 1 || days > max_days)
		return bad(r, "The number of days must be a number between 1 "
			   "and %lld, not '%s'", (long long)max_days, d);
	return do_val(c, r, r->rq->args[1], &r->ip, NULL, days * 86400);
}

static int cmd_val_subnet(struct control *c, struct req *r)
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
		return bad(r, "The subnet mask is invalid: '%s' (give it as "
			   "/NN, e.g. /24)", r->rq->args[0]);
	if (prefix < widest)
		return bad(r, "Largest allowed subnet is /%d", widest);
	if (addr_to_net(&net, &r->ip, (int)prefix) < 0)
		return bad(r, "The subnet mask is invalid: '%s'",
			   r->rq->args[0]);
	return do_val(c, r, r->rq->args[1], &net, NULL,
		      c->n->cfg->policy.grant_subnet);
}

static int cmd_val_session(struct control *c, struct req *r)
{
	if (!r->rq->session || !*r->rq->session)
		return bad(r, "val-session needs an SSH connection "
			   "(SSH_CONNECTION not set)");
	return do_val(c, r, r->rq->args[0], &r->ip, r->rq->session,
		      c->n->cfg->policy.grant_subnet);
}

/* ---- isval, list-val, inval ------------------------------------------- */

static int cmd_isval(struct control *c, struct req *r)
{
	Grantd__V1__Grant *g = NULL;
	int rc = policy_find_grant(&g, c->n, c->batch, user_of(r), &r->ip,
				   r->rq->session, r->now);
	if (rc < 0)
		return rc;
	buf_puts(&r->out, g ? "True\n" : "False\n");
	r->status = g ? GD_EXIT_OK : GD_EXIT_REFUSED;
	if (g)
		grantd__v1__grant__free_unpacked(g, NULL);
	return 0;
}

/* list-val and inval only work from an address that is whitelisted. */
static int require_whitelisted(struct control *c, struct req *r, bool *ok)
{
	Grantd__V1__Grant *g = NULL;
	int rc = policy_find_grant(&g, c->n, c->batch, user_of(r), &r->ip,
				   r->rq->session, r->now);
	*ok = g != NULL;
	if (g)
		grantd__v1__grant__free_unpacked(g, NULL);
	if (rc == 0 && !*ok)
		refuse(r, "This command only works from a whitelisted IP; "
		       "run: ssh %s 2fa val <token>", c->n->host);
	return rc;
}

typedef int (*grant_visit)(struct control *c, struct req *r,
			   Grantd__V1__Grant *g, void *payload);

/* Call fn for each grant of user (all of them when user is NULL). */
static int for_each_grant(struct control *c, struct req *r, const char *user,
			  grant_visit fn, void *payload)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	Grantd__V1__Grant **all = NULL;
	Grantd__V1__Revocation *rv = NULL;
	const char *key, *rv_user = NULL;
	size_t klen, n = 0, cap = 0;
	int rc;

	/* Read them all first: fn may write grants, and an iterator must not
	 * walk a batch that changes under it. */
	store_iter_new(&it, c->n->store, c->batch, CF_GRANTS, user ? user : "",
		       user ? strlen(user) + 1 : 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Grant *g = grantd__v1__grant__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		if (!g || !g->user)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			all = realloc(all, cap * sizeof(*all));
			if (!all)
				abort();
		}
		all[n++] = g;
	}
	store_iter_free(&it);
	buf_free(&v);
	for (size_t i = 0; rc >= 0 && i < n; i++) {
		Grantd__V1__Grant *g = all[i];
		if (!rv_user || strcmp(rv_user, g->user)) {
			if (rv)
				grantd__v1__revocation__free_unpacked(rv, NULL);
			rc = policy_revocation_load(&rv, c->n, c->batch,
						    g->user);
			rv_user = g->user;
			if (rc < 0)
				break;
		}
		/* voided by a later revocation: shown and treated as
		 * revoked */
		if (policy_grant_void(g, rv))
			g->revoked = 1;
		rc = fn(c, r, g, payload);
	}
	for (size_t i = 0; i < n; i++)
		grantd__v1__grant__free_unpacked(all[i], NULL);
	free(all);
	if (rv)
		grantd__v1__revocation__free_unpacked(rv, NULL);
	return rc < 0 ? rc : 0;
}

/* Void every grant of user stamped before now, at every site, including
 * grants that have not reached this one yet. */
static int emit_revocation(struct control *c, const char *user)
{
	Grantd__V1__Revocation rv = GRANTD__V1__REVOCATION__INIT;
	rv.user = (char *)user;
	return emit_body(c, GRANTD__V1__OP__BODY_REVOKE, &rv);
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

static int list_one(struct control *c, struct req *r, Grantd__V1__Grant *g,
		    void *payload)
{
	struct list_opts *lo = payload;
	char added[64], expires[64];
	const char *state = grant_state(g, r->now);

	if (g->purged || (!lo->all && strcmp(state, "live")))
		return 0;
	fmt_time(added, sizeof(added), g->added);
	fmt_time(expires, sizeof(expires), g->expires);
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

static int cmd_list_val(struct control *c, struct req *r)
{
	struct list_opts lo = { 0 };
	bool ok;
	int rc;

	if (r->rq->n_args == 1 && strcmp(r->rq->args[0], "all"))
		return bad(r, "usage: 2fa list-val [all]");
	lo.all = r->rq->n_args == 1;
	if ((rc = require_whitelisted(c, r, &ok)) < 0 || !ok)
		return rc;
	rc = for_each_grant(c, r, user_of(r), list_one, &lo);
	if (!lo.all)
		buf_puts(&r->out, "Listed non-expired entries only. Run "
				  "\"list-val all\" to list all.\n");
	return rc;
}

struct inval_opts {
	const struct gd_net *match; /* NULL: all */
	bool purge;
	int expired, already, found;
	int exact;              /* expired ones whose key is match's own */
};

static int inval_one(struct control *c, struct req *r, Grantd__V1__Grant *g,
		     void *payload)
{
	struct inval_opts *io = payload;
	struct gd_net net;
	bool live = !g->revoked && g->expires > r->now;

	if (g->purged || addr_parse(&net, g->net, true) < 0)
		return 0;
	if (io->match) {
		bool hit = io->match->prefix ==
					   (io->match->family == AF_INET ? 32 : 128) ?
				   addr_contains(&net, io->match) :
				   !memcmp(&net, io->match, sizeof(net));
		if (!hit)
			return 0;
	}
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
	if (io->match && !memcmp(&net, io->match, sizeof(net)) &&
	    !(g->session && *g->session))
		io->exact++;
	log_info("grant revoked user=%s net=%s%s", g->user, g->net,
		 io->purge ? " purged" : "");
	return emit_body(c, GRANTD__V1__OP__BODY_GRANT, &ng);
}

/* A revoked record for (user, net) without a session: a grant for it that
 * is still on its way from another site, stamped before now, loses to it
 * when it arrives. */
static int emit_tombstone(struct control *c, struct req *r, const char *user,
			  const struct gd_net *net)
{
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
	char netstr[ADDR_STRLEN];

	addr_format(netstr, net);
	g.user = (char *)user;
	g.net = netstr;
	g.session = "";
	SET(g, added, r->now);
	SET(g, expires, r->now - 1);
	SET(g, revoked, 1);
	g.site = c->n->ops.site;
	log_info("revocation recorded user=%s net=%s", user, netstr);
	return emit_body(c, GRANTD__V1__OP__BODY_GRANT, &g);
}

static int cmd_inval(struct control *c, struct req *r)
{
	struct inval_opts io = { 0 };
	const char *what = r->rq->args[0];
	struct gd_net target;
	bool ok;
	int rc;

	if (r->rq->n_args == 2 &&
	    (strcmp(what, "all") || strcmp(r->rq->args[1], "purge")))
		return bad(r, "usage: 2fa inval IP|myip|all|all purge");
	if (!strcmp(what, "myip")) {
		io.match = &r->ip;
	} else if (strcmp(what, "all")) {
		if (addr_parse(&target, what, true) < 0)
			return bad(r, "'%s' is not an IP address; give an "
				   "address, a CIDR subnet, 'myip' or 'all'",
				   what);
		io.match = &target;
	}
	io.purge = r->rq->n_args == 2;
	if ((rc = require_whitelisted(c, r, &ok)) < 0 || !ok)
		return rc;
	if ((rc = for_each_grant(c, r, user_of(r), inval_one, &io)) < 0)
		return rc;
	if (!io.match && (rc = emit_revocation(c, user_of(r))) < 0)
		return rc;
	if (io.purge)
		buf_puts(&r->out, "All entries purged. You can verify with "
				  "\"list-val all\".\n");
	else if (!io.found) {
		/* a grant for it may still be on its way from another site:
		 * leave a revoked record it will lose against */
		if ((rc = emit_tombstone(c, r, user_of(r), io.match)) < 0)
			return rc;
		return refuse(r, "Did not find %s in the list of authorized "
			      "IPs.", what);
	}
	else if (io.expired)
		buf_printf(&r->out, "Force-expired %s (%d grant%s).\n", what,
			   io.expired, io.expired == 1 ? "" : "s");
	else
		buf_printf(&r->out, "%s was already expired.\n", what);
	return 0;
}

/* ---- enroll, unenroll ---------------------------------------------------- */

static void scratch_to(struct buf *out,
		       char codes[OTP_SCRATCH_CODES][OTP_SCRATCH_DIGITS + 1])
{
	buf_puts(out, "Please write down/print the following 8-digit scratch "
		      "tokens.\nIf you lose your device, each can be used "
		      "once instead of a token:\n");
	for (int i = 0; i < OTP_SCRATCH_CODES; i++)
		buf_printf(out, "    %s\n", codes[i]);
}

/*
 * Make an enrollment for user with the given secret and settings, emit it,
 * and describe it in r->out (secret, URI, scratch codes).
 */
static int make_enrollment(struct control *c, struct req *r, const char *user,
			   Grantd__V1__OtpKind kind, const uint8_t *secret,
			   size_t slen, unsigned digits, unsigned period,
			   uint64_t counter, bool active)
{
	char codes[OTP_SCRATCH_CODES][OTP_SCRATCH_DIGITS + 1];
	uint8_t hashes[OTP_SCRATCH_CODES][32];
	ProtobufCBinaryData sc[OTP_SCRATCH_CODES];
	Grantd__V1__Enrollment e = GRANTD__V1__ENROLLMENT__INIT;
	struct buf b32 = BUF_INIT;
	int rc;

	otp_new_scratch(codes, hashes, secret, slen);
	for (int i = 0; i < OTP_SCRATCH_CODES; i++)
		sc[i] = (ProtobufCBinaryData){ 32, hashes[i] };
	e.user = (char *)user;
	SET(e, kind, kind);
	SET(e, secret, ((ProtobufCBinaryData){ slen, (uint8_t *)secret }));
	SET(e, digits, digits);
	SET(e, period, period);
	SET(e, counter, counter);
	e.scratch = sc;
	e.n_scratch = OTP_SCRATCH_CODES;
	SET(e, active, active);
	SET(e, id, ops_stamp(&c->n->ops));
	if ((rc = emit_body(c, GRANTD__V1__OP__BODY_ENROLL, &e)) < 0)
		goto done;
	otp_uri(&r->uri, &e, "grantd");
	otp_base32(&b32, secret, slen);
	buf_printf(&r->out, "New token generated for user %s\n", user);
	buf_printf(&r->out, "Secret (base32): %s\n", b32.p);
	buf_printf(&r->out, "URI: %s\n", r->uri.p);
	if (kind == GRANTD__V1__OTP_KIND__OTP_HOTP) {
		char hex[2 * OTP_MAX_SECRET_LEN + 1];
		sodium_bin2hex(hex, sizeof(hex), secret, slen);
		buf_printf(&r->out, "HOTP key (hex): %s\n", hex);
		buf_printf(&r->out, "To program a YubiKey (slot 1, OATH-HOTP), "
			   "run as root:\n    ykpersonalize -1 -ooath-hotp "
			   "-oappend-cr -a%s\n", hex);
		sodium_memzero(hex, sizeof(hex));
	}
	scratch_to(&r->out, codes);
	log_info("enrolled user=%s mode=%s active=%d", user,
		 kind == GRANTD__V1__OTP_KIND__OTP_TOTP ? "totp" : "hotp",
		 active);
done:
	sodium_memzero(codes, sizeof(codes));
	if (b32.p)
		sodium_memzero(b32.p, b32.len);
	buf_free(&b32);
	return rc;
}

static int cmd_enroll_self(struct control *c, struct req *r)
{
	const char *mode = r->rq->n_args ? r->rq->args[0] : NULL;
	uint8_t secret[OTP_NEW_SECRET_LEN];
	struct policy_user u;
	bool totp;
	int rc;

	if (!mode)
		return bad(r, "Enrolment mode not specified: use '2fa enroll "
			   "totp' for a phone app or '2fa enroll yubikey'");
	if (strcmp(mode, "totp") && strcmp(mode, "yubikey"))
		return bad(r, "%s is not a valid enrollment mode: use totp or "
			   "yubikey", mode);
	totp = !strcmp(mode, "totp");
	if ((rc = load_caller(c, r, &u)) < 0)
		goto done;
	if (u.enrolled) {
		refuse(r, "User %s already enrolled. To re-issue your token, "
		       "first run: ssh %s 2fa unenroll <token>", user_of(r),
		       c->n->host);
		goto done;
	}
	otp_new_secret(secret, sizeof(secret));
	rc = make_enrollment(c, r, user_of(r),
			     totp ? GRANTD__V1__OTP_KIND__OTP_TOTP :
				    GRANTD__V1__OTP_KIND__OTP_HOTP,
			     secret, sizeof(secret), 6, 30, 0, false);
	if (rc == 0) {
		if (!totp)
			r->uri.len = 0; /* no QR code for a YubiKey */
		buf_printf(&r->out, "Now run the following command to verify "
			   "that all went well:\n    ssh %s 2fa val <token>\n",
			   c->n->host);
	}
	sodium_memzero(secret, sizeof(secret));
done:
	policy_user_clear(&u);
	return rc == GD_EDENIED ? 0 : rc;
}

/* Revoke every live grant of user. */
static int revoke_all(struct control *c, struct req *r, const char *user,
		      int *count)
{
	struct inval_opts io = { 0 };
	int rc = for_each_grant(c, r, user, inval_one, &io);
	if (count)
		*count = io.expired;
	return rc < 0 ? rc : emit_revocation(c, user);
}

static int end_enrollment(struct control *c, struct req *r,
			  Grantd__V1__Enrollment *old)
{
	Grantd__V1__Enrollment e = GRANTD__V1__ENROLLMENT__INIT;
	int rc;

	e.user = old->user;
	SET(e, id, old->id);
	SET(e, deleted, 1);
	if ((rc = emit_body(c, GRANTD__V1__OP__BODY_ENROLL, &e)) < 0)
		return rc;
	return revoke_all(c, r, old->user, NULL);
}

static int cmd_unenroll_self(struct control *c, struct req *r)
{
	struct policy_user u;
	const char *how;
	bool ok;
	int rc;

	if ((rc = load_caller(c, r, &u)) < 0)
		goto done;
	if ((rc = validate_token(c, r, &u, r->rq->args[0], &ok, &how)) < 0 ||
	    !ok)
		goto done;
	if ((rc = end_enrollment(c, r, u.enroll)) < 0)
		goto done;
	buf_puts(&r->out, "Removing the secrets.\nExpiring all validations."
			  "\nYou have been successfully unenrolled.\n");
	log_info("unenrolled user=%s", user_of(r));
done:
	policy_user_clear(&u);
	return rc == GD_EDENIED ? 0 : rc;
}

/* ---- push and fetch ----------------------------------------------------- */

static int repo_arg(struct req *r, const char *arg, char *out, size_t len)
{
	if (name_repo_norm(out, len, arg) < 0) {
		bad(r, "bad repository name '%s': use parts of "
		    "[A-Za-z0-9_.+-] separated by '/', none starting with '.'",
		    arg);
		return GD_EINVAL;
	}
	return 0;
}

static int push_decision(struct control *c, struct req *r, const char *user,
			 const char *repo_in)
{
	char repo[NAME_REPO_MAX + 1];
	struct buf why = BUF_INIT, hint = BUF_INIT;
	int rc;

	if (repo_arg(r, repo_in, repo, sizeof(repo)) < 0)
		return 0;
	rc = policy_push(c->n, c->batch, user, &r->ip, r->rq->session, repo,
			 r->now, &why, &hint);
	if (rc == 0) {
		repos_path(&r->path, c->n->cfg->repo_dir, repo);
		buf_printf(&r->out, "allowed: user %s may push to %s\n", user,
			   repo);
	} else if (rc == GD_EDENIED || rc == GD_ENOTFOUND) {
		refuse(r, "%s", why.p);
		if (hint.len)
			refuse(r, "%s", hint.p);
		rc = 0;
	}
	buf_free(&why);
	buf_free(&hint);
	return rc;
}

static int cmd_push_check(struct control *c, struct req *r)
{
	return push_decision(c, r, user_of(r), r->rq->args[0]);
}

static int cmd_repo_read(struct control *c, struct req *r)
{
	char repo[NAME_REPO_MAX + 1];
	Grantd__V1__Repo *rp;
	int rc;

	if (repo_arg(r, r->rq->args[0], repo, sizeof(repo)) < 0)
		return 0;
	rc = policy_repo_load(&rp, c->n, c->batch, repo);
	if (rc == GD_ENOTFOUND)
		return refuse(r, "repository '%s' does not exist", repo);
	if (rc < 0)
		return rc;
	grantd__v1__repo__free_unpacked(rp, NULL);
	repos_path(&r->path, c->n->cfg->repo_dir, repo);
	return 0;
}

static int cmd_keys(struct control *c, struct req *r)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	store_iter_new(&it, c->n->store, c->batch, CF_USERS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__User *u = grantd__v1__user__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		for (size_t i = 0; u && !u->deleted && i < u->n_keys; i++)
			buf_printf(&r->out, "%s\t%s\n", u->name, u->keys[i]);
		if (u)
			grantd__v1__user__free_unpacked(u, NULL);
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

/* ---- pushes to replicate (grant-hook) ------------------------------------ */

/* args: REPO, then post-receive lines "OLD NEW REF"; push_id: grant-hook's
 * request id (hookline.h), optional.  A request whose id was recorded
 * already (its answer timed out, grant-hook sent it again) is answered
 * as recorded, and makes no second operation: a newer stamp for the same
 * push could move a ref back over a later push from another site. */
static int cmd_hook_refs(struct control *c, struct req *r)
{
	Grantd__V1__RefUpdate u = GRANTD__V1__REF_UPDATE__INIT;
	size_t n = r->rq->n_args - 1, k = 0;
	Grantd__V1__RefChange *ch = calloc(n, sizeof(*ch));
	Grantd__V1__RefChange **chp = calloc(n, sizeof(*chp));
	struct hookline *words = calloc(n, sizeof(*words));
	const char *id = r->rq->push_id;
	char repo[NAME_REPO_MAX + 1];
	Grantd__V1__Repo *rp = NULL;
	bool seen = false;
	int rc = 0;

	if (!ch || !chp || !words)
		abort();
	if (repo_arg(r, r->rq->args[0], repo, sizeof(repo)) < 0)
		goto done;
	if (id && !hookline_req_id_ok(id)) {
		rc = bad(r, "bad push id (want %d hex digits, '-', a number)",
			 HOOKLINE_ID_LEN);
		goto done;
	}
	rc = policy_repo_load(&rp, c->n, c->batch, repo);
	if (rc == GD_ENOTFOUND) {
		rc = refuse(r, "repository '%s' is not hosted here", repo);
		goto done;
	}
	if (rc < 0)
		goto done;
	for (size_t i = 0; i < n; i++) {
		const char *line = r->rq->args[i + 1];
		if (hookline_parse(&words[k], line) < 0) {
			rc = bad(r, "bad ref update line '%.300s' (want 'OLD NEW "
				 "REF' as post-receive reads them)", line);
			goto done;
		}
		if (!ops_ref_name_ok(words[k].ref)) {
			log_warn("ref not replicated repo=%s ref=%.300s", repo,
				 words[k].ref);
			continue;
		}
		grantd__v1__ref_change__init(&ch[k]);
		ch[k].old = words[k].old;
		ch[k].new_ = words[k].new_;
		ch[k].ref = words[k].ref;
		chp[k] = &ch[k];
		k++;
	}
	if (k && id &&
	    (rc = ops_push_seen(&c->n->ops, c->batch, repo, id, &seen)) < 0)
		goto done;
	if (seen) {
		/* answered once what recorded it is durable, like the first */
		r->wrote = true;
		log_info("push already recorded repo=%s id=%s refs=%zu", repo,
			 id, k);
	} else if (k) {
		u.repo = repo;
		u.changes = chp;
		u.n_changes = k;
		u.push_id = (char *)id;
		if ((rc = emit_body(c, GRANTD__V1__OP__BODY_REFS, &u)) < 0)
			goto done;
		log_info("push recorded repo=%s refs=%zu id=%s", repo, k,
			 id ? id : "-");
	}
	buf_printf(&r->out, "replicating %zu ref update%s of %s\n", k,
		   k == 1 ? "" : "s", repo);
done:
	if (rp)
		grantd__v1__repo__free_unpacked(rp, NULL);
	free(ch);
	free(chp);
	free(words);
	return rc;
}

/* ---- admin: users -------------------------------------------------------- */

static bool name_arg(struct req *r, const char *name)
{
	if (name_user_ok(name))
		return true;
	bad(r, "bad user name '%s': use a lower-case letter or '_' then up to "
	    "63 of [a-z0-9_.-]", name);
	return false;
}

static int cmd_user_add(struct control *c, struct req *r)
{
	Grantd__V1__User nu = GRANTD__V1__USER__INIT;
	const char *name = r->rq->args[0];
	char *keys[OPS_MAX_KEYS];
	size_t nkeys = 0;
	struct policy_user u;
	int rc;

	if (!name_arg(r, name))
		return 0;
	if ((rc = policy_user_load(&u, c->n, c->batch, name)) < 0)
		return rc;
	for (size_t i = 0; u.user && i < u.user->n_keys; i++)
		keys[nkeys++] = u.user->keys[i];
	for (size_t i = 1; i < r->rq->n_args; i++) {
		const char *a = r->rq->args[i];
		if (strcmp(a, "--key") || i + 1 == r->rq->n_args) {
			bad(r, "usage: grantctl user add NAME [--key "
			    "PUBKEYFILE]...");
			goto done;
		}
		a = r->rq->args[++i];
		if (!name_pubkey_ok(a)) {
			bad(r, "not an SSH public key: want one line 'TYPE "
			    "BASE64 [comment]' as in a .pub file");
			goto done;
		}
		bool dup = false;
		for (size_t j = 0; j < nkeys; j++)
			dup |= !strcmp(keys[j], a);
		if (dup)
			continue;
		if (nkeys == OPS_MAX_KEYS) {
			bad(r, "too many keys (at most %d)", OPS_MAX_KEYS);
			goto done;
		}
		keys[nkeys++] = (char *)a;
	}
	if (u.user && nkeys == u.user->n_keys) {
		refuse(r, "user '%s' already exists (with these keys)", name);
		goto done;
	}
	nu.name = (char *)name;
	nu.keys = keys;
	nu.n_keys = nkeys;
	if ((rc = emit_body(c, GRANTD__V1__OP__BODY_USER, &nu)) < 0)
		goto done;
	buf_printf(&r->out, "%s user %s (%zu key%s)\n",
		   u.user ? "updated" : "added", name, nkeys,
		   nkeys == 1 ? "" : "s");
	log_info("user %s user=%s keys=%zu", u.user ? "updated" : "added",
		 name, nkeys);
done:
	policy_user_clear(&u);
	return rc;
}

static int cmd_user_del(struct control *c, struct req *r)
{
	Grantd__V1__User nu = GRANTD__V1__USER__INIT;
	const char *name = r->rq->args[0];
	struct policy_user u;
	int rc;

	if (!name_arg(r, name))
		return 0;
	if ((rc = policy_user_load(&u, c->n, c->batch, name)) < 0)
		return rc;
	if (!u.user) {
		refuse(r, "no such user '%s'", name);
		goto done;
	}
	nu.name = (char *)name;
	SET(nu, deleted, 1);
	if ((rc = emit_body(c, GRANTD__V1__OP__BODY_USER, &nu)) < 0)
		goto done;
	if (u.enroll && (rc = end_enrollment(c, r, u.enroll)) < 0)
		goto done;
	if (!u.enroll && (rc = revoke_all(c, r, name, NULL)) < 0)
		goto done;
	buf_printf(&r->out, "deleted user %s\n", name);
	log_info("user deleted user=%s", name);
done:
	policy_user_clear(&u);
	return rc;
}

static int cmd_user_list(struct control *c, struct req *r)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	cJSON *arr = r->rq->json ? cJSON_CreateArray() : NULL;
	const char *key;
	size_t klen;
	int rc, shown = 0;

	store_iter_new(&it, c->n->store, c->batch, CF_USERS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__User *rec = grantd__v1__user__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		struct policy_user u;
		uint64_t until = 0;
		int fails = 0;
		if (!rec || rec->deleted) {
			if (rec)
				grantd__v1__user__free_unpacked(rec, NULL);
			continue;
		}
		if ((rc = policy_user_load(&u, c->n, c->batch, rec->name)) < 0 ||
		    (rc = policy_lock_state(c->n, c->batch, rec->name,
					    r->now_ms, &fails, &until)) < 0) {
			policy_user_clear(&u);
			grantd__v1__user__free_unpacked(rec, NULL);
			break;
		}
		const char *enr = u.enrolled ? "yes" : u.enroll ? "pending" : "no";
		if (arr) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "name", rec->name);
			cJSON_AddNumberToObject(o, "keys", (double)rec->n_keys);
			cJSON_AddStringToObject(o, "enrolled", enr);
			cJSON_AddBoolToObject(o, "locked", until != 0);
			cJSON_AddItemToArray(arr, o);
		} else {
			if (!shown++)
				buf_printf(&r->out, "%-20s %-5s %-8s %s\n",
					   "NAME", "KEYS", "ENROLLED",
					   "LOCKED");
			buf_printf(&r->out, "%-20s %-5zu %-8s %s\n", rec->name,
				   rec->n_keys, enr, until ? "yes" : "no");
		}
		policy_user_clear(&u);
		grantd__v1__user__free_unpacked(rec, NULL);
	}
	store_iter_free(&it);
	buf_free(&v);
	if (arr) {
		if (rc < 0)
			cJSON_Delete(arr);
		else
			print_json(r, arr);
	}
	return rc < 0 ? rc : 0;
}

static int cmd_unlock(struct control *c, struct req *r)
{
	Grantd__V1__Unlock u = GRANTD__V1__UNLOCK__INIT;
	const char *name = r->rq->args[0];
	struct policy_user pu;
	int rc;

	if (!name_arg(r, name))
		return 0;
	if ((rc = policy_user_load(&pu, c->n, c->batch, name)) < 0)
		return rc;
	bool known = pu.user != NULL;
	policy_user_clear(&pu);
	if (!known)
		return refuse(r, "no such user '%s'", name);
	u.user = (char *)name;
	if ((rc = emit_body(c, GRANTD__V1__OP__BODY_UNLOCK, &u)) < 0)
		return rc;
	buf_printf(&r->out, "unlocked user %s\n", name);
	log_info("user unlocked user=%s", name);
	return 0;
}

/* ---- admin: enrollment ---------------------------------------------------- */

static int parse_uint(const char *s, unsigned long long max,
		      unsigned long long *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return GD_EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end || *out > max ? GD_EINVAL : 0;
}

static int cmd_enroll_admin(struct control *c, struct req *r)
{
	static const char usage[] =
		"usage: grantctl enroll NAME (--totp|--hotp) [--secret BASE32 "
		"[--allow-short-secret]] [--digits 6|8] [--counter N] "
		"[--period S]";
	const char *name = r->rq->args[0], *b32 = NULL;
	unsigned long long digits = 6, counter = 0, period = 30;
	uint8_t secret[OTP_MAX_SECRET_LEN];
	size_t slen = sizeof(secret);
	int kind = 0, rc = 0;
	bool allow_short = false;
	struct policy_user u;

	if (!name_arg(r, name))
		return 0;
	for (size_t i = 1; i < r->rq->n_args; i++) {
		const char *a = r->rq->args[i];
		const char *v = i + 1 < r->rq->n_args ? r->rq->args[i + 1] : NULL;
		if (!strcmp(a, "--allow-short-secret")) {
			allow_short = true;
			continue;
		}
		if (!strcmp(a, "--totp") || !strcmp(a, "--hotp")) {
			if (kind)
				return bad(r, "give one of --totp or --hotp");
			kind = a[2] == 't' ? GRANTD__V1__OTP_KIND__OTP_TOTP :
					     GRANTD__V1__OTP_KIND__OTP_HOTP;
			continue;
		}
		if (!v)
			return bad(r, "%s", usage);
		i++;
		if (!strcmp(a, "--secret")) {
			b32 = v;
		} else if (!strcmp(a, "--digits")) {
			if (parse_uint(v, 8, &digits) < 0 ||
			    (digits != 6 && digits != 8))
				return bad(r, "--digits must be 6 or 8, not "
					   "'%s'", v);
		} else if (!strcmp(a, "--counter")) {
			if (parse_uint(v, 1ULL << 62, &counter) < 0)
				return bad(r, "--counter must be a "
					   "non-negative integer, not '%s'", v);
		} else if (!strcmp(a, "--period")) {
			if (parse_uint(v, 300, &period) < 0 || period < 10)
				return bad(r, "--period must be 10 to 300 "
					   "seconds, not '%s'", v);
		} else {
			return bad(r, "unknown option '%s'; %s", a, usage);
		}
	}
	if (!kind)
		return bad(r, "%s", usage);
	if (b32) {
		if (otp_base32_decode(secret, &slen, b32) < 0) {
			rc = bad(r, "--secret must be base32 (A-Z, 2-7)");
			goto wipe;
		}
		if (slen < OTP_MIN_SHORT_SECRET_LEN ||
		    (slen < OTP_MIN_SECRET_LEN && !allow_short)) {
			rc = bad(r, "--secret has %zu bits, fewer than 128 bits "
				 "(RFC 4226); --allow-short-secret takes 80 or "
				 "more, for a token migrated from a system "
				 "that made shorter ones", slen * 8);
			goto wipe;
		}
	} else if (allow_short) {
		return bad(r, "--allow-short-secret goes with --secret");
	} else {
		slen = OTP_NEW_SECRET_LEN;
		otp_new_secret(secret, slen);
	}
	if ((rc = policy_user_load(&u, c->n, c->batch, name)) < 0)
		goto wipe;
	if (!u.user)
		refuse(r, "no such user '%s'; add it first: grantctl user add "
		       "%s", name, name);
	else if (u.enrolled)
		refuse(r, "user '%s' is already enrolled; run 'grantctl "
		       "unenroll %s' first", name, name);
	else
		rc = make_enrollment(c, r, name, (Grantd__V1__OtpKind)kind,
				     secret, slen, (unsigned)digits,
				     (unsigned)period, counter, true);
	policy_user_clear(&u);
	if (rc == 0 && b32 && slen < OTP_MIN_SECRET_LEN && r->status == 0)
		log_warn("enrolled a short secret user=%s bits=%zu "
			 "(--allow-short-secret)", name, slen * 8);
	if (rc == 0 && b32) {
		/* the operator gave the secret: don't echo it back */
		buf_reset(&r->out);
		buf_printf(&r->out, "enrolled user %s (%s, active)\n", name,
			   kind == GRANTD__V1__OTP_KIND__OTP_TOTP ? "totp" :
								   "hotp");
		buf_reset(&r->uri);
	}
wipe:
	sodium_memzero(secret, sizeof(secret));
	return rc;
}

static int cmd_unenroll_admin(struct control *c, struct req *r)
{
	const char *name = r->rq->args[0];
	struct policy_user u;
	int rc;

	if (!name_arg(r, name))
		return 0;
	if ((rc = policy_user_load(&u, c->n, c->batch, name)) < 0)
		return rc;
	if (!u.enroll)
		refuse(r, "user '%s' is not enrolled", name);
	else if ((rc = end_enrollment(c, r, u.enroll)) == 0) {
		buf_printf(&r->out, "unenrolled user %s\n", name);
		log_info("unenrolled user=%s by=admin", name);
	}
	policy_user_clear(&u);
	return rc;
}

/* ---- admin: repositories ------------------------------------------------ */

static int mode_arg(struct req *r, const char *s, Grantd__V1__RepoMode *out)
{
	if (!strcmp(s, "off"))
		*out = GRANTD__V1__REPO_MODE__MODE_OFF;
	else if (!strcmp(s, "opt-in"))
		*out = GRANTD__V1__REPO_MODE__MODE_OPT_IN;
	else if (!strcmp(s, "required"))
		*out = GRANTD__V1__REPO_MODE__MODE_REQUIRED;
	else {
		bad(r, "bad mode '%s': use off, opt-in or required", s);
		return GD_EINVAL;
	}
	return 0;
}

static const char *mode_name(Grantd__V1__RepoMode m)
{
	return m == GRANTD__V1__REPO_MODE__MODE_OFF    ? "off" :
	       m == GRANTD__V1__REPO_MODE__MODE_OPT_IN ? "opt-in" :
							 "required";
}

static int cmd_repo_add(struct control *c, struct req *r)
{
	Grantd__V1__Repo rp = GRANTD__V1__REPO__INIT;
	Grantd__V1__RepoMode mode = GRANTD__V1__REPO_MODE__MODE_REQUIRED;
	char name[NAME_REPO_MAX + 1], parent[NAME_REPO_MAX + 1];
	char *writers[GD_CTL_MAX_ARGS];
	size_t nw = 0;
	Grantd__V1__Repo *old = NULL;
	bool fork = false;
	int rc;

	if (repo_arg(r, r->rq->args[0], name, sizeof(name)) < 0)
		return 0;
	for (size_t i = 1; i < r->rq->n_args; i++) {
		const char *a = r->rq->args[i];
		if (i + 1 == r->rq->n_args)
			return bad(r, "usage: grantctl repo add NAME [--mode "
				   "off|opt-in|required] [--writer USER]... "
				   "[--fork-of PARENT]");
		const char *v = r->rq->args[++i];
		if (!strcmp(a, "--mode")) {
			if (mode_arg(r, v, &mode) < 0)
				return 0;
		} else if (!strcmp(a, "--writer")) {
			if (!name_arg(r, v))
				return 0;
			writers[nw++] = (char *)v;
		} else if (!strcmp(a, "--fork-of")) {
			if (repo_arg(r, v, parent, sizeof(parent)) < 0)
				return 0;
			fork = true;
		} else {
			return bad(r, "unknown option '%s' (use --mode, "
				   "--writer or --fork-of)", a);
		}
	}
	rc = policy_repo_load(&old, c->n, c->batch, name);
	if (rc == 0) {
		grantd__v1__repo__free_unpacked(old, NULL);
		return refuse(r, "repository '%s' already exists", name);
	}
	if (rc != GD_ENOTFOUND)
		return rc;
	if (fork) {
		rc = policy_repo_load(&old, c->n, c->batch, parent);
		if (rc == GD_ENOTFOUND)
			return refuse(r, "cannot fork '%s': no such repository",
				      parent);
		if (rc < 0)
			return rc;
		grantd__v1__repo__free_unpacked(old, NULL);
		if (!strcmp(parent, name))
			return bad(r, "a repository cannot fork itself");
	}
	rp.name = name;
	SET(rp, mode, mode);
	rp.writers = writers;
	rp.n_writers = nw;
	rp.fork_of = fork ? parent : NULL;
	if ((rc = emit_body(c, GRANTD__V1__OP__BODY_REPO, &rp)) < 0)
		return rc;
	buf_printf(&r->out, "added repository %s (mode %s)\n", name,
		   mode_name(mode));
	return 0;
}

/* Change an existing repository: mode (args: NAME MODE) or writers
 * (args: NAME USER...). */
static int repo_change(struct control *c, struct req *r, bool writers)
{
	char name[NAME_REPO_MAX + 1];
	Grantd__V1__Repo *old = NULL;
	Grantd__V1__RepoMode mode;
	int rc;

	if (repo_arg(r, r->rq->args[0], name, sizeof(name)) < 0)
		return 0;
	if (!writers && mode_arg(r, r->rq->args[1], &mode) < 0)
		return 0;
	for (size_t i = 1; writers && i < r->rq->n_args; i++)
		if (!name_arg(r, r->rq->args[i]))
			return 0;
	rc = policy_repo_load(&old, c->n, c->batch, name);
	if (rc == GD_ENOTFOUND)
		return refuse(r, "no such repository '%s'", name);
	if (rc < 0)
		return rc;
	Grantd__V1__Repo rp = *old;
	rp.has_hlc = 0;
	rp.origin = NULL;
	if (writers) {
		rp.writers = r->rq->args + 1;
		rp.n_writers = r->rq->n_args - 1;
	} else {
		SET(rp, mode, mode);
	}
	rc = emit_body(c, GRANTD__V1__OP__BODY_REPO, &rp);
	if (rc == 0)
		buf_printf(&r->out, "updated repository %s\n", name);
	grantd__v1__repo__free_unpacked(old, NULL);
	return rc;
}

static int cmd_repo_mode(struct control *c, struct req *r)
{
	return repo_change(c, r, false);
}

static int cmd_repo_writers(struct control *c, struct req *r)
{
	return repo_change(c, r, true);
}

static int cmd_repo_list(struct control *c, struct req *r)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, w = BUF_INIT;
	cJSON *arr = r->rq->json ? cJSON_CreateArray() : NULL;
	const char *key;
	size_t klen;
	int rc, shown = 0;

	store_iter_new(&it, c->n->store, c->batch, CF_REPOS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__Repo *rp = grantd__v1__repo__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		if (!rp || rp->deleted) {
			if (rp)
				grantd__v1__repo__free_unpacked(rp, NULL);
			continue;
		}
		buf_reset(&w);
		for (size_t i = 0; i < rp->n_writers; i++)
			buf_printf(&w, "%s%s", i ? "," : "", rp->writers[i]);
		if (arr) {
			cJSON *o = cJSON_CreateObject();
			cJSON *wa = cJSON_AddArrayToObject(o, "writers");
			cJSON_AddStringToObject(o, "name", rp->name);
			cJSON_AddStringToObject(o, "mode", mode_name(rp->mode));
			for (size_t i = 0; i < rp->n_writers; i++)
				cJSON_AddItemToArray(
					wa, cJSON_CreateString(rp->writers[i]));
			cJSON_AddStringToObject(o, "fork_of",
						rp->fork_of ? rp->fork_of : "");
			cJSON_AddItemToArray(arr, o);
		} else {
			if (!shown++)
				buf_printf(&r->out, "%-30s %-9s %-20s %s\n",
					   "NAME", "MODE", "FORK_OF",
					   "WRITERS");
			buf_printf(&r->out, "%-30s %-9s %-20s %s\n", rp->name,
				   mode_name(rp->mode),
				   rp->fork_of && *rp->fork_of ? rp->fork_of :
								 "-",
				   buf_str(&w));
		}
		grantd__v1__repo__free_unpacked(rp, NULL);
	}
	store_iter_free(&it);
	buf_free(&v);
	buf_free(&w);
	if (arr)
		print_json(r, arr);
	return rc < 0 ? rc : 0;
}

/* ---- admin: grants, check, status ----------------------------------------- */

static int cmd_grant_list(struct control *c, struct req *r)
{
	struct list_opts lo = { .all = true };
	const char *user = NULL;

	for (size_t i = 0; i < r->rq->n_args; i++) {
		if (strcmp(r->rq->args[i], "--user") ||
		    i + 1 == r->rq->n_args)
			return bad(r, "usage: grantctl grant list [--user "
				   "NAME] [--json]");
		user = r->rq->args[++i];
		if (!name_arg(r, user))
			return 0;
	}
	lo.json = r->rq->json ? cJSON_CreateArray() : NULL;
	int rc = for_each_grant(c, r, user, list_one, &lo);
	if (lo.json)
		print_json(r, lo.json);
	return rc;
}

static int cmd_grant_revoke(struct control *c, struct req *r)
{
	struct inval_opts io = { 0 };
	const char *name = r->rq->args[0];
	char netstr[ADDR_STRLEN] = "";
	struct gd_net target;
	int rc;

	if (!name_arg(r, name))
		return 0;
	if (r->rq->n_args == 2 && strcmp(r->rq->args[1], "all")) {
		if (addr_parse(&target, r->rq->args[1], true) < 0)
			return bad(r, "'%s' is not an IP address or subnet; "
				   "give one, or 'all'", r->rq->args[1]);
		io.match = &target;
		addr_format(netstr, &target);
	}
	if ((rc = for_each_grant(c, r, name, inval_one, &io)) < 0)
		return rc;
	/* Recorded whatever this site knows, so that it also voids grants
	 * made before now at sites whose operations have not arrived yet
	 * (SPEC 2.4): "all" as a revocation of the user, an address as a
	 * revoked record for it (unless one was just written). */
	if (!io.match)
		rc = emit_revocation(c, name);
	else if (!io.exact)
		rc = emit_tombstone(c, r, name, io.match);
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

static int cmd_check(struct control *c, struct req *r)
{
	const char *user = r->rq->args[0], *ip = r->rq->args[1];

	if (!name_arg(r, user))
		return 0;
	if (addr_parse(&r->ip, ip, false) < 0)
		return bad(r, "'%s' is not an IP address", ip);
	return push_decision(c, r, user, r->rq->args[2]);
}

/* Whether a stored record counts in status: a user or repository not
 * deleted, a grant neither revoked nor expired, a ref that exists. */
static bool record_live(enum store_cf cf, const struct buf *v, int64_t now)
{
	const ProtobufCMessageDescriptor *d =
		cf == CF_GRANTS ? &grantd__v1__grant__descriptor :
		cf == CF_REFS	? &grantd__v1__ref__descriptor :
		cf == CF_USERS	? &grantd__v1__user__descriptor :
				  &grantd__v1__repo__descriptor;
	ProtobufCMessage *m =
		protobuf_c_message_unpack(d, NULL, v->len, (const uint8_t *)v->p);
	bool live;

	if (!m)
		return false;
	switch (cf) {
	case CF_GRANTS: {
		const Grantd__V1__Grant *g = (const Grantd__V1__Grant *)m;
		live = !g->revoked && g->expires > now;
		break;
	}
	case CF_REFS: {
		const Grantd__V1__Ref *f = (const Grantd__V1__Ref *)m;
		live = f->target && *f->target;
		break;
	}
	case CF_USERS:
		live = !((const Grantd__V1__User *)m)->deleted;
		break;
	default:
		live = !((const Grantd__V1__Repo *)m)->deleted;
		break;
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return live;
}

static int count_family(struct control *c, struct req *r, enum store_cf cf,
			int64_t *count)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	*count = 0;
	store_iter_new(&it, c->n->store, c->batch, cf, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0)
		*count += record_live(cf, &v, r->now);
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

static int cmd_rebuild(struct control *c, struct req *r)
{
	if (strcmp(r->rq->args[0], "--from"))
		return bad(r, "usage: grantctl rebuild --from SITE");
	int rc = repl_rebuild(c->n->repl, r->rq->args[1]);
	if (rc == GD_ENOTFOUND)
		return bad(r, "'%s' is not a configured peer site",
			   r->rq->args[1]);
	if (rc < 0)
		return refuse(r, "cannot reach site %s", r->rq->args[1]);
	if (c->n->gitrepl)
		gitrepl_all(c->n->gitrepl, r->rq->args[1]);
	buf_printf(&r->out, "rebuilding from %s: everything it has that this "
		   "site lacks is being fetched, repositories too; watch "
		   "'grantctl status' until lag_ops and pending_refs are 0\n",
		   r->rq->args[1]);
	return 0;
}

/* args: DIR (absolute, must not exist): a RocksDB checkpoint at DIR/store.
 * grantctl copies the repositories to DIR/repos once this answers. */
static int cmd_backup(struct control *c, struct req *r)
{
	const char *dir = r->rq->args[0];
	struct buf path = BUF_INIT;
	struct stat st;
	int rc;

	if (dir[0] != '/' || strstr(dir, "/../") || strlen(dir) > 1024)
		return bad(r, "backup DIR must be an absolute path, not '%s'",
			   dir);
	if (stat(dir, &st) == 0)
		return bad(r, "'%s' exists: give a new directory (a backup "
			   "never overwrites)", dir);
	if (mkdir(dir, 0700) < 0)
		return refuse(r, "cannot create '%s': %s", dir, strerror(errno));
	buf_printf(&path, "%s/store", dir);
	rc = store_checkpoint(c->n->store, path.p);
	if (rc == 0) {
		buf_printf(&r->out, "store checkpoint written to %s\n", path.p);
		/* the repository root, for grantctl to copy */
		buf_puts(&r->path, c->n->cfg->repo_dir);
		log_info("backup written dir=%s", dir);
	} else {
		rc = refuse(r, "checkpoint failed (see the node's log)");
	}
	buf_free(&path);
	return rc;
}

/* The tips kept under refs/grantd/conflicts (CF_LOSERS entries gitrepl
 * marked "kept"; the others are still being looked at). */
static int add_conflicts(struct control *c, cJSON *arr)
{
	struct store_iter *it;
	struct buf v = BUF_INIT, name = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	store_iter_new(&it, c->n->store, c->batch, CF_LOSERS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		const char *repo = key, *ref, *site;
		size_t a = strnlen(key, klen), b, d;
		if (a + 1 >= klen || v.len != 40 + strlen(" kept") ||
		    memcmp(v.p + 40, " kept", 5))
			continue;
		ref = key + a + 1;
		b = strnlen(ref, klen - a - 1);
		if (a + 1 + b + 1 >= klen)
			continue;
		site = ref + b + 1;
		d = strnlen(site, klen - a - b - 2);
		if (a + b + d + 3 + 8 != klen)
			continue;
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "repo", repo);
		cJSON_AddStringToObject(e, "ref", ref);
		cJSON_AddStringToObject(e, "site", site);
		v.p[40] = '\0';
		cJSON_AddStringToObject(e, "tip", v.p);
		buf_reset(&name);
		buf_printf(&name, "refs/grantd/conflicts/%s/%s", site, ref);
		cJSON_AddStringToObject(e, "kept_as", name.p);
		cJSON_AddItemToArray(arr, e);
	}
	store_iter_free(&it);
	buf_free(&v);
	buf_free(&name);
	return rc < 0 ? rc : 0;
}

static int cmd_status(struct control *c, struct req *r)
{
	struct node *n = c->n;
	char digest[2 * DIGEST_LEN + 1];
	int64_t users, grants, repos, refs;
	cJSON *j, *applied, *peers, *counts;
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	int rc;

	if ((rc = count_family(c, r, CF_USERS, &users)) < 0 ||
	    (rc = count_family(c, r, CF_GRANTS, &grants)) < 0 ||
	    (rc = count_family(c, r, CF_REPOS, &repos)) < 0 ||
	    (rc = count_family(c, r, CF_REFS, &refs)) < 0)
		return rc;
	digest_hex(digest, n->ops.digest);
	j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "site", n->ops.site);
	cJSON_AddStringToObject(j, "digest", digest);
	{
		/* beyond 2^53: a JSON integer written as text, not a double */
		char h[24];
		snprintf(h, sizeof(h), "%llu",
			 (unsigned long long)n->ops.hlc.last);
		cJSON_AddRawToObject(j, "hlc", h);
	}
	{
		char ep[17];
		snprintf(ep, sizeof(ep), "%016llx",
			 (unsigned long long)n->ops.epoch);
		cJSON_AddStringToObject(j, "epoch", ep);
	}
	applied = cJSON_AddObjectToObject(j, "applied");
	cJSON *vector = cJSON_AddArrayToObject(j, "vector");
	for (size_t i = 0; i < n->ops.nvv; i++) {
		cJSON *e = cJSON_CreateObject();
		char ep[17];
		snprintf(ep, sizeof(ep), "%016llx",
			 (unsigned long long)n->ops.vv[i].epoch);
		cJSON_AddStringToObject(e, "origin", n->ops.vv[i].origin);
		cJSON_AddStringToObject(e, "epoch", ep);
		cJSON_AddNumberToObject(e, "seq", (double)n->ops.vv[i].seq);
		cJSON_AddItemToArray(vector, e);
	}
	store_iter_new(&it, n->store, c->batch, CF_VV, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		size_t ol = strnlen(key, klen);
		char origin[NAME_SITE_MAX + 1];
		if (ol > NAME_SITE_MAX || v.len != 8)
			continue;
		memcpy(origin, key, ol);
		origin[ol] = '\0';
		double seq = (double)store_get_be64(v.p);
		cJSON *prev = cJSON_GetObjectItem(applied, origin);
		if (prev)
			cJSON_SetNumberValue(prev, prev->valuedouble + seq);
		else
			cJSON_AddNumberToObject(applied, origin, seq);
	}
	store_iter_free(&it);
	buf_free(&v);
	peers = cJSON_AddArrayToObject(j, "peers");
	repl_status(n->repl, peers, r->now_ms);
	cJSON_AddBoolToObject(j, "syncing", n->syncing);
	repl_metrics(n->repl, cJSON_AddObjectToObject(j, "replication"));
	if (n->gitrepl)
		gitrepl_status(n->gitrepl, cJSON_AddObjectToObject(j, "git"));
	if ((rc = add_conflicts(c, cJSON_AddArrayToObject(j, "conflicts"))) < 0) {
		cJSON_Delete(j);
		return rc;
	}
	counts = cJSON_AddObjectToObject(j, "counts");
	cJSON_AddNumberToObject(counts, "users", (double)users);
	cJSON_AddNumberToObject(counts, "grants", (double)grants);
	cJSON_AddNumberToObject(counts, "repos", (double)repos);
	cJSON_AddNumberToObject(counts, "refs", (double)refs);
	cJSON_AddNumberToObject(counts, "dropped", (double)n->ops.dropped);
	cJSON_AddNumberToObject(counts, "bad_requests",
				(double)n->bad_requests);
	cJSON_AddNumberToObject(counts, "refused_peers",
				(double)repl_refused(n->repl));
	if (r->rq->json) {
		print_json(r, j);
		return 0;
	}
	buf_printf(&r->out, "site:     %s\nepoch:    %016llx\nhlc:      "
		   "%llu\ndigest:   %s\nusers:    %lld\ngrants:   %lld (live)\n"
		   "repos:    %lld\ndropped:  %llu\n",
		   n->ops.site, (unsigned long long)n->ops.epoch,
		   (unsigned long long)n->ops.hlc.last, digest,
		   (long long)users, (long long)grants, (long long)repos,
		   (unsigned long long)n->ops.dropped);
	cJSON *o;
	cJSON_ArrayForEach(o, applied)
		buf_printf(&r->out, "applied:  %s %.0f\n", o->string,
			   o->valuedouble);
	cJSON_ArrayForEach(o, peers) {
		cJSON *con = cJSON_GetObjectItem(o, "connected");
		buf_printf(&r->out, "peer:     %s %s last_heard_ms=%.0f "
			   "lag_ops=%.0f lag_ms=%.0f\n",
			   cJSON_GetObjectItem(o, "site")->valuestring,
			   cJSON_IsTrue(con) ? "connected" : "NOT CONNECTED",
			   cJSON_GetObjectItem(o, "last_heard_ms")->valuedouble,
			   cJSON_GetObjectItem(o, "lag_ops")->valuedouble,
			   cJSON_GetObjectItem(o, "lag_ms")->valuedouble);
	}
	cJSON *git = cJSON_GetObjectItem(j, "git");
	if (git)
		buf_printf(&r->out, "git:      pending_refs=%.0f packs_fetched=%.0f "
			   "fetch_failures=%.0f packs_served=%.0f\n",
			   cJSON_GetObjectItem(git, "pending_refs")->valuedouble,
			   cJSON_GetObjectItem(git, "packs_fetched")->valuedouble,
			   cJSON_GetObjectItem(git, "fetch_failures")->valuedouble,
			   cJSON_GetObjectItem(git, "packs_served")->valuedouble);
	cJSON_ArrayForEach(o, cJSON_GetObjectItem(j, "conflicts"))
		buf_printf(&r->out, "conflict: repo=%s ref=%s site=%s tip=%s "
			   "kept_as=%s\n",
			   cJSON_GetObjectItem(o, "repo")->valuestring,
			   cJSON_GetObjectItem(o, "ref")->valuestring,
			   cJSON_GetObjectItem(o, "site")->valuestring,
			   cJSON_GetObjectItem(o, "tip")->valuestring,
			   cJSON_GetObjectItem(o, "kept_as")->valuestring);
	if (n->syncing)
		buf_puts(&r->out, "syncing:  yes (token validation waits)\n");
	cJSON_Delete(j);
	return 0;
}

/* ---- rekey ----------------------------------------------------------------- */

/* The sealing key of the CURVE key file at path (checked as at start:
 * mode 0600, a pair that belongs together); 0 or a bad() reply. */
static int rekey_load(struct req *r, const char *path,
		      uint8_t seal[STORE_SEAL_KEY_LEN],
		      char pub[Z85_KEY_LEN + 1])
{
	char sec[Z85_KEY_LEN + 1], derived[Z85_KEY_LEN + 1];
	uint8_t raw[32];
	struct buf err = BUF_INIT;
	int rc = 0;

	if (config_read_keyfile(path, pub, sec, &err) < 0)
		rc = bad(r, "%s", err.p);
	else if (!zmq_z85_decode(raw, sec) ||
		 zmq_curve_public(derived, sec) != 0 || strcmp(derived, pub))
		rc = bad(r, "%s: the public and secret keys do not belong "
			 "together (make a new pair with grantctl keygen)",
			 path);
	else
		store_seal_key(seal, raw);
	sodium_memzero(sec, sizeof(sec));
	sodium_memzero(raw, sizeof(raw));
	buf_free(&err);
	return rc < 0 ? rc : r->status ? 1 : 0;
}

/* args: NEWKEYFILE (absolute): re-seal every stored secret under the
 * sealing key of that CURVE key file, in this batch (atomic).  The node
 * keeps its current CURVE key until it is restarted with the new file. */
static int cmd_rekey(struct control *c, struct req *r)
{
	const char *path = r->rq->args[0];
	uint8_t seal[STORE_SEAL_KEY_LEN];
	char pub[Z85_KEY_LEN + 1];
	size_t count = 0;
	int rc;

	if (path[0] != '/' || strlen(path) > 1024)
		return bad(r, "rekey NEWKEYFILE must be an absolute path, not "
			   "'%s'", path);
	if ((rc = rekey_load(r, path, seal, pub)) != 0)
		return rc < 0 ? rc : 0;
	if (!strcmp(pub, c->n->curve_pub)) {
		sodium_memzero(seal, sizeof(seal));
		return bad(r, "%s holds the node's current key; make a new one "
			   "with grantctl keygen", path);
	}
	rc = store_rekey(c->n->store, c->batch, seal, &count);
	sodium_memzero(seal, sizeof(seal));
	if (rc == GD_EAGAIN)
		return refuse(r, "another rekey is in progress; try again");
	if (rc < 0)
		return rc;
	r->wrote = true; /* answer once durable */
	log_info("store rekeyed values=%zu new_key=%s public_key=%s", count,
		 path, pub);
	buf_printf(&r->out,
		   "re-sealed %zu stored values under the key in %s\n"
		   "now set 'secret_key = %s' in %s and restart grantd;\n"
		   "its public key becomes %s: set it as public_key of "
		   "[peer %s] at every other site\n",
		   count, path, path, c->n->conf_path, pub, c->n->cfg->site);
	return 0;
}

/* grantctl verify: the digest made again from the records on disk against
 * the live one (SPEC 3.5).  A family whose share differs is named: the
 * records of that family and the digest parted.  The digest holds no
 * record, so it cannot name one; two sites' per-family digests (--json)
 * tell which family to compare when their states differ. */
static int cmd_verify(struct control *c, struct req *r)
{
	struct ops_verify *v = calloc(1, sizeof(*v));
	char live[2 * DIGEST_LEN + 1], stored[2 * DIGEST_LEN + 1];
	char disk[2 * DIGEST_LEN + 1], h[2 * DIGEST_LEN + 1];
	struct buf differs = BUF_INIT;
	cJSON *j, *fams;
	int rc;

	if (!v)
		abort();
	if ((rc = ops_verify(&c->n->ops, v)) < 0) {
		free(v);
		return rc;
	}
	digest_hex(live, v->live);
	digest_hex(stored, v->stored);
	digest_hex(disk, v->disk);
	j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "site", c->n->ops.site);
	cJSON_AddBoolToObject(j, "equal", v->equal);
	cJSON_AddStringToObject(j, "live", live);
	cJSON_AddStringToObject(j, "stored", stored);
	cJSON_AddStringToObject(j, "recomputed", disk);
	fams = cJSON_AddArrayToObject(j, "families");
	cJSON *dj = cJSON_AddArrayToObject(j, "differs");
	buf_printf(&r->out, "site:       %s\nlive:       %s\nstored:     %s\n"
		   "recomputed: %s\n", c->n->ops.site, live, stored, disk);
	for (int cf = 0; cf < CF__COUNT; cf++) {
		if (!v->covered[cf])
			continue;
		bool same = !memcmp(v->live_fam[cf], v->disk_fam[cf],
				    DIGEST_LEN);
		const char *name = store_cf_name(cf);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "family", name);
		cJSON_AddNumberToObject(o, "records", (double)v->records[cf]);
		digest_hex(h, v->disk_fam[cf]);
		cJSON_AddStringToObject(o, "recomputed", h);
		buf_printf(&r->out, "family:     %-8s records=%llu "
			   "recomputed=%.16s", name,
			   (unsigned long long)v->records[cf], h);
		digest_hex(h, v->live_fam[cf]);
		cJSON_AddStringToObject(o, "live", h);
		cJSON_AddBoolToObject(o, "equal", same);
		cJSON_AddItemToArray(fams, o);
		if (!same) {
			buf_printf(&r->out, " live=%.16s DIFFERS", h);
			buf_printf(&differs, "%s%s", differs.len ? " " : "",
				   name);
			cJSON_AddItemToArray(dj, cJSON_CreateString(name));
		}
		buf_puts(&r->out, "\n");
	}
	if (r->rq->json) {
		buf_reset(&r->out);
		print_json(r, j);
	} else {
		cJSON_Delete(j);
	}
	if (!v->equal) {
		log_error("verify: the live digest does not match the records "
			  "live=%s stored=%s recomputed=%s families=%s", live,
			  stored, disk, differs.len ? differs.p : "-");
		refuse(r, "the state digest does not match the records on "
		       "disk (live %.16s, stored %.16s, recomputed %.16s; "
		       "families differing: %s); restarting the node "
		       "recomputes it from the records", live, stored, disk,
		       differs.len ? differs.p : "none, only the total");
	}
	buf_free(&differs);
	free(v);
	return 0;
}

/* ---- dispatch ------------------------------------------------------------ */

static const struct cmd cmds[] = {
	{ "2fa.enroll", ON_USER, false, 0, 1, cmd_enroll_self },
	{ "2fa.val", ON_USER, true, 1, 1, cmd_val },
	{ "2fa.val-for-days", ON_USER, true, 2, 2, cmd_val_for_days },
	{ "2fa.val-subnet", ON_USER, true, 2, 2, cmd_val_subnet },
	{ "2fa.val-session", ON_USER, true, 1, 1, cmd_val_session },
	{ "2fa.isval", ON_USER | READS, true, 0, 0, cmd_isval },
	{ "2fa.list-val", ON_USER | READS, true, 0, 1, cmd_list_val },
	{ "2fa.inval", ON_USER, true, 1, 2, cmd_inval },
	{ "2fa.unenroll", ON_USER, true, 1, 1, cmd_unenroll_self },
	{ "push.check", ON_USER | READS, true, 1, 1, cmd_push_check },
	{ "repo.read", ON_USER | ON_ADMIN | READS, false, 1, 1, cmd_repo_read },
	{ "keys.list", ON_USER | ON_ADMIN | READS, false, 0, 0, cmd_keys },
	{ "hook.refs", ON_USER | ON_ADMIN, false, 2, GD_CTL_MAX_ARGS,
	  cmd_hook_refs },
	{ "user.add", ON_ADMIN, false, 1, GD_CTL_MAX_ARGS, cmd_user_add },
	{ "user.del", ON_ADMIN, false, 1, 1, cmd_user_del },
	{ "user.list", ON_ADMIN | READS, false, 0, 0, cmd_user_list },
	{ "unlock", ON_ADMIN, false, 1, 1, cmd_unlock },
	{ "enroll", ON_ADMIN, false, 2, 11, cmd_enroll_admin },
	{ "unenroll", ON_ADMIN, false, 1, 1, cmd_unenroll_admin },
	{ "repo.add", ON_ADMIN, false, 1, GD_CTL_MAX_ARGS, cmd_repo_add },
	{ "repo.mode", ON_ADMIN, false, 2, 2, cmd_repo_mode },
	{ "repo.writers", ON_ADMIN, false, 1, GD_CTL_MAX_ARGS,
	  cmd_repo_writers },
	{ "repo.list", ON_ADMIN | READS, false, 0, 0, cmd_repo_list },
	{ "grant.list", ON_ADMIN | READS, false, 0, 2, cmd_grant_list },
	{ "grant.revoke", ON_ADMIN, false, 1, 2, cmd_grant_revoke },
	{ "check", ON_ADMIN | READS, false, 3, 3, cmd_check },
	{ "status", ON_ADMIN | READS, false, 0, 0, cmd_status },
	{ "verify", ON_ADMIN | READS, false, 0, 0, cmd_verify },
	{ "rebuild", ON_ADMIN, false, 2, 2, cmd_rebuild },
	{ "backup", ON_ADMIN | READS, false, 1, 1, cmd_backup },
	{ "rekey", ON_ADMIN, false, 1, 1, cmd_rekey },
};

static int dispatch(struct control *c, struct req *r)
{
	const struct cmd *cmd = NULL;
	Grantd__V1__Request *rq = r->rq;

	for (size_t i = 0; i < GD_ARRAY_SIZE(cmds); i++)
		if (!strcmp(cmds[i].name, rq->cmd))
			cmd = &cmds[i];
	if (!cmd)
		return bad(r, "unknown command '%s'", rq->cmd);
	if (r->reads_only != !!(cmd->where & READS))
		return GD_EAGAIN;
	if (!(cmd->where & (r->admin ? ON_ADMIN : ON_USER))) {
		log_warn("command refused on this socket cmd=%s socket=%s",
			 rq->cmd, r->admin ? "admin" : "user");
		return refuse(r, "'%s' is not allowed on this socket", rq->cmd);
	}
	if ((int)rq->n_args < cmd->min_args || (int)rq->n_args > cmd->max_args)
		return bad(r, "wrong number of arguments for '%s'", rq->cmd);
	if (!r->admin && (!strncmp(rq->cmd, "2fa.", 4) ||
			  !strncmp(rq->cmd, "push.", 5)) &&
	    (!rq->user || !*rq->user))
		return bad(r, "no user given");
	/* A node catching up may not know the user, or that a token was
	 * used elsewhere: no 2fa change until it is level with its peers. */
	if (!r->admin && !strncmp(rq->cmd, "2fa.", 4) && c->n->syncing)
		return refuse(r, "This site is catching up with its peers; "
			      "try again in a few seconds.");
	if (cmd->uses_ip && (!rq->client_ip ||
			     addr_parse(&r->ip, rq->client_ip, false) < 0))
		return bad(r, "no valid client address (is SSH_CONNECTION "
			   "set?)");
	/* a read answers from committed state only */
	struct store_batch *b = c->batch;
	if (cmd->where & READS)
		c->batch = NULL;
	int rc = cmd->fn(c, r);
	c->batch = b;
	return rc;
}

/* ---- sockets and batches -------------------------------------------------- */

static void *bind_socket(void *zctx, const char *path, mode_t mode,
			 bool group_git)
{
	void *s = zmq_socket(zctx, ZMQ_ROUTER);
	/* frames up to 16 times the request limit get an error answer from
	 * control_decode; only larger ones are dropped by ZeroMQ unanswered */
	int64_t max = 16 * GD_CTL_MAX_REQUEST;
	int zero = 0, one = 1;
	char ep[4200];

	if (!s)
		return NULL;
	zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof(max));
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
	unlink(path);
	snprintf(ep, sizeof(ep), "ipc://%s", path);
	if (zmq_bind(s, ep) < 0) {
		log_error("cannot bind socket path=%s: %s", path,
			  zmq_strerror(errno));
		zmq_close(s);
		return NULL;
	}
	if (chmod(path, mode) < 0)
		log_warn("cannot chmod socket path=%s: %s", path,
			 strerror(errno));
	if (group_git) {
		struct group *g = getgrnam("git");
		if (g && chown(path, (uid_t)-1, g->gr_gid) < 0)
			log_warn("cannot chgrp git socket path=%s: %s", path,
				 strerror(errno));
	}
	return s;
}

int control_open(struct control **out, struct node *node, void *zctx)
{
	struct control *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	c->n = node;
	c->user_sock = bind_socket(zctx, node->cfg->user_socket, 0660, true);
	c->admin_sock = bind_socket(zctx, node->cfg->admin_socket, 0600, false);
	if (!c->user_sock || !c->admin_sock) {
		control_destroy(&c);
		*out = NULL;
		return GD_EIO;
	}
	c->batch = writer_batch(node->writer); /* borrowed: THE batch */
	*out = c;
	return 0;
}

void control_destroy(struct control **cp)
{
	struct control *c = *cp;
	if (!c)
		return;
	if (c->user_sock) {
		zmq_close(c->user_sock);
		unlink(c->n->cfg->user_socket);
	}
	if (c->admin_sock) {
		zmq_close(c->admin_sock);
		unlink(c->n->cfg->admin_socket);
	}
	free(c);
	*cp = NULL;
}

void *control_user_socket(struct control *c)
{
	return c->user_sock;
}

void *control_admin_socket(struct control *c)
{
	return c->admin_sock;
}

/* A request is [id][""][payload frames]: REQ clients send one payload
 * frame; a few more are tolerated, and their total is GD_CTL_MAX_REQUEST. */
#define CTL_MAX_FRAMES 16

/*
 * Read one [id][""][payload] message; 1 read, 0 none waiting, <0 error:
 * GD_ETOOBIG for more than CTL_MAX_FRAMES frames or a payload over
 * GD_CTL_MAX_REQUEST (the rest of it is read and dropped as it comes, never
 * kept; ident is kept, to answer), GD_EPROTO for a bad envelope.  Frames
 * are wiped once copied: a request may carry a secret.  payload never
 * grows past GD_CTL_MAX_REQUEST + 1, so it is never moved by realloc with
 * a copy left behind; the caller wipes it.
 */
static int recv_one(void *sock, struct buf *ident, struct buf *payload)
{
	int frame = 0, more = 1, rc = 1;

	buf_reset(ident);
	if (payload->p)
		sodium_memzero(payload->p, payload->cap);
	buf_reset(payload);
	if (payload->cap < GD_CTL_MAX_REQUEST + 1) {
		buf_extend(payload, GD_CTL_MAX_REQUEST);
		buf_reset(payload);
	}
	while (more) {
		zmq_msg_t m;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, sock, frame ? 0 : ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return frame ? GD_EIO : 0;
		}
		size_t len = zmq_msg_size(&m);
		if (frame == 1 && len != 0)
			rc = GD_EPROTO;
		else if (frame >= CTL_MAX_FRAMES ||
			 (frame >= 2 && len > GD_CTL_MAX_REQUEST - payload->len))
			rc = rc == 1 ? GD_ETOOBIG : rc;
		if (frame == 0 && len <= 256)
			buf_add(ident, zmq_msg_data(&m), len);
		else if (frame >= 2 && rc == 1)
			buf_add(payload, zmq_msg_data(&m), len);
		more = zmq_msg_more(&m);
		if (frame >= 2)
			sodium_memzero(zmq_msg_data(&m), len);
		zmq_msg_close(&m);
		frame++;
	}
	if (rc == 1 && frame < 3)
		rc = GD_EPROTO;
	if (rc < 0)
		sodium_memzero(payload->p, payload->cap);
	return rc;
}

static void send_reply(struct req *r)
{
	Grantd__V1__Reply rep = GRANTD__V1__REPLY__INIT;
	uint8_t *frame;
	size_t len;

	SET(rep, status, r->status);
	rep.out = r->out.len ? r->out.p : NULL;
	rep.err = r->err.len ? r->err.p : NULL;
	rep.otpauth_uri = r->uri.len ? r->uri.p : NULL;
	rep.path = r->path.len ? r->path.p : NULL;
	len = grantd__v1__reply__get_packed_size(&rep);
	frame = malloc(len ? len : 1);
	if (!frame)
		abort();
	grantd__v1__reply__pack(&rep, frame);
	/* never block the node on a client that does not read its answers */
	if (zmq_send(r->sock, r->ident.p, r->ident.len,
		     ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(r->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(r->sock, frame, len, ZMQ_DONTWAIT) < 0)
		log_warn("reply not delivered: %s", zmq_strerror(errno));
	/* the reply may hold a fresh secret (enroll) */
	sodium_memzero(frame, len);
	free(frame);
}

static void req_free(struct req *r)
{
	/* arguments may carry a secret (grantctl enroll --secret) */
	for (size_t i = 0; r->rq && i < r->rq->n_args; i++)
		sodium_memzero(r->rq->args[i], strlen(r->rq->args[i]));
	if (r->rq)
		grantd__v1__request__free_unpacked(r->rq, NULL);
	if (r->out.p)
		sodium_memzero(r->out.p, r->out.len);
	if (r->uri.p)
		sodium_memzero(r->uri.p, r->uri.len);
	buf_free(&r->out);
	buf_free(&r->err);
	buf_free(&r->uri);
	buf_free(&r->path);
	buf_free(&r->ident);
}

/* A request over the bounds: counted, logged and answered. */
static void refuse_oversized(struct control *c, struct req *r, void *sock,
			     bool admin)
{
	c->n->bad_requests++;
	log_warn("bad request dropped socket=%s: more than %d frames or %d "
		 "bytes", admin ? "admin" : "user", CTL_MAX_FRAMES,
		 GD_CTL_MAX_REQUEST);
	r->sock = sock;
	bad(r, "bad request: request too large (at most %d bytes in %d "
	    "frames)", GD_CTL_MAX_REQUEST, CTL_MAX_FRAMES - 2);
	send_reply(r);
	req_free(r);
	memset(r, 0, sizeof(*r));
}

/* Replies held until their batch is durable (writer_hold). */
struct held {
	struct req *reqs;
	int n;
};

/* The writer's end of a hold: answer once durable; free either way (a
 * writer going away first drops them unanswered: the callers see the node
 * go away and fail closed). */
static void held_done(void *item, bool durable)
{
	struct held *h = item;

	for (int i = 0; i < h->n; i++) {
		if (durable)
			send_reply(&h->reqs[i]);
		req_free(&h->reqs[i]);
	}
	free(h->reqs);
	free(h);
}

/* Handle the writes of reqs against the batch, but those that failed
 * before.  Returns 0, or 1 + the index of the first request whose handler
 * failed (its code in *err; the ones after it are not handled). */
static int handle_writes(struct control *c, struct req *reqs, int n,
			 int *held, int *err)
{
	*held = 0;
	for (int i = 0; i < n; i++) {
		struct req *r = &reqs[i];
		if (!r->rq || r->failed)
			continue;
		uint64_t seq = c->n->ops.seq;
		int rc = dispatch(c, r);
		if (rc < 0) {
			log_failed(r, rc);
			*err = rc;
			return i + 1;
		}
		/* a handler may hold its answer without writing (a push
		 * recorded in this very batch) */
		r->wrote = r->wrote || c->n->ops.seq != seq;
		*held += r->wrote;
	}
	return 0;
}

/* Empty the answers of the requests of a batch that will not be
 * written. */
static void answers_reset(struct req *reqs, int n)
{
	for (int i = 0; i < n; i++) {
		if (!reqs[i].rq)
			continue; /* answered when it was read */
		buf_reset(&reqs[i].out);
		buf_reset(&reqs[i].uri);
		buf_reset(&reqs[i].path);
		buf_reset(&reqs[i].err);
		reqs[i].status = GD_EXIT_OK;
		reqs[i].wrote = false;
	}
}

/* Nothing of the batch will be written: drop it, forget the in-memory
 * advances it made (writer_discard), and empty the answers of the
 * requests in it. */
static void batch_discard(struct control *c, struct req *reqs, int n)
{
	writer_discard(c->n->writer);
	answers_reset(reqs, n);
}

int control_serve_batch(struct control *c, int max)
{
	struct req *reqs = calloc((size_t)max, sizeof(*reqs));
	struct buf payload = BUF_INIT;
	void *socks[2] = { c->user_sock, c->admin_sock };
	int n = 0, failed = 0, held = 0;
	uint64_t now_ms = hlc_wall_ms();

	if (!reqs)
		abort();
	/* Read whatever is waiting on either socket, alternating. */
	for (bool progress = true; progress && n < max;) {
		progress = false;
		for (int s = 0; s < 2 && n < max; s++) {
			struct req *r = &reqs[n];
			int got = recv_one(socks[s], &r->ident, &payload);
			if (got == 0)
				continue;
			progress = true;
			if (got == GD_ETOOBIG) {
				refuse_oversized(c, r, socks[s], s == 1);
				continue;
			}
			if (got < 0) {
				buf_free(&r->ident);
				continue;
			}
			r->sock = socks[s];
			r->admin = s == 1;
			r->now_ms = now_ms;
			r->now = (int64_t)(now_ms / 1000);
			struct buf why = BUF_INIT;
			if (control_decode(&r->rq, (const uint8_t *)payload.p,
					   payload.len, &why) < 0) {
				c->n->bad_requests++;
				log_warn("bad request dropped socket=%s: %s",
					 r->admin ? "admin" : "user", why.p);
				bad(r, "bad request: %s", why.p);
			} else {
				/* reads are answered now, writes after the
				 * commit */
				r->reads_only = true;
				int drc = dispatch(c, r);
				r->reads_only = false;
				if (drc != GD_EAGAIN) {
					if (drc < 0) {
						log_failed(r, drc);
						undecided(r, drc);
					}
					send_reply(r);
					req_free(r);
					memset(r, 0, sizeof(*r));
					buf_free(&why);
					continue;
				}
			}
			buf_free(&why);
			n++;
		}
	}
	if (payload.p)
		sodium_memzero(payload.p, payload.cap); /* may hold a secret */
	buf_free(&payload);
	/* A handler that fails may leave part of its changes in the batch,
	 * which cannot be taken out alone: the batch is dropped and the
	 * others are handled again in a fresh one, without it, so that no
	 * request fails because another of its batch did.  Each round
	 * leaves one more out. */
	int which, err = 0;
	while ((which = handle_writes(c, reqs, n, &held, &err)) > 0) {
		reqs[which - 1].failed = err;
		batch_discard(c, reqs, n);
		log_warn("batch dropped, its other requests handled again "
			 "without the failed one cmd=%s", reqs[which - 1].rq->cmd);
	}
	/* Written now (visible to the next batch), durable when the syncer
	 * says so: only then are the writers answered. */
	uint64_t ticket;
	failed = writer_commit(c->n->writer, &ticket);
	if (failed) {
		/* Nothing of this batch is written (the writer dropped it):
		 * say so to every caller. */
		answers_reset(reqs, n);
		held = 0;
		for (int i = 0; i < n; i++)
			if (reqs[i].rq)
				reqs[i].failed = failed;
	}
	for (int i = 0; i < n; i++)
		if (reqs[i].rq && reqs[i].failed)
			undecided(&reqs[i], reqs[i].failed);
	struct held *h = NULL;
	if (held) {
		h = calloc(1, sizeof(*h));
		if (!h || !(h->reqs = calloc((size_t)held, sizeof(*h->reqs))))
			abort();
	}
	for (int i = 0; i < n; i++) {
		if (h && reqs[i].wrote) {
			h->reqs[h->n++] = reqs[i];
			continue;
		}
		send_reply(&reqs[i]);
		req_free(&reqs[i]);
	}
	/* the batch's operations went to the writer with its ticket: they
	 * are published, then these replies sent, once it is durable */
	if (h)
		writer_hold(c->n->writer, ticket, held_done, h);
	free(reqs);
	return failed ? failed : n;
}
