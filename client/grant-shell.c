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
 *
 * Beside gitolite (docs/gitolite.md) it is also gitolite's `2fa` command
 * (--gitolite: the user is GL_USER, the words come after "--") and its
 * VREF/2fa (--gitolite-vref: gitolite decided who may write; the node's
 * vref.check says whether the 2-factor part allows it).
 */
#include <errno.h>
#include <qrencode.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"
#include "authkeys.h"
#include "cli.h"
#include "config.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "sshcmd.h"
#include "wire.h"
#include "version.h"
#include "banned.h"

static const char prog[] = "grant-shell";

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: grant-shell [--config FILE] [--key-kind KIND] [--key-fp FP] USER\n"
"       grant-shell --gitolite [--config FILE] -- [WORD...]\n"
"       grant-shell --gitolite-vref [--config FILE] -- REF OLD NEW OLDTREE\n"
"                   NEWTREE ACCESS VREF [ARG...]\n"
"\n"
"The SSH forced command for git users: runs the command in\n"
"SSH_ORIGINAL_COMMAND for USER, from the client address in SSH_CONNECTION.\n"
"Install it through grant-keys (sshd AuthorizedKeysCommand), which writes\n"
"command=\"grant-shell USER\" lines.\n"
"\n"
"Beside gitolite, gitolite's LOCAL_CODE (PREFIX/share/grantd/gitolite)\n"
"runs it in one of two modes.  Both take the user from GL_USER and the\n"
"client address from SSH_CONNECTION, as gitolite sets them.  \"--\" ends\n"
"the options: no word after it is ever taken as one.\n"
"\n"
"  --gitolite     gitolite's 2fa command (commands/2fa): WORD... are what\n"
"                 the user typed after \"ssh git@HOST 2fa\".  The same\n"
"                 subcommands, output and exit status as \"2fa\" in the\n"
"                 forced command; no WORD prints the help.  A gitolite\n"
"                 user name that is not a grantd one ([a-z_] then up to\n"
"                 63 of [a-z0-9_.-]) cannot use 2-factor authentication:\n"
"                 one line, exit 2.  Any gitolite user may enroll.\n"
"  --gitolite-vref\n"
"                 gitolite's VREF (VREF/2fa), with the arguments gitolite\n"
"                 gives a VREF; GL_REPO names the repository.  VREF is\n"
"                 VREF/2fa (2-factor required: the user must be enrolled\n"
"                 and have validated the address, as by 2fa val) or\n"
"                 VREF/2fa/optin (required of enrolled users only); any\n"
"                 other denies.  Allowed: exit 0, silent.  Refused: the\n"
"                 reason, then \"VREF: how to fix it\", on stdout, exit 1;\n"
"                 gitolite denies the push with its FATAL line and shows\n"
"                 the fix.  Everything it prints goes to stdout, which\n"
"                 gitolite shows in order.  No answer from the node denies\n"
"                 (exit 1), for VREF/2fa/optin too.\n"
"\n"
"  --config FILE  configuration (default $GRANTD_CONFIG, then %s)\n"
"  --key-kind KIND\n"
"                 the kind of SSH key USER logged in with, as grant-keys\n"
"                 writes it in the line sshd picked for that key: plain\n"
"                 (the default), sk-touch (a security key, sshd checked\n"
"                 the touch) or sk-pin (and the PIN: verify-required).\n"
"                 The node counts a push over a security key as two\n"
"                 factors unless [policy] security_keys = off (with pin,\n"
"                 only sk-pin); 2fa isval and refusals say which factors\n"
"                 were seen.\n"
"  --key-fp FP    the fingerprint of that key (SHA256:..., sshd's %%f), as\n"
"                 grant-keys writes it in the line: a push records it in\n"
"                 the push log.  A push hands the hook the user, address,\n"
"                 key and what allowed the push in GRANTD_PUSH_USER,\n"
"                 GRANTD_PUSH_IP, GRANTD_PUSH_KEY_FP, GRANTD_PUSH_KEY_KIND\n"
"                 and GRANTD_PUSH_FACTOR (grant-hook(8)).\n"
"  -h, --help     this text\n"
"  --version      print the version and exit\n"
"\n"
"Exit status: 0 done, 1 refused, 2 usage or input error, 3 node unreachable,\n"
"4 the node failed to decide.  On 3 and 4 nothing is allowed (fail closed)\n"
"and the user is told it is a server problem.  --gitolite-vref exits 0\n"
"(allowed), 1 (refused, or the node could not decide) or 2 (bad\n"
"arguments): gitolite denies on any but 0.\n",
		CONFIG_DEFAULT_PATH);
}

/* The name users ssh to, for the texts they read: [node] host, else the
 * machine's name (as the node does).  cfg may be NULL (not read yet). */
static const char *host_name(const struct config *cfg)
{
	static char name[256];

	if (cfg && cfg->host)
		return cfg->host;
	if (gethostname(name, sizeof(name) - 1) < 0 || !*name)
		return "HOST";
	return name;
}

static void help_2fa(const struct config *cfg)
{
	printf("2-factor authentication commands (ssh %s 2fa COMMAND):\n\n",
	       host_name(cfg));
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
	const char *key_kind;   /* --key-kind; NULL: not known (gitolite) */
	const char *key_fp;     /* --key-fp; NULL: not known */
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
	req.key_kind = (char *)cx->key_kind;
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
		help_2fa(cx->cfg);
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

/* What the post-receive hook (grant-hook) puts in the push log: who
 * pushed, from where, with which key, and what allowed it.  Set here, from
 * what sshd and the node said, never from the client's environment. */
static void push_env(const struct ctx *cx, const char *factor)
{
	static const struct {
		const char *name;
		size_t off;
	} vars[] = {
		{ "GRANTD_PUSH_USER", offsetof(struct ctx, user) },
		{ "GRANTD_PUSH_IP", offsetof(struct ctx, ip) },
		{ "GRANTD_PUSH_KEY_FP", offsetof(struct ctx, key_fp) },
		{ "GRANTD_PUSH_KEY_KIND", offsetof(struct ctx, key_kind) },
	};

	for (size_t i = 0; i < GD_ARRAY_SIZE(vars); i++) {
		const char *v = *(const char *const *)((const char *)cx +
						       vars[i].off);
		if (v && *v)
			setenv(vars[i].name, v, 1);
		else
			unsetenv(vars[i].name);
	}
	if (factor && *factor)
		setenv("GRANTD_PUSH_FACTOR", factor, 1);
	else
		unsetenv("GRANTD_PUSH_FACTOR");
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
			if (push)
				push_env(cx, rep->factor);
			grantd__v1__reply__free_unpacked(rep, NULL);
			log_auth("user=%s host=%s command=%s repo=%s key=%s "
				 "result=ok", cx->user, cx->ip, words[0],
				 logname, cx->key_kind ? cx->key_kind : "-");
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
	log_auth("user=%s host=%s command=%s repo=%s key=%s result=%s",
		 cx->user, cx->ip, words[0], logname,
		 cx->key_kind ? cx->key_kind : "-", result_word(rc));
	return rc;
}

/* The client address (field 1 of SSH_CONNECTION) into cx->ip and the
 * session key into cx->session; false when SSH_CONNECTION is not set. */
static bool connection(struct ctx *cx)
{
	static char ipbuf[ADDR_STRLEN];
	const char *conn = getenv("SSH_CONNECTION");

	if (!conn || sscanf(conn, "%63s", ipbuf) != 1)
		return false;
	cx->ip = ipbuf;
	/* the whole connection (and the logind session): a val-session grant
	 * covers no other connection; none if it cannot be formed */
	sshcmd_session(cx->session, sizeof(cx->session), conn,
		       getenv("XDG_SESSION_ID"));
	return true;
}

/* ---- gitolite ----------------------------------------------------------- */

#define BAD_GL_USER                                                            \
	"user name '%.64s' cannot use 2-factor authentication here (grantd "   \
	"user names are [a-z_][a-z0-9_.-]*)"

/* gitolite's `2fa WORD...` (commands/2fa): run_2fa for GL_USER. */
static int run_gitolite(struct ctx *cx, const char *cfg_path, char **words,
			int n)
{
	const char *user = getenv("GL_USER");
	char *w[SSHCMD_MAX_WORDS];
	size_t len = 0;
	int rc;

	if (!user || !*user) {
		fprintf(stderr, "2fa: please run me through gitolite (GL_USER "
			"is not set)\n");
		return GD_EXIT_USAGE;
	}
	if (!name_user_ok(user)) {
		fprintf(stderr, "2fa: " BAD_GL_USER "\n", user);
		log_auth("user=(invalid) command=2fa result=bad-input");
		return GD_EXIT_USAGE;
	}
	cx->user = user;
	if (!connection(cx)) {
		fprintf(stderr, "2fa: this only works when accessed over SSH "
			"(SSH_CONNECTION is not set)\n");
		return GD_EXIT_USAGE;
	}
	/* the bounds of the forced command's SSH_ORIGINAL_COMMAND */
	for (int k = 0; k < n; k++)
		len += strlen(words[k]) + 1;
	if (len > SSHCMD_MAX_LEN) {
		fprintf(stderr, "2fa: command too long\n");
		return GD_EXIT_USAGE;
	}
	if (n + 1 > SSHCMD_MAX_WORDS) {
		fprintf(stderr, "2fa: too many words; run '2fa help' for the "
			"commands\n");
		return GD_EXIT_USAGE;
	}
	w[0] = "2fa";
	for (int k = 0; k < n; k++)
		w[k + 1] = words[k];
	if ((rc = cli_load_config(&cx->cfg, prog, cfg_path)) != 0)
		return rc;
	return run_2fa(cx, w, n + 1);
}

/* A VREF's refusal: the reason (may be NULL), then "REFEX: hint", which
 * gitolite takes as a denied ref: it dies with its FATAL line and hint as
 * the message.  Lines after it would be lost (gitolite dies reading it). */
static int vref_deny(const char *refex, const char *why, const char *hint)
{
	if (why && *why)
		printf("%s\n", why);
	printf("%s: %s\n", refex, hint);
	return GD_EXIT_REFUSED;
}

/* The node's refusal in err ("why\nhint", or one line): all lines but the
 * last as they are, the last as the VREF's denial. */
static int vref_deny_reply(const char *refex, const char *err)
{
	const char *last, *end;

	if (!err || !*err)
		return vref_deny(refex, NULL, "2-factor verification failed");
	end = err + strlen(err);
	while (end > err && end[-1] == '\n')
		end--;
	last = end;
	while (last > err && last[-1] != '\n')
		last--;
	if (last > err)
		printf("%.*s\n", (int)(last - 1 - err), err);
	printf("%s: %.*s\n", refex, (int)(end - last), last);
	return GD_EXIT_REFUSED;
}

/* gitolite's VREF/2fa and VREF/2fa/optin (VREF/2fa): words are REF OLD
 * NEW OLDTREE NEWTREE ACCESS VREF [ARG...]. */
static int run_vref(struct ctx *cx, const char *cfg_path, char **words,
		    int n)
{
	const char *refex, *mode, *user = getenv("GL_USER");
	const char *glrepo = getenv("GL_REPO");
	char logname[NAME_REPO_MAX + 1];
	Grantd__V1__Reply *rep = NULL;
	char *args[2];
	size_t nargs = 1;
	int rc, res;

	if (n < 7) {
		printf("grant-shell: --gitolite-vref wants REF OLD NEW OLDTREE "
		       "NEWTREE ACCESS VREF [ARG...], as gitolite runs a VREF "
		       "(see grant-shell --help)\n");
		return GD_EXIT_USAGE;
	}
	refex = words[6];
	if (!strcmp(refex, "VREF/2fa"))
		mode = "required";
	else if (!strcmp(refex, "VREF/2fa/optin"))
		mode = "optin";
	else
		return vref_deny(refex, NULL, "unknown 2-factor VREF (use "
				 "VREF/2fa or VREF/2fa/optin in the gitolite "
				 "conf)");
	if (!user || !*user)
		return vref_deny(refex, "please run me from gitolite hooks "
				 "(GL_USER is not set)",
				 "2-factor verification could not be done");
	if (!connection(cx))
		return vref_deny(refex, "this only works when accessed over "
				 "SSH (SSH_CONNECTION is not set)",
				 "2-factor verification could not be done");
	if (!glrepo || name_repo_norm(logname, sizeof(logname), glrepo) < 0)
		snprintf(logname, sizeof(logname), "(invalid)");
	if (!name_user_ok(user)) {
		log_auth("user=(invalid) host=%s command=vref repo=%s mode=%s "
			 "result=%s", cx->ip, logname, mode,
			 strcmp(mode, "optin") ? "refused" : "ok");
		/* such a user cannot enroll: only "required" stops them */
		if (!strcmp(mode, "optin"))
			return GD_EXIT_OK;
		char why[256];
		snprintf(why, sizeof(why), BAD_GL_USER, user);
		return vref_deny(refex, why, "2-factor authentication is "
				 "required here; ask an administrator");
	}
	cx->user = user;
	if ((res = cli_load_config(&cx->cfg, prog, cfg_path)) != 0) {
		rc = vref_deny(refex, NULL, "2-factor verification could not "
			       "be done (a server problem); tell the "
			       "administrators");
		goto done;
	}
	args[0] = (char *)mode;
	if (glrepo && *glrepo)
		args[nargs++] = (char *)glrepo;
	/* fails closed: a server problem (said by ask) denies, optin too */
	if ((res = ask(cx, &rep, "vref.check", args, nargs)) != 0)
		rc = vref_deny(refex, NULL, "2-factor verification could not "
			       "be done; try again later");
	else if ((res = rep->status) != GD_EXIT_OK)
		rc = vref_deny_reply(refex, rep->err);
	else
		rc = GD_EXIT_OK;
	if (rep)
		grantd__v1__reply__free_unpacked(rep, NULL);
done:
	log_auth("user=%s host=%s command=vref repo=%s mode=%s result=%s",
		 user, cx->ip, logname, mode, result_word(res));
	return rc;
}

/* --gitolite / --gitolite-vref: take the mode flag out of the options
 * before "--" (cli_options sees the rest), and find "--".  *mode stays
 * NULL without one; then argv is left alone.  Returns -1, or an exit code
 * after saying what was wrong. */
static int gitolite_options(int *argc, char **argv, const char **mode,
			    int *words)
{
	int k, out = 1;

	*mode = NULL;
	for (k = 1; k < *argc && strcmp(argv[k], "--"); k++)
		if (!strcmp(argv[k], "--gitolite") ||
		    !strcmp(argv[k], "--gitolite-vref"))
			*mode = argv[k];
	if (!*mode)
		return -1;
	if (k == *argc) {
		fprintf(stderr, "%s: %s needs \"--\" before the words "
			"(see %s --help)\n", prog, *mode, prog);
		return GD_EXIT_USAGE;
	}
	*words = k + 1;
	for (int j = 1; j < k; j++) {
		if (!strcmp(argv[j], "--gitolite") ||
		    !strcmp(argv[j], "--gitolite-vref")) {
			if (strcmp(argv[j], *mode)) {
				fprintf(stderr, "%s: --gitolite and "
					"--gitolite-vref exclude each other\n",
					prog);
				return GD_EXIT_USAGE;
			}
			continue;
		}
		argv[out++] = argv[j];
	}
	*argc = out; /* the options before "--", without the mode */
	return -1;
}

/* The user name (sshd's command line) and the key's --key-kind and
 * --key-fp: GD_EXIT_OK, or GD_EXIT_USAGE (said). */
static int
args_check(const char *user, const char *key_kind, const char *key_fp)
{
	if (!name_user_ok(user)) {
		fprintf(stderr,
		        "%s: bad user name '%s': use a lower-case "
		        "letter or '_' then up to 63 of [a-z0-9_.-]\n",
		        prog, user);
		return GD_EXIT_USAGE;
	}
	if (strcmp(key_kind, "plain") && strcmp(key_kind, "sk-touch") &&
	    strcmp(key_kind, "sk-pin")) {
		fprintf(stderr,
		        "%s: bad --key-kind '%s': use plain, sk-touch "
		        "or sk-pin\n",
		        prog, key_kind);
		return GD_EXIT_USAGE;
	}
	if (key_fp && !authkeys_fp_ok(key_fp)) {
		fprintf(stderr,
		        "%s: bad --key-fp '%.80s': want SHA256:... as "
		        "sshd gives it for %%f\n",
		        prog, key_fp);
		return GD_EXIT_USAGE;
	}
	return GD_EXIT_OK;
}

/* `ssh HOST` with no command: the greeting and the 2fa help. */
static int greet(struct ctx *cx, const char *cfg_path)
{
	struct buf err = BUF_INIT;

	printf("Hi %s! You have reached the git service; interactive "
	       "logins are not offered.\n\n",
	       cx->user);
	/* the greeting needs no node: a config that does not load just
	 * leaves the machine's name in the help */
	if (config_load(&cx->cfg, cfg_path ? cfg_path : config_default_path(),
	                &err) < 0)
		cx->cfg = NULL;
	buf_free(&err);
	help_2fa(cx->cfg);
	config_free(&cx->cfg);
	return GD_EXIT_OK;
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL, *glmode, *key_kind = "plain";
	const char *key_fp = NULL;
	const struct cli_opt extra[] = { { "--key-kind", &key_kind },
					 { "--key-fp", &key_fp },
					 { NULL, NULL } };
	struct ctx cx = { 0 };
	static struct sshcmd sc;
	int i = 1, rc, nopt = argc, words = argc;

	if (argc > 1 && !strcmp(argv[1], "--version")) {
		printf("%s %s\n", prog, GRANTD_VERSION);
		return GD_EXIT_OK;
	}
	if ((rc = gitolite_options(&nopt, argv, &glmode, &words)) >= 0)
		return rc;
	if (glmode && !strcmp(glmode, "--gitolite-vref")) {
		/* one stream: gitolite prints a VREF's stdout in order,
		 * before its FATAL line; stderr would race it */
		if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
			return GD_EXIT_USAGE;
		setvbuf(stdout, NULL, _IOLBF, 0);
	}
	rc = cli_options(nopt, argv, &i, prog, usage, &cfg_path,
			 glmode ? NULL : extra);
	if (rc >= 0)
		return rc;
	if (glmode && i != nopt) {
		fprintf(stderr, "%s: unexpected '%s' before \"--\" (see %s "
			"--help)\n", prog, argv[i], prog);
		return GD_EXIT_USAGE;
	}
	if (glmode) {
		log_init("grant-shell", false, LOG_LVL_INFO);
		if (!strcmp(glmode, "--gitolite"))
			rc = run_gitolite(&cx, cfg_path, argv + words,
					  argc - words);
		else
			rc = run_vref(&cx, cfg_path, argv + words,
				      argc - words);
		config_free(&cx.cfg);
		return rc;
	}
	if (argc - i != 1) {
		usage(stderr);
		return GD_EXIT_USAGE;
	}
	if ((rc = args_check(argv[i], key_kind, key_fp)) != GD_EXIT_OK)
		return rc;
	cx.user = argv[i];
	cx.key_kind = key_kind;
	cx.key_fp = key_fp;
	log_init("grant-shell", false, LOG_LVL_INFO);

	if (!connection(&cx)) {
		fprintf(stderr, "%s: this only works when accessed over SSH "
			"(SSH_CONNECTION is not set)\n", prog);
		return GD_EXIT_USAGE;
	}

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
	if (sc.kind == SSHCMD_EMPTY)
		return greet(&cx, cfg_path);
	if ((rc = cli_load_config(&cx.cfg, prog, cfg_path)) != 0)
		goto done;
	if (sc.kind == SSHCMD_2FA)
		rc = run_2fa(&cx, sc.words, sc.n);
	else if (sc.kind == SSHCMD_PUSH || sc.kind == SSHCMD_FETCH)
		rc = run_git(&cx, sc.words, sc.n);
	else if (sc.kind == SSHCMD_HELP) {
		help_2fa(cx.cfg);
		rc = GD_EXIT_OK;
	} else {
		fprintf(stderr, "Unknown command '%s'. Use git push/fetch, or "
			"'ssh %s 2fa help' for the 2fa commands.\n",
			sc.words[0], host_name(cx.cfg));
		log_auth("user=%s host=%s command=unknown result=bad-input",
			 cx.user, cx.ip);
		rc = GD_EXIT_USAGE;
	}
done:
	config_free(&cx.cfg);
	return rc;
}
