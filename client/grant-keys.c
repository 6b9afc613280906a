/*
 * grant-keys: sshd's AuthorizedKeysCommand for the git account.
 *
 * Given the offered key's fingerprint (sshd's %f), prints the one
 * forced-command line of the user whose key it is, which the node finds
 * in its fingerprint index:
 *
 *   command="/usr/bin/grant-shell --config /etc/grantd/grantd.conf alice",
 *   no-pty,no-port-forwarding,no-agent-forwarding,no-X11-forwarding KEY
 *
 * (one line), or nothing.  grant-shell is named by its absolute path:
 * beside this program unless --shell says otherwise.  Prints nothing and
 * exits 3 when the node cannot be reached, 4 when it failed to decide, so
 * sshd admits no one (fail closed).
 *
 * sshd runs it on every login, so it starts fast: it asks the node's keys
 * socket (node/requests/keysock.h: "FINGERPRINT\n" in, the answer out, a plain
 * unix socket) and links only libc and the config reader (no ZeroMQ, no
 * protobuf; static when the build allows).  Without a FINGERPRINT (every
 * key of every user, a large answer nobody waits for at each login) it
 * runs grant-keys-list beside it, which asks keys.list over the user
 * socket as before.
 *
 * Why it failed (the path, and errno's text) goes to stderr and to syslog
 * (authpriv, as sshd's own lines): sshd throws an AuthorizedKeysCommand's
 * stderr away and logs only "failed, status N", while the user sees
 * "Permission denied (publickey)" whatever the cause.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stdarg.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "authkeys.h"
#include "buf.h"
#include "config.h"
#include "err.h"
#include "version.h"
#include "banned.h"

static const char prog[] = "grant-keys";

#define KEYS_TIMEOUT_MS 15000 /* as the other clients (cli.h) */
#define KEYS_MAX_ANSWER 65536 /* as the node's (keysock.h) */

/* A failure: on stderr, and in the system log where sshd's lines are. */
static void complain(const char *fmt, ...)
        __attribute__((format(printf, 1, 2)));

static void complain(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	openlog(prog, LOG_PID, LOG_AUTHPRIV);
	va_start(ap, fmt);
	vsyslog(LOG_ERR, fmt, ap);
	va_end(ap);
	closelog();
}

/* --config, --shell, -h, --version: as cli_options (cli.c links ZeroMQ).
 * Returns an exit status, or -1 to go on with argv[*next]. */
static int options(int argc, char **argv, int *next, const char **config,
		   const char **shell)
{
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			authkeys_usage(stdout);
			return GD_EXIT_OK;
		}
		if (!strcmp(a, "--version")) {
			printf("%s %s\n", prog, GRANTD_VERSION);
			return GD_EXIT_OK;
		}
		if (!strncmp(a, "--config=", 9))
			*config = a + 9;
		else if (!strcmp(a, "--config") && i + 1 < argc)
			*config = argv[++i];
		else if (!strcmp(a, "--shell") && i + 1 < argc)
			*shell = argv[++i];
		else {
			complain("unknown option or missing value '%s' (see "
			         "%s --help)",
			         a, prog);
			return GD_EXIT_USAGE;
		}
	}
	*next = i;
	return -1;
}

/* Run grant-keys-list with our arguments (no FINGERPRINT). */
static int run_list(char **argv)
{
	char path[PATH_MAX];

	if (authkeys_beside_me(path, sizeof(path), "grant-keys-list") < 0) {
		complain("cannot find grant-keys-list beside this program");
		return GD_EXIT_INTERNAL;
	}
	execv(path, argv);
	complain("cannot run %s: %s", path, strerror(errno));
	return GD_EXIT_INTERNAL;
}

static long ms_left(const struct timespec *end)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long ms = (end->tv_sec - now.tv_sec) * 1000 +
	          (end->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? ms : 0;
}

/* Ask the keys socket at path about fp: the whole answer in *ans.
 * Returns 0, or GD_EUNREACH with why in err. */
static int
ask(const char *path, const char *fp, struct buf *ans, const char **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timespec end;
	char line[256];
	int fd, rc = GD_EUNREACH, n = snprintf(line, sizeof(line), "%s\n", fp);

	*err = "no answer";
	if (strlen(path) >= sizeof(sa.sun_path)) {
		*err = "socket path too long";
		return GD_EUNREACH;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		*err = strerror(errno);
		goto done;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += KEYS_TIMEOUT_MS / 1000;
	/* a line is far below a socket's buffer: one send */
	if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
		*err = strerror(errno);
		goto done;
	}
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char chunk[4096];
		int ready = poll(&p, 1, (int)ms_left(&end));
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0) {
			*err = ready ? strerror(errno) : "timed out";
			goto done;
		}
		ssize_t got = recv(fd, chunk, sizeof(chunk), 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			*err = strerror(errno);
			goto done;
		}
		if (got == 0)
			break;
		if (ans->len + (size_t)got > KEYS_MAX_ANSWER) {
			*err = "answer too long";
			goto done;
		}
		buf_add(ans, chunk, (size_t)got);
	}
	/* the node closes after a whole answer: "" or lines */
	if (ans->len && ans->p[ans->len - 1] != '\n') {
		*err = "answer cut short";
		goto done;
	}
	rc = 0;
done:
	if (fd >= 0)
		close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL, *shell = NULL, *fp, *why;
	char resolved[PATH_MAX];
	struct authkeys_paths paths;
	struct buf err = BUF_INIT, ans = BUF_INIT;
	struct config *cfg = NULL;
	int i = 1, rc;

	if ((rc = options(argc, argv, &i, &cfg_path, &shell)) >= 0)
		return rc;
	if (argc - i > 2) {
		authkeys_usage(stderr);
		return GD_EXIT_USAGE;
	}
	if (argc - i < 2)
		return run_list(argv);
	fp = argv[i + 1];
	if (strncmp(fp, "SHA256:", 7) || strlen(fp) > 100 ||
	    strpbrk(fp, " \t\r\n")) {
		complain("'%.80s' is no key fingerprint (want SHA256:..., as "
		         "sshd gives it for %%f)",
		         fp);
		return GD_EXIT_USAGE;
	}
	/* authkeys_paths says only that it could not: say why first */
	if (cfg_path && !realpath(cfg_path, resolved)) {
		complain("cannot use config %s: %s (AuthorizedKeysCommand's "
		         "--config; AuthorizedKeysCommandUser must be able to "
		         "read it)",
		         cfg_path, strerror(errno));
		return GD_EXIT_USAGE;
	}
	if ((rc = authkeys_paths(&paths, prog, shell, cfg_path)) != 0)
		return rc;
	if (config_load(&cfg, cfg_path ? cfg_path : config_default_path(),
	                &err) < 0) {
		complain("%s", buf_str(&err));
		rc = GD_EXIT_USAGE;
		goto done;
	}
	if (ask(cfg->keys_socket, fp, &ans, &why) < 0) {
		complain("cannot reach the grantd node at %s: %s (is grantd "
		         "running, and may this account open the socket?)",
		         cfg->keys_socket, why);
		rc = GD_EXIT_UNREACHABLE;
		goto done;
	}
	buf_add(&ans, "", 1); /* a C string */
	if (ans.p[0] == '!') {
		/* "!N message": the node's refusal or failure */
		int st = ans.p[1] == '1' || ans.p[1] == '2' ? ans.p[1] - '0'
		                                            : GD_EXIT_INTERNAL;
		const char *msg = ans.p + 1 + (ans.p[1] != 0);
		complain("%.*s", (int)strcspn(msg, "\n"), msg);
		rc = st;
		goto done;
	}
	authkeys_print(stdout, ans.p, paths.shell, paths.config,
	               cfg->policy.security_keys, fp);
	rc = GD_EXIT_OK;
done:
	buf_free(&ans);
	buf_free(&err);
	config_free(&cfg);
	return rc;
}
