/*
 * cmd.c: the command table, a row's rules, and the pieces every handler
 * uses (replies, argument parsing, making an operation).  The handlers
 * themselves are in cmd_grant.c, cmd_user.c, cmd_repo.c and cmd_node.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "wire.h"
#include "xalloc.h"
#include "banned.h"

/* ---- the table ---------------------------------------------------------- */

static const struct gd_2fa_cmd cmds_2fa[] = { GD_2FA_CMDS(GD_2FA_INIT) };

static const struct {
	const struct cmd *rows;
	const size_t *n;
} slices[] = {
	{ cmd_grant_rows, &cmd_grant_nrows },
	{ cmd_user_rows, &cmd_user_nrows },
	{ cmd_repo_rows, &cmd_repo_nrows },
	{ cmd_node_rows, &cmd_node_nrows },
	{ cmd_log_rows, &cmd_log_nrows },
};

/* Whether row's flags agree with each other; why names the first that
 * does not. */
static bool row_ok(const struct cmd *c, const char **why)
{
	unsigned f = c->flags;

	*why = NULL;
	if (!(f & (CMD_ON_USER | CMD_ON_ADMIN)))
		*why = "allowed on no socket";
	else if (!(f & CMD_READS) == !(f & CMD_BATCH))
		*why = "not exactly one of CMD_READS and CMD_BATCH";
	else if ((f & (CMD_NEEDS_USER | CMD_SYNC_GATED)) && !(f & CMD_ON_USER))
		*why = "a user-socket rule on an admin-only command";
	else if (c->twofa && !(f & CMD_ON_USER))
		*why = "a 2fa subcommand not on the user socket";
	else if (c->min_args < 0 || c->min_args > c->max_args)
		*why = "bad argument bounds";
	else if (!c->fn || !c->name)
		*why = "no name or no handler";
	return !*why;
}

int cmd_table_new(struct cmd_table **out)
{
	struct cmd_table *t = xcalloc(1, sizeof(*t));
	bool seen[GD_2FA__COUNT] = { false };
	size_t total = 0;
	int rc = 0;

	*out = NULL;
	for (size_t s = 0; s < GD_ARRAY_SIZE(slices); s++)
		total += *slices[s].n;
	t->rows = xcalloc(total, sizeof(*t->rows));
	for (size_t s = 0; s < GD_ARRAY_SIZE(slices); s++) {
		for (size_t i = 0; i < *slices[s].n; i++) {
			struct cmd c = slices[s].rows[i];
			const char *why;
			if (c.twofa > GD_2FA__NONE && c.twofa < GD_2FA__COUNT) {
				const struct gd_2fa_cmd *d = &cmds_2fa[c.twofa];
				why = seen[c.twofa] ? "2fa subcommand twice" :
						      NULL;
				seen[c.twofa] = true;
				c.name = d->request;
				c.min_args = d->min_args;
				c.max_args = d->max_args;
			} else {
				why = c.twofa ? "unknown 2fa subcommand" : NULL;
			}
			if (!why && row_ok(&c, &why) &&
			    cmd_table_find(t, c.name))
				why = "name twice";
			if (why) {
				log_error("bad command table cmd=%s: %s",
					  c.name ? c.name : "-", why);
				rc = GD_EINVAL;
			}
			t->rows[t->n++] = c;
		}
	}
	for (int i = GD_2FA__NONE + 1; i < GD_2FA__COUNT; i++) {
		if (!seen[i]) {
			log_error("bad command table cmd=%s: no row",
				  cmds_2fa[i].request);
			rc = GD_EINVAL;
		}
	}
	if (rc < 0)
		cmd_table_free(&t);
	*out = t;
	return rc;
}

void cmd_table_free(struct cmd_table **tp)
{
	if (!*tp)
		return;
	free((*tp)->rows);
	free(*tp);
	*tp = NULL;
}

const struct cmd *cmd_table_find(const struct cmd_table *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->rows[i].name && !strcmp(t->rows[i].name, name))
			return &t->rows[i];
	return NULL;
}

/* A CMD_FRONTEND row asked of a mirror: refused, naming where to go. */
static void refuse_on_mirror(struct req *r, const struct config *cfg,
			     const char *host)
{
	struct buf fronts = BUF_INIT;
	bool push = !strcmp(r->rq->cmd, "push.check") ||
		    !strcmp(r->rq->cmd, "vref.check");

	for (int i = 0; i < cfg->npeers; i++)
		if (cfg->peers[i].role == CONFIG_ROLE_FRONTEND)
			buf_printf(&fronts, "%s%s", fronts.len ? ", " : "",
				   cfg->peers[i].site);
	log_info("command refused on a mirror cmd=%s", r->rq->cmd);
	cmd_refuse(r, "this is a read-only mirror of %s; %s one of: %s",
		   host ? host : cfg->site,
		   push ? "push to" : r->admin ? "run it at" :
						  "use 2fa at",
		   fronts.len ? fronts.p : "(no frontend configured)");
	buf_free(&fronts);
}

int cmd_admit(const struct cmd *cmd, struct req *r, const struct config *cfg,
	      const char *host, bool syncing)
{
	Grantd__V1__Request *rq = r->rq;

	if (!(cmd->flags & (r->admin ? CMD_ON_ADMIN : CMD_ON_USER))) {
		log_warn("command refused on this socket cmd=%s socket=%s",
			 rq->cmd, r->admin ? "admin" : "user");
		cmd_refuse(r, "'%s' is not allowed on this socket", rq->cmd);
		return 1;
	}
	if ((cmd->flags & CMD_FRONTEND) && cfg &&
	    cfg->role == CONFIG_ROLE_MIRROR) {
		refuse_on_mirror(r, cfg, host);
		return 1;
	}
	if ((int)rq->n_args < cmd->min_args ||
	    (int)rq->n_args > cmd->max_args) {
		cmd_bad(r, "wrong number of arguments for '%s'", rq->cmd);
		return 1;
	}
	if (!r->admin && (cmd->flags & CMD_NEEDS_USER) &&
	    (!rq->user || !*rq->user)) {
		cmd_bad(r, "no user given");
		return 1;
	}
	if (!r->admin && (cmd->flags & CMD_SYNC_GATED) && syncing) {
		cmd_refuse(r, "This site is catching up with its peers; try "
			   "again in a few seconds.");
		return 1;
	}
	if ((cmd->flags & CMD_USES_IP) &&
	    (!rq->client_ip || addr_parse(&r->ip, rq->client_ip, false) < 0)) {
		cmd_bad(r, "no valid client address (is SSH_CONNECTION set?)");
		return 1;
	}
	if (policy_key_parse(&r->key, rq->key_kind) < 0) {
		cmd_bad(r, "unknown key kind '%s' (want plain, sk-touch or "
			"sk-pin)", rq->key_kind);
		return 1;
	}
	return 0;
}

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
	int name(struct req *r, const char *fmt, ...)                          \
	{                                                                      \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		vreply(r, status, fmt, ap);                                    \
		va_end(ap);                                                    \
		return 0;                                                      \
	}

REPLY_FN(cmd_bad, GD_EXIT_USAGE)
REPLY_FN(cmd_refuse, GD_EXIT_REFUSED)

void cmd_undecided(struct req *r, int err)
{
	buf_reset(&r->out);
	buf_reset(&r->uri);
	buf_reset(&r->path);
	buf_reset(&r->err);
	r->factor = NULL;
	r->next[0] = '\0';
	r->status = GD_EXIT_INTERNAL;
	buf_printf(&r->err, "the node failed to decide: internal error (%s); "
		   "nothing was changed; the cause is in the node's log",
		   gd_strerror(err));
}

void cmd_fmt_time(char *out, size_t len, int64_t t)
{
	struct tm tm;
	time_t tt = (time_t)t;
	gmtime_r(&tt, &tm);
	strftime(out, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

void cmd_print_json(struct req *r, cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);
	if (s) {
		buf_puts(&r->out, s);
		buf_puts(&r->out, "\n");
		free(s);
	}
	cJSON_Delete(j);
}

/* ---- arguments ---------------------------------------------------------- */

bool cmd_name_arg(struct req *r, const char *name)
{
	if (name_user_ok(name))
		return true;
	cmd_bad(r, "bad user name '%s': use a lower-case letter or '_' then "
		"up to 63 of [a-z0-9_.-]", name);
	return false;
}

int cmd_repo_arg(struct req *r, const char *arg, char *out, size_t len)
{
	if (name_repo_norm(out, len, arg) < 0) {
		cmd_bad(r, "bad repository name '%s': use parts of "
			"[A-Za-z0-9_.+-] separated by '/', none starting with "
			"'.'", arg);
		return GD_EINVAL;
	}
	return 0;
}

int cmd_parse_uint(const char *s, unsigned long long max,
		   unsigned long long *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return GD_EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end || *out > max ? GD_EINVAL : 0;
}

/* ---- operations --------------------------------------------------------- */

int cmd_emit(struct cmd_ctx *x, Grantd__V1__Op *op)
{
	return ops_local(x->ops, x->p.batch, op);
}

/* The generated oneof is a union of pointers, so any body goes in through
 * one member. */
int cmd_emit_body(struct cmd_ctx *x, Grantd__V1__Op__BodyCase which,
		  void *body)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	op.body_case = which;
	op.user = body;
	return cmd_emit(x, &op);
}

int cmd_load_caller(struct cmd_ctx *x, struct req *r, struct policy_user *u)
{
	int rc = policy_user_load(u, &x->p, cmd_user_of(r));
	if (rc < 0)
		return rc;
	/* Under gitolite every gitolite user may enroll: the record is made
	 * at enrollment (cmd_enroll_self), and until then the user is one
	 * who is not enrolled (cmd_validate_token says how to enroll). */
	if (!u->user && !x->p.cfg->gitolite_home) {
		cmd_refuse(r, "unknown user '%s'", cmd_user_of(r));
		return GD_EDENIED;
	}
	return 0;
}
