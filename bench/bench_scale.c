/*
 * bench_scale.c: load a running node through its sockets with many users,
 * SSH keys and live grants, and time the reads that must not grow with
 * them (bench/run-scale drives it).
 *
 * Everything a user is made of is derived from (tag, user number), so the
 * loader and the later measuring runs agree without a file between them:
 *
 *   user i        TAGNNNNNNN (7 digits)
 *   keys k=0,1    ssh-ed25519, the 32-byte key = SHA-256("gdbench TAG i k")
 *                 in the SSH wire format (string "ssh-ed25519", string key);
 *                 not a point on the curve, but nothing here verifies one
 *   HOTP secret   the first 20 bytes of SHA-256("gdsecret TAG i")
 *   grant j       from address 10.a.b.c = 1 + (i's first grant number + j);
 *                 made by `2fa val` with the HOTP token of counter j
 *
 * G grants over U users: each gets G/U, the first G%U one more.  A sample
 * of up to 1,024 users spread over all of them may write the repositories
 * TAG-r00.. (64 writers each: a writer list is searched in turn); the push
 * checks pick from them.
 *
 * Many requests are in flight at once: a pool of connections to the
 * node's sockets (wire.h), each with one request outstanding, polled by
 * one thread.  A user's vals go one at
 * a time (a later HOTP counter answered first would make the earlier one a
 * replay), different users' at once.
 *
 *   bench_scale load        --config F --users U --grants G [--inflight N]
 *   bench_scale check       --config F --users U --grants G [--n N] [--clients C]
 *   bench_scale first-check --config F --users U --grants G --t0 EPOCH
 *   bench_scale keys        --config F --users U --prog GRANT_KEYS --mode fp|all [--n N]
 *   bench_scale show-key    --config F --n I   (user I's key lines and
 *                           fingerprints, to hold against ssh-keygen -lf)
 *
 * Exit status: 0 every request succeeded, 1 some failed, 2 usage or set-up
 * error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liboath/oath.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "bench.h"
#include "config.h"
#include "err.h"
#include "wire.h"
#include "banned.h"

#define SECRET_LEN 20
#define NKEYS 2
#define MAX_SAMPLE 1024
#define WRITERS_PER_REPO 64
#define TIMEOUT_NS (30ull * 1000000000ull)
#define MAX_INFLIGHT 4096

extern char **environ;

const char bench_prog[] = "bench_scale";

static const char *tag = "s";
static uint64_t nusers = 100000, ngrants = 1000000;

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	/* xorshift64*: a sample, not a secret */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 2685821657736338717ull;
}

/* ---- what user i is made of -------------------------------------------- */

static void user_name(char *out, size_t len, uint64_t i)
{
	snprintf(out, len, "%s%07llu", tag, (unsigned long long)i);
}

static uint64_t grants_of(uint64_t i)
{
	return ngrants / nusers + (i < ngrants % nusers ? 1 : 0);
}

static uint64_t first_grant(uint64_t i)
{
	uint64_t r = ngrants % nusers;
	return i * (ngrants / nusers) + (i < r ? i : r);
}

static void grant_ip(char *out, size_t len, uint64_t i, uint64_t j)
{
	uint64_t g = first_grant(i) + j + 1;
	snprintf(out, len, "10.%u.%u.%u", (unsigned)(g >> 16 & 255),
		 (unsigned)(g >> 8 & 255), (unsigned)(g & 255));
}

static void secret_of(uint8_t out[SECRET_LEN], uint64_t i)
{
	uint8_t h[crypto_hash_sha256_BYTES];
	char in[96];
	int n = snprintf(in, sizeof(in), "gdsecret %s %llu", tag,
			 (unsigned long long)i);
	crypto_hash_sha256(h, (const uint8_t *)in, (size_t)n);
	memcpy(out, h, SECRET_LEN);
}

/* User i's key k: "ssh-ed25519 BASE64 TAGi-k" into line; "SHA256:..."
 * into fp (NULL: not wanted). */
static void key_of(char *line, size_t llen, char *fp, size_t fplen,
		   uint64_t i, int k)
{
	char seed[96], name[32], comment[48];

	snprintf(seed, sizeof(seed), "gdbench %s %llu %d", tag,
		 (unsigned long long)i, k);
	user_name(name, sizeof(name), i);
	snprintf(comment, sizeof(comment), "%s-k%d", name, k);
	bench_ssh_key(line, llen, fp, fplen, seed, comment);
}

/* The sample of users that may push: up to MAX_SAMPLE, spread over the
 * users that hold a grant. */
static uint64_t sample_n(void)
{
	uint64_t have = ngrants < nusers ? ngrants : nusers;
	return have < MAX_SAMPLE ? have : MAX_SAMPLE;
}

static uint64_t sample_user(uint64_t s)
{
	uint64_t have = ngrants < nusers ? ngrants : nusers;
	return s * have / sample_n();
}

static void repo_of_sample(char *out, size_t len, uint64_t s)
{
	snprintf(out, len, "%s-r%02llu", tag,
		 (unsigned long long)(s / WRITERS_PER_REPO));
}

/* ---- requests ------------------------------------------------------------ */

struct rq {
	const char *cmd;
	const char *user;
	const char *ip;
	char *args[GD_CTL_MAX_ARGS];
	size_t nargs;
};

/* Pack into a fresh buffer; *len its size. */
static uint8_t *pack(const struct rq *q, size_t *len)
{
	Grantd__V1__Request r = GRANTD__V1__REQUEST__INIT;
	uint8_t *p;

	r.version = GD_WIRE_VERSION;
	r.has_version = 1;
	r.cmd = (char *)q->cmd;
	r.user = (char *)q->user;
	r.client_ip = (char *)q->ip;
	r.args = (char **)q->args;
	r.n_args = q->nargs;
	*len = grantd__v1__request__get_packed_size(&r);
	if (!(p = malloc(*len ? *len : 1)))
		abort();
	grantd__v1__request__pack(&r, p);
	return p;
}

/* ---- a pool of sockets, one request in flight on each ------------------- */

struct slot {
	int s;                   /* the connection (wire.h) */
	bool busy, done;
	uint64_t t0;
	uint64_t job;
	/* per-slot state of a generator (the vals: a user and its next) */
	uint64_t user, j;
};

struct pool;
/* Fill *frame (malloc'd) for slot k: 1 a request, 0 none now, -1 none
 * ever again for this slot. */
typedef int (*next_fn)(struct pool *p, int k, uint8_t **frame, size_t *len);
/* The answer to slot k's request: rep NULL when none came (timeout) or it
 * did not decode. */
typedef void (*done_fn)(struct pool *p, int k, Grantd__V1__Reply *rep,
			uint64_t lat_ns);

struct pool {
	const char *ep;          /* the socket's path */
	struct slot *v;
	int n;
	next_fn next;
	done_fn done;
	uint64_t counter;        /* shared generators' next job */
	uint64_t limit;
	uint64_t ok, fails, timeouts;
	char first_err[256];
	uint64_t *lat;           /* optional samples */
	size_t nlat, caplat;
};

static int open_conn(const char *path)
{
	int fd = wire_connect(path, (int)(TIMEOUT_NS / 1000000));

	if (fd < 0)
		die("connect %s: %s", path, strerror(errno));
	return fd;
}

static void pool_fail(struct pool *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void pool_fail(struct pool *p, const char *fmt, ...)
{
	va_list ap;

	if (p->fails++ == 0) {
		va_start(ap, fmt);
		vsnprintf(p->first_err, sizeof(p->first_err), fmt, ap);
		va_end(ap);
		p->first_err[strcspn(p->first_err, "\n")] = '\0';
	}
}

/* A reply: status 0 counts as a success, anything else as a failure. */
static bool reply_ok(struct pool *p, const char *what,
		     Grantd__V1__Reply *rep)
{
	if (!rep) {
		pool_fail(p, "%s: no answer within 30 s or undecodable", what);
		return false;
	}
	if (!rep->has_status || rep->status != 0) {
		pool_fail(p, "%s: status %d: %s", what,
			  rep->has_status ? rep->status : -1,
			  rep->err ? rep->err : "(no reason)");
		return false;
	}
	p->ok++;
	return true;
}

static void pool_sample(struct pool *p, uint64_t lat)
{
	if (p->nlat == p->caplat) {
		p->caplat = p->caplat ? 2 * p->caplat : 65536;
		if (!(p->lat = realloc(p->lat, p->caplat * sizeof(*p->lat))))
			abort();
	}
	p->lat[p->nlat++] = lat;
}

static void pool_run(struct pool *p)
{
	struct pollfd *it = calloc((size_t)p->n, sizeof(*it));
	int *idx = calloc((size_t)p->n, sizeof(*idx));

	if (!it || !idx)
		abort();
	for (int k = 0; k < p->n; k++)
		p->v[k].s = open_conn(p->ep);
	for (;;) {
		int nbusy = 0, live = 0;
		for (int k = 0; k < p->n; k++) {
			struct slot *sl = &p->v[k];
			if (!sl->busy && !sl->done) {
				uint8_t *frame = NULL;
				size_t len = 0;
				int r = p->next(p, k, &frame, &len);
				if (r < 0) {
					sl->done = true;
				} else if (r > 0) {
					sl->t0 = now_ns();
					if (wire_send(sl->s, frame, len,
						      (int)(TIMEOUT_NS / 1000000)) < 0)
						die("send: %s", strerror(errno));
					sl->busy = true;
				}
				free(frame);
			}
			if (sl->busy) {
				it[nbusy].fd = sl->s;
				it[nbusy].events = POLLIN;
				it[nbusy].revents = 0;
				idx[nbusy++] = k;
			}
			live += !sl->done || sl->busy;
		}
		if (!live)
			break;
		if (!nbusy) {
			/* slots waiting for nothing in flight: a generator
			 * bug, not a state to wait in */
			die("no request in flight and no more to send");
		}
		if (poll(it, (nfds_t)nbusy, 100) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		uint64_t t = now_ns();
		for (int m = 0; m < nbusy; m++) {
			struct slot *sl = &p->v[idx[m]];
			if (!it[m].revents) {
				if (t - sl->t0 > TIMEOUT_NS) {
					/* the answer may still come: a new
					 * connection never sees it */
					close(sl->s);
					sl->s = open_conn(p->ep);
					sl->busy = false;
					p->timeouts++;
					p->done(p, idx[m], NULL, t - sl->t0);
				}
				continue;
			}
			uint8_t *ans;
			size_t anslen;
			if (wire_recv(sl->s, &ans, &anslen,
				      (int)(TIMEOUT_NS / 1000000)) < 0)
				die("recv: the node closed the connection");
			uint64_t lat = now_ns() - sl->t0;
			Grantd__V1__Reply *rep = grantd__v1__reply__unpack(
				NULL, anslen, ans);
			free(ans);
			sl->busy = false;
			p->done(p, idx[m], rep, lat);
			if (rep)
				grantd__v1__reply__free_unpacked(rep, NULL);
		}
	}
	for (int k = 0; k < p->n; k++)
		close(p->v[k].s);
	free(it);
	free(idx);
}

static void pool_init(struct pool *p, const char *sock, int n, next_fn next,
		      done_fn done)
{
	memset(p, 0, sizeof(*p));
	p->ep = strdup(sock);
	p->n = n;
	p->next = next;
	p->done = done;
	if (!(p->v = calloc((size_t)n, sizeof(*p->v))) || !p->ep)
		abort();
}

static void pool_free(struct pool *p)
{
	free(p->v);
	free(p->lat);
	free((char *)p->ep);
}

/* ---- load: users, enrollments, repositories, grants ------------------- */

static int next_user_add(struct pool *p, int k, uint8_t **frame, size_t *len)
{
	char name[32], keys[NKEYS][256];
	struct rq q = { .cmd = "user.add" };
	(void)k;

	if (p->counter >= p->limit)
		return -1;
	uint64_t i = p->counter++;
	user_name(name, sizeof(name), i);
	q.args[q.nargs++] = name;
	for (int m = 0; m < NKEYS; m++) {
		key_of(keys[m], sizeof(keys[m]), NULL, 0, i, m);
		q.args[q.nargs++] = "--key";
		q.args[q.nargs++] = keys[m];
	}
	*frame = pack(&q, len);
	return 1;
}

static int next_enroll(struct pool *p, int k, uint8_t **frame, size_t *len)
{
	char name[32], *b32 = NULL;
	uint8_t secret[SECRET_LEN];
	size_t blen;
	struct rq q = { .cmd = "enroll" };
	(void)k;

	if (p->counter >= p->limit)
		return -1;
	uint64_t i = p->counter++;
	user_name(name, sizeof(name), i);
	secret_of(secret, i);
	if (oath_base32_encode((const char *)secret, SECRET_LEN, &b32,
			       &blen) != OATH_OK)
		die("base32 encode failed");
	q.args[0] = name;
	q.args[1] = "--hotp";
	q.args[2] = "--secret";
	q.args[3] = b32;
	q.args[4] = "--digits";
	q.args[5] = "6";
	q.args[6] = "--counter";
	q.args[7] = "0";
	q.nargs = 8;
	*frame = pack(&q, len);
	free(b32);
	return 1;
}

/* The repositories, then their writers: p->counter counts both steps. */
static int next_repo(struct pool *p, int k, uint8_t **frame, size_t *len)
{
	uint64_t nrepos = (sample_n() + WRITERS_PER_REPO - 1) / WRITERS_PER_REPO;
	char repo[64], names[WRITERS_PER_REPO][32];
	struct rq q = { .cmd = "repo.add" };
	(void)k;

	/* writers only once every repository is made: one slot does it all,
	 * in order */
	if (k != 0)
		return -1;
	if (p->counter >= 2 * nrepos)
		return -1;
	uint64_t r = p->counter++;
	if (r < nrepos) {
		snprintf(repo, sizeof(repo), "%s-r%02llu", tag,
			 (unsigned long long)r);
		q.args[0] = repo;
		q.args[1] = "--mode";
		q.args[2] = "required";
		q.nargs = 3;
	} else {
		r -= nrepos;
		snprintf(repo, sizeof(repo), "%s-r%02llu", tag,
			 (unsigned long long)r);
		q.cmd = "repo.writers";
		q.args[q.nargs++] = repo;
		for (uint64_t s = r * WRITERS_PER_REPO;
		     s < sample_n() && s < (r + 1) * WRITERS_PER_REPO; s++) {
			user_name(names[s % WRITERS_PER_REPO], 32,
				  sample_user(s));
			q.args[q.nargs++] = names[s % WRITERS_PER_REPO];
		}
	}
	*frame = pack(&q, len);
	return 1;
}

/* Each slot takes a user and makes its grants one after the other. */
static int next_val(struct pool *p, int k, uint8_t **frame, size_t *len)
{
	struct slot *sl = &p->v[k];
	char name[32], ip[32], token[16];
	uint8_t secret[SECRET_LEN];
	struct rq q = { .cmd = "2fa.val" };

	while (!sl->user || sl->j >= grants_of(sl->user - 1)) {
		if (p->counter >= p->limit)
			return -1;
		sl->user = ++p->counter; /* user number + 1; 0: none yet */
		sl->j = 0;
	}
	uint64_t i = sl->user - 1;
	user_name(name, sizeof(name), i);
	grant_ip(ip, sizeof(ip), i, sl->j);
	secret_of(secret, i);
	if (oath_hotp_generate((const char *)secret, SECRET_LEN, sl->j, 6,
			       false, OATH_HOTP_DYNAMIC_TRUNCATION,
			       token) != OATH_OK)
		die("oath_hotp_generate failed");
	sl->j++;
	q.user = name;
	q.ip = ip;
	q.args[0] = token;
	q.nargs = 1;
	*frame = pack(&q, len);
	return 1;
}

static const char *phase_name;
static void done_count(struct pool *p, int k, Grantd__V1__Reply *rep,
		       uint64_t lat)
{
	(void)k;
	(void)lat;
	reply_ok(p, phase_name, rep);
}

static long node_pid;

static long vm_kb(const char *field)
{
	char path[64], line[256];
	long v = -1;
	size_t fl = strlen(field);
	FILE *f;

	if (!node_pid)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/status", node_pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, fl) && line[fl] == ':')
			v = strtol(line + fl + 1, NULL, 10);
	fclose(f);
	return v;
}

/* One phase of the load; returns its failures. */
static uint64_t phase(const char *sock, const char *name,
		      int inflight, uint64_t limit, next_fn next)
{
	struct pool p;
	uint64_t t0 = now_ns();

	pool_init(&p, sock, inflight, next, done_count);
	p.limit = limit;
	phase_name = name;
	pool_run(&p);
	double secs = (double)(now_ns() - t0) / 1e9;
	printf("load %s requests=%llu ok=%llu failures=%llu secs=%.1f "
	       "per_s=%.0f inflight=%d node_rss_mb=%.1f node_hwm_mb=%.1f\n",
	       name, (unsigned long long)(p.ok + p.fails),
	       (unsigned long long)p.ok, (unsigned long long)p.fails, secs,
	       secs > 0 ? (double)(p.ok + p.fails) / secs : 0, inflight,
	       (double)vm_kb("VmRSS") / 1024, (double)vm_kb("VmHWM") / 1024);
	if (p.fails)
		printf("load %s FAILURES: %llu (%llu without an answer); "
		       "first: %s\n", name, (unsigned long long)p.fails,
		       (unsigned long long)p.timeouts, p.first_err);
	fflush(stdout);
	uint64_t f = p.fails;
	pool_free(&p);
	return f;
}

static int cmd_load(const struct config *cfg, int inflight)
{
	uint64_t fails = 0;
	uint64_t nrepos = (sample_n() + WRITERS_PER_REPO - 1) / WRITERS_PER_REPO;

	fails += phase(cfg->admin_socket, "user.add", inflight, nusers,
		       next_user_add);
	fails += phase(cfg->admin_socket, "enroll", inflight, nusers,
		       next_enroll);
	fails += phase(cfg->admin_socket, "repo.add+writers", 1,
		       2 * nrepos, next_repo);
	fails += phase(cfg->user_socket, "2fa.val", inflight, nusers,
		       next_val);
	return fails ? 1 : 0;
}

/* ---- push checks ----------------------------------------------------- */

static int next_check(struct pool *p, int k, uint8_t **frame, size_t *len)
{
	char name[32], ip[32], repo[64];
	struct rq q = { .cmd = "push.check" };
	(void)k;

	if (p->counter >= p->limit)
		return -1;
	p->counter++;
	uint64_t s = rnd() % sample_n(), i = sample_user(s);
	user_name(name, sizeof(name), i);
	grant_ip(ip, sizeof(ip), i, rnd() % grants_of(i));
	repo_of_sample(repo, sizeof(repo), s);
	q.user = name;
	q.ip = ip;
	q.args[0] = repo;
	q.nargs = 1;
	*frame = pack(&q, len);
	return 1;
}

static void done_check(struct pool *p, int k, Grantd__V1__Reply *rep,
		       uint64_t lat)
{
	(void)k;
	if (reply_ok(p, "push.check", rep)) {
		if (!rep->path)
			pool_fail(p, "push.check allowed but named no path");
		else
			pool_sample(p, lat);
	}
}

static int cmd_check(const struct config *cfg, uint64_t n, int clients)
{
	struct pool p;

	/* warm up: connect, and touch the first requests' pages */
	pool_init(&p, cfg->user_socket, clients, next_check, done_check);
	p.limit = 200;
	pool_run(&p);
	uint64_t wfails = p.fails;
	pool_free(&p);
	pool_init(&p, cfg->user_socket, clients, next_check, done_check);
	p.limit = n;
	uint64_t t0 = now_ns();
	pool_run(&p);
	double secs = (double)(now_ns() - t0) / 1e9;
	qsort(p.lat, p.nlat, sizeof(uint64_t), cmp_u64);
	printf("check clients=%d n=%zu secs=%.2f per_s=%.0f p50_us=%.0f "
	       "p90_us=%.0f p99_us=%.0f max_us=%.0f failures=%llu "
	       "(random user of %llu and one of its addresses)\n", clients,
	       p.nlat, secs, secs > 0 ? (double)p.nlat / secs : 0,
	       (double)pct(p.lat, p.nlat, 50) / 1e3,
	       (double)pct(p.lat, p.nlat, 90) / 1e3,
	       (double)pct(p.lat, p.nlat, 99) / 1e3,
	       p.nlat ? (double)p.lat[p.nlat - 1] / 1e3 : 0,
	       (unsigned long long)(p.fails + wfails),
	       (unsigned long long)sample_n());
	if (p.fails + wfails)
		printf("check FAILURES: first: %s\n", p.first_err);
	uint64_t f = p.fails + wfails;
	pool_free(&p);
	return f ? 1 : 0;
}

/* ---- the first check answered after a start ---------------------------- */

static double realtime_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Ask a push check until one is allowed; print the seconds since t0 (the
 * caller's wall clock at the node's start) and the connections made.  A
 * connection is tried every millisecond until the node's socket accepts
 * it; one unanswered for a second (it may have died with a node that
 * stopped) is replaced, and a refusal is asked again a millisecond
 * later. */
static int cmd_first_check(const struct config *cfg, double t0,
			   double timeout_s)
{
	char name[32], ip[32], repo[64];
	struct rq q = { .cmd = "push.check" };
	uint8_t *frame;
	size_t len;
	int tries = 0;
	char last[200] = "no answer";

	user_name(name, sizeof(name), sample_user(0));
	grant_ip(ip, sizeof(ip), sample_user(0), 0);
	repo_of_sample(repo, sizeof(repo), 0);
	q.user = name;
	q.ip = ip;
	q.args[0] = repo;
	q.nargs = 1;
	frame = pack(&q, &len);
	while (realtime_s() - t0 < timeout_s) {
		int s = wire_connect(cfg->user_socket, 10);
		uint8_t *ans = NULL;
		size_t anslen;
		if (s < 0) {
			usleep(1000);
			continue;
		}
		tries++;
		if (wire_send(s, frame, len, 1000) < 0 ||
		    wire_recv(s, &ans, &anslen, 1000) < 0) {
			close(s);
			continue;
		}
		close(s);
		double t = realtime_s();
		Grantd__V1__Reply *rep = grantd__v1__reply__unpack(
			NULL, anslen, ans);
		free(ans);
		bool ok = rep && rep->has_status && rep->status == 0;
		if (rep && !ok)
			snprintf(last, sizeof(last), "status %d: %s",
				 rep->status, rep->err ? rep->err : "");
		if (rep)
			grantd__v1__reply__free_unpacked(rep, NULL);
		if (ok) {
			printf("%.3f %d\n", t - t0, tries);
			free(frame);
			return 0;
		}
		usleep(1000);
	}
	last[strcspn(last, "\n")] = '\0';
	printf("timeout %d %s\n", tries, last);
	free(frame);
	return 1;
}

/* ---- grant-keys, a process per call ----------------------------------- */

/* Run argv, its stdout into *out (grown), stderr to /dev/null; returns its
 * exit status (128+N for signal N), -1 when it could not start. */
static int run_capture(char *const argv[], char **out, size_t *outlen,
		       size_t *cap)
{
	posix_spawn_file_actions_t fa;
	int pfd[2], st;
	pid_t pid;

	if (pipe(pfd) < 0)
		return -1;
	fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	*outlen = 0;
	for (;;) {
		if (*cap - *outlen < 65536) {
			*cap = *cap ? 2 * *cap : 1 << 20;
			if (!(*out = realloc(*out, *cap)))
				abort();
		}
		ssize_t n = read(pfd[0], *out + *outlen, *cap - *outlen - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		*outlen += (size_t)n;
	}
	(*out)[*outlen] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int cmd_keys(const char *cfg_path, const char *prog, bool fp_mode,
		    uint64_t n)
{
	uint64_t *lat = calloc(n, sizeof(*lat)), fails = 0, nl = 0;
	char *out = NULL, first[300] = "";
	size_t outlen = 0, cap = 0, lines_max = 0;

	if (!lat)
		abort();
	for (uint64_t m = 0; m < n + 3; m++) {
		/* three untimed calls first: page cache, the node's pages */
		uint64_t i = rnd() % nusers;
		int k = (int)(rnd() % NKEYS);
		char name[32], line[256], fp[160];
		user_name(name, sizeof(name), i);
		key_of(line, sizeof(line), fp, sizeof(fp), i, k);
		/* as sshd runs it: %u (the git account, not looked at) %f */
		char *argv[] = { (char *)prog, "--config", (char *)cfg_path,
				 "git", fp_mode ? fp : NULL, NULL };
		uint64_t t0 = now_ns();
		int st = run_capture(argv, &out, &outlen, &cap);
		uint64_t t = now_ns() - t0;
		size_t lines = 0;
		for (size_t c = 0; c < outlen; c++)
			lines += out[c] == '\n';
		lines_max = lines > lines_max ? lines : lines_max;
		/* the key's base64 is its second word */
		const char *b64 = strchr(line, ' ') + 1;
		size_t b64len = (size_t)(strchr(b64, ' ') - b64);
		char want[128];
		snprintf(want, sizeof(want), "%.*s", (int)b64len, b64);
		bool ok = st == 0 && strstr(out, want) && strstr(out, name) &&
			  (!fp_mode || lines == 1);
		if (!ok && !fails++)
			snprintf(first, sizeof(first), "%s git%s%s (user %s): "
				 "exit %d, %zu lines, %zu bytes%s", prog,
				 fp_mode ? " " : "", fp_mode ? fp : "", name, st,
				 lines, outlen,
				 st == 0 ? ", the user's key line missing "
					   "or more than one line" : "");
		if (m >= 3)
			lat[nl++] = t;
	}
	qsort(lat, nl, sizeof(*lat), cmp_u64);
	printf("keys mode=%s n=%llu p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f "
	       "max_ms=%.2f lines_max=%zu failures=%llu (of %llu calls, the "
	       "first 3 untimed; a process per call, spawn to exit)\n",
	       fp_mode ? "fingerprint" : "all",
	       (unsigned long long)nl, (double)pct(lat, nl, 50) / 1e6,
	       (double)pct(lat, nl, 90) / 1e6, (double)pct(lat, nl, 99) / 1e6,
	       nl ? (double)lat[nl - 1] / 1e6 : 0, lines_max,
	       (unsigned long long)fails, (unsigned long long)(n + 3));
	if (fails)
		printf("keys FAILURES: first: %s\n", first);
	/* the floor: the same program started, linked and ended, no node */
	nl = 0;
	for (uint64_t m = 0; m < n && m < 100; m++) {
		char *argv[] = { (char *)prog, "--help", NULL };
		uint64_t t0 = now_ns();
		if (run_capture(argv, &out, &outlen, &cap) != 0)
			break;
		lat[nl++] = now_ns() - t0;
	}
	qsort(lat, nl, sizeof(*lat), cmp_u64);
	printf("keys baseline: `%s --help` (start, dynamic linking, exit; no "
	       "node) n=%llu p50_ms=%.2f p99_ms=%.2f\n",
	       strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog,
	       (unsigned long long)nl, (double)pct(lat, nl, 50) / 1e6,
	       (double)pct(lat, nl, 99) / 1e6);
	free(out);
	free(lat);
	return fails ? 1 : 0;
}

/* ---- main ------------------------------------------------------------- */

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: bench_scale load|check|first-check|keys|show-key --config FILE\n"
"         [--users U] [--grants G] [--tag TAG] [--inflight N] [--n N]\n"
"         [--clients C] [--t0 EPOCH] [--timeout S] [--prog PATH]\n"
"         [--mode fp|all] [--node-pid PID]\n"
"\n"
"  load         make U users (2 SSH keys each, HOTP enrolled), the\n"
"               repositories TAG-rNN, and G grants by `2fa val`\n"
"  check        N push checks (default 20000) from C clients (default\n"
"               1), each a random sampled user and one of its addresses\n"
"  first-check  ask a push check until one is allowed (the socket retries\n"
"               its connection every ms); print the seconds since EPOCH\n"
"               (wall clock) and the requests sent\n"
"  keys         run PATH (grant-keys) N times (default 200) as sshd\n"
"               does: --mode fp with `git FINGERPRINT` (of a random\n"
"               user's key), all with `git` alone\n"
"  show-key     user N's key lines and their SHA256 fingerprints\n"
"\n"
"Defaults: U=100000 G=1000000 TAG=s inflight=256.  --node-pid: the\n"
"load prints the node's VmRSS and VmHWM after each phase.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "users", required_argument, NULL, 'u' },
		{ "grants", required_argument, NULL, 'g' },
		{ "tag", required_argument, NULL, 't' },
		{ "inflight", required_argument, NULL, 'i' },
		{ "n", required_argument, NULL, 'n' },
		{ "clients", required_argument, NULL, 'C' },
		{ "t0", required_argument, NULL, '0' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "prog", required_argument, NULL, 'P' },
		{ "mode", required_argument, NULL, 'm' },
		{ "node-pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cfg_path = NULL, *prog = NULL, *mode = "fp";
	int inflight = 256, clients = 1, opt, rc;
	uint64_t n = 0;
	double t0 = 0, timeout_s = 600;
	struct config *cfg = NULL;
	struct buf err = BUF_INIT;

	if (argc < 2 || argv[1][0] == '-') {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *sub = argv[1];
	optind = 2;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		char *end = NULL;
		switch (opt) {
		case 'c': cfg_path = optarg; break;
		case 'u': nusers = strtoull(optarg, &end, 10); break;
		case 'g': ngrants = strtoull(optarg, &end, 10); break;
		case 't': tag = optarg; break;
		case 'i': inflight = (int)strtol(optarg, &end, 10); break;
		case 'n': n = strtoull(optarg, &end, 10); break;
		case 'C': clients = (int)strtol(optarg, &end, 10); break;
		case '0': t0 = strtod(optarg, &end); break;
		case 'T': timeout_s = strtod(optarg, &end); break;
		case 'P': prog = optarg; break;
		case 'm': mode = optarg; break;
		case 'p': node_pid = strtol(optarg, &end, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (end && *end)
			die("bad number '%s'", optarg);
	}
	if (optind != argc || !cfg_path)
		die("need --config (see --help)");
	if (nusers < 1 || nusers > 9999999 || ngrants > 16000000 ||
	    inflight < 1 || inflight > MAX_INFLIGHT || clients < 1 ||
	    clients > MAX_INFLIGHT)
		die("--users 1..9999999, --grants up to 16000000, --inflight "
		    "and --clients 1..%d", MAX_INFLIGHT);
	if (strlen(tag) < 1 || strlen(tag) > 20 ||
	    strspn(tag, "abcdefghijklmnopqrstuvwxyz") != strlen(tag))
		die("--tag is 1 to 20 letters a-z");
	if (sodium_init() < 0 || oath_init() != OATH_OK)
		die("libsodium or liboath failed to initialise");
	signal(SIGPIPE, SIG_IGN);
	if (config_load(&cfg, cfg_path, &err) < 0)
		die("%s", err.p);
	if (!strcmp(sub, "load")) {
		rc = cmd_load(cfg, inflight);
	} else if (!strcmp(sub, "check")) {
		if (!ngrants)
			die("check needs grants");
		rc = cmd_check(cfg, n ? n : 20000, clients);
	} else if (!strcmp(sub, "first-check")) {
		if (t0 <= 0)
			die("first-check needs --t0");
		rc = cmd_first_check(cfg, t0, timeout_s);
	} else if (!strcmp(sub, "show-key")) {
		/* user N's keys and fingerprints, to check them against
		 * ssh-keygen -lf */
		for (int k = 0; k < NKEYS; k++) {
			char line[256], fp[160];
			key_of(line, sizeof(line), fp, sizeof(fp), n, k);
			printf("%s\t%s\n", line, fp);
		}
		rc = 0;
	} else if (!strcmp(sub, "keys")) {
		if (!prog || (strcmp(mode, "fp") && strcmp(mode, "all")))
			die("keys needs --prog PATH and --mode fp|all");
		rc = cmd_keys(cfg_path, prog, !strcmp(mode, "fp"),
			      n ? n : 200);
	} else {
		usage(stderr);
		rc = 2;
	}
	config_free(&cfg);
	buf_free(&err);
	oath_done();
	return rc;
}
