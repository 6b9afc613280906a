/*
 * cli.h: what every client program shares: finding the config, calling
 * the node, and turning the outcome into an exit code (SPEC 3: 0 ok,
 * 1 refused, 2 usage or input error, 3 node unreachable, 4 the node failed
 * to decide).
 */
#ifndef GD_CLI_H
#define GD_CLI_H

#include "cmds.h"
#include "config.h"
#include "wire.h"

/* Default wait for a reply: long enough for a slow fsync, short enough
 * that a hung node fails closed quickly. */
#define CLI_TIMEOUT_MS 15000

#include <stdio.h>

/* One option a program takes besides the common ones: "--name VALUE". */
struct cli_opt {
	const char *name;
	const char **value;
};

/*
 * Parse the options before a program's arguments: --config FILE (or
 * --config=FILE), -h/--help, and the extra ones (NULL-terminated array,
 * may be NULL).  Returns -1 and sets *next to the first argument on
 * success; otherwise the exit code to return (help printed: 0; an unknown
 * option: 2, after saying so).
 */
int cli_options(int argc, char **argv, int *next, const char *prog,
		void (*usage)(FILE *), const char **config,
		const struct cli_opt *extra);

/* Load path (NULL: the default).  Prints "PROG: reason" and returns
 * GD_EXIT_USAGE on failure, 0 on success. */
int cli_load_config(struct config **out, const char *prog, const char *path);

/*
 * Send req (version filled in here) to the node on socket_path.  On
 * success *out is the caller's reply (grantd__v1__reply__free_unpacked).
 * On failure prints why and returns GD_EXIT_UNREACHABLE; otherwise 0.
 */
int cli_call(Grantd__V1__Reply **out, const char *prog, const char *socket_path,
	     Grantd__V1__Request *req);

/*
 * The same for the programs users meet (grant-shell, grant-keys), which
 * fail closed: when the node cannot be reached (3) or answers that it
 * failed to decide (4, or a status it should never send), say it is a
 * server problem, naming none of the node's internals, and return that
 * code with *out NULL.  Otherwise 0, and *out (the caller's) has status
 * 0, 1 or 2.
 */
int cli_call_user(Grantd__V1__Reply **out, const char *prog,
		  const char *socket_path, Grantd__V1__Request *req);

/* The 2fa subcommand (common/cmds.h) called name, or NULL. */
const struct gd_2fa_cmd *cli_2fa_find(const char *name);

/* The 2fa subcommands, one per line with their help, in the order of
 * common/cmds.h, then help's own line: the body of `ssh HOST 2fa help`. */
void cli_2fa_help(FILE *fp);

/* Print a reply's out to stdout and err to stderr; return its status as an
 * exit code (GD_EXIT_INTERNAL for a missing or unknown status: a reply
 * that does not say what happened is never taken as a refusal). */
int cli_print(const Grantd__V1__Reply *rep);

#endif
