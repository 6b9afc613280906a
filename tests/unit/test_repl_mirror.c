/*
 * test_repl_mirror.c: node/peers/repl_mirror.c, the read-only mirrors'
 * feed (docs/mirrors.md), through repl_int.h.
 *
 * A frontend (paloalto) and a mirror (portland) on real RocksDB stores in
 * temp directories, linked by real CURVE sockets over ipc (fixture.h's
 * fx_pair):
 *  - the positive control: the mirror subscribes, takes a lease of at
 *    most MIRROR_LEASE_MS, and the frontend's grants reach it as stamps
 *    alone (its vector moves, it holds no grant) until both show the same
 *    public digest, no lag, and the mirror is fed;
 *  - lag: what the mirror lacks by its last subscription, while it is
 *    stopped; the lease runs out (status: not connected), and a feed
 *    after that is not sent: the mirror takes what came within the lease
 *    only, and catches up by itself once it runs again;
 *  - what a mirror takes from a feed: a hidden operation's stamp, a
 *    visible one whole; a hidden body sent whole keeps only its stamp
 *    (mirror_hidden), an operation of another origin than the link's is
 *    refused (forged_origin), and one whose stamp is not its own dropped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "fixture.h"
#include "ops.h"
#include "repl_int.h"
#include "writer.h"

#define WAIT_MS 20000

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_repl_mirror", LOG_LVL_ERROR);
}

/* paloalto a frontend, portland its mirror, both linked. */
static int setup(void **state)
{
	struct fx_pair *f;
	int rc = fx_pair_open(&f, "test_repl_mirror", CONFIG_ROLE_MIRROR,
	                      FX_PAIR_LINKED);

	*state = f;
	return rc;
}

/* How much of paloalto's stream portland holds. */
static uint64_t held(struct fx_pair *f)
{
	return ops_vv_get(f->b.o, NULL, "paloalto", ops_epoch(f->a.o));
}

/* portland as paloalto's peer (the mirror it feeds). */
static struct repl_peer *fed(struct fx_pair *f)
{
	return &f->a.repl->peers[0];
}

typedef bool (*cond_fn)(struct fx_pair *f);

/* Run the loops of nodes[0..n) until cond holds (fail after WAIT_MS). */
static void run_until(struct fx_pair *f,
                      struct fx_node *const *nodes,
                      int n,
                      cond_fn cond,
                      const char *what)
{
	for (uint64_t end = clock_mono_ms() + WAIT_MS; clock_mono_ms() < end;
	     fx_nodes_round(nodes, n, 5))
		if (cond(f))
			return;
	fail_msg("never: %s", what);
}

static bool leased(struct fx_pair *f)
{
	return fed(f)->msub && fed(f)->lease_until_ms > clock_mono_ms();
}

static bool level(struct fx_pair *f)
{
	return held(f) == ops_seq(f->a.o) && held(f) > 0 &&
	       repl_mirror_lag_ops(f->a.repl, fed(f)) == 0;
}

/* The status object of peer site in r's repl_status at now_ms (the
 * caller's: cJSON_Delete). */
static cJSON *status_of(struct repl *r, const char *site, uint64_t now_ms)
{
	cJSON *arr = cJSON_CreateArray(), *o, *found = NULL;

	repl_status(r, arr, now_ms);
	cJSON_ArrayForEach(o, arr)
	{
		cJSON *s = cJSON_GetObjectItem(o, "site");
		if (cJSON_IsString(s) && !strcmp(s->valuestring, site))
			found = cJSON_DetachItemViaPointer(arr, o);
		if (found)
			break;
	}
	cJSON_Delete(arr);
	assert_non_null(found);
	return found;
}

static double number(const cJSON *o, const char *name)
{
	const cJSON *n = cJSON_GetObjectItem(o, name);

	assert_true(cJSON_IsNumber(n));
	return n->valuedouble;
}

static bool flag(const cJSON *o, const char *name)
{
	const cJSON *b = cJSON_GetObjectItem(o, name);

	assert_true(cJSON_IsBool(b));
	return cJSON_IsTrue(b);
}

/* Make a user (a visible family) at n and run its loop until published. */
static void make_user(struct fx_node *n, const char *name)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__User u = GRANTD__V1__USER__INIT;
	char *keys[] = {FX_KEY_A};
	struct fx_node *one[] = {n};
	int before = n->npublished;
	uint64_t t;

	u.name = (char *)name;
	u.keys = keys, u.n_keys = 1;
	op.body_case = GRANTD__V1__OP__BODY_USER;
	op.user = &u;
	assert_int_equal(ops_local(n->o, writer_batch(n->w), &op), 0);
	assert_int_equal(writer_commit(n->w, &t), 0);
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     n->npublished == before && clock_mono_ms() < end;)
		fx_nodes_round(one, 1, 10);
	assert_int_equal(n->npublished, before + 1);
}

static void test_feed(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	uint8_t pa[DIGEST_LEN], pb[DIGEST_LEN];
	cJSON *st, *lag;

	assert_true(repl_mirror_to(f->a.repl, "portland"));
	assert_false(repl_mirror_to(f->a.repl, "paloalto"));
	assert_false(repl_mirror_to(f->a.repl, NULL));
	assert_false(repl_mirror_to(f->b.repl, "paloalto"));
	run_until(f, both, 2, leased, "the mirror subscribes");
	assert_true(fed(f)->lease_until_ms <=
	            clock_mono_ms() + MIRROR_LEASE_MS);
	make_user(&f->a, "ann");
	assert_int_equal(fx_node_grants(&f->a, 3, WAIT_MS), 0);
	run_until(f, both, 2, level, "the mirror level with the frontend");
	/* the user whole, the grants as stamps: no grant at the mirror, the
	 * same public state */
	assert_int_equal(held(f), 4);
	assert_int_equal(ops_count(f->b.o, CF_USERS, (int64_t)time(NULL)), 1);
	assert_int_equal(ops_count(f->b.o, CF_GRANTS, (int64_t)time(NULL)), 0);
	assert_int_equal(ops_count(f->a.o, CF_GRANTS, (int64_t)time(NULL)), 3);
	ops_digest_public(f->a.o, pa);
	ops_digest_public(f->b.o, pb);
	assert_memory_equal(pa, pb, DIGEST_LEN);
	assert_memory_not_equal(pa, (uint8_t[DIGEST_LEN]){0}, DIGEST_LEN);
	assert_memory_not_equal(ops_digest(f->a.o), ops_digest(f->b.o),
	                        DIGEST_LEN);
	/* the frontend's status of its mirror */
	st = status_of(f->a.repl, "portland", clock_mono_ms());
	assert_string_equal(cJSON_GetObjectItem(st, "role")->valuestring,
	                    "mirror");
	assert_true(flag(st, "connected"));
	assert_true(number(st, "lag_ops") == 0);
	assert_true(flag(st, "digest_public_equal"));
	cJSON_Delete(st);
	/* the mirror's view: fed by paloalto, nothing lacking */
	st = cJSON_CreateObject();
	repl_mirror_lag(f->b.repl, st, clock_mono_ms());
	lag = cJSON_GetObjectItem(st, "mirror_lag");
	assert_int_equal(cJSON_GetArraySize(lag), 1);
	assert_string_equal(
	        cJSON_GetObjectItem(cJSON_GetArrayItem(lag, 0), "site")
	                ->valuestring,
	        "paloalto");
	assert_true(flag(cJSON_GetArrayItem(lag, 0), "fed"));
	assert_true(number(cJSON_GetArrayItem(lag, 0), "ops") == 0);
	cJSON_Delete(st);
	/* a frontend shows no mirror_lag */
	st = cJSON_CreateObject();
	repl_mirror_lag(f->a.repl, st, clock_mono_ms());
	assert_null(cJSON_GetObjectItem(st, "mirror_lag"));
	cJSON_Delete(st);
}

static bool held_four(struct fx_pair *f)
{
	return held(f) == 4;
}

/* Only paloalto's loop, for ms: what portland sent before it stopped is
 * taken. */
static void frontend_alone(struct fx_pair *f, int ms)
{
	struct fx_node *one[] = {&f->a};

	for (uint64_t end = clock_mono_ms() + (uint64_t)ms;
	     clock_mono_ms() < end;)
		fx_nodes_round(one, 1, 5);
}

/* Only portland's input: no tick, so no new subscription. */
static void mirror_takes(struct fx_pair *f, cond_fn cond, int ms)
{
	zmq_pollitem_t items[16];
	int k = repl_pollitems(f->b.repl, items, 16);

	for (uint64_t end = clock_mono_ms() + (uint64_t)ms;
	     clock_mono_ms() < end && !(cond && cond(f));) {
		zmq_poll(items, k, 5);
		repl_handle(f->b.repl);
	}
}

static void test_lag_and_lease(void **state)
{
	struct fx_pair *f = *state;
	struct fx_node *both[] = {&f->a, &f->b};
	struct repl_peer *p = fed(f);
	cJSON *st;

	run_until(f, both, 2, leased, "the mirror subscribes");
	/* the mirror stops; the frontend makes 4 grants, fed to it */
	assert_int_equal(fx_node_grants(&f->a, 4, WAIT_MS), 0);
	frontend_alone(f, 100);
	assert_int_equal(repl_mirror_lag_ops(f->a.repl, p), 4);
	st = status_of(f->a.repl, "portland", p->lease_until_ms - 1);
	assert_true(flag(st, "connected"));
	assert_true(number(st, "lag_ops") == 4);
	cJSON_Delete(st);
	/* no mirror_sub for MIRROR_LEASE_MS: the lease runs out */
	st = status_of(f->a.repl, "portland", p->lease_until_ms);
	assert_false(flag(st, "connected"));
	cJSON_Delete(st);
	/* as if it had: the next grants are not fed */
	p->lease_until_ms = clock_mono_ms();
	assert_int_equal(fx_node_grants(&f->a, 2, WAIT_MS), 0);
	mirror_takes(f, held_four, WAIT_MS);
	assert_int_equal(held(f), 4);
	mirror_takes(f, NULL, 300);
	assert_int_equal(held(f), 4);
	/* it runs again: subscribes, finds the gap, catches up */
	run_until(f, both, 2, level, "the mirror level again");
	assert_int_equal(held(f), 6);
	assert_true(p->lease_until_ms > clock_mono_ms());
}

/* The i-th operation n published (0-based), packed, and its stamp. */
static Grantd__V1__MirrorOp published(struct fx_node *n, int i, bool whole)
{
	Grantd__V1__MirrorOp e = GRANTD__V1__MIRROR_OP__INIT;
	size_t off = 0, len;
	const uint8_t *p;

	for (;; i--) {
		assert_true(off + 4 <= n->published.len);
		p = (const uint8_t *)n->published.p + off;
		len = (size_t)p[0] << 24 | (size_t)p[1] << 16 |
		      (size_t)p[2] << 8 | p[3];
		if (i == 0)
			break;
		off += 4 + len;
	}
	Grantd__V1__Op *op = grantd__v1__op__unpack(NULL, len, p + 4);
	assert_non_null(op);
	e.origin = n->site;
	e.epoch = op->epoch, e.has_epoch = 1;
	e.seq = op->seq, e.has_seq = 1;
	e.hlc = op->hlc, e.has_hlc = 1;
	if (whole) {
		e.op = (ProtobufCBinaryData){len, (uint8_t *)p + 4};
		e.has_op = 1;
	}
	grantd__v1__op__free_unpacked(op, NULL);
	return e;
}

static void test_what_a_mirror_takes(void **state)
{
	struct fx_pair *f = *state;
	struct repl *r = f->b.repl;
	Grantd__V1__MirrorOps mo = GRANTD__V1__MIRROR_OPS__INIT;
	Grantd__V1__MirrorOp e[6], *pe[6];
	uint64_t dropped = repl_dropped_total(r), t;
	int64_t now = (int64_t)time(NULL);

	/* paloalto: grant, grant, user, grant (portland never subscribed:
	 * nothing was fed) */
	assert_int_equal(fx_node_grants(&f->a, 2, WAIT_MS), 0);
	make_user(&f->a, "ann");
	assert_int_equal(fx_node_grants(&f->a, 1, WAIT_MS), 0);
	assert_int_equal(held(f), 0);
	e[0] = published(&f->a, 0, false); /* a stamp: taken */
	e[1] = published(&f->a, 1, true); /* hidden, sent whole */
	e[2] = published(&f->a, 2, true); /* visible, whole: applied */
	e[3] = published(&f->a, 3, true);
	e[3].seq = 5; /* its stamp is not its own */
	e[4] = published(&f->a, 3, false);
	e[4].origin = "portland"; /* not the link's site */
	e[5] = published(&f->a, 3, false);
	e[5].has_seq = 0, e[5].seq = 0; /* no stamp */
	for (int i = 0; i < 6; i++)
		pe[i] = &e[i];
	mo.ops = pe;
	mo.n_ops = 6;
	repl_mirror_apply_ops(r, &r->peers[0], &mo, 0, clock_mono_ms());
	assert_int_equal(writer_commit(f->b.w, &t), 0);
	assert_int_equal(held(f), 3);
	assert_int_equal(ops_count(f->b.o, CF_USERS, now), 1);
	assert_int_equal(ops_count(f->b.o, CF_GRANTS, now), 0);
	assert_int_equal(r->drops[DROP_MIRROR_HIDDEN], 1);
	assert_int_equal(r->drops[DROP_FORGED_ORIGIN], 1);
	assert_int_equal(repl_dropped_total(r), dropped + 4);
	/* the stamp of the last one: level */
	e[0] = published(&f->a, 3, false);
	mo.n_ops = 1;
	repl_mirror_apply_ops(r, &r->peers[0], &mo, 0, clock_mono_ms());
	assert_int_equal(writer_commit(f->b.w, &t), 0);
	assert_int_equal(held(f), 4);
	assert_int_equal(ops_count(f->b.o, CF_GRANTS, now), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_feed, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_lag_and_lease, setup,
	                                        fx_pair_teardown),
	        cmocka_unit_test_setup_teardown(test_what_a_mirror_takes, setup,
	                                        fx_pair_teardown),
	};

	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
