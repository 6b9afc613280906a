/*
 * cmd_val.c: where a token is validated (cmd_validate_token, cmd.h), for
 * the 2fa commands of cmd_grant.c that add a grant.
 *
 * In order: the gate (the token's shape, the frontend peers' token_quorum,
 * the lockout, the enrollment), the check itself (otp_check against the
 * user's mark), a failure recorded or, under token_quorum = majority, the
 * sites' vote (quorum: the request parks while they vote), then the use
 * marked.  Everything it writes goes into the writer's batch (cmd_emit).
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "crashpoint.h"
#include "dur.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "otp.h"
#include "peerpolicy.h"
#include "policy.h"
#include "records.h"
#include "banned.h"

static int load_mark(struct cmd_ctx *x, const char *user, uint64_t id,
		     uint64_t *next, uint32_t *used)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	*next = 0;
	*used = 0;
	records_key_mark(&k, user, id);
	rc = store_get(x->p.store, x->p.batch, CF_MARKS, k.p, k.len, &v);
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

static void count_val(struct cmd_ctx *x, enum metrics_val v)
{
	if (x->counts)
		metrics_inc(&x->counts->vals[v]);
}

/*
 * The quorum step of a token that matched (res): the first time, this
 * site's own promise goes in the batch and the request is parked (*go
 * false, nothing answered: control keeps it while the sites vote); when
 * control hands it back, the verdict: *go true for a YES on this very use,
 * else a refusal that says why and what still works.
 */
static int quorum(struct cmd_ctx *x, struct req *r, struct policy_user *u,
		  const struct otp_result *res, bool *go)
{
	struct vote_use use = { 0 };
	Grantd__V1__VoteVerdict verdict;
	uint64_t pid, held;
	int rc;

	*go = false;
	snprintf(use.user, sizeof(use.user), "%s", cmd_user_of(r));
	use.enroll_id = u->enroll->id;
	if (res->scratch)
		use.scratch = 1u << res->scratch_index;
	else
		use.next = res->next;
	switch (r->vote.state) {
	case CMD_VOTE_NONE:
		rc = vote_propose(x->vote, x->p.batch, &use, &pid, &verdict,
				  &held);
		if (rc < 0)
			return rc;
		if (verdict != GRANTD__V1__VOTE_VERDICT__VOTE_YES) {
			vote_count(x->vote, false);
			log_info("token use refused here user=%s verdict=%d",
				 cmd_user_of(r), (int)verdict);
			return cmd_refuse(r, "Token not accepted: this token "
					  "or a later one is already used or "
					  "being used; use the next token. "
					  "Existing grants keep working; "
					  "pushes are not affected.");
		}
		r->vote.state = CMD_VOTE_PARK;
		r->vote.pid = pid;
		r->vote.use = use;
		return 0;
	case CMD_VOTE_YES:
		if (use.enroll_id != r->vote.use.enroll_id ||
		    use.next != r->vote.use.next ||
		    use.scratch != r->vote.use.scratch) {
			vote_count(x->vote, false);
			return cmd_refuse(r, "Token not accepted: the "
					  "enrollment changed while the sites "
					  "voted; try the next token. Existing "
					  "grants keep working; pushes are not "
					  "affected.");
		}
		/* a majority promised; the mark and the grant not written */
		crashpoint("vote-decided");
		vote_count(x->vote, true);
		log_info("token use accepted by a majority user=%s",
			 cmd_user_of(r));
		*go = true;
		return 0;
	default:
		vote_count(x->vote, false);
		log_warn("token use refused: no majority user=%s",
			 cmd_user_of(r));
		return cmd_refuse(r, "%s", r->vote.why);
	}
}

/*
 * What is checked before the token itself: its shape, the frontend peers'
 * token_quorum, the user's lockout and enrollment.  Returns 1 to go on
 * (*fails: the failures counted so far), 0 when r was refused (cmd_bad
 * and cmd_refuse return 0), or a negative gd_err.
 */
static int val_gate(struct cmd_ctx *x, struct req *r,
		    const struct policy_user *u, const char *token, int *fails)
{
	uint64_t until;
	int rc;

	if (!otp_token_shape_ok(token)) {
		count_val(x, METRICS_VAL_MALFORMED);
		return cmd_bad(r, "'%s' is not a token: give the 6 or 8 digits "
			       "your token shows, or an 8-digit scratch code",
			       strnlen(token, 9) > 8 ? "(too long)" : token);
	}
	/* a frontend peer validating under another token_quorum reopens the
	 * replay window: fail closed until the settings agree (N8) */
	if (x->peer_policy) {
		struct buf why = BUF_INIT;
		if (peerpolicy_refuses(x->peer_policy, &why)) {
			log_warn("token refused: token_quorum differs from a "
				 "frontend peer's user=%s", cmd_user_of(r));
			rc = cmd_refuse(r, "%s", why.p);
			buf_free(&why);
			return rc;
		}
	}
	if ((rc = policy_lock_state(&x->p, cmd_user_of(r), r->now_ms, fails,
				    &until)) < 0)
		return rc;
	if (until) {
		count_val(x, METRICS_VAL_LOCKED);
		char d[32];
		dur_format(d, sizeof(d), (int64_t)(until - r->now_ms) / 1000 + 1);
		log_warn("locked out user=%s ip=%s failures=%d",
			 cmd_user_of(r),
			 r->rq->client_ip ? r->rq->client_ip : "-", *fails);
		return cmd_refuse(r, "Rate-limit reached: %d failed attempts; "
				  "try again in %s, or ask an administrator to "
				  "run 'grantctl unlock %s'",
				  *fails, d, cmd_user_of(r));
	}
	if (!u->enroll) {
		count_val(x, METRICS_VAL_NOT_ENROLLED);
		return cmd_refuse(r, "User %s is not enrolled with 2-factor "
				  "authentication; enroll with: ssh %s 2fa "
				  "enroll totp (or yubikey)",
				  cmd_user_of(r), x->p.host);
	}
	return 1;
}

/* A token that did not match: the failure is recorded (it counts
 * toward the lockout) and r refused.  fails: those counted before. */
static int val_failed(struct cmd_ctx *x, struct req *r, int fails)
{
	/* the attempt is named by its operation's stamp, unique here even
	 * when the whole batch shares r->now_ms */
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Failures f = GRANTD__V1__FAILURES__INIT;
	uint64_t at = ops_stamp(x->ops);
	int rc;

	f.user = (char *)cmd_user_of(r);
	f.site = (char *)ops_site(x->ops);
	f.hlc = &at;
	f.n_hlc = 1;
	op.body_case = GRANTD__V1__OP__BODY_FAILURE;
	op.failure = &f;
	SET(op, hlc, at);
	if ((rc = cmd_emit(x, &op)) < 0)
		return rc;
	count_val(x, METRICS_VAL_INVALID);
	/* this failure is the one that reaches the limit */
	if (x->counts && fails + 1 == x->p.cfg->policy.lockout_failures)
		metrics_inc(&x->counts->lockouts);
	return cmd_refuse(r, "Failed to validate token.\nIf using a "
			  "phone app, please wait for token to change "
			  "before trying again.");
}

/* A token accepted: its use is marked (the next counter, or the scratch
 * code spent), and a first use makes the enrollment active. */
static int val_used(struct cmd_ctx *x, struct req *r, struct policy_user *u,
		    const struct otp_result *res, uint64_t next, uint32_t used)
{
	Grantd__V1__Mark m = GRANTD__V1__MARK__INIT;
	int rc;

	m.user = (char *)cmd_user_of(r);
	SET(m, enroll_id, u->enroll->id);
	SET(m, next, res->scratch ? next : res->next);
	SET(m, scratch_used,
	    used | (res->scratch ? 1u << res->scratch_index : 0));
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_MARK, &m)) < 0)
		return rc;
	if (!u->enroll->active) {
		Grantd__V1__Enrollment e = *u->enroll;
		SET(e, active, 1);
		e.has_hlc = 0;
		e.origin = NULL;
		if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_ENROLL, &e)) < 0)
			return rc;
		u->enroll->active = 1;
		u->enrolled = true;
		log_info("enrollment active user=%s", cmd_user_of(r));
	}
	return 0;
}

/* Where a token is validated (cmd.h). */
int cmd_validate_token(struct cmd_ctx *x, struct req *r,
		       struct policy_user *u, const char *token, bool *ok,
		       const char **how)
{
	const struct config_policy *p = &x->p.cfg->policy;
	struct otp_result res;
	uint64_t next;
	uint32_t used;
	int fails, rc;

	*ok = false;
	if ((rc = val_gate(x, r, u, token, &fails)) < 0)
		goto error;
	if (rc == 0)
		return 0; /* refused */
	if ((rc = load_mark(x, cmd_user_of(r), u->enroll->id, &next,
			    &used)) < 0)
		goto error;
	if ((rc = otp_check(&res, u->enroll, next, used, token, r->now,
			    p->totp_window, p->hotp_lookahead)) < 0) {
		/* a damaged record is the node failing to decide (exit 4,
		 * logged by the dispatcher), never a refusal */
		log_error("unusable enrollment user=%s", cmd_user_of(r));
		goto error;
	}
	if (!res.ok && r->vote.state != CMD_VOTE_NONE) {
		/* the token matched before the vote; a later use accepted
		 * meanwhile moved the mark past it: no failure of the user's */
		vote_count(x->vote, false);
		return cmd_refuse(r, "Token not accepted: a later token was "
				  "used while the sites voted; use the next "
				  "token. Existing grants keep working; pushes "
				  "are not affected.");
	}
	if (!res.ok) {
		if ((rc = val_failed(x, r, fails)) < 0)
			goto error;
		return rc;
	}
	if (vote_majority(x->vote)) {
		/* token_quorum = majority: accepted only once a majority of
		 * the frontends promised this use (vote.h) */
		bool go;
		if ((rc = quorum(x, r, u, &res, &go)) < 0)
			goto error;
		if (!go)
			return 0;
	}
	if ((rc = val_used(x, r, u, &res, next, used)) < 0)
		goto error;
	*how = res.scratch ? "Scratch-token used" :
	       u->enroll->kind == GRANTD__V1__OTP_KIND__OTP_TOTP ?
				"Valid TOTP token used" :
				"Valid HOTP token used";
	*ok = true;
	count_val(x, METRICS_VAL_VALID);
	return 0;
error:
	count_val(x, METRICS_VAL_ERROR);
	return rc;
}
