/*
 * cmd_user.c: users and their enrollments.  A user's own 2fa enroll and
 * unenroll; the administrator's user add, del and list, unlock, enroll
 * and unenroll; and the keys grant-keys writes for sshd.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "authkeys.h"
#include "cmd.h"
#include "cmd_user_int.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "otp.h"
#include "policy.h"
#include "records.h"
#include "banned.h"

/* ---- 2fa enroll, unenroll ----------------------------------------------- */

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
static int make_enrollment(struct cmd_ctx *x, struct req *r, const char *user,
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
	/* random, not the creation's stamp (review N12): an id that says
	 * when it was made is guessable by whoever saw the enrollment */
	uint64_t id = 0;
	while (!id)
		randombytes_buf(&id, sizeof(id));
	SET(e, id, id);
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_ENROLL, &e)) < 0)
		goto done;
	otp_uri(&r->uri, &e, x->p.host);
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

static int cmd_enroll_self(struct cmd_ctx *x, struct req *r)
{
	const char *mode = r->rq->n_args ? r->rq->args[0] : NULL;
	uint8_t secret[OTP_NEW_SECRET_LEN];
	struct policy_user u;
	bool totp;
	int rc;

	if (!mode)
		return cmd_bad(r, "Enrolment mode not specified: use '2fa "
			       "enroll totp' for a phone app or '2fa enroll "
			       "yubikey'");
	if (strcmp(mode, "totp") && strcmp(mode, "yubikey"))
		return cmd_bad(r, "%s is not a valid enrollment mode: use totp "
			       "or yubikey", mode);
	totp = !strcmp(mode, "totp");
	if ((rc = cmd_load_caller(x, r, &u)) < 0)
		goto done;
	if (u.enrolled) {
		cmd_refuse(r, "User %s already enrolled. To re-issue your "
			   "token, first run: ssh %s 2fa unenroll <token>",
			   cmd_user_of(r),
			   x->p.host);
		goto done;
	}
	/* gitolite mode: the user's first enrollment makes the record (no
	 * keys: gitolite has them), in this batch with the enrollment */
	if (!u.user) {
		Grantd__V1__User nu = GRANTD__V1__USER__INIT;
		nu.name = (char *)cmd_user_of(r);
		if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_USER,
					&nu)) < 0)
			goto done;
		log_info("user added user=%s by=gitolite-enroll",
			 cmd_user_of(r));
	}
	otp_new_secret(secret, sizeof(secret));
	rc = make_enrollment(x, r, cmd_user_of(r),
			     totp ? GRANTD__V1__OTP_KIND__OTP_TOTP :
				    GRANTD__V1__OTP_KIND__OTP_HOTP,
			     secret, sizeof(secret), 6, 30, 0, false);
	if (rc == 0) {
		if (!totp)
			r->uri.len = 0; /* no QR code for a YubiKey */
		buf_printf(&r->out, "Now run the following command to verify "
			   "that all went well:\n    ssh %s 2fa val <token>\n",
			   x->p.host);
	}
	sodium_memzero(secret, sizeof(secret));
done:
	policy_user_clear(&u);
	return rc == GD_EDENIED ? 0 : rc;
}

static int end_enrollment(struct cmd_ctx *x, struct req *r,
			  Grantd__V1__Enrollment *old)
{
	Grantd__V1__Enrollment e = GRANTD__V1__ENROLLMENT__INIT;
	int rc;

	e.user = old->user;
	SET(e, id, old->id);
	SET(e, deleted, 1);
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_ENROLL, &e)) < 0)
		return rc;
	return cmd_revoke_all(x, r, old->user, NULL);
}

static int cmd_unenroll_self(struct cmd_ctx *x, struct req *r)
{
	struct policy_user u;
	const char *how;
	bool ok;
	int rc;

	if ((rc = cmd_load_caller(x, r, &u)) < 0)
		goto done;
	if ((rc = cmd_validate_token(x, r, &u, r->rq->args[0], &ok,
				     &how)) < 0 || !ok)
		goto done;
	if ((rc = end_enrollment(x, r, u.enroll)) < 0)
		goto done;
	buf_puts(&r->out, "Removing the secrets.\nExpiring all validations."
			  "\nYou have been successfully unenrolled.\n");
	log_info("unenrolled user=%s", cmd_user_of(r));
done:
	policy_user_clear(&u);
	return rc == GD_EDENIED ? 0 : rc;
}


/* ---- keys (grant-keys) -------------------------------------------------- */

/* Log that the key with fingerprint fp has more than one owner, and is
 * therefore given to none. */
static void log_shared_key(const char *fp)
{
	log_warn("ssh key held by two users is refused to both fp=%s (remove "
		 "it from all but one: grantctl user list, user add/del)", fp);
}

/* Every live user's keys, NAME \t KEY, leaving out a key that two users
 * hold (key_owners). */
static int cmd_keys(struct cmd_ctx *x, struct req *r)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	const char *key;
	size_t klen;
	char fp[RECORDS_FP_MAX];
	int rc, n;

	store_iter_new(&it, x->p.store, x->p.batch, CF_USERS, "", 0);
	while ((rc = store_iter_next(it, &key, &klen, &v)) > 0) {
		Grantd__V1__User *u = grantd__v1__user__unpack(
			NULL, v.len, (const uint8_t *)v.p);
		for (size_t i = 0; u && !u->deleted && i < u->n_keys; i++) {
			if (records_ssh_fingerprint(fp, u->keys[i]) == 0) {
				if ((rc = policy_key_owners(&x->p, fp, &n, NULL, NULL)) < 0)
					break;
				if (n > 1) {
					log_shared_key(fp);
					continue;
				}
			}
			buf_printf(&r->out, "%s\t%s\n", u->name, u->keys[i]);
		}
		if (u)
			grantd__v1__user__free_unpacked(u, NULL);
		if (rc < 0)
			break;
	}
	store_iter_free(&it);
	buf_free(&v);
	return rc < 0 ? rc : 0;
}

/* args: FINGERPRINT (sshd's %f, "SHA256:..."): the one key of a live user
 * with that fingerprint, as keys.list prints it (NAME \t KEY), from the
 * index ops keeps (CF_KEYFP); nothing when no user has the key, and
 * nothing (logged) when two users have it. */
static int cmd_keys_find(struct cmd_ctx *x, struct req *r)
{
	const char *fp = r->rq->args[0];
	struct buf owner = BUF_INIT, line = BUF_INIT;
	int rc, n;

	if (strncmp(fp, "SHA256:", 7) || strlen(fp) >= RECORDS_FP_MAX ||
	    strpbrk(fp, " \t\r\n"))
		return cmd_bad(r, "'%.80s' is no key fingerprint (want "
			       "SHA256:..., as sshd gives it for %%f)", fp);
	rc = policy_key_owners(&x->p, fp, &n, &owner, &line);
	if (rc == 0 && n == 1)
		buf_printf(&r->out, "%s\t%.*s\n", owner.p, (int)line.len,
			   line.p);
	else if (rc == 0 && n > 1)
		log_shared_key(fp);
	buf_free(&owner);
	buf_free(&line);
	return rc;
}


/* ---- admin: users ------------------------------------------------------- */

/* Load the live user name (a request's argument) into *u, which the
 * caller then clears.  Returns 1 with *u loaded; 0, with nothing to clear,
 * when r holds the answer (a bad name, or no such user); or a negative
 * gd_err. */
static int load_existing(struct policy_user *u, struct cmd_ctx *x,
			 struct req *r, const char *name)
{
	int rc;

	if (!cmd_name_arg(r, name))
		return 0;
	if ((rc = policy_user_load(u, &x->p, name)) < 0)
		return rc;
	if (!u->user) {
		policy_user_clear(u);
		return cmd_refuse(r, "no such user '%s'", name);
	}
	return 1;
}

/* One line for each of the n keys just added that is a security key
 * counting as two factors (policy_key_2fa): what that means, since it
 * is only as good as what the authenticator reports (N4). */
static void sk_notes(struct cmd_ctx *x, struct req *r, char **keys, size_t n)
{
	enum config_sk sk = x->p.cfg->policy.security_keys;
	char fp[RECORDS_FP_MAX];

	for (size_t i = 0; sk != CONFIG_SK_OFF && i < n; i++) {
		if (!authkeys_is_sk(keys[i]) ||
		    records_ssh_fingerprint(fp, keys[i]) < 0)
			continue;
		buf_printf(&r->out, "note: security key %s counts as two "
			   "factors (security_keys = %s): a push over it needs "
			   "no token; it proves the %s its authenticator "
			   "reports, which a software one reports at will "
			   "(grantd.conf(5))\n", fp,
			   sk == CONFIG_SK_PIN ? "pin" : "touch",
			   sk == CONFIG_SK_PIN ? "touch and PIN" : "touch");
	}
}

int cmd_user_key_taken(struct cmd_ctx *x, struct req *r, const char *name,
		       const char *key)
{
	struct buf other = BUF_INIT;
	char fp[RECORDS_FP_MAX];
	int rc = 0, owners;

	/* a key another live user holds would log in as one of the two
	 * (issue 19, N10) */
	if (records_ssh_fingerprint(fp, key) == 0 &&
	    (rc = policy_key_owners(&x->p, fp, &owners, &other, NULL)) == 0 &&
	    owners && strcmp(other.p, name)) {
		cmd_bad(r, "key %s is already held by user '%s': a key may "
			"belong to one user only", fp, other.p);
		rc = 1;
	}
	buf_free(&other);
	return rc;
}

/* Add the keys of one --key value (a .pub file's keys, one a line: grantctl
 * sends them all, so that none is dropped) to keys[*nkeys]; a key already
 * there is left out.  The lines are cut in place.  Returns 0, 1 when r
 * holds a bad() answer, or a negative gd_err. */
static int add_key_lines(struct cmd_ctx *x, struct req *r, const char *name,
			 char *lines, char **keys, size_t *nkeys)
{
	char *save = NULL;
	int rc;

	for (char *a = strtok_r(lines, "\n", &save); a;
	     a = strtok_r(NULL, "\n", &save)) {
		if (!name_pubkey_ok(a)) {
			cmd_bad(r, "not an SSH public key: want one line 'TYPE "
				"BASE64 [comment]' as in a .pub file");
			return 1;
		}
		bool dup = false;
		for (size_t j = 0; j < *nkeys; j++)
			dup |= !strcmp(keys[j], a);
		if (dup)
			continue;
		if ((rc = cmd_user_key_taken(x, r, name, a)) != 0)
			return rc;
		if (*nkeys == OPS_MAX_KEYS) {
			cmd_bad(r, "too many keys (at most %d)", OPS_MAX_KEYS);
			return 1;
		}
		keys[(*nkeys)++] = a;
	}
	return 0;
}

static int cmd_user_add(struct cmd_ctx *x, struct req *r)
{
	Grantd__V1__User nu = GRANTD__V1__USER__INIT;
	const char *name = r->rq->args[0];
	char *keys[OPS_MAX_KEYS];
	size_t nkeys = 0;
	struct policy_user u;
	int rc;

	if (!cmd_name_arg(r, name))
		return 0;
	if ((rc = policy_user_load(&u, &x->p, name)) < 0)
		return rc;
	for (size_t i = 0; u.user && i < u.user->n_keys; i++)
		keys[nkeys++] = u.user->keys[i];
	for (size_t i = 1; i < r->rq->n_args; i++) {
		if (strcmp(r->rq->args[i], "--key") || i + 1 == r->rq->n_args) {
			cmd_bad(r, "usage: grantctl user add NAME [--key "
				"PUBKEYFILE]...");
			goto done;
		}
		/* the request is ours to cut: every key it holds, or none */
		rc = add_key_lines(x, r, name, r->rq->args[++i], keys, &nkeys);
		if (rc != 0)
			goto done;
	}
	if (u.user && nkeys == u.user->n_keys) {
		cmd_refuse(r, "user '%s' already exists (with these keys)",
			   name);
		goto done;
	}
	nu.name = (char *)name;
	nu.keys = keys;
	nu.n_keys = nkeys;
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_USER, &nu)) < 0)
		goto done;
	buf_printf(&r->out, "%s user %s (%zu key%s)\n",
		   u.user ? "updated" : "added", name, nkeys,
		   nkeys == 1 ? "" : "s");
	sk_notes(x, r, keys + (u.user ? u.user->n_keys : 0),
		 nkeys - (u.user ? u.user->n_keys : 0));
	log_info("user %s user=%s keys=%zu", u.user ? "updated" : "added",
		 name, nkeys);
done:
	policy_user_clear(&u);
	return rc < 0 ? rc : 0;
}

static int cmd_user_del(struct cmd_ctx *x, struct req *r)
{
	Grantd__V1__User nu = GRANTD__V1__USER__INIT;
	const char *name = r->rq->args[0];
	struct policy_user u;
	int rc;

	if ((rc = load_existing(&u, x, r, name)) <= 0)
		return rc;
	nu.name = (char *)name;
	SET(nu, deleted, 1);
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_USER, &nu)) < 0)
		goto done;
	if (u.enroll && (rc = end_enrollment(x, r, u.enroll)) < 0)
		goto done;
	if (!u.enroll && (rc = cmd_revoke_all(x, r, name, NULL)) < 0)
		goto done;
	buf_printf(&r->out, "deleted user %s\n", name);
	log_info("user deleted user=%s", name);
done:
	policy_user_clear(&u);
	return rc;
}

static int cmd_user_list(struct cmd_ctx *x, struct req *r)
{
	struct store_iter *it;
	struct buf v = BUF_INIT;
	cJSON *arr = r->rq->json ? cJSON_CreateArray() : NULL;
	const char *key;
	size_t klen;
	int rc, shown = 0;

	store_iter_new(&it, x->p.store, x->p.batch, CF_USERS, "", 0);
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
		if ((rc = policy_user_load(&u, &x->p, rec->name)) < 0 ||
		    (rc = policy_lock_state(&x->p, rec->name,
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
			cmd_print_json(r, arr);
	}
	return rc < 0 ? rc : 0;
}

static int cmd_unlock(struct cmd_ctx *x, struct req *r)
{
	Grantd__V1__Unlock u = GRANTD__V1__UNLOCK__INIT;
	const char *name = r->rq->args[0];
	struct policy_user pu;
	int rc;

	if ((rc = load_existing(&pu, x, r, name)) <= 0)
		return rc;
	policy_user_clear(&pu);
	u.user = (char *)name;
	if ((rc = cmd_emit_body(x, GRANTD__V1__OP__BODY_UNLOCK, &u)) < 0)
		return rc;
	buf_printf(&r->out, "unlocked user %s\n", name);
	log_info("user unlocked user=%s", name);
	return 0;
}


/* ---- admin: enrollment -------------------------------------------------- */

static int cmd_enroll_admin(struct cmd_ctx *x, struct req *r)
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

	if (!cmd_name_arg(r, name))
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
				return cmd_bad(r, "give one of --totp or --hotp"
					       );
			kind = a[2] == 't' ? GRANTD__V1__OTP_KIND__OTP_TOTP :
					     GRANTD__V1__OTP_KIND__OTP_HOTP;
			continue;
		}
		if (!v)
			return cmd_bad(r, "%s", usage);
		i++;
		if (!strcmp(a, "--secret")) {
			b32 = v;
		} else if (!strcmp(a, "--digits")) {
			if (cmd_parse_uint(v, 8, &digits) < 0 ||
			    (digits != 6 && digits != 8))
				return cmd_bad(r, "--digits must be 6 or 8, "
					       "not '%s'", v);
		} else if (!strcmp(a, "--counter")) {
			if (cmd_parse_uint(v, 1ULL << 62, &counter) < 0)
				return cmd_bad(r, "--counter must be a "
					       "non-negative integer, not '%s'",
					       v);
		} else if (!strcmp(a, "--period")) {
			if (cmd_parse_uint(v, 300, &period) < 0 || period < 10)
				return cmd_bad(r, "--period must be 10 to 300 "
					       "seconds, not '%s'", v);
		} else {
			return cmd_bad(r, "unknown option '%s'; %s", a, usage);
		}
	}
	if (!kind)
		return cmd_bad(r, "%s", usage);
	if (b32) {
		if (otp_base32_decode(secret, &slen, b32) < 0) {
			rc = cmd_bad(r, "--secret must be base32 (A-Z, 2-7)");
			goto wipe;
		}
		if (slen < OTP_MIN_SHORT_SECRET_LEN ||
		    (slen < OTP_MIN_SECRET_LEN && !allow_short)) {
			rc = cmd_bad(r, "--secret has %zu bits, fewer than 128 "
				     "bits (RFC 4226); --allow-short-secret "
				     "takes 80 or more, for a token migrated "
				     "from a system that made shorter ones",
				     slen * 8);
			goto wipe;
		}
	} else if (allow_short) {
		return cmd_bad(r, "--allow-short-secret goes with --secret");
	} else {
		slen = OTP_NEW_SECRET_LEN;
		otp_new_secret(secret, slen);
	}
	if ((rc = policy_user_load(&u, &x->p, name)) < 0)
		goto wipe;
	if (!u.user)
		cmd_refuse(r, "no such user '%s'; add it first: grantctl user "
			   "add %s", name, name);
	else if (u.enrolled)
		cmd_refuse(r, "user '%s' is already enrolled; run 'grantctl "
			   "unenroll %s' first", name, name);
	else
		rc = make_enrollment(x, r, name, (Grantd__V1__OtpKind)kind,
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

static int cmd_unenroll_admin(struct cmd_ctx *x, struct req *r)
{
	const char *name = r->rq->args[0];
	struct policy_user u;
	int rc;

	if (!cmd_name_arg(r, name))
		return 0;
	if ((rc = policy_user_load(&u, &x->p, name)) < 0)
		return rc;
	if (!u.enroll)
		cmd_refuse(r, "user '%s' is not enrolled", name);
	else if ((rc = end_enrollment(x, r, u.enroll)) == 0) {
		buf_printf(&r->out, "unenrolled user %s\n", name);
		log_info("unenrolled user=%s by=admin", name);
	}
	policy_user_clear(&u);
	return rc;
}

/* ---- the rows ----------------------------------------------------------- */

const struct cmd cmd_user_rows[] = {
	CMD_2FA(ENROLL, CMD_TWOFA | CMD_BATCH, cmd_enroll_self),
	CMD_2FA(UNENROLL, CMD_TWOFA | CMD_USES_IP | CMD_BATCH,
		cmd_unenroll_self),
	CMD_ROW("keys.list", CMD_ON_USER | CMD_ON_ADMIN | CMD_READS, 0, 0,
		cmd_keys),
	CMD_ROW("keys.find", CMD_ON_USER | CMD_ON_ADMIN | CMD_READS, 1, 1,
		cmd_keys_find),
	CMD_ROW("user.add", CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND, 1, GD_CTL_MAX_ARGS,
		cmd_user_add),
	CMD_ROW("user.del", CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND, 1, 1,
		cmd_user_del),
	CMD_ROW("user.list", CMD_ON_ADMIN | CMD_READS, 0, 0, cmd_user_list),
	CMD_ROW("user.keys", CMD_ON_ADMIN | CMD_READS, 1, 1, cmd_user_keys),
	CMD_ROW("user.key-del", CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND, 2, 2,
		cmd_user_key_del),
	CMD_ROW("user.import", CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND, 1,
		GD_CTL_MAX_ARGS, cmd_user_import),
	CMD_ROW("unlock", CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND, 1, 1,
		cmd_unlock),
	CMD_ROW("enroll", CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND, 2, 11,
		cmd_enroll_admin),
	CMD_ROW("unenroll", CMD_ON_ADMIN | CMD_BATCH | CMD_FRONTEND, 1, 1,
		cmd_unenroll_admin),
};
const size_t cmd_user_nrows = GD_ARRAY_SIZE(cmd_user_rows);
