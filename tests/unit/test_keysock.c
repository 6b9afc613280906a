/*
 * test_keysock.c: node/requests/keysock.h, the keys socket, driven by the test
 * itself (one thread: the test's clients write into the kernel's buffers,
 * then the test runs the server's poll rounds).  The lookup is a stub:
 * what is tested here is the handling of untrusted input and of slow
 * clients; test_readers.c asks the real index through the reader thread.
 *   - a good line is answered and the connection closed;
 *   - malformed lines (too long, a NUL, no newline before EOF, empty,
 *     "\r\n", two lines) get an error line, or nothing, never a crash;
 *   - a lookup that fails answers "!4";
 *   - a client that never sends is closed at its deadline and does not
 *     stall other clients meanwhile;
 *   - one connection past the cap closes the oldest.
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
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "keysock.h"
#include "log.h"

struct fixture {
	char dir[32];
	char path[64];
	struct keysock *ks;
	int lookups;
	char last[KEYSOCK_MAX_LINE + 1];
};

static int stub(void *arg, const char *fp, struct buf *out)
{
	struct fixture *f = arg;

	f->lookups++;
	snprintf(f->last, sizeof(f->last), "%s", fp);
	if (!strcmp(fp, "SHA256:fail"))
		return GD_EIO;
	if (!strcmp(fp, "SHA256:alice"))
		buf_printf(out, "alice\tssh-ed25519 AAAA alice\n");
	return 0;
}

static int open_ks(struct fixture *f, int max_conns, int64_t deadline_ms)
{
	struct keysock_opts o = { .path = f->path, .mode = 0660,
				  .answer = stub, .arg = f,
				  .max_conns = max_conns,
				  .deadline_ms = deadline_ms };
	keysock_close(&f->ks);
	return keysock_open(&f->ks, &o);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_keysock.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/keys.sock", f->dir);
	if (open_ks(f, 0, 0) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	keysock_close(&f->ks);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* One poll round of the server, waiting at most ms. */
static void round_ms(struct fixture *f, long ms)
{
	zmq_pollitem_t items[1 + KEYSOCK_MAX_CONNS];
	long timeout = -1;
	int n = keysock_items(f->ks, items, &timeout);

	if (timeout < 0 || timeout > ms)
		timeout = ms;
	if (zmq_poll(items, n, timeout) > 0)
		keysock_serve(f->ks, items, n);
}

static int client(struct fixture *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void say(int fd, const void *p, size_t len)
{
	assert_int_equal(send(fd, p, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Run the server until fd's answer is whole (the node closed): into out.
 * Returns 0, or -1 when it did not close within ms. */
static int answer_of(struct fixture *f, int fd, struct buf *out, long ms)
{
	uint64_t end = clock_mono_ms() + (uint64_t)ms;

	buf_reset(out);
	while (clock_mono_ms() < end) {
		char chunk[512];
		round_ms(f, 10);
		ssize_t n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			buf_add(out, "", 1);
			out->len--;
			return 0;
		}
		if (n > 0)
			buf_add(out, chunk, (size_t)n);
	}
	return -1;
}

static void ask(struct fixture *f, const void *line, size_t len,
		const char *want)
{
	struct buf out = BUF_INIT;
	int fd = client(f);

	say(fd, line, len);
	assert_int_equal(answer_of(f, fd, &out, 3000), 0);
	assert_string_equal(buf_str(&out), want);
	close(fd);
	buf_free(&out);
}

static void test_lookup(void **state)
{
	struct fixture *f = *state;
	struct stat st;

	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	ask(f, "SHA256:alice\n", 13, "alice\tssh-ed25519 AAAA alice\n");
	ask(f, "SHA256:bob\n", 11, "");
	ask(f, "SHA256:alice\r\n", 14, "alice\tssh-ed25519 AAAA alice\n");
	ask(f, "SHA256:fail\n", 12, "!4 the node failed to decide\n");
	assert_int_equal(f->lookups, 4);
}

static void test_malformed(void **state)
{
	struct fixture *f = *state;
	char big[3 * KEYSOCK_MAX_LINE];
	struct buf out = BUF_INIT;

	/* too long: refused after KEYSOCK_MAX_LINE bytes, never looked up */
	memset(big, 'A', sizeof(big));
	ask(f, big, KEYSOCK_MAX_LINE, "!2 line too long\n");
	ask(f, big, sizeof(big), "!2 line too long\n");
	/* a NUL inside */
	ask(f, "SHA256:al\0ice\n", 14, "!2 a NUL byte in the line\n");
	assert_int_equal(f->lookups, 0);
	/* empty and binary lines are the lookup's to refuse */
	ask(f, "\n", 1, "");
	assert_string_equal(f->last, "");
	ask(f, "\xff\xfe\x01\n", 4, "");
	/* two lines: the first is answered, the rest ignored */
	ask(f, "SHA256:alice\nSHA256:bob\n", 24,
	    "alice\tssh-ed25519 AAAA alice\n");
	assert_string_equal(f->last, "SHA256:alice");
	assert_int_equal(f->lookups, 3);
	/* EOF before a newline: closed, nothing looked up */
	int fd = client(f);
	say(fd, "SHA256:alice", 12);
	shutdown(fd, SHUT_WR);
	assert_int_equal(answer_of(f, fd, &out, 3000), 0);
	assert_int_equal(out.len, 0);
	close(fd);
	/* a client gone before its answer */
	fd = client(f);
	say(fd, "SHA256:alice\n", 13);
	close(fd);
	for (int i = 0; i < 5; i++)
		round_ms(f, 20);   /* accepted, then read: still looked up */
	assert_int_equal(f->lookups, 4);
	ask(f, "SHA256:alice\n", 13, "alice\tssh-ed25519 AAAA alice\n");
	buf_free(&out);
}

/* A client that sends nothing holds its slot until its deadline, and the
 * others are answered meanwhile. */
static void test_slow_client(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT;

	assert_int_equal(open_ks(f, 4, 300), 0);
	int slow = client(f);
	round_ms(f, 10);           /* accepted */
	uint64_t t0 = clock_mono_ms();
	for (int i = 0; i < 20; i++)
		ask(f, "SHA256:alice\n", 13, "alice\tssh-ed25519 AAAA alice\n");
	assert_true(clock_mono_ms() - t0 < 300);   /* none waited for it */
	/* closed at its deadline, with nothing said */
	assert_int_equal(answer_of(f, slow, &out, 3000), 0);
	assert_int_equal(out.len, 0);
	assert_true(clock_mono_ms() - t0 >= 250);
	close(slow);
	/* a client that sends half a line and stops: the same */
	slow = client(f);
	say(slow, "SHA256:al", 9);
	assert_int_equal(answer_of(f, slow, &out, 3000), 0);
	assert_int_equal(out.len, 0);
	close(slow);
	buf_free(&out);
}

/* At the cap, a new connection closes the oldest. */
static void test_cap(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT;
	int fds[3];

	assert_int_equal(open_ks(f, 2, 5000), 0);
	for (int i = 0; i < 3; i++) {
		fds[i] = client(f);
		round_ms(f, 10);
	}
	/* the first was closed to make room: EOF, nothing said */
	assert_int_equal(answer_of(f, fds[0], &out, 1000), 0);
	assert_int_equal(out.len, 0);
	/* the others are served */
	for (int i = 1; i < 3; i++) {
		say(fds[i], "SHA256:alice\n", 13);
		assert_int_equal(answer_of(f, fds[i], &out, 3000), 0);
		assert_string_equal(buf_str(&out),
				    "alice\tssh-ed25519 AAAA alice\n");
	}
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	buf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_lookup),
		T(test_malformed),
		T(test_slow_client),
		T(test_cap),
#undef T
	};
	log_init("test_keysock", false, LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
