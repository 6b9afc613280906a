/*
 * test_cmds.c: the command table (node/cmd.h) and the 2fa subcommand list
 * (common/cmds.h) it shares with grant-shell.
 *
 * The table is built from the slices of cmd_grant.c, cmd_user.c,
 * cmd_repo.c and cmd_node.c: no name twice, flags that agree with each
 * other, one node row for every 2fa subcommand with the list's argument
 * bounds, and none besides; a row's rules (cmd_admit) in the order
 * control.c applied them by name before; every read runs without a batch
 * and without the operations module; and grant-shell's help lists each
 * subcommand once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

static int teardown(void **state)
{
	struct fixture *f = *state;

	cmd_table_free(&f->t);
	fx_store_close(&f->store, NULL);
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
	return cmd_admit(c, r, syncing);
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
		assert_int_equal(cmd_admit(c, r, false), 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_once),
		cmocka_unit_test(test_flags_agree),
		cmocka_unit_test(test_2fa_rows),
		cmocka_unit_test(test_shell_help),
		cmocka_unit_test_setup_teardown(test_admit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reads_without_batch,
						setup, teardown),
	};
	if (sodium_init() < 0)
		return 1;
	log_init("test_cmds", false, LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
