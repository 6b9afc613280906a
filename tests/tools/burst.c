/*
 * burst.c: a test tool (not installed) that sends many `2fa val` requests
 * to a node's user socket at once, as a brute-force client would, and
 * counts the answers by kind.
 *
 * grant-shell makes one request per process and waits for its answer, so
 * it can never put more than one guess in a control batch.  This tool
 * uses one DEALER socket: it queues COUNT requests with TOKEN, then LAST
 * when given, all before reading any answer, so the node reads them in as
 * few batches as it can (up to its batch size each).  Then it reads every
 * answer and prints one line:
 *
 *   sent=N ok=A failed=B locked=C other=D
 *
 * ok: accepted; failed: "Failed to validate token" (a guess the node
 * judged); locked: "Rate-limit reached" (refused before any check);
 * other: anything else (the first such answer goes to stderr).  The node
 * answers a refusal that wrote nothing before the failures it holds until
 * their fsync, so answers do not come back in request order: a test tells
 * LAST's fate from the counts (make TOKEN wrong and LAST valid).
 *
 * Exit 0 when every answer came, 3 when the node did not answer them all
 * within 60 s (the counts so far are printed), 2 on bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "cli.h"
#include "config.h"
#include "err.h"
#include "wire.h"
#include "banned.h"

#define MAX_COUNT 100000
#define TIMEOUT_MS 60000

static const char *prog = "burst";

static void usage(FILE *f)
{
	fprintf(f,
"usage: burst [--config FILE] USER IP COUNT TOKEN [LAST]\n"
"Send COUNT '2fa val TOKEN' requests for USER from IP to the node's user\n"
"socket at once (one connection), then '2fa val LAST' when given; read\n"
"every answer and print: sent=N ok=A failed=B locked=C other=D.\n"
"  --config FILE  configuration (default $GRANTD_CONFIG, then %s)\n"
"Exit: 0 all answered, 2 usage, 3 not every answer came within %d s.\n",
		CONFIG_DEFAULT_PATH, TIMEOUT_MS / 1000);
}

struct counts {
	long sent, ok, failed, locked, other;
};

static int send_val(void *sock, const char *user, const char *ip,
		    const char *token)
{
	Grantd__V1__Request req = GRANTD__V1__REQUEST__INIT;
	char *args[1] = { (char *)token };
	uint8_t frame[1024];
	size_t len;

	req.version = GD_WIRE_VERSION, req.has_version = 1;
	req.cmd = "2fa.val";
	req.user = (char *)user;
	req.client_ip = (char *)ip;
	req.args = args;
	req.n_args = 1;
	len = grantd__v1__request__get_packed_size(&req);
	if (len > sizeof(frame))
		return GD_ETOOBIG;
	grantd__v1__request__pack(&req, frame);
	/* the empty delimiter a REQ socket would add */
	if (zmq_send(sock, "", 0, ZMQ_SNDMORE) < 0 ||
	    zmq_send(sock, frame, len, 0) < 0)
		return GD_EIO;
	return 0;
}

/* Read one answer (delimiter, reply) and count it. */
static int take_reply(void *sock, struct counts *c)
{
	Grantd__V1__Reply *rep = NULL;
	zmq_msg_t m;
	int more;

	do {
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, sock, 0) < 0) {
			zmq_msg_close(&m);
			return GD_EUNREACH;
		}
		more = zmq_msg_more(&m);
		if (!more)
			rep = grantd__v1__reply__unpack(NULL, zmq_msg_size(&m),
							zmq_msg_data(&m));
		zmq_msg_close(&m);
	} while (more);
	if (!rep)
		return GD_EPROTO;
	const char *err = rep->err ? rep->err : "";
	if (rep->has_status && rep->status == 0)
		c->ok++;
	else if (!strncmp(err, "Failed to validate token", 24))
		c->failed++;
	else if (!strncmp(err, "Rate-limit reached", 18))
		c->locked++;
	else if (c->other++ == 0)
		fprintf(stderr, "%s: first other answer (status %d): %s\n",
			prog, rep->status, err);
	grantd__v1__reply__free_unpacked(rep, NULL);
	return 0;
}

static int burst(const char *path, const char *user, const char *ip,
		 long count, const char *token, const char *last,
		 struct counts *c)
{
	void *ctx = zmq_ctx_new(), *sock = NULL;
	char endpoint[4096];
	int zero = 0, timeout = TIMEOUT_MS, rc = GD_EUNREACH;
	int64_t max = GD_CTL_MAX_REPLY;

	if (!ctx || strlen(path) + 7 > sizeof(endpoint))
		goto done;
	snprintf(endpoint, sizeof(endpoint), "ipc://%s", path);
	if (!(sock = zmq_socket(ctx, ZMQ_DEALER)))
		goto done;
	/* never block or drop: every request queued, every answer kept */
	zmq_setsockopt(sock, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(sock, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof(max));
	zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
	if (zmq_connect(sock, endpoint) < 0)
		goto done;
	for (long i = 0; i <= count; i++) {
		const char *t = i < count ? token : last;
		if (!t)
			break;
		if ((rc = send_val(sock, user, ip, t)) < 0)
			goto done;
		c->sent++;
	}
	for (long i = 0; i < c->sent; i++)
		if ((rc = take_reply(sock, c)) < 0)
			goto done;
	rc = 0;
done:
	if (sock)
		zmq_close(sock);
	if (ctx)
		zmq_ctx_term(ctx);
	return rc;
}

int main(int argc, char **argv)
{
	const char *cfg_path = NULL;
	struct config *cfg = NULL;
	struct counts c = { 0 };
	char *end;
	int next, rc;

	if ((rc = cli_options(argc, argv, &next, prog, usage, &cfg_path,
			      NULL)) >= 0)
		return rc;
	if (argc - next < 4 || argc - next > 5) {
		usage(stderr);
		return GD_EXIT_USAGE;
	}
	long count = strtol(argv[next + 2], &end, 10);
	if (*end || count < 1 || count > MAX_COUNT) {
		fprintf(stderr, "%s: COUNT must be 1..%d\n", prog, MAX_COUNT);
		return GD_EXIT_USAGE;
	}
	if ((rc = cli_load_config(&cfg, prog, cfg_path)) != 0)
		return rc;
	rc = burst(cfg->user_socket, argv[next], argv[next + 1], count,
		   argv[next + 3], argc - next == 5 ? argv[next + 4] : NULL, &c);
	printf("sent=%ld ok=%ld failed=%ld locked=%ld other=%ld\n", c.sent,
	       c.ok, c.failed, c.locked, c.other);
	config_free(&cfg);
	if (rc < 0) {
		fprintf(stderr, "%s: %ld of %ld answers came: %s\n", prog,
			c.ok + c.failed + c.locked + c.other, c.sent,
			gd_strerror(rc));
		return GD_EXIT_UNREACHABLE;
	}
	return GD_EXIT_OK;
}
