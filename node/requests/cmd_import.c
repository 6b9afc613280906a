/*
 * cmd_import.c: user.import, the one request a migration makes per user
 * (grantctl import gitolite-2fa, gitolite-keydir; docs/migrating.md).
 *
 * It makes, in one batch and so as replicated operations of the kinds
 * every site already applies: the user and its keys, its enrollment (the
 * secret and scratch codes the user already has), a mark that makes every
 * token it already used dead (the steps and counters below it, the spent
 * scratch codes), and its validations that have not expired as grants.
 * What is there already is left alone, so a second import changes
 * nothing; what differs in a way an import must not decide (another
 * secret, a key of another user) refuses the user whole, before anything
 * is written.  --dry-run answers the same lines, writing nothing.
 *
 * Arguments after NAME, each option once unless said:
 *   --dry-run
 *   --key KEY                 an authorized_keys line (repeated)
 *   --totp | --hotp           the enrollment's kind; then:
 *   --secret BASE32           (80 bits or more: totp-cgi made 80)
 *   --digits 6|8  --period S  --counter N (HOTP: the next counter)
 *   --used-step N             TOTP: the last time step used
 *   --scratch CODE, --used-scratch CODE   (repeated, in the file's order)
 *   --grant NET,ADDED,EXPIRES (repeated; unix seconds)
 * No secret or scratch code is ever answered or logged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "cmd.h"
#include "cmd_user_int.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "otp.h"
#include "records.h"
#include "xalloc.h"
#include "banned.h"

#define IMPORT_MAX_SCRATCH 16 /* what ops_check takes */

struct imp_grant {
	char net[ADDR_STRLEN];
	int64_t added, expires;
};

struct imp {
	const char *name;
	bool dry;
	const char *keys[OPS_MAX_KEYS];
	size_t nkeys;
	Grantd__V1__OtpKind kind; /* OTP_NONE: no enrollment given */
	uint8_t secret[OTP_MAX_SECRET_LEN];
	size_t slen;
	unsigned long long digits, period, counter, used_step;
	bool has_used_step;
	const char *scratch[IMPORT_MAX_SCRATCH];
	size_t nscratch;
	uint32_t used_bits;
	struct imp_grant *grants;
	size_t ngrants;
};

/* ---- the arguments ------------------------------------------------------ */

static int parse_grant(struct imp_grant *g, const char *v)
{
	char net[ADDR_STRLEN], extra;
	long long added, expires;
	struct gd_net n;

	if (strlen(v) >= 128 ||
	    sscanf(v, "%63[^,],%lld,%lld%c", net, &added, &expires, &extra) !=
	            3 ||
	    addr_parse(&n, net, true) < 0 || added < 0 || expires <= 0)
		return GD_EINVAL;
	addr_format(g->net, &n);
	g->added = added;
	g->expires = expires;
	return 0;
}

static int parse_secret(struct req *r, struct imp *m, const char *v)
{
	m->slen = sizeof(m->secret);
	if (otp_base32_decode(m->secret, &m->slen, v) < 0)
		return cmd_bad(r, "--secret must be base32 (A-Z, 2-7)"), 1;
	if (m->slen < OTP_MIN_SHORT_SECRET_LEN)
		return cmd_bad(r, "the secret has %zu bits, fewer than 80",
		               m->slen * 8),
		       1;
	return 0;
}

/* One option with a value v; 0, or 1 with a bad() answer. */
static int parse_opt(struct req *r, struct imp *m, const char *a, const char *v)
{
	if (!strcmp(a, "--key")) {
		if (!name_pubkey_ok(v))
			return cmd_bad(r, "not an SSH public key: want one "
			                  "line 'TYPE BASE64 [comment]'"),
			       1;
		if (m->nkeys == OPS_MAX_KEYS)
			return cmd_bad(r, "too many keys (at most %d)",
			               OPS_MAX_KEYS),
			       1;
		m->keys[m->nkeys++] = v;
	} else if (!strcmp(a, "--secret")) {
		return parse_secret(r, m, v);
	} else if (!strcmp(a, "--digits")) {
		if (cmd_parse_uint(v, 8, &m->digits) < 0 ||
		    (m->digits != 6 && m->digits != 8))
			return cmd_bad(r, "--digits must be 6 or 8"), 1;
	} else if (!strcmp(a, "--period")) {
		if (cmd_parse_uint(v, 300, &m->period) < 0 || m->period < 10)
			return cmd_bad(r, "--period must be 10 to 300"), 1;
	} else if (!strcmp(a, "--counter") || !strcmp(a, "--used-step")) {
		unsigned long long *p =
		        a[2] == 'c' ? &m->counter : &m->used_step;
		if (cmd_parse_uint(v, 1ULL << 62, p) < 0)
			return cmd_bad(r, "%s must be a non-negative integer",
			               a),
			       1;
		m->has_used_step |= a[2] == 'u';
	} else if (!strcmp(a, "--scratch") || !strcmp(a, "--used-scratch")) {
		if (strlen(v) != OTP_SCRATCH_DIGITS ||
		    strspn(v, "0123456789") != OTP_SCRATCH_DIGITS)
			return cmd_bad(r, "a scratch code has %d digits",
			               OTP_SCRATCH_DIGITS),
			       1;
		if (m->nscratch == IMPORT_MAX_SCRATCH)
			return cmd_bad(r,
			               "too many scratch codes (at most "
			               "%d)",
			               IMPORT_MAX_SCRATCH),
			       1;
		if (a[2] == 'u')
			m->used_bits |= 1u << m->nscratch;
		m->scratch[m->nscratch++] = v;
	} else if (!strcmp(a, "--grant")) {
		if (parse_grant(&m->grants[m->ngrants], v) < 0)
			return cmd_bad(r,
			               "--grant wants NET,ADDED,EXPIRES "
			               "(unix seconds), not '%.80s'",
			               v),
			       1;
		m->ngrants++;
	} else {
		return cmd_bad(r, "unknown option '%s' for user.import", a), 1;
	}
	return 0;
}

/* Returns 0, or 1 with a bad() answer. */
static int parse_args(struct req *r, struct imp *m)
{
	const Grantd__V1__Request *rq = r->rq;

	m->name = rq->args[0];
	m->digits = 6;
	m->period = 30;
	m->grants = xcalloc(rq->n_args, sizeof(*m->grants));
	if (!cmd_name_arg(r, m->name))
		return 1;
	for (size_t i = 1; i < rq->n_args; i++) {
		const char *a = rq->args[i];
		if (!strcmp(a, "--dry-run")) {
			m->dry = true;
		} else if (!strcmp(a, "--totp") || !strcmp(a, "--hotp")) {
			if (m->kind)
				return cmd_bad(r, "give one of --totp or "
				                  "--hotp"),
				       1;
			m->kind = a[2] == 't' ? GRANTD__V1__OTP_KIND__OTP_TOTP
			                      : GRANTD__V1__OTP_KIND__OTP_HOTP;
		} else if (i + 1 == rq->n_args) {
			return cmd_bad(r, "%s needs a value", a), 1;
		} else if (parse_opt(r, m, a, rq->args[++i])) {
			return 1;
		}
	}
	if (!m->kind != !m->slen)
		return cmd_bad(r, "an enrollment needs --totp or --hotp and "
		                  "--secret"),
		       1;
	return 0;
}

/* ---- the parts ---------------------------------------------------------- */

static int emit(struct cmd_ctx *x,
                const struct imp *m,
                Grantd__V1__Op__BodyCase which,
                void *body)
{
	return m->dry ? 0 : cmd_emit_body(x, which, body);
}

static const char *done_word(const struct imp *m)
{
	return m->dry ? "would add" : "added";
}

/* The user and the keys it lacks.  Returns 0, 1 when r holds a refusal
 * (a key of another user), or a negative gd_err. */
static int import_user(struct cmd_ctx *x,
                       struct req *r,
                       const struct imp *m,
                       const Grantd__V1__User *old)
{
	Grantd__V1__User nu = GRANTD__V1__USER__INIT;
	char *keys[OPS_MAX_KEYS];
	size_t n = 0, had;
	int rc;

	for (size_t i = 0; old && i < old->n_keys; i++)
		keys[n++] = old->keys[i];
	had = n;
	for (size_t i = 0; i < m->nkeys; i++) {
		bool dup = false;
		for (size_t j = 0; j < n; j++)
			dup |= !strcmp(keys[j], m->keys[i]);
		if (dup)
			continue;
		if ((rc = cmd_user_key_taken(x, r, m->name, m->keys[i])) != 0)
			return rc;
		if (n == OPS_MAX_KEYS)
			return cmd_bad(r, "too many keys (at most %d)",
			               OPS_MAX_KEYS),
			       1;
		keys[n++] = (char *)m->keys[i];
	}
	if (old && n == had) {
		buf_printf(&r->out, "user %s: exists%s\n", m->name,
		           m->nkeys ? " with these keys" : "");
		return 0;
	}
	nu.name = (char *)m->name;
	nu.keys = keys;
	nu.n_keys = n;
	if ((rc = emit(x, m, GRANTD__V1__OP__BODY_USER, &nu)) < 0)
		return rc;
	if (old)
		buf_printf(&r->out, "user %s: %zu key%s %s\n", m->name, n - had,
		           n - had == 1 ? "" : "s", done_word(m));
	else
		buf_printf(&r->out, "user %s: %s (%zu key%s)\n", m->name,
		           done_word(m), n, n == 1 ? "" : "s");
	return 0;
}

/* The imported enrollment, made: its id into *id. */
static int new_enrollment(struct cmd_ctx *x,
                          struct req *r,
                          const struct imp *m,
                          uint64_t *id)
{
	Grantd__V1__Enrollment e = GRANTD__V1__ENROLLMENT__INIT;
	uint8_t hashes[IMPORT_MAX_SCRATCH][32];
	ProtobufCBinaryData sc[IMPORT_MAX_SCRATCH];
	int rc;

	for (size_t i = 0; i < m->nscratch; i++) {
		otp_scratch_hash(hashes[i], m->secret, m->slen, m->scratch[i]);
		sc[i] = (ProtobufCBinaryData){32, hashes[i]};
	}
	*id = 0;
	while (!*id)
		randombytes_buf(id, sizeof(*id));
	e.user = (char *)m->name;
	SET(e, kind, m->kind);
	SET(e, secret, ((ProtobufCBinaryData){m->slen, (uint8_t *)m->secret}));
	SET(e, digits, (uint32_t)m->digits);
	SET(e, period, (uint32_t)m->period);
	SET(e, counter,
	    m->kind == GRANTD__V1__OTP_KIND__OTP_HOTP ? m->counter : 0);
	e.scratch = sc;
	e.n_scratch = m->nscratch;
	SET(e, active, 1);
	SET(e, id, *id);
	rc = emit(x, m, GRANTD__V1__OP__BODY_ENROLL, &e);
	sodium_memzero(hashes, sizeof(hashes));
	if (rc == 0) {
		buf_printf(&r->out,
		           "user %s: enrollment %s (%s, %zu-bit "
		           "secret, %u digits, %zu scratch codes)\n",
		           m->name, done_word(m),
		           m->kind == GRANTD__V1__OTP_KIND__OTP_TOTP ? "totp"
		                                                     : "hotp",
		           m->slen * 8, (unsigned)m->digits, m->nscratch);
		if (!m->dry)
			log_info("enrolled user=%s mode=%s by=import%s",
			         m->name,
			         m->kind == GRANTD__V1__OTP_KIND__OTP_TOTP
			                 ? "totp"
			                 : "hotp",
			         m->slen < OTP_MIN_SECRET_LEN ? " short-secret"
			                                      : "");
	}
	return rc;
}

static int load_mark(struct cmd_ctx *x,
                     const char *user,
                     uint64_t id,
                     uint64_t *next,
                     uint32_t *used)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	*next = 0;
	*used = 0;
	records_key_mark(&k, user, id);
	rc = store_get(x->p.store, x->p.batch, CF_MARKS, k.p, k.len, &v);
	if (rc == 0) {
		Grantd__V1__Mark *mk = grantd__v1__mark__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		if (mk) {
			*next = mk->next;
			*used = mk->scratch_used;
			grantd__v1__mark__free_unpacked(mk, NULL);
		}
	}
	buf_free(&k);
	buf_free(&v);
	return rc == GD_ENOTFOUND ? 0 : rc;
}

/* The mark that makes the used tokens dead, when it moves the one the
 * enrollment id has. */
static int import_mark(struct cmd_ctx *x,
                       struct req *r,
                       const struct imp *m,
                       uint64_t id,
                       uint64_t floor)
{
	Grantd__V1__Mark mk = GRANTD__V1__MARK__INIT;
	uint64_t next, want = 0;
	uint32_t used;
	int rc;

	if ((rc = load_mark(x, m->name, id, &next, &used)) < 0)
		return rc;
	if (m->kind == GRANTD__V1__OTP_KIND__OTP_HOTP)
		want = m->counter;
	else if (m->has_used_step)
		want = m->used_step + 1;
	if (want <= next || want <= floor)
		want = next;
	if (want == next && !(m->used_bits & ~used))
		return 0;
	mk.user = (char *)m->name;
	SET(mk, enroll_id, id);
	SET(mk, next, want);
	SET(mk, scratch_used, used | m->used_bits);
	if ((rc = emit(x, m, GRANTD__V1__OP__BODY_MARK, &mk)) < 0)
		return rc;
	int spent = __builtin_popcount(used | m->used_bits);
	buf_printf(&r->out,
	           "user %s: used tokens %s dead (%s %llu, %d "
	           "scratch code%s spent)\n",
	           m->name, m->dry ? "would be made" : "made",
	           m->kind == GRANTD__V1__OTP_KIND__OTP_HOTP
	                   ? "counters before"
	                   : "time steps before",
	           (unsigned long long)want, spent, spent == 1 ? "" : "s");
	return 0;
}

/* Whether the user's enrollment e is the imported one (kind and secret);
 * constant time over the secret. */
static bool same_enrollment(const Grantd__V1__Enrollment *e,
                            const struct imp *m)
{
	return e->kind == m->kind && e->secret.len == m->slen &&
	       sodium_memcmp(e->secret.data, m->secret, m->slen) == 0;
}

/* One grant, unless a live one for the same address (and no session)
 * already lasts as long. */
static int import_grant(struct cmd_ctx *x,
                        struct req *r,
                        const struct imp *m,
                        const struct imp_grant *ig,
                        const struct policy_revokes *rv)
{
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
	struct buf k = BUF_INIT, v = BUF_INIT;
	char until[64];
	bool have = false;
	int rc;

	cmd_fmt_time(until, sizeof(until), ig->expires);
	if (ig->expires <= r->now) {
		buf_printf(&r->out,
		           "user %s: grant %s expired %s: left "
		           "out\n",
		           m->name, ig->net, until);
		return 0;
	}
	records_key_grant(&k, m->name, ig->net, "");
	rc = store_get(x->p.store, x->p.batch, CF_GRANTS, k.p, k.len, &v);
	if (rc == 0) {
		Grantd__V1__Grant *old = grantd__v1__grant__unpack(
		        NULL, v.len, (const uint8_t *)v.p);
		have = old && !policy_grant_void(old, rv) &&
		       old->expires >= ig->expires;
		if (old)
			grantd__v1__grant__free_unpacked(old, NULL);
	}
	buf_free(&k);
	buf_free(&v);
	if (rc < 0 && rc != GD_ENOTFOUND)
		return rc;
	if (have) {
		buf_printf(&r->out, "user %s: grant %s until %s: exists\n",
		           m->name, ig->net, until);
		return 0;
	}
	g.user = (char *)m->name;
	g.net = (char *)ig->net;
	g.session = "";
	SET(g, added, ig->added);
	SET(g, expires, ig->expires);
	g.site = (char *)ops_site(x->ops);
	if ((rc = emit(x, m, GRANTD__V1__OP__BODY_GRANT, &g)) < 0)
		return rc;
	buf_printf(&r->out, "user %s: grant %s until %s: %s\n", m->name,
	           ig->net, until, done_word(m));
	if (!m->dry)
		log_info("grant added user=%s net=%s expires=%lld by=import",
		         m->name, ig->net, (long long)ig->expires);
	return 0;
}

/* ---- the request -------------------------------------------------------- */

/* Everything after the checks: the user, the enrollment and its mark,
 * the grants. */
static int import_all(struct cmd_ctx *x,
                      struct req *r,
                      const struct imp *m,
                      const struct policy_user *u)
{
	struct policy_revokes rv;
	uint64_t id = 0, floor = 0;
	int rc;

	if ((rc = import_user(x, r, m, u->user)) != 0)
		return rc;
	if (m->kind && u->enroll) {
		id = u->enroll->id;
		floor = u->enroll->kind == GRANTD__V1__OTP_KIND__OTP_HOTP
		                ? u->enroll->counter
		                : 0;
		buf_printf(&r->out, "user %s: enrollment exists\n", m->name);
	} else if (m->kind) {
		if ((rc = new_enrollment(x, r, m, &id)) < 0)
			return rc;
		floor = m->kind == GRANTD__V1__OTP_KIND__OTP_HOTP ? m->counter
		                                                  : 0;
	}
	if (m->kind) {
		/* an HOTP enrollment starts at its counter: a mark below it
		 * is no news */
		if ((rc = import_mark(x, r, m, id, floor)) < 0)
			return rc;
	}
	if ((rc = policy_revokes_load(&rv, &x->p, m->name)) == 0)
		for (size_t i = 0; rc == 0 && i < m->ngrants; i++)
			rc = import_grant(x, r, m, &m->grants[i], &rv);
	policy_revokes_clear(&rv);
	return rc;
}

int cmd_user_import(struct cmd_ctx *x, struct req *r)
{
	struct imp m = {0};
	struct policy_user u = {0};
	bool loaded = false;
	int rc = 0;

	if (parse_args(r, &m))
		goto done;
	if ((rc = policy_user_load(&u, &x->p, m.name)) < 0)
		goto done;
	loaded = true;
	if (m.kind && u.enroll && !same_enrollment(u.enroll, &m)) {
		cmd_refuse(r,
		           "user %s is already enrolled with another "
		           "secret: left as it is (to take the imported one: "
		           "grantctl unenroll %s, then import again)",
		           m.name, m.name);
		goto done;
	}
	/* a refusal (1) leaves nothing behind: every check comes before the
	 * first operation it could cancel, but the keys' own, made in
	 * import_user before anything is emitted */
	if ((rc = import_all(x, r, &m, &u)) > 0)
		rc = 0;
	if (rc == 0 && r->status == 0 && !m.dry)
		log_info("user imported user=%s", m.name);
done:
	if (loaded)
		policy_user_clear(&u);
	sodium_memzero(m.secret, sizeof(m.secret));
	free(m.grants);
	return rc;
}
