/*
 * test_request.c: node/requests/request.c, one request on a socket as
 * both threads read, check and answer it.
 *
 * Over a real ZeroMQ ROUTER (the node's side) and DEALER (a client that
 * frames its requests as REQ does) on inproc:
 *  - request_decode takes a good request and refuses each bad one with
 *    its one-line reason: too large, not decodable, another protocol
 *    version, a bad command, user, address, session, key kind or
 *    argument, too many arguments;
 *  - request_recv reads [id][""][payload...], joins payload frames, says
 *    when none waits, refuses a bad envelope, and more frames or bytes
 *    than allowed, keeping the asker's id but never the payload (whose
 *    buffer never moves); the next request reads whole;
 *  - request_send_reply answers the asker with its status and texts, and
 *    request_refuse_oversized answers "request too large" (exit 2);
 *  - request_pack_reply (the reader's plain sockets) packs every field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "cmd.h"
#include "err.h"
#include "fixture.h"
#include "request.h"
#include "wire.h"

struct fx {
	void *ctx, *router, *client;
	struct buf ident, payload;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	int linger = 0;

	if (!f || !(f->ctx = zmq_ctx_new()) ||
	    !(f->router = zmq_socket(f->ctx, ZMQ_ROUTER)) ||
	    !(f->client = zmq_socket(f->ctx, ZMQ_DEALER)) ||
	    zmq_setsockopt(f->router, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_setsockopt(f->client, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_bind(f->router, "inproc://test_request") ||
	    zmq_connect(f->client, "inproc://test_request"))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	zmq_close(f->client);
	zmq_close(f->router);
	zmq_ctx_term(f->ctx);
	buf_free(&f->ident);
	buf_free(&f->payload);
	free(f);
	return 0;
}

/* ---- decoding ------------------------------------------------------------ */

/* A good request: version, cmd "2fa.val", one argument, a user and an
 * address; tests change one field. */
static void good(Grantd__V1__Request *rq, char **args)
{
	grantd__v1__request__init(rq);
	rq->version = GD_WIRE_VERSION, rq->has_version = 1;
	rq->cmd = "2fa.val";
	args[0] = "123456";
	rq->args = args, rq->n_args = 1;
	rq->user = "alice";
	rq->client_ip = "192.0.2.7";
}

/* rq packed, then decoded: the rc, and the reason into err. */
static int decode(const Grantd__V1__Request *rq, struct buf *err)
{
	size_t len = grantd__v1__request__get_packed_size(rq);
	uint8_t *p = malloc(len ? len : 1);
	Grantd__V1__Request *out = NULL;
	int rc;

	assert_non_null(p);
	grantd__v1__request__pack(rq, p);
	buf_reset(err);
	rc = request_decode(&out, p, len, NULL, err);
	assert_true((rc == 0) == (out != NULL));
	if (out)
		grantd__v1__request__free_unpacked(out, NULL);
	free(p);
	return rc;
}

static void test_decode(void **state)
{
	static char longarg[16386], longsession[130];
	static uint8_t big[GD_CTL_MAX_REQUEST + 1];
	static char *many[GD_CTL_MAX_ARGS + 1];
	Grantd__V1__Request rq, *out;
	struct buf err = BUF_INIT;
	char *args[1];
	uint8_t junk[] = {0xff, 0xff, 0xff, 0xff};

	(void)state;
	good(&rq, args);
	assert_int_equal(decode(&rq, &err), 0);
	memset(longarg, 'x', sizeof(longarg) - 1);
	memset(longsession, 's', sizeof(longsession) - 1);
	for (size_t i = 0; i <= GD_CTL_MAX_ARGS; i++)
		many[i] = "a";
	static const struct {
		const char *what, *why;
	} bad[] = {
	        {"version", "unsupported protocol version (client and node "
	                    "differ?)"},
	        {"no version", "unsupported protocol version (client and node "
	                       "differ?)"},
	        {"no cmd", "missing or bad command name"},
	        {"cmd with a newline", "missing or bad command name"},
	        {"args", "too many arguments"},
	        {"user", "bad user name"},
	        {"client_ip", "bad client address"},
	        {"session", "bad session id"},
	        {"key_kind", "bad key kind"},
	        {"arg", "bad argument (too long or control characters)"},
	        {"long arg", "bad argument (too long or control characters)"},
	};
	for (size_t i = 0; i < GD_ARRAY_SIZE(bad); i++) {
		good(&rq, args);
		switch (i) {
		case 0:
			rq.version = GD_WIRE_VERSION + 1;
			break;
		case 1:
			rq.has_version = 0;
			break;
		case 2:
			rq.cmd = NULL;
			break;
		case 3:
			rq.cmd = "2fa.val\n";
			break;
		case 4:
			rq.args = many, rq.n_args = GD_CTL_MAX_ARGS + 1;
			break;
		case 5:
			rq.user = "Alice Smith";
			break;
		case 6:
			rq.client_ip = "192.0.2.7\r";
			break;
		case 7:
			rq.session = longsession;
			break;
		case 8:
			rq.key_kind = "\x01";
			break;
		case 9:
			args[0] = "12\t3456";
			break;
		case 10:
			args[0] = longarg;
			break;
		}
		if (decode(&rq, &err) != GD_EPROTO ||
		    strcmp(buf_str(&err), bad[i].why))
			fail_msg("%s: \"%s\", not \"%s\"", bad[i].what,
			         buf_str(&err), bad[i].why);
	}
	/* bytes that are no request, and too many of them */
	buf_reset(&err);
	assert_int_equal(request_decode(&out, junk, sizeof(junk), NULL, &err),
	                 GD_EPROTO);
	assert_null(out);
	assert_string_equal(buf_str(&err), "request does not decode");
	buf_reset(&err);
	assert_int_equal(request_decode(&out, big, sizeof(big), NULL, &err),
	                 GD_ETOOBIG);
	assert_string_equal(buf_str(&err), "request too large");
	buf_free(&err);
}

/* ---- the socket ------------------------------------------------------------
 */

/* The client sends frames n frames (NULL data: len bytes of 'p'). */
static void
send_frames(struct fx *f, const char *const *frames, const size_t *lens, int n)
{
	for (int i = 0; i < n; i++) {
		size_t len = lens ? lens[i] : strlen(frames[i]);
		void *big = NULL;
		const void *p = frames[i];
		if (!p) {
			big = malloc(len);
			assert_non_null(big);
			memset(big, 'p', len);
			p = big;
		}
		assert_int_equal(zmq_send(f->client, p, len,
		                          i + 1 < n ? ZMQ_SNDMORE : 0),
		                 (int)len);
		free(big);
	}
}

/* request_recv until something came (the client's frames are in flight). */
static int recv_one(struct fx *f)
{
	zmq_pollitem_t it = {f->router, 0, ZMQ_POLLIN, 0};

	assert_int_equal(zmq_poll(&it, 1, 5000), 1);
	return request_recv(f->router, &f->ident, &f->payload);
}

static void test_recv(void **state)
{
	struct fx *f = *state;
	static const char *const good2[] = {"", "ab", "cd"};

	/* nothing waiting */
	assert_int_equal(request_recv(f->router, &f->ident, &f->payload), 0);
	send_frames(f, good2, NULL, 3);
	assert_int_equal(recv_one(f), 1);
	assert_true(f->ident.len > 0);
	assert_int_equal(f->payload.len, 4);
	assert_memory_equal(f->payload.p, "abcd", 4);
	/* a bad envelope: no empty delimiter, or no payload */
	send_frames(f, (const char *const[]){"x", "req"}, NULL, 2);
	assert_int_equal(recv_one(f), GD_EPROTO);
	send_frames(f, (const char *const[]){""}, NULL, 1);
	assert_int_equal(recv_one(f), GD_EPROTO);
	assert_int_equal(request_recv(f->router, &f->ident, &f->payload), 0);
}

static void test_recv_over_bounds(void **state)
{
	struct fx *f = *state;
	const char *frames[REQUEST_MAX_FRAMES + 1];
	size_t lens[3] = {0, GD_CTL_MAX_REQUEST, 1};
	struct buf first = BUF_INIT;
	const char *p;

	/* more frames than allowed (the id is the first) */
	for (int i = 0; i < REQUEST_MAX_FRAMES; i++)
		frames[i] = i ? "f" : "";
	send_frames(f, frames, NULL, REQUEST_MAX_FRAMES);
	assert_int_equal(recv_one(f), GD_ETOOBIG);
	assert_true(f->ident.len > 0);
	buf_add(&first, f->ident.p, f->ident.len);
	p = f->payload.p;
	/* one byte more than allowed, in two frames */
	send_frames(f, (const char *const[]){"", NULL, NULL}, lens, 3);
	assert_int_equal(recv_one(f), GD_ETOOBIG);
	assert_true(f->ident.len == first.len &&
	            !memcmp(f->ident.p, first.p, first.len));
	assert_ptr_equal(f->payload.p, p);
	assert_true(f->payload.len <= GD_CTL_MAX_REQUEST);
	/* exactly the limit, and the next request, read whole */
	lens[2] = 0;
	send_frames(f, (const char *const[]){"", NULL}, lens, 2);
	assert_int_equal(recv_one(f), 1);
	assert_int_equal(f->payload.len, GD_CTL_MAX_REQUEST);
	assert_ptr_equal(f->payload.p, p);
	send_frames(f, (const char *const[]){"", "next"}, NULL, 2);
	assert_int_equal(recv_one(f), 1);
	assert_int_equal(f->payload.len, 4);
	assert_memory_equal(f->payload.p, "next", 4);
	buf_free(&first);
}

/* The client's answer: [""][Reply], decoded (the caller frees it). */
static Grantd__V1__Reply *reply_of(struct fx *f)
{
	zmq_pollitem_t it = {f->client, 0, ZMQ_POLLIN, 0};
	uint8_t buf[4096];
	int n;

	assert_int_equal(zmq_poll(&it, 1, 5000), 1);
	assert_int_equal(zmq_recv(f->client, buf, sizeof(buf), 0), 0);
	n = zmq_recv(f->client, buf, sizeof(buf), 0);
	assert_true(n >= 0 && (size_t)n < sizeof(buf));
	Grantd__V1__Reply *rep =
	        grantd__v1__reply__unpack(NULL, (size_t)n, buf);
	assert_non_null(rep);
	return rep;
}

static void test_reply(void **state)
{
	struct fx *f = *state;
	Grantd__V1__Reply *rep;
	struct req r;

	send_frames(f, (const char *const[]){"", "req"}, NULL, 2);
	assert_int_equal(recv_one(f), 1);
	memset(&r, 0, sizeof(r));
	buf_add(&r.ident, f->ident.p, f->ident.len);
	r.sock = f->router;
	r.status = GD_EXIT_REFUSED;
	buf_puts(&r.out, "some out");
	buf_puts(&r.err, "some err");
	request_send_reply(&r);
	request_free(&r);
	rep = reply_of(f);
	assert_true(rep->has_status && rep->status == GD_EXIT_REFUSED);
	assert_string_equal(rep->out, "some out");
	assert_string_equal(rep->err, "some err");
	assert_null(rep->otpauth_uri);
	assert_null(rep->next);
	grantd__v1__reply__free_unpacked(rep, NULL);
}

/* request_pack_reply: the Reply the reader sends on its plain sockets,
 * every field there (and a status 0 present, not left out). */
static void test_pack_reply(void **state)
{
	Grantd__V1__Reply *rep;
	struct req r;
	size_t len;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.status = GD_EXIT_OK;
	buf_puts(&r.out, "granted");
	buf_puts(&r.uri, "otpauth://totp/x");
	buf_puts(&r.path, "/srv/git/a.git");
	r.factor = "hotp";
	snprintf(r.next, sizeof(r.next), "%s", "cursor");
	uint8_t *p = request_pack_reply(&r, &len);
	request_free(&r);
	rep = grantd__v1__reply__unpack(NULL, len, p);
	free(p);
	assert_non_null(rep);
	assert_true(rep->has_status && rep->status == GD_EXIT_OK);
	assert_string_equal(rep->out, "granted");
	assert_null(rep->err);
	assert_string_equal(rep->otpauth_uri, "otpauth://totp/x");
	assert_string_equal(rep->path, "/srv/git/a.git");
	assert_string_equal(rep->factor, "hotp");
	assert_string_equal(rep->next, "cursor");
	grantd__v1__reply__free_unpacked(rep, NULL);
}

static void test_refuse_oversized(void **state)
{
	struct fx *f = *state;
	size_t lens[2] = {0, GD_CTL_MAX_REQUEST + 1};
	Grantd__V1__Reply *rep;
	struct req r;

	send_frames(f, (const char *const[]){"", NULL}, lens, 2);
	assert_int_equal(recv_one(f), GD_ETOOBIG);
	memset(&r, 0, sizeof(r));
	buf_add(&r.ident, f->ident.p, f->ident.len);
	request_refuse_oversized(&r, f->router, false);
	assert_null(r.sock); /* r is clean again */
	rep = reply_of(f);
	assert_true(rep->has_status && rep->status == GD_EXIT_USAGE);
	if (!rep->err || !strstr(rep->err, "request too large"))
		fail_msg("err: %s", rep->err ? rep->err : "(none)");
	grantd__v1__reply__free_unpacked(rep, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_decode),
	        cmocka_unit_test_setup_teardown(test_recv, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_recv_over_bounds, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_reply, setup, teardown),
	        cmocka_unit_test(test_pack_reply),
	        cmocka_unit_test_setup_teardown(test_refuse_oversized, setup,
	                                        teardown),
	};

	if (fx_group_setup("test_request", LOG_LVL_ERROR) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
