/* cli.c: shared client plumbing. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "err.h"
#include "banned.h"

int cli_options(int argc, char **argv, int *next, const char *prog,
		void (*usage)(FILE *), const char **config,
		const struct cli_opt *extra)
{
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		const struct cli_opt *o = extra;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return GD_EXIT_OK;
		}
		if (!strncmp(a, "--config=", 9)) {
			*config = a + 9;
			continue;
		}
		if (!strcmp(a, "--config") && i + 1 < argc) {
			*config = argv[++i];
			continue;
		}
		while (o && o->name && strcmp(o->name, a))
			o++;
		if (o && o->name && i + 1 < argc) {
			*o->value = argv[++i];
			continue;
		}
		fprintf(stderr, "%s: unknown option or missing value '%s' (see "
			"%s --help)\n", prog, a, prog);
		return GD_EXIT_USAGE;
	}
	*next = i;
	return -1;
}

int cli_load_config(struct config **out, const char *prog, const char *path)
{
	struct buf err = BUF_INIT;
	int rc = config_load(out, path ? path : config_default_path(), &err);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", prog, err.p);
		buf_free(&err);
		return GD_EXIT_USAGE;
	}
	return 0;
}

static int call(Grantd__V1__Reply **out, const char *socket_path,
		Grantd__V1__Request *req)
{
	req->version = GD_WIRE_VERSION;
	req->has_version = 1;
	return wire_call(out, socket_path, req, CLI_TIMEOUT_MS);
}

static int reply_status(const Grantd__V1__Reply *rep)
{
	/* the node never answers 3: only a client sees it unreachable */
	if (!rep->has_status || rep->status < GD_EXIT_OK ||
	    rep->status > GD_EXIT_INTERNAL ||
	    rep->status == GD_EXIT_UNREACHABLE)
		return GD_EXIT_INTERNAL;
	return rep->status;
}

int cli_call(Grantd__V1__Reply **out, const char *prog, const char *socket_path,
	     Grantd__V1__Request *req)
{
	int rc = call(out, socket_path, req);
	if (rc == 0)
		return 0;
	fprintf(stderr, "%s: cannot reach the grantd node at %s: %s (is "
		"grantd running?)\n", prog, socket_path,
		rc == GD_EPROTO ? "the answer does not decode" :
				  "no answer");
	return GD_EXIT_UNREACHABLE;
}

int cli_call_user(Grantd__V1__Reply **out, const char *prog,
		  const char *socket_path, Grantd__V1__Request *req)
{
	int code = GD_EXIT_UNREACHABLE;

	if (call(out, socket_path, req) == 0) {
		code = reply_status(*out);
		if (code != GD_EXIT_INTERNAL)
			return 0;
		grantd__v1__reply__free_unpacked(*out, NULL);
		*out = NULL;
	}
	fprintf(stderr, "%s: server problem: the authorisation service %s; "
		"nothing was done. Please try again later, and tell the "
		"administrators if it persists.\n", prog,
		code == GD_EXIT_UNREACHABLE ? "is not answering" :
					      "could not decide");
	return code;
}

int cli_print(const Grantd__V1__Reply *rep)
{
	if (rep->out && *rep->out)
		fputs(rep->out, stdout);
	if (rep->err && *rep->err) {
		fputs(rep->err, stderr);
		if (rep->err[strlen(rep->err) - 1] != '\n')
			fputc('\n', stderr);
	}
	fflush(stdout);
	return reply_status(rep);
}

/* ---- the 2fa subcommands (common/cmds.h) -------------------------------- */

static const struct gd_2fa_cmd cmds_2fa[] = { GD_2FA_CMDS(GD_2FA_INIT) };

const struct gd_2fa_cmd *cli_2fa_find(const char *name)
{
	for (size_t i = 1; name && i < GD_ARRAY_SIZE(cmds_2fa); i++)
		if (!strcmp(cmds_2fa[i].name, name))
			return &cmds_2fa[i];
	return NULL;
}

/* "  LEFT" padded to column 28, then help, each further line of it
 * indented to column 28. */
static void help_entry(FILE *fp, const char *name, const char *args,
		       const char *help)
{
	char left[64];
	const char *nl;

	snprintf(left, sizeof(left), "%s%s%s", name, *args ? " " : "", args);
	fprintf(fp, "  %-25s ", left);
	while ((nl = strchr(help, '\n'))) {
		fprintf(fp, "%.*s\n%28s", (int)(nl - help), help, "");
		help = nl + 1;
	}
	fprintf(fp, "%s\n", help);
}

void cli_2fa_help(FILE *fp)
{
	for (size_t i = 1; i < GD_ARRAY_SIZE(cmds_2fa); i++) {
		const struct gd_2fa_cmd *c = &cmds_2fa[i];
		help_entry(fp, c->name, c->args, c->help);
		if (c->args2)
			help_entry(fp, c->name, c->args2, c->help2);
	}
	help_entry(fp, "help", "", "this text");
}
