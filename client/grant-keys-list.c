/*
 * grant-keys-list: grant-keys over the user socket (ZeroMQ).
 *
 * grant-keys runs this when it is given no FINGERPRINT (every key of every
 * user: keys.list); with one it asks the keys socket itself and links no
 * ZeroMQ (grant-keys.c).  Given a FINGERPRINT this program asks keys.find
 * over the user socket, the path grant-keys took before the keys socket
 * (bench/run-scale compares the two).  What follows is grant-keys':
 *
 * Given the offered key's fingerprint (sshd's %f), prints the one
 * forced-command line of the user whose key it is, which the node finds
 * in its fingerprint index; without one, a line per SSH key of every
 * active user.  Both come from the replicated user store, so a user added
 * at one site can log in at every site:
 *
 *   command="/usr/bin/grant-shell --config /etc/grantd/grantd.conf alice",
 *   no-pty,no-port-forwarding,no-agent-forwarding,no-X11-forwarding KEY
 *
 * (one line).  grant-shell is named by its absolute path: beside this
 * program unless --shell says otherwise.  Prints nothing and exits 3 when
 * the node cannot be reached, 4 when it failed to decide, so sshd admits
 * no one (fail closed).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "authkeys.h"
#include "cli.h"
#include "config.h"
#include "err.h"
#include "wire.h"
#include "version.h"
#include "banned.h"

static const char prog[] = "grant-keys";  /* it runs as grant-keys' */

static void usage(FILE *fp)
{
	authkeys_usage(fp);
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL, *shell = NULL, *fp = NULL;
	struct authkeys_paths paths;
	Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;
	Grantd__V1__Reply *rep = NULL;
	struct config *cfg = NULL;
	int i = 1, rc;

	if (argc > 1 && !strcmp(argv[1], "--version")) {
		printf("%s %s\n", "grant-keys-list", GRANTD_VERSION);
		return GD_EXIT_OK;
	}
	const struct cli_opt extra[] = { { "--shell", &shell },
					 { NULL, NULL } };
	rc = cli_options(argc, argv, &i, prog, usage, &cfg_path, extra);
	if (rc >= 0)
		return rc;
	if (argc - i > 2) {
		usage(stderr);
		return GD_EXIT_USAGE;
	}
	if (argc - i == 2)
		fp = argv[i + 1];
	if ((rc = authkeys_paths(&paths, prog, shell, cfg_path)) != 0)
		return rc;
	if ((rc = cli_load_config(&cfg, prog, cfg_path)) != 0)
		return rc;
	/* one point read of the node's index, not every user's keys */
	req.cmd = fp ? "keys.find" : "keys.list";
	req.args = (char **)&fp;
	req.n_args = fp ? 1 : 0;
	if ((rc = cli_call_user(&rep, prog, cfg->user_socket, &req)) != 0)
		goto done;
	if (rep->status != GD_EXIT_OK) {
		rc = cli_print(rep);
		goto done;
	}
	/* each line of the answer (keys.find: one or none): NAME \t KEY */
	authkeys_print(stdout, rep->out, paths.shell, paths.config,
		       cfg->policy.security_keys, fp);
	rc = GD_EXIT_OK;
done:
	if (rep)
		grantd__v1__reply__free_unpacked(rep, NULL);
	config_free(&cfg);
	return rc;
}
