/*
 * test_config.c: common/config.h, the INI configuration (SPEC 4).
 *
 * `grantd -t` and every start-up stand on this: a good file loads with
 * every value where it belongs, and a bad one is refused with one line that
 * names the file and the line ("FILE:LINE: ...") so an operator can go
 * straight to it.  Each test writes its files into a fresh directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "config.h"
#include "err.h"

#define KEY_A "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
#define KEY_B "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
#define KEY_S "JTKVSB%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6x"

#define NODE \
	"[node]\n" \
	"site = paloalto\n" \
	"data_dir = /var/lib/grantd\n" \
	"repo_dir = /srv/git\n" \
	"user_socket = /run/grantd/user.sock\n" \
	"admin_socket = /run/grantd/admin.sock\n"

#define PEER_PORTLAND \
	"[peer portland]\n" \
	"publish = tcp://127.0.0.2:7401\n" \
	"sync = tcp://127.0.0.2:7402\n" \
	"public_key = " KEY_A "\n"

struct fixture {
	char dir[64];
	char path[128];
	struct buf err;
	struct config *cfg;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/test_config.XXXXXX",
		 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/grantd.conf", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	config_free(&f->cfg);
	buf_free(&f->err);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0)
		fail_msg("cannot write %s", path);
}

/* Load text as a config file; returns config_load's code. */
static int load(struct fixture *f, const char *text)
{
	config_free(&f->cfg);
	buf_reset(&f->err);
	write_file(f->path, text);
	return config_load(&f->cfg, f->path, &f->err);
}

static void load_ok(struct fixture *f, const char *text)
{
	int rc = load(f, text);
	if (rc != 0)
		fail_msg("config_load = %d: %s", rc, buf_str(&f->err));
	assert_non_null(f->cfg);
}

/*
 * Load text, which must fail with GD_EINVAL and a single-line message
 * that starts with "PATH:LINE: " (or "PATH: " when line is 0) and
 * contains each of the NULL-terminated words.
 */
static void load_fails(struct fixture *f, const char *text, int line, ...)
{
	char prefix[160];
	va_list ap;

	int rc = load(f, text);
	const char *msg = buf_str(&f->err);
	if (rc != GD_EINVAL)
		fail_msg("config_load = %d, want GD_EINVAL (msg '%s')", rc,
			 msg);
	if (f->cfg)
		fail_msg("config_load failed but gave a config");
	if (line)
		snprintf(prefix, sizeof(prefix), "%s:%d: ", f->path, line);
	else
		snprintf(prefix, sizeof(prefix), "%s: ", f->path);
	if (strncmp(msg, prefix, strlen(prefix)))
		fail_msg("message '%s' does not start with '%s'", msg, prefix);
	if (strchr(msg, '\n'))
		fail_msg("message '%s' is more than one line", msg);
	va_start(ap, line);
	for (const char *w; (w = va_arg(ap, const char *));)
		if (!strstr(msg, w)) {
			va_end(ap);
			fail_msg("message '%s' does not mention '%s'", msg, w);
		}
	va_end(ap);
}

static void test_valid(void **state)
{
	struct fixture *f = *state;

	load_ok(f,
		"; grantd.conf for paloalto\n"
		"# comments of both kinds\n"
		"[node]\n"
		"site = paloalto                 ; unique name\n"
		"data_dir = /var/lib/grantd\n"
		"repo_dir = /srv/git\n"
		"user_socket = /run/grantd/user.sock\n"
		"admin_socket = /run/grantd/admin.sock\n"
		"publish = tcp://127.0.0.1:7401\n"
		"sync = tcp://127.0.0.1:7402\n"
		"secret_key = /etc/grantd/paloalto.key\n"
		"log_level = debug\n"
		"\n"
		"[peer portland]\n"                    /* line 14 */
		"publish = tcp://127.0.0.2:7401\n"
		"sync = tcp://127.0.0.2:7402\n"
		"public_key = " KEY_A "\n"
		"\n"
		"[policy]\n"
		"grant_default = 12h\n"
		"grant_max = 2w\n"
		"grant_subnet = 4h\n"
		"totp_window = 2          ; steps either side of now\n"
		"hotp_lookahead = 50\n"
		"lockout_failures = 3\n"
		"lockout_window = 90s\n"
		"\n"
		"[peer montreal]\n"                    /* line 28 */
		"publish = tcp://127.0.0.3:7401\n"
		"sync = tcp://127.0.0.3:7402\n"
		"public_key = " KEY_B "\n");

	struct config *c = f->cfg;
	assert_string_equal(c->path, f->path);
	assert_string_equal(c->site, "paloalto");
	assert_string_equal(c->data_dir, "/var/lib/grantd");
	assert_string_equal(c->repo_dir, "/srv/git");
	assert_string_equal(c->user_socket, "/run/grantd/user.sock");
	assert_string_equal(c->admin_socket, "/run/grantd/admin.sock");
	assert_string_equal(c->publish, "tcp://127.0.0.1:7401");
	assert_string_equal(c->sync, "tcp://127.0.0.1:7402");
	assert_string_equal(c->secret_key, "/etc/grantd/paloalto.key");
	assert_string_equal(c->log_level, "debug");

	assert_int_equal(c->policy.grant_default, 12 * 3600);
	assert_int_equal(c->policy.grant_max, 14 * 86400);
	assert_int_equal(c->policy.grant_subnet, 4 * 3600);
	assert_int_equal(c->policy.totp_window, 2);
	assert_int_equal(c->policy.hotp_lookahead, 50);
	assert_int_equal(c->policy.lockout_failures, 3);
	assert_int_equal(c->policy.lockout_window, 90);

	assert_int_equal(c->npeers, 2);
	assert_string_equal(c->peers[0].site, "portland");
	assert_string_equal(c->peers[0].publish, "tcp://127.0.0.2:7401");
	assert_string_equal(c->peers[0].sync, "tcp://127.0.0.2:7402");
	assert_string_equal(c->peers[0].public_key, KEY_A);
	assert_string_equal(c->peers[1].site, "montreal");
	assert_string_equal(c->peers[1].publish, "tcp://127.0.0.3:7401");
	assert_string_equal(c->peers[1].public_key, KEY_B);

	config_free(&f->cfg);
	assert_null(f->cfg);
	config_free(&f->cfg); /* NULL-safe */
}

static void test_peer_section_line(void **state)
{
	/* config_peer.line is "where its section starts, for errors" */
	struct fixture *f = *state;

	load_ok(f, NODE "\n" PEER_PORTLAND);
	assert_int_equal(f->cfg->npeers, 1);
	assert_int_equal(f->cfg->peers[0].line, 8);
}

static void test_defaults(void **state)
{
	/* SPEC 3.2 and 4: 24h grants, 30d at most, 8h for subnets and
	 * sessions, and the [policy] values SPEC 4 shows */
	struct fixture *f = *state;

	load_ok(f, NODE);
	struct config *c = f->cfg;
	assert_int_equal(c->npeers, 0);
	assert_null(c->publish);
	assert_int_equal(c->policy.grant_default, 24 * 3600);
	assert_int_equal(c->policy.grant_max, 30 * 86400);
	assert_int_equal(c->policy.grant_subnet, 8 * 3600);
	assert_int_equal(c->policy.totp_window, 1);
	assert_int_equal(c->policy.hotp_lookahead, 20);
	assert_int_equal(c->policy.lockout_failures, 5);
	assert_int_equal(c->policy.lockout_window, 15 * 60);
}

/* [node] host and metrics, [policy] security_keys (issue 11). */
static void test_host_metrics_sk(void **state)
{
	struct fixture *f = *state;

	load_ok(f, NODE);
	assert_null(f->cfg->host);
	assert_null(f->cfg->metrics);
	assert_int_equal(f->cfg->policy.security_keys, CONFIG_SK_TOUCH);
	load_ok(f, NODE "host = git.example.org\nmetrics = 127.0.0.1:9402\n"
		   "[policy]\nsecurity_keys = pin\n");
	assert_string_equal(f->cfg->host, "git.example.org");
	assert_string_equal(f->cfg->metrics, "127.0.0.1:9402");
	assert_int_equal(f->cfg->policy.security_keys, CONFIG_SK_PIN);
	load_ok(f, NODE "metrics = [::1]:9402\n[policy]\nsecurity_keys = off\n");
	assert_int_equal(f->cfg->policy.security_keys, CONFIG_SK_OFF);
	load_ok(f, NODE "metrics = localhost:80\n");
	load_fails(f, NODE "host = git..example.org\n", 7, "bad host", NULL);
	load_fails(f, NODE "host = -git\n", 7, "bad host", NULL);
	load_fails(f, NODE "host = git example\n", 7, "bad host", NULL);
	/* the account before the name, for hints users can paste */
	load_ok(f, NODE "host = git@git.example.org\n");
	assert_string_equal(f->cfg->host, "git@git.example.org");
	load_fails(f, NODE "host = @git.example.org\n", 7, "bad host", NULL);
	load_fails(f, NODE "host = g it@git.example.org\n", 7, "bad host",
		   NULL);
	load_fails(f, NODE "host = git@\n", 7, "bad host", NULL);
	load_fails(f, NODE "metrics = 9402\n", 7, "bad metrics", NULL);
	load_fails(f, NODE "metrics = 127.0.0.1:0\n", 7, "bad metrics", NULL);
	load_fails(f, NODE "metrics = 127.0.0.1:65536\n", 7, "bad metrics",
		   NULL);
	load_fails(f, NODE "metrics = ::1:9402\n", 7, "bad metrics", NULL);
	load_fails(f, NODE "[policy]\nsecurity_keys = yes\n", 8,
		   "security_keys", "off, touch or pin", NULL);
	load_fails(f, NODE "[policy]\nsecurity_keys = off\nsecurity_keys = pin\n",
		   9, "duplicate", NULL);
}

#define PEER_MONTREAL \
	"[peer montreal]\n" \
	"publish = tcp://127.0.0.3:7401\n" \
	"sync = tcp://127.0.0.3:7402\n" \
	"public_key = " KEY_B "\n"

/* [node] role, [peer NAME] role, [policy] token_quorum and its timeout
 * (issue 12, SPEC 9). */
static void test_quorum_role(void **state)
{
	struct fixture *f = *state;

	load_ok(f, NODE PEER_PORTLAND);
	assert_int_equal(f->cfg->role, CONFIG_ROLE_FRONTEND);
	assert_int_equal(f->cfg->peers[0].role, CONFIG_ROLE_FRONTEND);
	assert_int_equal(f->cfg->policy.token_quorum, CONFIG_QUORUM_LOCAL);
	assert_int_equal(f->cfg->policy.token_quorum_timeout_ms, 2000);
	assert_int_equal(config_frontends(f->cfg), 2);

	load_ok(f, NODE PEER_PORTLAND PEER_MONTREAL
		   "[policy]\ntoken_quorum = majority\n"
		   "token_quorum_timeout = 500ms\n");
	assert_int_equal(f->cfg->policy.token_quorum, CONFIG_QUORUM_MAJORITY);
	assert_int_equal(f->cfg->policy.token_quorum_timeout_ms, 500);
	assert_int_equal(config_frontends(f->cfg), 3);
	assert_int_equal(config_majority(f->cfg), 2);

	/* a mirror peer does not count, nor vote */
	load_ok(f, NODE PEER_PORTLAND PEER_MONTREAL "role = mirror\n");
	assert_int_equal(f->cfg->peers[1].role, CONFIG_ROLE_MIRROR);
	assert_int_equal(config_frontends(f->cfg), 2);
	assert_string_equal(config_role_name(f->cfg->peers[1].role), "mirror");
	load_fails(f, NODE PEER_PORTLAND PEER_MONTREAL "role = mirror\n"
		      "[policy]\ntoken_quorum = majority\n", 0,
		   "2 frontends", "3 or more", NULL);

	/* this node a mirror */
	load_ok(f, NODE "role = mirror\n" PEER_PORTLAND);
	assert_int_equal(f->cfg->role, CONFIG_ROLE_MIRROR);
	assert_int_equal(config_frontends(f->cfg), 1);
	load_fails(f, NODE "role = mirror\n" PEER_PORTLAND PEER_MONTREAL
		      "[policy]\ntoken_quorum = majority\n", 0, "mirror",
		   NULL);

	load_fails(f, NODE "role = seed\n", 7, "bad role", "frontend or "
		   "mirror", NULL);
	load_fails(f, NODE PEER_PORTLAND "role = primary\n", 11, "bad role",
		   NULL);
	load_fails(f, NODE "[policy]\ntoken_quorum = all\n", 8,
		   "local or majority", NULL);
	load_fails(f, NODE "[policy]\ntoken_quorum_timeout = 50ms\n", 8,
		   "100ms to 10s", NULL);
	load_fails(f, NODE "[policy]\ntoken_quorum_timeout = 11s\n", 8,
		   "token_quorum_timeout", NULL);
	load_fails(f, NODE "[policy]\ntoken_quorum = local\n"
		      "token_quorum = local\n", 9, "duplicate", NULL);
}

/* [gitolite]: its presence is gitolite mode; home is required, program
 * defaults to "gitolite" (found in PATH). */
static void test_gitolite(void **state)
{
	struct fixture *f = *state;

	load_ok(f, NODE);
	assert_null(f->cfg->gitolite_home);
	assert_null(f->cfg->gitolite_program);
	load_ok(f, NODE "[gitolite]\nhome = /srv/git\n");
	assert_string_equal(f->cfg->gitolite_home, "/srv/git");
	assert_string_equal(f->cfg->gitolite_program, "gitolite");
	load_ok(f, "[gitolite]\nprogram = /usr/bin/gitolite\nhome = /h\n"
		   NODE);
	assert_string_equal(f->cfg->gitolite_program, "/usr/bin/gitolite");
	load_fails(f, NODE "[gitolite]\n", 7, "[gitolite] needs home", NULL);
	load_fails(f, NODE "[gitolite]\nhome = srv\n", 8, "absolute", NULL);
	load_fails(f, NODE "[gitolite]\nhome = /a\nhome = /b\n", 9, "home",
		   NULL);
	load_fails(f, NODE "[gitolite]\nhome = /a\nrc = /b\n", 9,
		   "unknown key 'rc'", "[gitolite]", NULL);
}

static void test_unknown_key(void **state)
{
	struct fixture *f = *state;

	load_fails(f, NODE "colour = blue\n", 7, "unknown key 'colour'",
		   "[node]", NULL);
	load_fails(f,
		   "# first line\n"
		   "\n"
		   "[policy]\n"
		   "grant_default = 24h\n"
		   "grant_forever = 1\n"
		   "[node]\n", 5, "unknown key 'grant_forever'", "[policy]",
		   NULL);
	load_fails(f, NODE PEER_PORTLAND "secret_key = /x\n", 11,
		   "unknown key 'secret_key'", "portland", NULL);
	/* the first error is the one reported */
	load_fails(f, "[node]\nfoo = 1\nbar = 2\n", 2, "'foo'", NULL);
}

/* A typo gets the key it is near (operator trial, 10); the key file's
 * public-key spelling gets public_key; a key of another section says
 * where it belongs; anything else lists the section's keys. */
static void test_unknown_key_hint(void **state)
{
	struct fixture *f = *state;

	load_fails(f, NODE "pubilsh = tcp://127.0.0.1:7401\n", 7,
		   "unknown key 'pubilsh' in [node]", "did you mean publish?",
		   NULL);
	load_fails(f, NODE "[policy]\ngrant_defualt = 24h\n", 8,
		   "did you mean grant_default?", NULL);
	load_fails(f, NODE "[peer portland]\npublic-key = " KEY_A "\n", 8,
		   "in [peer portland]", "did you mean public_key?",
		   "key file spells it public-key", NULL);
	load_fails(f, NODE "[gitolite]\nhme = /srv/git\n", 8,
		   "did you mean home?", NULL);
	load_fails(f, NODE "grant_default = 24h\n", 7,
		   "'grant_default' in [node]", "belongs in [policy]", NULL);
	load_fails(f, NODE "[policy]\ncolour = blue\n", 8,
		   "the keys there: grant_default, ", "token_quorum_timeout",
		   NULL);
}

static void test_bad_duration(void **state)
{
	struct fixture *f = *state;

	load_fails(f, NODE "[policy]\ngrant_max = 30x\n", 8, "grant_max",
		   "30x", NULL);
	load_fails(f, NODE "[policy]\ngrant_default = 0\n", 8,
		   "grant_default", NULL);
	load_fails(f, NODE "[policy]\nlockout_window = -15m\n", 8,
		   "lockout_window", NULL);
	load_fails(f, "[policy]\n\n\ngrant_subnet = 8 h\n" NODE, 4,
		   "grant_subnet", NULL);
	/* a number without a unit was seconds (operator trial, 7) */
	load_fails(f, NODE "[policy]\ngrant_default = 24\n", 8,
		   "'grant_default': '24' has no unit", "24h",
		   "s, m, h, d or w", NULL);
	load_fails(f, NODE "oplog_retention = 30\n", 7, "oplog_retention",
		   "no unit", NULL);
}

/* "# note" after a value is part of it for inih; say so (operator trial,
 * 16), while " ; note" is a comment and a '#' inside a key is kept. */
static void test_inline_comment(void **state)
{
	struct fixture *f = *state;

	load_fails(f, NODE "[policy]\ntotp_window = 1  # steps\n", 8,
		   "'#' after a value is not a comment", "';'", NULL);
	load_ok(f, NODE "[policy]\ntotp_window = 2 ; steps\n");
	assert_int_equal(f->cfg->policy.totp_window, 2);
}

static void test_bad_values(void **state)
{
	struct fixture *f = *state;

	load_fails(f, NODE "[policy]\ntotp_window = abc\n", 8, "totp_window",
		   NULL);
	load_fails(f, NODE "[policy]\ntotp_window = -1\n", 8, "totp_window",
		   NULL);
	load_fails(f, NODE "[policy]\nlockout_failures = 0\n", 8,
		   "lockout_failures", NULL);
	load_fails(f, NODE "[policy]\nhotp_lookahead = 1e3\n", 8,
		   "hotp_lookahead", NULL);
	load_fails(f, "[node]\nsite = Palo_Alto\n", 2, "Palo_Alto", NULL);
	load_fails(f, "[node]\nsite =\n", 2, "site", NULL);
	load_fails(f, NODE "publish = http://x\n", 7, "http://x", NULL);
	load_fails(f, "[node]\nuser_socket = run/user.sock\n", 2,
		   "user_socket", NULL);
	load_fails(f, NODE "log_level = chatty\n", 7, "chatty", NULL);
	load_fails(f, NODE "site = portland\n", 7, "duplicate", "site", NULL);
	load_fails(f, NODE "[peer portland]\npublic_key = short\n", 8,
		   "public_key", NULL);
	load_fails(f, NODE "[peer portland]\nsync = 127.0.0.2:7402\n", 8,
		   "127.0.0.2:7402", NULL);
	/* grants cannot default to longer than they may last */
	load_fails(f, NODE "[policy]\ngrant_default = 31d\n", 0,
		   "grant_default", NULL);
}

static void test_syntax_error(void **state)
{
	struct fixture *f = *state;

	load_fails(f, NODE "this line has no equals sign\n", 7, NULL);
	load_fails(f, "[node\nsite = a\n", 1, NULL);
}

static void test_duplicate_peer(void **state)
{
	struct fixture *f = *state;

	load_fails(f,
		   NODE
		   PEER_PORTLAND                         /* 7 */
		   "[peer montreal]\n"                   /* 11 */
		   "publish = tcp://127.0.0.3:7401\n"
		   "sync = tcp://127.0.0.3:7402\n"
		   "public_key = " KEY_B "\n"
		   "[peer portland]\n"                   /* 15 */
		   "publish = tcp://127.0.0.9:7401\n",
		   15, "duplicate", "portland", NULL);
}

static void test_duplicate_peer_adjacent(void **state)
{
	/* the same [peer NAME] twice in a row is as much a duplicate as
	 * with another section between */
	struct fixture *f = *state;
	int rc = load(f, NODE
			 "[peer portland]\n"
			 "publish = tcp://127.0.0.2:7401\n"
			 "sync = tcp://127.0.0.2:7402\n"
			 "[peer portland]\n"
			 "public_key = " KEY_A "\n");

	if (rc == 0)
		fail_msg("two [peer portland] sections accepted (npeers %d, "
			 "publish %s)", f->cfg->npeers,
			 f->cfg->peers[0].publish);
	assert_int_equal(rc, GD_EINVAL);
	assert_non_null(strstr(buf_str(&f->err), "portland"));
}

static void test_peer_is_self(void **state)
{
	struct fixture *f = *state;

	/* reported at the peer's section, whichever comes first */
	load_fails(f,
		   NODE "\n"
		   "[peer paloalto]\n"                   /* 8 */
		   "publish = tcp://127.0.0.2:7401\n"
		   "sync = tcp://127.0.0.2:7402\n"
		   "public_key = " KEY_A "\n",
		   8, "paloalto", NULL);
	load_fails(f,
		   "[peer paloalto]\n"                   /* 1 */
		   "publish = tcp://127.0.0.2:7401\n"
		   "sync = tcp://127.0.0.2:7402\n"
		   "public_key = " KEY_A "\n"
		   NODE,
		   1, "paloalto", NULL);
}

/* One key, one machine (issue 19, N14): two peers with one public_key are
 * refused at the second key's line, naming both; a peer with the node's
 * own key is refused by config_check_own_key at that peer's key line. */
static void test_duplicate_peer_key(void **state)
{
	struct fixture *f = *state;
	char want[200];

	load_fails(f,
		   NODE
		   PEER_PORTLAND                         /* 7, key at 10 */
		   "[peer montreal]\n"                   /* 11 */
		   "publish = tcp://127.0.0.3:7401\n"
		   "sync = tcp://127.0.0.3:7402\n"
		   "public_key = " KEY_A "\n",           /* 14 */
		   14, "montreal", "portland", "line 10", "public_key", NULL);

	load_ok(f, NODE PEER_PORTLAND                /* key at 10 */
		   "[peer montreal]\n"
		   "publish = tcp://127.0.0.3:7401\n"
		   "sync = tcp://127.0.0.3:7402\n"
		   "public_key = " KEY_B "\n");
	assert_int_equal(config_check_own_key(f->cfg, KEY_S, &f->err), 0);
	assert_int_equal(config_check_own_key(f->cfg, KEY_B, &f->err),
			 GD_EINVAL);
	snprintf(want, sizeof(want), "%s:14: [peer montreal] has this node's "
		 "own public_key", f->path);
	if (strncmp(buf_str(&f->err), want, strlen(want)))
		fail_msg("message '%s' does not start with '%s'",
			 buf_str(&f->err), want);
	config_free(&f->cfg);
}

static void test_peer_incomplete(void **state)
{
	struct fixture *f = *state;

	load_fails(f,
		   NODE
		   "[peer portland]\n"                   /* 7 */
		   "publish = tcp://127.0.0.2:7401\n"
		   "sync = tcp://127.0.0.2:7402\n",
		   7, "portland", "public_key", NULL);
}

static void test_peer_empty(void **state)
{
	/* a [peer NAME] with nothing in it is a peer without its keys, not
	 * no peer at all */
	struct fixture *f = *state;
	int rc = load(f, NODE "[peer portland]\n");

	if (rc == 0)
		fail_msg("an empty [peer portland] was accepted (npeers %d)",
			 f->cfg->npeers);
	assert_non_null(strstr(buf_str(&f->err), "portland"));
}

static void test_missing_key(void **state)
{
	static const char *need[] = { "site", "data_dir", "repo_dir",
				      "user_socket", "admin_socket" };
	static const char *line[] = {
		"site = paloalto\n", "data_dir = /var/lib/grantd\n",
		"repo_dir = /srv/git\n", "user_socket = /run/u.sock\n",
		"admin_socket = /run/a.sock\n",
	};
	struct fixture *f = *state;
	char text[512];
	char want[64];

	for (size_t skip = 0; skip < GD_ARRAY_SIZE(need); skip++) {
		size_t off = (size_t)snprintf(text, sizeof(text), "[node]\n");
		for (size_t i = 0; i < GD_ARRAY_SIZE(need); i++)
			if (i != skip)
				off += (size_t)snprintf(text + off,
							sizeof(text) - off,
							"%s", line[i]);
		snprintf(want, sizeof(want), "'%s'", need[skip]);
		load_fails(f, text, 0, "missing", want, NULL);
	}
	load_fails(f, "", 0, "missing", NULL);
	load_fails(f, "; nothing but a comment\n", 0, "missing", NULL);
}

static void test_unknown_section(void **state)
{
	struct fixture *f = *state;

	/* reported at the section header (line 7), not its first key */
	load_fails(f, NODE "[nodes]\nsite = x\n", 7, "[nodes]", NULL);
	load_fails(f, NODE "[peer]\npublish = tcp://a:1\n", 7, "[peer]",
		   NULL);
	load_fails(f, NODE "[Policy]\ngrant_max = 30d\n", 7, "[Policy]",
		   NULL);
}

static void test_unknown_section_empty(void **state)
{
	/* SPEC 4: unknown sections are errors, with or without keys; a
	 * misspelt [polcy] header followed by nothing is still a typo */
	struct fixture *f = *state;
	int rc = load(f, NODE "[polcy]\n");

	if (rc == 0)
		fail_msg("unknown empty section [polcy] accepted");
	assert_non_null(strstr(buf_str(&f->err), "polcy"));
}

static void test_long_value(void **state)
{
	/* paths longer than inih's line buffer (200 in Debian's build) are
	 * still paths: take them whole, or say the line is too long; never
	 * cut them or call them a syntax error */
	struct fixture *f = *state;
	char dir[301];
	char text[1024];

	dir[0] = '/';
	memset(dir + 1, 'd', sizeof(dir) - 2);
	dir[sizeof(dir) - 1] = '\0';
	snprintf(text, sizeof(text),
		 "[node]\nsite = a\ndata_dir = %s\nrepo_dir = /r\n"
		 "user_socket = /u\nadmin_socket = /a\n", dir);
	int rc = load(f, text);
	if (rc != 0) {
		char prefix[160];
		snprintf(prefix, sizeof(prefix), "%s:3: ", f->path);
		if (strncmp(buf_str(&f->err), prefix, strlen(prefix)) ||
		    !strstr(buf_str(&f->err), "too long"))
			fail_msg("a %zu-character data_dir refused with '%s'",
				 strlen(dir), buf_str(&f->err));
		return;
	}
	assert_string_equal(f->cfg->data_dir, dir);
}

/* keys_socket: keys.sock beside the user socket unless given; never
 * another socket's path */
static void test_keys_socket(void **state)
{
	struct fixture *f = *state;

	load_ok(f, NODE);
	assert_string_equal(f->cfg->keys_socket, "/run/grantd/keys.sock");
	load_ok(f, NODE "keys_socket = /run/k/fp.sock\n");
	assert_string_equal(f->cfg->keys_socket, "/run/k/fp.sock");
	load_fails(f, NODE "keys_socket = k.sock\n", 7, "keys_socket",
		   "absolute", NULL);
	load_fails(f, NODE "keys_socket = /run/grantd/user.sock\n", 0,
		   "keys_socket", "another socket", NULL);
}

static void test_unreadable(void **state)
{
	struct fixture *f = *state;
	char path[160];

	snprintf(path, sizeof(path), "%s/no-such.conf", f->dir);
	int rc = config_load(&f->cfg, path, &f->err);
	assert_int_equal(rc, GD_EIO);
	assert_null(f->cfg);
	assert_non_null(strstr(buf_str(&f->err), path));
	assert_null(strchr(buf_str(&f->err), '\n'));
}

static void test_default_path(void **state)
{
	setenv("GRANTD_CONFIG", "/tmp/x.conf", 1);
	assert_string_equal(config_default_path(), "/tmp/x.conf");
	setenv("GRANTD_CONFIG", "", 1);
	assert_string_equal(config_default_path(), CONFIG_DEFAULT_PATH);
	unsetenv("GRANTD_CONFIG");
	assert_string_equal(config_default_path(), CONFIG_DEFAULT_PATH);
}

static void test_keyfile_good(void **state)
{
	struct fixture *f = *state;
	char path[160], pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];

	snprintf(path, sizeof(path), "%s/node.key", f->dir);
	write_file(path, "# grantctl keygen\n[curve]\npublic-key = " KEY_A
			 "\nsecret-key = " KEY_S "\n");
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(config_read_keyfile(path, pub, sec, &f->err), 0);
	assert_string_equal(pub, KEY_A);
	assert_string_equal(sec, KEY_S);

	/* only the public half */
	memset(pub, 0, sizeof(pub));
	assert_int_equal(config_read_keyfile(path, pub, NULL, &f->err), 0);
	assert_string_equal(pub, KEY_A);
}

/* A secret key readable by group or others is refused, as sshd does; the
 * public half alone may be read from such a file. */
static void test_keyfile_mode(void **state)
{
	struct fixture *f = *state;
	char path[160], pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	static const mode_t modes[] = { 0640, 0604, 0644, 0660, 0400 | 004 };

	snprintf(path, sizeof(path), "%s/node.key", f->dir);
	write_file(path, "[curve]\npublic-key = " KEY_A "\nsecret-key = "
			 KEY_S "\n");
	for (size_t i = 0; i < GD_ARRAY_SIZE(modes); i++) {
		buf_reset(&f->err);
		assert_int_equal(chmod(path, modes[i]), 0);
		if (config_read_keyfile(path, pub, sec, &f->err) != GD_EINVAL)
			fail_msg("mode %04o accepted", (unsigned)modes[i]);
		assert_non_null(strstr(buf_str(&f->err), path));
		assert_non_null(strstr(buf_str(&f->err), "chmod 600"));
		assert_int_equal(config_read_keyfile(path, pub, NULL, &f->err),
				 0);
	}
	assert_int_equal(chmod(path, 0400), 0);
	assert_int_equal(config_read_keyfile(path, pub, sec, &f->err), 0);
}

static void test_keyfile_bad(void **state)
{
	struct fixture *f = *state;
	char path[160], pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	static const char *bad[] = {
		"",
		"not a key file\n",
		"[curve]\npublic-key = " KEY_A "\n", /* no secret */
		"[curve]\npublic-key = short\nsecret-key = " KEY_S "\n",
		"[curve]\npublic-key = " KEY_A "x\nsecret-key = " KEY_S "\n",
		"[curve]\npublic-key = " KEY_A "\nsecret-key = \n",
		"[keys]\npublic-key = " KEY_A "\nsecret-key = " KEY_S "\n",
		"[curve]\npublic_key = " KEY_A "\nsecret_key = " KEY_S "\n",
	};

	snprintf(path, sizeof(path), "%s/node.key", f->dir);
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++) {
		buf_reset(&f->err);
		write_file(path, bad[i]);
		assert_int_equal(chmod(path, 0600), 0);
		int rc = config_read_keyfile(path, pub, sec, &f->err);
		if (rc != GD_EINVAL)
			fail_msg("key file %zu: %d, want GD_EINVAL", i, rc);
		assert_non_null(strstr(buf_str(&f->err), path));
	}

	snprintf(path, sizeof(path), "%s/no-such.key", f->dir);
	buf_reset(&f->err);
	assert_int_equal(config_read_keyfile(path, pub, sec, &f->err),
			 GD_EIO);
	assert_non_null(strstr(buf_str(&f->err), path));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_valid),
		T(test_peer_section_line),
		T(test_defaults),
		T(test_host_metrics_sk),
		T(test_quorum_role),
		T(test_gitolite),
		T(test_unknown_key),
		T(test_bad_duration),
		T(test_unknown_key_hint),
		T(test_inline_comment),
		T(test_bad_values),
		T(test_syntax_error),
		T(test_duplicate_peer),
		T(test_duplicate_peer_adjacent),
		T(test_peer_is_self),
		T(test_duplicate_peer_key),
		T(test_peer_incomplete),
		T(test_peer_empty),
		T(test_missing_key),
		T(test_unknown_section),
		T(test_unknown_section_empty),
		T(test_long_value),
		T(test_keys_socket),
		T(test_unreadable),
		T(test_default_path),
		T(test_keyfile_good),
		T(test_keyfile_mode),
		T(test_keyfile_bad),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
