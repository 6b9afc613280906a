/*
 * bench_control.c: drive a running node's user socket from many concurrent
 * clients and print the SPEC 6 figures for `2fa val` and the push check,
 * and the rate of `2fa isval` (issue 23 puts it beside the push check).
 *
 * Each client is a thread with its own REQ socket and its own user, so the
 * node sees what many grant-shell processes would send: one request in
 * flight per connection.  Users are enrolled with HOTP so every thread
 * makes fresh valid tokens from its own counter (the node accepts a
 * counter ahead of its mark within hotp_lookahead and moves the mark past
 * it); no two threads ever share a user, so no token is ever a replay.
 * Every reply is checked: a refusal is counted and printed, never timed as
 * if it were a success.
 *
 * Runs: val with N clients; check with N clients (each first validates its
 * address once, untimed, so the check is allowed); isval likewise (the
 * same read as the check's grant lookup, answered True); key lookups on
 * the keys socket, a connection each as grant-keys makes them, for each
 * client's own key (every user is made with one); and a mixed run, vals
 * and checks at once: a check is a read, answered by the reader thread
 * from the newest read view (node/requests/readers.h) while the writer
 * thread takes the vals and their commits; the two share the cores and
 * the store, so the mixed run shows what vals cost the checks and the
 * reverse.
 *
 * Each run starts once the node is quiet (--node-pid: under 5% of a core
 * for 0.5 s, at most 30 s), so that no run pays for the flush and
 * compaction of the run before it.
 *
 * Setup (users, enrollments, the repository) goes over the admin socket
 * and is not timed.  The users TAG000.. and the repository TAG-bench must
 * not exist yet (--tag, default "b").
 *
 * The fsync baseline (--fsync-dir) times synced 4 KiB appends to a file on
 * the data directory's file system, before and after the runs (a shared
 * disk drifts): one sync per request is the cost group commit shares among
 * the requests of a batch.  RocksDB syncs its log with fdatasync.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liboath/oath.h>
#include <sodium.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <stdbool.h>

#include "bench.h"
#include "config.h"
#include "err.h"
#include "wire.h"
#include "banned.h"

#define MAX_CLIENTS 64
/* check clients must write the repository, and one request names at most
 * GD_CTL_MAX_ARGS - 1 writers */
#define MAX_WRITERS (GD_CTL_MAX_ARGS - 1)
#define MAX_RUNS 8
#define SECRET_LEN 20
#define TIMEOUT_MS 10000
#define WARMUP_REQS 20
#define MAX_SAMPLES (1u << 20) /* per thread; bounds memory and the loop */
#define MAX_FAILS 1000         /* per thread: past this, stop and report */
#define SYNC_WRITES 200

enum kind { VAL, CHECK, ISVAL, KEYS };

struct client {
	char user[32];
	char ip[32];
	char key[128];          /* its SSH key's line, and the fingerprint */
	char fp[64];            /* sshd's %f: what grant-keys asks for */
	uint8_t secret[SECRET_LEN];
	uint64_t counter;       /* next HOTP counter to use; kept across runs */
};

struct run {
	const char *path;       /* the user socket */
	pthread_barrier_t ready; /* every client connected and warmed up */
	pthread_barrier_t go;    /* deadline_ns is set */
	uint64_t deadline_ns;
	uint64_t quota;          /* > 0: stop after this many requests */
	atomic_uint_fast64_t taken;
};

struct worker {
	struct run *run;
	struct client *cl;
	enum kind kind;
	pthread_t th;
	uint64_t *lat_ns;
	size_t n;
	uint64_t end_ns;
	long fails;
	char first_err[256];
};

struct result {
	size_t ops;
	long fails;
	double secs, ops_s;
	uint64_t p50, p90, p99, max; /* ns */
};

/* CPU use over a run, in % of one core: this program, the node (< 0:
 * unknown) and the whole machine (< 0: unknown), so a reader sees when
 * the clients, or other work on the machine, took the node's cores. */
struct cpu {
	double client, node, host;
};

const char bench_prog[] = "bench_control";

static struct client clients[MAX_CLIENTS];
static const char *tag = "b";
static char repo[64];
static const char *sock_s;     /* the user socket's path */
static const char *keys_s;     /* the keys socket's path; NULL: none */
static double secs = 5;
static uint64_t ops_per_run; /* --ops: requests per run; 0: run for secs */
static long node_pid;

/* ---- setup over the admin socket ---------------------------------------- */

static void admin(const char *sock, const char *cmd, char **args, size_t n)
{
	Grantd__V1__Request rq = GRANTD__V1__REQUEST__INIT;
	Grantd__V1__Reply *rep = NULL;

	rq.version = GD_WIRE_VERSION;
	rq.has_version = 1;
	rq.cmd = (char *)cmd;
	rq.args = args;
	rq.n_args = n;
	if (wire_call(&rep, sock, &rq, TIMEOUT_MS) < 0)
		die("setup '%s': no answer from the admin socket %s", cmd,
		    sock);
	if (!rep->has_status || rep->status != 0)
		die("setup '%s %s' refused: %s", cmd, n ? args[0] : "",
		    rep->err ? rep->err : "(no reason)");
	grantd__v1__reply__free_unpacked(rep, NULL);
}

/* nusers HOTP users; the first MAX_WRITERS of them may write the
 * repository. */
static void setup(const char *admin_sock, int nusers)
{
	char *args[GD_CTL_MAX_ARGS];
	int nw = nusers < MAX_WRITERS ? nusers : MAX_WRITERS;

	for (int i = 0; i < nusers; i++) {
		struct client *c = &clients[i];
		char *b32 = NULL;
		size_t len = 0;

		snprintf(c->user, sizeof(c->user), "%s%03d", tag, i);
		snprintf(c->ip, sizeof(c->ip), "127.0.9.%d", i + 1);
		if (getrandom(c->secret, SECRET_LEN, 0) != SECRET_LEN)
			die("getrandom failed");
		if (oath_base32_encode((const char *)c->secret, SECRET_LEN,
				       &b32, &len) != OATH_OK)
			die("base32 encode failed");
		char seed[64];
		snprintf(seed, sizeof(seed), "bench_control %s %d", tag, i);
		bench_ssh_key(c->key, sizeof(c->key), c->fp, sizeof(c->fp),
			      seed, c->user);
		args[0] = c->user;
		args[1] = "--key";
		args[2] = c->key;
		admin(admin_sock, "user.add", args, 3);
		args[1] = "--hotp";
		args[2] = "--secret";
		args[3] = b32;
		args[4] = "--digits";
		args[5] = "6";
		args[6] = "--counter";
		args[7] = "0";
		admin(admin_sock, "enroll", args, 8);
		free(b32);
	}
	args[0] = repo;
	args[1] = "--mode";
	args[2] = "required";
	admin(admin_sock, "repo.add", args, 3);
	for (int i = 0; i < nw; i++)
		args[1 + i] = clients[i].user;
	admin(admin_sock, "repo.writers", args, (size_t)nw + 1);
}

/* ---- one client --------------------------------------------------------- */

/* A connection to the user socket (wire.h), as grant-shell makes; -1
 * when none. */
static int open_conn(const char *path)
{
	int fd = wire_connect(path, TIMEOUT_MS);
	return fd < 0 ? -1 : fd;
}

/* A closed-loop client's connection: blocking, with the timeout as the
 * socket's own (SO_RCVTIMEO, SO_SNDTIMEO), so that a call is one send
 * and two reads, as the floor's unix client makes it (bench_zmq_floor.c
 * unix_call).  The ratio against that floor is then the node's and the
 * floor's serving, not two clients' ways of waiting: on 2 cores a client
 * that polls with a timer before each read took as much CPU a request as
 * the node (perf, 2026-12-05).  -1: none. */
static int open_conn_blocking(const char *path)
{
	struct timeval tv = { TIMEOUT_MS / 1000, TIMEOUT_MS % 1000 * 1000 };
	int fd = open_conn(path), fl;

	if (fd < 0)
		return -1;
	if ((fl = fcntl(fd, F_GETFL)) < 0 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One framed message (the 4-byte length already at frame[0..3]) out and
 * one answer in, into ans (cap bytes).  0, or GD_EUNREACH / GD_EPROTO. */
static int lean_call(int fd, const uint8_t *frame, size_t len, uint8_t *ans,
		     size_t cap, size_t *anslen)
{
	if (send(fd, frame, len, MSG_NOSIGNAL) != (ssize_t)len)
		return GD_EUNREACH;
	if (!bench_recv_all(fd, ans, 4))
		return GD_EUNREACH;
	*anslen = bench_frame_len(ans);
	if (*anslen > cap)
		return GD_EPROTO;
	return bench_recv_all(fd, ans, *anslen) ? 0 : GD_EUNREACH;
}

static void note_fail(struct worker *w, const char *what)
{
	if (!w->fails++)
		snprintf(w->first_err, sizeof(w->first_err), "%s", what);
}

/* One key lookup as grant-keys makes it (node/requests/keysock.h): a
 * connection of its own to the keys socket, "FINGERPRINT\n", the answer
 * read until the node closes.  Made as the floor's --conn-each client
 * makes its echo (bench_zmq_floor.c unix_call_conn), so that the ratio is
 * the two servers'.  0 when the answer names this client's user and key,
 * with *lat_ns from the socket's making to the close. */
static int keys_call(struct worker *w, uint64_t *lat_ns)
{
	struct client *c = w->cl;
	struct timeval tv = { TIMEOUT_MS / 1000, TIMEOUT_MS % 1000 * 1000 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[80], ans[512], want[sizeof(c->user) + sizeof(c->key) + 2];
	size_t have = 0, len = (size_t)snprintf(line, sizeof(line), "%s\n",
						c->fp);
	ssize_t got = 0;

	memcpy(sa.sun_path, keys_s, strlen(keys_s) + 1);
	uint64_t t0 = now_ns();
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, line, len, MSG_NOSIGNAL) != (ssize_t)len) {
		note_fail(w, "keys socket: no connection");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (have < sizeof(ans) - 1 &&
	       ((got = recv(fd, ans + have, sizeof(ans) - 1 - have, 0)) > 0 ||
		(got < 0 && errno == EINTR)))
		have += got > 0 ? (size_t)got : 0;
	close(fd);
	*lat_ns = now_ns() - t0;
	ans[have] = '\0';
	snprintf(want, sizeof(want), "%s\t%s\n", c->user, c->key);
	if (got != 0 || strcmp(ans, want)) {
		note_fail(w, got ? "keys socket: no answer within the timeout"
				 : "keys socket: the answer is not this "
				   "user's key");
		return -1;
	}
	return 0;
}

/* One request of kind and its answer; returns 0 when the node said
 * status 0 (and, for a check, named the repository's path), with *lat_ns
 * the time from sending the request to having decoded the answer. */
static int call(struct worker *w, enum kind kind, int *sock, uint64_t *lat_ns)
{
	Grantd__V1__Request rq = GRANTD__V1__REQUEST__INIT;
	Grantd__V1__Reply *rep;
	struct client *c = w->cl;
	char token[16], *args[1];
	uint8_t frame[4 + 512], ans[4096];
	size_t anslen;
	int rc = -1, e;

	if (kind == KEYS)
		return keys_call(w, lat_ns);
	rq.version = GD_WIRE_VERSION;
	rq.has_version = 1;
	rq.user = c->user;
	rq.client_ip = c->ip;
	rq.args = args;
	rq.n_args = 1;
	if (kind == VAL) {
		if (oath_hotp_generate((const char *)c->secret, SECRET_LEN,
				       c->counter++, 6, false,
				       OATH_HOTP_DYNAMIC_TRUNCATION,
				       token) != OATH_OK) {
			note_fail(w, "oath_hotp_generate failed");
			return -1;
		}
		rq.cmd = "2fa.val";
		args[0] = token;
	} else if (kind == ISVAL) {
		rq.cmd = "2fa.isval";
		rq.n_args = 0;
	} else {
		rq.cmd = "push.check";
		args[0] = repo;
	}
	size_t len = grantd__v1__request__get_packed_size(&rq);
	if (len > sizeof(frame) - 4) {
		note_fail(w, "request too large");
		return -1;
	}
	frame[0] = (uint8_t)(len >> 24), frame[1] = (uint8_t)(len >> 16);
	frame[2] = (uint8_t)(len >> 8), frame[3] = (uint8_t)len;
	grantd__v1__request__pack(&rq, frame + 4);
	uint64_t t0 = now_ns();
	if ((e = lean_call(*sock, frame, 4 + len, ans, sizeof(ans),
			   &anslen)) < 0) {
		note_fail(w, e == GD_EPROTO ? "reply too long" :
			  "no answer within the timeout");
		goto reopen;
	}
	rep = grantd__v1__reply__unpack(NULL, anslen, ans);
	*lat_ns = now_ns() - t0;
	if (!rep) {
		note_fail(w, "reply does not decode");
		return -1;
	}
	if (!rep->has_status || rep->status != 0) {
		char why[200];
		snprintf(why, sizeof(why), "%s status %d: %s", rq.cmd,
			 rep->has_status ? rep->status : -1,
			 rep->err ? rep->err : "(no reason)");
		why[strcspn(why, "\n")] = '\0';
		note_fail(w, why);
	} else if (kind == CHECK && !rep->path) {
		note_fail(w, "push.check allowed but named no path");
	} else {
		rc = 0;
	}
	grantd__v1__reply__free_unpacked(rep, NULL);
	return rc;
reopen:
	/* a connection that lost its answer is out of step; a token spent
	 * or not is fine, the next counter is within the lookahead */
	close(*sock);
	*sock = open_conn_blocking(w->run->path);
	return -1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *run = w->run;
	int sock = open_conn_blocking(run->path);

	/* Connect and warm up, untimed (failures still count): the first
	 * request pays for the ipc connection.  A check or isval needs a grant for
	 * this user and address: one val makes sure there is one. */
	uint64_t lat;
	if (sock >= 0 && w->kind != VAL && w->kind != KEYS)
		call(w, VAL, &sock, &lat);
	for (int i = 0; sock >= 0 && i < WARMUP_REQS; i++)
		call(w, w->kind, &sock, &lat);
	if (sock < 0)
		note_fail(w, "cannot open a socket");
	pthread_barrier_wait(&run->ready);
	pthread_barrier_wait(&run->go);
	while (sock >= 0 && w->n < MAX_SAMPLES && w->fails <= MAX_FAILS &&
	       now_ns() < run->deadline_ns &&
	       (!run->quota || atomic_fetch_add(&run->taken, 1) < run->quota))
		if (call(w, w->kind, &sock, &lat) == 0)
			w->lat_ns[w->n++] = lat;
	w->end_ns = now_ns();
	if (sock >= 0)
		close(sock);
	return NULL;
}

/* ---- one run: some val clients and some check clients at once ----------- */

static double cpu_self_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* utime + stime of the node, in seconds; < 0 when unknown. */
static double cpu_node_s(void)
{
	char path[64], line[1024];
	unsigned long ut, st;
	FILE *f;

	if (!node_pid)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", node_pid);
	if (!(f = fopen(path, "r")))
		return -1;
	char *p = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
	fclose(f);
	/* after "pid (comm)": state is field 3, utime 14, stime 15 */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Wait until the node has been quiet (under 5% of a core over 0.5 s)
 * before a run, at most 30 s: the flush and compaction that the run
 * before left behind then take no core from this one (2 cores: a check
 * run right after a val run lost up to a quarter of its rate to them).
 * Says how long it waited when it did, or that the node never was. */
static void await_node_quiet(void)
{
	const double window = 0.5, most = 30;
	double n0 = cpu_node_s(), waited = 0;
	struct timespec ts = { 0, 500000000 };

	if (n0 < 0)
		return;
	for (;;) {
		nanosleep(&ts, NULL);
		waited += window;
		double n1 = cpu_node_s();
		if (n1 < 0)
			return;
		if (n1 - n0 < 0.05 * window)
			break;
		if (waited >= most) {
			printf("node not quiet after %.0f s (%.0f%% of a core "
			       "in the last %.1f s): the run starts anyway\n",
			       most, 100 * (n1 - n0) / window, window);
			return;
		}
		n0 = n1;
	}
	if (waited > window)
		printf("node quiet after %.1f s (the run before's flush and "
		       "compaction)\n", waited - window);
}

/* Busy and total jiffies of all cores, from /proc/stat; 0 on failure. */
static int cpu_host(double *busy, double *total)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n != 8)
		return -1;
	*total = 0;
	for (int i = 0; i < 8; i++)
		*total += (double)v[i];
	*busy = *total - (double)v[3] - (double)v[4]; /* idle, iowait */
	return 0;
}

static void summarise(struct result *res, struct worker *w, int nw,
		      enum kind kind, uint64_t t0)
{
	uint64_t tend = t0, *all;
	size_t total = 0, k = 0;

	memset(res, 0, sizeof(*res));
	for (int i = 0; i < nw; i++)
		if (w[i].kind == kind)
			total += w[i].n;
	if (!(all = malloc((total ? total : 1) * sizeof(uint64_t))))
		abort();
	for (int i = 0; i < nw; i++) {
		if (w[i].kind != kind)
			continue;
		memcpy(all + k, w[i].lat_ns, w[i].n * sizeof(uint64_t));
		k += w[i].n;
		res->fails += w[i].fails;
		if (w[i].end_ns > tend)
			tend = w[i].end_ns;
	}
	qsort(all, total, sizeof(uint64_t), cmp_u64);
	res->ops = total;
	res->secs = (double)(tend - t0) / 1e9;
	res->ops_s = res->secs > 0 ? (double)total / res->secs : 0;
	res->p50 = pct(all, total, 50);
	res->p90 = pct(all, total, 90);
	res->p99 = pct(all, total, 99);
	res->max = total ? all[total - 1] : 0;
	free(all);
}

/* Run nval val clients (users 0..) and ncheck clients of kind other
 * (CHECK or ISVAL: the users after them) for secs seconds, all at once. */
static void run_clients(struct result *val, struct result *check,
			struct cpu *cpu, int nval, int ncheck,
			enum kind other)
{
	struct run run = { .path = sock_s, .quota = ops_per_run };
	int n = nval + ncheck;
	struct worker *w = calloc((size_t)n, sizeof(*w));
	double c0, n0, hb0 = 0, ht0 = 0, hb1 = 0, ht1 = 0;
	uint64_t t0;
	int h0;

	if (!w)
		abort();
	atomic_init(&run.taken, 0);
	pthread_barrier_init(&run.ready, NULL, (unsigned)n + 1);
	pthread_barrier_init(&run.go, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		w[i].run = &run;
		w[i].cl = &clients[i];
		w[i].kind = i < nval ? VAL : other;
		if (!(w[i].lat_ns = malloc(MAX_SAMPLES * sizeof(uint64_t))))
			abort();
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]))
			die("cannot start a thread");
	}
	/* the second barrier publishes the deadline to every thread */
	pthread_barrier_wait(&run.ready);
	await_node_quiet();
	c0 = cpu_self_s();
	n0 = cpu_node_s();
	h0 = cpu_host(&hb0, &ht0);
	t0 = now_ns();
	run.deadline_ns = t0 + (uint64_t)(secs * 1e9);
	pthread_barrier_wait(&run.go);
	for (int i = 0; i < n; i++) {
		pthread_join(w[i].th, NULL);
		if (w[i].fails)
			fprintf(stderr, "bench_control: user %s: %ld failed, "
				"first: %s\n", w[i].cl->user, w[i].fails,
				w[i].first_err);
	}
	double wall = (double)(now_ns() - t0) / 1e9;
	cpu->client = 100 * (cpu_self_s() - c0) / wall;
	double n1 = cpu_node_s();
	cpu->node = n0 >= 0 && n1 >= 0 ? 100 * (n1 - n0) / wall : -1;
	cpu->host = h0 == 0 && cpu_host(&hb1, &ht1) == 0 && ht1 > ht0 ?
			    100 * (hb1 - hb0) / (ht1 - ht0) *
				    (double)sysconf(_SC_NPROCESSORS_ONLN) :
			    -1;
	pthread_barrier_destroy(&run.ready);
	pthread_barrier_destroy(&run.go);
	summarise(val, w, n, VAL, t0);
	summarise(check, w, n, other, t0);
	for (int i = 0; i < n; i++)
		free(w[i].lat_ns);
	free(w);
}

/* ---- open loop: a fixed rate of vals, sent on schedule ----------------- */

/* users (and connections) of the open loop: poll's cost grows with the
 * sockets it watches (64 cost the bench ~40 % of a core at 500/s); a
 * user may have several vals in flight on its socket, in counter order */
#define OPEN_USERS 16
#define OPEN_FIFO 1024          /* outstanding vals per user */
#define OPEN_DRAIN_NS (10ull * 1000000000ull)

/* A connection per user: the node answers a connection's vals in the
 * order it took them (each waits for its commit, in ticket order), so
 * the replies are matched to their scheduled times first in, first out.
 * A refusal answered at once could overtake a val still waiting for its
 * commit; it is counted as a failure, and the run is not judged then. */
struct open_user {
	int sock;
	uint8_t *in;            /* answers read, not yet whole (GD_CTL_MAX_REPLY) */
	size_t inlen;
	uint64_t sched[OPEN_FIFO];
	unsigned head, n;
};

struct open_result {
	double rate, secs;
	uint64_t sent, answered, fails, late_sends;
	uint64_t p50, p90, p99, max, send_lag_max; /* ns */
	char first_err[256];
};

static void open_send(struct open_user *u, struct client *c,
		      struct open_result *res, uint64_t sched)
{
	Grantd__V1__Request rq = GRANTD__V1__REQUEST__INIT;
	char token[16], *args[1] = { token };
	uint8_t frame[512];

	if (oath_hotp_generate((const char *)c->secret, SECRET_LEN,
			       c->counter++, 6, false,
			       OATH_HOTP_DYNAMIC_TRUNCATION, token) != OATH_OK)
		die("oath_hotp_generate failed");
	rq.version = GD_WIRE_VERSION;
	rq.has_version = 1;
	rq.cmd = "2fa.val";
	rq.user = c->user;
	rq.client_ip = c->ip;
	rq.args = args;
	rq.n_args = 1;
	size_t len = grantd__v1__request__get_packed_size(&rq);
	if (len > sizeof(frame))
		die("request too large");
	grantd__v1__request__pack(&rq, frame);
	if (wire_send(u->sock, frame, len, TIMEOUT_MS) < 0)
		die("send: %s", strerror(errno));
	u->sched[(u->head + u->n++) % OPEN_FIFO] = sched;
	res->sent++;
	uint64_t lag = now_ns() - sched;
	if (lag > res->send_lag_max)
		res->send_lag_max = lag;
	if (lag > 1000000)
		res->late_sends++;
}

/* One answer (len bytes at p) to u's oldest val. */
static void open_answer(struct open_user *u, struct open_result *res,
			const uint8_t *p, size_t len, uint64_t t,
			uint64_t *lat, size_t *nlat)
{
	Grantd__V1__Reply *rep = grantd__v1__reply__unpack(NULL, len, p);

	if (!u->n)
		die("a reply to no request");
	uint64_t sched = u->sched[u->head];
	u->head = (u->head + 1) % OPEN_FIFO;
	u->n--;
	res->answered++;
	if (!rep || !rep->has_status || rep->status != 0) {
		if (!res->fails++)
			snprintf(res->first_err, sizeof(res->first_err),
				 "2fa.val: %s",
				 rep && rep->err ? rep->err : "(no reason)");
	} else {
		lat[(*nlat)++] = t - sched;
	}
	if (rep)
		grantd__v1__reply__free_unpacked(rep, NULL);
}

/* Read every reply waiting on u; latencies from the scheduled send time. */
static void open_recv(struct open_user *u, struct open_result *res,
		      uint64_t *lat, size_t *nlat)
{
	for (;;) {
		ssize_t n = recv(u->sock, u->in + u->inlen,
				 4 + GD_CTL_MAX_REPLY - u->inlen, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0)
			die("recv: %s", n ? strerror(errno) : "closed");
		u->inlen += (size_t)n;
		uint64_t t = now_ns();
		size_t off = 0;
		while (u->inlen - off >= 4) {
			const uint8_t *h = u->in + off;
			size_t len = (size_t)h[0] << 24 | (size_t)h[1] << 16 |
				     (size_t)h[2] << 8 | h[3];
			if (len > GD_CTL_MAX_REPLY)
				die("a reply of %zu bytes", len);
			if (u->inlen - off < 4 + len)
				break;
			open_answer(u, res, h + 4, len, t, lat, nlat);
			off += 4 + len;
		}
		memmove(u->in, u->in + off, u->inlen - off);
		u->inlen -= off;
	}
}

/* rate vals/s for secs seconds, request k due at t0 + k/rate and sent
 * then whatever came back before (open loop), from OPEN_USERS users in
 * turn; one thread, a timerfd wakes it at each due time. */
static void run_open(struct open_result *res, double rate)
{
	uint64_t total = (uint64_t)(rate * secs), k = 0;
	uint64_t *lat = malloc((total ? total : 1) * sizeof(uint64_t));
	struct open_user *u = calloc(OPEN_USERS, sizeof(*u));
	struct pollfd it[OPEN_USERS + 1];
	size_t nlat = 0;
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);

	if (!lat || !u || tfd < 0)
		die("open loop set-up failed");
	memset(res, 0, sizeof(*res));
	res->rate = rate;
	for (int i = 0; i < OPEN_USERS; i++) {
		if ((u[i].sock = open_conn(sock_s)) < 0)
			die("connect %s: %s", sock_s, strerror(errno));
		if (!(u[i].in = malloc(4 + GD_CTL_MAX_REPLY)))
			die("out of memory");
		it[i] = (struct pollfd){ .fd = u[i].sock, .events = POLLIN };
	}
	it[OPEN_USERS] = (struct pollfd){ .fd = tfd, .events = POLLIN };
	usleep(100000); /* the connections are up before the clock starts */
	uint64_t t0 = now_ns() + 1000000, period = (uint64_t)(1e9 / rate);
	uint64_t outstanding = 0, drain_until = 0;
	for (;;) {
		uint64_t now = now_ns();
		while (k < total && t0 + k * period <= now) {
			struct open_user *ou = &u[k % OPEN_USERS];
			if (ou->n == OPEN_FIFO)
				break; /* sent when one comes back, late */
			open_send(ou, &clients[k % OPEN_USERS], res,
				  t0 + k * period);
			k++;
		}
		outstanding = res->sent - res->answered;
		if (k == total && !outstanding)
			break;
		if (k == total && !drain_until)
			drain_until = now + OPEN_DRAIN_NS;
		if (drain_until && now > drain_until)
			break;
		long timeout = -1;
		if (k < total) {
			uint64_t due = t0 + k * period;
			struct itimerspec ts = { { 0, 0 },
				{ (time_t)(due / 1000000000ull),
				  (long)(due % 1000000000ull) } };
			timerfd_settime(tfd, TFD_TIMER_ABSTIME, &ts, NULL);
		} else {
			timeout = 100;
		}
		if (poll(it, OPEN_USERS + 1, (int)timeout) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (it[OPEN_USERS].revents & POLLIN) {
			uint64_t x;
			if (read(tfd, &x, sizeof(x)) < 0 && errno != EAGAIN)
				die("timerfd read: %s", strerror(errno));
		}
		for (int i = 0; i < OPEN_USERS; i++)
			if (it[i].revents & (POLLIN | POLLHUP | POLLERR))
				open_recv(&u[i], res, lat, &nlat);
	}
	res->secs = (double)(now_ns() - t0) / 1e9;
	uint64_t lost = res->sent - res->answered;
	if (lost && !res->fails)
		snprintf(res->first_err, sizeof(res->first_err),
			 "%llu vals unanswered 10 s after the last was sent",
			 (unsigned long long)lost);
	res->fails += lost + (total - res->sent);
	qsort(lat, nlat, sizeof(uint64_t), cmp_u64);
	res->p50 = pct(lat, nlat, 50);
	res->p90 = pct(lat, nlat, 90);
	res->p99 = pct(lat, nlat, 99);
	res->max = nlat ? lat[nlat - 1] : 0;
	for (int i = 0; i < OPEN_USERS; i++) {
		close(u[i].sock);
		free(u[i].in);
	}
	close(tfd);
	free(u);
	free(lat);
}

/* ---- printing ----------------------------------------------------------- */

/* A latency target is met only by a run that had successes and no
 * failures. */
static const char *verdict(bool ok, const struct result *r)
{
	return ok && r->ops && !r->fails ? "ok" : "MISSED";
}

static void cpu_str(char *out, size_t len, const struct cpu *c)
{
	int n = snprintf(out, len, "cpu%%:");

	if (c->node >= 0)
		n += snprintf(out + n, len - (size_t)n, " node=%.0f", c->node);
	n += snprintf(out + n, len - (size_t)n, " bench=%.0f", c->client);
	if (c->host >= 0)
		snprintf(out + n, len - (size_t)n, " host=%.0f/%ld", c->host,
			 100 * sysconf(_SC_NPROCESSORS_ONLN));
}

/* One result line: latencies in unit ("ms" or "us", scale ns per unit)
 * and the SPEC 6 targets it is judged against. */
static void print_result(const char *label, const struct result *r,
			 const struct cpu *c, const char *unit, double scale,
			 double p99_target, double ops_target)
{
	double p99 = (double)r->p99 / scale;
	int prec = scale >= 1e6 ? 2 : 0;
	char cs[96];

	cpu_str(cs, sizeof(cs), c);
	printf("%s ops=%zu secs=%.2f ops/s=%.0f p50_%s=%.*f p90_%s=%.*f "
	       "p99_%s=%.*f max_%s=%.*f failures=%ld (%s) target: p99<%.0f%s "
	       "(%s), >=%.0f/s (%s)\n", label, r->ops, r->secs, r->ops_s,
	       unit, prec, (double)r->p50 / scale, unit, prec,
	       (double)r->p90 / scale, unit, prec, p99, unit, prec,
	       (double)r->max / scale, r->fails, cs, p99_target, unit,
	       verdict(p99 < p99_target, r), ops_target,
	       verdict(r->ops_s >= ops_target, r));
	fflush(stdout);
}

static void print_val(const char *label, const struct result *r,
		      const struct cpu *c)
{
	print_result(label, r, c, "ms", 1e6, 5, 5000);
}

static void print_check(const char *label, const struct result *r,
			const struct cpu *c)
{
	print_result(label, r, c, "us", 1e3, 200, 50000);
}

/* isval has no SPEC 6 row of its own: judged as the push check, the
 * read it shares (its grant lookup) */
static void print_isval(const char *label, const struct result *r,
			const struct cpu *c)
{
	print_check(label, r, c);
}

/* key lookups on the keys socket have no SPEC 6 row of their own (SPEC's
 * grant-keys p99 includes the process start: bench/run-scale): judged as
 * the push check, and by bench/run against the floor of a connection per
 * request */
static void print_keys(const char *label, const struct result *r,
		       const struct cpu *c)
{
	print_check(label, r, c);
}

/* ---- the sync baseline -------------------------------------------------- */

struct sync_cost {
	double mean, p50, p99; /* ms */
};

/* SYNC_WRITES appends of 4 KiB to a new file in dir, each followed by
 * fdatasync (datasync) or fsync: what a write-ahead log pays per commit. */
static int sync_baseline(struct sync_cost *out, const char *dir,
			 bool datasync)
{
	uint64_t lat[SYNC_WRITES], sum = 0;
	char path[4096], block[4096];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/bench-sync.tmp", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	memset(block, 'x', sizeof(block));
	for (int i = 0; i < SYNC_WRITES && rc == 0; i++) {
		uint64_t t0 = now_ns();
		if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block) ||
		    (datasync ? fdatasync(fd) : fsync(fd)) < 0)
			rc = -1;
		lat[i] = now_ns() - t0;
		sum += lat[i];
	}
	close(fd);
	unlink(path);
	if (rc < 0)
		return rc;
	qsort(lat, SYNC_WRITES, sizeof(uint64_t), cmp_u64);
	out->mean = (double)sum / SYNC_WRITES / 1e6;
	out->p50 = (double)pct(lat, SYNC_WRITES, 50) / 1e6;
	out->p99 = (double)pct(lat, SYNC_WRITES, 99) / 1e6;
	return 0;
}

/* Print one baseline line; returns the fdatasync mean in ms. */
static double print_baseline(const char *when, const char *dir)
{
	struct sync_cost ds, fs;

	if (sync_baseline(&ds, dir, true) < 0 ||
	    sync_baseline(&fs, dir, false) < 0)
		die("sync baseline in %s: %s", dir, strerror(errno));
	printf("sync baseline (%s): %d x 4 KiB append in %s: fdatasync "
	       "mean_ms=%.3f p50_ms=%.3f p99_ms=%.3f; fsync mean_ms=%.3f "
	       "p50_ms=%.3f p99_ms=%.3f; one fdatasync per request caps at "
	       "%.0f/s\n", when, SYNC_WRITES, dir, ds.mean, ds.p50, ds.p99,
	       fs.mean, fs.p50, fs.p99, 1000.0 / ds.mean);
	fflush(stdout);
	return ds.mean;
}

/* ---- main --------------------------------------------------------------- */

/* "1,8,32" into out; an empty string is an empty list. */
static int parse_list(int *out, int max, const char *s)
{
	int n = 0;

	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);
		if (n == max || end == s || v < 0 || v > MAX_CLIENTS ||
		    (*end && *end != ','))
			return -1;
		out[n++] = (int)v;
		s = *end ? end + 1 : end;
	}
	return n;
}

/* A LIST of clients that write the repository (--check, --isval: each
 * user is one of its writers), into list; how many runs. */
static int parse_readers(int *list, const char *arg, const char *what)
{
	int n = parse_list(list, MAX_RUNS, arg);

	if (n < 0)
		die("bad client list '%s'", arg);
	for (int i = 0; i < n; i++)
		if (list[i] > MAX_WRITERS)
			die("at most %d %s clients", MAX_WRITERS, what);
	return n;
}

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: bench_control --config FILE [--secs S | --ops N] [--val LIST]\n"
"         [--check LIST] [--isval LIST] [--keys LIST] [--mixed V,C]\n"
"         [--fsync-dir DIR]\n"
"         [--node-pid PID] [--ctx shared|thread] [--tag TAG] [--open RATE]\n"
"\n"
"Benchmark a running grantd node through its user socket, each client a\n"
"thread with its own connection and user: `2fa val` (HOTP) with each\n"
"count of clients in LIST (default 1,8,32,64), the push check likewise\n"
"(default 1,8,32), `2fa isval` likewise (default 8), key lookups on the\n"
"keys socket as grant-keys makes them (a connection each, for each\n"
"client's own key; default 8; only when the config names keys_socket),\n"
"and a mixed run of V val and C check clients at once (default 8,8).\n"
"S seconds per run (default 5).  An empty LIST skips.\n"
"\n"
"  --ops N          each run makes N timed requests in all, shared among\n"
"                   its clients, instead of running for S seconds (S, when\n"
"                   given too, still caps the run; default cap 600 s)\n"
"  --fsync-dir DIR  time %d synced 4 KiB appends in DIR (the node's\n"
"                   data_dir) before and after the runs\n"
"  --node-pid PID   also report the node's CPU use per run (every run\n"
"                   reports this program's and the whole machine's)\n"
"  --ctx            ignored (the user socket is a plain unix socket now;\n"
"                   each client has its own connection)\n"
"  --open RATE      after the other runs, an open loop: RATE vals/s for\n"
"                   S seconds, each sent at its scheduled time whether\n"
"                   or not the earlier ones were answered, from %d users\n"
"                   in turn (a DEALER socket each); latency from the\n"
"                   scheduled time, so a stall is not hidden\n"
"  --tag TAG        users TAG000.. and repository TAG-bench (TAG: a-z,\n"
"                   default b) are created over the admin socket; they\n"
"                   must not exist yet\n"
"\n"
"Exit status: 0 every reply was a success, 1 otherwise, 2 usage or\n"
"setup error.\n",
		SYNC_WRITES, OPEN_USERS);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "secs", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'o' },
		{ "val", required_argument, NULL, 'v' },
		{ "check", required_argument, NULL, 'k' },
		{ "isval", required_argument, NULL, 'i' },
		{ "keys", required_argument, NULL, 'K' },
		{ "mixed", required_argument, NULL, 'm' },
		{ "fsync-dir", required_argument, NULL, 'f' },
		{ "node-pid", required_argument, NULL, 'p' },
		{ "ctx", required_argument, NULL, 'x' },
		{ "tag", required_argument, NULL, 't' },
		{ "open", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int vals[MAX_RUNS] = { 1, 8, 32, 64 }, checks[MAX_RUNS] = { 1, 8, 32 };
	int isvals[MAX_RUNS] = { 8 }, keys[MAX_RUNS] = { 8 }, mixed[2] = { 8, 8 };
	int nval = 4, ncheck = 3, nisval = 1, nkeys = 1, nmixed = 2, opt;
	int maxc = 0;
	const char *cfg_path = NULL, *sync_dir = NULL;
	bool secs_given = false;
	double sync_ms = 0, best_val = 0, open_rate = 0;
	int best_val_clients = 0;
	struct config *cfg = NULL;
	struct buf err = BUF_INIT;
	struct result rv, rk;
	struct cpu cpu;
	long fails = 0;
	char label[64];

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		char *end;
		switch (opt) {
		case 'c': cfg_path = optarg; break;
		case 's':
			secs = strtod(optarg, &end);
			if (*end || secs <= 0 || secs > 600)
				die("--secs must be 0 to 600, not '%s'",
				    optarg);
			secs_given = true;
			break;
		case 'o': {
			unsigned long long v = strtoull(optarg, &end, 10);
			if (*end || v < 1 || v > MAX_SAMPLES)
				die("--ops must be 1 to %u, not '%s'",
				    MAX_SAMPLES, optarg);
			ops_per_run = v;
			break;
		}
		case 'v':
			if ((nval = parse_list(vals, MAX_RUNS, optarg)) < 0)
				die("bad client list '%s'", optarg);
			break;
		case 'k':
			ncheck = parse_readers(checks, optarg, "check");
			break;
		case 'i':
			nisval = parse_readers(isvals, optarg, "isval");
			break;
		case 'K':
			if ((nkeys = parse_list(keys, MAX_RUNS, optarg)) < 0)
				die("bad client list '%s'", optarg);
			break;
		case 'm':
			nmixed = parse_list(mixed, 2, optarg);
			if (nmixed != 0 && (nmixed != 2 ||
					    mixed[0] + mixed[1] > MAX_WRITERS))
				die("--mixed is V,C with V+C <= %d, not '%s'",
				    MAX_WRITERS, optarg);
			break;
		case 'f': sync_dir = optarg; break;
		case 'p':
			node_pid = strtol(optarg, &end, 10);
			if (*end || node_pid <= 0)
				die("--node-pid needs a process id, not '%s'",
				    optarg);
			break;
		case 'x':
			if (strcmp(optarg, "shared") &&
			    strcmp(optarg, "thread"))
				die("--ctx is shared or thread, not '%s'",
				    optarg);
			/* kept for old scripts: the user socket is no
			 * longer ZeroMQ, there is no context to share */
			break;
		case 't':
			tag = optarg;
			if (strlen(tag) < 1 || strlen(tag) > 20 ||
			    strspn(tag, "abcdefghijklmnopqrstuvwxyz") !=
				    strlen(tag))
				die("--tag is 1 to 20 letters a-z, not '%s'",
				    tag);
			break;
		case 'O':
			open_rate = strtod(optarg, &end);
			if (*end || open_rate < 1 || open_rate > 1e6)
				die("--open is a rate, 1 to 1000000 vals/s, "
				    "not '%s'", optarg);
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !cfg_path) {
		usage(stderr);
		return 2;
	}
	if (ops_per_run && !secs_given)
		secs = 600;
	snprintf(repo, sizeof(repo), "%s-bench", tag);
	if (config_load(&cfg, cfg_path, &err) < 0)
		die("%s", err.p);
	for (int i = 0; i < nval; i++)
		maxc = vals[i] > maxc ? vals[i] : maxc;
	for (int i = 0; i < ncheck; i++)
		maxc = checks[i] > maxc ? checks[i] : maxc;
	for (int i = 0; i < nisval; i++)
		maxc = isvals[i] > maxc ? isvals[i] : maxc;
	keys_s = cfg->keys_socket && *cfg->keys_socket ? cfg->keys_socket :
							NULL;
	if (keys_s && strlen(keys_s) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		die("keys_socket too long for a unix socket: %s", keys_s);
	for (int i = 0; keys_s && i < nkeys; i++)
		maxc = keys[i] > maxc ? keys[i] : maxc;
	if (nmixed && mixed[0] + mixed[1] > maxc)
		maxc = mixed[0] + mixed[1];
	if (open_rate > 0)
		maxc = OPEN_USERS;
	if (oath_init() != OATH_OK || sodium_init() < 0)
		die("liboath or libsodium failed to initialise");
	sock_s = cfg->user_socket;

	if (sync_dir)
		sync_ms = print_baseline("before", sync_dir);
	setup(cfg->admin_socket, maxc);

	for (int i = 0; i < nval; i++) {
		if (!vals[i])
			continue;
		run_clients(&rv, &rk, &cpu, vals[i], 0, CHECK);
		snprintf(label, sizeof(label), "val clients=%d", vals[i]);
		print_val(label, &rv, &cpu);
		fails += rv.fails;
		if (rv.ops_s > best_val) {
			best_val = rv.ops_s;
			best_val_clients = vals[i];
		}
	}
	for (int i = 0; i < ncheck; i++) {
		if (!checks[i])
			continue;
		run_clients(&rv, &rk, &cpu, 0, checks[i], CHECK);
		snprintf(label, sizeof(label), "check clients=%d", checks[i]);
		print_check(label, &rk, &cpu);
		fails += rk.fails;
	}
	for (int i = 0; i < nisval; i++) {
		if (!isvals[i])
			continue;
		run_clients(&rv, &rk, &cpu, 0, isvals[i], ISVAL);
		snprintf(label, sizeof(label), "isval clients=%d", isvals[i]);
		print_isval(label, &rk, &cpu);
		fails += rk.fails;
	}
	for (int i = 0; i < nkeys; i++) {
		if (!keys[i])
			continue;
		if (!keys_s) {
			printf("keys clients=%d: not measured (the config names "
			       "no keys_socket)\n", keys[i]);
			continue;
		}
		run_clients(&rv, &rk, &cpu, 0, keys[i], KEYS);
		snprintf(label, sizeof(label), "keys clients=%d", keys[i]);
		print_keys(label, &rk, &cpu);
		fails += rk.fails;
	}
	if (nmixed && mixed[0] + mixed[1] > 0) {
		run_clients(&rv, &rk, &cpu, mixed[0], mixed[1], CHECK);
		if (mixed[0]) {
			snprintf(label, sizeof(label), "mixed val clients=%d "
				 "(with %d check)", mixed[0], mixed[1]);
			print_val(label, &rv, &cpu);
		}
		if (mixed[1]) {
			snprintf(label, sizeof(label), "mixed check clients=%d "
				 "(with %d val)", mixed[1], mixed[0]);
			print_check(label, &rk, &cpu);
		}
		fails += rv.fails + rk.fails;
	}

	if (open_rate > 0) {
		struct open_result o;
		double c0 = cpu_self_s(), n0 = cpu_node_s();
		run_open(&o, open_rate);
		double n1 = cpu_node_s(), c1 = cpu_self_s();
		printf("open val rate=%.0f/s secs=%.2f sent=%llu answered=%llu "
		       "achieved/s=%.0f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f "
		       "max_ms=%.2f failures=%llu sends_late_over_1ms=%llu "
		       "send_lag_max_ms=%.2f (latency from the scheduled send "
		       "time; %d users in turn; cpu%%: node=%.0f bench=%.0f) "
		       "target: p99<5ms (%s)\n", o.rate, o.secs,
		       (unsigned long long)o.sent,
		       (unsigned long long)o.answered,
		       o.secs > 0 ? (double)(o.answered - o.fails) / o.secs : 0,
		       (double)o.p50 / 1e6, (double)o.p90 / 1e6,
		       (double)o.p99 / 1e6, (double)o.max / 1e6,
		       (unsigned long long)o.fails,
		       (unsigned long long)o.late_sends,
		       (double)o.send_lag_max / 1e6, OPEN_USERS,
		       n0 >= 0 && n1 >= 0 ? 100 * (n1 - n0) / o.secs : -1,
		       100 * (c1 - c0) / o.secs,
		       o.p99 < 5000000 && !o.fails && o.answered ? "ok" :
								  "MISSED");
		if (o.fails)
			fprintf(stderr, "bench_control: open loop: %llu "
				"failed, first: %s\n",
				(unsigned long long)o.fails, o.first_err);
		fails += (long)o.fails;
		fflush(stdout);
	}

	if (sync_dir) {
		double after = print_baseline("after", sync_dir);
		sync_ms = (sync_ms + after) / 2;
		if (best_val > 0)
			printf("group commit: best val %.0f/s (clients=%d) is "
			       "%.1fx the %.0f/s of one fdatasync per request "
			       "(mean of before and after)\n", best_val,
			       best_val_clients, best_val * sync_ms / 1000.0,
			       1000.0 / sync_ms);
	}
	if (fails)
		printf("FAILURES: %ld requests did not succeed (see stderr)\n",
		       fails);
	config_free(&cfg);
	buf_free(&err);
	oath_done();
	return fails ? 1 : 0;
}
