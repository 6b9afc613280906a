/*
 * test_pipe.c: the internal pipes' messages (node/daemon/pipe.h): a
 * message packed by pipe_send reads back as its type, id and body; the
 * syncer pipe's tickets and stop; what is not a message of a pipe is
 * refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <zmq.h>

#include "err.h"
#include "pipe.h"

struct pair {
	void *zctx, *a, *b;
};

static int setup(void **state)
{
	static struct pair p;

	p.zctx = zmq_ctx_new();
	p.a = zmq_socket(p.zctx, ZMQ_PAIR);
	p.b = zmq_socket(p.zctx, ZMQ_PAIR);
	if (!p.a || !p.b || zmq_bind(p.a, "inproc://test-pipe") < 0 ||
	    zmq_connect(p.b, "inproc://test-pipe") < 0)
		return -1;
	*state = &p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	zmq_close(p->a);
	zmq_close(p->b);
	zmq_ctx_term(p->zctx);
	return 0;
}

/* Read one three-frame message: frame 0 into f0, frame 2 into body. */
static void recv3(void *sock, char *f0, size_t *f0len, char *body,
		  size_t *blen)
{
	int n;

	assert_true((n = zmq_recv(sock, f0, 300, 0)) >= 0);
	*f0len = (size_t)n;
	assert_int_equal(zmq_recv(sock, body, 16, 0), 0); /* the "" */
	assert_true((n = zmq_recv(sock, body, 300, 0)) >= 0);
	*blen = (size_t)n;
}

static void test_reader_pipe(void **state)
{
	struct pair *p = *state;
	char f0[300], body[300];
	size_t f0len, blen;

	/* a request from the admin socket: the id behind the type byte */
	assert_int_equal(pipe_send(p->a, PIPE_REQ_ADMIN, "\0abcd", 5, "req",
				   3, 0), 0);
	recv3(p->b, f0, &f0len, body, &blen);
	assert_int_equal(f0len, 6);
	assert_int_equal(pipe_type(f0, f0len), PIPE_REQ_ADMIN);
	assert_memory_equal(f0 + 1, "\0abcd", 5);
	assert_int_equal(blen, 3);
	assert_memory_equal(body, "req", 3);
	/* from the user socket */
	assert_int_equal(pipe_send(p->a, PIPE_REQ_USER, "id", 2, "x", 1, 0),
			 0);
	recv3(p->b, f0, &f0len, body, &blen);
	assert_int_equal(pipe_type(f0, f0len), PIPE_REQ_USER);
	/* a view and a quit: no id, no body */
	assert_int_equal(pipe_send(p->b, PIPE_VIEW, NULL, 0, NULL, 0, 0), 0);
	recv3(p->a, f0, &f0len, body, &blen);
	assert_int_equal(pipe_type(f0, f0len), PIPE_VIEW);
	assert_int_equal(blen, 0);
	assert_int_equal(pipe_send(p->b, PIPE_QUIT, NULL, 0, NULL, 0, 0), 0);
	recv3(p->a, f0, &f0len, body, &blen);
	assert_int_equal(pipe_type(f0, f0len), PIPE_QUIT);
	/* what is none of them */
	assert_int_equal(pipe_type("", 0), PIPE_NONE);
	assert_int_equal(pipe_type("Vx", 2), PIPE_NONE);
	assert_int_equal(pipe_type("\x07", 1), PIPE_NONE);
	/* not sent: an id too long, a type of another pipe */
	char id[PIPE_ID_MAX + 1] = { 0 };
	assert_int_equal(pipe_send(p->a, PIPE_REQ_USER, id, sizeof(id), "", 0,
				   0), GD_EINVAL);
	assert_int_equal(pipe_send(p->a, PIPE_SYNC, NULL, 0, NULL, 0, 0),
			 GD_EINVAL);
}

static void test_syncer_pipe(void **state)
{
	struct pair *p = *state;
	uint64_t t = 0;

	assert_int_equal(pipe_recv_ticket(p->b, &t, ZMQ_DONTWAIT), 0);
	assert_int_equal(pipe_send_ticket(p->a, PIPE_SYNC, 7), 0);
	assert_int_equal(pipe_recv_ticket(p->b, &t, 0), PIPE_SYNC);
	assert_int_equal(t, 7);
	assert_int_equal(pipe_send_ticket(p->a, PIPE_SYNC_STOP, 0), 0);
	assert_int_equal(pipe_recv_ticket(p->b, &t, 0), PIPE_SYNC_STOP);
	/* a frame that is no ticket */
	assert_int_equal(zmq_send(p->a, "abc", 3, 0), 3);
	assert_int_equal(pipe_recv_ticket(p->b, &t, 0), GD_EPROTO);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(pipe_msg_name(PIPE_VIEW), "PIPE_VIEW");
	assert_string_equal(pipe_msg_name(PIPE_SYNC_STOP), "PIPE_SYNC_STOP");
	assert_string_equal(pipe_msg_name((enum pipe_msg)77), "PIPE_NONE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reader_pipe, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_syncer_pipe, setup,
						teardown),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
