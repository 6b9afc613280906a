/*
 * bench_zmq_floor: what ZeroMQ alone costs on this machine, the floor under
 * bench/run's push-check figures.
 *
 * An echo server (one thread, a ROUTER bound on ipc:// as the node's
 * user socket was before issue 23, answering each request with its own
 * bytes and doing nothing else) and N client threads with a REQ socket each, as bench_control's
 * check clients, timed the same way: closed loop, S seconds, nearest-rank
 * percentiles.  Whatever the node's reader does per check comes on top of
 * this; a target below the floor cannot be met by any handler.
 *
 * With --unix, the same echo over a plain unix socket instead, framed
 * as the node's user socket is now (SOCK_STREAM, a 4-byte big-endian
 * length before each message: node/requests/usersock.h), one connection
 * per client, one server thread polling them all: the floor of the
 * node's own transport (issue 23: measure both, keep the faster).
 *
 * With --unix --conn-each, a connection per request, as the keys
 * socket serves grant-keys (node/requests/keysock.h): the client
 * connects, sends a line, reads the echo until the server closes, and
 * closes; the server accepts, reads the line, sends it back and closes.
 *
 * The echo server runs in a process of its own, as the node does apart
 * from grant-shell: a reply then wakes a thread of another address space,
 * as the node's does.  --server thread keeps it a thread of the clients'
 * process (the floor before 2026-12-06), where each hand-over between
 * server and client is a switch within one address space: 0-4 % faster
 * on the test machine (docs/benchmarks.md).
 *
 *   bench_zmq_floor --dir DIR [--clients LIST] [--secs S] [--bytes N]
 *                   [--unix [--conn-each]] [--server process|thread]
 *
 * Prints one line per client count:
 *   zmq floor clients=N ops=... ops/s=... p50_us=... p99_us=... cpu%: ...
 *   (unix floor clients=N ... with --unix; unix-conn floor with
 *   --conn-each)
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"

const char bench_prog[] = "bench_zmq_floor";

#define CLIENTS_MAX 64
#define LAT_MAX (1u << 22)

struct client {
	pthread_t thread;
	bool unix_sock; /* endpoint is a unix socket's path */
	bool conn_each; /* a connection per request (with unix_sock) */
	void *ctx;
	const char *endpoint;
	size_t bytes;
	uint64_t until_ns;
	uint64_t *lat;   /* ns, one per request */
	size_t nlat;
	long fails;
};

static uint64_t cpu_ns(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		       1000000000u +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
		       1000u;
}

/* The CPU time (user and system) of process pid so far, from
 * /proc/PID/stat; 0 when it cannot be read. */
static uint64_t proc_cpu_ns(pid_t pid)
{
	char path[64], line[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	p = fgets(line, sizeof(line), f);
	fclose(f);
	/* after the command's ")": state is field 3, utime 14, stime 15 */
	if (!p || !(p = strrchr(line, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		   &ut, &st) != 2)
		return 0;
	return (ut + st) * (1000000000u / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* ---- the echo server ---------------------------------------------------- */

struct server {
	pthread_t thread;
	void *sock;
	volatile bool stop;
	uint64_t cpu_ns; /* the thread's own CPU time */
};

static void *server_main(void *arg)
{
	struct server *sv = arg;
	zmq_pollitem_t it = { sv->sock, 0, ZMQ_POLLIN, 0 };
	struct timespec ts;

	while (!sv->stop) {
		if (zmq_poll(&it, 1, 50) <= 0)
			continue;
		/* [identity][""][payload]: send each frame straight back */
		for (;;) {
			zmq_msg_t m;
			int more;
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, sv->sock, ZMQ_DONTWAIT) < 0) {
				zmq_msg_close(&m);
				break;
			}
			more = zmq_msg_more(&m);
			if (zmq_msg_send(&m, sv->sock,
					 more ? ZMQ_SNDMORE : 0) < 0)
				zmq_msg_close(&m);
		}
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	sv->cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return NULL;
}

/* The unix echo: fds[0] listens, the rest are clients; each whole
 * message (length and bytes) goes straight back. */
struct userver {
	pthread_t thread;
	int lfd;
	bool conn_each; /* a line each connection, echoed, then closed */
	volatile bool stop;
};

struct uconn {
	char buf[8192];
	size_t len;
};

/* Read what waits on fd into c: 1 something came, 0 nothing yet, -1 the
 * client went (or an error). */
static int uconn_recv(int fd, struct uconn *c)
{
	ssize_t got = recv(fd, c->buf + c->len, sizeof(c->buf) - c->len,
			   MSG_DONTWAIT);
	if (got < 0 && errno == EAGAIN)
		return 0;
	if (got <= 0)
		return -1;
	c->len += (size_t)got;
	return 1;
}

/* Read what waits on fd and echo every whole message; false when the
 * client went. */
static bool uconn_serve(int fd, struct uconn *c)
{
	int got = uconn_recv(fd, c);
	if (got <= 0)
		return got == 0;
	size_t off = 0;
	while (c->len - off >= 4) {
		size_t n = 4 + bench_frame_len(c->buf + off);
		if (n > sizeof(c->buf))
			return false;
		if (c->len - off < n)
			break;
		if (send(fd, c->buf + off, n, MSG_NOSIGNAL) != (ssize_t)n)
			return false;
		off += n;
	}
	memmove(c->buf, c->buf + off, c->len - off);
	c->len -= off;
	return true;
}

/* --conn-each: read what waits on fd; once the line is whole, echo it
 * and say the connection is done (false), as when the client went. */
static bool uconn_serve_line(int fd, struct uconn *c)
{
	int got = uconn_recv(fd, c);
	if (got <= 0)
		return got == 0;
	if (!memchr(c->buf, '\n', c->len))
		return c->len < sizeof(c->buf);
	/* a failed send shows as the client's failure (its read times out
	 * or ends short): the server has nothing else to do with it */
	(void)send(fd, c->buf, c->len, MSG_NOSIGNAL | MSG_DONTWAIT);
	return false;
}

static void *userver_main(void *arg)
{
	struct userver *sv = arg;
	struct pollfd fds[CLIENTS_MAX + 1];
	struct uconn *cs = calloc(CLIENTS_MAX + 1, sizeof(*cs));
	nfds_t n = 1;

	if (!cs)
		die("server: out of memory");
	fds[0] = (struct pollfd){ sv->lfd, POLLIN, 0 };
	while (!sv->stop) {
		if (poll(fds, n, 50) <= 0)
			continue;
		for (nfds_t i = 1; i < n; i++) {
			if (!fds[i].revents ||
			    (sv->conn_each ? uconn_serve_line(fds[i].fd, &cs[i])
					   : uconn_serve(fds[i].fd, &cs[i])))
				continue;
			close(fds[i].fd); /* the client went */
			fds[i] = fds[n - 1];
			cs[i] = cs[n - 1];
			n--;
			i--;
		}
		/* every connection waiting (--conn-each: one a request),
		 * as the keys socket accepts them */
		while (fds[0].revents && n < CLIENTS_MAX + 1) {
			int fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK);
			if (fd < 0)
				break;
			cs[n].len = 0;
			fds[n++] = (struct pollfd){ fd, POLLIN, 0 };
		}
	}
	for (nfds_t i = 1; i < n; i++)
		close(fds[i].fd);
	free(cs);
	return NULL;
}

static void unix_addr(struct sockaddr_un *a, const char *path)
{
	size_t n = strlen(path);

	if (n >= sizeof(a->sun_path))
		die("socket path too long for a unix socket: %s", path);
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path, path, n);
}

/* ---- the clients -------------------------------------------------------- */

/* One request framed as wire.h does and its echo. */
static bool unix_call(int fd, const char *req, size_t len, char *rep)
{
	if (send(fd, req, 4 + len, MSG_NOSIGNAL) != (ssize_t)(4 + len))
		return false;
	return bench_recv_all(fd, rep, 4) && bench_frame_len(rep) == len &&
	       bench_recv_all(fd, rep + 4, len);
}

/* --conn-each: one request on a connection of its own, as grant-keys
 * asks the keys socket: connect, a line out, the echo in until the
 * server closes, close. */
static bool unix_call_conn(const struct sockaddr_un *a, const char *req,
			   size_t len, char *rep)
{
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t have = 0;
	ssize_t got = 0;

	if (fd < 0)
		return false;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0 ||
	    send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
		close(fd);
		return false;
	}
	while (have <= len &&
	       ((got = recv(fd, rep + have, len + 1 - have, 0)) > 0 ||
		(got < 0 && errno == EINTR)))
		have += got > 0 ? (size_t)got : 0;
	close(fd);
	return got == 0 && have == len;
}

/* A client of the unix echo, --conn-each: a connection a request. */
static void unix_conn_client(struct client *c, char *req, char *rep)
{
	struct sockaddr_un a;
	size_t n = c->bytes;

	unix_addr(&a, c->endpoint);
	memset(req, 'f', n);
	req[n - 1] = '\n';
	for (int i = 0; i < 20; i++) /* warm up, as bench_control */
		if (!unix_call_conn(&a, req, n, rep))
			die("warm-up: %s", strerror(errno));
	while (c->nlat < LAT_MAX) {
		uint64_t t0 = now_ns();
		if (t0 >= c->until_ns)
			break;
		if (!unix_call_conn(&a, req, n, rep)) {
			c->fails++;
			break;
		}
		c->lat[c->nlat++] = now_ns() - t0;
	}
}

/* A client of the unix echo: one connection, closed loop. */
static void unix_client(struct client *c, char *req, char *rep)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	size_t n = c->bytes;

	unix_addr(&a, c->endpoint);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect %s: %s", c->endpoint, strerror(errno));
	req[0] = (char)(n >> 24), req[1] = (char)(n >> 16);
	req[2] = (char)(n >> 8), req[3] = (char)n;
	for (int i = 0; i < 20; i++) /* warm up, as bench_control */
		if (!unix_call(fd, req, n, rep))
			die("warm-up: %s", strerror(errno));
	while (c->nlat < LAT_MAX) {
		uint64_t t0 = now_ns();
		if (t0 >= c->until_ns)
			break;
		if (!unix_call(fd, req, n, rep)) {
			c->fails++;
			break;
		}
		c->lat[c->nlat++] = now_ns() - t0;
	}
	close(fd);
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	/* room for the unix framing's length too */
	char *req = calloc(1, c->bytes + 4), *rep = malloc(c->bytes + 5);
	void *s;
	int zero = 0;

	if (c->unix_sock) {
		if (!req || !rep)
			die("client: out of memory");
		if (c->conn_each)
			unix_conn_client(c, req, rep);
		else
			unix_client(c, req, rep);
		free(req);
		free(rep);
		return NULL;
	}
	s = zmq_socket(c->ctx, ZMQ_REQ);
	if (!s || !req || !rep)
		die("client: %s", zmq_strerror(errno));
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_connect(s, c->endpoint) < 0)
		die("connect: %s", zmq_strerror(errno));
	for (int i = 0; i < 20; i++) /* warm up, as bench_control */
		if (zmq_send(s, req, c->bytes, 0) < 0 ||
		    zmq_recv(s, rep, c->bytes + 1, 0) < 0)
			die("warm-up: %s", zmq_strerror(errno));
	while (c->nlat < LAT_MAX) {
		uint64_t t0 = now_ns();
		if (t0 >= c->until_ns)
			break;
		if (zmq_send(s, req, c->bytes, 0) < 0 ||
		    zmq_recv(s, rep, c->bytes + 1, 0) != (int)c->bytes) {
			c->fails++;
			break;
		}
		c->lat[c->nlat++] = now_ns() - t0;
	}
	zmq_close(s);
	free(req);
	free(rep);
	return NULL;
}

/* server: the echo server's process (0: a thread of this one). */
static int run(void *ctx, const char *endpoint, int nclients, double secs,
	       size_t bytes, bool unix_sock, bool conn_each, pid_t server)
{
	struct client c[CLIENTS_MAX];
	uint64_t t0, t1, cpu0, cpu1, *all;
	size_t total = 0;
	long fails = 0;

	memset(c, 0, sizeof(c));
	t0 = now_ns();
	cpu0 = cpu_ns(RUSAGE_SELF) + (server ? proc_cpu_ns(server) : 0);
	for (int i = 0; i < nclients; i++) {
		c[i].ctx = ctx;
		c[i].unix_sock = unix_sock;
		c[i].conn_each = conn_each;
		c[i].endpoint = endpoint;
		c[i].bytes = bytes;
		c[i].until_ns = t0 + (uint64_t)(secs * 1e9);
		if (!(c[i].lat = malloc(LAT_MAX * sizeof(uint64_t))))
			die("malloc: %s", zmq_strerror(errno));
		if (pthread_create(&c[i].thread, NULL, client_main, &c[i]))
			die("pthread_create: %s", zmq_strerror(errno));
	}
	for (int i = 0; i < nclients; i++) {
		pthread_join(c[i].thread, NULL);
		total += c[i].nlat;
		fails += c[i].fails;
	}
	t1 = now_ns();
	cpu1 = cpu_ns(RUSAGE_SELF) + (server ? proc_cpu_ns(server) : 0);
	if (!(all = malloc((total ? total : 1) * sizeof(uint64_t))))
		die("malloc: %s", zmq_strerror(errno));
	total = 0;
	for (int i = 0; i < nclients; i++) {
		memcpy(all + total, c[i].lat, c[i].nlat * sizeof(uint64_t));
		total += c[i].nlat;
		free(c[i].lat);
	}
	qsort(all, total, sizeof(uint64_t), cmp_u64);
	double el = (double)(t1 - t0) / 1e9;
	printf("%s floor clients=%d ops=%zu secs=%.2f ops/s=%.0f "
	       "p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f failures=%ld "
	       "(cpu%%: echo server and clients together=%.0f/200; server: "
	       "%s)\n",
	       !unix_sock ? "zmq" : conn_each ? "unix-conn" : "unix",
	       nclients, total, el,
	       (double)total / el,
	       (double)pct(all, total, 50) / 1e3,
	       (double)pct(all, total, 90) / 1e3,
	       (double)pct(all, total, 99) / 1e3,
	       total ? (double)all[total - 1] / 1e3 : 0.0, fails,
	       100.0 * (double)(cpu1 - cpu0) / 1e9 / el,
	       server ? "own process" : "a thread of the clients' process");
	fflush(stdout);
	free(all);
	return fails ? 1 : 0;
}

/* In the echo server's own process: die with the parent, and take no
 * signal the parent's terminal sends. */
static void server_process(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(0); /* the parent went before the line above */
	signal(SIGINT, SIG_IGN);
}

/* Wait until the server process has bound path (an ipc:// socket). */
static void wait_bound(const char *path, pid_t server)
{
	for (int i = 0; i < 5000; i++) {
		if (access(path, F_OK) == 0)
			return;
		if (waitpid(server, NULL, WNOHANG) == server)
			die("the echo server exited");
		usleep(1000);
	}
	die("the echo server did not bind %s within 5 s", path);
}

static void usage(FILE *f)
{
	fputs("usage: bench_zmq_floor --dir DIR [--clients LIST] [--secs S] "
	      "[--bytes N]\n"
	      "                       [--unix [--conn-each]] "
	      "[--server process|thread]\n\n"
	      "Time a ZeroMQ echo over ipc:// (a ROUTER thread that only "
	      "echoes, REQ\nclients in a closed loop): the floor under the "
	      "node's push-check figures.\nLIST defaults to 1,8,32; S to 5; "
	      "N (request size) to 96.  The socket is\nDIR/floor.sock.  "
	      "--unix: the same echo over a plain unix socket framed as the "
	      "node's\n(SOCK_STREAM, a 4-byte length before each message; a "
	      "connection per\nclient, one polling server thread), "
	      "DIR/floor-unix.sock.\n--conn-each (with --unix): a connection "
	      "per request, as grant-keys asks\nthe keys socket: a line out, "
	      "its echo in, the server closes.\n--server process (the default): the "
	      "echo server is a process of its own,\nas the node is apart from "
	      "its clients; --server thread: a thread of the\nclients' process "
	      "(cheaper hand-overs: no switch of address space).\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "clients", required_argument, NULL, 'c' },
		{ "secs", required_argument, NULL, 's' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "unix", no_argument, NULL, 'u' },
		{ "server", required_argument, NULL, 'S' },
		{ "conn-each", no_argument, NULL, 'e' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = NULL, *list = "1,8,32";
	double secs = 5;
	size_t bytes = 96;
	char endpoint[300], *copy, *tok, *save;
	struct server sv = { 0 };
	struct userver usv = { 0 };
	bool unix_sock = false, own_process = true;
	pid_t server = 0; /* the echo server's process, when it has one */
	void *ctx = NULL, *cctx; /* the server's and the clients' */
	int opt, rc = 0;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'c': list = optarg; break;
		case 's': secs = atof(optarg); break;
		case 'b': bytes = (size_t)strtoul(optarg, NULL, 10); break;
		case 'u': unix_sock = true; break;
		case 'e': usv.conn_each = true; break;
		case 'S':
			if (strcmp(optarg, "process") && strcmp(optarg, "thread")) {
				usage(stderr);
				return 2;
			}
			own_process = !strcmp(optarg, "process");
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!dir || secs <= 0 || bytes < 1 || bytes > 4096 ||
	    strlen(dir) > 200 || (usv.conn_each && !unix_sock)) {
		usage(stderr);
		return 2;
	}
	if (unix_sock) {
		struct sockaddr_un a;
		snprintf(endpoint, sizeof(endpoint), "%s/floor-unix.sock", dir);
		unix_addr(&a, endpoint);
		unlink(endpoint);
		usv.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (usv.lfd < 0 ||
		    bind(usv.lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    listen(usv.lfd, CLIENTS_MAX) < 0)
			die("bind %s: %s", endpoint, strerror(errno));
		if (own_process) {
			if ((server = fork()) < 0)
				die("fork: %s", strerror(errno));
			if (server == 0) {
				server_process();
				userver_main(&usv); /* until killed */
				_exit(0);
			}
		} else if (pthread_create(&usv.thread, NULL, userver_main,
					  &usv)) {
			die("pthread_create: %s", strerror(errno));
		}
		ctx = cctx = NULL;
	} else {
		snprintf(endpoint, sizeof(endpoint), "ipc://%s/floor.sock",
			 dir);
		unlink(endpoint + strlen("ipc://"));
		/* no ZeroMQ context may cross a fork: the child makes its own */
		if (own_process && (server = fork()) < 0)
			die("fork: %s", strerror(errno));
		if (!own_process || server == 0) {
			if (!(ctx = zmq_ctx_new()) ||
			    !(sv.sock = zmq_socket(ctx, ZMQ_ROUTER)) ||
			    zmq_bind(sv.sock, endpoint) < 0)
				die("bind: %s", zmq_strerror(errno));
		}
		if (server == 0 && own_process) {
			server_process();
			server_main(&sv); /* until killed */
			_exit(0);
		}
		if (!own_process &&
		    pthread_create(&sv.thread, NULL, server_main, &sv))
			die("pthread_create: %s", zmq_strerror(errno));
		if (own_process)
			wait_bound(endpoint + strlen("ipc://"), server);
		if (!(cctx = zmq_ctx_new()))
			die("zmq_ctx_new: %s", zmq_strerror(errno));
	}
	if (!(copy = strdup(list)))
		die("strdup: %s", zmq_strerror(errno));
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int n = atoi(tok);
		if (n < 1 || n > CLIENTS_MAX) {
			fprintf(stderr, "bench_zmq_floor: 1 to %d clients\n",
				CLIENTS_MAX);
			rc = 2;
			break;
		}
		rc |= run(cctx, endpoint, n, secs, bytes, unix_sock,
			  usv.conn_each, server);
	}
	free(copy);
	if (server > 0) {
		kill(server, SIGKILL);
		waitpid(server, NULL, 0);
		if (unix_sock) {
			close(usv.lfd);
			unlink(endpoint);
			return rc;
		}
		zmq_ctx_term(cctx);
		unlink(endpoint + strlen("ipc://"));
		return rc;
	}
	if (unix_sock) {
		usv.stop = true;
		pthread_join(usv.thread, NULL);
		close(usv.lfd);
		unlink(endpoint);
		return rc;
	}
	sv.stop = true;
	pthread_join(sv.thread, NULL);
	zmq_close(sv.sock);
	zmq_ctx_term(cctx);
	zmq_ctx_term(ctx);
	unlink(endpoint + strlen("ipc://"));
	return rc;
}
