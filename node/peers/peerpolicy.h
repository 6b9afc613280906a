/*
 * peerpolicy.h: one policy across sites (issue 19, N8).
 *
 * Some [policy] settings only mean what they say when every site has the
 * same: token_quorum (a site in local mode validates tokens alone, which
 * reopens the replay window the majority sites think closed), the lockout
 * (lockout_failures, lockout_window), the token windows (totp_window,
 * hotp_lookahead) and security_keys.  Each heartbeat carries this site's
 * (peerpolicy_fill); the settings of every frontend peer are compared with
 * this site's when its heartbeat arrives (peerpolicy_take).  A difference
 * is logged once (naming the key and both values), shown per peer in
 * `grantctl status` ("policy_mismatch") and in metrics; a token_quorum
 * that differs from a frontend peer's makes this site refuse token
 * validation (peerpolicy_refuses: fail closed), while grants already made
 * keep working.
 *
 * A mirror's settings, and this site's when it is a mirror, are not
 * compared: a mirror takes no tokens.  A peer not heard yet, or one that
 * sends no settings (an older grantd), is not compared either.
 *
 * One owner thread: the node's main loop (repl fills and takes heartbeats,
 * the writer validates tokens and renders status there).
 */
#ifndef GD_PEERPOLICY_H
#define GD_PEERPOLICY_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "buf.h"
#include "config.h"
#include "grantd.pb-c.h"

/* The settings compared, and the longest text of one value. */
#define PEERPOLICY_KEYS      6
#define PEERPOLICY_VALUE_MAX 24

struct peerpolicy_peer {
	const char *site; /* the config's */
	bool frontend;
	bool heard; /* its settings came */
	/* the keys that differ, with this site's and the peer's values */
	int n;
	struct {
		const char *key;
		char here[PEERPOLICY_VALUE_MAX];
		char there[PEERPOLICY_VALUE_MAX];
	} diff[PEERPOLICY_KEYS];
};

struct peerpolicy {
	const struct config *cfg;
	int npeers;
	struct peerpolicy_peer peers[CONFIG_MAX_PEERS];
};

/* Set up pp for cfg's peers (cfg is borrowed and must outlive pp). */
void peerpolicy_init(struct peerpolicy *pp, const struct config *cfg);

/* This site's settings into *out (initialised here); its strings are
 * static, nothing to free. */
void peerpolicy_fill(const struct config *cfg, Grantd__V1__PolicySettings *out);

/* The settings site sent (ps may be NULL: none sent): compare them with
 * this site's and log a change of what differs (once per change). */
void peerpolicy_take(struct peerpolicy *pp,
                     const char *site,
                     const Grantd__V1__PolicySettings *ps);

/* Add "policy_mismatch": [{key, here, peer}...] and "policy_mismatches":
 * N for site to its status object o. */
void peerpolicy_json(const struct peerpolicy *pp, const char *site, cJSON *o);

/* Whether token validation must be refused here: a frontend peer's
 * token_quorum differs from this site's.  When it must, why holds one
 * line naming the peer and both values. */
bool peerpolicy_refuses(const struct peerpolicy *pp, struct buf *why);

#endif
