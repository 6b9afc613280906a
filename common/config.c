/*
 * config.c: INI parsing with libinih.  inih's handler is not told the line
 * number in Debian's build, so we feed it through our own line reader and
 * count lines there.
 */
#include <errno.h>
#include <stdarg.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dur.h"
#include "err.h"
#include "confval.h"
#include "names.h"
#include "suggest.h"
#include "banned.h"

struct parse_state {
	struct config *cfg;
	struct buf *err;
	FILE *fp;
	int line;
	int failed;
	struct config_peer *peer; /* current [peer NAME] section */
	char *linebuf;
	size_t linecap;
	unsigned policy_seen; /* bit per [policy] key already set */
	int gitolite_line; /* where [gitolite] began, 0 = absent */
};

static int section_start(struct parse_state *ps, const char *section);

/*
 * inih's line reader.  We read whole lines ourselves so that we know the
 * line number, can refuse a line longer than inih's buffer instead of
 * letting it be split, and see every section header (Debian's inih does
 * not call the handler for a section without keys).
 */
static char *reader(char *str, int num, void *stream)
{
	struct parse_state *ps = stream;
	ssize_t n = getline(&ps->linebuf, &ps->linecap, ps->fp);

	if (n < 0 || ps->failed)
		return NULL;
	ps->line++;
	if (n >= num - 1) {
		buf_printf(ps->err,
		           "%s:%d: line too long (at most %d "
		           "characters)",
		           ps->cfg->path, ps->line, num - 2);
		ps->failed = 1;
		return NULL;
	}
	memcpy(str, ps->linebuf, (size_t)n + 1);
	const char *p = ps->linebuf;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '[') {
		char sec[256];
		const char *end = strchr(p, ']');
		if (!end || (size_t)(end - p - 1) >= sizeof(sec)) {
			buf_printf(ps->err,
			           "%s:%d: syntax error: a section "
			           "header is [NAME]",
			           ps->cfg->path, ps->line);
			ps->failed = 1;
			return NULL;
		}
		memcpy(sec, p + 1, (size_t)(end - p - 1));
		sec[end - p - 1] = '\0';
		section_start(ps, sec);
	}
	return str;
}

static int fail(struct parse_state *ps, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int fail(struct parse_state *ps, const char *fmt, ...)
{
	va_list ap;
	char msg[512];

	if (!ps->failed) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		buf_printf(ps->err, "%s:%d: %s", ps->cfg->path, ps->line, msg);
	}
	ps->failed = 1;
	return 0;
}

static int
set_str(struct parse_state *ps, char **dst, const char *name, const char *value)
{
	if (*dst)
		return fail(ps, "duplicate key '%s'%s", name, "");
	if (!*value)
		return fail(ps, "empty value for '%s'%s", name, "");
	*dst = strdup(value);
	if (!*dst)
		abort();
	return 1;
}

static int set_int(struct parse_state *ps,
                   int *dst,
                   const char *name,
                   const char *value,
                   long lo,
                   long hi)
{
	char *end;
	errno = 0;
	long v = strtol(value, &end, 10);
	if (errno || end == value || *end || v < lo || v > hi)
		return fail(ps,
		            "bad value for '%s': '%s' is not an integer "
		            "in range",
		            name, value);
	*dst = (int)v;
	return 1;
}

static int set_dur(struct parse_state *ps,
                   int64_t *dst,
                   const char *name,
                   const char *value)
{
	if (dur_parse(dst, value) == 0)
		return 1;
	if (*value && strspn(value, "0123456789") == strlen(value))
		return fail(ps,
		            "bad duration for '%s': '%s' has no unit "
		            "(write e.g. %sh or %sd; units: " DUR_UNITS ")",
		            name, value, value, value);
	return fail(ps,
	            "bad duration for '%s': '%s' (a number and a unit, "
	            "" DUR_UNITS ", e.g. 90s, 15m, 24h, 30d)",
	            name, value);
}

/* ---- unknown keys: "did you mean" -------------------------------------- */

/* The keys of each section, for hints (and policy_key()'s duplicates;
 * tests/man/check.py reads this table). */
static const char *const policy_keys[] = {"grant_default",
                                          "grant_max",
                                          "grant_subnet",
                                          "lockout_window",
                                          "totp_window",
                                          "hotp_lookahead",
                                          "lockout_failures",
                                          "security_keys",
                                          "token_quorum",
                                          "token_quorum_timeout",
                                          NULL};
static const char *const node_keys[] = {"site",
                                        "data_dir",
                                        "repo_dir",
                                        "user_socket",
                                        "admin_socket",
                                        "keys_socket",
                                        "publish",
                                        "sync",
                                        "secret_key",
                                        "log_level",
                                        "host",
                                        "metrics",
                                        "log_http",
                                        "oplog_retention",
                                        "role",
                                        NULL};
static const char *const peer_keys[] = {"publish", "sync", "public_key", "role",
                                        "verifier_key", NULL};
static const char *const gitolite_keys[] = {"home", "program", NULL};

/* "unknown key 'pubilsh' in [node] (did you mean publish?)"; a key of
 * another section says which; otherwise the section's keys are listed. */
static int unknown_key(struct parse_state *ps,
                       const char *name,
                       const char *section,
                       const char *const *keys)
{
	const char *near = suggest_nearest(name, keys);
	char list[256];

	if (near)
		return fail(ps, "unknown key '%s' in [%s] (did you mean %s?%s)",
		            name, section, near,
		            !strcmp(name, "public-key")
		                    ? " the key file spells it public-key, the "
		                      "config public_key"
		                    : "");
	if (keys != policy_keys && suggest_in(name, policy_keys))
		return fail(ps,
		            "unknown key '%s' in [%s] (it belongs in "
		            "[policy])",
		            name, section);
	if (keys != node_keys && suggest_in(name, node_keys))
		return fail(ps,
		            "unknown key '%s' in [%s] (it belongs in "
		            "[node])",
		            name, section);
	suggest_join(list, sizeof(list), keys);
	return fail(ps, "unknown key '%s' in [%s] (the keys there: %s)", name,
	            section, list);
}

static int
set_role(struct parse_state *ps, enum config_role *dst, const char *value)
{
	if (!strcmp(value, "frontend"))
		*dst = CONFIG_ROLE_FRONTEND;
	else if (!strcmp(value, "mirror"))
		*dst = CONFIG_ROLE_MIRROR;
	else
		return fail(ps, "bad role '%s'%s (use frontend or mirror)",
		            value, "");
	return 1;
}

static int node_key(struct parse_state *ps, const char *name, const char *value)
{
	struct config *c = ps->cfg;
	/* tests/man/check.py reads this table as it is */
	/* clang-format off */
	static const struct { const char *key; size_t off; } strs[] = {
		{ "site", offsetof(struct config, site) },
		{ "data_dir", offsetof(struct config, data_dir) },
		{ "repo_dir", offsetof(struct config, repo_dir) },
		{ "user_socket", offsetof(struct config, user_socket) },
		{ "admin_socket", offsetof(struct config, admin_socket) },
		{ "keys_socket", offsetof(struct config, keys_socket) },
		{ "publish", offsetof(struct config, publish) },
		{ "sync", offsetof(struct config, sync) },
		{ "secret_key", offsetof(struct config, secret_key) },
		{ "log_level", offsetof(struct config, log_level) },
		{ "host", offsetof(struct config, host) },
		{ "metrics", offsetof(struct config, metrics) },
		{ "log_http", offsetof(struct config, log_http) },
	};
	/* clang-format on */
	if (!strcmp(name, "oplog_retention"))
		return set_dur(ps, &c->oplog_retention, name, value);
	if (!strcmp(name, "role"))
		return set_role(ps, &c->role, value);
	for (size_t i = 0; i < GD_ARRAY_SIZE(strs); i++) {
		if (strcmp(name, strs[i].key))
			continue;
		char **dst = (char **)((char *)c + strs[i].off);
		if (!set_str(ps, dst, name, value))
			return 0;
		if (!strcmp(name, "secret_key"))
			c->secret_key_line = ps->line;
		if (!strcmp(name, "site") && !name_site_ok(value))
			return fail(ps, "bad site name '%s'%s (use [a-z0-9-])",
			            value, "");
		if ((!strcmp(name, "publish") || !strcmp(name, "sync")) &&
		    !confval_endpoint(value))
			return fail(ps,
			            "bad endpoint '%s'%s (use "
			            "tcp://ADDRESS:PORT)",
			            value, "");
		if (!strcmp(name, "log_level") && strcmp(value, "error") &&
		    strcmp(value, "warn") && strcmp(value, "info") &&
		    strcmp(value, "debug"))
			return fail(ps,
			            "bad log_level '%s'%s (use error, "
			            "warn, info or debug)",
			            value, "");
		if (!strcmp(name, "host") && !confval_host(value))
			return fail(ps,
			            "bad host '%s'%s (a DNS name of letters, "
			            "digits, '-' and '.', optionally after "
			            "the account: git@git.example.org)",
			            value, "");
		if (!strcmp(name, "metrics") && !confval_listen(value))
			return fail(ps,
			            "bad metrics address '%s'%s (use "
			            "ADDRESS:PORT, e.g. 127.0.0.1:9402 or "
			            "[::1]:9402)",
			            value, "");
		if (!strcmp(name, "log_http") && !confval_listen(value))
			return fail(ps,
			            "bad log_http address '%s'%s (use "
			            "ADDRESS:PORT, e.g. 127.0.0.1:9403 or "
			            "[::1]:9403)",
			            value, "");
		if (strstr(name, "socket") && value[0] != '/')
			return fail(ps,
			            "'%s' must be an absolute path, not "
			            "'%s'",
			            name, value);
		return 1;
	}
	return unknown_key(ps, name, "node", node_keys);
}

static int
policy_key(struct parse_state *ps, const char *name, const char *value)
{
	struct config_policy *p = &ps->cfg->policy;

	for (size_t i = 0; policy_keys[i]; i++) {
		if (strcmp(name, policy_keys[i]))
			continue;
		if (ps->policy_seen & (1u << i))
			return fail(ps, "duplicate key '%s'", name);
		ps->policy_seen |= 1u << i;
	}

	if (!strcmp(name, "grant_default"))
		return set_dur(ps, &p->grant_default, name, value);
	if (!strcmp(name, "grant_max"))
		return set_dur(ps, &p->grant_max, name, value);
	if (!strcmp(name, "grant_subnet"))
		return set_dur(ps, &p->grant_subnet, name, value);
	if (!strcmp(name, "lockout_window"))
		return set_dur(ps, &p->lockout_window, name, value);
	if (!strcmp(name, "totp_window"))
		return set_int(ps, &p->totp_window, name, value, 0, 10);
	if (!strcmp(name, "hotp_lookahead"))
		return set_int(ps, &p->hotp_lookahead, name, value, 0, 1000);
	if (!strcmp(name, "security_keys")) {
		static const char *const sk[] = {"off", "touch", "pin"};
		for (size_t i = 0; i < GD_ARRAY_SIZE(sk); i++)
			if (!strcmp(value, sk[i])) {
				p->security_keys = (enum config_sk)i;
				return 1;
			}
		return fail(ps,
		            "bad security_keys '%s'%s (use off, touch or "
		            "pin)",
		            value, "");
	}
	if (!strcmp(name, "token_quorum")) {
		if (!strcmp(value, "local"))
			p->token_quorum = CONFIG_QUORUM_LOCAL;
		else if (!strcmp(value, "majority"))
			p->token_quorum = CONFIG_QUORUM_MAJORITY;
		else
			return fail(ps,
			            "bad token_quorum '%s'%s (use local "
			            "or majority)",
			            value, "");
		return 1;
	}
	if (!strcmp(name, "token_quorum_timeout")) {
		int64_t ms;
		if (dur_parse_ms(&ms, value) < 0 || ms < 100 || ms > 10000)
			return fail(ps,
			            "bad token_quorum_timeout '%s'%s (use "
			            "100ms to 10s, e.g. 500ms or 2s)",
			            value, "");
		p->token_quorum_timeout_ms = ms;
		return 1;
	}
	if (!strcmp(name, "lockout_failures"))
		/* at most 64 failures per (user, site) are kept */
		return set_int(ps, &p->lockout_failures, name, value, 1, 64);
	return unknown_key(ps, name, "policy", policy_keys);
}

static int peer_key(struct parse_state *ps, const char *name, const char *value)
{
	struct config_peer *p = ps->peer;

	if (!strcmp(name, "publish") || !strcmp(name, "sync")) {
		char **dst = name[0] == 'p' ? &p->publish : &p->sync;
		if (!set_str(ps, dst, name, value))
			return 0;
		if (!confval_endpoint(value))
			return fail(ps,
			            "bad endpoint '%s'%s (use "
			            "tcp://ADDRESS:PORT)",
			            value, "");
		return 1;
	}
	if (!strcmp(name, "role"))
		return set_role(ps, &p->role, value);
	if (!strcmp(name, "verifier_key")) {
		p->vkey_line = ps->line;
		return set_str(ps, &p->verifier_key, name, value);
	}
	if (!strcmp(name, "public_key")) {
		if (p->public_key[0])
			return fail(ps, "duplicate key '%s'%s", name, "");
		if (strlen(value) != Z85_KEY_LEN)
			return fail(ps,
			            "bad public_key '%s'%s (want the 40 "
			            "characters grantctl keygen prints)",
			            value, "");
		/* one key, one machine: two peers with one key would be one
		 * machine counted twice toward a majority */
		for (struct config_peer *q = ps->cfg->peers; q < p; q++)
			if (!strcmp(q->public_key, value))
				return fail(ps,
				            "[peer %s] has the public_key "
				            "of [peer %s] (line %d): each site "
				            "has its own key pair (grantctl "
				            "keygen)",
				            p->site, q->site, q->key_line);
		memcpy(p->public_key, value, Z85_KEY_LEN + 1);
		p->key_line = ps->line;
		return 1;
	}
	char sec[sizeof("peer ") + 64];
	snprintf(sec, sizeof(sec), "peer %s", p->site);
	return unknown_key(ps, name, sec, peer_keys);
}

static int
gitolite_key(struct parse_state *ps, const char *name, const char *value)
{
	struct config *c = ps->cfg;

	if (!strcmp(name, "home") || !strcmp(name, "program")) {
		char **dst = name[0] == 'h' ? &c->gitolite_home
		                            : &c->gitolite_program;
		if (!set_str(ps, dst, name, value))
			return 0;
		if (value[0] != '/')
			return fail(ps,
			            "'%s' must be an absolute path, not "
			            "'%s'",
			            name, value);
		return 1;
	}
	return unknown_key(ps, name, "gitolite", gitolite_keys);
}

static int
handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse_state *ps = user;

	if (ps->failed)
		return 0;
	if (!name) /* a section header on its own
	              (INI_CALL_HANDLER_ON_NEW_SECTION) */
		return 1;
	/* inih ends a value at " ;" only; a Z85 key may hold '#' (never
	 * after a blank) */
	if (strstr(value, " #") || strstr(value, "\t#"))
		return fail(ps,
		            "'%s = %s': '#' after a value is not a comment "
		            "(start the comment with ';', or put it on a line "
		            "of its own)",
		            name, value);
	if (!strcmp(section, "node"))
		return node_key(ps, name, value);
	if (!strcmp(section, "policy"))
		return policy_key(ps, name, value);
	if (!strcmp(section, "gitolite"))
		return gitolite_key(ps, name, value);
	if (!strncmp(section, "peer ", 5) && ps->peer)
		return peer_key(ps, name, value);
	return fail(ps,
	            "unknown section [%s]%s (use [node], [policy], "
	            "[gitolite] or [peer NAME])",
	            section, "");
}

/* Called by the reader at every [section] line, keys or not. */
static int section_start(struct parse_state *ps, const char *section)
{
	struct config *c = ps->cfg;

	ps->peer = NULL;
	if (!strcmp(section, "node") || !strcmp(section, "policy"))
		return 1;
	if (!strcmp(section, "gitolite")) {
		ps->gitolite_line = ps->line;
		return 1;
	}
	if (strncmp(section, "peer ", 5))
		return fail(ps,
		            "unknown section [%s] (use [node], [policy], "
		            "[gitolite] or [peer NAME])",
		            section);
	const char *site = section + 5;
	if (config_peer_named(c, site))
		return fail(ps, "duplicate site name '%s'", site);
	if (!name_site_ok(site))
		return fail(ps, "bad site name '%s' (use [a-z0-9-])", site);
	if (c->npeers == CONFIG_MAX_PEERS)
		return fail(ps, "too many peers (at most %d)",
		            CONFIG_MAX_PEERS);
	ps->peer = &c->peers[c->npeers++];
	ps->peer->site = strdup(site);
	if (!ps->peer->site)
		abort();
	ps->peer->line = ps->line;
	return 1;
}

int config_frontends(const struct config *c)
{
	int n = c->role == CONFIG_ROLE_FRONTEND;

	for (int i = 0; i < c->npeers; i++)
		n += c->peers[i].role == CONFIG_ROLE_FRONTEND;
	return n;
}

int config_majority(const struct config *c)
{
	return config_frontends(c) / 2 + 1;
}

const char *config_role_name(enum config_role role)
{
	return role == CONFIG_ROLE_MIRROR ? "mirror" : "frontend";
}

const char *config_default_path(void)
{
	const char *e = getenv("GRANTD_CONFIG");
	return e && *e ? e : CONFIG_DEFAULT_PATH;
}

/* keys_socket's default: keys.sock in the user socket's directory. */
static void default_keys_socket(struct config *c)
{
	const char *slash = strrchr(c->user_socket, '/');
	size_t dir = (size_t)(slash - c->user_socket); /* absolute: found */
	size_t len = dir + sizeof("/keys.sock");
	char *p = malloc(len);

	if (!p)
		abort();
	snprintf(p, len, "%.*s/keys.sock", (int)dir, c->user_socket);
	c->keys_socket = p;
}

static int check_complete(struct parse_state *ps)
{
	struct config *c = ps->cfg;
	static const char *need[] = {"site", "data_dir", "repo_dir",
	                             "user_socket", "admin_socket"};
	char *have[] = {c->site, c->data_dir, c->repo_dir, c->user_socket,
	                c->admin_socket};

	for (size_t i = 0; i < GD_ARRAY_SIZE(need); i++)
		if (!have[i]) {
			buf_printf(ps->err, "%s: missing '%s' in [node]",
			           c->path, need[i]);
			return GD_EINVAL;
		}
	for (int i = 0; i < c->npeers; i++) {
		struct config_peer *p = &c->peers[i];
		if (!strcmp(p->site, c->site)) {
			buf_printf(ps->err,
			           "%s:%d: duplicate site name '%s' "
			           "(a peer may not share this node's site)",
			           c->path, p->line, p->site);
			return GD_EINVAL;
		}
		if (!p->publish || !p->sync || !p->public_key[0]) {
			buf_printf(ps->err,
			           "%s:%d: [peer %s] needs publish, "
			           "sync and public_key",
			           c->path, p->line, p->site);
			return GD_EINVAL;
		}
	}
	if (ps->gitolite_line && !c->gitolite_home) {
		buf_printf(ps->err,
		           "%s:%d: [gitolite] needs home (the "
		           "gitolite account's home directory)",
		           c->path, ps->gitolite_line);
		return GD_EINVAL;
	}
	if (c->gitolite_home && !c->gitolite_program) {
		c->gitolite_program = strdup("gitolite");
		if (!c->gitolite_program)
			abort();
	}
	if (!c->keys_socket)
		default_keys_socket(c);
	if (!strcmp(c->keys_socket, c->user_socket) ||
	    !strcmp(c->keys_socket, c->admin_socket)) {
		buf_printf(ps->err,
		           "%s: keys_socket %s is another socket's "
		           "path",
		           c->path, c->keys_socket);
		return GD_EINVAL;
	}
	if (c->policy.token_quorum == CONFIG_QUORUM_MAJORITY &&
	    c->role == CONFIG_ROLE_MIRROR) {
		buf_printf(ps->err,
		           "%s: token_quorum = majority on a mirror "
		           "(a mirror takes no tokens and never votes: leave "
		           "token_quorum out of its [policy])",
		           c->path);
		return GD_EINVAL;
	}
	if (c->policy.token_quorum == CONFIG_QUORUM_MAJORITY &&
	    config_frontends(c) < 3) {
		buf_printf(ps->err,
		           "%s: token_quorum = majority with %d "
		           "frontend%s (use 3 or more frontends: with fewer, "
		           "one lost site stops every token)",
		           c->path, config_frontends(c),
		           config_frontends(c) == 1 ? "" : "s");
		return GD_EINVAL;
	}
	if (c->policy.grant_default > c->policy.grant_max) {
		buf_printf(ps->err,
		           "%s: grant_default is longer than "
		           "grant_max",
		           c->path);
		return GD_EINVAL;
	}
	return 0;
}

int config_load(struct config **out, const char *path, struct buf *err)
{
	struct config *c = calloc(1, sizeof(*c));
	struct parse_state ps = {.cfg = c, .err = err};
	int rc = 0;

	if (!c)
		abort();
	c->path = strdup(path);
	c->oplog_retention = 30 * 86400;
	c->policy = (struct config_policy){
	        .grant_default = 24 * 3600,
	        .grant_max = 30 * 86400,
	        .grant_subnet = 8 * 3600,
	        .totp_window = 1,
	        .hotp_lookahead = 20,
	        .lockout_failures = 5,
	        .lockout_window = 15 * 60,
	        .security_keys = CONFIG_SK_TOUCH,
	        .token_quorum = CONFIG_QUORUM_LOCAL,
	        .token_quorum_timeout_ms = 2000,
	};
	ps.fp = fopen(path, "r");
	if (!ps.fp) {
		buf_printf(err,
		           "%s: cannot read config: %s (give one with "
		           "--config FILE or GRANTD_CONFIG)",
		           path, strerror(errno));
		rc = GD_EIO;
		goto done;
	}
	int r = ini_parse_stream(reader, &ps, handler, &ps);
	fclose(ps.fp);
	free(ps.linebuf);
	if (ps.failed) {
		rc = GD_EINVAL;
		goto done;
	}
	if (r != 0) {
		buf_printf(err,
		           "%s:%d: syntax error (want [section] or "
		           "key = value)",
		           path, r > 0 ? r : ps.line);
		rc = GD_EINVAL;
		goto done;
	}
	rc = check_complete(&ps);
done:
	if (rc < 0)
		config_free(&c);
	*out = c;
	return rc;
}

void config_free(struct config **cp)
{
	struct config *c = *cp;
	if (!c)
		return;
	free(c->path);
	free(c->site);
	free(c->data_dir);
	free(c->repo_dir);
	free(c->user_socket);
	free(c->admin_socket);
	free(c->keys_socket);
	free(c->publish);
	free(c->sync);
	free(c->secret_key);
	free(c->log_level);
	free(c->host);
	free(c->metrics);
	free(c->log_http);
	free(c->gitolite_home);
	free(c->gitolite_program);
	for (int i = 0; i < c->npeers; i++) {
		free(c->peers[i].site);
		free(c->peers[i].publish);
		free(c->peers[i].sync);
		free(c->peers[i].verifier_key);
	}
	free(c);
	*cp = NULL;
}

const struct config_peer *config_peer_named(const struct config *c,
                                            const char *site)
{
	for (int i = 0; i < c->npeers; i++)
		if (!strcmp(c->peers[i].site, site))
			return &c->peers[i];
	return NULL;
}
