/*
 * offer.c: a test tool (not installed) that offers the same token at
 * several sites at once, as a user (or an attacker holding one token) who
 * types `2fa val TOKEN` at every site in the same instant, and says what
 * each site answered.  The fault harness (tests/integration/
 * test_quorum_faults.sh) counts from its output the tokens accepted twice;
 * bench/run-quorum takes the latencies.
 *
 *   offer [--timeout MS] [--per-site K] [--round N] [--ip IP] USER
 *         SITE=CONFIG...
 *
 * It reads tokens from stdin, one a line, and for each line makes one
 * round: K requests to each SITE's user socket (read from its grantd.conf,
 * CONFIG), each from its own thread and connection, connected first and
 * then released together by a barrier, so the node sees them as grant-shell
 * would send them for `2fa val TOKEN` from IP (default 127.0.24.99), in the
 * same instant.  A site whose socket is absent or has no listener (a killed
 * node) is not sent anything: "unreachable".  It prints one JSON line per
 * request, never the token:
 *
 *   {"round": N, "site": "S", "result": R, "status": C, "ms": T,
 *    "text": "the first line of the refusal"}
 *
 * R is accepted (status 0), refused (1), bad-input (2), error (4 or an
 * answer that does not decode), unreachable or timeout (no answer within
 * MS, default 5000: a frozen node); T is the time from the release to the
 * answer.  Rounds are numbered from N (default 0), one per line.
 *
 * Exit 0 when every round was made (whatever the sites answered), 2 on bad
 * usage or config.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "err.h"
#include "wire.h"
#include "banned.h"

#define MAX_SITES 16
#define MAX_PER_SITE 64
#define TOKEN_MAX 64

static const char *prog = "offer";

static void usage(FILE *f)
{
	fprintf(f,
"usage: offer [--timeout MS] [--per-site K] [--round N] [--ip IP] USER\n"
"             SITE=CONFIG...\n"
"Read tokens from stdin, one a line; for each, send K '2fa val TOKEN'\n"
"requests for USER from IP to every SITE's user socket (CONFIG is its\n"
"grantd.conf), released together, and print one JSON line per request:\n"
"round, site, result (accepted, refused, bad-input, error, unreachable,\n"
"timeout), status, ms (release to answer) and text (the refusal's first\n"
"line).  The token is never printed.\n"
"  --timeout MS   wait at most MS for each answer (default 5000)\n"
"  --per-site K   requests per site and round (default 1, at most %d)\n"
"  --round N      number of the first round (default 0)\n"
"  --ip IP        the client address (default 127.0.24.99)\n"
"Exit: 0 every round made, 2 usage.\n", MAX_PER_SITE);
}

struct site {
	char name[64];
	char path[4096];
};

struct shot {
	const struct site *site;
	const char *user, *ip, *token;
	int timeout_ms;
	pthread_barrier_t *go;
	/* the outcome */
	const char *result;
	int status;
	double ms;
	char text[512];
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A listening unix socket at path (wire.c does the same before a call). */
static void first_line(char *dst, size_t n, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && src[i] != '\n' && i + 1 < n; i++)
		dst[i] = src[i];
	dst[i] = '\0';
}

static void *shoot(void *arg)
{
	struct shot *s = arg;
	Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;
	Grantd__V1__Reply *rep = NULL;
	char *args[1] = { (char *)s->token };
	uint8_t frame[1024], *ans = NULL;
	size_t len, anslen;
	int fd = -1;
	double t0;

	s->result = "unreachable";
	s->status = GD_EXIT_UNREACHABLE;
	req.version = GD_WIRE_VERSION, req.has_version = 1;
	req.cmd = "2fa.val";
	req.user = (char *)s->user;
	req.client_ip = (char *)s->ip;
	req.args = args;
	req.n_args = 1;
	len = grantd__v1__request__get_packed_size(&req);
	if (len <= sizeof(frame)) {
		grantd__v1__request__pack(&req, frame);
		fd = wire_connect(s->site->path, s->timeout_ms);
	}
	/* every thread waits here, reachable site or not: the requests
	 * leave together */
	pthread_barrier_wait(s->go);
	t0 = now_ms();
	if (fd < 0)
		goto out;
	if (wire_send(fd, frame, len, s->timeout_ms) < 0 ||
	    wire_recv(fd, &ans, &anslen, s->timeout_ms) < 0) {
		/* a frozen node keeps the connection and says nothing */
		s->result = now_ms() - t0 >= s->timeout_ms - 1 ? "timeout" :
								  "unreachable";
		goto out;
	}
	rep = grantd__v1__reply__unpack(NULL, anslen, ans);
	s->ms = now_ms() - t0;
	if (!rep) {
		s->result = "error";
		s->status = GD_EXIT_INTERNAL;
		goto out;
	}
	s->status = rep->has_status ? rep->status : GD_EXIT_INTERNAL;
	s->result = s->status == GD_EXIT_OK ? "accepted" :
		    s->status == GD_EXIT_REFUSED ? "refused" :
		    s->status == GD_EXIT_USAGE ? "bad-input" : "error";
	if (s->status != GD_EXIT_OK)
		first_line(s->text, sizeof(s->text), rep->err);
	grantd__v1__reply__free_unpacked(rep, NULL);
out:
	if (!rep && s->ms == 0)
		s->ms = now_ms() - t0;
	if (fd >= 0)
		close(fd);
	free(ans);
	explicit_bzero(frame, sizeof(frame));
	return NULL;
}

static void json_str(const char *v)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static int round_at(const struct site *sites, int nsites, int k,
		    const char *user, const char *ip, const char *token,
		    int timeout_ms, long round)
{
	int n = nsites * k;
	struct shot shots[MAX_SITES * MAX_PER_SITE];
	pthread_t th[MAX_SITES * MAX_PER_SITE];
	pthread_barrier_t go;

	if (pthread_barrier_init(&go, NULL, (unsigned)n) != 0)
		return GD_ENOMEM;
	for (int i = 0; i < n; i++) {
		shots[i] = (struct shot){ .site = &sites[i / k], .user = user,
					  .ip = ip, .token = token,
					  .timeout_ms = timeout_ms, .go = &go };
		if (pthread_create(&th[i], NULL, shoot, &shots[i]) != 0) {
			fprintf(stderr, "%s: cannot start a thread\n", prog);
			abort(); /* the others wait at the barrier forever */
		}
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < n; i++) {
		printf("{\"round\": %ld, \"site\": ", round);
		json_str(shots[i].site->name);
		printf(", \"result\": \"%s\", \"status\": %d, \"ms\": %.3f, "
		       "\"text\": ", shots[i].result, shots[i].status,
		       shots[i].ms);
		json_str(shots[i].text);
		printf("}\n");
	}
	fflush(stdout);
	return 0;
}

static bool num(long *out, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

int main(int argc, char **argv)
{
	struct site sites[MAX_SITES];
	long timeout = 5000, k = 1, round = 0;
	const char *ip = "127.0.24.99";
	char line[TOKEN_MAX + 2];
	int i = 1, nsites = 0, rc = GD_EXIT_OK;

	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return GD_EXIT_OK;
		}
		bool ok = i + 1 < argc;
		if (ok && !strcmp(a, "--timeout"))
			ok = num(&timeout, argv[++i], 1, 600000);
		else if (ok && !strcmp(a, "--per-site"))
			ok = num(&k, argv[++i], 1, MAX_PER_SITE);
		else if (ok && !strcmp(a, "--round"))
			ok = num(&round, argv[++i], 0, 1L << 40);
		else if (ok && !strcmp(a, "--ip"))
			ip = argv[++i];
		else
			ok = false;
		if (!ok) {
			fprintf(stderr, "%s: bad option or value '%s' (see "
				"%s --help)\n", prog, a, prog);
			return GD_EXIT_USAGE;
		}
	}
	if (argc - i < 2 || argc - i - 1 > MAX_SITES) {
		usage(stderr);
		return GD_EXIT_USAGE;
	}
	const char *user = argv[i++];
	for (; i < argc; i++, nsites++) {
		const char *eq = strchr(argv[i], '=');
		struct config *cfg = NULL;
		if (!eq || eq == argv[i] ||
		    (size_t)(eq - argv[i]) >= sizeof(sites[0].name)) {
			fprintf(stderr, "%s: '%s' is not SITE=CONFIG\n", prog,
				argv[i]);
			return GD_EXIT_USAGE;
		}
		snprintf(sites[nsites].name, sizeof(sites[0].name), "%.*s",
			 (int)(eq - argv[i]), argv[i]);
		if ((rc = cli_load_config(&cfg, prog, eq + 1)) != 0)
			return rc;
		snprintf(sites[nsites].path, sizeof(sites[0].path), "%s",
			 cfg->user_socket);
		config_free(&cfg);
	}
	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strcspn(line, "\r\n");
		if (line[n] == '\0' && !feof(stdin)) {
			fprintf(stderr, "%s: a line longer than %d characters\n",
				prog, TOKEN_MAX);
			rc = GD_EXIT_USAGE;
			break;
		}
		line[n] = '\0';
		if (n == 0)
			continue;
		if (round_at(sites, nsites, (int)k, user, ip, line,
			     (int)timeout, round++) < 0) {
			rc = GD_EXIT_INTERNAL;
			break;
		}
	}
	explicit_bzero(line, sizeof(line));
	return rc;
}
