/*
 * bench_writer.c: the writer's CPU per `2fa val`, with signing and
 * without, in one process and one run (issue 21 point 1: "measure the
 * cost").
 *
 * A val makes two operations, a token-use mark and a grant
 * (cmd_validate_token, cmd_grant); the writer stamps and merges each
 * (ops_local), then signs the batch and writes it (ops_commit).  This
 * program does exactly that on a real store in DIR, in batches as a
 * group commit makes them, without the sockets, the token check and the
 * fsync: what is left is what signing can change.  The two sides are
 * two stores opened the same way, one with a signer and one without, run
 * in alternating rounds so that the machine's state is the same for
 * both; the figure is CPU time of this thread (CLOCK_THREAD_CPUTIME_ID:
 * RocksDB's own flush threads are not in it).
 *
 *   bench_writer [--vals N] [--batch B] [--users U] [--rounds R]
 *                [--only sig|nosig] DIR
 *
 * (--only: one side, e.g. under perf record.)
 * Prints per round and side: us of CPU per val; then the medians and
 * their ratio.  bench/run-writer builds and runs it (on an idle machine).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sodium.h>

#include "config.h"
#include "err.h"
#include "log.h"
#include "ops.h"
#include "opsig.h"
#include "store.h"

#define SEAL_KEY "bench_writer sealing key 0123456"

struct side {
	char dir[256];
	struct config cfg;
	struct store *s;
	struct ops *o;
	struct store_batch *b;
	struct opsig_signer signer;
	uint64_t *next; /* per user: the mark's next counter */
	double us[64]; /* per round */
};

struct opts {
	long vals, batch, users, rounds;
	int only; /* -1 both sides, 0 without signing, 1 with */
	const char *dir;
};

static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int side_open(struct side *d,
                     const char *parent,
                     const char *site,
                     bool sign,
                     long users)
{
	char name[NOTE_NAME_MAX + 1];
	uint8_t curve_sec[32];
	bool created;

	snprintf(d->dir, sizeof(d->dir), "%s/%s", parent, site);
	if (mkdir(d->dir, 0700) < 0 && errno != EEXIST)
		return -1;
	d->cfg.site = (char *)site;
	d->cfg.data_dir = d->dir;
	d->cfg.repo_dir = d->dir;
	d->cfg.oplog_retention = 7 * 24 * 3600;
	if (store_open(&d->s, &created, d->dir, (const uint8_t *)SEAL_KEY) <
	            0 ||
	    ops_open(&d->o, d->s, &d->cfg, created) < 0 ||
	    store_batch_new(&d->b, d->s) < 0)
		return -1;
	if (sign) {
		randombytes_buf(curve_sec, sizeof(curve_sec));
		if (opsig_key_name(name, NULL, site) < 0 ||
		    opsig_signer_init(&d->signer, curve_sec, name) < 0)
			return -1;
		sodium_memzero(curve_sec, sizeof(curve_sec));
		ops_set_signer(d->o, &d->signer);
	}
	d->next = calloc((size_t)users, sizeof(*d->next));
	return d->next ? 0 : -1;
}

static void side_close(struct side *d)
{
	store_batch_free(&d->b);
	ops_destroy(&d->o);
	store_destroy(&d->s);
	opsig_signer_wipe(&d->signer);
	free(d->next);
}

/* One val of user u: its mark, then its grant, as cmd_val makes them. */
static int one_val(struct side *d, long u, long i)
{
	char user[32], net[32];
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Mark m = GRANTD__V1__MARK__INIT;
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;
	int rc;

	snprintf(user, sizeof(user), "user%05ld", u);
	snprintf(net, sizeof(net), "10.%ld.%ld.%ld/32", (i >> 16) & 255,
	         (i >> 8) & 255, i & 255);
	m.user = user;
	m.enroll_id = (uint64_t)u + 1, m.has_enroll_id = 1;
	m.next = ++d->next[u], m.has_next = 1;
	m.scratch_used = 0, m.has_scratch_used = 1;
	op.body_case = GRANTD__V1__OP__BODY_MARK;
	op.mark = &m;
	if ((rc = ops_local(d->o, d->b, &op)) < 0)
		return rc;
	grantd__v1__op__init(&op);
	g.user = user;
	g.net = net;
	g.session = "";
	g.added = 1700000000, g.has_added = 1;
	g.expires = 1700086400, g.has_expires = 1;
	g.site = (char *)d->cfg.site;
	op.body_case = GRANTD__V1__OP__BODY_GRANT;
	op.grant = &g;
	return ops_local(d->o, d->b, &op);
}

/* One round: vals in batches, committed without fsync; CPU us per val. */
static int round_run(struct side *d, const struct opts *o, long *at, double *us)
{
	double t0 = cpu_s();
	long done = 0;

	while (done < o->vals) {
		for (long k = 0; k < o->batch && done < o->vals; k++, done++) {
			long i = (*at)++;
			if (one_val(d, i % o->users, i) < 0)
				return -1;
		}
		if (ops_commit(d->o, d->b, false) < 0)
			return -1;
		ops_outbox_clear(d->o);
		store_batch_clear(d->b);
	}
	*us = (cpu_s() - t0) * 1e6 / (double)o->vals;
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, long n)
{
	double s[64];

	memcpy(s, v, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), cmp_d);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static int parse(struct opts *o, int argc, char **argv)
{
	*o = (struct opts){20000, 16, 1000, 5, -1, NULL};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			i++;
			o->only = !strcmp(argv[i], "sig")     ? 1
			          : !strcmp(argv[i], "nosig") ? 0
			                                      : -2;
			if (o->only == -2)
				return -1;
			continue;
		}
		long *v = !strcmp(argv[i], "--vals")     ? &o->vals
		          : !strcmp(argv[i], "--batch")  ? &o->batch
		          : !strcmp(argv[i], "--users")  ? &o->users
		          : !strcmp(argv[i], "--rounds") ? &o->rounds
		                                         : NULL;
		if (v && i + 1 < argc)
			*v = strtol(argv[++i], NULL, 10);
		else if (argv[i][0] != '-' && !o->dir)
			o->dir = argv[i];
		else
			return -1;
	}
	return o->dir && o->vals > 0 && o->batch > 0 && o->users > 0 &&
	                       o->rounds > 0 && o->rounds <= 64
	               ? 0
	               : -1;
}

int main(int argc, char **argv)
{
	static struct side sides[2];
	const char *names[2] = {"nosig", "sig"};
	long at[2] = {0, 0};
	struct opts o;

	if (parse(&o, argc, argv) < 0) {
		fprintf(stderr,
		        "usage: bench_writer [--vals N] [--batch B] "
		        "[--users U] [--rounds R] [--only sig|nosig] DIR\n");
		return 2;
	}
	log_init("bench_writer", false, LOG_LVL_ERROR);
	if (sodium_init() < 0)
		return 2;
	for (int k = 0; k < 2; k++)
		if (side_open(&sides[k], o.dir, names[k], k == 1, o.users) <
		    0) {
			fprintf(stderr, "bench_writer: cannot open %s/%s\n",
			        o.dir, names[k]);
			return 2;
		}
	for (long r = 0; r < o.rounds; r++)
		for (int k = 0; k < 2; k++) {
			int s = (int)((r + k) %
			              2); /* who goes first alternates */
			if (o.only >= 0 && s != o.only)
				continue;
			if (round_run(&sides[s], &o, &at[s], &sides[s].us[r]) <
			    0) {
				fprintf(stderr, "bench_writer: %s failed\n",
				        names[s]);
				return 1;
			}
			printf("writer round=%ld side=%s vals=%ld batch=%ld "
			       "cpu_us_per_val=%.2f\n",
			       r + 1, names[s], o.vals, o.batch,
			       sides[s].us[r]);
		}
	if (o.only >= 0)
		goto out;
	double a = median(sides[0].us, o.rounds),
	       b = median(sides[1].us, o.rounds);
	printf("writer cpu per val (median of %ld rounds): without signing "
	       "%.2f us, with signing %.2f us: %.3fx (throughput bound "
	       "%.3fx)\n",
	       o.rounds, a, b, b / a, a / b);
out:
	for (int k = 0; k < 2; k++)
		side_close(&sides[k]);
	return 0;
}
