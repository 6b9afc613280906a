/*
 * pcache.h: the reader thread's cache of the facts a push decision reads
 * that depend on neither the client's address nor the clock (issue 23):
 * per user, whether a live user record exists, whether an enrollment
 * exists and whether it is active, the user's revocations (the user's
 * and the address ones: stamps and nets) and the user's grants that can
 * allow anything (not voided by a revocation, a net that parses: net,
 * expiry, session); per repository, whether it exists, its mode and its
 * writers; per SSH key fingerprint, which live users hold the key (the
 * keys socket's lookup, keys.find).  policy.c fills it from the view a
 * decision reads and reads it back (policy_push, policy_2fa, the
 * revocations of find_grant, policy_key_owners).  The
 * address and the clock stay out of it: each decision matches its
 * caller's address and its own time against the cached grants.
 *
 * Facts, never records: nothing of an enrollment but "exists" and
 * "active" is kept, so no secret (and nothing derived from one) is ever
 * held here.  (A key line is a public key, as authorized_keys holds it.)
 *
 * When it is dropped, and why that is enough: every fact here was read
 * from the reader's current view, an immutable snapshot, and readers.c
 * drops the whole cache (pcache_drop) in the same step that installs a
 * new view (take_view).  So a decision never uses a fact older than the
 * view it answers from: what the cache says is exactly what the view
 * says.  A writer's batch changes under its reader, so only a view may be
 * read through a cache (policy.h: struct policy_ctx's cache is NULL
 * everywhere else).
 *
 * Bounded: a direct-mapped table per kind (users, repositories, keys) of
 * PCACHE_SLOTS entries, indexed by a hash of the name; a name that lands
 * on a taken slot evicts what was there.  Owned by the reader thread
 * only; no locks.
 */
#ifndef GD_PCACHE_H
#define GD_PCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

#define PCACHE_SLOTS 1024

struct pcache;

/* A user's revocations as policy_grant_void reads them: the user's own
 * (user: there is one, stamped (user_hlc, user_origin)) and each address
 * revocation whose net parses, with its stamp. */
struct pcache_addr_rev {
	struct gd_net net;
	uint64_t hlc;
	char *origin;
};

struct pcache_revokes {
	bool user;
	uint64_t user_hlc;
	char *user_origin;
	struct pcache_addr_rev *addr;
	size_t n_addr, cap_addr;
};

/* A grant that may allow a push (see above); session NULL: any. */
struct pcache_grant {
	struct gd_net net;
	int64_t expires;
	char *session;
};

/* A user with more grants than this that may still allow keeps none in
 * the cache (grants_over): each decision reads them from the view. */
#define PCACHE_GRANTS_MAX 64

/* A user's entry: each part read only when a decision needs it (its
 * *_known flag then set). */
struct pcache_user {
	char *name; /* NULL: an empty slot */
	bool user_known;
	bool live; /* a user record, not deleted */
	bool enroll_known;
	bool enroll; /* an enrollment record, not deleted */
	bool enrolled; /* enroll, and active (after the first val) */
	bool revokes_known;
	struct pcache_revokes rv;
	bool grants_known;
	bool grants_over; /* more than PCACHE_GRANTS_MAX: none kept */
	struct pcache_grant *grants;
	size_t n_grants, cap_grants;
};

/* A repository's entry. */
struct pcache_repo {
	char *name; /* NULL: an empty slot */
	bool known;
	bool exists; /* a record, not deleted */
	int mode; /* Grantd__V1__RepoMode */
	char **writers;
	size_t n_writers;
};

/* A key fingerprint's entry: the live users holding that key, counted
 * up to 2 (two or more: the key is refused to all), and the first one's
 * name and key line. */
struct pcache_key {
	char *fp; /* NULL: an empty slot */
	bool known;
	int owners;
	char *owner; /* owners >= 1 */
	char *line; /* owners >= 1 */
};

/* A cache of slots entries per kind (a power of two; 0: PCACHE_SLOTS).
 * *out is the caller's (pcache_free). */
void pcache_new(struct pcache **out, size_t slots);

/* NULL-safe; sets *cp to NULL. */
void pcache_free(struct pcache **cp);

/* The view changed: every entry is gone.  readers.c, as it installs a new
 * view.  NULL-safe. */
void pcache_drop(struct pcache *c);

/* The entry of user name: the one cached, or its slot emptied (what was
 * there evicted) and named name, nothing known.  Borrowed: valid until
 * the next pcache_user or pcache_drop. */
struct pcache_user *pcache_user(struct pcache *c, const char *name);

/* The same for repository name (until the next pcache_repo or drop). */
struct pcache_repo *pcache_repo(struct pcache *c, const char *name);

/* The same for key fingerprint fp (until the next pcache_key or drop). */
struct pcache_key *pcache_key(struct pcache *c, const char *fp);

/* Set e's facts (known from now on): owner and line copied (NULL when
 * owners is 0). */
void pcache_key_set(struct pcache_key *e,
                    int owners,
                    const char *owner,
                    const char *line);

/* Set e's facts (known from now on): writers copied. */
void pcache_repo_set(struct pcache_repo *e,
                     bool exists,
                     int mode,
                     char *const *writers,
                     size_t n_writers);

/* Whether user is among e's writers. */
bool pcache_repo_writer(const struct pcache_repo *e, const char *user);

/* Free what e holds (not e), leaving it empty. */
void pcache_repo_clear(struct pcache_repo *e);

/* Add an address revocation (origin copied) to rv. */
void pcache_revokes_add(struct pcache_revokes *rv,
                        const struct gd_net *net,
                        uint64_t hlc,
                        const char *origin);

/* Free what rv holds (not rv), leaving it empty. */
void pcache_revokes_clear(struct pcache_revokes *rv);

/* Add a grant (session copied; NULL or "": any session) to e's; false
 * when e holds PCACHE_GRANTS_MAX already: then e keeps none and says
 * grants_over. */
bool pcache_grants_add(struct pcache_user *e,
                       const struct gd_net *net,
                       int64_t expires,
                       const char *session);

/* Drop e's grants (grants_known and grants_over untouched). */
void pcache_grants_clear(struct pcache_user *e);

/* Does a grant for net until expires, for grant_session (NULL or "":
 * any), allow ip in session (NULL: none) at now?  The one rule, for the
 * cached grants and for those read from the store (policy.c). */
bool pcache_grant_allows(const struct gd_net *net,
                         int64_t expires,
                         const char *grant_session,
                         const struct gd_net *ip,
                         const char *session,
                         int64_t now);

/* Does one of e's grants allow ip (in session; NULL: none) at now? */
bool pcache_grants_cover(const struct pcache_user *e,
                         const struct gd_net *ip,
                         const char *session,
                         int64_t now);

/* Call fn on every block of memory c holds (its tables and what their
 * entries point to): for a test that no secret is among them. */
void pcache_each_block(const struct pcache *c,
                       void (*fn)(const void *p, size_t len, void *payload),
                       void *payload);

#endif
