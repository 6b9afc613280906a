/*
 * grantctl: the operator's command.  It talks to the node's admin socket;
 * the node parses and checks every argument (one place for the rules), so
 * this program only finds the config, reads local files the node cannot
 * (--key PUBKEYFILE), and prints the answer.  `keygen` needs no node.
 */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "cli.h"
#include "config.h"
#include "err.h"
#include "import.h"
#include "opsig.h"
#include "keyfile.h"
#include "wire.h"
#include "version.h"
#include "xalloc.h"
#include "banned.h"

static const char prog[] = "grantctl";

/* usage's Node section (rebuild's paragraph made usage too long) */
static const char usage_node[] =
"Node\n"
"  status [--json]                  site, clock, applied operations, peers,\n"
"                                   counts, the state digest, repository\n"
"                                   replication (git: refs pending, packs\n"
"                                   fetched and served) and push conflicts\n"
"                                   kept under refs/grantd/conflicts/\n"
"  verify [--json]                  recompute the state digest from the\n"
"                                   records on disk and compare it with the\n"
"                                   live one (per family); exit 0 equal,\n"
"                                   1 different (naming the families)\n"
"  backup DIR                       a consistent snapshot: the store (RocksDB\n"
"                                   checkpoint, secrets stay sealed) in\n"
"                                   DIR/store, the repositories in DIR/repos;\n"
"                                   restore both and start the node with its\n"
"                                   peers to bring it current\n"
"  rebuild --from SITE [--trust-unsigned]\n"
"                                   fetch everything SITE has that this site\n"
"                                   lacks, repository objects and refs too\n"
"                                   (after a restore from an empty disk or an\n"
"                                   old backup); wipes nothing.\n"
"                                   --trust-unsigned: records written by an\n"
"                                   older release keep no signed operations,\n"
"                                   and a state transfer refuses such a record\n"
"                                   when its origin has a verifier_key, so a\n"
"                                   site rebuilt from an upgraded cluster\n"
"                                   stays behind; with it, the state transfer\n"
"                                   this rebuild starts takes every record of\n"
"                                   SITE without signed operations on SITE's\n"
"                                   word (records with them are still\n"
"                                   checked).  Only from a site you trust,\n"
"                                   after an upgrade, until the old records\n"
"                                   are signed again (docs/operations.md)\n"
"  rekey NEWKEYFILE                 re-seal every stored secret under the\n"
"                                   key pair in NEWKEYFILE (grantctl keygen;\n"
"                                   mode 0600, readable by the node), in one\n"
"                                   atomic write; then set secret_key to it\n"
"                                   and restart the node, and give its new\n"
"                                   public key to every other site\n";

static void usage(FILE *fp)
{
	fputs(
"usage: grantctl [--config FILE] COMMAND [ARGS] [--json]\n"
"\n"
"Administer a grantd node through its admin socket.\n"
"\n"
"Keys\n"
"  keygen FILE                      write a CURVE key pair (FILE, mode 0600);\n"
"                                   prints the public key last (no node needed)\n"
"Users\n"
"  user add NAME [--key PUBKEYFILE]...  add a user, or add keys to one\n"
"                                   (every key of each file, or none)\n"
"  user del NAME                    delete a user, its enrollment and grants\n"
"  user list [--json]\n"
"  user keys NAME [--json]          a user's keys with their SHA256\n"
"                                   fingerprints (as sshd logs them)\n"
"  user key-del NAME FP             remove the user's key FP (SHA256:...)\n"
"  unlock NAME                      clear a lockout after failed tokens\n"
"Enrollment\n"
"  enroll NAME (--totp|--hotp) [--secret-file FILE|- | --secret BASE32]\n"
"         [--allow-short-secret] [--digits 6|8] [--counter N] [--period S]\n"
"                                   enroll (active at once); without a secret\n"
"                                   a random 160-bit one is made and shown\n"
"                                   once.  --secret-file reads the base32\n"
"                                   secret from FILE (- : stdin); --secret\n"
"                                   puts it on the command line, which every\n"
"                                   local user can read (ps, /proc): avoid it.\n"
"                                   A given secret needs 128 bits or more;\n"
"                                   --allow-short-secret takes 80 (a token\n"
"                                   migrated from a system that made those)\n"
"  unenroll NAME\n"
"Repositories\n"
"  repo add NAME [--mode off|opt-in|required] [--writer USER]...\n"
"           [--fork-of PARENT]     create a hosted repository (default mode\n"
"                                   required); a bare repository already at\n"
"                                   repo_dir/NAME.git is adopted: its refs\n"
"                                   replicate to every site\n"
"  repo mode NAME MODE\n"
"  repo writers NAME USER...        replace the list of writers\n"
"  repo del NAME                    delete a repository (not one with forks):\n"
"                                   every site moves its directory aside\n"
"  repo rename OLD NEW              rename a repository (not one with forks)\n"
"                                   at every site, keeping its objects\n"
"  repo list [--json]\n"
"Grants\n"
"  grant list [--user NAME] [--json]\n"
"  grant revoke NAME [IP|all]       revoke NAME's grants for IP (address or\n"
"                                   subnet), or all of them; recorded even\n"
"                                   when this site knows no such grant, so it\n"
"                                   also voids grants made earlier at other\n"
"                                   sites that have not arrived yet\n"
"  check USER IP REPO               exit 0 if a push would be allowed now,\n"
"                                   1 and the reason if not\n",
	      fp);
	fputs(usage_node, fp);
	fprintf(fp,
"Migration (docs/migrating.md)\n"
"  import gitolite-2fa [--dry-run] DIR\n"
"                                   users, enrollments (used tokens stay\n"
"                                   used) and live grants from kernel.org's\n"
"                                   2fa files (DIR: $GL_ADMIN_BASE/2fa)\n"
"  import gitolite-keydir [--dry-run] DIR\n"
"                                   users and SSH keys from a gitolite keydir\n"
"                                   (a file it cannot read is named and\n"
"                                   skipped: exit 5)\n"
"Push log\n"
"  log [--repo R] [--user U] [--since T] [--max N] [--json]\n"
"                                   the accepted pushes, newest first: time,\n"
"                                   site and entry number, repository, user,\n"
"                                   client address, key fingerprint and kind,\n"
"                                   the factor that allowed it, each ref's old\n"
"                                   and new value (--json: one object per\n"
"                                   line).  T: unix seconds, YYYY-MM-DD\n"
"                                   [THH:MM[:SS]] (UTC) or a duration ago\n"
"                                   (2h); fetched in pages of N (default\n"
"                                   100)\n"
"  log verify [--json]              walk every site's hash chain and check\n"
"                                   each origin's tree and kept checkpoint\n"
"                                   (signature, root, cosignatures, fork\n"
"                                   proofs); exit 0 intact, 1 naming the\n"
"                                   first break (site, entry, what is wrong)\n"
"  log key [--key-file FILE --site SITE [--host HOST]]\n"
"                                   this site's verifier key (NAME+HEXID+\n"
"                                   BASE64), derived from its secret_key: the\n"
"                                   line the other sites set as verifier_key\n"
"                                   of its [peer]; needs no node, needs to\n"
"                                   read the key file\n"
"\n"
"  --config FILE   configuration (default $GRANTD_CONFIG, then %s)\n"
"  -h, --help      this text\n"
"  --version       print the version and exit\n"
"\n"
"Exit status: 0 done, 1 refused, 2 usage or input error, 3 node unreachable,\n"
"4 the node failed to decide (an internal error, the cause in its log;\n"
"nothing was changed), 5 import: done, something skipped (named).\n",
		CONFIG_DEFAULT_PATH);
}

static int keygen(const char *path)
{
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	int fd, rc = GD_EXIT_OK;
	FILE *fp;

	if (zmq_curve_keypair(pub, sec) != 0) {
		fprintf(stderr, "%s: cannot make a key pair: %s\n", prog,
			zmq_strerror(errno));
		return GD_EXIT_REFUSED;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot create %s: %s%s\n", prog, path,
			strerror(errno),
			errno == EEXIST ? " (never overwritten; remove it "
					  "first if you mean it)" : "");
		sodium_memzero(sec, sizeof(sec));
		return GD_EXIT_USAGE;
	}
	fp = fdopen(fd, "w");
	if (!fp || fprintf(fp, "# grantd CURVE key pair (grantctl keygen); "
			   "keep this file secret\n[curve]\npublic-key = "
			   "%s\nsecret-key = %s\n", pub, sec) < 0 ||
	    fflush(fp) != 0 || fsync(fd) != 0) {
		fprintf(stderr, "%s: cannot write %s: %s\n", prog, path,
			strerror(errno));
		rc = GD_EXIT_REFUSED;
	}
	if (fp)
		fclose(fp);
	else
		close(fd);
	sodium_memzero(sec, sizeof(sec));
	if (rc == GD_EXIT_OK)
		printf("wrote key pair to %s\npublic key: %s\n", path, pub);
	return rc;
}

/* `grantctl log key [--key-file FILE --site SITE [--host HOST]]`: this
 * site's verifier key (common/opsig.h), from the config's secret_key,
 * site and host, or from the options (for a site whose config is not
 * here).  Needs no node; needs to read the key file. */
static int log_key(int argc, char **argv, int i, const char *cfg_path)
{
	const char *file = NULL, *site = NULL, *host = NULL;
	struct config *cfg = NULL;
	struct opsig_signer sig;
	struct buf err = BUF_INIT, vkey = BUF_INIT;
	int rc;

	for (; i + 1 < argc; i += 2) {
		const char **dst = !strcmp(argv[i], "--key-file") ? &file :
				   !strcmp(argv[i], "--site")     ? &site :
				   !strcmp(argv[i], "--host")     ? &host :
								    NULL;
		if (!dst)
			break;
		*dst = argv[i + 1];
	}
	if (i != argc || !file != !site) {
		fprintf(stderr, "usage: grantctl log key [--key-file FILE "
			"--site SITE [--host HOST]]\n");
		return GD_EXIT_USAGE;
	}
	if (!file) {
		if ((rc = cli_load_config(&cfg, prog, cfg_path)) != 0)
			return rc;
		file = cfg->secret_key, site = cfg->site, host = cfg->host;
	}
	rc = file ? opsig_signer_load(&sig, file, host, site, &err) : GD_EINVAL;
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", prog,
			file ? err.p : "the config has no secret_key");
		rc = GD_EXIT_USAGE;
	} else {
		opsig_signer_vkey(&vkey, &sig);
		opsig_signer_wipe(&sig);
		printf("%s\n", buf_str(&vkey));
		rc = GD_EXIT_OK;
	}
	buf_free(&vkey);
	buf_free(&err);
	config_free(&cfg);
	return rc;
}

/* Every key of a .pub file, one a line (sent each as its own --key: the
 * node adds them all, or none); NULL on error. */
static char *read_pubkey(const char *path)
{
	const char *why = NULL;
	char *keys = NULL;
	size_t n;

	if (keyfile_load(&keys, &n, path, &why) < 0) {
		fprintf(stderr, "%s: cannot read key file %s: %s\n", prog,
			path, why ? why : strerror(errno));
		return NULL;
	}
	return keys;
}

/* The base32 secret in path ("-": stdin): its first line, without the
 * surrounding blanks; NULL on error.  The caller wipes and frees it. */
static char *read_secret(const char *path)
{
	char line[1024];
	bool in = !strcmp(path, "-");
	FILE *fp = in ? stdin : fopen(path, "r");
	char *s = NULL;

	if (!fp) {
		fprintf(stderr, "%s: cannot read secret file %s: %s\n", prog,
			path, strerror(errno));
		return NULL;
	}
	if (!fgets(line, sizeof(line), fp))
		line[0] = '\0';
	if (!in)
		fclose(fp);
	char *b = line + strspn(line, " \t");
	size_t n = strcspn(b, "\r\n");
	while (n && (b[n - 1] == ' ' || b[n - 1] == '\t'))
		n--;
	if (!n)
		fprintf(stderr, "%s: no secret in %s\n", prog,
			in ? "standard input" : path);
	else
		s = xstrndup(b, n);
	explicit_bzero(line, sizeof(line));
	return s;
}

/* The repositories of a backup: after the store's checkpoint, so refs in
 * the copy are at least as new as the store says (the node reconciles
 * them with its peers when a restored site starts). */
static int copy_repos(const char *repo_dir, const char *dir)
{
	char dst[4200];
	pid_t pid;
	int status;

	snprintf(dst, sizeof(dst), "%s/repos", dir);
	pid = fork();
	if (pid == 0) {
		execlp("cp", "cp", "-a", "--", repo_dir, dst, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "%s: copying %s to %s failed\n", prog,
			repo_dir, dst);
		return GD_EXIT_REFUSED;
	}
	printf("repositories copied to %s\n", dst);
	return GD_EXIT_OK;
}

struct sub {
	const char *word1, *word2; /* e.g. "user" "add"; word2 NULL: none */
	const char *cmd;           /* the node's command name */
};

static const struct sub subs[] = {
	{ "user", "add", "user.add" },     { "user", "del", "user.del" },
	{ "user", "list", "user.list" },   { "unlock", NULL, "unlock" },
	{ "user", "keys", "user.keys" },   { "user", "key-del", "user.key-del" },
	{ "enroll", NULL, "enroll" },      { "unenroll", NULL, "unenroll" },
	{ "repo", "add", "repo.add" },     { "repo", "mode", "repo.mode" },
	{ "repo", "writers", "repo.writers" },
	{ "repo", "del", "repo.del" },     { "repo", "rename", "repo.rename" },
	{ "repo", "list", "repo.list" },   { "grant", "list", "grant.list" },
	{ "grant", "revoke", "grant.revoke" },
	{ "check", NULL, "check" },        { "status", NULL, "status" },
	{ "verify", NULL, "verify" },
	{ "rebuild", NULL, "rebuild" },
	{ "backup", NULL, "backup" },      { "rekey", NULL, "rekey" },
	/* "log verify" matches both: the later row wins */
	{ "log", NULL, "log.page" },       { "log", "verify", "log.verify" },
};

/* The row of argv[i] (and argv[i + 1] for a two-word command); NULL,
 * said, when there is none. */
static const struct sub *sub_find(int argc, char **argv, int i)
{
	const struct sub *sub = NULL;

	for (size_t s = 0; s < GD_ARRAY_SIZE(subs); s++) {
		if (strcmp(subs[s].word1, argv[i]))
			continue;
		if (!subs[s].word2 ||
		    (i + 1 < argc && !strcmp(subs[s].word2, argv[i + 1])))
			sub = &subs[s];
	}
	if (!sub)
		fprintf(stderr, "%s: unknown command '%s%s%s'; see grantctl "
			"--help\n", prog, argv[i],
			i + 1 < argc ? " " : "", i + 1 < argc ? argv[i + 1] : "");
	return sub;
}

/* The words after the command, from argv[i], into *args (room for argc,
 * grown for a key file's keys; *nargs of them) and req's flags; a public
 * key or a secret read from its file.  Returns GD_EXIT_OK, GD_EXIT_USAGE
 * (said), or -1 after --help. */
static int args_take(const struct sub *sub,
                     int argc,
                     char **argv,
                     int i,
                     Grantd__V1__Request *req,
                     char ***argsp,
                     size_t *nargs)
{
	char **args = *argsp;

	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			req->json = req->has_json = 1;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return -1;
		} else if (!strcmp(sub->cmd, "user.add") &&
			   !strcmp(argv[i], "--key")) {
			if (i + 1 == argc) {
				fprintf(stderr, "%s: --key needs a public key "
					"file\n", prog);
				return GD_EXIT_USAGE;
			}
			char *keys = read_pubkey(argv[++i]), *next;
			if (!keys)
				return GD_EXIT_USAGE;
			/* every key of the file, each its own --key */
			for (char *k = keys; k; k = next) {
				if ((next = strchr(k, '\n')))
					*next++ = '\0';
				args = xreallocarray(args,
						     *nargs + 2 + (size_t)argc,
						     sizeof(*args));
				*argsp = args;
				args[(*nargs)++] = xstrdup("--key");
				args[(*nargs)++] = xstrdup(k);
			}
			free(keys);
		} else if (!strcmp(sub->cmd, "enroll") &&
			   (!strcmp(argv[i], "--secret-file") ||
			    !strcmp(argv[i], "--secret"))) {
			if (i + 1 == argc) {
				fprintf(stderr, "%s: %s needs a value\n", prog,
					argv[i]);
				return GD_EXIT_USAGE;
			}
			args[(*nargs)++] = xstrdup("--secret");
			if (!strcmp(argv[i++], "--secret-file")) {
				if (!(args[(*nargs)++] = read_secret(argv[i])))
					return GD_EXIT_USAGE;
			} else {
				args[(*nargs)++] = xstrdup(argv[i]);
				/* shortens its life in /proc/PID/cmdline */
				explicit_bzero(argv[i], strlen(argv[i]));
			}
		} else {
			args[(*nargs)++] = xstrdup(argv[i]);
		}
	}
	return GD_EXIT_OK;
}

/* backup and rekey DIR: the node needs an absolute path (it may run
 * elsewhere).  Returns GD_EXIT_OK or GD_EXIT_USAGE (said). */
static int path_absolute(const struct sub *sub, char **args, size_t nargs)
{
	char cwd[PATH_MAX], *abs;

	if ((strcmp(sub->cmd, "backup") && strcmp(sub->cmd, "rekey")) ||
	    nargs != 1 || args[0][0] == '/')
		return GD_EXIT_OK;
	if (!getcwd(cwd, sizeof(cwd)) ||
	    asprintf(&abs, "%s/%s", cwd, args[0]) < 0) {
		fprintf(stderr, "%s: cannot make %s absolute\n", prog, args[0]);
		return GD_EXIT_USAGE;
	}
	free(args[0]);
	args[0] = abs;
	return GD_EXIT_OK;
}

/* Send req and print the answer; log: the node answers a page at a time,
 * newest first; ask for the next one (--before) until it says there is
 * none.  *argsp and *nargs grow by that; *rep is the last answer. */
static int call_pages(const struct config *cfg,
                      const struct sub *sub,
                      Grantd__V1__Request *req,
                      char ***argsp,
                      size_t *nargs,
                      Grantd__V1__Reply **rep)
{
	char **args = *argsp;
	int rc;

	req->args = args;
	req->n_args = *nargs;
	if ((rc = cli_call(rep, prog, cfg->admin_socket, req)) != 0)
		return rc;
	rc = cli_print(*rep);
	while (rc == GD_EXIT_OK && !strcmp(sub->cmd, "log.page") &&
	       (*rep)->next && *(*rep)->next) {
		char *next = xstrdup((*rep)->next);
		grantd__v1__reply__free_unpacked(*rep, NULL);
		*rep = NULL;
		if (*nargs >= 2 && !strcmp(args[*nargs - 2], "--before")) {
			free(args[*nargs - 1]);
			args[*nargs - 1] = next;
		} else {
			args = *argsp =
			        xreallocarray(args, *nargs + 2, sizeof(*args));
			args[(*nargs)++] = xstrdup("--before");
			args[(*nargs)++] = next;
		}
		req->args = args;
		req->n_args = *nargs;
		if ((rc = cli_call(rep, prog, cfg->admin_socket, req)) != 0)
			return rc;
		rc = cli_print(*rep);
	}
	return rc;
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL;
	struct config *cfg = NULL;
	Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;
	Grantd__V1__Reply *rep = NULL;
	const struct sub *sub = NULL;
	char **args = NULL;
	size_t nargs = 0;
	int i = 1, rc;

	if (argc > 1 && !strcmp(argv[1], "--version")) {
		printf("%s %s\n", prog, GRANTD_VERSION);
		return GD_EXIT_OK;
	}
	rc = cli_options(argc, argv, &i, prog, usage, &cfg_path, NULL);
	if (rc >= 0)
		return rc;
	if (i == argc) {
		usage(stderr);
		return GD_EXIT_USAGE;
	}
	if (!strcmp(argv[i], "keygen")) {
		if (argc - i != 2) {
			fprintf(stderr, "usage: grantctl keygen FILE\n");
			return GD_EXIT_USAGE;
		}
		return keygen(argv[i + 1]);
	}
	if (!strcmp(argv[i], "log") && i + 1 < argc &&
	    !strcmp(argv[i + 1], "key"))
		return log_key(argc, argv, i + 2, cfg_path);
	if (!strcmp(argv[i], "import"))
		return import_main(argc - i - 1, argv + i + 1, prog, cfg_path);
	if (!strcmp(argv[i], "help")) {
		usage(stdout);
		return GD_EXIT_OK;
	}
	if (!(sub = sub_find(argc, argv, i)))
		return GD_EXIT_USAGE;
	i += sub->word2 ? 2 : 1;
	args = xcalloc((size_t)argc, sizeof(*args));
	rc = args_take(sub, argc, argv, i, &req, &args, &nargs);
	if (rc < 0) /* --help */
		rc = GD_EXIT_OK;
	else if (rc == GD_EXIT_OK &&
	         (rc = path_absolute(sub, args, nargs)) == GD_EXIT_OK &&
	         (rc = cli_load_config(&cfg, prog, cfg_path)) == 0) {
		req.cmd = (char *)sub->cmd;
		rc = call_pages(cfg, sub, &req, &args, &nargs, &rep);
	}
	if (rep && rc == GD_EXIT_OK && !strcmp(sub->cmd, "backup") && rep->path)
		rc = copy_repos(rep->path, args[0]);
	if (rep && rep->otpauth_uri && rep->out)
		sodium_memzero(rep->out, strlen(rep->out));
	grantd__v1__reply__free_unpacked(rep, NULL);
	/* an argument may be a secret (enroll --secret, --secret-file) */
	for (size_t k = 0; k < nargs; k++) {
		if (args[k])
			explicit_bzero(args[k], strlen(args[k]));
		free(args[k]);
	}
	free(args);
	config_free(&cfg);
	return rc;
}
