/*
 * grant-shell: the SSH forced command (command="grant-shell USER" in the
 * git account's authorized keys, written by grant-keys).
 *
 * It reads SSH_ORIGINAL_COMMAND and SSH_CONNECTION, asks the node, and
 * either prints the answer (the `2fa` commands, with kernel.org's syntax)
 * or execs git-receive-pack / git-upload-pack on the repository the node
 * named.  It fails closed: no answer from the node, or an answer that it
 * failed to decide, means no push and a "server problem" message.  Every
 * outcome goes to syslog (facility auth) as user=... host=... result=...,
 * never with the token.
 */
#include <errno.h>
#include <qrencode.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"
#include "cli.h"
#include "config.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "sshcmd.h"
#include "wire.h"
#include "banned.h"

static const char prog[] = "grant-shell";

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: grant-shell [--config FILE] USER\n"
"\n"
"The SSH forced command for git users: runs the command in\n"
"SSH_ORIGINAL_COMMAND for USER, from the client address in SSH_CONNECTION.\n"
"Install it through grant-keys (sshd AuthorizedKeysCommand), which writes\n"
"command=\"grant-shell USER\" lines.\n"
"\n"
"  --config FILE  configuration (default $GRANTD_CONFIG, then %s)\n"
"  -h, --help     this text\n"
"\n"
"Exit status: 0 done, 1 refused, 2 usage or input error, 3 node unreachable,\n"
"4 the node failed to decide.  On 3 and 4 nothing is allowed (fail closed)\n"
"and the user is told it is a server problem.\n",
		CONFIG_DEFAULT_PATH);
}

static void help_2fa(void)
{
	printf("2-factor authentication commands (ssh HOST 2fa COMMAND):\n\n");
	cli_2fa_help(stdout);
	printf("\nTOKEN is the 6 or 8 digits your token shows, or an 8-digit "
	       "scratch code.\n");
}

/* Draw the otpauth URI as a QR code with half-block characters, light
 * modules as blocks (reads on dark and light terminals alike, as
 * `qrencode -t UTF8`). */
static void draw_qr(const char *uri)
{
	QRcode *qr = QRcode_encodeString(uri, 0, QR_ECLEVEL_L, QR_MODE_8, 1);
	const int margin = 2;

	if (!qr) {
		printf("(cannot draw a QR code: %s; type the secret above "
		       "into your app instead)\n", strerror(errno));
		return;
	}
	int w = qr->width, full = w + 2 * margin;
#define DARK(x, y)                                                            \
	((x) >= margin && (x) < margin + w && (y) >= margin &&                 \
	 (y) < margin + w && (qr->data[((y)-margin) * w + (x)-margin] & 1))
	for (int y = 0; y < full; y += 2) {
		for (int x = 0; x < full; x++) {
			bool top = DARK(x, y);
			bool bot = y + 1 < full ? DARK(x, y + 1) : false;
			fputs(top && bot ? " " : top ? "\u2584" :
					    bot ? "\u2580" : "\u2588",
			      stdout);
		}
		fputc('\n', stdout);
	}
#undef DARK
	QRcode_free(qr);
}

struct ctx {
	const char *user;
	const char *ip;
	char session[SSHCMD_SESSION_MAX + 1];
	struct config *cfg;
};

static int ask(struct ctx *cx, Grantd__V1__Reply **rep, const char *cmd,
	       char **args, size_t nargs)
{
	Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;

	req.cmd = (char *)cmd;
	req.user = (char *)cx->user;
	req.client_ip = (char *)cx->ip;
	req.session = cx->session[0] ? cx->session : NULL;
	req.args = args;
	req.n_args = nargs;
	return cli_call_user(rep, prog, cx->cfg->user_socket, &req);
}

static const char *result_word(int rc)
{
	return rc == GD_EXIT_OK ? "ok" : rc == GD_EXIT_REFUSED ? "refused" :
	       rc == GD_EXIT_USAGE ? "bad-input" :
	       rc == GD_EXIT_UNREACHABLE ? "node-unreachable" : "node-error";
}

static int run_2fa(struct ctx *cx, char **words, int n)
{
	const struct gd_2fa_cmd *sub;
	Grantd__V1__Reply *rep = NULL;
	int rc;

	if (n < 2 || !strcmp(words[1], "help")) {
		help_2fa();
		return GD_EXIT_OK;
	}
	if (!(sub = cli_2fa_find(words[1]))) {
		fprintf(stderr, "Unknown 2fa command '%s'. Run '2fa help' for "
			"the list.\n", words[1]);
		log_auth("user=%s host=%s command=2fa result=bad-input",
			 cx->user, cx->ip);
		return GD_EXIT_USAGE;
	}
	/* kernel.org's messages for a missing token or address */
	if (sub->missing && n == 2) {
		fputs(sub->missing, stderr);
		return GD_EXIT_USAGE;
	}
	rc = ask(cx, &rep, sub->request, words + 2, (size_t)n - 2);
	if (rc == 0) {
		rc = cli_print(rep);
		if (rep->otpauth_uri && *rep->otpauth_uri) {
			printf("\nScan this QR code with your authenticator "
			       "app (FreeOTP, Google Authenticator, Authy):\n");
			draw_qr(rep->otpauth_uri);
		}
		grantd__v1__reply__free_unpacked(rep, NULL);
	}
	log_auth("user=%s host=%s command=2fa-%s result=%s", cx->user, cx->ip,
		 words[1], result_word(rc));
	return rc;
}

static int run_git(struct ctx *cx, char **words, int n)
{
	bool push = !strcmp(words[0], "git-receive-pack");
	char logname[NAME_REPO_MAX + 1];
	Grantd__V1__Reply *rep = NULL;
	int rc;

	if (n != 2) {
		fprintf(stderr, "usage: %s 'REPOSITORY'\n", words[0]);
		return GD_EXIT_USAGE;
	}
	/* what reaches syslog: the checked name, never raw input */
	if (name_repo_norm(logname, sizeof(logname), words[1]) < 0)
		snprintf(logname, sizeof(logname), "(invalid)");
	rc = ask(cx, &rep, push ? "push.check" : "repo.read", words + 1, 1);
	if (rc == 0) {
		if (rep->status == GD_EXIT_OK && rep->path && *rep->path) {
			char path[4096];
			snprintf(path, sizeof(path), "%s", rep->path);
			grantd__v1__reply__free_unpacked(rep, NULL);
			log_auth("user=%s host=%s command=%s repo=%s result=ok",
				 cx->user, cx->ip, words[0], logname);
			execlp(words[0], words[0], path, (char *)NULL);
			log_auth("user=%s host=%s command=%s repo=%s "
				 "result=node-error cannot run: %s", cx->user,
				 cx->ip, words[0], logname, strerror(errno));
			fprintf(stderr, "%s: server problem: cannot run %s; "
				"please try again later, and tell the "
				"administrators if it persists.\n", prog,
				words[0]);
			return GD_EXIT_INTERNAL;
		}
		if (rep->err && *rep->err)
			fprintf(stderr, "%s%s", rep->err,
				rep->err[strlen(rep->err) - 1] == '\n' ? "" : "\n");
		rc = rep->status ? rep->status : GD_EXIT_REFUSED;
		grantd__v1__reply__free_unpacked(rep, NULL);
	}
	log_auth("user=%s host=%s command=%s repo=%s result=%s", cx->user,
		 cx->ip, words[0], logname, result_word(rc));
	return rc;
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL;
	struct ctx cx = { 0 };
	static struct sshcmd sc;
	int i = 1, rc;

	rc = cli_options(argc, argv, &i, prog, usage, &cfg_path, NULL);
	if (rc >= 0)
		return rc;
	if (argc - i != 1) {
		usage(stderr);
		return GD_EXIT_USAGE;
	}
	if (!name_user_ok(argv[i])) {
		fprintf(stderr, "%s: bad user name '%s': use a lower-case "
			"letter or '_' then up to 63 of [a-z0-9_.-]\n", prog,
			argv[i]);
		return GD_EXIT_USAGE;
	}
	cx.user = argv[i];
	log_init("grant-shell", false, LOG_LVL_INFO);

	const char *conn = getenv("SSH_CONNECTION");
	static char ipbuf[ADDR_STRLEN];
	if (!conn || sscanf(conn, "%63s", ipbuf) != 1) {
		fprintf(stderr, "%s: this only works when accessed over SSH "
			"(SSH_CONNECTION is not set)\n", prog);
		return GD_EXIT_USAGE;
	}
	cx.ip = ipbuf;
	/* the whole connection (and the logind session): a val-session grant
	 * covers no other connection; none if it cannot be formed */
	sshcmd_session(cx.session, sizeof(cx.session), conn,
		       getenv("XDG_SESSION_ID"));

	rc = sshcmd_parse(&sc, getenv("SSH_ORIGINAL_COMMAND"));
	if (rc == GD_ETOOBIG) {
		fprintf(stderr, "%s: command too long\n", prog);
		return GD_EXIT_USAGE;
	}
	if (rc < 0) {
		fprintf(stderr, "%s: cannot parse the command (unbalanced "
			"quotes?)\n", prog);
		return GD_EXIT_USAGE;
	}
	if (sc.kind == SSHCMD_EMPTY) {
		printf("Hi %s! You have reached the git service; interactive "
		       "logins are not offered.\n\n", cx.user);
		help_2fa();
		return GD_EXIT_OK;
	}
	if ((rc = cli_load_config(&cx.cfg, prog, cfg_path)) != 0)
		goto done;
	if (sc.kind == SSHCMD_2FA)
		rc = run_2fa(&cx, sc.words, sc.n);
	else if (sc.kind == SSHCMD_PUSH || sc.kind == SSHCMD_FETCH)
		rc = run_git(&cx, sc.words, sc.n);
	else if (sc.kind == SSHCMD_HELP) {
		help_2fa();
		rc = GD_EXIT_OK;
	} else {
		fprintf(stderr, "Unknown command '%s'. Use git push/fetch, or "
			"'ssh HOST 2fa help' for the 2fa commands.\n",
			sc.words[0]);
		log_auth("user=%s host=%s command=unknown result=bad-input",
			 cx.user, cx.ip);
		rc = GD_EXIT_USAGE;
	}
done:
	config_free(&cx.cfg);
	return rc;
}
