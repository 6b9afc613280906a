/*
 * cmds.h: the 2fa subcommands (`ssh HOST 2fa SUB ARGS...`), listed once.
 *
 * One X-macro row per subcommand, expanded by grant-shell (which names it
 * known, answers a missing argument and prints `2fa help`: common/cli.c)
 * and by the node (its request "2fa.SUB" with the same argument bounds:
 * node/requests/cmd.c); tests/unit/test_cmds.c checks that the two agree.  To add
 * a subcommand: a row here, a handler and its node row in node/requests/cmd_*.c
 * (docs/architecture.md, "Add a 2fa subcommand").
 *
 * Columns:
 *   ID       C name: GD_2FA_<ID>
 *   NAME     the subcommand, as typed; the node's request is "2fa.NAME"
 *   ARGS     argument synopsis for the help ("" for none)
 *   MIN MAX  argument count the node accepts (grant-shell leaves the
 *            count to the node, whose answer it prints)
 *   MISSING  what grant-shell prints when no argument is given, without
 *            asking the node (exit 2); NULL: ask the node
 *   HELP     help text; '\n' continues it on the next line
 *   ARGS2 HELP2  another form of the subcommand with a help line of its
 *            own (inval all purge), or NULL NULL
 *
 * The order is the order of `2fa help`.
 */
#ifndef GD_CMDS_H
#define GD_CMDS_H

/* kernel.org's answer to a token command without its token; EG is the
 * example command line before the token */
#define GD_2FA_NO_TOKEN(EG)                                                    \
	"Missing tokencode.\nYou need to pass the token code as the last "     \
	"argument. E.g.:\n    ssh HOST 2fa " EG " 123456\n"

#define GD_2FA_CMDS(X)                                                         \
	X(ENROLL, "enroll", "totp|yubikey", 0, 1, NULL,                        \
	  "start enrollment: a phone app (TOTP) or a\n"                        \
	  "YubiKey (HOTP); prints the secret, a QR code\n"                     \
	  "and 5 one-time scratch codes",                                      \
	  NULL, NULL)                                                          \
	X(VAL, "val", "TOKEN", 1, 1, GD_2FA_NO_TOKEN("val"),                   \
	  "validate a token; allows pushes from your\n"                        \
	  "current IP address for 24 hours",                                   \
	  NULL, NULL)                                                          \
	X(VAL_FOR_DAYS, "val-for-days", "NN TOKEN", 2, 2,                      \
	  GD_2FA_NO_TOKEN("val-for-days 7"),                                   \
	  "the same for NN days (1-30)",                                       \
	  NULL, NULL)                                                          \
	X(VAL_SUBNET, "val-subnet", "/NN TOKEN", 2, 2,                         \
	  GD_2FA_NO_TOKEN("val-subnet /24"),                                   \
	  "allow your subnet (up to /12 IPv4, /48 IPv6)\n"                     \
	  "for 8 hours",                                                       \
	  NULL, NULL)                                                          \
	X(VAL_SESSION, "val-session", "TOKEN", 1, 1,                           \
	  GD_2FA_NO_TOKEN("val-session"),                                      \
	  "allow only this SSH connection (ControlMaster)\n"                   \
	  "for 8 hours",                                                       \
	  NULL, NULL)                                                          \
	X(ISVAL, "isval", "", 0, 0, NULL,                                      \
	  "print True if your IP is allowed, else False",                      \
	  NULL, NULL)                                                          \
	X(LIST_VAL, "list-val", "[all]", 0, 1, NULL,                           \
	  "list your allowed addresses (all: with expired)",                   \
	  NULL, NULL)                                                          \
	X(INVAL, "inval", "IP|myip|all", 1, 2,                                 \
	  "You need to provide an IP address to invalidate.\nUse 'myip' for "  \
	  "your current address, 'all' for all of them, or 'all purge' to "    \
	  "also forget the history.\n",                                        \
	  "expire an allowed address, yours, or all",                          \
	  "all purge", "expire all and forget the history")                    \
	X(UNENROLL, "unenroll", "TOKEN", 1, 1, GD_2FA_NO_TOKEN("unenroll"),    \
	  "remove your enrollment (token or scratch code)",                    \
	  NULL, NULL)

/* GD_2FA_ENROLL, ...; 0 is no subcommand */
enum gd_2fa_id {
	GD_2FA__NONE,
#define GD_2FA_ENUM(ID, ...) GD_2FA_##ID,
	GD_2FA_CMDS(GD_2FA_ENUM)
#undef GD_2FA_ENUM
	GD_2FA__COUNT
};

struct gd_2fa_cmd {
	const char *name;       /* "val" */
	const char *request;    /* "2fa.val": the node's command */
	const char *args;
	int min_args, max_args;
	const char *missing;
	const char *help;
	const char *args2, *help2;
};

/* An initializer of struct gd_2fa_cmd[GD_2FA__COUNT]:
 *   static const struct gd_2fa_cmd t[] = { GD_2FA_CMDS(GD_2FA_INIT) };
 * (entry 0 stays empty). */
#define GD_2FA_INIT(ID, NAME, ARGS, MIN, MAX, MISSING, HELP, ARGS2, HELP2)     \
	[GD_2FA_##ID] = { NAME, "2fa." NAME, ARGS, MIN, MAX, MISSING, HELP,    \
			  ARGS2, HELP2 },

#endif
