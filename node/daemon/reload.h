/*
 * reload.h: SIGHUP (systemctl reload grantd): the configuration file read
 * again, and the peers' public keys in it applied without a restart.
 *
 * main.c's handler only counts the signal; the loop (loop.c) calls
 * reload_run() on its own thread, between two turns.  The file the node was
 * started with is read and checked as at start (config_load, secret_key
 * set, no peer with this node's own key).  A file that does not pass is
 * logged with its FILE:LINE and the node keeps running on what it has.
 *
 * Of what changed, `[peer NAME] verifier_key` is applied (repl checks
 * operations with the new keys from then on: repl_set_verifier), and
 * `[peer NAME] public_key`, so that a
 * peer's key rotation (docs/operations.md section 2) needs no restart of
 * the other sites: the link admits the new key and no longer the old one
 * (peer_set_key), the node's config takes it (repl's SUB and DEALER and
 * vote's DEALER are made again with it at their next tick: linkmon_stale),
 * and the gitrepl actor is sent it (gitrepl_set_key: it keeps its own copy
 * of the keys).  Every other change is logged by name, to take effect at
 * the next restart; peers are never added or removed by a reload.
 */
#ifndef GD_RELOAD_H
#define GD_RELOAD_H

#include "config.h"

struct gitrepl;
struct opsig_signer;
struct peer_link;
struct repl;

/* What reload_diff found of one setting. */
enum reload_change {
	RELOAD_CHANGED, /* a setting other than a peer's key */
	RELOAD_PEER_KEY, /* [peer NAME] public_key: applied */
	RELOAD_PEER_VKEY, /* [peer NAME] verifier_key: applied */
	RELOAD_PEER_ADDED, /* a [peer NAME] not configured at start */
	RELOAD_PEER_REMOVED, /* a [peer NAME] the file no longer has */
};

/* section: "node", "policy", "gitolite" or "peer NAME"; key: the setting
 * (NULL for a peer added or removed); peer: the peer's index in the old
 * config (a peer's settings, RELOAD_PEER_KEY, RELOAD_PEER_REMOVED), else
 * -1.
 * Everything is borrowed for the call. */
typedef void (*reload_fn)(enum reload_change what,
                          const char *section,
                          const char *key,
                          int peer,
                          void *payload);

/* Call fn for every setting that differs between old (the running
 * configuration) and cur (the file now): [node], [policy] and [gitolite]
 * first, then old's peers in their order, then the peers only cur has.
 * Returns how many calls were made. */
int reload_diff(const struct config *old,
                const struct config *cur,
                reload_fn fn,
                void *payload);

/* Read cfg's file (cfg->path) again and apply the peers' new keys (above)
 * to cfg, link, gitrepl and repl; own_pub is this node's public CURVE key
 * (no peer may have it), own its signing key (nor that).  cfg, link,
 * gitrepl and repl are the node's (main.c's); writer
 * thread (the loop).  Returns 0 (read; done or nothing to do) or GD_EINVAL
 * / GD_EIO (the file refused, or a key a peer cannot take; logged, nothing
 * applied). */
int reload_run(struct config *cfg,
               struct peer_link *link,
               struct gitrepl *gitrepl,
               struct repl *repl,
               const char *own_pub,
               const struct opsig_signer *own);

#endif
