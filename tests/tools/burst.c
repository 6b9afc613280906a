/*
 * burst.c: a test tool (not installed) that sends many `2fa val` requests
 * to a node's user socket at once, as a brute-force client would, and
 * counts the answers by kind.
 *
 * grant-shell makes one request per process and waits for its answer, so
 * it can never put more than one guess in a control batch.  This tool
 * uses one connection (wire.h): it sends COUNT requests with TOKEN, then
 * LAST when given, without waiting for answers (it reads them only when
 * the kernel's buffers are full), so the node reads them in as few
 * batches as it can (up to its batch size each, and at most
 * USERSOCK_MAX_INFLIGHT unanswered on a connection).  Then it reads every
 * answer and prints one line:
 *
 *   sent=N ok=A failed=B locked=C other=D
 *
 * ok: accepted; failed: "Failed to validate token" (a guess the node
 * judged); locked: "Rate-limit reached" (refused before any check);
 * other: anything else (the first such answer goes to stderr).  A test
 * tells LAST's fate from the counts (make TOKEN wrong and LAST valid).
 *
 * Exit 0 when every answer came, 3 when the node did not answer them all
 * within 60 s (the counts so far are printed), 2 on bad usage.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* Append one framed '2fa val token' request to out. */
static int add_val(struct buf *out, const char *user, const char *ip,
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
	uint8_t hdr[4] = { 0, 0, (uint8_t)(len >> 8), (uint8_t)len };
	buf_add(out, hdr, 4);
	buf_add(out, frame, len);
	return 0;
}

/* Count one answer. */
static int count_reply(const uint8_t *p, size_t len, struct counts *c)
{
	Grantd__V1__Reply *rep = grantd__v1__reply__unpack(NULL, len, p);

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

/* Read what waits on fd into in; count the whole answers.  Returns 0,
 * or GD_EUNREACH when the node closed the connection. */
static int take_replies(int fd, struct buf *in, struct counts *c)
{
	uint8_t tmp[65536];
	ssize_t n = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : GD_EUNREACH;
	if (n == 0)
		return GD_EUNREACH;
	buf_add(in, tmp, (size_t)n);
	size_t off = 0;
	while (in->len - off >= 4) {
		const uint8_t *h = (const uint8_t *)in->p + off;
		size_t len = (size_t)h[0] << 24 | (size_t)h[1] << 16 |
			     (size_t)h[2] << 8 | h[3];
		if (in->len - off < 4 + len)
			break;
		if (count_reply(h + 4, len, c) < 0)
			return GD_EPROTO;
		off += 4 + len;
	}
	memmove(in->p, in->p + off, in->len - off);
	in->len -= off;
	return 0;
}

static long answered(const struct counts *c)
{
	return c->ok + c->failed + c->locked + c->other;
}

static int burst(const char *path, const char *user, const char *ip,
		 long count, const char *token, const char *last,
		 struct counts *c)
{
	struct buf out = BUF_INIT, in = BUF_INIT;
	size_t off = 0;
	int fd = wire_connect(path, TIMEOUT_MS), rc = GD_EUNREACH;

	if (fd < 0)
		return GD_EUNREACH;
	for (long i = 0; i <= count; i++) {
		const char *t = i < count ? token : last;
		if (!t)
			break;
		if ((rc = add_val(&out, user, ip, t)) < 0)
			goto done;
		c->sent++;
	}
	rc = GD_EUNREACH;
	while (answered(c) < c->sent) {
		struct pollfd p = { fd, POLLIN | (off < out.len ? POLLOUT : 0),
				    0 };
		int n = poll(&p, 1, TIMEOUT_MS);
		if (n <= 0)
			goto done; /* nothing within the time */
		if (off < out.len && (p.revents & POLLOUT)) {
			ssize_t w = send(fd, out.p + off, out.len - off,
					 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w < 0 && errno != EAGAIN && errno != EINTR)
				goto done;
			off += w > 0 ? (size_t)w : 0;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR))
			if ((rc = take_replies(fd, &in, c)) < 0)
				goto done;
		rc = GD_EUNREACH;
	}
	rc = 0;
done:
	close(fd);
	buf_free(&out);
	buf_free(&in);
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
