/*
 * import.h: grantctl import, the migration from gitolite and kernel.org's
 * 2fa (docs/migrating.md).  grantctl.c hands it `import ...`; it reads
 * the files here (the node may run as another user, elsewhere) and sends
 * the node one user.import request per user (node/requests/cmd_import.c),
 * which makes everything of that user in one batch, replicated to every
 * site, or nothing.
 *
 *   import.c          the command line and the request (import_main,
 *                     import_user)
 *   import_2fa.c      gitolite's $GL_ADMIN_BASE/2fa (common/ga2fa.h)
 *   import_keydir.c   gitolite's keydir (common/keyfile.h)
 *
 * Exit status: 0 every user imported (or already there); IMPORT_EXIT_SKIPPED
 * when a file could not be read or parsed, or the node refused a user
 * (each named on stderr) and the rest was imported; 2 bad usage or DIR
 * unreadable; 3 the node unreachable; 4 the node failed to decide (the
 * import stops there).
 */
#ifndef GD_IMPORT_H
#define GD_IMPORT_H

#include <stdbool.h>
#include <stddef.h>

#define IMPORT_EXIT_SKIPPED 5

struct config;

struct import_ctx {
	const char *prog;
	const struct config *cfg;
	bool dry_run;
	int skipped; /* files or users skipped */
	int users; /* users the node took (or had already) */
};

/* argv: "gitolite-2fa"|"gitolite-keydir" [--dry-run] DIR; cfg_path as
 * grantctl's --config.  Returns the exit status. */
int import_main(int argc, char **argv, const char *prog, const char *cfg_path);

/* Send user.import NAME ARGS... (args[0] is NAME; --dry-run is added
 * when ic->dry_run) and print the answer; a refusal counts as skipped.
 * Wipes and frees args (they may hold a secret).  Returns 0 to go on, or
 * the exit status to stop with (unreachable, node failure). */
int import_user(struct import_ctx *ic, char **args, size_t nargs);

/* Print "PROG: FILE: WHY: USER skipped" to stderr and count it. */
void import_skip(struct import_ctx *ic,
                 const char *file,
                 const char *why,
                 const char *user);

int import_2fa(struct import_ctx *ic, const char *dir);
int import_keydir(struct import_ctx *ic, const char *dir);

#endif
