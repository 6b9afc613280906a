/*
 * import.c: grantctl import's command line and its one request
 * (import.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "err.h"
#include "import.h"
#include "wire.h"
#include "xalloc.h"
#include "banned.h"

static const char usage_text[] =
        "usage: grantctl import gitolite-2fa [--dry-run] DIR\n"
        "       grantctl import gitolite-keydir [--dry-run] DIR\n";

void import_skip(struct import_ctx *ic,
                 const char *file,
                 const char *why,
                 const char *user)
{
	fprintf(stderr, "%s: %s: %s: %s%sskipped\n", ic->prog, file, why,
	        user ? user : "", user ? " " : "");
	ic->skipped++;
}

int import_user(struct import_ctx *ic, char **args, size_t nargs)
{
	Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;
	Grantd__V1__Reply *rep = NULL;
	int rc;

	if (ic->dry_run)
		args[nargs++] = xstrdup("--dry-run");
	req.cmd = "user.import";
	req.args = args;
	req.n_args = nargs;
	rc = cli_call(&rep, ic->prog, ic->cfg->admin_socket, &req);
	if (rc == 0) {
		rc = cli_print(rep);
		grantd__v1__reply__free_unpacked(rep, NULL);
	}
	if (rc == GD_EXIT_OK)
		ic->users++;
	if (rc == GD_EXIT_REFUSED || rc == GD_EXIT_USAGE) {
		fprintf(stderr, "%s: user %s: skipped\n", ic->prog, args[0]);
		ic->skipped++;
		rc = 0;
	}
	for (size_t i = 0; i < nargs; i++) {
		explicit_bzero(args[i], strlen(args[i]));
		free(args[i]);
	}
	return rc;
}

int import_main(int argc, char **argv, const char *prog, const char *cfg_path)
{
	struct import_ctx ic = {.prog = prog};
	struct config *cfg = NULL;
	const char *what = argc ? argv[0] : "", *dir = NULL;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dry-run") && !ic.dry_run) {
			ic.dry_run = true;
		} else if (!strcmp(argv[i], "-h") ||
		           !strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return GD_EXIT_OK;
		} else if (!dir && argv[i][0] != '-') {
			dir = argv[i];
		} else {
			dir = NULL;
			break;
		}
	}
	if (!dir ||
	    (strcmp(what, "gitolite-2fa") && strcmp(what, "gitolite-keydir"))) {
		fputs(usage_text, stderr);
		return GD_EXIT_USAGE;
	}
	if ((rc = cli_load_config(&cfg, prog, cfg_path)) != 0)
		return rc;
	ic.cfg = cfg;
	rc = !strcmp(what, "gitolite-2fa") ? import_2fa(&ic, dir)
	                                   : import_keydir(&ic, dir);
	if (rc == 0)
		printf("%s %d user%s%s\n",
		       ic.dry_run ? "would import" : "imported", ic.users,
		       ic.users == 1 ? "" : "s",
		       ic.skipped ? "; some skipped (named above)" : "");
	if (rc == 0 && ic.skipped) {
		fprintf(stderr, "%s: %d skipped (exit %d)\n", prog, ic.skipped,
		        IMPORT_EXIT_SKIPPED);
		rc = IMPORT_EXIT_SKIPPED;
	}
	config_free(&cfg);
	return rc;
}
