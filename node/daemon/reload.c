/*
 * reload.c: the configuration read again on SIGHUP (reload.h).
 *
 * The running configuration (main.c's, the node's) stays the one read at
 * start, but for the peers' public keys: reload_run() copies a new key
 * into it, where repl and vote, on this thread, find it at their next
 * tick.  The gitrepl actor never reads its keys; it is sent the new one.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "config.h"
#include "err.h"
#include "gitrepl.h"
#include "log.h"
#include "names.h"
#include "opsig.h"
#include "peer.h"
#include "repl.h"
#include "reload.h"
#include "xalloc.h"
#include "banned.h"

/* A setting, by where it lives in its struct: a string (size 0; NULL:
 * unset) or a value compared byte for byte. */
struct setting {
	const char *section, *key;
	size_t off, size;
};

#define STR(type, sec, key, field)                 \
	{                                          \
		sec, key, offsetof(type, field), 0 \
	}
#define VAL(type, sec, key, field)                                             \
	{                                                                      \
		sec, key, offsetof(type, field), sizeof(((type *)NULL)->field) \
	}
#define NODE_STR(key, field) STR(struct config, "node", key, field)
#define NODE_VAL(key, field) VAL(struct config, "node", key, field)
#define POLICY(key, field)   VAL(struct config, "policy", key, policy.field)

/* Every setting of [node], [policy] and [gitolite] (config.h), as the file
 * names it. */
static const struct setting node_settings[] = {
        NODE_STR("site", site),
        NODE_STR("data_dir", data_dir),
        NODE_STR("repo_dir", repo_dir),
        NODE_STR("user_socket", user_socket),
        NODE_STR("admin_socket", admin_socket),
        NODE_STR("keys_socket", keys_socket),
        NODE_STR("publish", publish),
        NODE_STR("sync", sync),
        NODE_STR("secret_key", secret_key),
        NODE_VAL("role", role),
        NODE_STR("log_level", log_level),
        NODE_STR("host", host),
        NODE_STR("metrics", metrics),
        NODE_STR("log_http", log_http),
        NODE_VAL("oplog_retention", oplog_retention),
        POLICY("security_keys", security_keys),
        POLICY("token_quorum", token_quorum),
        POLICY("token_quorum_timeout", token_quorum_timeout_ms),
        POLICY("grant_default", grant_default),
        POLICY("grant_max", grant_max),
        POLICY("grant_subnet", grant_subnet),
        POLICY("totp_window", totp_window),
        POLICY("hotp_lookahead", hotp_lookahead),
        POLICY("lockout_failures", lockout_failures),
        POLICY("lockout_window", lockout_window),
        STR(struct config, "gitolite", "home", gitolite_home),
        STR(struct config, "gitolite", "program", gitolite_program),
};

/* A [peer NAME]'s settings but its public_key (compared apart). */
static const struct setting peer_settings[] = {
        VAL(struct config_peer, NULL, "role", role),
        STR(struct config_peer, NULL, "publish", publish),
        STR(struct config_peer, NULL, "sync", sync),
};

static bool differs(const struct setting *s, const void *a, const void *b)
{
	const char *pa = (const char *)a + s->off;
	const char *pb = (const char *)b + s->off;

	if (s->size)
		return memcmp(pa, pb, s->size) != 0;
	const char *x = *(char *const *)pa, *y = *(char *const *)pb;
	return (x == NULL) != (y == NULL) || (x && strcmp(x, y));
}

/* What differs of peer i of old (named the same in cur, or gone). */
static int diff_peer(const struct config *old,
                     const struct config *cur,
                     int i,
                     reload_fn fn,
                     void *payload)
{
	const struct config_peer *p = &old->peers[i];
	const struct config_peer *q = config_peer_named(cur, p->site);
	char sec[sizeof("peer ") + NAME_SITE_MAX];
	int k = 0;

	snprintf(sec, sizeof(sec), "peer %s", p->site);
	if (!q) {
		fn(RELOAD_PEER_REMOVED, sec, NULL, i, payload);
		return 1;
	}
	for (size_t j = 0; j < GD_ARRAY_SIZE(peer_settings); j++)
		if (differs(&peer_settings[j], p, q)) {
			fn(RELOAD_CHANGED, sec, peer_settings[j].key, i,
			   payload);
			k++;
		}
	if (strcmp(p->public_key, q->public_key)) {
		fn(RELOAD_PEER_KEY, sec, "public_key", i, payload);
		k++;
	}
	if ((p->verifier_key == NULL) != (q->verifier_key == NULL) ||
	    (p->verifier_key && strcmp(p->verifier_key, q->verifier_key))) {
		fn(RELOAD_PEER_VKEY, sec, "verifier_key", i, payload);
		k++;
	}
	return k;
}

int reload_diff(const struct config *old,
                const struct config *cur,
                reload_fn fn,
                void *payload)
{
	char sec[sizeof("peer ") + NAME_SITE_MAX];
	int k = 0;

	for (size_t j = 0; j < GD_ARRAY_SIZE(node_settings); j++)
		if (differs(&node_settings[j], old, cur)) {
			fn(RELOAD_CHANGED, node_settings[j].section,
			   node_settings[j].key, -1, payload);
			k++;
		}
	for (int i = 0; i < old->npeers; i++)
		k += diff_peer(old, cur, i, fn, payload);
	for (int i = 0; i < cur->npeers; i++) {
		if (config_peer_named(old, cur->peers[i].site))
			continue;
		snprintf(sec, sizeof(sec), "peer %s", cur->peers[i].site);
		fn(RELOAD_PEER_ADDED, sec, NULL, -1, payload);
		k++;
	}
	return k;
}

/* ---- the reload --------------------------------------------------------- */

/* One reload: what it changes, the file read now, the peers (indexes in
 * cfg) whose key changed, and how many changes wait for a restart. */
struct run {
	struct config *cfg;
	struct peer_link *link;
	struct gitrepl *gitrepl;
	const struct config *cur;
	int keys[CONFIG_MAX_PEERS];
	int nkeys;
	int vkeys[CONFIG_MAX_PEERS]; /* peers whose verifier_key changed */
	int nvkeys;
	int ignored;
};

/* reload_diff's callback: a new key is kept for later, any other change is
 * logged (applied at the next restart). */
static void note(enum reload_change what,
                 const char *section,
                 const char *key,
                 int peer,
                 void *payload)
{
	struct run *r = payload;

	switch (what) {
	case RELOAD_PEER_KEY:
		if (r->nkeys < CONFIG_MAX_PEERS)
			r->keys[r->nkeys++] = peer;
		return;
	case RELOAD_PEER_VKEY:
		if (r->nvkeys < CONFIG_MAX_PEERS)
			r->vkeys[r->nvkeys++] = peer;
		return;
	case RELOAD_CHANGED:
		log_warn("reload: [%s] %s changed: takes effect at the next "
		         "restart",
		         section, key);
		break;
	case RELOAD_PEER_ADDED:
		log_warn("reload: [%s] added: a reload never adds or removes "
		         "a peer (it takes effect at the next restart)",
		         section);
		break;
	case RELOAD_PEER_REMOVED:
		log_warn("reload: [%s] removed: a reload never adds or "
		         "removes a peer (it stays until the next restart)",
		         section);
		break;
	}
	r->ignored++;
}

/* The key peer i of cfg has after the reload. */
static const char *new_key(const struct run *r, int i)
{
	const struct config_peer *p = &r->cfg->peers[i];

	for (int j = 0; j < r->nkeys; j++)
		if (r->keys[j] == i)
			return config_peer_named(r->cur, p->site)->public_key;
	return p->public_key;
}

/* The keys the peers will have: each a key, and no two alike (the file
 * was checked, but a peer it no longer lists keeps its key, which another
 * peer could be given).  Returns 0 or GD_EINVAL with err set. */
static int keys_check(const struct run *r, struct buf *err)
{
	const struct config *c = r->cfg;
	uint8_t raw[32];

	for (int i = 0; i < c->npeers; i++) {
		const char *k = new_key(r, i);
		if (!zmq_z85_decode(raw, k)) {
			buf_printf(err,
			           "[peer %s] public_key is not a key "
			           "(grantctl keygen prints one)",
			           c->peers[i].site);
			return GD_EINVAL;
		}
		for (int j = 0; j < i; j++)
			if (!strcmp(k, new_key(r, j))) {
				buf_printf(err,
				           "[peer %s] would have the key "
				           "of [peer %s]",
				           c->peers[i].site, c->peers[j].site);
				return GD_EINVAL;
			}
	}
	return 0;
}

/* Peer i of cfg takes its new key: admitted instead of the old one,
 * and every socket to it made again with it. */
static void apply_key(struct run *r, int i)
{
	struct config_peer *p = &r->cfg->peers[i];
	const struct config_peer *q = config_peer_named(r->cur, p->site);
	int rc;

	/* keys_check passed: the site is the link's and the key decodes */
	rc = peer_set_key(r->link, p->site, q->public_key);
	GD_ASSERT(rc == 0);
	/* repl's and vote's sockets see it at their next tick */
	memcpy(p->public_key, q->public_key, sizeof(p->public_key));
	p->key_line = q->key_line;
	if ((rc = gitrepl_set_key(r->gitrepl, p->site, p->public_key)) < 0)
		log_error("reload: peer %s: repository replication did not "
		          "get the new key: %s (restart this node)",
		          p->site, gd_strerror(rc));
	log_info("reload: peer %s public key changed: relinked key=%s", p->site,
	         p->public_key);
}

/* The peers whose verifier_key changed take the new one: repl checks
 * their operations with v (made from r->cur) from now on. */
static void apply_vkeys(struct run *r, struct repl *repl,
                        const struct opsig_verifier *v)
{
	for (int j = 0; j < r->nvkeys; j++) {
		struct config_peer *p = &r->cfg->peers[r->vkeys[j]];
		const struct config_peer *q = config_peer_named(r->cur, p->site);
		free(p->verifier_key);
		p->verifier_key = q->verifier_key ? xstrdup(q->verifier_key)
		                                  : NULL;
		p->vkey_line = q->vkey_line;
		log_info("reload: peer %s verifier key %s", p->site,
		         p->verifier_key ? "changed: its operations are "
		                           "checked with the new one"
		                         : "removed: its operations are taken "
		                           "unchecked");
	}
	if (r->nvkeys)
		repl_set_verifier(repl, v);
}

/* Read path as at start.  Returns 0 with *out the caller's, or an error
 * with err set ("FILE:LINE: ..."). */
static int reload_load(struct config **out,
                       const char *path,
                       const char *own_pub,
                       struct buf *err)
{
	int rc = config_load(out, path, err);

	if (rc < 0)
		return rc;
	if (!(*out)->secret_key) {
		buf_printf(err, "%s: missing 'secret_key' in [node]", path);
		rc = GD_EINVAL;
	} else {
		rc = config_check_own_key(*out, own_pub, err);
	}
	if (rc < 0)
		config_free(out);
	return rc;
}

int reload_run(struct config *cfg,
               struct peer_link *link,
               struct gitrepl *gitrepl,
               struct repl *repl,
               const char *own_pub,
               const struct opsig_signer *own)
{
	struct config *cur = NULL;
	struct opsig_verifier v;
	struct buf err = BUF_INIT;
	struct run r = {.cfg = cfg, .link = link, .gitrepl = gitrepl};
	int rc;

	log_info("reload: reading %s", cfg->path);
	if ((rc = reload_load(&cur, cfg->path, own_pub, &err)) < 0) {
		log_error("reload failed: %s: the node keeps running on the "
		          "configuration it has",
		          buf_str(&err));
		goto out;
	}
	r.cur = cur;
	reload_diff(cfg, cur, note, &r);
	if ((rc = keys_check(&r, &err)) < 0 ||
	    (rc = opsig_config_keys(&v, cur, own, &err)) < 0) {
		log_error("reload failed: %s: %s: no key changed, the node "
		          "keeps running on the configuration it has",
		          cur->path, buf_str(&err));
		goto out;
	}
	for (int j = 0; j < r.nkeys; j++)
		apply_key(&r, r.keys[j]);
	apply_vkeys(&r, repl, &v);
	log_info("reload done keys_changed=%d not_applied=%d "
	         "verifier_keys_changed=%d",
	         r.nkeys, r.ignored, r.nvkeys);
out:
	config_free(&cur);
	buf_free(&err);
	return rc;
}
