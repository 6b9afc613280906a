/*
 * policy.h: read-only decisions: who is enrolled, who is locked out,
 * which grant covers an address, and whether a push may proceed.  This is
 * where a push is authorised (policy_push); cmd_grant.c calls it for
 * grant-shell and for `grantctl check`, and its 2-factor part alone
 * (policy_2fa) for gitolite's VREF (vref.check).
 *
 * Every function reads through a struct policy_ctx: the config, the
 * store, and the batch to read through (a writer's own changes) or NULL
 * (committed state).  Any thread that owns the batch it passes.  The
 * reader thread also passes its cache (pcache.h) with its view: then
 * policy_push, policy_2fa and policy_grant_covers, and the revocations
 * policy_find_grant reads, take what does not depend on the address or
 * the clock from it.
 * (policy_key_* are in policy_key.c, policy_lock_state in policy_lock.c.)
 */
#ifndef GD_POLICY_H
#define GD_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "addr.h"
#include "buf.h"
#include "grantd.pb-c.h"
#include "config.h"
#include "store.h"

struct pcache;

struct policy_ctx {
	const struct config *cfg;
	struct store *store;
	struct store_batch *batch; /* read through it; NULL: committed */
	const char *host;          /* the name users ssh to, for hints */
	/* the reader's facts of batch, a view (pcache.h); NULL: none (every
	 * other caller: a batch changes under it, and committed state too) */
	struct pcache *cache;
};

struct policy_user {
	Grantd__V1__User *user;         /* NULL: no such (live) user */
	Grantd__V1__Enrollment *enroll; /* NULL: none, or unenrolled */
	bool enrolled;                  /* enroll && enroll->active */
};

/*
 * The key the user logged in with, as grant-keys' authorized_keys line
 * told grant-shell (--key-kind, sent as the request's key_kind): sshd
 * picked that line by the key the client proved it holds, and checked the
 * touch (and, for sk-pin, the PIN: verify-required) before running it.
 * UNKNOWN: no key_kind (gitolite's pieces, grantctl check).
 */
enum policy_key {
	POLICY_KEY_UNKNOWN = 0,
	POLICY_KEY_PLAIN,    /* "plain": an ordinary SSH key */
	POLICY_KEY_SK_TOUCH, /* "sk-touch": a security key, touched */
	POLICY_KEY_SK_PIN,   /* "sk-pin": touched, and its PIN given */
};

/* s: NULL or "" (UNKNOWN), "plain", "sk-touch" or "sk-pin".  Returns 0,
 * or GD_EINVAL for anything else. */
int policy_key_parse(enum policy_key *out, const char *s);

/* Whether a push over key k counts as two factors under cfg's [policy]
 * security_keys: sk-touch with touch, sk-pin with touch or pin; nothing
 * with off. */
bool policy_key_2fa(const struct config *cfg, enum policy_key k);

/* Append what key k is as a factor ("an ordinary SSH key (one factor)",
 * "a security key with touch (two factors)", ...) to out, for the texts
 * that say which factors were seen; nothing for UNKNOWN. */
void policy_key_text(struct buf *out, const struct config *cfg,
		     enum policy_key k);

/* Load a user's records.  Fill *out; free it with policy_user_clear.
 * Returns 0, or a negative gd_err with *out left empty (nothing to
 * free). */
int policy_user_load(struct policy_user *out, const struct policy_ctx *pc,
		     const char *name);
void policy_user_clear(struct policy_user *u);

/* Failed attempts in the lockout window at every site, each counted once,
 * except those stamped before the last unlock (in (hlc, site) order, not by
 * wall time); *until_ms is when the lock lifts (0: not locked). */
int policy_lock_state(const struct policy_ctx *pc, const char *user,
		      uint64_t now_ms, int *failures, uint64_t *until_ms);

/* What voids a user's grants besides their own revoked flag: the user's
 * revocation (unenroll, user del, revoke all) and the address
 * revocations (an address revoke: grantctl grant revoke USER IP, 2fa
 * inval), each voiding the grants stamped before it. */
struct policy_revokes {
	Grantd__V1__Revocation *user; /* NULL: none */
	Grantd__V1__AddrRevocation **addr;
	size_t n_addr;
};

/* Whether a revoke of target (policy_revokes' addresses, 2fa inval's and
 * grant revoke's argument) hits a grant for net: an address hits every
 * net that contains it, a subnet only that subnet. */
bool policy_net_hits(const struct gd_net *net, const struct gd_net *target);

/* Whether grant g is void: revoked, or stamped before the user's last
 * revocation or before an address revocation that hits its net (rv may
 * be NULL). */
bool policy_grant_void(const Grantd__V1__Grant *g,
		       const struct policy_revokes *rv);

/* Load user's revocations into *out (zeroed first); free them with
 * policy_revokes_clear, also after an error. */
int policy_revokes_load(struct policy_revokes *out,
			const struct policy_ctx *pc, const char *user);
void policy_revokes_clear(struct policy_revokes *rv);

/* The live grant of user covering ip (and session, for session grants)
 * that expires last; *out is the caller's
 * (grantd__v1__grant__free_unpacked) or NULL when none covers it. */
int policy_find_grant(Grantd__V1__Grant **out, const struct policy_ctx *pc,
		      const char *user, const struct gd_net *ip,
		      const char *session, int64_t now);

/* Whether a live grant of user covers ip (and session) at now: what
 * policy_find_grant finds or not, answered from pc's cache when it has
 * one (pcache.h: the user's grants kept with the view's facts). */
int policy_grant_covers(bool *covered, const struct policy_ctx *pc,
			const char *user, const struct gd_net *ip,
			const char *session, int64_t now);

/* The live users holding the SSH key with fingerprint fp (CF_KEYFP):
 * *n of them (counted up to 2), the first by name in *owner (when owner
 * is not NULL; "" when none) and its key line in *line (when line is not
 * NULL); from pc's cache when it has one.  One key held by two users
 * (issue 19, N10) is what two sites that each added it to another user
 * at once leave behind (user add refuses it otherwise): such a key logs
 * in as nobody.  Returns 0 or a negative gd_err. */
int policy_key_owners(const struct policy_ctx *pc, const char *fp, int *n,
		      struct buf *owner, struct buf *line);

/*
 * The 2-factor part of a push decision, as gitolite's VREF/2fa asks it
 * (gitolite has decided who may write): may user push from ip (over SSH
 * connection session) now?  required: only with a live grant covering ip;
 * otherwise (opt-in) a user who is not enrolled may push and an enrolled
 * one needs the grant.  "Enrolled" is an active enrollment (after the
 * first val) of a live user: no user record counts as not enrolled.  repo
 * (may be NULL) only names the repository in the texts.  Returns 0
 * (allowed), GD_EDENIED with why and hint filled (the reason, and the
 * command that fixes it; the texts of policy_push), or GD_EIO.
 */
int policy_2fa(const struct policy_ctx *pc, const char *user,
	       const struct gd_net *ip, const char *session, bool required,
	       const char *repo, int64_t now, struct buf *why,
	       struct buf *hint);

/*
 * May user push to repo from ip (over SSH connection session), logged in
 * with key, now?  Returns 0 (allowed), GD_EDENIED with why and hint
 * filled (the reason, and the exact command that fixes it), GD_ENOTFOUND
 * (no such repository) or GD_EIO.  After the repository's writers, a
 * repository in mode opt-in or required allows a key that counts as two
 * factors (policy_key_2fa: a security key), and is otherwise decided as
 * policy_2fa decides it; a 2-factor refusal then says, on a line of its
 * own in why, which factors were seen (unless key is UNKNOWN).
 * *factor (factor may be NULL), when allowed, says what allowed it, a
 * static string (the push log's factor): "mode-off" (the repository asks
 * no second factor), "security-key" (the key counts as two),
 * "not-required" (opt-in and the user is not enrolled) or "grant" (a live
 * grant covers ip).
 */
int policy_push(const struct policy_ctx *pc, const char *user,
		const struct gd_net *ip, const char *session,
		enum policy_key key, const char *repo, int64_t now,
		struct buf *why, struct buf *hint, const char **factor);

/* The repository record, or NULL (deleted or missing); caller frees. */
int policy_repo_load(Grantd__V1__Repo **out, const struct policy_ctx *pc,
		     const char *name);

#endif
