/*
 * test_wire.c: common/wire.h, the framing of one request and one reply.
 *
 *   - a message goes out as its length and its bytes in one send, so the
 *     node's reader sees a whole request at once;
 *   - a message larger than the socket's buffer still goes whole: what
 *     the first send leaves (part of the length, part of the body) goes
 *     on within the deadline;
 *   - wire_recv reads exactly one message and leaves the next in the
 *     socket; a length over GD_CTL_MAX_REPLY is refused;
 *   - no reader: the send times out rather than blocking.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "wire.h"

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void test_one_send(void **state)
{
	(void)state;
	int sv[2];
	uint8_t got[64];
	/* a seqpacket socket keeps each send a record of its own */
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(wire_send(sv[0], "hello", 5, 1000), 0);
	/* one record holds the length and the body: one send made them */
	ssize_t n = recv(sv[1], got, sizeof(got), MSG_DONTWAIT);
	assert_int_equal(n, 9);
	assert_memory_equal(got, "\0\0\0\5hello", 9);
	close(sv[0]);
	close(sv[1]);
}

struct drain {
	int fd;
	uint8_t *msg;
	size_t len;
	int rc;
};

static void *drain_main(void *arg)
{
	struct drain *d = arg;
	usleep(20000); /* let the sender fill the socket first */
	d->rc = wire_recv(d->fd, &d->msg, &d->len, 5000);
	return NULL;
}

static void test_larger_than_buffer(void **state)
{
	(void)state;
	int sv[2], small = 4096;
	size_t len = GD_CTL_MAX_REQUEST;
	uint8_t *msg = malloc(len);
	pthread_t t;
	struct drain d = {0};

	assert_non_null(msg);
	for (size_t i = 0; i < len; i++)
		msg[i] = (uint8_t)(i * 7 + 1);
	pair(sv);
	assert_int_equal(
	        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
	        0);
	assert_int_equal(
	        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)),
	        0);
	d.fd = sv[1];
	assert_int_equal(pthread_create(&t, NULL, drain_main, &d), 0);
	assert_int_equal(wire_send(sv[0], msg, len, 5000), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.len, len);
	assert_memory_equal(d.msg, msg, len);
	free(d.msg);
	free(msg);
	close(sv[0]);
	close(sv[1]);
}

static void test_one_message_at_a_time(void **state)
{
	(void)state;
	int sv[2];
	uint8_t *m;
	size_t n;
	pair(sv);
	assert_int_equal(wire_send(sv[0], "first", 5, 1000), 0);
	assert_int_equal(wire_send(sv[0], "second", 6, 1000), 0);
	assert_int_equal(wire_recv(sv[1], &m, &n, 1000), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(m, "first", 5);
	free(m);
	assert_int_equal(wire_recv(sv[1], &m, &n, 1000), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(m, "second", 6);
	free(m);
	/* nothing more: the deadline passes */
	assert_int_equal(wire_recv(sv[1], &m, &n, 50), GD_EUNREACH);
	assert_null(m);
	/* a length over the reply's bound is refused, not allocated */
	uint8_t huge[4] = {0x7f, 0xff, 0xff, 0xff};
	assert_int_equal(send(sv[0], huge, 4, 0), 4);
	assert_int_equal(wire_recv(sv[1], &m, &n, 1000), GD_EPROTO);
	close(sv[0]);
	close(sv[1]);
}

static void test_send_times_out(void **state)
{
	(void)state;
	int sv[2], small = 4096;
	uint8_t *msg = calloc(1, GD_CTL_MAX_REQUEST);
	pair(sv);
	assert_non_null(msg);
	assert_int_equal(
	        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
	        0);
	assert_int_equal(wire_send(sv[0], msg, GD_CTL_MAX_REQUEST, 100),
	                 GD_EUNREACH);
	assert_int_equal(wire_send(sv[0], msg, GD_CTL_MAX_REQUEST + 1, 100),
	                 GD_ETOOBIG);
	free(msg);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_one_send),
	        cmocka_unit_test(test_larger_than_buffer),
	        cmocka_unit_test(test_one_message_at_a_time),
	        cmocka_unit_test(test_send_times_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
