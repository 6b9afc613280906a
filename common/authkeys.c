/*
 * authkeys.c: authorized_keys lines for sshd (authkeys.h).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "authkeys.h"
#include "config.h"
#include "err.h"
#include "names.h"
#include "banned.h"

int authkeys_beside_me(char *out, size_t len, const char *name)
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
	int w = snprintf(out, len, "%s/%s", self, name);
	return w < 0 || (size_t)w >= len ? GD_EIO : 0;
}

/* A path goes into the command= option, which sshd runs through the git
 * account's shell: allow only characters no shell or sshd gives a meaning
 * to ([A-Za-z0-9/._+-], issue 19 N13), so no quote, space, ';', '$',
 * backquote, '&', '|' or glob can end up in the command line. */
static bool path_ok(const char *p)
{
	return p[0] == '/' &&
	       strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789/._+-") == strlen(p);
}

int authkeys_paths(struct authkeys_paths *out, const char *prog,
		   const char *shell, const char *config)
{
	out->shell = shell;
	out->config = NULL;
	if (!shell) {
		if (authkeys_beside_me(out->shell_buf, sizeof(out->shell_buf),
				       "grant-shell") < 0) {
			fprintf(stderr, "%s: cannot find grant-shell; give "
				"--shell PATH\n", prog);
			return GD_EXIT_USAGE;
		}
		out->shell = out->shell_buf;
	}
	if (config) {
		if (!realpath(config, out->config_buf)) {
			fprintf(stderr, "%s: cannot resolve config path %s\n",
				prog, config);
			return GD_EXIT_USAGE;
		}
		out->config = out->config_buf;
	}
	if (!path_ok(out->shell) || (out->config && !path_ok(out->config))) {
		fprintf(stderr, "%s: paths must be absolute and of the "
			"characters A-Z a-z 0-9 / . _ + - only: %s\n", prog,
			!path_ok(out->shell) ? out->shell : out->config);
		return GD_EXIT_USAGE;
	}
	return 0;
}

bool authkeys_is_sk(const char *key)
{
	static const char *types[] = { "sk-ssh-ed25519@openssh.com ",
				       "sk-ecdsa-sha2-nistp256@openssh.com " };

	for (size_t i = 0; i < GD_ARRAY_SIZE(types); i++)
		if (!strncmp(key, types[i], strlen(types[i])))
			return true;
	return false;
}

bool authkeys_fp_ok(const char *fp)
{
	size_t n = fp ? strlen(fp) : 0;

	return n > 7 && n <= 100 && !strncmp(fp, "SHA256:", 7) &&
	       strspn(fp + 7, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
			      "vwxyz0123456789+/=") == n - 7;
}

void authkeys_print(FILE *fp, char *text, const char *shell,
		    const char *config, enum config_sk sk, const char *key_fp)
{
	bool with_fp = authkeys_fp_ok(key_fp);

	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n'), *tab = strchr(line, '\t');
		if (nl)
			*nl = '\0';
		if (tab && (!nl || tab < nl)) {
			*tab = '\0';
			bool is_sk = authkeys_is_sk(tab + 1);
			bool pin = is_sk && sk == CONFIG_SK_PIN;
			if (name_user_ok(line))
				fprintf(fp, "command=\"%s%s%s%s%s%s %s\",no-pty,"
					"no-port-forwarding,"
					"no-agent-forwarding,"
					"no-X11-forwarding%s %s\n",
					shell, with_fp ? " --key-fp " : "",
					with_fp ? key_fp : "",
					config ? " --config " : "",
					config ? config : "",
					!is_sk ? "" :
					pin    ? " --key-kind sk-pin" :
						 " --key-kind sk-touch",
					line, pin ? ",verify-required" : "",
					tab + 1);
		}
		line = nl ? nl + 1 : NULL;
	}
}

void authkeys_usage(FILE *fp)
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
"  --version      print the version and exit\n"
"\n"
"With FINGERPRINT it asks the node's keys socket (keys_socket in [node]);\n"
"without, it runs grant-keys-list (beside it), which asks the user socket.\n"
"\n"
"A security key's line (sk-ssh-ed25519@openssh.com,\n"
"sk-ecdsa-sha2-nistp256@openssh.com) runs grant-shell --key-kind sk-touch\n"
"(sshd checks the touch); with security_keys = pin in [policy], --key-kind\n"
"sk-pin and the option verify-required (sshd checks the PIN too).  The node\n"
"counts such a push as two factors unless security_keys = off.\n"
"\n"
"Exit status: 0 done (nothing printed: no such key, sshd refuses it),\n"
"2 usage error, 3 node unreachable, 4 the node failed to decide (3 and 4:\n"
"nothing printed, a server problem said on stderr).\n",
		CONFIG_DEFAULT_PATH);
}
