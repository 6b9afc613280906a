/*
 * grant-keys: sshd's AuthorizedKeysCommand for the git account.
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

#include "cli.h"
#include "config.h"
#include "err.h"
#include "names.h"
#include "wire.h"
#include "banned.h"

static const char prog[] = "grant-keys";

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: grant-keys [--config FILE] [--shell PATH] [ACCOUNT [FINGERPRINT]]\n"
"\n"
"sshd AuthorizedKeysCommand: print the forced-command authorized_keys line\n"
"(command=\"grant-shell USER\") of the user whose SSH key has FINGERPRINT\n"
"(sshd's %%f, SHA256:...), or nothing when no active user has that key;\n"
"without FINGERPRINT, a line for every active user's every key.  ACCOUNT\n"
"(sshd's %%u, the git account) is not looked at.  Use it in sshd_config\n"
"for the git account:\n"
"\n"
"  Match User git\n"
"      AuthorizedKeysCommand /usr/bin/grant-keys --config /etc/grantd/grantd.conf %%u %%f\n"
"      AuthorizedKeysCommandUser git\n"
"\n"
"  --config FILE  configuration (default $GRANTD_CONFIG, then %s);\n"
"                 passed on to grant-shell in every line\n"
"  --shell PATH   grant-shell to name (default: beside this program)\n"
"  -h, --help     this text\n"
"\n"
"Exit status: 0 done, 2 usage error, 3 node unreachable, 4 the node failed\n"
"to decide (3 and 4: nothing printed, a server problem said on stderr).\n",
		CONFIG_DEFAULT_PATH);
}

static int shell_beside_me(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return GD_EIO;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return GD_EIO;
	*slash = '\0';
	int w = snprintf(out, len, "%s/grant-shell", self);
	return w < 0 || (size_t)w >= len ? GD_EIO : 0;
}

/* A path is put between double quotes in the command= option: refuse
 * anything that could end the quotes or the line. */
static bool path_ok(const char *p)
{
	return p[0] == '/' && !strpbrk(p, "\"\\\n\r ");
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL, *shell = NULL, *fp = NULL;
	char shell_buf[PATH_MAX], cfg_abs[PATH_MAX];
	Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;
	Grantd__V1__Reply *rep = NULL;
	struct config *cfg = NULL;
	int i = 1, rc;

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
	if (!shell) {
		if (shell_beside_me(shell_buf, sizeof(shell_buf)) < 0) {
			fprintf(stderr, "%s: cannot find grant-shell; give "
				"--shell PATH\n", prog);
			return GD_EXIT_USAGE;
		}
		shell = shell_buf;
	}
	if (cfg_path && !realpath(cfg_path, cfg_abs)) {
		fprintf(stderr, "%s: cannot resolve config path %s\n", prog,
			cfg_path);
		return GD_EXIT_USAGE;
	}
	if (!path_ok(shell) || (cfg_path && !path_ok(cfg_abs))) {
		fprintf(stderr, "%s: paths must be absolute, without spaces or "
			"quotes\n", prog);
		return GD_EXIT_USAGE;
	}
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
	for (char *line = rep->out; line && *line;) {
		char *nl = strchr(line, '\n'), *tab = strchr(line, '\t');
		if (nl)
			*nl = '\0';
		if (tab) {
			*tab = '\0';
			if (name_user_ok(line))
				printf("command=\"%s%s%s %s\",no-pty,"
				       "no-port-forwarding,no-agent-forwarding,"
				       "no-X11-forwarding %s\n",
				       shell, cfg_path ? " --config " : "",
				       cfg_path ? cfg_abs : "", line, tab + 1);
		}
		line = nl ? nl + 1 : NULL;
	}
	rc = GD_EXIT_OK;
done:
	if (rep)
		grantd__v1__reply__free_unpacked(rep, NULL);
	config_free(&cfg);
	return rc;
}
