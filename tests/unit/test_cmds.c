/*
 * test_cmds.c: the command table (node/requests/cmd.h) and the 2fa subcommand list
 * (common/cmds.h) it shares with grant-shell.
 *
 * The table is built from the slices of cmd_grant.c, cmd_user.c,
 * cmd_repo.c and cmd_node.c: no name twice, flags that agree with each
 * other, one node row for every 2fa subcommand with the list's argument
 * bounds, and none besides; a row's rules (cmd_admit) in the order
 * control.c applied them by name before; every read runs without a batch
 * and without the operations module; and grant-shell's help lists each
 * subcommand once.
 *
 * And the handlers gitolite needs: in gitolite mode (cfg.gitolite_home)
 * `2fa enroll` by a user with no record makes the record with the
 * enrollment, and the other 2fa commands of such a user say how to enroll
 * (outside it: "unknown user", as before); vref.check answers gitolite's
 * VREF/2fa (required) and VREF/2fa/optin from committed state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <cmocka.h>
#include <sodium.h>

#include "cli.h"
#include "cmd.h"
#include "cmds.h"
#include "config.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "store.h"

static const struct gd_2fa_cmd list[] = { GD_2FA_CMDS(GD_2FA_INIT) };

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
	"test_cmds sealing key 0123456789";

static struct cmd_table *table(void)
{
	struct cmd_table *t = NULL;
	assert_int_equal(cmd_table_new(&t), 0);
	assert_non_null(t);
	assert_true(t->n > 0);
	return t;
}

static void test_names_once(void **state)
{
	struct cmd_table *t = table();

	(void)state;
	for (size_t i = 0; i < t->n; i++) {
		assert_non_null(t->rows[i].name);
		assert_non_null(t->rows[i].fn);
		for (size_t j = i + 1; j < t->n; j++)
			if (!strcmp(t->rows[i].name, t->rows[j].name))
				fail_msg("command %s twice", t->rows[i].name);
		assert_ptr_equal(cmd_table_find(t, t->rows[i].name),
				 &t->rows[i]);
	}
	assert_null(cmd_table_find(t, "2fa.help"));
	assert_null(cmd_table_find(t, "2fa."));
	assert_null(cmd_table_find(t, ""));
	cmd_table_free(&t);
	assert_null(t);
}

static void test_flags_agree(void **state)
{
	struct cmd_table *t = table();

	(void)state;
	for (size_t i = 0; i < t->n; i++) {
		const struct cmd *c = &t->rows[i];
		unsigned f = c->flags;
		/* a read never needs the batch: exactly one of the two */
		if (!(f & CMD_READS) == !(f & CMD_BATCH))
			fail_msg("%s: READS xor BATCH", c->name);
		if (!(f & (CMD_ON_USER | CMD_ON_ADMIN)))
			fail_msg("%s: on no socket", c->name);
		/* the user-socket rules only mean something there */
		if ((f & (CMD_NEEDS_USER | CMD_SYNC_GATED)) &&
		    !(f & CMD_ON_USER))
			fail_msg("%s: user rule on an admin command", c->name);
		assert_true(c->min_args >= 0);
		assert_true(c->min_args <= c->max_args);
		assert_true(c->max_args <= GD_CTL_MAX_ARGS);
		/* what control.c said by name before: every 2fa command needs
		 * a user and waits while the node catches up; so does no
		 * other but the push checks' user (grant-shell's and
		 * gitolite's VREF) */
		bool twofa = !strncmp(c->name, "2fa.", 4);
		assert_int_equal(!!(f & CMD_SYNC_GATED), twofa);
		assert_int_equal(!!(f & CMD_NEEDS_USER),
				 twofa || !strcmp(c->name, "push.check") ||
				 !strcmp(c->name, "vref.check"));
		if (twofa)
			assert_int_equal(f & (CMD_ON_USER | CMD_ON_ADMIN),
					 CMD_ON_USER);
	}
	cmd_table_free(&t);
}

/* Every subcommand of common/cmds.h has its node row, with the same
 * argument bounds, and there is no 2fa row besides. */
static void test_2fa_rows(void **state)
{
	struct cmd_table *t = table();
	size_t rows = 0;

	(void)state;
	for (int i = GD_2FA__NONE + 1; i < GD_2FA__COUNT; i++) {
		const struct gd_2fa_cmd *d = &list[i];
		char name[64];
		snprintf(name, sizeof(name), "2fa.%s", d->name);
		assert_string_equal(d->request, name);
		const struct cmd *c = cmd_table_find(t, name);
		if (!c)
			fail_msg("no node row for 2fa %s", d->name);
		assert_int_equal(c->twofa, i);
		assert_int_equal(c->min_args, d->min_args);
		assert_int_equal(c->max_args, d->max_args);
	}
	for (size_t i = 0; i < t->n; i++)
		rows += !strncmp(t->rows[i].name, "2fa.", 4);
	assert_int_equal(rows, GD_2FA__COUNT - 1);
	cmd_table_free(&t);
}

/* grant-shell's side of the list: it knows each subcommand, answers a
 * missing token itself, and lists each once in `2fa help`. */
static void test_shell_help(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);

	(void)state;
	assert_non_null(fp);
	fputc('\n', fp); /* every entry then starts "\n  NAME " */
	cli_2fa_help(fp);
	fclose(fp);
	for (int i = GD_2FA__NONE + 1; i < GD_2FA__COUNT; i++) {
		const struct gd_2fa_cmd *d = &list[i];
		char head[64];
		int forms = 0, heads = 0;
		assert_non_null(cli_2fa_find(d->name));
		assert_string_equal(cli_2fa_find(d->name)->request, d->request);
		/* a command whose last argument is the token answers its
		 * absence without asking the node */
		size_t al = strlen(d->args);
		if (al >= 5 && !strcmp(d->args + al - 5, "TOKEN"))
			assert_non_null(d->missing);
		snprintf(head, sizeof(head), "\n  %s%s%s ", d->name,
			 *d->args ? " " : "", d->args);
		for (const char *p = text; (p = strstr(p, head)); p++)
			heads++;
		snprintf(head, sizeof(head), "\n  %s ", d->name);
		for (const char *p = text; (p = strstr(p, head)); p++)
			forms++;
		if (heads != 1)
			fail_msg("2fa help lists '%s %s' %d times", d->name,
				 d->args, heads);
		assert_int_equal(forms, 1 + (d->args2 != NULL));
	}
	assert_non_null(strstr(text, "\n  help "));
	assert_null(cli_2fa_find("help"));
	assert_null(cli_2fa_find("val-"));
	assert_null(cli_2fa_find("valx"));
	assert_null(cli_2fa_find(NULL));
	free(text);
}

/* ---- a row's rules ------------------------------------------------------ */

struct fixture {
	char dir[64];
	struct config cfg;
	struct store *store;
	struct ops *ops;         /* setup_ops only */
	bool with_ops;
	struct cmd_table *t;
	Grantd__V1__Request rq;
	char *args[4];
	struct req r;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_cmds", false) < 0)
		return -1;
	f->cfg.site = "sitea";
	f->cfg.repo_dir = f->dir;
	if (fx_store_open(&f->store, NULL, f->dir, &f->cfg, seal_key) < 0 ||
	    cmd_table_new(&f->t) < 0)
		return -1;
	*state = f;
	return 0;
}

/* The same with the operations module, for handlers that write. */
static int setup_ops(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_cmds", false) < 0)
		return -1;
	f->cfg.site = "sitea";
	f->cfg.repo_dir = f->dir;
	f->cfg.policy.lockout_failures = 5;
	f->cfg.policy.lockout_window = 900;
	f->with_ops = true;
	if (fx_store_open(&f->store, &f->ops, f->dir, &f->cfg, seal_key) < 0 ||
	    cmd_table_new(&f->t) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cmd_table_free(&f->t);
	fx_store_close(&f->store, f->with_ops ? &f->ops : NULL);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

/* A fresh request for cmd from user at ip, nargs arguments. */
static struct req *request(struct fixture *f, const char *cmd, bool admin,
			   const char *user, const char *ip, size_t nargs)
{
	buf_free(&f->r.out);
	buf_free(&f->r.err);
	buf_free(&f->r.uri);
	buf_free(&f->r.path);
	memset(&f->r, 0, sizeof(f->r));
	grantd__v1__request__init(&f->rq);
	f->rq.cmd = (char *)cmd;
	f->rq.user = (char *)user;
	f->rq.client_ip = (char *)ip;
	f->rq.args = f->args;
	f->rq.n_args = nargs;
	f->r.rq = &f->rq;
	f->r.admin = admin;
	f->r.now = 1700000000;
	f->r.now_ms = 1700000000000ull;
	return &f->r;
}

static int admit(struct fixture *f, struct req *r, bool syncing)
{
	const struct cmd *c = cmd_table_find(f->t, r->rq->cmd);
	assert_non_null(c);
	return cmd_admit(c, r, NULL, NULL, syncing);
}

static void test_admit(void **state)
{
	struct fixture *f = *state;
	struct req *r;

	f->args[0] = "123456";
	r = request(f, "2fa.val", false, "alice", "192.0.2.7", 1);
	assert_int_equal(admit(f, r, false), 0);
	assert_int_equal(r->status, 0);
	assert_int_equal(r->ip.family, AF_INET);
	/* the socket comes first */
	r = request(f, "2fa.val", true, "alice", "192.0.2.7", 1);
	assert_int_equal(admit(f, r, false), 1);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(r->err.p, "not allowed on this socket"));
	r = request(f, "status", false, NULL, NULL, 0);
	assert_int_equal(admit(f, r, false), 1);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	/* then the argument count (from common/cmds.h) */
	r = request(f, "2fa.val", false, "alice", "192.0.2.7", 2);
	f->args[1] = "7";
	assert_int_equal(admit(f, r, true), 1);
	assert_int_equal(r->status, GD_EXIT_USAGE);
	assert_non_null(strstr(r->err.p, "wrong number of arguments"));
	/* a user */
	r = request(f, "push.check", false, NULL, "192.0.2.7", 1);
	assert_int_equal(admit(f, r, false), 1);
	assert_string_equal(r->err.p, "no user given");
	r = request(f, "2fa.isval", false, "", "192.0.2.7", 0);
	assert_int_equal(admit(f, r, false), 1);
	assert_int_equal(r->status, GD_EXIT_USAGE);
	/* the syncing gate: 2fa commands only, reads too */
	r = request(f, "2fa.isval", false, "alice", "192.0.2.7", 0);
	assert_int_equal(admit(f, r, true), 1);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(r->err.p, "catching up"));
	r = request(f, "push.check", false, "alice", "192.0.2.7", 1);
	assert_int_equal(admit(f, r, true), 0);
	r = request(f, "repo.read", false, NULL, NULL, 1);
	assert_int_equal(admit(f, r, true), 0);
	/* the client address */
	r = request(f, "2fa.val", false, "alice", "not an address", 1);
	assert_int_equal(admit(f, r, false), 1);
	assert_int_equal(r->status, GD_EXIT_USAGE);
	assert_non_null(strstr(r->err.p, "no valid client address"));
	r = request(f, "2fa.enroll", false, "alice", NULL, 0);
	assert_int_equal(admit(f, r, false), 0);
	request(f, "", false, NULL, NULL, 0);
}

/* On a mirror (SPEC 9) every CMD_FRONTEND row is refused before anything
 * else is looked at, naming the frontends; what a mirror serves (clones,
 * keys, status, lists) is not, and a frontend refuses none of them. */
static void test_admit_mirror(void **state)
{
	struct fixture *f = *state;
	struct config cfg = { 0 };
	struct req *r;
	static const char *const refused[] = {
		"push.check", "vref.check", "2fa.val", "2fa.isval",
		"2fa.enroll", "hook.refs", "user.add", "enroll", "repo.add",
		"grant.list", "grant.revoke", "check", "unlock",
	};
	static const char *const served[] = {
		"repo.read", "keys.find", "keys.list", "status", "user.list",
		"repo.list",
	};

	cfg.site = "montreal";
	cfg.role = CONFIG_ROLE_MIRROR;
	cfg.npeers = 3;
	cfg.peers[0].site = "paloalto";
	cfg.peers[1].site = "mirror2";
	cfg.peers[1].role = CONFIG_ROLE_MIRROR;
	cfg.peers[2].site = "portland";
	for (size_t i = 0; i < GD_ARRAY_SIZE(refused); i++) {
		const struct cmd *c = cmd_table_find(f->t, refused[i]);
		assert_non_null(c);
		assert_true(c->flags & CMD_FRONTEND);
		/* even with too few arguments: the role comes first */
		r = request(f, refused[i], !(c->flags & CMD_ON_USER), "alice",
			    "192.0.2.7", 0);
		assert_int_equal(cmd_admit(c, r, &cfg, "git.example.org",
					   false), 1);
		assert_int_equal(r->status, GD_EXIT_REFUSED);
		if (!strstr(r->err.p, "this is a read-only mirror of "
				      "git.example.org; ") ||
		    !strstr(r->err.p, " one of: paloalto, portland"))
			fail_msg("%s: %s", refused[i], r->err.p);
	}
	r = request(f, "push.check", false, "alice", "192.0.2.7", 1);
	cmd_admit(cmd_table_find(f->t, "push.check"), r, &cfg, NULL, false);
	assert_non_null(strstr(r->err.p, "mirror of montreal; push to one "
					 "of: paloalto, portland"));
	for (size_t i = 0; i < GD_ARRAY_SIZE(served); i++) {
		const struct cmd *c = cmd_table_find(f->t, served[i]);
		assert_non_null(c);
		assert_false(c->flags & CMD_FRONTEND);
	}
	/* a frontend admits them */
	cfg.role = CONFIG_ROLE_FRONTEND;
	f->args[0] = "123456";
	r = request(f, "2fa.val", false, "alice", "192.0.2.7", 1);
	assert_int_equal(cmd_admit(cmd_table_find(f->t, "2fa.val"), r, &cfg,
				   "git.example.org", false), 0);
	request(f, "", false, NULL, NULL, 0);
}

/* Every read that needs no node-wide state answers from committed state:
 * no batch, no operations module (a NULL dereference would fail here). */
static void test_reads_without_batch(void **state)
{
	struct fixture *f = *state;
	static char *args[][3] = {
		{ "pub/x" }, { "alice", "192.0.2.7", "pub/x" }, { "relative" },
	};

	for (size_t i = 0; i < f->t->n; i++) {
		const struct cmd *c = &f->t->rows[i];
		struct cmd_ctx x = { 0 };
		char **a = c->min_args == 3 ? args[1] :
			   !strcmp(c->name, "backup") ? args[2] : args[0];
		if (!(c->flags & CMD_READS) || (c->flags & CMD_NODE))
			continue;
		for (int k = 0; k < c->min_args; k++)
			f->args[k] = a[k];
		struct req *r = request(f, c->name, !(c->flags & CMD_ON_USER),
					"alice", "192.0.2.7",
					(size_t)c->min_args);
		assert_int_equal(cmd_admit(c, r, NULL, NULL, false), 0);
		x.p.cfg = &f->cfg;
		x.p.store = f->store;
		x.p.host = "git.example.org";
		if (c->fn(&x, r) < 0)
			fail_msg("%s failed without a batch", c->name);
		assert_true(r->status == GD_EXIT_OK ||
			    r->status == GD_EXIT_REFUSED ||
			    r->status == GD_EXIT_USAGE);
	}
	request(f, "", false, NULL, NULL, 0);
}

/* ---- gitolite ----------------------------------------------------------- */

/* Run r's handler as the node does: a CMD_BATCH row in a batch of its own,
 * committed after; a CMD_READS row on committed state, with no batch and
 * no operations module. */
static void run(struct fixture *f, struct req *r)
{
	const struct cmd *c = cmd_table_find(f->t, r->rq->cmd);
	struct cmd_ctx x = { 0 };
	struct store_batch *b = NULL;

	assert_non_null(c);
	assert_int_equal(cmd_admit(c, r, NULL, NULL, false), 0);
	x.p.cfg = &f->cfg;
	x.p.store = f->store;
	x.p.host = "git.example.org";
	if (c->flags & CMD_BATCH) {
		assert_int_equal(store_batch_new(&b, f->store), 0);
		x.p.batch = b;
		x.ops = f->ops;
	}
	assert_int_equal(c->fn(&x, r), 0);
	if (b) {
		assert_int_equal(ops_commit(f->ops, b, false), 0);
		ops_outbox_clear(f->ops);
		store_batch_free(&b);
	}
}

/* user's committed records */
static void load(struct fixture *f, struct policy_user *u, const char *user)
{
	struct policy_ctx pc = { &f->cfg, f->store, NULL, "git.example.org",
				  NULL };
	assert_int_equal(policy_user_load(u, &pc, user), 0);
}

/* A user record, an active enrollment and a grant for net, as enroll and
 * a first val make them. */
static void validated(struct fixture *f, const char *user, const char *net)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__User nu = GRANTD__V1__USER__INIT;
	Grantd__V1__Enrollment e = GRANTD__V1__ENROLLMENT__INIT;
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
	uint8_t secret[20] = "0123456789abcdefghij";
	struct store_batch *b;

	assert_int_equal(store_batch_new(&b, f->store), 0);
	nu.name = (char *)user;
	op.body_case = GRANTD__V1__OP__BODY_USER;
	op.user = &nu;
	assert_int_equal(ops_local(f->ops, b, &op), 0);
	op = (Grantd__V1__Op)GRANTD__V1__OP__INIT;
	e.user = (char *)user;
	SET(e, kind, GRANTD__V1__OTP_KIND__OTP_TOTP);
	SET(e, secret, ((ProtobufCBinaryData){ sizeof(secret), secret }));
	SET(e, digits, 6);
	SET(e, period, 30);
	SET(e, active, 1);
	SET(e, id, ops_stamp(f->ops));
	op.body_case = GRANTD__V1__OP__BODY_ENROLL;
	op.enroll = &e;
	assert_int_equal(ops_local(f->ops, b, &op), 0);
	g.user = (char *)user;
	g.net = (char *)net;
	g.session = "";
	SET(g, added, (int64_t)time(NULL));
	SET(g, expires, (int64_t)time(NULL) + 3600);
	g.site = "sitea";
	op = (Grantd__V1__Op)GRANTD__V1__OP__INIT;
	op.body_case = GRANTD__V1__OP__BODY_GRANT;
	op.grant = &g;
	assert_int_equal(ops_local(f->ops, b, &op), 0);
	assert_int_equal(ops_commit(f->ops, b, false), 0);
	ops_outbox_clear(f->ops);
	store_batch_free(&b);
}

/* Outside gitolite mode a user grantd does not know is refused, as
 * before; in it, `2fa val` says how to enroll, and `2fa enroll` makes the
 * user record (no keys) in the batch of the enrollment. */
static void test_gitolite_enroll(void **state)
{
	struct fixture *f = *state;
	struct policy_user u;
	struct req *r;

	f->args[0] = "totp";
	r = request(f, "2fa.enroll", false, "kim", "192.0.2.7", 1);
	run(f, r);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_string_equal(r->err.p, "unknown user 'kim'");
	f->args[0] = "123456";
	r = request(f, "2fa.val", false, "kim", "192.0.2.7", 1);
	run(f, r);
	assert_string_equal(r->err.p, "unknown user 'kim'");
	load(f, &u, "kim");
	assert_null(u.user);
	assert_null(u.enroll);
	policy_user_clear(&u);

	f->cfg.gitolite_home = "/srv/git";
	r = request(f, "2fa.val", false, "kim", "192.0.2.7", 1);
	run(f, r);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(r->err.p, "not enrolled"));
	assert_non_null(strstr(r->err.p, "enroll with: ssh git.example.org "
					 "2fa enroll totp"));
	assert_int_equal(r->out.len, 0);
	f->args[0] = "654321";
	r = request(f, "2fa.unenroll", false, "kim", "192.0.2.7", 1);
	run(f, r);
	assert_non_null(strstr(r->err.p, "not enrolled"));
	load(f, &u, "kim");
	assert_null(u.user);    /* a refusal makes no record */
	policy_user_clear(&u);

	f->args[0] = "totp";
	r = request(f, "2fa.enroll", false, "kim", "192.0.2.7", 1);
	run(f, r);
	assert_int_equal(r->status, GD_EXIT_OK);
	assert_non_null(strstr(r->out.p, "New token generated for user kim"));
	assert_true(r->uri.len > 0);
	load(f, &u, "kim");
	assert_non_null(u.user);
	assert_string_equal(u.user->name, "kim");
	assert_int_equal(u.user->n_keys, 0);
	assert_non_null(u.enroll);
	assert_false(u.enrolled);       /* active at the first val */
	policy_user_clear(&u);
	/* a second enroll before the first val: a new secret, one record */
	r = request(f, "2fa.enroll", false, "kim", "192.0.2.7", 1);
	run(f, r);
	assert_int_equal(r->status, GD_EXIT_OK);
	request(f, "", false, NULL, NULL, 0);
}

/* vref.check: MODE required or optin, the repository for the texts. */
static void test_vref_check(void **state)
{
	struct fixture *f = *state;
	struct req *r;

	f->cfg.gitolite_home = "/srv/git";
	/* no record: optin allows, required says how to enroll */
	f->args[0] = "optin";
	f->args[1] = "demo";
	r = request(f, "vref.check", false, "lou", "192.0.2.7", 2);
	run(f, r);
	assert_int_equal(r->status, GD_EXIT_OK);
	f->args[0] = "required";
	r = request(f, "vref.check", false, "lou", "192.0.2.7", 2);
	run(f, r);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_string_equal(r->err.p, "user 'lou' is not enrolled with "
			    "2-factor authentication, which 'demo' requires\n"
			    "enroll first: ssh git.example.org 2fa enroll "
			    "totp (or yubikey), then ssh git.example.org 2fa "
			    "val <token>");
	/* enrolled with a grant for 192.0.2.7 only */
	validated(f, "lou", "192.0.2.7");
	for (int i = 0; i < 2; i++) {
		f->args[0] = i ? "required" : "optin";
		r = request(f, "vref.check", false, "lou", "192.0.2.7", 2);
		run(f, r);
		assert_int_equal(r->status, GD_EXIT_OK);
		r = request(f, "vref.check", false, "lou", "192.0.2.8", 2);
		run(f, r);
		assert_int_equal(r->status, GD_EXIT_REFUSED);
		assert_string_equal(r->err.p, "IP address 192.0.2.8 has not "
				    "been validated for user 'lou'\nget your "
				    "2-factor token and run: ssh "
				    "git.example.org 2fa val <token>");
	}
	/* the repository is optional, and a name grantd refuses (gitolite
	 * allows '@') is only left out of the texts */
	f->args[0] = "required";
	r = request(f, "vref.check", false, "lou", "192.0.2.8", 1);
	run(f, r);
	assert_non_null(strstr(r->err.p, "has not been validated"));
	f->args[1] = "@team/x";
	r = request(f, "vref.check", false, "nobody", "192.0.2.8", 2);
	run(f, r);
	assert_int_equal(r->status, GD_EXIT_REFUSED);
	assert_non_null(strstr(r->err.p, "which this repository requires"));
	/* a mode it does not know is bad input, never an allow */
	f->args[0] = "off";
	r = request(f, "vref.check", false, "lou", "192.0.2.7", 2);
	run(f, r);
	assert_int_equal(r->status, GD_EXIT_USAGE);
	request(f, "", false, NULL, NULL, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_once),
		cmocka_unit_test(test_flags_agree),
		cmocka_unit_test(test_2fa_rows),
		cmocka_unit_test(test_shell_help),
		cmocka_unit_test_setup_teardown(test_admit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admit_mirror, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reads_without_batch,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_gitolite_enroll,
						setup_ops, teardown),
		cmocka_unit_test_setup_teardown(test_vref_check, setup_ops,
						teardown),
	};
	if (sodium_init() < 0)
		return 1;
	log_init("test_cmds", false, LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
