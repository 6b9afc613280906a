/*
 * ops_check.c: the bounds and shape of an operation from outside (a peer's,
 * a snapshot record made into one, or one made here before it is
 * stamped).  Pure: no store, no state, so packsrv.c and the fuzzers can
 * link it alone.
 *
 * One check per operation body kind, from a table (checks[] below): adding
 * a record kind means adding its row here, beside its row in records.c.
 */
#include <sodium.h>
#include <string.h>

#include "addr.h"
#include "err.h"
#include "hookline.h"
#include "names.h"
#include "ops.h"
#include "tlogstore.h"
#include "banned.h"

static bool str_ok(const char *s, size_t max)
{
	return s && strnlen(s, max + 1) <= max;
}

bool ops_oid_ok(const char *s)
{
	if (!s || strlen(s) != 40)
		return false;
	return strspn(s, "0123456789abcdef") == 40;
}

bool ops_ref_name_ok(const char *s)
{
	size_t n = s ? strnlen(s, 257) : 0;

	if (n < 6 || n > 255 || strncmp(s, "refs/", 5) ||
	    !strncmp(s, "refs/grantd/", 12) || s[n - 1] == '/' ||
	    s[n - 1] == '.' || strstr(s, "..") || strstr(s, "//") ||
	    strstr(s, "/.") || strstr(s, "@{") ||
	    (n >= 5 && !strcmp(s + n - 5, ".lock")))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c == 0x7f || strchr("~^:?*[\\", c))
			return false;
	}
	return true;
}

static bool opt_str_ok(const char *s, size_t max)
{
	if (!s)
		return true;
	if (strnlen(s, max + 1) > max)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* A push log entry: its shape, not its hash (a peer keeps and passes on
 * what its origin wrote; `grantctl log verify` judges the chain). */
static const char *check_pushlog(const Grantd__V1__Op *op)
{
	const Grantd__V1__PushLogEntry *e = op->push_log;
	char norm[NAME_REPO_MAX + 1];
	struct gd_net net;

	if (!e->origin || strcmp(e->origin, op->origin))
		return "push log entry of another origin";
	if (!e->n || !e->has_hlc || e->hlc != op->hlc)
		return "push log entry without number or stamp";
	if (e->prev.len != 32 || e->hash.len != 32)
		return "push log entry without its hashes";
	if (e->user && *e->user && !name_user_ok(e->user))
		return "bad user name";
	if (!opt_str_ok(e->key_fp, 100) || !opt_str_ok(e->key_kind, 16) ||
	    !opt_str_ok(e->factor, 32) ||
	    !str_ok(e->factor_detail ? e->factor_detail : "", 256))
		return "push log entry out of bounds";
	if (e->client_ip && *e->client_ip &&
	    (!str_ok(e->client_ip, 64) || addr_parse(&net, e->client_ip,
						     false) < 0))
		return "bad client address";
	if (!e->repo || name_repo_norm(norm, sizeof(norm), e->repo) < 0 ||
	    strcmp(norm, e->repo))
		return "bad repository name";
	if (e->push_id && !hookline_req_id_ok(e->push_id))
		return "bad push id";
	if (e->n_changes > OPS_MAX_REF_CHANGES)
		return "push log entry out of bounds";
	for (size_t i = 0; i < e->n_changes; i++) {
		const Grantd__V1__RefChange *c = e->changes[i];
		if (!ops_ref_name_ok(c->ref))
			return "bad ref name";
		if (!ops_oid_ok(c->old) || !ops_oid_ok(c->new_))
			return "bad object id";
	}
	return NULL;
}

static const char *check_user(const Grantd__V1__Op *op)
{
	const Grantd__V1__User *u = op->user;

	if (!u->name || !name_user_ok(u->name))
		return "bad user name";
	if (u->n_keys > OPS_MAX_KEYS)
		return "too many keys";
	for (size_t i = 0; i < u->n_keys; i++)
		if (!str_ok(u->keys[i], 16384) || !name_pubkey_ok(u->keys[i]))
			return "bad ssh key";
	return NULL;
}

static const char *check_enroll(const Grantd__V1__Op *op)
{
	const Grantd__V1__Enrollment *e = op->enroll;

	if (!e->user || !name_user_ok(e->user))
		return "bad user name";
	if (e->secret.len > 128 || e->n_scratch > 16)
		return "enrollment out of bounds";
	if (e->deleted)
		return NULL;
	if ((e->kind != GRANTD__V1__OTP_KIND__OTP_TOTP &&
	     e->kind != GRANTD__V1__OTP_KIND__OTP_HOTP) ||
	    (e->digits != 6 && e->digits != 8) ||
	    (e->kind == GRANTD__V1__OTP_KIND__OTP_TOTP &&
	     (e->period < 10 || e->period > 300)) ||
	    e->secret.len == 0)
		return "bad enrollment settings";
	return NULL;
}

static const char *check_grant(const Grantd__V1__Op *op)
{
	const Grantd__V1__Grant *g = op->grant;
	struct gd_net net;

	if (!g->user || !name_user_ok(g->user))
		return "bad user name";
	if (!g->net || addr_parse(&net, g->net, true) < 0)
		return "bad grant address";
	if (!str_ok(g->net, 64) || !str_ok(g->session ? g->session : "", 256) ||
	    !str_ok(g->site ? g->site : "", 64))
		return "grant out of bounds";
	return NULL;
}

static const char *check_mark(const Grantd__V1__Op *op)
{
	if (!op->mark->user || !name_user_ok(op->mark->user))
		return "bad user name";
	return NULL;
}

static const char *check_failure(const Grantd__V1__Op *op)
{
	const Grantd__V1__Failures *f = op->failure;

	if (!f->user || !name_user_ok(f->user) || !f->site ||
	    !name_site_ok(f->site) || f->n_hlc > OPS_MAX_FAILURES_KEPT)
		return "bad failure record";
	for (size_t i = 0; i < f->n_hlc; i++)
		if (!f->hlc[i])
			return "bad failure record";
	return NULL;
}

static const char *check_unlock(const Grantd__V1__Op *op)
{
	if (!op->unlock->user || !name_user_ok(op->unlock->user))
		return "bad user name";
	return NULL;
}

static const char *check_revoke(const Grantd__V1__Op *op)
{
	if (!op->revoke->user || !name_user_ok(op->revoke->user))
		return "bad user name";
	return NULL;
}

static const char *check_addr_revoke(const Grantd__V1__Op *op)
{
	const Grantd__V1__AddrRevocation *ar = op->addr_revoke;
	struct gd_net net;
	char canon[ADDR_STRLEN];

	if (!ar->user || !name_user_ok(ar->user))
		return "bad user name";
	if (!ar->net || !str_ok(ar->net, 64) ||
	    addr_parse(&net, ar->net, true) < 0)
		return "bad revoked address";
	/* one key per (user, net): a second spelling of it would be a
	 * second record */
	addr_format(canon, &net);
	if (strcmp(canon, ar->net))
		return "bad revoked address";
	return NULL;
}

/* s is a repository name in its normal form */
static bool repo_name_ok(const char *s)
{
	char norm[NAME_REPO_MAX + 1];

	return s && name_repo_norm(norm, sizeof(norm), s) == 0 &&
	       !strcmp(norm, s);
}

static const char *check_repo(const Grantd__V1__Op *op)
{
	const Grantd__V1__Repo *rp = op->repo;

	if (!repo_name_ok(rp->name))
		return "bad repository name";
	if (rp->fork_of && *rp->fork_of && !repo_name_ok(rp->fork_of))
		return "bad fork parent";
	if (rp->renamed_from && *rp->renamed_from &&
	    !repo_name_ok(rp->renamed_from))
		return "bad rename source";
	if (rp->mode != GRANTD__V1__REPO_MODE__MODE_OFF &&
	    rp->mode != GRANTD__V1__REPO_MODE__MODE_OPT_IN &&
	    rp->mode != GRANTD__V1__REPO_MODE__MODE_REQUIRED)
		return "bad repository mode";
	if (rp->n_writers > 4096)
		return "too many writers";
	for (size_t i = 0; i < rp->n_writers; i++)
		if (!rp->writers[i] || !name_user_ok(rp->writers[i]))
			return "bad writer name";
	return NULL;
}

static const char *check_refs(const Grantd__V1__Op *op)
{
	const Grantd__V1__RefUpdate *u = op->refs;

	if (!repo_name_ok(u->repo))
		return "bad repository name";
	if (u->n_changes == 0 || u->n_changes > OPS_MAX_REF_CHANGES)
		return "ref update out of bounds";
	if (u->push_id && !hookline_req_id_ok(u->push_id))
		return "bad push id";
	for (size_t i = 0; i < u->n_changes; i++) {
		const Grantd__V1__RefChange *c = u->changes[i];
		if (!ops_ref_name_ok(c->ref))
			return "bad ref name";
		if (!ops_oid_ok(c->old) || !ops_oid_ok(c->new_))
			return "bad object id";
	}
	return NULL;
}

/* One row per operation body kind: what its body must pass.  A kind with
 * no row has no body ("no body"). */
static const struct {
	Grantd__V1__Op__BodyCase body;
	const char *(*check)(const Grantd__V1__Op *op);
} checks[] = {
        {GRANTD__V1__OP__BODY_USER, check_user},
        {GRANTD__V1__OP__BODY_ENROLL, check_enroll},
        {GRANTD__V1__OP__BODY_GRANT, check_grant},
        {GRANTD__V1__OP__BODY_MARK, check_mark},
        {GRANTD__V1__OP__BODY_FAILURE, check_failure},
        {GRANTD__V1__OP__BODY_UNLOCK, check_unlock},
        {GRANTD__V1__OP__BODY_REVOKE, check_revoke},
        {GRANTD__V1__OP__BODY_ADDR_REVOKE, check_addr_revoke},
        {GRANTD__V1__OP__BODY_REPO, check_repo},
        {GRANTD__V1__OP__BODY_REFS, check_refs},
        {GRANTD__V1__OP__BODY_PUSH_LOG, check_pushlog},
        {GRANTD__V1__OP__BODY_PUSH_LEAF, tlogstore_check},
};

/* The stamp every operation carries. */
static const char *check_stamp(const Grantd__V1__Op *op)
{
	if (!op->origin || !name_site_ok(op->origin))
		return "bad origin";
	if (!op->has_epoch || !op->epoch || !op->has_seq || !op->seq ||
	    !op->has_hlc || !op->hlc)
		return "missing stamp";
	return NULL;
}

static const char *check_body(const Grantd__V1__Op *op)
{
	for (size_t i = 0; i < GD_ARRAY_SIZE(checks); i++)
		if (checks[i].body == op->body_case)
			return checks[i].check(op);
	return "no body";
}

/* The stamp first: a body is only read once its origin is known good. */
int ops_check(const Grantd__V1__Op *op, struct buf *err)
{
	const char *why = check_stamp(op);

	if (!why)
		why = check_body(op);
	if (why) {
		buf_puts(err, why);
		return GD_EPROTO;
	}
	return 0;
}
