/*
 * test_usersock.c: node/requests/usersock.h, the user and admin sockets'
 * framing, driven by the test itself (one thread: the clients write into
 * the kernel's buffers, then the test runs the server's poll rounds).
 * The serve function is a stub that echoes ("re:" + the request), or
 * holds a request starting with "w" as the writer would (answered later
 * with usersock_answer); test_readers.c has the real reader behind it.
 *   - a request sent a byte at a time is answered once whole;
 *   - several requests on one connection are answered in their order,
 *     a held one before those after it;
 *   - a held request's answer goes to its own connection, whichever
 *     is answered first; one for a connection gone is dropped;
 *   - a length over GD_CTL_MAX_REQUEST gets the refusal, then the close;
 *   - a client that never reads: its input is left unread past the
 *     bounds, the others are served, and it is closed at its deadline;
 *   - a client that never sends is closed at its deadline;
 *   - past USERSOCK_MAX_INFLIGHT unanswered requests a connection's
 *     input waits, and is taken again as answers go out;
 *   - one connection past the cap closes the oldest;
 *   - wire.h's client reads what the node sends.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "usersock.h"
#include "wire.h"

#define MAX_HELD 2048

struct fixture {
	char dir[64];
	char path[96];
	struct usersock *us;
	int served, refused;
	int nheld;
	uint8_t held[MAX_HELD][USERSOCK_ID_LEN];
};

static int stub(void *arg,
                const uint8_t *id,
                size_t idlen,
                const uint8_t *rq,
                size_t len,
                struct buf *reply)
{
	struct fixture *f = arg;

	if (!rq) {
		f->refused++;
		buf_printf(reply, "too big %zu", len);
		return 1;
	}
	f->served++;
	if (len && rq[0] == 'w') {
		assert_int_equal(idlen, USERSOCK_ID_LEN);
		assert_true(f->nheld < MAX_HELD);
		memcpy(f->held[f->nheld++], id, idlen);
		return 0;
	}
	buf_puts(reply, "re:");
	buf_add(reply, rq, len);
	return 1;
}

static int open_us(struct fixture *f, int max_conns, int64_t deadline_ms)
{
	struct usersock_opts o = {.path = f->path,
	                          .mode = 0600,
	                          .serve = stub,
	                          .arg = f,
	                          .max_conns = max_conns,
	                          .deadline_ms = deadline_ms};
	return usersock_open(&f->us, &o);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_usersock", false))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/user.sock", f->dir);
	if (open_us(f, 0, 0) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	usersock_close(&f->us);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

/* Poll rounds of the server for about ms. */
static void pump(struct fixture *f, int ms)
{
	uint64_t end = clock_mono_ms() + (uint64_t)ms;
	int nmax = usersock_nitems(f->us);
	zmq_pollitem_t *it = calloc((size_t)nmax, sizeof(*it));

	assert_non_null(it);
	do {
		long timeout = 5;
		int n = usersock_items(f->us, it, &timeout);
		if (timeout > 5 || timeout < 0)
			timeout = 5;
		assert_true(zmq_poll(it, n, timeout) >= 0);
		usersock_serve(f->us, it, n);
	} while (clock_mono_ms() < end);
	free(it);
}

static int conn(struct fixture *f)
{
	int fd = wire_connect(f->path, 1000);

	assert_true(fd >= 0);
	return fd;
}

static void send_raw(int fd, const void *p, size_t len)
{
	assert_int_equal(send(fd, p, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Send len bytes, running the server whenever the kernel's buffer is
 * full. */
static void send_pumped(struct fixture *f, int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len) {
		ssize_t n = send(fd, c, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			assert_int_equal(errno, EAGAIN);
			pump(f, 1);
			continue;
		}
		c += n;
		len -= (size_t)n;
	}
}

static void send_msg(int fd, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);
	uint8_t h[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16),
	                (uint8_t)(n >> 8), (uint8_t)n};
	send_raw(fd, h, 4);
	send_raw(fd, s, n);
}

/* The next answer on fd, run the server meanwhile; "" on EOF (closed),
 * "(none)" when nothing came within about a second. */
static char *recv_msg(struct fixture *f, int fd)
{
	struct buf in = BUF_INIT;
	size_t need = 4;

	for (int round = 0; round < 200; round++) {
		uint8_t tmp[4096];
		size_t want = need - in.len;
		ssize_t n =
		        recv(fd, tmp, want < sizeof(tmp) ? want : sizeof(tmp),
		             MSG_DONTWAIT);
		if ((n == 0 || (n < 0 && errno != EAGAIN)) && in.len == 0)
			return strdup(""); /* closed (or reset) */
		if (n <= 0) {
			pump(f, 5);
			continue;
		}
		buf_add(&in, tmp, (size_t)n);
		round = 0;
		if (in.len == 4) {
			const uint8_t *h = (const uint8_t *)in.p;
			need = 4 + ((size_t)h[0] << 24 | (size_t)h[1] << 16 |
			            (size_t)h[2] << 8 | h[3]);
		}
		if (in.len >= 4 && in.len == need) {
			char *s = strndup(in.p + 4, need - 4);
			buf_free(&in);
			return s;
		}
	}
	buf_free(&in);
	return strdup("(none)");
}

static void expect(struct fixture *f, int fd, const char *want)
{
	char *got = recv_msg(f, fd);
	assert_string_equal(got, want);
	free(got);
}

static void test_byte_at_a_time(void **state)
{
	struct fixture *f = *state;
	int fd = conn(f);
	const uint8_t msg[] = {0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'};

	for (size_t i = 0; i < sizeof(msg); i++) {
		send_raw(fd, msg + i, 1);
		pump(f, 2);
		assert_int_equal(f->served, 0 + (i == sizeof(msg) - 1));
	}
	expect(f, fd, "re:hello");
	close(fd);
}

static void test_in_order(void **state)
{
	struct fixture *f = *state;
	int fd = conn(f);
	char s[32];

	/* a held one first: the reads after it wait for its answer */
	send_msg(fd, "wone");
	for (int i = 0; i < 50; i++) {
		snprintf(s, sizeof(s), "r%d", i);
		send_msg(fd, s);
	}
	pump(f, 20);
	assert_int_equal(f->served, 51);
	assert_int_equal(f->nheld, 1);
	char *none = recv_msg(f, fd); /* nothing yet */
	assert_string_equal(none, "(none)");
	free(none);
	assert_int_equal(usersock_answer(f->us, f->held[0], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"done", 4),
	                 0);
	expect(f, fd, "done");
	for (int i = 0; i < 50; i++) {
		snprintf(s, sizeof(s), "re:r%d", i);
		expect(f, fd, s);
	}
	/* answered twice: the second is refused */
	assert_int_equal(usersock_answer(f->us, f->held[0], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"x", 1),
	                 GD_ENOTFOUND);
	close(fd);
}

static void test_forwarded_to_its_connection(void **state)
{
	struct fixture *f = *state;
	int a = conn(f), b = conn(f), c = conn(f);

	send_msg(a, "wa");
	pump(f, 10);
	send_msg(b, "wb");
	pump(f, 10);
	send_msg(c, "wc");
	pump(f, 10);
	assert_int_equal(f->nheld, 3);
	/* answered b, then a: each to its own */
	assert_int_equal(usersock_answer(f->us, f->held[1], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"for b", 5),
	                 0);
	assert_int_equal(usersock_answer(f->us, f->held[0], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"for a", 5),
	                 0);
	expect(f, a, "for a");
	expect(f, b, "for b");
	/* c gone before its answer: a closed end reads as a half-close, so
	 * the answer is taken, its send fails and the slot is closed; the
	 * id names no connection after that, nor the slot's next holder */
	close(c);
	pump(f, 20);
	assert_int_equal(usersock_answer(f->us, f->held[2], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"for c", 5),
	                 0);
	int d = conn(f);
	pump(f, 10);
	assert_int_equal(usersock_answer(f->us, f->held[2], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"for c", 5),
	                 GD_ENOTFOUND);
	/* ids that are not ids */
	uint8_t bad[USERSOCK_ID_LEN] = {0xff, 0xff, 0xff, 0xff};
	assert_int_equal(usersock_answer(f->us, bad, sizeof(bad),
	                                 (const uint8_t *)"x", 1),
	                 GD_ENOTFOUND);
	assert_int_equal(
	        usersock_answer(f->us, bad, 3, (const uint8_t *)"x", 1),
	        GD_ENOTFOUND);
	send_msg(d, "hi");
	expect(f, d, "re:hi");
	close(a);
	close(b);
	close(d);
}

static void test_too_large(void **state)
{
	struct fixture *f = *state;
	int fd = conn(f), other = conn(f);
	uint32_t n = GD_CTL_MAX_REQUEST + 1;
	uint8_t h[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16),
	                (uint8_t)(n >> 8), (uint8_t)n};
	char want[64];

	send_msg(fd, "first");
	send_raw(fd, h, 4);
	send_raw(fd, "junk", 4);
	expect(f, fd, "re:first");
	snprintf(want, sizeof(want), "too big %u", n);
	expect(f, fd, want);
	expect(f, fd, ""); /* then closed */
	assert_int_equal(f->refused, 1);
	/* the limit itself is taken */
	n = GD_CTL_MAX_REQUEST;
	uint8_t h2[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16),
	                 (uint8_t)(n >> 8), (uint8_t)n};
	char *big = calloc(1, n);
	assert_non_null(big);
	memset(big, 'x', n);
	send_raw(other, h2, 4);
	for (size_t off = 0; off < n; off += 4096) {
		size_t k = n - off < 4096 ? n - off : 4096;
		send_raw(other, big + off, k);
		pump(f, 1);
	}
	char *got = recv_msg(f, other);
	assert_int_equal(strlen(got), 3 + (size_t)n);
	free(got);
	free(big);
	close(fd);
	close(other);
}

static void test_never_reads(void **state)
{
	struct fixture *f = *state;
	int lazy = conn(f), good = conn(f);
	char s[2048];

	/* answers of 2 kB each pile up at the node */
	memset(s, 'y', sizeof(s) - 1);
	s[sizeof(s) - 1] = '\0';
	int sent = 0;
	for (; sent < 4000; sent++) {
		uint32_t n = (uint32_t)strlen(s);
		uint8_t h[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16),
		                (uint8_t)(n >> 8), (uint8_t)n};
		if (send(lazy, h, 4, MSG_DONTWAIT | MSG_NOSIGNAL) != 4)
			break;
		if (send(lazy, s, n, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n)
			break;
		pump(f, 0);
	}
	pump(f, 50);
	/* not all served: its input waits while its answers do */
	assert_true(f->served < sent || sent < 4000);
	assert_true(f->served <= 2 * USERSOCK_MAX_OUT / 2048);
	int before = f->served;
	send_msg(good, "still here");
	expect(f, good, "re:still here");
	assert_int_equal(f->served, before + 1);
	close(lazy);
	close(good);
}

static void test_deadlines(void **state)
{
	struct fixture *f = *state;

	usersock_close(&f->us);
	assert_int_equal(open_us(f, 0, 100), 0);
	int silent = conn(f), lazy = conn(f), held = conn(f);
	uint8_t *s = malloc(4 + 60000);
	assert_non_null(s);
	/* answers of 5 x 60 kB: more than the kernel holds for it */
	memset(s, 'z', 4 + 60000);
	s[0] = 0, s[1] = 0, s[2] = 60000 >> 8, s[3] = 60000 & 0xff;
	for (int i = 0; i < 5; i++)
		send_pumped(f, lazy, s, 4 + 60000);
	free(s);
	send_msg(held, "wait for the writer");
	pump(f, 400);
	/* the node owes held its answer: its time does not run */
	expect(f, silent, "");
	char tmp[65536];
	ssize_t got = 0, n;
	while ((n = recv(lazy, tmp, sizeof(tmp), MSG_DONTWAIT)) > 0)
		got += n;
	assert_true(got < 5 * 60007); /* cut off: closed before all of it */
	assert_int_equal(n, 0);
	assert_int_equal(f->nheld, 1);
	assert_int_equal(usersock_answer(f->us, f->held[0], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"late", 4),
	                 0);
	expect(f, held, "late");
	close(silent);
	close(lazy);
	close(held);
}

static void test_cap(void **state)
{
	struct fixture *f = *state;
	int fds[65];

	usersock_close(&f->us);
	assert_int_equal(open_us(f, 64, 0), 0);
	for (int i = 0; i < 65; i++) {
		fds[i] = conn(f);
		pump(f, 1);
	}
	pump(f, 10);
	/* the oldest was closed for the 65th */
	expect(f, fds[0], "");
	for (int i = 1; i < 65; i++) {
		char s[16], want[32];
		snprintf(s, sizeof(s), "c%d", i);
		snprintf(want, sizeof(want), "re:c%d", i);
		send_msg(fds[i], s);
		expect(f, fds[i], want);
	}
	for (int i = 0; i < 65; i++)
		close(fds[i]);
}

/* A round looks at the slots up to the highest in use: connections that
 * end below a live one leave it served, new ones take the freed slots
 * (and above: the highest then grows again), and once the top one ends
 * the rest are still served. */
static void test_slots_reused(void **state)
{
	struct fixture *f = *state;
	int fds[8];

	for (int i = 0; i < 5; i++) {
		fds[i] = conn(f);
		pump(f, 1);
	}
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	pump(f, 10);
	send_msg(fds[4], "top");
	expect(f, fds[4], "re:top");
	for (int i = 0; i < 6; i++) { /* slots 0-3, then 5 and 6 */
		fds[i == 4 ? 7 : i] = conn(f);
		pump(f, 1);
	}
	for (int i = 0; i < 8; i++) {
		char s[16], want[32];
		if (i == 6)
			continue;
		snprintf(s, sizeof(s), "c%d", i);
		snprintf(want, sizeof(want), "re:c%d", i);
		send_msg(fds[i], s);
		expect(f, fds[i], want);
	}
	close(fds[5]);
	close(fds[7]);
	pump(f, 10);
	send_msg(fds[0], "low");
	expect(f, fds[0], "re:low");
	for (int i = 0; i < 5; i++)
		close(fds[i]);
}

/* More than USERSOCK_MAX_INFLIGHT requests held at the writer: the rest
 * wait unread until answers go out, then are taken in their turn. */
static void test_inflight_bound(void **state)
{
	struct fixture *f = *state;
	int fd = conn(f);
	int total = USERSOCK_MAX_INFLIGHT + 100;

	for (int i = 0; i < total; i++) {
		send_msg(fd, "w");
		if (i % 64 == 0)
			pump(f, 1);
	}
	pump(f, 50);
	assert_int_equal(f->nheld, USERSOCK_MAX_INFLIGHT);
	assert_int_equal(usersock_answer(f->us, f->held[0], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"a0", 2),
	                 0);
	expect(f, fd, "a0");
	pump(f, 20);
	assert_int_equal(f->nheld, USERSOCK_MAX_INFLIGHT + 1);
	/* answered last to first: sent in order all the same */
	for (int i = f->nheld - 1; i >= 1; i--)
		assert_int_equal(usersock_answer(f->us, f->held[i],
		                                 USERSOCK_ID_LEN,
		                                 (const uint8_t *)"b", 1),
		                 0);
	for (int i = 1; i < f->nheld; i++)
		expect(f, fd, "b");
	pump(f, 50);
	assert_int_equal(f->nheld, total);
	close(fd);
}

/* EOF after the requests: they are still answered, then closed. */
static void test_half_close(void **state)
{
	struct fixture *f = *state;
	int fd = conn(f);

	send_msg(fd, "wheld");
	send_msg(fd, "after");
	shutdown(fd, SHUT_WR);
	pump(f, 20);
	assert_int_equal(f->nheld, 1);
	assert_int_equal(usersock_answer(f->us, f->held[0], USERSOCK_ID_LEN,
	                                 (const uint8_t *)"held", 4),
	                 0);
	expect(f, fd, "held");
	expect(f, fd, "re:after");
	expect(f, fd, "");
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_byte_at_a_time, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_in_order, setup, teardown),
	        cmocka_unit_test_setup_teardown(
	                test_forwarded_to_its_connection, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_too_large, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_never_reads, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_deadlines, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_cap, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_slots_reused, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_inflight_bound, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_half_close, setup,
	                                        teardown),
	};
	fx_group_setup("test_usersock", LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
